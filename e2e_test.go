package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// corralProc is the corral binary running under a test.
type corralProc struct {
	t      *testing.T
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *bufio.Reader
	dir    string // fakeserver state directory
	url    string // the MCP endpoint, once known (HTTP mode)

	mu     sync.Mutex
	log    []string
	logged chan struct{} // closed and replaced at every new log line
	exited chan struct{}
	err    error // from Wait; set before exited is closed
}

// startCorral writes the config (FAKE and STATE replaced as in startGateway)
// and runs corral with it and the extra arguments. corral is killed, if
// still running, when the test ends, and the test fails if any process of
// its backends is left.
func startCorral(t *testing.T, configJSON string, args ...string) *corralProc {
	t.Helper()
	return startCorralUnder(t, nil, nil, configJSON, args...)
}

// startCorralUnder is startCorral with corral's command line run by the
// command wrap (such as a shell or unshare), if not empty, with the
// variables env added to the environment. The wrapper gets a process group of
// its own, killed whole when the test ends.
func startCorralUnder(t *testing.T, wrap, env []string, configJSON string, args ...string) *corralProc {
	t.Helper()
	dir := stateDir(t)
	path := writeConfig(t, configJSON, dir)
	return startCorralIn(t, dir, path, wrap, env, args...)
}

// startCorralAs is startCorral with corral run as the user uid, which this
// test process, running as root, makes able to read the config and the
// binaries and to write the state directory. Only root can change user: for
// anyone else it runs corral as that user, and says so in the test's log.
func startCorralAs(t *testing.T, uid int, configJSON string, args ...string) *corralProc {
	t.Helper()
	dir := stateDir(t)
	path := writeConfig(t, configJSON, dir)
	if os.Getuid() != 0 {
		t.Logf("not root: corral runs as this user, not as user %d", uid)
		return startCorralIn(t, dir, path, nil, nil, args...)
	}
	for name, mode := range map[string]os.FileMode{
		dir: 0o777, filepath.Dir(dir): 0o755, path: 0o644, filepath.Dir(path): 0o755,
		filepath.Dir(filepath.Dir(path)): 0o755, filepath.Dir(corralBin): 0o755,
	} {
		if err := os.Chmod(name, mode); err != nil {
			t.Fatal(err)
		}
	}
	id := strconv.Itoa(uid)
	wrap := []string{"setpriv", "--reuid=" + id, "--regid=" + id, "--clear-groups"}
	return startCorralIn(t, dir, path, wrap, nil, args...)
}

// startCorralIn starts corral with the config at path and the state
// directory dir, as startCorralUnder says.
func startCorralIn(t *testing.T, dir, path string, wrap, env []string, args ...string) *corralProc {
	t.Helper()
	argv := append(append(append([]string{}, wrap...), corralBin, "-config", path), args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	if len(wrap) > 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	}
	stdin, _ := cmd.StdinPipe()
	// A pipe of our own for stdout: Wait would close a StdoutPipe's read
	// end, and a test may read what corral wrote after it exited.
	stdout, stdoutW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = stdoutW
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stdoutW.Close()
	t.Cleanup(func() { stdout.Close() })
	c := &corralProc{t: t, cmd: cmd, stdin: stdin, stdout: bufio.NewReader(stdout), dir: dir,
		logged: make(chan struct{}), exited: make(chan struct{})}
	logDone := make(chan struct{})
	go func() {
		defer close(logDone)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			c.mu.Lock()
			c.log = append(c.log, sc.Text())
			close(c.logged)
			c.logged = make(chan struct{})
			c.mu.Unlock()
		}
	}()
	go func() {
		<-logDone // Wait must not close the pipe under the reader
		c.err = cmd.Wait()
		close(c.exited)
	}()
	t.Cleanup(func() {
		if len(wrap) > 0 {
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
		cmd.Process.Kill()
		<-c.exited
		c.mu.Lock()
		removeLoggedCgroups(t, c.log)
		c.mu.Unlock()
		if t.Failed() {
			c.mu.Lock()
			t.Logf("corral's log:\n%s", strings.Join(c.log, "\n"))
			c.mu.Unlock()
		}
		requireGone(t, dir)
	})
	return c
}

