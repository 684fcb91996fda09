//go:build unix

package main

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// setProcAttr puts the child in a process group of its own, so that a signal
// to the group reaches the server and every descendant that stayed in it, and
// a signal meant for corral (Ctrl-C in a terminal) does not reach it directly.
func setProcAttr(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	setPlatformProcAttr(cmd.SysProcAttr)
}

// signalGroup sends sig to every process in the process group pgid. A group
// that is already gone is not an error.
func signalGroup(pgid int, sig syscall.Signal) error {
	if pgid <= 1 {
		// Never signal -1 (every process we may signal) or -0 (our own group).
		return fmt.Errorf("refusing to signal process group %d", pgid)
	}
	err := syscall.Kill(-pgid, sig)
	if errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return err
}

// The environment variables that mark every process corral starts and,
// since the environment is inherited, every descendant of it, including one
// that leaves the process group or outlives corral. corral never passes on
// the values it inherited itself: each server gets its own instance's.
const (
	envInstance = "CORRAL_INSTANCE" // the corral instance: see instanceID
	envServer   = "CORRAL_SERVER"   // the server's name
)

// instanceID names one corral instance for the life of the system. Its
// string form is "PID.START.TAG.BOOT.PIDNS.TIMENS": corral before this form
// read "PID.START." and ignored the rest, so it still judges the markers of a
// newer corral as it did its own.
//
// The PID and start time name a process only in the PID namespace and the
// time namespace they were read in (a PID is reused, and /proc shows start
// times as offset by the reader's time namespace), and only in one boot, so
// the marker carries all three: a sweeper that cannot check they are its own
// cannot tell whether the instance runs.
type instanceID struct {
	pid    int    // in pidNS
	start  uint64 // clock ticks since boot, as seen in timeNS
	tag    string // random: sets apart two gateways in one process (as in tests)
	boot   string // /proc/sys/kernel/random/boot_id
	pidNS  string // "DEV:INODE" of /proc/self/ns/pid
	timeNS string // "DEV:INODE" of /proc/self/ns/time, or "none" on a kernel without time namespaces
}

// String returns the marker, as put in envInstance.
func (id instanceID) String() string {
	return fmt.Sprintf("%d.%d.%s.%s.%s.%s", id.pid, id.start, id.tag, id.boot, id.pidNS, id.timeNS)
}

// parseInstanceID parses a marker. It reports false for anything that does
// not name a PID, start time, boot and both namespaces: such a marker was
// written by an older corral, by a corral that could not read /proc, or by
// no corral at all, and cannot be judged.
func parseInstanceID(s string) (instanceID, bool) {
	f := strings.Split(s, ".")
	if len(f) != 6 {
		return instanceID{}, false
	}
	for _, v := range f {
		if v == "" {
			return instanceID{}, false
		}
	}
	pid, err1 := strconv.Atoi(f[0])
	start, err2 := strconv.ParseUint(f[1], 10, 64)
	if err1 != nil || err2 != nil || pid <= 0 {
		return instanceID{}, false
	}
	return instanceID{pid: pid, start: start, tag: f[2], boot: f[3], pidNS: f[4], timeNS: f[5]}, true
}

// newInstanceID returns the marker of this corral instance. Where this
// process cannot read its own identity (no /proc, or a /proc of another PID
// namespace), the marker leaves out boot and namespaces, and no corral will
// ever judge its processes leftovers.
func newInstanceID() string {
	var b [4]byte
	rand.Read(b[:])
	id, _ := selfIdentity()
	id.tag = hex.EncodeToString(b[:])
	return id.String()
}

// markerEnv returns the marker variables for a server of instance.
func markerEnv(instance, server string) []string {
	return []string{envInstance + "=" + instance, envServer + "=" + server}
}

// withoutVars returns env without the variables named; empty names are
// ignored. It does not change env.
func withoutVars(env []string, names ...string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if name == "" || !slices.Contains(names, name) {
			out = append(out, kv)
		}
	}
	return out
}

// killPinned sends SIGKILL to process pid if approve, which reads /proc/pid,
// still approves it once the process is pinned. The process is pinned by a
// pidfd (os.FindProcess on Linux 5.3 and later): if it is still alive after
// approve returned, what approve read was its own and not that of a later
// process that reused the PID, and the signal reaches it and no other.
// Without pidfds, a PID reused in between is the window left.
func killPinned(pid int, approve func() bool) bool {
	p, err := os.FindProcess(pid)
	if err != nil {
		return false
	}
	defer p.Release()
	if !approve() || p.Signal(syscall.Signal(0)) != nil {
		return false
	}
	return p.Signal(syscall.SIGKILL) == nil
}

