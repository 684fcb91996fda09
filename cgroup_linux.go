package main

// This file holds the cgroups corral puts its servers in (Linux): finding
// where corral may create them, one per server under a root per corral
// instance, the limits written into them, the kill of a whole cgroup, and the
// kernel's record of a kill over the memory limit. Both cgroup v2 and the v1
// hierarchies are supported: v1 where a freezer hierarchy is mounted (a
// legacy or hybrid machine, whose controllers are there), else v2.

import (
	"bufio"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cgroupPrefix starts the name of the cgroup of a corral instance; the rest
// of the name is the instance's marker (see instanceID).
const cgroupPrefix = "corral-"

// cgroupKillWait bounds the wait for a killed cgroup to empty.
const cgroupKillWait = 5 * time.Second

// cgroupTree is where one corral instance creates the cgroups of its
// servers: under corral's own cgroup, in each hierarchy it uses, a cgroup
// named cgroupPrefix + instance holds one cgroup per server. A nil
// *cgroupTree, or one whose why is set, creates none. Its methods are safe
// for concurrent use: they only read its fields (escapes has a lock of its
// own).
type cgroupTree struct {
	instance string
	v2       bool
	// own maps each controller corral uses to corral's own cgroup in the
	// hierarchy that has it: "freezer", "memory", "pids" and "cpu" on v1;
	// on v2, "" maps to the one cgroup, and each controller corral's cgroup
	// may pass on (cgroup.controllers) maps to it too.
	own map[string]string
	// procPaths maps the same keys as own to corral's own cgroup as
	// /proc/PID/cgroup names it.
	procPaths map[string]string
	why       string // why corral cannot create cgroups; empty when it can

	escapes *escapeWatch // finds and kills the processes that leave their server's cgroup
}

// newCgroupTree returns the tree of instance on this machine, read from
// /proc/self/cgroup and /proc/self/mountinfo, after checking that corral can
// create a cgroup there. Where it cannot, the tree's why says so.
func newCgroupTree(instance string) *cgroupTree {
	if _, ok := parseInstanceID(instance); !ok {
		return &cgroupTree{instance: instance, why: "corral cannot read its own identity from /proc, so no later corral could prove the cgroups it leaves leftovers and remove them"}
	}
	self, err1 := os.ReadFile("/proc/self/cgroup")
	mounts, err2 := os.ReadFile("/proc/self/mountinfo")
	if err := errors.Join(err1, err2); err != nil {
		return &cgroupTree{instance: instance, why: fmt.Sprintf("cannot read this process's cgroups: %v", err)}
	}
	t := parseCgroupTree(instance, string(self), string(mounts))
	if t.why == "" {
		t.probe()
	}
	return t
}

// parseCgroupTree returns the tree of instance from the text of
// /proc/self/cgroup and /proc/self/mountinfo, unprobed.
func parseCgroupTree(instance, self, mountinfo string) *cgroupTree {
	t := &cgroupTree{instance: instance, own: map[string]string{}, procPaths: map[string]string{}, escapes: &escapeWatch{}}
	paths := parseProcCgroup(self)
	v1 := map[string]string{}
	var v2 string
	for line := range strings.Lines(mountinfo) {
		pre, post, ok := strings.Cut(strings.TrimSpace(line), " - ")
		f, g := strings.Fields(pre), strings.Fields(post)
		if !ok || len(f) < 5 || len(g) < 3 {
			continue
		}
		root, mnt := f[3], f[4]
		switch g[0] {
		case "cgroup2":
			if p, ok := paths[""]; ok && v2 == "" {
				v2 = underMount(mnt, root, p)
			}
		case "cgroup":
			for _, c := range strings.Split(g[2], ",") {
				if p, ok := paths[c]; ok && slices.Contains([]string{"freezer", "memory", "pids", "cpu"}, c) && v1[c] == "" {
					v1[c] = underMount(mnt, root, p)
				}
			}
		}
	}
	switch {
	case v1["freezer"] != "":
		for c, dir := range v1 {
			if dir != "" {
				t.own[c] = dir
				t.procPaths[c] = paths[c]
			}
		}
	case v2 != "":
		t.v2 = true
		t.own[""] = v2
		t.procPaths[""] = paths[""]
	default:
		t.why = "no cgroup hierarchy corral can use is mounted (neither cgroup v2 nor a v1 freezer hierarchy)"
	}
	return t
}

// parseProcCgroup returns the cgroups that the text of a /proc/PID/cgroup
// file names, by controller on v1 and by "" on v2.
func parseProcCgroup(text string) map[string]string {
	paths := map[string]string{}
	for line := range strings.Lines(text) {
		f := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if len(f) != 3 {
			continue
		}
		if f[0] == "0" && f[1] == "" {
			paths[""] = f[2]
			continue
		}
		for _, c := range strings.Split(f[1], ",") {
			paths[c] = f[2]
		}
	}
	return paths
}

// underMount returns the directory of cgroup path, as /proc/self/cgroup
// names it, in a hierarchy mounted at mnt from its cgroup root; or "" where
// corral's cgroup is outside the mounted part.
func underMount(mnt, root, path string) string {
	rel, ok := strings.CutPrefix(path, root)
	if !ok || rel != "" && root != "/" && rel[0] != '/' {
		return ""
	}
	return filepath.Join(mnt, rel)
}

// probe checks that corral can create its instance's cgroup in every
// hierarchy, by creating it and removing it again, and records the
// controllers a v2 tree may pass on. On failure it sets why.
func (t *cgroupTree) probe() {
	for _, own := range t.ownDirs() {
		dir := filepath.Join(own, cgroupPrefix+t.instance)
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			t.why = fmt.Sprintf("cannot create cgroups under %s: %v (run corral as root, or in a cgroup delegated to its user: see docs/operations.md#containment)", own, err)
			return
		}
		_, kerr := os.Stat(filepath.Join(dir, "cgroup.kill"))
		os.Remove(dir)
		if t.v2 && kerr != nil {
			t.why = "this kernel's cgroup v2 has no cgroup.kill (Linux 5.14 and later have it), so corral cannot kill a cgroup at once"
			return
		}
	}
	if t.v2 {
		data, _ := os.ReadFile(filepath.Join(t.own[""], "cgroup.controllers"))
		for _, c := range strings.Fields(string(data)) {
			t.own[c] = t.own[""]
			t.procPaths[c] = t.procPaths[""]
		}
	}
}