// waitLog waits until a log line matches re and returns its submatches.
func (c *corralProc) waitLog(re string) []string {
	c.t.Helper()
	rx := regexp.MustCompile(re)
	var m []string
	c.scanLog(fmt.Sprintf("logging %q", re), func(line string) bool {
		m = rx.FindStringSubmatch(line)
		return m != nil
	})
	return m
}

// scanLog calls done with each of corral's log lines in order, from the
// first, until it returns true; it waits for new lines meanwhile. It fails
// the test if corral exits first, or after 30s.
func (c *corralProc) scanLog(what string, done func(line string) bool) {
	c.t.Helper()
	timeout := time.After(30 * time.Second)
	for i := 0; ; {
		c.mu.Lock()
		lines, logged := c.log[i:], c.logged
		c.mu.Unlock()
		for _, line := range lines {
			i++
			if done(line) {
				return
			}
		}
		select {
		case <-logged:
		case <-c.exited:
			c.t.Fatalf("corral exited (%v) before %s", c.err, what)
		case <-timeout:
			c.t.Fatalf("corral did not finish %s within 30s", what)
		}
	}
}

// waitHTTP waits until corral serves HTTP and the given number of distinct
// servers have become ready.
func (c *corralProc) waitHTTP(servers int) {
	c.t.Helper()
	c.url = c.waitLog(`serving MCP over Streamable HTTP.* url=(\S+)`)[1]
	rx := regexp.MustCompile(`msg=state .*server=(\S+) .*to=ready`)
	ready := map[string]bool{}
	c.scanLog(fmt.Sprintf("starting %d servers", servers), func(line string) bool {
		if m := rx.FindStringSubmatch(line); m != nil {
			ready[m[1]] = true
		}
		return len(ready) >= servers
	})
}

// waitExit waits, at most d, for corral to exit and returns its exit code.
func (c *corralProc) waitExit(d time.Duration) int {
	c.t.Helper()
	select {
	case <-c.exited:
	case <-time.After(d):
		c.t.Fatalf("corral did not exit within %s", d)
	}
	if c.err == nil {
		return 0
	}
	if ee, ok := c.err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	c.t.Fatal(c.err)
	return -1
}

func TestSIGTERMLetsCallsFinishAndLeavesNothingBehind(t *testing.T) {
	t.Parallel()
	c := startCorral(t, `{"listen":"127.0.0.1:0","stopGrace":"200ms","killGrace":"300ms","shutdownTimeout":"5s","mcpServers":{
		"stubborn": {"command":"FAKE","args":["-state","STATE","-ignore-stdin-close","-ignore-sigterm","-grandchild","group","-grandchild-ignores-sigterm"]},
		"plain": {"command":"FAKE","args":["-state","STATE","-prefix","p_"]}
	}}`)
	c.waitHTTP(2)
	cl := connect(t, c.url)
	// The call is held until just after SIGTERM, so it is in flight then
	// however loaded the machine, and can finish at once.
	release := t.TempDir() + "/release"
	inFlight := make(chan *wireMsg, 1)
	go func() { inFlight <- cl.callTool("1", "p_wait", fmt.Sprintf(`{"file":%q}`, release)) }()
	waitFor(t, 10*time.Second, "the call to reach the server", func() bool {
		for _, s := range fakeProcesses(t, c.dir) {
			for _, e := range fakeEvents(t, c.dir, s.PID) {
				if e.Tool == "p_wait" {
					return true
				}
			}
		}
		return false
	})
	start := time.Now()
	c.cmd.Process.Signal(syscall.SIGTERM)
	os.WriteFile(release, nil, 0o600)
	select {
	case m := <-inFlight:
		if got := toolText(t, m); got != "released" {
			t.Errorf("call in flight at SIGTERM answered %q, want it to finish", got)
		}
	case <-time.After(30 * time.Second): // its POST failed, which the client reported
		t.Fatal("the call in flight at SIGTERM got no answer")
	}
	// The documented bound: shutdownTimeout + stopGrace + killGrace, plus slack
	// for a loaded machine.
	if code := c.waitExit(5*time.Second + 500*time.Millisecond + 10*time.Second); code != 0 {
		t.Errorf("corral exited with %d, want 0", code)
	}
	t.Logf("corral exited %s after SIGTERM", time.Since(start).Round(time.Millisecond))
	requireGone(t, c.dir)
}

