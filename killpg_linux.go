package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"unsafe"
)

// setPlatformProcAttr asks the kernel to SIGKILL the child when the thread
// that started it exits. startProcess starts every child from a goroutine
// locked to its thread for the child's whole life (go.dev/issue/27505), so the
// signal comes exactly when corral itself dies, even by SIGKILL.
func setPlatformProcAttr(attr *syscall.SysProcAttr) {
	attr.Pdeathsig = syscall.SIGKILL
}

// waitExitedNoReap blocks until the process pid has exited, without reaping
// it. While the leader is an unreaped zombie its process group ID cannot be
// reused, so corral can still signal the group safely.
func waitExitedNoReap(pid int) error {
	const (
		pPID    = 1          // P_PID
		wExited = 0x4        // WEXITED
		wNoWait = 0x01000000 // WNOWAIT
	)
	var info [128]byte // siginfo_t
	for {
		_, _, errno := syscall.Syscall6(syscall.SYS_WAITID, pPID, uintptr(pid),
			uintptr(unsafe.Pointer(&info[0])), wExited|wNoWait, 0, 0)
		if errno == syscall.EINTR {
			continue
		}
		if errno != 0 {
			return errno
		}
		return nil
	}
}

// becomeSubreaper makes this process the reaper of orphaned descendants
// (prctl PR_SET_CHILD_SUBREAPER). It refuses where /proc does not show this
// process's PID namespace: the reaper finds its orphans there, and would wait
// for and sweep the wrong PIDs.
func becomeSubreaper() error {
	if err := checkProc(); err != nil {
		return err
	}
	const prSetChildSubreaper = 36
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); errno != 0 {
		return errno
	}
	return nil
}

// procStat is what corral reads of /proc/PID/stat.
type procStat struct {
	state byte
	ppid  int
	start uint64 // in clock ticks since boot
}

func readStat(pid int) (procStat, bool) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, false
	}
	// pid (comm) state ppid ... ; comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return procStat{}, false
	}
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 20 {
		return procStat{}, false
	}
	ppid, _ := strconv.Atoi(f[1])
	start, _ := strconv.ParseUint(f[19], 10, 64)
	return procStat{state: f[0][0], ppid: ppid, start: start}, true
}

// processStartTime returns when process pid started, in clock ticks since
// boot; with the PID it names one process for the life of the system.
func processStartTime(pid int) (uint64, bool) {
	s, ok := readStat(pid)
	return s.start, ok
}

// allPIDs lists the processes in /proc, other than this one.
func allPIDs() []int {
	entries, _ := os.ReadDir("/proc")
	self := os.Getpid()
	var pids []int
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil && pid != self {
			pids = append(pids, pid)
		}
	}
	return pids
}

// zombieChildren lists this process's children that have exited and wait to
// be reaped.
func zombieChildren() []int { return children(true) }

// liveChildren lists this process's children that have not exited.
func liveChildren() []int { return children(false) }

func children(zombies bool) []int {
	self := os.Getpid()
	var pids []int
	for _, pid := range allPIDs() {
		if s, ok := readStat(pid); ok && s.ppid == self && (s.state == 'Z') == zombies {
			pids = append(pids, pid)
		}
	}
	return pids
}

// checkProc returns an error unless /proc is mounted for this process's PID
// namespace. Only then are the PIDs in /proc the ones kill and wait take: a
// /proc of an ancestor namespace (unshare --pid without --mount-proc) shows
// every process under another PID, and this one's NSpid line lists one PID
// per namespace from that of /proc down to its own.
func checkProc() error {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return fmt.Errorf("reading /proc: %w", err)
	}
	for line := range strings.Lines(string(data)) {
		if v, ok := strings.CutPrefix(line, "NSpid:"); ok {
			if f := strings.Fields(v); len(f) == 1 && f[0] == strconv.Itoa(os.Getpid()) {
				return nil
			}
			return fmt.Errorf("/proc is mounted for another PID namespace than corral's (NSpid:%s); mount one for it (unshare --mount-proc)", strings.TrimRight(v, "\n"))
		}
	}
	return errors.New("/proc/self/status has no NSpid line (Linux before 4.1), so corral cannot tell whether /proc shows its own PID namespace")
}

