package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// requireNetSandbox skips the test unless this process can start a process
// in the namespaces of a sandbox without network.
func requireNetSandbox(t *testing.T) {
	t.Helper()
	if err := probeNamespaces(os.Geteuid() == 0); err != nil {
		t.Skipf("this machine cannot give a server a network namespace: %v", err)
	}
}

// requireLandlock skips the test unless the kernel has Landlock.
func requireLandlock(t *testing.T) {
	t.Helper()
	if _, err := landlockABI(); err != nil {
		t.Skipf("filesystem rules need Landlock: %v", err)
	}
}

// hostListener listens on 127.0.0.1 of this network namespace, accepting
// and closing every connection until the test ends, and returns its address.
func hostListener(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			conn.Close()
		}
	}()
	t.Cleanup(func() { ln.Close(); <-done })
	return ln.Addr().String()
}

// netProbe calls tool, a fakeserver's net_probe, with address.
func netProbe(t *testing.T, c *client, tool, address string) (dial, loopback string) {
	t.Helper()
	text := toolText(t, c.callTool(`"probe"`, tool, fmt.Sprintf(`{"address":%q}`, address)))
	var r struct{ Dial, Loopback string }
	if err := json.Unmarshal([]byte(text), &r); err != nil {
		t.Fatalf("%s answered %q", tool, text)
	}
	return r.Dial, r.Loopback
}

// serverPID returns the PID of the process serving the fakeserver whose
// tools have prefix.
func serverPID(t *testing.T, c *client, prefix string) int {
	t.Helper()
	var who struct{ PID int }
	if text := toolText(t, c.callTool(`"who"`, prefix+"whoami", `{}`)); json.Unmarshal([]byte(text), &who) != nil || who.PID == 0 {
		t.Fatalf("%swhoami answered %q", prefix, text)
	}
	return who.PID
}

func TestSandboxWithoutNetworkReachesNothingButItsOwnLoopback(t *testing.T) {
	t.Parallel()
	requireNetSandbox(t)
	addr := hostListener(t)
	tg := startGateway(t, `{"mcpServers":{
		"boxed": {"command":"FAKE","args":["-state","STATE","-lifetime","2m","-prefix","boxed_"],"sandbox":{"network":false}},
		"open":  {"command":"FAKE","args":["-state","STATE","-lifetime","2m","-prefix","open_"]}}}`)
	c := connect(t, tg.url)

	if dial, _ := netProbe(t, c, "open_net_probe", addr); dial != "ok" {
		t.Fatalf("the server without a sandbox could not dial %s: %s", addr, dial)
	}
	dial, loopback := netProbe(t, c, "boxed_net_probe", addr)
	if dial == "ok" {
		t.Errorf("the server without network dialled %s, the host's loopback", addr)
	}
	if loopback != "ok" {
		t.Errorf("the server without network cannot reach its own loopback (is lo up?): %s", loopback)
	}
	// It runs, as itself (the shim executed it in place), in another
	// network namespace than corral's.
	pid := serverPID(t, c, "boxed_")
	theirs, err1 := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", pid))
	ours, err2 := os.Readlink("/proc/self/ns/net")
	if err1 != nil || err2 != nil || theirs == ours {
		t.Errorf("the server's network namespace is %q (%v), corral's %q (%v): want another", theirs, err1, ours, err2)
	}
}

