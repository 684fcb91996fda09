package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A server with both a cgroup (and limits) and a sandbox goes through one
// shim, which joins the cgroup and then applies the sandbox: the server
// runs in its cgroup, under its limit, in a network namespace of its own,
// with no_new_privs; and stopping it removes its cgroup.
func TestShimGivesOneServerItsCgroupAndItsSandbox(t *testing.T) {
	requireNetSandbox(t)
	needLimits(t, Limits{Pids: 64})
	tree := newCgroupTree(newInstanceID())
	t.Cleanup(func() {
		if err := tree.close(); err != nil {
			t.Errorf("removing the test's cgroups: %v", err)
		}
	})
	no, yes := false, true
	dir := stateDir(t)
	p, err := startProcess(processSpec{name: "both", command: fakeserverBin, args: fakeArgs(dir),
		stopGrace: time.Second, killGrace: time.Second, pipeDrain: 100 * time.Millisecond,
		env: append(os.Environ(), markerEnv("test-instance", "both")...), log: testLogger(t),
		cgroups: tree, limits: Limits{Pids: 64},
		sandbox: &SandboxConfig{Network: &no, NoNewPrivileges: &yes}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Stop(nil) })
	if p.cg == nil {
		t.Fatal("the server got no cgroup")
	}
	// The shim contains itself, then executes the server in its place.
	waitFor(t, 10*time.Second, "the shim to execute the server", func() bool {
		exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", p.pid))
		return exe == fakeserverBin
	})

	// In its cgroup: every directory lists it, and the pids one has the limit.
	for _, d := range p.cg.dirs {
		procs, err := os.ReadFile(filepath.Join(d, "cgroup.procs"))
		if err != nil || !slices.Contains(strings.Fields(string(procs)), strconv.Itoa(p.pid)) {
			t.Errorf("the server %d is not in its cgroup %s: cgroup.procs %q (%v)", p.pid, d, procs, err)
		}
		if max, err := os.ReadFile(filepath.Join(d, "pids.max")); err == nil && strings.TrimSpace(string(max)) != "64" {
			t.Errorf("%s/pids.max = %q, want 64", d, max)
		}
	}
	// In its sandbox: another network namespace, and no_new_privs.
	theirs, err1 := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", p.pid))
	ours, err2 := os.Readlink("/proc/self/ns/net")
	if err1 != nil || err2 != nil || theirs == ours {
		t.Errorf("the server's network namespace is %q (%v), corral's %q (%v): want another", theirs, err1, ours, err2)
	}
	if got := noNewPrivs(t, p.pid); got != "1" {
		t.Errorf("NoNewPrivs of the server = %s, want 1", got)
	}

	dirs := p.cg.dirs
	p.Stop(nil)
	for _, d := range dirs {
		if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the server's cgroup %s is still there after Stop: %v", d, err)
		}
	}
}
