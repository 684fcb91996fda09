//go:build unix && !linux

package main

import (
	"errors"
	"os"
	"syscall"
)

// On Unix systems other than Linux there is no parent-death signal, no child
// subreaper and no /proc: servers outlive a corral killed with SIGKILL, and
// descendants that leave their server's process group outlive the server.
// The README and docs/operations.md say so.

var errNotLinux = errors.New("only on Linux")

func setPlatformProcAttr(attr *syscall.SysProcAttr) {}

// waitExitedNoReap is not available here; the caller reaps first and signals
// the group afterwards, which leaves a small window in which the group's ID
// could be reused.
func waitExitedNoReap(pid int) error { return errNotLinux }

func becomeSubreaper() error { return errNotLinux }

func processStartTime(pid int) (uint64, bool) { return 0, false }

func selfIdentity() (instanceID, error) { return instanceID{pid: os.Getpid()}, errNotLinux }

func zombieChildren() []int { return nil }

func liveChildren() []int { return nil }

func markedProcesses(instance, server string) []int { return nil }

func sweepCandidate(pid int, instance, server string, orphans bool) bool { return false }

type leftover struct {
	pid      int
	instance string
	server   string
	cmdline  string
	killed   bool
	why      string
}

func killLeftovers(inherited string) ([]leftover, error) { return nil, nil }
