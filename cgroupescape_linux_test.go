package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// startEscapingServer starts, in a cgroup of tree, a server (sh) whose child
// moves itself into corral's own cgroup in every hierarchy, as a server of a
// corral whose cgroups are delegated to its user may, clears its
// environment and calls setsid. It returns the server, the child's PID, and
// a function that reports whether the child has escaped; the child is killed
// when the test ends, whatever happens.
func startEscapingServer(t *testing.T, tree *cgroupTree, name string) (p *process, escapee int, escaped func() bool) {
	t.Helper()
	tools := map[string]string{}
	for _, tool := range []string{"sh", "env", "setsid", "mv", "sleep", "cat"} {
		path, err := exec.LookPath(tool)
		if err != nil {
			t.Skipf("the escaping server needs %s: %v", tool, err)
		}
		tools[tool] = path
	}
	dir := t.TempDir()
	pidFile, escapedFile := filepath.Join(dir, "escapee.pid"), filepath.Join(dir, "escaped")
	child := filepath.Join(dir, "escape.sh")
	// The child's PID file is renamed into place, so that it is read whole.
	script := fmt.Sprintf(`echo $$ > %[1]s.tmp && %[2]s %[1]s.tmp %[1]s || exit 1
for d in "$@"; do echo $$ > "$d/cgroup.procs" || exit 1; done
exec %[3]s -i %[4]s %[5]s -c ': > "$0" && exec %[6]s 120' %[7]s
`, pidFile, tools["mv"], tools["env"], tools["setsid"], tools["sh"], tools["sleep"], escapedFile)
	if err := os.WriteFile(child, []byte(script), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if escapee > 0 {
			killPinned(escapee, func() bool { return true })
		}
	})
	var l Limits
	if tree.enforceable(Limits{Pids: 64}) == nil {
		l.Pids = 64 // the limit the child escapes
	}
	args := append([]string{"-c", tools["sh"] + ` "$0" "$@" & exec ` + tools["cat"], child}, tree.ownDirs()...)
	p, err := startProcess(processSpec{name: name, command: tools["sh"], args: args,
		stopGrace: 5 * time.Second, killGrace: time.Second, pipeDrain: 100 * time.Millisecond,
		env: os.Environ(), log: testLogger(t), cgroups: tree, limits: l})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Stop(nil) })
	waitFor(t, 10*time.Second, "the child to write its PID", func() bool {
		data, err := os.ReadFile(pidFile)
		escapee, _ = strconv.Atoi(strings.TrimSpace(string(data)))
		return err == nil && escapee > 0
	})
	return p, escapee, func() bool {
		_, err := os.Stat(escapedFile)
		return err == nil
	}
}

// checkEscaped fails t unless the escapee, a child of the server p, is out
// of p's cgroup, in a session of its own, and without corral's markers.
func checkEscaped(t *testing.T, p *process, escapee int) {
	t.Helper()
	if pids, _ := cgroupPIDs(p.cg.dirs[0]); slices.Contains(pids, escapee) {
		t.Fatalf("the child %d is still in the server's cgroup %s: the test escapes nothing", escapee, p.cg.dirs[0])
	}
	if s, _ := readStat(escapee); s.ppid != p.pid {
		t.Fatalf("the child's parent is %d, want the server %d", s.ppid, p.pid)
	}
	if sid := sessionOf(t, escapee); sid != escapee {
		t.Fatalf("the child's session is %d, want one of its own", sid)
	}
	if env := environ(t, escapee); env[envInstance] != "" || env[envServer] != "" {
		t.Fatalf("the child's environment = %v, want no marker", env)
	}
}

func TestAChildThatLeftItsServersCgroupIsKilledWhenTheServerStops(t *testing.T) {
	for name, tree := range needCgroups(t) {
		t.Run(name, func(t *testing.T) {
			var log lockedBuffer
			tree.watchEscapes(slog.New(slog.NewTextHandler(&log, nil)), time.Hour) // no periodic look in time
			p, escapee, escaped := startEscapingServer(t, tree, "leaky")
			waitFor(t, 10*time.Second, "the child to escape", escaped)
			checkEscaped(t, p, escapee)
			p.Stop(nil)
			// SIGKILL is sent before Stop returns; the child dies once the
			// kernel has run it to its end, which on a loaded machine comes
			// a little later.
			waitFor(t, 5*time.Second, "the child that moved itself into corral's own cgroup to die after the server stopped", func() bool { return !alive(escapee) })
			if want := fmt.Sprintf(`msg="killed a process that left its server's cgroup" server=leaky pid=%d`, escapee); !strings.Contains(log.String(), want) {
				t.Errorf("log = %q, want it to contain %q", log.String(), want)
			}
		})
	}
}

func TestAChildThatLeftItsServersCgroupIsKilledWhileTheServerRuns(t *testing.T) {
	for name, tree := range needCgroups(t) {
		t.Run(name, func(t *testing.T) {
			var log lockedBuffer
			const every = 50 * time.Millisecond
			tree.watchEscapes(slog.New(slog.NewTextHandler(&log, nil)), every)
			p, escapee, _ := startEscapingServer(t, tree, "leaky")
			// It may be killed before it has escaped from every hierarchy:
			// the log says it was judged to have left. A look every 50 ms: 5 s is a bound a loaded machine keeps.
			want := fmt.Sprintf(`msg="killed a process that left its server's cgroup" server=leaky pid=%d`, escapee)
			waitFor(t, 5*time.Second, "the escaped child to be killed, and the log to say so", func() bool {
				return !alive(escapee) && strings.Contains(log.String(), want)
			})
			select {
			case <-p.exited:
				t.Errorf("the server exited (%s), want it running: only its escaped child is killed", p.exitDescription())
			default:
			}
		})
	}
}

