package main

// This file holds the start-time sweep of cgroups: those left by a corral
// that was killed with SIGKILL are emptied and removed, by the rules that
// the sweep of marked processes keeps (see sweeper in killpg_linux.go).

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// leftoverCgroup is the cgroup of a corral instance other than this one
// that the sweep emptied and removed or, when it could not prove it a
// leftover, left.
type leftoverCgroup struct {
	instance string
	killed   int    // processes killed in it
	why      string // why it was left; empty if swept
	err      error  // what went wrong removing it, if anything
}

// sweepLeftoverCgroups kills what is left in the cgroups of corral
// instances that no longer run and removes those cgroups, and logs what it
// did and what it left. inherited is the marker in corral's own environment,
// if any.
func sweepLeftoverCgroups(log *slog.Logger, inherited string) {
	self, err1 := os.ReadFile("/proc/self/cgroup")
	mounts, err2 := os.ReadFile("/proc/self/mountinfo")
	if err1 != nil || err2 != nil {
		return // containment is off, and says why once the gateway starts
	}
	t := parseCgroupTree("", string(self), string(mounts))
	if t.why != "" {
		return
	}
	s, err := newSweeper(inherited)
	if err != nil {
		log.Warn("not sweeping cgroups left by earlier corrals", "err", err)
		return
	}
	for _, l := range t.sweep(s) {
		switch {
		case l.why != "":
			log.Warn("left a cgroup of another corral: it is not proven a leftover", "instance", l.instance, "why", l.why)
		case l.err != nil:
			log.Warn("cannot remove the cgroup of a corral that is no longer running", "instance", l.instance, "killed", l.killed, "err", l.err)
		default:
			log.Warn("removed the cgroup of a corral that is no longer running", "instance", l.instance, "killed", l.killed)
		}
	}
}

// sweep judges every instance cgroup under corral's own cgroups, and
// empties and removes the leftovers among them.
func (t *cgroupTree) sweep(s *sweeper) []leftoverCgroup {
	killDir := t.killDir()
	entries, _ := os.ReadDir(killDir)
	var out []leftoverCgroup
	for _, e := range entries {
		marker, ok := strings.CutPrefix(e.Name(), cgroupPrefix)
		if !ok || !e.IsDir() {
			continue
		}
		root := filepath.Join(killDir, e.Name())
		why, candidate := s.judgeCgroup(marker, root)
		if !candidate {
			continue
		}
		l := leftoverCgroup{instance: marker, why: why}
		if why == "" {
			l.killed, l.err = t.removeInstance(marker)
		}
		out = append(out, l)
	}
	return out
}

// removeInstance kills every process in the cgroups of instance and removes
// them, in every hierarchy, and returns how many processes it killed.
func (t *cgroupTree) removeInstance(instance string) (int, error) {
	killed := 0
	var errs []error
	// First the kill, in the hierarchy that kills: a cgroup with processes
	// in it cannot be removed from any hierarchy.
	root := filepath.Join(t.killDir(), cgroupPrefix+instance)
	servers, _ := os.ReadDir(root)
	for _, srv := range servers {
		if srv.IsDir() {
			n, err := killCgroup(filepath.Join(root, srv.Name()), t.v2)
			killed += n
			errs = append(errs, err)
		}
	}
	for _, own := range t.ownDirs() {
		root := filepath.Join(own, cgroupPrefix+instance)
		servers, _ := os.ReadDir(root)
		for _, srv := range servers {
			if err := os.Remove(filepath.Join(root, srv.Name())); srv.IsDir() && err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, err)
			}
		}
		if err := os.Remove(root); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return killed, errors.Join(errs...)
}

// killDir returns corral's own cgroup in the hierarchy whose cgroups it
// kills: the v2 one, or the v1 freezer.
func (t *cgroupTree) killDir() string {
	if t.v2 {
		return t.own[""]
	}
	return t.own["freezer"]
}

// judgeCgroup decides about root, the cgroup of the instance with marker,
// as the sweeper judges a marked process: it reports false for a cgroup
// that is not a candidate at all (another user's, or a running instance's).
// Otherwise why says why the cgroup must be left, or is empty if it is
// proven a leftover: a cgroup of this boot and these namespaces, of an
// instance that no longer runs, neither the one whose marker corral
// inherited nor one that holds an ancestor of corral.
func (s *sweeper) judgeCgroup(marker, root string) (why string, candidate bool) {
	var st syscall.Stat_t
	if syscall.Stat(root, &st) != nil || st.Uid != s.uid {
		return "", false
	}
	inst, ok := parseInstanceID(marker)
	switch {
	case !ok:
		return "its name does not hold a marker that names a boot, PID namespace and start time", true
	case inst.boot != s.self.boot:
		return "its marker names another boot", true
	case inst.pidNS != s.self.pidNS || inst.timeNS != s.self.timeNS:
		return "its marker names another PID or time namespace, where this corral cannot tell whether that instance runs", true
	case s.instanceRunning(marker, inst):
		return "", false
	case marker == s.inherited:
		return "it is the cgroup of the corral whose marker this corral inherited: it may hold its parent or siblings", true
	}
	servers, _ := os.ReadDir(root)
	for _, srv := range servers {
		pids, _ := cgroupPIDs(filepath.Join(root, srv.Name()))
		if i := slices.IndexFunc(pids, func(pid int) bool { return s.ancestors[pid] }); i >= 0 {
			return "it holds an ancestor of this corral, PID " + strconv.Itoa(pids[i]), true
		}
	}
	return "", true
}
