//go:build unix && !linux

package main

import (
	"errors"
	"syscall"
)

// On Unix systems other than Linux there is no parent-death signal, no child
// subreaper and no /proc: servers outlive a corral killed with SIGKILL, and
// descendants that leave their server's process group outlive the server.
// The README says so.

var errNotLinux = errors.New("only on Linux")

func setPlatformProcAttr(attr *syscall.SysProcAttr) {}

// waitExitedNoReap is not available here; the caller reaps first and signals
// the group afterwards, which leaves a small window in which the group's ID
// could be reused.
func waitExitedNoReap(pid int) error { return errNotLinux }

func becomeSubreaper() error { return errNotLinux }

func processStartTime(pid int) (uint64, bool) { return 0, false }

func zombieChildren() []int { return nil }

func liveChildren() []int { return nil }

func markedProcesses(instance, server string) []int { return nil }

type leftover struct {
	pid      int
	instance string
	server   string
	cmdline  string
}

func killLeftovers() []leftover { return nil }