func TestSandboxWithoutNetworkWorksWhereCorralIsNotRoot(t *testing.T) {
	t.Parallel()
	requireNetSandbox(t)
	if os.Getuid() != 0 {
		t.Log("not root: corral runs as this user")
	}
	addr := hostListener(t)
	c := startCorralAs(t, sandboxTestUID, `{"listen":"127.0.0.1:0","mcpServers":{
		"boxed": {"command":"FAKE","args":["-state","STATE","-lifetime","2m","-prefix","boxed_"],"sandbox":{"network":false}}}}`)
	c.waitHTTP(1)
	cl := connect(t, c.url)
	dial, loopback := netProbe(t, cl, "boxed_net_probe", addr)
	if dial == "ok" || loopback != "ok" {
		t.Errorf("net_probe without network, corral not root: dial %q (want an error), loopback %q (want ok)", dial, loopback)
	}
	// The server runs as corral's user, in a user namespace of its own.
	pid := serverPID(t, cl, "boxed_")
	status, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if want := fmt.Sprintf("\nUid:\t%d\t", sandboxTestUID); os.Getuid() == 0 && !strings.Contains(string(status), want) {
		t.Errorf("the server's status lacks %q:\n%s", want, status)
	}
	// The shim's ambient CAP_NET_ADMIN, which it needed for its loopback,
	// does not reach the server.
	for _, want := range []string{"\nCapEff:\t0000000000000000\n", "\nCapAmb:\t0000000000000000\n"} {
		if !strings.Contains(string(status), want) {
			t.Errorf("the server's status lacks %q:\n%s", want, status)
		}
	}
	theirs, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/user", pid))
	ours, _ := os.Readlink("/proc/self/ns/user")
	if os.Getuid() == 0 && theirs == ours {
		t.Errorf("the server runs in corral's user namespace %s; want one of its own", ours)
	}
}

// sandboxTestUID is the user the sandbox tests run a corral as, to see a
// sandbox built where corral is not root. No other tests run processes as
// this user.
const sandboxTestUID = 64998

// noNewPrivs reads NoNewPrivs of process pid's status.
func noNewPrivs(t *testing.T, pid int) string {
	t.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(status)) {
		if v, ok := strings.CutPrefix(line, "NoNewPrivs:"); ok {
			return strings.TrimSpace(v)
		}
	}
	t.Skip("this kernel's /proc/PID/status has no NoNewPrivs line")
	return ""
}

func TestSandboxSetsNoNewPrivileges(t *testing.T) {
	t.Parallel()
	tg := startGateway(t, `{"mcpServers":{
		"boxed": {"command":"FAKE","args":["-state","STATE","-lifetime","2m","-prefix","boxed_"],"sandbox":{"noNewPrivileges":true}},
		"open":  {"command":"FAKE","args":["-state","STATE","-lifetime","2m","-prefix","open_"]}}}`)
	c := connect(t, tg.url)
	if got := noNewPrivs(t, serverPID(t, c, "boxed_")); got != "1" {
		t.Errorf("NoNewPrivs of the server with noNewPrivileges = %s, want 1", got)
	}
	if got := noNewPrivs(t, serverPID(t, c, "open_")); got != "0" {
		t.Errorf("NoNewPrivs of the server without a sandbox = %s, want 0", got)
	}
}

func TestSandboxFilesystemRulesAreEnforcedWithLandlock(t *testing.T) {
	t.Parallel()
	requireLandlock(t)
	rw, ro, outside := t.TempDir(), t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(ro, "data"), []byte("readable"), 0o644); err != nil {
		t.Fatal(err)
	}
	sandbox, _ := json.Marshal(SandboxConfig{ReadOnly: []string{"/"}, Writable: []string{"STATE", rw}})
	tg := startGateway(t, `{"mcpServers":{
		"boxed": {"command":"FAKE","args":["-state","STATE","-lifetime","2m","-prefix","boxed_"],"sandbox":`+string(sandbox)+`},
		"open":  {"command":"FAKE","args":["-state","STATE","-lifetime","2m","-prefix","open_"]}}}`)
	c := connect(t, tg.url)
	write := func(tool, path string) string {
		return toolText(t, c.callTool(`"w"`, tool, fmt.Sprintf(`{"path":%q,"text":"x"}`, path)))
	}
	for _, tc := range []struct {
		tool, path string
		want       string // a substring of the answer
	}{
		{"boxed_write_file", filepath.Join(rw, "f"), "written"},
		{"boxed_write_file", filepath.Join(ro, "f"), "permission denied"},
		{"boxed_write_file", filepath.Join(outside, "f"), "permission denied"},
		{"open_write_file", filepath.Join(outside, "g"), "written"},
	} {
		if got := write(tc.tool, tc.path); !strings.Contains(got, tc.want) {
			t.Errorf("%s %s = %q, want %q", tc.tool, tc.path, got, tc.want)
		}
	}
	if got := toolText(t, c.callTool(`"r"`, "boxed_read_file", fmt.Sprintf(`{"path":%q}`, filepath.Join(ro, "data")))); got != "readable" {
		t.Errorf("boxed_read_file under readOnly = %q, want %q", got, "readable")
	}
	if _, err := os.Stat(filepath.Join(outside, "f")); err == nil {
		t.Errorf("the sandboxed server created a file outside its writable paths")
	}
}