func TestSecondSignalStopsAtOnce(t *testing.T) {
	t.Parallel()
	// Waits far longer than the test allows: only the second signal ends them.
	c := startCorral(t, `{"listen":"127.0.0.1:0","stopGrace":"1h","killGrace":"1h","mcpServers":{
		"stubborn": {"command":"FAKE","args":["-state","STATE","-ignore-stdin-close","-ignore-sigterm"]}
	}}`)
	c.waitHTTP(1)
	c.cmd.Process.Signal(syscall.SIGTERM)
	c.waitLog(`shutting down`)
	c.cmd.Process.Signal(syscall.SIGTERM)
	if code := c.waitExit(20 * time.Second); code != 0 {
		t.Errorf("corral exited with %d, want 0", code)
	}
	requireGone(t, c.dir)
}

func TestStdioFrontEndServesOneSessionAndExitsWhenStdinCloses(t *testing.T) {
	t.Parallel()
	c := startCorral(t, `{"mcpServers":{
		"a": {"command":"FAKE","args":["-state","STATE","-name","a","-prefix","a_"]},
		"b": {"command":"FAKE","args":["-state","STATE","-name","b","-prefix","b_"]}
	}}`, "-stdio")
	send := func(line string) {
		t.Helper()
		if _, err := io.WriteString(c.stdin, line+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2024-11-05","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	if line := string(readLine(t, c.stdout)); !strings.Contains(line, `"protocolVersion":"2024-11-05"`) || !strings.Contains(line, `"id":1`) {
		t.Fatalf("initialize answered %s", line)
	}
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	// Two calls at once; the slower one was sent first.
	send(`{"jsonrpc":"2.0","id":"slow","method":"tools/call","params":{"name":"a_echo","arguments":{"text":"slow","delay_ms":300}}}`)
	send(`{"jsonrpc":"2.0","id":"fast","method":"tools/call","params":{"name":"b_whoami","arguments":{}}}`)
	send(`not json`)
	// Answers, with list_changed notifications in between as the servers'
	// tools join the catalog.
	var got []string
	for len(got) < 3 {
		if line := string(readLine(t, c.stdout)); !strings.Contains(line, "notifications/tools/list_changed") {
			got = append(got, line)
		}
	}
	if !strings.Contains(got[0], `"id":null`) || !strings.Contains(got[0], fmt.Sprint(codeParseError)) {
		t.Errorf("first line = %s, want the parse error for the bad line", got[0])
	}
	if !strings.Contains(got[1], `"id":"fast"`) || !strings.Contains(got[1], `\"name\":\"b\"`) {
		t.Errorf("second line = %s, want the fast call's answer from b", got[1])
	}
	if !strings.Contains(got[2], `"id":"slow"`) || !strings.Contains(got[2], `"text":"slow"`) {
		t.Errorf("third line = %s, want the slow call's answer", got[2])
	}
	c.stdin.Close()
	if code := c.waitExit(20 * time.Second); code != 0 {
		t.Errorf("corral exited with %d after stdin closed, want 0", code)
	}
	requireGone(t, c.dir)
}

func TestExitCodes(t *testing.T) {
	t.Parallel()
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { busy.Close() }) // parallel subtests run after this function returns
	for _, tc := range []struct {
		name     string
		config   string
		args     []string
		wantCode int
		wantLog  string
	}{
		{"a JSON syntax error is a config error", `{"mcpServers": {"a": {"command": "x" "args": []}}}`, nil, 2, `config.json:1:`},
		{"a misspelt field is a config error", `{"mcpServers": {"a": {"comand": "x"}}}`, nil, 2, `did you mean "command"`},
		{"a taken port cannot be served", `{"listen":"` + busy.Addr().String() + `","mcpServers":{"a":{"command":"FAKE","args":["-state","STATE"]}}}`, nil, 1, "address already in use"},
		{"an unknown flag is a usage error", `{}`, []string{"-nope"}, 2, "flag provided but not defined"},
		{"-status-listen without -stdio is a usage error", `{}`, []string{"-status-listen", "127.0.0.1:0"}, 2, "-status-listen is for -stdio"},
		{"-status-listen beyond loopback is refused", `{"mcpServers":{"a":{"command":"FAKE","args":["-state","STATE"]}}}`, []string{"-stdio", "-status-listen", "0.0.0.0:0"}, 2, "not a loopback address"},
		{"a -listen port over 65535 is a usage error", `{"mcpServers":{"a":{"command":"FAKE","args":["-state","STATE"]}}}`, []string{"-listen", "127.0.0.1:99999"}, 2, "-listen: invalid address \"127.0.0.1:99999\": the port must be a number from 0 to 65535"},
		{"a listen port over 65535 is a config error", `{"listen":"127.0.0.1:99999","mcpServers":{"a":{"command":"FAKE","args":["-state","STATE"]}}}`, []string{"-check"}, 2, "listen: invalid address \"127.0.0.1:99999\": the port must be a number from 0 to 65535"},
		{"-profile without -stdio is a usage error", `{"profiles":{"p":{"servers":{"a":{}}}},"mcpServers":{"a":{"command":"FAKE","args":["-state","STATE"]}}}`, []string{"-profile", "p"}, 2, "-profile needs -stdio"},
		{"-profile naming no profile is a config error", `{"profiles":{"p":{"servers":{"a":{}}}},"mcpServers":{"a":{"command":"FAKE","args":["-state","STATE"]}}}`, []string{"-stdio", "-profile", "q"}, 2, `-profile "q": `},
		{"-accept-pins naming no pinned server is a usage error", `{"mcpServers":{"a":{"command":"FAKE","args":["-state","STATE"]}}}`, []string{"-accept-pins", "a/echo"}, 2, `config.json has no server "a" with "pin" set`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := startCorral(t, tc.config, tc.args...)
			if code := c.waitExit(20 * time.Second); code != tc.wantCode {
				t.Errorf("exit code = %d, want %d", code, tc.wantCode)
			}
			c.mu.Lock()
			log := strings.Join(c.log, "\n")
			c.mu.Unlock()
			if !strings.Contains(log, tc.wantLog) {
				t.Errorf("stderr = %q, want it to contain %q", log, tc.wantLog)
			}
			if procs := fakeProcesses(t, c.dir); len(procs) != 0 {
				t.Errorf("%d servers were started; want none when corral cannot serve", len(procs))
			}
		})
	}
}