// sessionOf returns the session of process pid, from /proc/PID/stat.
func sessionOf(t *testing.T, pid int) int {
	t.Helper()
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+1:]))
	sid, _ := strconv.Atoi(f[3]) // state ppid pgrp session
	return sid
}

func TestAServerThatLeftItsOwnCgroupIsKilled(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skipf("the escaping server needs sh: %v", err)
	}
	for name, tree := range needCgroups(t) {
		t.Run(name, func(t *testing.T) {
			var log lockedBuffer
			tree.watchEscapes(slog.New(slog.NewTextHandler(&log, nil)), 50*time.Millisecond)
			// The server moves itself out first thing, before anything it
			// starts could be seen in its cgroup.
			args := append([]string{"-c", `for d in "$@"; do echo $$ > "$d/cgroup.procs" || exit 1; done; exec cat`, "server"}, tree.ownDirs()...)
			p, err := startProcess(processSpec{name: "runaway", command: sh, args: args,
				stopGrace: time.Second, killGrace: time.Second, pipeDrain: 100 * time.Millisecond,
				env: os.Environ(), log: testLogger(t), cgroups: tree})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { p.Stop(nil) })
			select {
			case <-p.exited:
			case <-time.After(5 * time.Second):
				t.Fatalf("the server that moved itself into corral's own cgroup still runs after 5 s")
			}
			if got, want := p.exitDescription(), "signal: killed"; got != want {
				t.Errorf("the server ended with %q, want %q", got, want)
			}
			// The line is written once the kill is sent: it may come after
			// the server has gone.
			want := fmt.Sprintf(`msg="killed a process that left its server's cgroup" server=runaway pid=%d`, p.pid)
			waitFor(t, 5*time.Second, "the log to say why the server was killed", func() bool { return strings.Contains(log.String(), want) })
		})
	}
}

func TestAShimHalfwayIntoItsCgroupsIsNotTakenForAnEscapee(t *testing.T) {
	tree := needCgroups(t)["v1"]
	if tree == nil || tree.enforceable(Limits{Pids: 64}) != nil {
		t.Skip("needs cgroup v1 with a pids hierarchy: only there does a shim join the server's cgroups one at a time")
	}
	var log lockedBuffer
	tree.watchEscapes(slog.New(slog.NewTextHandler(&log, nil)), time.Hour)
	cg, err := tree.create("halfway", Limits{Pids: 64})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cg.remove() })
	// The shim joins the freezer cgroup, then blocks opening a FIFO that
	// stands for the pids cgroup's cgroup.procs: it stays halfway in.
	fifoDir := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(fifoDir, "cgroup.procs"), 0o600); err != nil {
		t.Fatal(err)
	}
	spec, _ := json.Marshal(shimSpec{Path: "/bin/true", Args: []string{"true"}, Cgroups: []string{cg.dirs[0], fifoDir}})
	shim := exec.Command("/proc/self/exe", shimArg, string(spec))
	if err := shim.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		shim.Process.Kill()
		shim.Wait()
	})
	waitFor(t, 10*time.Second, "the shim to join the freezer cgroup", func() bool {
		pids, _ := cgroupPIDs(cg.dirs[0])
		return slices.Contains(pids, shim.Process.Pid)
	})
	tree.killEscapees()
	if !alive(shim.Process.Pid) {
		t.Errorf("the shim was killed halfway into its cgroups; log: %s", log.String())
	}
}

func TestTheGatewayKillsWhatLeftItsServersCgroupWithinASecondOrSo(t *testing.T) {
	trees := needCgroups(t)
	tree := trees["v1"] // the gateway's own choice: v1 where a freezer is mounted
	if tree == nil {
		tree = trees["v2"]
	}
	tg := startGateway(t, fmt.Sprintf(`{"mcpServers":{"leaky": {"command":"FAKE","args":["-state","STATE",
		"-grandchild","setsid","-grandchild-leaves-cgroup",%q]}}}`, strings.Join(tree.ownDirs(), ",")))
	waitFor(t, 10*time.Second, "the sleeper's state file", func() bool { return len(sleepers(t, tg.dir)) == 1 })
	sleeper := sleepers(t, tg.dir)[0]
	// escapeWatchEvery is a second; 10 s is a bound a loaded machine keeps.
	waitFor(t, 10*time.Second, "the sleeper that left the server's cgroup to be killed", func() bool { return !alive(sleeper) })
	if h := tg.gw.backends[0].health(); h.State != stateReady || h.Restarts != 0 {
		t.Errorf("the server's health = %+v, want it ready and never restarted: only what left its cgroup is killed", h)
	}
}

func TestQuickStatReadsTheParentAndStartThatReadStatReads(t *testing.T) {
	var buf [1024]byte
	for _, pid := range []int{os.Getpid(), 1} {
		want, ok1 := readStat(pid)
		got, ok2 := quickStat(pid, buf[:])
		if !ok1 || !ok2 || got.ppid != want.ppid || got.start != want.start {
			t.Errorf("quickStat(%d) = %+v, %v; readStat = %+v, %v", pid, got, ok2, want, ok1)
		}
	}
	if _, ok := quickStat(1<<22+1, buf[:]); ok {
		t.Error("quickStat of a PID that is not there = ok")
	}
}