func TestSandboxFilesystemRulesWithoutLandlockRefuseTheServer(t *testing.T) {
	t.Parallel()
	dir := stateDir(t)
	spec := processSpec{
		name: "boxed", command: fakeserverBin, args: fakeArgs(dir), log: testLogger(t),
		sandbox: &SandboxConfig{ReadOnly: []string{"/"}, Writable: []string{dir}},
		sandboxHost: func() sandboxHost {
			return sandboxHost{root: true, landlockErr: syscall.ENOSYS}
		},
	}
	p, err := startProcess(spec)
	if err == nil {
		p.Stop(nil)
		t.Fatal("startProcess started a server whose filesystem rules cannot be enforced")
	}
	for _, want := range []string{`starting server "boxed"`, "sandbox.readOnly and sandbox.writable cannot be enforced", "function not implemented", "Landlock"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("startProcess error lacks %q: %v", want, err)
		}
	}
	if procs := fakeProcesses(t, dir); len(procs) != 0 {
		t.Errorf("%d processes started", len(procs))
	}
}

func TestShimReportsWhatItCannotApplyAndDoesNotRunTheServer(t *testing.T) {
	t.Parallel()
	requireLandlock(t)
	abi, _ := landlockABI()
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing")
	ran := filepath.Join(dir, "ran")
	// A path that was there when corral planned may be gone when the shim
	// applies the plan.
	spec, _ := json.Marshal(shimSpec{Path: "/bin/sh", Args: []string{"sh", "-c", "touch " + ran},
		Sandbox: &sandboxPlan{Server: "boxed", Landlock: abi, NoNewPrivs: true, ReadOnly: []string{"/"}, Writable: []string{dir, missing}}})
	cmd := exec.CommandContext(t.Context(), "/proc/self/exe", shimArg, string(spec))
	out, err := cmd.CombinedOutput()
	if code := cmd.ProcessState.ExitCode(); code != 126 {
		t.Errorf("the shim exited with %d (%v), want 126", code, err)
	}
	if want := `corral shim: sandbox: server "boxed": Landlock: allowing ` + missing + ": no such file or directory\n"; string(out) != want {
		t.Errorf("the shim wrote %q, want %q", out, want)
	}
	if _, err := os.Stat(ran); err == nil {
		t.Errorf("the shim ran the server")
	}
}