// selfNamespace returns the namespace of this process of the given kind ("pid",
// "time") as "DEV:INODE", the pair that names a namespace while it exists
// (namespaces(7)), or "none" where the kernel has no namespaces of that kind.
func selfNamespace(kind string) (string, error) {
	var st syscall.Stat_t
	err := syscall.Stat("/proc/self/ns/"+kind, &st)
	if errors.Is(err, syscall.ENOENT) && kind != "pid" {
		return "none", nil
	}
	if err != nil {
		return "", fmt.Errorf("reading the %s namespace: %w", kind, err)
	}
	return fmt.Sprintf("%d:%d", st.Dev, st.Ino), nil
}

// selfIdentity returns this process's instanceID, without a tag. Where /proc
// is missing or shows another PID namespace it returns the PID alone and an
// error.
func selfIdentity() (instanceID, error) {
	id := instanceID{pid: os.Getpid()}
	if err := checkProc(); err != nil {
		return id, err
	}
	boot, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return id, fmt.Errorf("reading the boot ID: %w", err)
	}
	st, ok := readStat(id.pid)
	if !ok {
		return id, errors.New("reading this process's start time from /proc")
	}
	pidNS, err := selfNamespace("pid")
	if err != nil {
		return id, err
	}
	timeNS, err := selfNamespace("time")
	if err != nil {
		return id, err
	}
	id.start, id.boot, id.pidNS, id.timeNS = st.start, strings.TrimSpace(string(boot)), pidNS, timeNS
	return id, nil
}

// markers returns the corral marker variables in the environment of pid.
func markers(pid int) (instance, server string) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		return "", ""
	}
	for _, kv := range bytes.Split(data, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, []byte(envInstance+"=")); ok {
			instance = string(v)
		} else if v, ok := bytes.CutPrefix(kv, []byte(envServer+"=")); ok {
			server = string(v)
		}
	}
	return instance, server
}

