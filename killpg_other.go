//go:build unix && !linux

package main

import "syscall"

// setPlatformProcAttr does nothing here: only Linux has a parent-death signal,
// so on this system a server outlives a corral killed with SIGKILL.
func setPlatformProcAttr(attr *syscall.SysProcAttr) {}

// waitExitedNoReap is not available here; the caller reaps first and signals
// the group afterwards, which leaves a small window in which the group's ID
// could be reused.
func waitExitedNoReap(pid int) error { return errNoWaitid }

var errNoWaitid = syscall.ENOSYS