// orphanReaper makes corral a child subreaper, so that descendants orphaned
// by a server's death are re-parented to corral instead of init, and reaps
// those that exit. It never reaps a process started through os/exec, whose
// Wait must do it: startProcess registers each one under the reaper's lock
// from before it is forked until it is reaped. All methods are safe on a nil
// *orphanReaper, which does nothing.
type orphanReaper struct {
	log  *slog.Logger
	mu   sync.Mutex
	live map[int]bool // children started with os/exec and not yet reaped
	sigs chan os.Signal
	done chan struct{}
	wg   sync.WaitGroup
}

// newOrphanReaper makes this process a child subreaper and starts reaping.
// Only one per process may exist, and only in a process whose every child
// is started through it (corral's main, not a test binary).
func newOrphanReaper(log *slog.Logger) (*orphanReaper, error) {
	if err := becomeSubreaper(); err != nil {
		return nil, err
	}
	r := &orphanReaper{log: log, live: map[int]bool{}, sigs: make(chan os.Signal, 1), done: make(chan struct{})}
	signal.Notify(r.sigs, syscall.SIGCHLD)
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		for {
			select {
			case <-r.sigs:
				r.reap()
			case <-r.done:
				return
			}
		}
	}()
	return r, nil
}

// start runs start, which forks a child and returns its PID, so that the
// reaper cannot mistake the child for an orphan.
func (r *orphanReaper) start(start func() (int, error)) error {
	if r == nil {
		_, err := start()
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	pid, err := start()
	if err == nil {
		r.live[pid] = true
	}
	return err
}

// reaped records that os/exec has reaped the child pid.
func (r *orphanReaper) reaped(pid int) {
	if r == nil {
		return
	}
	r.mu.Lock()
	delete(r.live, pid)
	r.mu.Unlock()
}

// reap reaps every exited orphan re-parented to corral and returns how many.
func (r *orphanReaper) reap() int {
	if r == nil {
		return 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, pid := range zombieChildren() {
		if r.live[pid] {
			continue
		}
		var ws syscall.WaitStatus
		if got, err := syscall.Wait4(pid, &ws, syscall.WNOHANG, nil); err == nil && got == pid {
			n++
		}
	}
	return n
}

// isLive reports whether pid is a child started through os/exec.
func (r *orphanReaper) isLive(pid int) bool {
	if r == nil {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.live[pid]
}

// Close stops reaping. It may be called once.
func (r *orphanReaper) Close() {
	if r == nil {
		return
	}
	signal.Stop(r.sigs)
	close(r.done)
	r.wg.Wait()
}

// sweepMarked kills every process that carries the marker of instance and,
// unless server is empty, of that server, other than live servers, and then
// reaps the orphans among them. With server empty and a reaper, it also kills
// every orphan adopted by corral, marked or not: only corral's descendants can
// be re-parented to it. Each process is checked again once pinned (killPinned).
// Killing a process may orphan children of its own, so it sweeps until none is
// left. Where /proc does not show this process's PID namespace it finds
// nothing. It returns the PIDs it killed, each once: a process killed but
// not yet gone is found, and killed, again in the next round.
func sweepMarked(instance, server string, r *orphanReaper) []int {
	orphans := server == "" && r != nil
	var killed []int
	seen := map[int]bool{}
	for range 10 {
		candidates := markedProcesses(instance, server)
		if orphans {
			candidates = append(candidates, liveChildren()...)
		}
		found := 0
		for _, pid := range candidates {
			if r.isLive(pid) {
				continue
			}
			found++
			if killPinned(pid, func() bool { return sweepCandidate(pid, instance, server, orphans) && !r.isLive(pid) }) && !seen[pid] {
				seen[pid] = true
				killed = append(killed, pid)
			}
		}
		if found == 0 {
			break
		}
		r.reap()
	}
	r.reap()
	return killed
}

func pidList(pids []int) string {
	s := ""
	for i, p := range pids {
		if i > 0 {
			s += " "
		}
		s += strconv.Itoa(p)
	}
	return s
}
