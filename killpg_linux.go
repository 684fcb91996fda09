package main

import (
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
