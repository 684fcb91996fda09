package main

import (
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// alive reports whether pid is a live process (not a zombie), from /proc.
func alive(pid int) bool {
	s, ok := readStat(pid)
	return ok && s.state != 'Z'
}

// sleepers returns the PIDs of the grandchildren fakeserver recorded in dir.
func sleepers(t *testing.T, dir string) []int {
	var pids []int
	for _, s := range fakeProcesses(t, dir) {
		if s.Role == "sleeper" {
			pids = append(pids, s.PID)
		}
	}
	return pids
}

const escapingServers = `
	"setsid": {"command":"FAKE","args":["-state","STATE","-name","setsid","-prefix","s_","-grandchild","setsid","-grandchild-ignores-sigterm"]},
	"daemon": {"command":"FAKE","args":["-state","STATE","-name","daemon","-prefix","d_","-grandchild","daemon","-grandchild-ignores-sigterm"]},
	"group":  {"command":"FAKE","args":["-state","STATE","-name","group","-prefix","g_","-grandchild","group","-ignore-sigterm","-ignore-stdin-close","-grandchild-ignores-sigterm"]}`

func TestStoppingBackendsKillsDescendantsThatLeftTheGroup(t *testing.T) {
	t.Parallel()
	tg := startGateway(t, `{"stopGrace":"100ms","killGrace":"100ms","mcpServers":{`+escapingServers+`}}`)
	if got := len(sleepers(t, tg.dir)); got != 3 {
		t.Fatalf("%d grandchildren recorded, want 3", got)
	}
	tg.gw.Stop(nil)
	requireGone(t, tg.dir) // reads /proc for every process marked with the test's state dir
}

func TestRestartKillsWhatTheCrashedServerLeftBehind(t *testing.T) {
	t.Parallel()
	tg := startGateway(t, `{"restartDelay":"10ms","mcpServers":{
		"a": {"command":"FAKE","args":["-state","STATE","-name","a","-grandchild","setsid","-grandchild-ignores-sigterm"]},
		"other": {"command":"FAKE","args":["-state","STATE","-name","other","-prefix","o_","-grandchild","setsid"]}
	}}`)
	b := tg.gw.backends[0]
	var first, others []int
	for _, s := range fakeProcesses(t, tg.dir) {
		if s.Role == "sleeper" && s.Name == "a" {
			first = append(first, s.PID)
		} else if s.Role == "sleeper" {
			others = append(others, s.PID)
		}
	}
	c := connect(t, tg.url)
	c.callTool("1", "crash", `{}`)
	waitState(t, b, stateBackoff, 10*time.Second)
	waitState(t, b, stateReady, 10*time.Second)
	waitFor(t, 5*time.Second, "the crashed server's grandchild to die", func() bool { return !alive(first[0]) })
	for _, pid := range others {
		if !alive(pid) {
			t.Errorf("grandchild %d of the other server was killed; only the crashed server's may be", pid)
		}
	}
	if got := len(sleepers(t, tg.dir)); got != 3 {
		t.Errorf("%d grandchildren recorded, want 3 (the restarted server made a new one)", got)
	}
}

func TestCorralSIGTERMLeavesNoProcessAndNoZombie(t *testing.T) {
	t.Parallel()
	c := startCorral(t, `{"listen":"127.0.0.1:0","stopGrace":"100ms","killGrace":"200ms","restartDelay":"10ms","mcpServers":{`+escapingServers+`}}`)
	c.waitHTTP(3)
	corral := c.cmd.Process.Pid
	// The double-forked daemon was orphaned at once: the subreaper got it.
	daemons := 0
	for _, s := range fakeProcesses(t, c.dir) {
		if s.Role == "sleeper" && s.Name == "daemon" {
			daemons++
			if st, _ := readStat(s.PID); st.ppid != corral {
				t.Errorf("the orphaned daemon's parent is %d, want corral (%d), its subreaper", st.ppid, corral)
			}
		}
	}
	if daemons != 1 {
		t.Fatalf("%d daemons recorded by the server \"daemon\", want 1: the check of its parent checked nothing", daemons)
	}
	// A crash: corral kills the escaped grandchild and reaps it.
	cl := connect(t, c.url)
	cl.callTool("1", "s_crash", `{}`)
	c.waitLog(`killed processes the server left (behind|in its cgroup).*server=setsid`)
	waitFor(t, 5*time.Second, "corral to reap what it killed", func() bool {
		for _, pid := range allPIDs() {
			if st, ok := readStat(pid); ok && st.ppid == corral && st.state == 'Z' {
				return false
			}
		}
		return true
	})
	c.cmd.Process.Signal(syscall.SIGTERM)
	if code := c.waitExit(20 * time.Second); code != 0 {
		t.Errorf("corral exited with %d, want 0", code)
	}
	requireGone(t, c.dir)
}

// sweepTestUID is the user this test's corrals run as. Every corral sweeps
// the leftovers of dead corrals of its own user when it starts, so a corral
// of another test, running as root, would take this test's leftovers before
// its second corral could; and this test's corrals touch nothing of theirs.
// No other test runs processes as this user.
const sweepTestUID = 64999

func TestNewCorralKillsWhatACorralKilledWithSIGKILLLeft(t *testing.T) {
	t.Parallel()
	first := startCorralAs(t, sweepTestUID, `{"listen":"127.0.0.1:0","mcpServers":{`+escapingServers+`}}`)
	first.waitHTTP(3)
	var servers []int
	for _, s := range fakeProcesses(t, first.dir) {
		if s.Role == "server" {
			servers = append(servers, s.PID)
		}
	}
	esc := sleepers(t, first.dir)
	first.cmd.Process.Kill()
	first.waitExit(10 * time.Second)

	// The parent-death signal killed every server with corral.
	waitFor(t, 5*time.Second, "the servers to die with corral", func() bool {
		for _, pid := range servers {
			if alive(pid) {
				return false
			}
		}
		return true
	})
	// Grandchildren that left the group do not get it; they are still here,
	// or this test would prove nothing.
	var survivors []int
	for _, pid := range esc {
		if alive(pid) {
			survivors = append(survivors, pid)
		}
	}
	if len(survivors) == 0 {
		t.Fatal("no grandchild survived corral's SIGKILL; the test cannot check the cleanup")
	}

	second := startCorralAs(t, sweepTestUID, `{"listen":"127.0.0.1:0","mcpServers":{"x": {"command":"FAKE","args":["-state","STATE"]}}}`)
	second.waitHTTP(1)
	for _, pid := range survivors {
		second.waitLog(`killed a process left by a corral that is no longer running" pid=` + strconv.Itoa(pid) + ` `)
	}
	requireGone(t, first.dir)
	// A running instance's processes are never touched.
	// liveMarked also counts any child of this test process that has
	// exited and waits to be reaped, as other tests' children do for a
	// moment: wait for the one process, not for the first look.
	var got []int
	waitFor(t, 10*time.Second, "the second corral's own server alone to be alive", func() bool {
		got = liveMarked(second.dir)
		return len(got) == 1
	})
	// The isolation above holds only if the corrals really ran as that user.
	status, err := os.ReadFile("/proc/" + strconv.Itoa(got[0]) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("\nUid:\t%d\t", sweepTestUID); os.Getuid() == 0 && !strings.Contains(string(status), want) {
		t.Errorf("the second corral's server does not run as user %d:\n%s", sweepTestUID, status)
	}
}

func TestInstanceMarkerNamesThisProcessInItsBootAndNamespaces(t *testing.T) {
	self, err := selfIdentity()
	if err != nil {
		t.Skipf("this process cannot read its identity from /proc: %v", err)
	}
	marker := newInstanceID()
	got, ok := parseInstanceID(marker)
	if !ok {
		t.Fatalf("parseInstanceID(%q) failed", marker)
	}
	got.tag = ""
	if got != self {
		t.Errorf("parseInstanceID(newInstanceID()) = %+v, want %+v", got, self)
	}
	for _, bad := range []string{
		"999999.1.x", // an older corral's form: no boot or namespaces
		strings.TrimSuffix(marker, "."+self.timeNS), // one field short
		"x." + strings.SplitN(marker, ".", 2)[1],    // no PID
		"",
		"garbage",
	} {
		if id, ok := parseInstanceID(bad); ok {
			t.Errorf("parseInstanceID(%q) = %+v, want failure", bad, id)
		}
	}
}

// sleeperUID is the user markedSleeper runs its processes as, if this
// process may: no corral of this user, which other tests and other people
// run on this machine, then sweeps them.
const sleeperUID = 65534 // nobody

// markedSleeper starts a sleep with the given markers in its environment
// (none where empty) and returns its PID and its user. It is killed when the
// test ends.
func markedSleeper(t *testing.T, instance, server string) (pid int, uid uint32) {
	t.Helper()
	cmd := exec.Command("sleep", "60")
	uid = uint32(os.Getuid())
	if uid == 0 {
		uid = sleeperUID
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
	}
	cmd.Env = withoutVars(os.Environ(), envInstance, envServer)
	if instance != "" {
		cmd.Env = append(cmd.Env, envInstance+"="+instance)
	}
	if server != "" {
		cmd.Env = append(cmd.Env, envServer+"="+server)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	// Start returns once execve is past its point of no return, which comes
	// before the kernel has set up the new program's environment: until then
	// /proc/PID/environ reads empty, and a sweep would find no marker (seen
	// on a loaded machine).
	environ := fmt.Sprintf("/proc/%d/environ", cmd.Process.Pid)
	waitFor(t, 10*time.Second, "the sleeper's environment", func() bool {
		data, _ := os.ReadFile(environ)
		return len(data) > 0
	})
	return cmd.Process.Pid, uid
}

// deadInstance returns the identity of an instance that ran in this boot and
// these namespaces and no longer runs: a process that the test started and
// reaped.
func deadInstance(t *testing.T) instanceID {
	t.Helper()
	id, err := selfIdentity()
	if err != nil {
		t.Skipf("this process cannot read its identity from /proc: %v", err)
	}
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	start, ok := processStartTime(cmd.Process.Pid)
	cmd.Process.Kill()
	cmd.Wait()
	if !ok {
		t.Fatal("cannot read the start time of a child")
	}
	id.pid, id.start, id.tag = cmd.Process.Pid, start, "dead"
	return id
}

func TestLeftoverSweepKillsOnlyWhatItProvesALeftover(t *testing.T) {
	dead := deadInstance(t)
	other := func(change func(*instanceID)) string {
		id := dead
		change(&id)
		return id.String()
	}
	for _, tc := range []struct {
		name      string
		instance  string
		server    string
		inherited bool   // the sweeper inherited the same marker
		ancestor  bool   // the process counts as an ancestor of the sweeper
		want      string // "killed", "" (not judged at all), or a part of why it was left
	}{
		{name: "a leftover of a dead instance of this boot and namespaces is killed", instance: dead.String(), server: "s", want: "killed"},
		{name: "a process of a running instance is not touched", instance: newInstanceID(), server: "s", want: ""},
		{name: "a marker of another PID namespace is left", instance: other(func(id *instanceID) { id.pidNS = "4:1" }), server: "s", want: "namespace"},
		{name: "a marker of another time namespace is left", instance: other(func(id *instanceID) { id.timeNS = "4:1" }), server: "s", want: "namespace"},
		{name: "a marker of another boot is left", instance: other(func(id *instanceID) { id.boot = "x" }), server: "s", want: "another boot"},
		{name: "an older corral's marker, which names no namespace, is left", instance: "999999.1.x", server: "s", want: "does not name"},
		{name: "a process without the server marker is left", instance: dead.String(), want: envServer},
		{name: "a process older than the instance is left", instance: other(func(id *instanceID) { id.start += 1 << 40 }), server: "s", want: "started before"},
		{name: "a process with the marker corral inherited is left", instance: dead.String(), server: "s", inherited: true, want: "inherited"},
		{name: "an ancestor of corral is left", instance: dead.String(), server: "s", ancestor: true, want: "ancestor"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pid, uid := markedSleeper(t, tc.instance, tc.server)
			inherited := ""
			if tc.inherited {
				inherited = tc.instance
			}
			s, err := newSweeper(inherited)
			if err != nil {
				t.Fatal(err)
			}
			s.uid = uid // the sleeper's user: as if it ran the sweep
			if tc.ancestor {
				s.ancestors[pid] = true
			}
			got := s.sweep([]int{pid})
			switch {
			case tc.want == "":
				if len(got) != 0 {
					t.Errorf("sweep = %+v, want nothing killed or reported", got)
				}
			case len(got) != 1 || got[0].pid != pid:
				t.Fatalf("sweep = %+v, want one verdict on %d", got, pid)
			case tc.want == "killed":
				if !got[0].killed {
					t.Errorf("sweep left %d (%s), want it killed", pid, got[0].why)
				}
				waitFor(t, 5*time.Second, "the leftover to die", func() bool { return !alive(pid) })
				return
			case got[0].killed || !strings.Contains(got[0].why, tc.want):
				t.Errorf("sweep = killed %v, why %q; want it left, why containing %q", got[0].killed, got[0].why, tc.want)
			}
			if !alive(pid) {
				t.Errorf("process %d was killed; the sweep must leave it", pid)
			}
		})
	}
}

// childrenOf returns the PIDs of the live children of pid.
func childrenOf(pid int) []int {
	var pids []int
	for _, p := range allPIDs() {
		if st, ok := readStat(p); ok && st.ppid == pid && st.state != 'Z' {
			pids = append(pids, p)
		}
	}
	return pids
}

// unshareArgs run a command as the first process of a new PID namespace,
// with a /proc of its own, killed if unshare dies.
var unshareArgs = []string{"unshare", "--pid", "--fork", "--mount-proc", "--kill-child"}

// needPIDNamespace skips the test unless this user can make PID namespaces.
func needPIDNamespace(t *testing.T, alternative string) {
	t.Helper()
	if out, err := exec.Command(unshareArgs[0], append(unshareArgs[1:], "true")...).CombinedOutput(); err != nil {
		t.Skipf("cannot make a PID namespace here (%v: %s); %s", err, out, alternative)
	}
}

func TestLeftoverSweepSparesCorralsAncestorsAndSiblings(t *testing.T) {
	t.Parallel()
	const (
		withSibling  = `sleep 60 & "$0" "$@"; exit $?`
		ancestorOnly = `env -u ` + envInstance + ` -u ` + envServer + ` "$0" "$@"; exit $?`
	)
	for _, tc := range []struct {
		name string
		// inPIDNamespace runs the case in a PID namespace of its own, under
		// a marker that names a dead instance there; else on the host under
		// marker. A corral elsewhere would rightly kill a process marked by a
		// dead instance it can judge, so only a namespace keeps it to this test.
		inPIDNamespace bool
		marker         string
		script         string            // runs corral as "$0" "$@"
		children       int               // of the shell, corral included
		wantLeft       map[string]string // command line -> part of why it was left
	}{
		{name: "the issue's marker, which names no corral, on corral's shell and its sibling",
			marker: "999999.1.x", script: withSibling, children: 2,
			wantLeft: map[string]string{"sh -c": "does not name", "sleep 60": "does not name"}},
		{name: "a dead corral's marker, on corral's shell and its sibling",
			inPIDNamespace: true, script: withSibling, children: 2,
			wantLeft: map[string]string{"sh -c": "inherited", "sleep 60": "inherited"}},
		{name: "a dead corral's marker on an ancestor, not on corral",
			inPIDNamespace: true, script: ancestorOnly, children: 1,
			wantLeft: map[string]string{"sh -c": "ancestor"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			wrap := []string{"sh", "-c", tc.script}
			env := []string{envInstance + "=" + tc.marker, envServer + "=x"}
			if tc.inPIDNamespace {
				needPIDNamespace(t, "TestLeftoverSweepKillsOnlyWhatItProvesALeftover checks the same rules in process")
				// The marker of a process that ran and was reaped in the new
				// namespace, put on a shell that runs the case. That shell is
				// not the namespace's init, which ignores SIGKILL from inside.
				marker := `"$!.1.t.$(cat /proc/sys/kernel/random/boot_id).$(stat -L -c %d:%i /proc/self/ns/pid).$(stat -L -c %d:%i /proc/self/ns/time)"`
				wrap = append(append([]string{}, unshareArgs...), "sh", "-c",
					`true & wait; env `+envInstance+`=`+marker+` `+envServer+`=x sh -c '`+tc.script+`' "$0" "$@"; exit $?`)
				env = nil
			}
			c := startCorralUnder(t, wrap, env, `{"listen":"127.0.0.1:0","mcpServers":{"s":{"command":"FAKE","args":["-state","STATE"]}}}`)
			c.waitHTTP(1) // corral sweeps before it serves
			sh := c.cmd.Process.Pid
			if tc.inPIDNamespace { // unshare, the namespace's init, the shell
				for range 2 {
					kids := childrenOf(sh)
					if len(kids) != 1 {
						t.Fatalf("process %d has %d children %v, want 1: the shell that started corral was killed", sh, len(kids), kids)
					}
					sh = kids[0]
				}
			}
			if !alive(sh) {
				t.Fatalf("the shell that started corral (%d) was killed", sh)
			}
			if kids := childrenOf(sh); len(kids) != tc.children {
				t.Fatalf("the shell that started corral has %d live children %v, want %d: corral or its sibling was killed", len(kids), kids, tc.children)
			}
			for cmdline, why := range tc.wantLeft {
				c.waitLog(`left a process marked by another corral.* why="[^"]*` + regexp.QuoteMeta(why) + `[^"]*" .*cmdline="` + regexp.QuoteMeta(cmdline))
			}
		})
	}
}

func TestLeftoverSweepLeavesAnotherPIDNamespacesServers(t *testing.T) {
	t.Parallel()
	needPIDNamespace(t, "TestLeftoverSweepKillsOnlyWhatItProvesALeftover checks a marker of another namespace without one")
	inner := startCorralUnder(t, unshareArgs, nil, `{"listen":"127.0.0.1:0","mcpServers":{
		"x": {"command":"FAKE","args":["-state","STATE","-grandchild","setsid"]}}}`)
	inner.waitHTTP(1)
	// The PIDs on the host of its server and the server's grandchild, once
	// the grandchild has left its short-lived parent (and no other test's
	// exited child waits to be reaped: liveMarked counts those too).
	var marked []int
	waitFor(t, 10*time.Second, "the namespaced corral's server and its grandchild, 2 processes", func() bool {
		marked = liveMarked(inner.dir)
		return len(marked) == 2
	})
	host := startCorral(t, `{"listen":"127.0.0.1:0","mcpServers":{"y":{"command":"FAKE","args":["-state","STATE"]}}}`)
	host.waitHTTP(1) // corral sweeps before it serves
	for _, pid := range marked {
		if !alive(pid) {
			t.Errorf("process %d of the corral in another PID namespace was killed", pid)
		}
		host.waitLog(`left a process marked by another corral.* pid=` + strconv.Itoa(pid) + ` why=".*namespace`)
	}
}

func TestServersGetNeitherTheTokenVariableNorInheritedMarkers(t *testing.T) {
	t.Parallel()
	c := startCorralUnder(t, []string{"env"}, []string{envInstance + "=999999.1.x", envServer + "=outer", "CORRAL_TEST_TOKEN=s3cret"},
		`{"listen":"127.0.0.1:0","authTokenEnv":"CORRAL_TEST_TOKEN","mcpServers":{
		"plain": {"command":"FAKE","args":["-state","STATE","-name","plain"]},
		"given": {"command":"FAKE","args":["-state","STATE","-name","given","-prefix","g_"],"env":{"CORRAL_TEST_TOKEN":"${CORRAL_TEST_TOKEN}"}}}}`)
	c.waitHTTP(2)
	servers := 0
	for _, s := range fakeProcesses(t, c.dir) {
		if s.Role != "server" {
			continue
		}
		servers++
		env := environ(t, s.PID)
		if _, ok := parseInstanceID(env[envInstance]); !ok || env[envServer] != s.Name {
			t.Errorf("server %q has %s=%q %s=%q, want its own corral's marker and its name", s.Name, envInstance, env[envInstance], envServer, env[envServer])
		}
		want := ""
		if s.Name == "given" {
			want = "s3cret" // named in its env
		}
		if got := env["CORRAL_TEST_TOKEN"]; got != want {
			t.Errorf("server %q sees CORRAL_TEST_TOKEN=%q, want %q", s.Name, got, want)
		}
	}
	if servers != 2 {
		t.Fatalf("%d servers recorded, want 2", servers)
	}
}

// environ returns the environment process pid started with.
func environ(t *testing.T, pid int) map[string]string {
	t.Helper()
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for kv := range strings.SplitSeq(string(data), "\x00") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	return env
}

func TestCorralWithAnotherNamespacesProcSweepsNothing(t *testing.T) {
	t.Parallel()
	needPIDNamespace(t, "no other test covers a /proc of another PID namespace")
	// Without --mount-proc, /proc shows the host's processes under the host's
	// PIDs, which kill and wait in the new namespace do not take.
	wrap := []string{"unshare", "--pid", "--fork", "--kill-child"}
	c := startCorralUnder(t, wrap, nil, `{"listen":"127.0.0.1:0","mcpServers":{"s":{"command":"FAKE","args":["-state","STATE"]}}}`)
	c.waitHTTP(1)
	c.waitLog(`not sweeping processes left by earlier corrals.* err=.*another PID namespace`)
	c.waitLog(`cannot become a child subreaper.* err=.*another PID namespace`)
}
