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
	"strconv"
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
// that leaves the process group or outlives corral.
const (
	envInstance = "CORRAL_INSTANCE" // the corral instance: "PID.START.RANDOM"
	envServer   = "CORRAL_SERVER"   // the server's name
)

// newInstanceID returns the marker of this corral instance: its PID and start
// time, by which a later corral tells whether it still runs, and random bits
// that set apart two gateways in one process (as in tests).
func newInstanceID() string {
	var b [4]byte
	rand.Read(b[:])
	start, _ := processStartTime(os.Getpid())
	return fmt.Sprintf("%d.%d.%s", os.Getpid(), start, hex.EncodeToString(b[:]))
}

// instanceRunning reports whether the corral instance with the given marker
// is still running: a process with its PID and start time exists.
func instanceRunning(instance string) bool {
	var pid int
	var start uint64
	var rest string
	if n, _ := fmt.Sscanf(instance, "%d.%d.%s", &pid, &start, &rest); n < 2 {
		return false
	}
	got, ok := processStartTime(pid)
	return ok && got == start
}

// markerEnv returns the marker variables for a server of instance.
func markerEnv(instance, server string) []string {
	return []string{envInstance + "=" + instance, envServer + "=" + server}
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
// be re-parented to it. Killing a process may orphan children of its own, so
// it sweeps until none is left. It returns the PIDs it killed.
func sweepMarked(instance, server string, r *orphanReaper) []int {
	var killed []int
	for range 10 {
		candidates := markedProcesses(instance, server)
		if server == "" && r != nil {
			candidates = append(candidates, liveChildren()...)
		}
		var found []int
		for _, pid := range candidates {
			if !r.isLive(pid) {
				found = append(found, pid)
			}
		}
		if len(found) == 0 {
			break
		}
		for _, pid := range found {
			if syscall.Kill(pid, syscall.SIGKILL) == nil {
				killed = append(killed, pid)
			}
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