// ownDirs returns corral's own cgroups, one per hierarchy, sorted.
func (t *cgroupTree) ownDirs() []string {
	var dirs []string
	for _, d := range t.own {
		if !slices.Contains(dirs, d) {
			dirs = append(dirs, d)
		}
	}
	slices.Sort(dirs)
	return dirs
}

// roots returns the directories of the instance's cgroup, one per
// hierarchy, the one that kills first; none where the tree is off.
func (t *cgroupTree) roots() []string {
	if !t.on() {
		return nil
	}
	roots := []string{filepath.Join(t.killDir(), cgroupPrefix+t.instance)}
	for _, own := range t.ownDirs() {
		if own != t.killDir() {
			roots = append(roots, filepath.Join(own, cgroupPrefix+t.instance))
		}
	}
	return roots
}

// describe says, for the log and -check, whether and how servers are
// contained.
func (t *cgroupTree) describe() string {
	if t == nil {
		return "off: not asked for"
	}
	if t.why != "" {
		return "off: " + t.why
	}
	if t.v2 {
		var cs []string
		for c := range t.own {
			if c != "" {
				cs = append(cs, c)
			}
		}
		slices.Sort(cs)
		return fmt.Sprintf("each server in a cgroup v2 of its own under %s (controllers for limits: %s)", t.own[""], cmpOrNone(strings.Join(cs, ", ")))
	}
	var cs []string
	for c, d := range t.own {
		cs = append(cs, c+" "+d)
	}
	slices.Sort(cs)
	return "each server in a cgroup of its own in the cgroup v1 hierarchies " + strings.Join(cs, ", ")
}

// summary says in a few words how servers are contained, for the line
// corral logs at start: "cgroup v2 (delegated), limits: memory, pids", or
// "off" (describe says why, and where).
func (t *cgroupTree) summary() string {
	if !t.on() {
		return "off"
	}
	version := "cgroup v1"
	if t.v2 {
		version = "cgroup v2"
		if os.Geteuid() != 0 {
			version += " (delegated)"
		}
	}
	var cs []string
	for c := range t.own {
		if c != "" && c != "freezer" {
			cs = append(cs, c)
		}
	}
	slices.Sort(cs)
	return version + ", limits: " + cmpOrNone(strings.Join(cs, ", "))
}

func cmpOrNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// on reports whether corral puts its servers in cgroups.
func (t *cgroupTree) on() bool { return t != nil && t.why == "" }

// enforceable returns an error unless every limit of l can be enforced.
func (t *cgroupTree) enforceable(l Limits) error {
	if l.IsZero() {
		return nil
	}
	if !t.on() {
		return fmt.Errorf("%s cannot be enforced: corral cannot put servers in cgroups here: %s; remove the limits, or give corral a cgroup (docs/operations.md#containment)",
			l.set(), strings.TrimPrefix(t.describe(), "off: "))
	}
	for _, c := range l.controllers() {
		if t.own[c] == "" {
			return fmt.Errorf("limits cannot be enforced: the %s controller is not available to corral's cgroup; remove that limit, or enable the controller (docs/operations.md#containment)", c)
		}
	}
	return nil
}

// serverCgroup is the cgroup of one run of a server: a directory in each
// hierarchy it uses. Its methods are not safe for concurrent use; the
// process that owns it calls them in turn.
type serverCgroup struct {
	dirs     []string // every directory, the one that kills first
	dirOf    func(controller string) string
	memDir   string // where the memory controller's files are; empty without a memory limit
	memLimit int64
	v2       bool
	oomBase  int64 // the OOM kill count when the run started
}

// create creates the cgroup of server, with limits l, and returns it; or
// nil, and no error, where the tree puts no server in a cgroup and l sets no
// limit.
func (t *cgroupTree) create(server string, l Limits) (*serverCgroup, error) {
	if err := t.enforceable(l); err != nil || !t.on() {
		return nil, err
	}
	cg := &serverCgroup{v2: t.v2, memLimit: l.memoryBytes()}
	cg.dirOf = func(c string) string { return filepath.Join(t.own[c], cgroupPrefix+t.instance, server) }
	want := append([]string{"freezer"}, l.controllers()...)
	if t.v2 {
		want = []string{""}
	}
	for _, c := range want {
		if dir := cg.dirOf(c); !slices.Contains(cg.dirs, dir) {
			cg.dirs = append(cg.dirs, dir)
		}
	}
	if l.Memory != "" {
		cg.memDir = cg.dirOf("memory")
	}
	if err := cg.make(t, l); err != nil {
		cg.remove()
		return nil, fmt.Errorf("creating its cgroup: %w", err)
	}
	cg.oomBase = cg.oomKills()
	return cg, nil
}

// make creates the cgroup's directories and writes its limits.
func (cg *serverCgroup) make(t *cgroupTree, l Limits) error {
	for _, dir := range cg.dirs {
		if t.v2 {
			if err := enableControllers(filepath.Dir(dir), l.controllers()); err != nil {
				return err
			}
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	for _, w := range limitWrites(cg.dirOf, l, t.v2) {
		if err := os.WriteFile(w.file, []byte(w.value), 0); err != nil && !(w.optional && errors.Is(err, os.ErrNotExist)) {
			return fmt.Errorf("setting %s: %w", w.file, err)
		}
	}
	return nil
}

// enableControllers lets the children of root, a v2 cgroup of corral's
// instance, use controllers: root's parent (corral's own cgroup) passes them
// to root, and root to its children.
func enableControllers(root string, controllers []string) error {
	if len(controllers) == 0 {
		return nil
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return err
	}
	line := "+" + strings.Join(controllers, " +")
	for _, dir := range []string{filepath.Dir(root), root} {
		have, _ := os.ReadFile(filepath.Join(dir, "cgroup.subtree_control"))
		missing := false
		for _, c := range controllers {
			missing = missing || !slices.Contains(strings.Fields(string(have)), c)
		}
		if !missing {
			continue
		}
		err := os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte(line), 0)
		if errors.Is(err, syscall.EBUSY) && dir != root {
			// Where corral is alone in its cgroup it moves out of the way
			// (or a server started at the same time has moved it).
			leaveForLeaf(dir)
			err = os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte(line), 0)
		}
		if errors.Is(err, syscall.EBUSY) {
			return fmt.Errorf("cannot pass %s on from %s, which holds processes other than corral: start corral alone in a cgroup of its own, e.g. a systemd unit with Delegate=yes (docs/operations.md#containment)", line, dir)
		} else if err != nil {
			return fmt.Errorf("passing %s on from %s: %w", line, dir, err)
		}
	}
	return nil
}