func TestCheckSaysWhatTheSandboxEnforcesHere(t *testing.T) {
	t.Parallel()
	c := startCorral(t, `{"mcpServers":{
		"boxed": {"command":"FAKE","args":["-state","STATE"],"sandbox":{"network":false,"readOnly":["/"],"writable":["/tmp"],"noNewPrivileges":true}},
		"open":  {"command":"FAKE","args":["-state","STATE"]}}}`, "-check")
	if code := c.waitExit(20 * time.Second); code != 0 {
		t.Fatalf("-check exited %d", code)
	}
	out, _ := io.ReadAll(c.stdout)
	var network, fs string
	switch err := probeNamespaces(os.Geteuid() == 0); {
	case err != nil:
		network = "network: REFUSED: "
	default:
		network = "network: enforced: a network namespace of its own, only loopback up"
	}
	switch abi, err := landlockABI(); {
	case err != nil:
		fs = "filesystem: REFUSED: "
	default:
		fs = fmt.Sprintf("filesystem: enforced: Landlock ABI %d", abi)
	}
	for _, want := range []string{"sandboxes, as enforced on this machine:\n", "  boxed: " + network, fs, "no_new_privs: on"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("-check output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(string(out), "open:") {
		t.Errorf("-check reports a sandbox for the server without one:\n%s", out)
	}
}

func TestReloadThatAddsASandboxRestartsTheServerInIt(t *testing.T) {
	t.Parallel()
	const server = `"s": {"command":"FAKE","args":["-state","STATE","-lifetime","2m","-prefix","s_"]`
	tg := startGateway(t, `{"mcpServers":{`+server+`}}}`)
	c := connect(t, tg.url)
	before := serverPID(t, c, "s_")
	next := strings.NewReplacer("FAKE", fakeserverBin, "STATE", tg.dir).Replace(`{"mcpServers":{` + server + `,"sandbox":{"noNewPrivileges":true}}}}`)
	cfg, err := ParseConfig("next.json", []byte(next), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r := tg.gw.Reload(cfg); fmt.Sprint(r.Changed) != "[s]" {
		t.Fatalf("Reload = %+v, want s changed", r)
	}
	waitFor(t, 10*time.Second, "the server to run again", func() bool {
		return tg.gw.backendList()[0].snapshot() == stateReady
	})
	after := serverPID(t, c, "s_")
	if after == before {
		t.Fatalf("the server was not restarted: PID %d", after)
	}
	if got := noNewPrivs(t, after); got != "1" {
		t.Errorf("NoNewPrivs of the server after the reload = %s, want 1", got)
	}
}

// BenchmarkSpawnWithSandbox measures the time from startProcess to the
// server's answer to initialize, without a sandbox and with each rule (the
// shim, here the test binary, runs before the server in each case but the
// first), the stop excluded.
func BenchmarkSpawnWithSandbox(b *testing.B) {
	no, yes := false, true
	for _, bc := range []struct {
		name string
		sb   *SandboxConfig
	}{
		{"none", nil},
		{"noNewPrivileges", &SandboxConfig{NoNewPrivileges: &yes}},
		{"network=false", &SandboxConfig{Network: &no}},
		{"filesystem", &SandboxConfig{ReadOnly: []string{"/"}, Writable: []string{os.TempDir()}}},
		{"all", &SandboxConfig{Network: &no, NoNewPrivileges: &yes, ReadOnly: []string{"/"}, Writable: []string{os.TempDir()}}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			dir := stateDir(b)
			spec := processSpec{name: "fake", command: fakeserverBin, args: fakeArgs(dir), sandbox: bc.sb,
				stopGrace: time.Second, killGrace: time.Second, pipeDrain: 10 * time.Millisecond, log: slog.New(slog.DiscardHandler)}
			for i := 0; i < b.N; i++ {
				p, err := startProcess(spec)
				if err != nil {
					b.Skipf("cannot start the server with this sandbox here: %v", err)
				}
				io.WriteString(p.stdin, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"b","version":"1"}}}`+"\n")
				line, err := bufio.NewReader(p.stdout).ReadBytes('\n')
				b.StopTimer()
				p.Stop(nil)
				if err != nil {
					b.Fatalf("no answer to initialize: %v; stderr: %s", err, p.tail.last())
				}
				if !strings.Contains(string(line), `"result"`) {
					b.Fatalf("initialize answered %s", line)
				}
				b.StartTimer()
			}
		})
	}
}

func TestSandboxWithFilesystemRulesCannotSignalOutsideFromLandlockABI6(t *testing.T) {
	t.Parallel()
	abi, err := landlockABI()
	if err != nil || abi < 6 {
		t.Skipf("signal scoping needs Landlock ABI 6 (Linux 6.12), this kernel has %d (%v)", abi, err)
	}
	// A process outside the sandbox, which the sandboxed one tries to signal
	// (signal 0: a check, which kills nothing).
	outside := exec.CommandContext(t.Context(), "sleep", "60")
	if err := outside.Start(); err != nil {
		t.Fatal(err)
	}
	defer outside.Wait()
	defer outside.Process.Kill()
	for _, tc := range []struct {
		name string
		plan *sandboxPlan
		want string
	}{
		{"without filesystem rules it can", nil, "sent\n"},
		{"with filesystem rules it cannot", &sandboxPlan{Server: "boxed", Landlock: abi, NoNewPrivs: true, ReadOnly: []string{"/"}, Writable: []string{"/dev/null"}}, "refused\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec, _ := json.Marshal(shimSpec{Path: "/bin/sh", Args: []string{"sh", "-c", fmt.Sprintf("kill -0 %d 2>/dev/null && echo sent || echo refused", outside.Process.Pid)}, Sandbox: tc.plan})
			out, err := exec.CommandContext(t.Context(), "/proc/self/exe", shimArg, string(spec)).CombinedOutput()
			if string(out) != tc.want || err != nil {
				t.Errorf("kill -0 from the shim's server = %q, %v; want %q", out, err, tc.want)
			}
		})
	}
}

func TestSandboxedServerDiesWithACorralKilledWithSIGKILL(t *testing.T) {
	t.Parallel()
	requireNetSandbox(t)
	sandbox := `{"network":false,"noNewPrivileges":true}`
	if _, err := landlockABI(); err == nil {
		sandbox = `{"network":false,"noNewPrivileges":true,"readOnly":["/"],"writable":["STATE"]}`
	}
	// sleep, which neither reads its stdin nor writes: only the
	// parent-death signal ends it with corral. It never answers the
	// handshake, and the start timeout leaves it running until then.
	config := `{"listen":"127.0.0.1:0","startTimeout":"2m","mcpServers":{"boxed": {"command":"sleep","args":["120"],"sandbox":` + sandbox + `}}}`
	for _, tc := range []struct {
		name  string
		start func() *corralProc
	}{
		{"corral as root", func() *corralProc { return startCorral(t, config) }},
		{"corral as a user", func() *corralProc { return startCorralAs(t, sandboxTestUID, config) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.start()
			pid, _ := strconv.Atoi(c.waitLog(`msg=started server=boxed pid=(\d+)`)[1])
			t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
			waitFor(t, 10*time.Second, "the shim to execute sleep", func() bool {
				comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
				return string(comm) == "sleep\n"
			})
			// The shim executed the server with the parent-death signal
			// corral gave it, through its namespaces and capabilities.
			c.cmd.Process.Kill()
			waitFor(t, 10*time.Second, "the sandboxed server to die with corral", func() bool {
				gone, _, _ := procState(pid)
				return gone
			})
		})
	}
}

func TestNamespacesRefusedByTheKernelAreExplained(t *testing.T) {
	cmd := exec.Command("true")
	cmd.SysProcAttr = &syscall.SysProcAttr{}
	(&sandboxPlan{NewNet: true, NewUser: true}).procAttr(cmd.SysProcAttr)
	err := sandboxStartError(cmd, &os.SyscallError{Syscall: "fork/exec", Err: syscall.EPERM})
	for _, want := range []string{`sandbox with "network": false`, "corral is not root", "user namespace", "operation not permitted", "remove the rule"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("sandboxStartError(EPERM) = %v, lacks %q", err, want)
		}
	}
	other := &os.SyscallError{Syscall: "fork/exec", Err: syscall.EMFILE}
	if got := sandboxStartError(cmd, other); got != error(other) {
		t.Errorf("sandboxStartError(EMFILE) = %v, want it unchanged", got)
	}
}

func TestTopLevelSandboxReachesEveryServerButThoseThatTurnARuleOff(t *testing.T) {
	t.Parallel()
	tg := startGateway(t, `{"sandbox":{"noNewPrivileges":true},"mcpServers":{
		"boxed": {"command":"FAKE","args":["-state","STATE","-lifetime","2m","-prefix","boxed_"]},
		"open":  {"command":"FAKE","args":["-state","STATE","-lifetime","2m","-prefix","open_"],"sandbox":{"noNewPrivileges":false}}}}`)
	c := connect(t, tg.url)
	if got := noNewPrivs(t, serverPID(t, c, "boxed_")); got != "1" {
		t.Errorf("NoNewPrivs of the server under the top level's sandbox = %s, want 1", got)
	}
	if got := noNewPrivs(t, serverPID(t, c, "open_")); got != "0" {
		t.Errorf("NoNewPrivs of the server that turns it off = %s, want 0", got)
	}
}
