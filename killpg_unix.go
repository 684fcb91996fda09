//go:build unix

package main

import (
	"errors"
	"fmt"
	"os/exec"
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