func TestCallsCutOffAtShutdownGetAnError(t *testing.T) {
	t.Parallel()
	c := startCorral(t, `{"listen":"127.0.0.1:0","shutdownTimeout":"300ms","stopGrace":"100ms","mcpServers":{
		"a": {"command":"FAKE","args":["-state","STATE"]}
	}}`)
	c.waitHTTP(1)
	cl := connect(t, c.url)
	inFlight := make(chan *wireMsg, 1)
	go func() { inFlight <- cl.callTool(`"long"`, "sleep", `{"ms":600000}`) }()
	waitFor(t, 10*time.Second, "the call to reach the server", func() bool {
		for _, s := range fakeProcesses(t, c.dir) {
			for _, e := range fakeEvents(t, c.dir, s.PID) {
				if e.Tool == "sleep" {
					return true
				}
			}
		}
		return false
	})
	c.cmd.Process.Signal(syscall.SIGTERM)
	msg := <-inFlight
	if msg.Error == nil || !strings.Contains(msg.Error.Message, "shutting down") || string(msg.ID) != `"long"` {
		t.Errorf("call cut off at shutdown = %+v, want an error with its ID saying corral is shutting down", msg)
	}
	if code := c.waitExit(15 * time.Second); code != 0 {
		t.Errorf("corral exited with %d, want 0", code)
	}
	requireGone(t, c.dir)
}

