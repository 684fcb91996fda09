package main

import (
	"bytes"
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
// (prctl PR_SET_CHILD_SUBREAPER).
func becomeSubreaper() error {
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
// unless server is empty, of server.
func markedProcesses(instance, server string) []int {
	var pids []int
	for _, pid := range allPIDs() {
		inst, srv := markers(pid)
		if inst == instance && (server == "" || srv == server) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// leftover is a process left by a corral instance that no longer runs.
type leftover struct {
	pid      int
	instance string
	server   string
	cmdline  string
}

// killLeftovers kills the processes of this user that carry the marker of a
// corral instance that is no longer running: descendants that escaped their
// group and outlived a corral killed with SIGKILL. It returns what it killed.
// A process marked by a running instance is never touched.
func killLeftovers() []leftover {
	uid := uint32(os.Getuid())
	running := map[string]bool{}
	var killed []leftover
	for _, pid := range allPIDs() {
		var st syscall.Stat_t
		if syscall.Stat("/proc/"+strconv.Itoa(pid), &st) != nil || st.Uid != uid {
			continue
		}
		inst, srv := markers(pid)
		if inst == "" {
			continue
		}
		alive, seen := running[inst]
		if !seen {
			alive = instanceRunning(inst)
			running[inst] = alive
		}
		if alive {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
		if syscall.Kill(pid, syscall.SIGKILL) == nil {
			killed = append(killed, leftover{pid, inst, srv, strings.TrimSpace(string(bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '})))})
		}
	}
	return killed
}
