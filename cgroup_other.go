//go:build !linux

package main

import (
	"errors"
	"log/slog"
	"time"
)

// cgroupTree stands for the cgroups of a corral instance, which exist only on
// Linux (cgroup_linux.go): here it creates none.
type cgroupTree struct{}

func newCgroupTree(instance string) *cgroupTree { return &cgroupTree{} }

func (t *cgroupTree) describe() string { return "off: cgroups are a Linux feature" }

func (t *cgroupTree) summary() string { return "off" }

func (t *cgroupTree) on() bool { return false }

// enforceable returns an error unless l sets no limit.
func (t *cgroupTree) enforceable(l Limits) error {
	if l.IsZero() {
		return nil
	}
	return errors.New(l.set() + " cannot be enforced: cgroups are a Linux feature; remove the limits")
}

func (t *cgroupTree) create(server string, l Limits) (*serverCgroup, error) {
	return nil, t.enforceable(l)
}

func (t *cgroupTree) close() error { return nil }

func (t *cgroupTree) watchEscapes(log *slog.Logger, every time.Duration) {}

func (t *cgroupTree) tie(pid int, server string) {}

func (t *cgroupTree) killEscapees() {}

const escapeWatchEvery = time.Second

func (t *cgroupTree) roots() []string { return nil }

func killCgroup(dir string, v2 bool) (int, error) { return 0, nil }

// serverCgroup is never created here.
type serverCgroup struct {
	dirs     []string
	memLimit int64
}

func (cg *serverCgroup) finish(log *slog.Logger) bool { return false }

func (cg *serverCgroup) remove() error { return nil }

func sweepLeftoverCgroups(log *slog.Logger, inherited string) {}
