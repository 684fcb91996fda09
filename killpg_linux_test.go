package main

import (
	"os"
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
	for _, s := range fakeProcesses(t, c.dir) {
		if s.Role == "sleeper" && s.Name == "daemon" {
			if st, _ := readStat(s.PID); st.ppid != corral {
				t.Errorf("the orphaned daemon's parent is %d, want corral (%d), its subreaper", st.ppid, corral)
			}
		}
	}
	// A crash: corral kills the escaped grandchild and reaps it.
	cl := connect(t, c.url)
	cl.callTool("1", "s_crash", `{}`)
	c.waitLog(`killed processes the server left behind.*server=setsid`)
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

func TestNewCorralKillsWhatACorralKilledWithSIGKILLLeft(t *testing.T) {
	t.Parallel()
	first := startCorral(t, `{"listen":"127.0.0.1:0","mcpServers":{`+escapingServers+`}}`)
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

	second := startCorral(t, `{"listen":"127.0.0.1:0","mcpServers":{"x": {"command":"FAKE","args":["-state","STATE"]}}}`)
	second.waitHTTP(1)
	for _, pid := range survivors {
		second.waitLog(`killed a process left by a corral that is no longer running" pid=` + strconv.Itoa(pid) + ` `)
	}
	requireGone(t, first.dir)
	// A running instance's processes are never touched.
	if got := liveMarked(second.dir); len(got) != 1 {
		t.Errorf("the second corral's own server: %d processes alive, want 1", len(got))
	}
}

func TestInstanceMarkers(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("needs /proc")
	}
	self := newInstanceID()
	if !instanceRunning(self) {
		t.Errorf("instanceRunning(%q) = false for this process", self)
	}
	parts := strings.SplitN(self, ".", 3)
	for _, dead := range []string{
		parts[0] + "." + parts[1] + "1." + parts[2], // same PID, another start time: PID reused
		"999999999.1.abcd",
		"garbage",
	} {
		if instanceRunning(dead) {
			t.Errorf("instanceRunning(%q) = true, want false", dead)
		}
	}
}