func TestCheckPrintsTheResolvedConfigOrEveryError(t *testing.T) {
	t.Parallel()
	ok := startCorral(t, `{"mcpServers":{"a": {"command":"FAKE","args":["-state","STATE"],"env":{"TOKEN":"s3cret"}}}}`, "-check")
	if code := ok.waitExit(20 * time.Second); code != 0 {
		t.Fatalf("-check on a good config exited %d", code)
	}
	out, _ := io.ReadAll(ok.stdout)
	for _, want := range []string{": ok", `"restartDelay": "1s"`, `"maxInFlight": 1024`, `"TOKEN": "****"`} {
		if !strings.Contains(string(out), want) {
			t.Errorf("-check output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(string(out), "s3cret") {
		t.Errorf("-check printed a secret env value:\n%s", out)
	}
	if procs := fakeProcesses(t, ok.dir); len(procs) != 0 {
		t.Errorf("-check started %d servers", len(procs))
	}

	bad := startCorral(t, `{"maxRestarts":-1,"mcpServers":{"a": {"comand":"x"}, "b": {"command":"x","restartDely":"1s"}}}`, "-check")
	if code := bad.waitExit(20 * time.Second); code != 2 {
		t.Errorf("-check on a bad config exited %d, want 2", code)
	}
	bad.mu.Lock()
	log := strings.Join(bad.log, "\n")
	bad.mu.Unlock()
	for _, want := range []string{`maxRestarts: must not be negative`, `mcpServers.a: unknown field "comand"`, `mcpServers.b: unknown field "restartDely"; did you mean "restartDelay"?`} {
		if !strings.Contains(log, want) {
			t.Errorf("-check errors lack %q:\n%s", want, log)
		}
	}
}

func TestCorralListedInItsOwnConfigRefusesToNest(t *testing.T) {
	t.Parallel()
	// The config lists corral itself, on this very config, as a desktop
	// client's file does: the corral started as server "self" must refuse
	// to run it again, and start nothing.
	dir := stateDir(t)
	path := filepath.Join(t.TempDir(), "config.json")
	// A short startTimeout ends the first start of a corral that does not
	// refuse (its own server "self" never gets ready) within the test.
	config := fmt.Sprintf(`{"listen":"127.0.0.1:0","startTimeout":"5s","mcpServers":{
		"a": {"command":%q,"args":["-state",%q,"-name","a"]},
		"self": {"command":%q,"args":["-stdio","-config",%q]}}}`, fakeserverBin, dir, corralBin, path)
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { requireGone(t, path) }) // every corral on this config, after the first is gone
	c := startCorralIn(t, dir, path, nil, nil)
	// The error logged for the failed first start holds the server's last
	// stderr line.
	m := c.waitLog(`msg="server did not start" server=self (.*)`)
	if !strings.Contains(m[1], `mcpServers.self: this server is corral itself`) || !strings.Contains(m[1], `running it would start corral inside corral without end`) {
		t.Errorf("corral run as its own server: %s; want it refused, saying why", m[1])
	}
	c.waitLog(`msg=state server=a from=starting to=ready`) // its state file is written
	if procs := fakeProcesses(t, dir); len(procs) != 1 {
		t.Errorf("server a was started %d times, want once: the nested corral must start nothing", len(procs))
	}
	c.cmd.Process.Signal(syscall.SIGTERM)
	if code := c.waitExit(20 * time.Second); code != 0 {
		t.Errorf("corral exited %d, want 0", code)
	}
}