// supervisorLeaf is the child of corral's own v2 cgroup that corral moves
// itself into, so that its own cgroup holds no process and may pass
// controllers on to the cgroups of its servers.
const supervisorLeaf = "corral.supervisor"

// leaveForLeaf moves this process from dir, its own v2 cgroup, into
// dir/supervisorLeaf, if it is the only process in dir: the kernel lets a
// cgroup pass controllers on to its children only while it holds no
// process. (A systemd unit with Delegate=yes starts corral alone in the
// unit's cgroup.)
func leaveForLeaf(dir string) error {
	pids, err := cgroupPIDs(dir)
	if err != nil {
		return err
	}
	if len(pids) != 1 || pids[0] != os.Getpid() {
		return fmt.Errorf("%s holds other processes than corral: %s", dir, pidList(pids))
	}
	leaf := filepath.Join(dir, supervisorLeaf)
	if err := os.Mkdir(leaf, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	return joinCgroup(leaf)
}

// cgroupWrite is a value written into a cgroup file.
type cgroupWrite struct {
	file, value string
	optional    bool // the file may be missing (swap accounting is off)
}

// limitWrites returns the writes that set limits l on the cgroup of a
// server, whose directory in the hierarchy of each controller is dirOf(c)
// (the same one for every controller on v2). Memory counts swap, so that a
// server cannot get past its limit by swapping: v1's memsw limit is the same,
// and v2's swap limit zero.
func limitWrites(dirOf func(controller string) string, l Limits, v2 bool) []cgroupWrite {
	var ws []cgroupWrite
	add := func(c, file, value string, optional bool) {
		ws = append(ws, cgroupWrite{file: filepath.Join(dirOf(c), file), value: value, optional: optional})
	}
	if n := l.memoryBytes(); n > 0 {
		size := strconv.FormatInt(n, 10)
		if v2 {
			add("memory", "memory.max", size, false)
			add("memory", "memory.swap.max", "0", true)
		} else {
			add("memory", "memory.limit_in_bytes", size, false)
			add("memory", "memory.memsw.limit_in_bytes", size, true)
		}
	}
	if l.Pids > 0 {
		add("pids", "pids.max", strconv.Itoa(l.Pids), false)
	}
	if l.CPU > 0 {
		const period = 100000 // microseconds
		quota := strconv.Itoa(int(l.CPU*period + 0.5))
		if v2 {
			add("cpu", "cpu.max", quota+" "+strconv.Itoa(period), false)
		} else {
			add("cpu", "cpu.cfs_period_us", strconv.Itoa(period), false)
			add("cpu", "cpu.cfs_quota_us", quota, false)
		}
	}
	return ws
}

// oomKills returns how many processes of the cgroup the kernel has killed
// for going over its memory limit: oom_kill in memory.events (v2) or
// memory.oom_control (v1). It is 0 without a memory limit.
func (cg *serverCgroup) oomKills() int64 {
	if cg.memDir == "" {
		return 0
	}
	file := "memory.oom_control"
	if cg.v2 {
		file = "memory.events"
	}
	data, err := os.ReadFile(filepath.Join(cg.memDir, file))
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(data)) {
		if v, ok := strings.CutPrefix(line, "oom_kill "); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}

// overMemory reports whether the kernel killed a process of the cgroup
// for going over its memory limit since the run started.
func (cg *serverCgroup) overMemory() bool {
	return cg != nil && cg.oomKills() > cg.oomBase
}

// finish kills every process left in the cgroup, waits for it to empty,
// and removes it. It returns whether the kernel killed a process of it for
// going over its memory limit during the run, read before the cgroup goes.
// A nil *serverCgroup does nothing.
func (cg *serverCgroup) finish(log *slog.Logger) (overMemory bool) {
	if cg == nil {
		return false
	}
	overMemory = cg.overMemory()
	if killed, err := killCgroup(cg.dirs[0], cg.v2); err != nil {
		log.Error("cannot kill what is left in the server's cgroup", "cgroup", cg.dirs[0], "err", err)
	} else if killed > 0 {
		log.Warn("killed processes the server left in its cgroup", "count", killed)
	}
	if err := cg.remove(); err != nil {
		log.Warn("cannot remove the server's cgroup", "err", err)
	}
	return overMemory
}

// remove removes the cgroup's directories; one already gone is no error.
func (cg *serverCgroup) remove() error {
	if cg == nil {
		return nil
	}
	var errs []error
	deadline := time.Now().Add(cgroupKillWait)
	for _, dir := range cg.dirs {
		err := os.Remove(dir)
		// On v2 a cgroup stays populated until its last process is reaped,
		// not only exited: a descendant that escaped is reaped by corral's
		// orphan reaper, which may not have got to it yet.
		for errors.Is(err, syscall.EBUSY) && time.Now().Before(deadline) {
			time.Sleep(2 * time.Millisecond)
			err = os.Remove(dir)
		}
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// close stops the watch for escapes and looks a last time (see
// watchEscapes), and removes the instance's cgroup in every hierarchy, once
// corral has stopped every server. A nil *cgroupTree does nothing.
func (t *cgroupTree) close() error {
	if !t.on() {
		return nil
	}
	t.escapes.close(t)
	var errs []error
	for _, own := range t.ownDirs() {
		if err := os.Remove(filepath.Join(own, cgroupPrefix+t.instance)); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// killCgroup kills every process in the cgroup dir and waits, at most
// cgroupKillWait, for it to be empty. It returns how many processes it found
// there. On v2 the kernel kills them all at once (cgroup.kill). On v1, dir is
// the cgroup in the freezer hierarchy, and freezeAndKill kills them.
func killCgroup(dir string, v2 bool) (int, error) {
	pids, err := cgroupPIDs(dir)
	if errors.Is(err, os.ErrNotExist) || err == nil && len(pids) == 0 {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	deadline := time.Now().Add(cgroupKillWait)
	for time.Now().Before(deadline) {
		if v2 {
			err = os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0)
		} else {
			err = freezeAndKill(dir, deadline)
		}
		if err != nil {
			return len(pids), err
		}
		// The killed die at once, unless one is in the middle of a system
		// call it cannot leave (a disk or network file system): then wait,
		// and kill what may have been started since.
		for range 50 {
			if left, err := cgroupPIDs(dir); err != nil || len(left) == 0 {
				return len(pids), nil
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	left, _ := cgroupPIDs(dir)
	return len(pids), fmt.Errorf("%d processes still in the cgroup %s after SIGKILL: %s", len(left), cgroupKillWait, pidList(left))
}

// freezeAndKill freezes the v1 cgroup dir, sends SIGKILL to every process in
// it, and thaws it. A frozen process neither forks nor exits, so each PID
// read from cgroup.procs once the cgroup is frozen names a process of the
// cgroup until the SIGKILL reaches it, and none is missed; once thawed, they
// die. Should the cgroup not freeze by deadline (a process stuck in the
// kernel), it kills what it sees all the same.
func freezeAndKill(dir string, deadline time.Time) error {
	state := filepath.Join(dir, "freezer.state")
	if err := os.WriteFile(state, []byte("FROZEN"), 0); err != nil {
		return err
	}
	defer os.WriteFile(state, []byte("THAWED"), 0)
	for time.Now().Before(deadline) {
		if s, _ := os.ReadFile(state); strings.TrimSpace(string(s)) == "FROZEN" {
			break
		}
		time.Sleep(time.Millisecond)
	}
	pids, err := cgroupPIDs(dir)
	for _, pid := range pids {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	return err
}

// cgroupPIDs returns the processes in the cgroup dir, sorted, each once
// (v1's cgroup.procs may list one several times).
func cgroupPIDs(dir string) ([]int, error) {
	f, err := os.Open(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var pids []int
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if pid, err := strconv.Atoi(strings.TrimSpace(sc.Text())); err == nil && pid > 0 {
			pids = append(pids, pid)
		}
	}
	slices.Sort(pids)
	return slices.Compact(pids), sc.Err()
}