// markedProcesses lists the processes that carry the marker of instance and,
// unless server is empty, of server. It lists none where /proc does not show
// this process's PID namespace.
func markedProcesses(instance, server string) []int {
	if checkProc() != nil {
		return nil
	}
	var pids []int
	for _, pid := range allPIDs() {
		if sweepCandidate(pid, instance, server, false) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// sweepCandidate reports whether pid carries the marker of instance and,
// unless server is empty, of server; or, if orphans, whether it is a live
// child of this process.
func sweepCandidate(pid int, instance, server string, orphans bool) bool {
	if inst, srv := markers(pid); inst == instance && (server == "" || srv == server) {
		return true
	}
	if !orphans {
		return false
	}
	s, ok := readStat(pid)
	return ok && s.ppid == os.Getpid() && s.state != 'Z'
}

// leftover is a process marked by a corral instance other than this one that
// the leftover sweep killed or, when it could not prove it a leftover, left.
type leftover struct {
	pid      int
	instance string
	server   string
	cmdline  string
	killed   bool
	why      string // why it was left; empty if killed
}

// killLeftovers kills the processes of this user left by a corral instance
// that no longer runs (see sweeper) and returns those it killed and those it
// left in doubt. inherited is the marker in corral's own environment, if any.
// It kills nothing, and returns an error, where this process cannot read its
// own identity from /proc.
func killLeftovers(inherited string) ([]leftover, error) {
	s, err := newSweeper(inherited)
	if err != nil {
		return nil, err
	}
	return s.sweep(allPIDs()), nil
}

// sweeper judges which processes are leftovers: descendants of a corral's
// server that escaped its process group and outlived a corral killed with
// SIGKILL. It kills a process only on proof, and leaves any other in doubt:
//
//   - The process must belong to this user and carry both markers. Each
//     corral puts a fresh instance marker in its servers' environments, so a
//     process carries one by inheriting it from a corral's server (or because
//     a process of this same user copied it on purpose, which the sweep
//     cannot tell apart and which gains that user nothing it lacked).
//   - The marker must name this boot, and this sweeper's PID and time
//     namespaces, and /proc must show this PID namespace (checkProc): only
//     then do the instance's PID and start time name one process here. No
//     process survives a reboot, so a marker of another boot was not inherited
//     from a server of this one.
//   - The instance must not be running: no process here has its PID and start
//     time. A PID with a start time names one process for the boot.
//   - The process must have started no earlier than the instance: otherwise
//     it cannot descend from it.
//   - It must not be this process or an ancestor of it, nor carry the marker
//     this process inherited itself: then corral was started from under that
//     marker (a shell started by a server of a corral since killed, or a
//     marker set by hand), and its parents and siblings share it.
//
// Each process is pinned before it is judged (killPinned), so a PID reused
// in between is never signalled.
type sweeper struct {
	self      instanceID
	uid       uint32
	inherited string
	ancestors map[int]bool    // this process and its ancestors
	running   map[string]bool // instance marker -> whether it runs, as judged
}

// newSweeper returns a sweeper for this process, whose environment carried
// the marker inherited, if any.
func newSweeper(inherited string) (*sweeper, error) {
	self, err := selfIdentity()
	if err != nil {
		return nil, err
	}
	s := &sweeper{self: self, uid: uint32(os.Getuid()), inherited: inherited, ancestors: map[int]bool{}, running: map[string]bool{}}
	for pid := self.pid; pid > 0 && !s.ancestors[pid]; {
		s.ancestors[pid] = true
		st, ok := readStat(pid)
		if !ok {
			break
		}
		pid = st.ppid
	}
	return s, nil
}

// sweep judges each of pids and kills the leftovers among them. It returns
// what it killed and what it left in doubt; processes of other users,
// unmarked ones and those of running instances are not returned.
func (s *sweeper) sweep(pids []int) []leftover {
	var out []leftover
	for _, pid := range pids {
		if inst, _ := markers(pid); inst == "" {
			continue
		}
		var l leftover
		var candidate bool
		killed := killPinned(pid, func() bool {
			l, candidate = s.judge(pid)
			return candidate && l.why == ""
		})
		if !candidate {
			continue
		}
		if l.why == "" && !killed {
			continue // gone before it was killed
		}
		l.killed = killed
		out = append(out, l)
	}
	return out
}

// judge decides about process pid. It reports false for a process that is
// not a candidate at all: another user's, unmarked, gone, or marked by an
// instance that runs. Otherwise l.why says why the process must be left, or
// is empty if it is proven a leftover.
func (s *sweeper) judge(pid int) (l leftover, candidate bool) {
	var st syscall.Stat_t
	if syscall.Stat("/proc/"+strconv.Itoa(pid), &st) != nil || st.Uid != s.uid {
		return l, false
	}
	stat, ok := readStat(pid)
	if !ok {
		return l, false
	}
	l.pid = pid
	l.instance, l.server = markers(pid)
	if l.instance == "" {
		return l, false
	}
	cmdline, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	l.cmdline = strings.TrimSpace(string(bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '})))
	inst, ok := parseInstanceID(l.instance)
	switch {
	case !ok:
		l.why = "its marker does not name a boot, PID namespace and start time (an older corral's, or not corral's)"
	case inst.boot != s.self.boot:
		l.why = "its marker names another boot, so no server of this boot gave it"
	case inst.pidNS != s.self.pidNS || inst.timeNS != s.self.timeNS:
		l.why = "its marker names another PID or time namespace, where this corral cannot tell whether that instance runs"
	case s.instanceRunning(l.instance, inst):
		return l, false
	case l.instance == s.inherited:
		l.why = "it carries the marker this corral inherited: it may be its parent or sibling"
	case s.ancestors[pid]:
		l.why = "it is an ancestor of this corral"
	case l.server == "":
		l.why = "it has no " + envServer + ", which every corral server has"
	case stat.start < inst.start:
		l.why = "it started before the instance its marker names"
	}
	return l, true
}

// instanceRunning reports whether the instance with marker m, which names
// this boot and these namespaces, runs: a process has its PID and start time.
func (s *sweeper) instanceRunning(m string, id instanceID) bool {
	running, seen := s.running[m]
	if !seen {
		start, ok := processStartTime(id.pid)
		running = ok && start == id.start
		s.running[m] = running
	}
	return running
}
