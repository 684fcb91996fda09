package conformance

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Cases about containment: resource limits on a server's processes, and a
// server's tree that no trick of its own takes out of the gateway's reach.
// They run where the adapter declares the settings (memoryLimit,
// pidsLimit) or the capability (containment), and where this machine lets
// its user create cgroups, which is what a gateway on Linux enforces them
// with.

// limits are the resource limits a case asks the gateway to set on a
// server; zero fields set none.
type limits struct {
	memory int64 // bytes; setting memoryLimit
	pids   int   // processes and threads; setting pidsLimit
}

// check skips t unless the adapter has the settings l needs and this
// machine lets its user create cgroups.
func (l limits) check(t *testing.T) {
	if l.memory != 0 && !adapter.has("memoryLimit") {
		skip(t, "the adapter has no memoryLimit setting")
	}
	if l.pids != 0 && !adapter.has("pidsLimit") {
		skip(t, "the adapter has no pidsLimit setting")
	}
	if l.memory != 0 {
		needCgroups(t, "memory")
	}
	if l.pids != 0 {
		needCgroups(t, "pids")
	}
}

// memoryText returns the memory limit as "64MiB", or "" for none.
func (l limits) memoryText() string {
	if l.memory == 0 {
		return ""
	}
	return strconv.FormatInt(l.memory>>20, 10) + "MiB"
}

// needCgroups skips t unless this user can create a cgroup under its own,
// with each of controllers available in it: without that, no gateway can
// limit or contain a server here (not root, and no delegated cgroup).
func needCgroups(t *testing.T, controllers ...string) {
	requireLinux(t)
	self, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		skip(t, "cannot read /proc/self/cgroup: %v", err)
	}
	have := map[string]bool{}
	for line := range strings.Lines(string(self)) {
		f := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if len(f) != 3 {
			continue
		}
		mounts := []string{"/sys/fs/cgroup/unified", "/sys/fs/cgroup"}
		if f[1] != "" {
			mounts = []string{"/sys/fs/cgroup/" + strings.TrimPrefix(f[1], "name=")}
		}
		for _, m := range mounts {
			if _, err := os.Stat(filepath.Join(m, f[2], "cgroup.procs")); err != nil {
				continue
			}
			dir := filepath.Join(m, f[2], fmt.Sprintf("conformance-probe-%d-%d", os.Getpid(), rand.Int64())) // cases run in parallel
			if os.Mkdir(dir, 0o755) != nil {
				break
			}
			have[""] = true
			names := strings.Split(f[1], ",")
			if f[1] == "" { // v2: what the new cgroup's parent passes on to it
				data, _ := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
				names = strings.Fields(string(data))
			}
			for _, c := range names {
				have[c] = true
			}
			os.Remove(dir)
			break
		}
	}
	if !have[""] {
		skip(t, "this user cannot create cgroups here (not root, and no delegated cgroup), so no gateway can limit or contain its servers")
	}
	for _, c := range controllers {
		if !have[c] {
			skip(t, "the %s controller is not available to this user's cgroups here, so no gateway can enforce that limit", c)
		}
	}
}

func TestForkBombStopsAtThePidsLimitAndOthersKeepServing(t *testing.T) {
	guarantee(t)
	const limit = 64
	specs, ready := withSteady(serverSpec{Name: "bomb", limits: limits{pids: limit}})
	g := startGateway(t, specs, options{}, append(ready, "bomb")...)
	s := g.newSession()
	forked := func() int { return len(marked("-role forked -name bomb -state " + g.stateDir)) }

	// One burst: it stops short of the limit.
	text, err := callText(t, s, "bomb", "fork", map[string]any{"count": 500})
	m := regexp.MustCompile(`^started (\d+) of 500`).FindStringSubmatch(text)
	switch {
	case err != nil:
		// The server died of the limit (a runtime that cannot start a
		// thread gives up): an error is the right answer.
		t.Logf("fork of 500 under a pids limit of %d: %v", limit, err)
	case m == nil:
		fatal(t, "fork answered %q, want \"started K of 500\"", text)
	default:
		if k, _ := strconv.Atoi(m[1]); k >= limit {
			fail(t, "the server started %d processes under a pids limit of %d: %q", k, limit, text)
		}
	}
	if n := forked(); n >= limit {
		fail(t, "%d processes of the server are running under a pids limit of %d", n, limit)
	}
	// A bomb that keeps trying, while another server is called.
	go s.call(ctxFor(t, 60*time.Second), `"bomb"`, "bomb", "fork", map[string]any{"count": 1000000, "keep_trying": true})
	if len(ready) > 0 {
		other := g.newSession()
		var slowest time.Duration
		for i := range 20 {
			start := time.Now()
			if text, err := callText(t, other, "steady", "echo", map[string]any{"text": "ok"}); err != nil || text != "ok" {
				fatal(t, "call %d to the other server during the fork bomb answered %q, %v", i, text, err)
			}
			slowest = max(slowest, time.Since(start))
		}
		if slowest > 5*time.Second {
			fail(t, "a call to the other server during the fork bomb took %s, want each within 5s", slowest)
		}
		t.Logf("the slowest of 20 calls to the other server during the fork bomb took %s", slowest)
	}
	if n := forked(); n >= limit {
		fail(t, "%d processes of the server are running during the fork bomb under a pids limit of %d", n, limit)
	}
	g.signal(syscall.SIGTERM)
	if !g.waitExit(adapter.bound) {
		fatal(t, "the gateway did not exit within %s of SIGTERM", adapter.bound)
	}
	if left := waitGone(g.stateDir, 10*time.Second); len(left) > 0 {
		fail(t, "10s after the gateway exited, %d processes of the fork bomb are left: %s", len(left), describe(g.stateDir, left))
	}
}

func TestServerOverItsMemoryLimitIsKilledAndRestartedAndItsCallerTold(t *testing.T) {
	guarantee(t)
	opts := options{}
	if adapter.has("restartDelay") {
		opts.restartDelay = 200 * time.Millisecond
	}
	specs, ready := withSteady(serverSpec{Name: "hog", limits: limits{memory: 64 << 20}})
	g := startGateway(t, specs, opts, append(ready, "hog")...)
	s := g.newSession()
	text, err := callText(t, s, "hog", "alloc", map[string]any{"mib": 512})
	if err == nil {
		fatal(t, "alloc of 512 MiB under a memory limit of 64 MiB answered %q, want an error", text)
	}
	if msg := err.Error(); !strings.Contains(msg, "memory") || !regexp.MustCompile(`64 ?MiB|67108864`).MatchString(msg) {
		fail(t, "the caller was told %q, want an error that names the memory limit (64 MiB)", msg)
	}
	if len(ready) > 0 {
		if text, err := callText(t, g.newSession(), "steady", "echo", map[string]any{"text": "ok"}); err != nil || text != "ok" {
			fail(t, "after the other server went over its memory limit, a call answered %q, %v", text, err)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		text, err := callText(t, s, "hog", "alloc", map[string]any{"mib": 8})
		if err == nil && text == "allocated 8 MiB" && len(serverStarts(g.stateDir, "hog")) >= 2 {
			break
		}
		if time.Now().After(deadline) {
			fatal(t, "30s after it went over its memory limit, the server was not serving again (%d starts; last answer %q, %v)",
				len(serverStarts(g.stateDir, "hog")), text, err)
		}
		time.Sleep(200 * time.Millisecond) // the restart gives the client no signal
	}
}

func TestCrashLeavesNoProcessOfTheServerEvenOneThatClearedItsEnvironment(t *testing.T) {
	guarantee(t)
	if !adapter.has("containment") {
		skip(t, "the adapter does not declare containment (a cgroup per server): only a cgroup can find a process that left the group, the session and the environment")
	}
	needCgroups(t)
	opts := options{}
	if adapter.has("restartDelay") {
		opts.restartDelay = 200 * time.Millisecond
	}
	g := startGateway(t, []serverSpec{{Name: "escape", flags: []string{"-grandchild", "clearenv", "-grandchild-ignores-sigterm"}}}, opts, "escape")
	var sleeper int
	for _, p := range processes(g.stateDir) {
		if p.Role == "sleeper" {
			sleeper = p.PID
		}
	}
	if env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", sleeper)); sleeper == 0 || err != nil || len(env) != 0 {
		fatal(t, "the escaped sleeper (PID %d) has %d bytes of environment, %v: want one with none", sleeper, len(env), err)
	}
	var crashed sync.WaitGroup
	crashed.Add(1)
	go func() {
		defer crashed.Done()
		g.newSession().call(ctxFor(t, 30*time.Second), `"crash"`, "escape", "crash", map[string]any{})
	}()
	defer crashed.Wait()
	deadline := time.Now().Add(30 * time.Second)
	for len(serverStarts(g.stateDir, "escape")) < 2 {
		if time.Now().After(deadline) {
			fatal(t, "the gateway did not restart the crashed server within 30s")
		}
		time.Sleep(100 * time.Millisecond) // the restart gives the client no signal
	}
	for end := time.Now().Add(10 * time.Second); alive(sleeper); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(end) {
			fail(t, "10s after the restart, the crashed server's descendant that cleared its environment is still running: %s", describe(g.stateDir, []int{sleeper}))
			break
		}
	}
	// The restarted server's own escapee, at the gateway's stop.
	g.signal(syscall.SIGTERM)
	if !g.waitExit(adapter.bound) {
		fatal(t, "the gateway did not exit within %s of SIGTERM", adapter.bound)
	}
	if left := waitGone(g.stateDir, 10*time.Second); len(left) > 0 {
		fail(t, "10s after the gateway exited, processes of the server are left: %s", describe(g.stateDir, left))
	}
}
