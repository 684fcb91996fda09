package main

// This file holds the watch for processes that leave their server's cgroup.
// A server runs as corral's user, and where that user may create cgroups
// (root, or a delegated subtree) it may also write the cgroup.procs of
// corral's own cgroup, or of another server's: a process that moves there
// leaves its server's limits and is not killed with its server's cgroup. The
// kernel offers no event for such a move, so corral looks: every
// escapeWatchEvery, as each server's stop begins, and once more when corral
// stops, and kills what it finds.

import (
	"bytes"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// escapeWatchEvery is how often corral looks for processes that left their
// server's cgroup: the longest such a process runs before it is killed,
// while corral runs.
const escapeWatchEvery = time.Second

// procKey names one process for the life of the system: its PID and its
// start time.
type procKey struct {
	pid   int
	start uint64
}

// escapeWatch finds the processes that left the cgroup of the server they
// descend from, and kills them. A process descends from server S when it
// was started as S's process (tie), or is in S's cgroup, or was seen there
// by an earlier look, or its parent descends from S; it has left when one
// of its threads is outside S's cgroup in a hierarchy where S has one. It
// judges only processes it can tie to a server: corral's other descendants
// (prerequisites, and orphans whose tie to a server it never saw) are left
// alone. Its methods are safe for concurrent use and on a nil
// *escapeWatch, which does nothing.
type escapeWatch struct {
	mu     sync.Mutex
	log    *slog.Logger       // nil until start: no look before
	origin map[procKey]string // the server each process seen descends from
	judged map[procKey]bool   // escapees already killed, or that corral could not kill: logged once
	stop   chan struct{}      // closed by close; nil once closed
	done   chan struct{}      // closed when the periodic look has returned
}

// watchEscapes starts looking, every escapeWatchEvery, for processes that
// left their server's cgroup, and kills them, logging each to log with the
// server it left. It does nothing where the tree puts no server in a
// cgroup, or if the watch runs already; close stops it.
func (t *cgroupTree) watchEscapes(log *slog.Logger, every time.Duration) {
	if t.on() {
		t.escapes.start(t, log, every)
	}
}

// tie records that process pid, just started, is the process of server,
// whose cgroup it joins as a shim: from then on it descends from server
// wherever it goes, and so does everything it starts. It does nothing
// before watchEscapes.
func (t *cgroupTree) tie(pid int, server string) {
	if t.on() {
		t.escapes.tie(pid, server)
	}
}

// killEscapees looks now for processes that left their server's cgroup and
// kills them; it blocks until it has. It does nothing before watchEscapes.
func (t *cgroupTree) killEscapees() {
	if t.on() {
		t.escapes.look(t)
	}
}

// start starts the periodic look of t's processes.
func (w *escapeWatch) start(t *cgroupTree, log *slog.Logger, every time.Duration) {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.log != nil {
		return
	}
	w.log, w.stop, w.done = log, make(chan struct{}), make(chan struct{})
	go func(stop <-chan struct{}, done chan<- struct{}) {
		defer close(done)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				w.look(t)
			case <-stop:
				return
			}
		}
	}(w.stop, w.done)
}

// tie records that process pid descends from server, once the watch has
// started.
func (w *escapeWatch) tie(pid int, server string) {
	if w == nil {
		return
	}
	s, ok := readStat(pid)
	if !ok {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.log == nil {
		return // no look would forget it
	}
	if w.origin == nil {
		w.origin = map[procKey]string{}
	}
	w.origin[procKey{pid, s.start}] = server
}

// close stops the periodic look, waits for it to return, and looks one last
// time. It may be called more than once.
func (w *escapeWatch) close(t *cgroupTree) {
	if w == nil {
		return
	}
	w.mu.Lock()
	stop, done := w.stop, w.done
	w.stop = nil
	w.mu.Unlock()
	if stop == nil {
		return
	}
	close(stop)
	<-done
	w.look(t)
}

// look kills the processes that left their server's cgroup, again until it
// finds none (a process killed may have forked first), at most ten times.
func (w *escapeWatch) look(t *cgroupTree) {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.log == nil {
		return
	}
	for range 10 {
		if w.round(t) == 0 {
			return
		}
	}
}

// round judges corral's descendants, and the processes an earlier round tied
// to a server wherever they are now (without a subreaper, orphans go to
// init), parents before children, and kills those that left the cgroup of
// the server they descend from. It returns how many it killed. w.mu is held.
func (w *escapeWatch) round(t *cgroupTree) (killed int) {
	stats := map[int]procStat{}
	kids := map[int][]int{}
	var buf [1024]byte
	for _, pid := range allPIDs() {
		if s, ok := quickStat(pid, buf[:]); ok && s.state != 'Z' {
			stats[pid] = s
			kids[s.ppid] = append(kids[s.ppid], pid)
		}
	}
	queue := slices.Clone(kids[os.Getpid()])
	for k := range w.origin {
		if s, ok := stats[k.pid]; ok && s.start == k.start {
			queue = append(queue, k.pid)
		}
	}
	self, _ := os.Readlink("/proc/self/exe")
	origin := map[int]string{} // corral's own is ""
	next := map[procKey]string{}
	has := map[string]bool{} // "server\x00key": the server has a cgroup in that hierarchy
	seen := map[int]bool{}
	for i := 0; i < len(queue); i++ {
		pid := queue[i]
		if seen[pid] {
			continue
		}
		seen[pid] = true
		queue = append(queue, kids[pid]...)
		s := stats[pid]
		key := procKey{pid, s.start}
		threads := threadCgroups(pid)
		if len(threads) == 0 {
			continue // gone
		}
		server := w.origin[key]
		if server == "" {
			server = origin[s.ppid]
		}
		if server == "" {
			server = t.serverOf(threads[0])
		}
		if server == "" {
			continue
		}
		origin[pid], next[key] = server, server
		if t.holds(server, threads, has) || isShim(pid, self) || w.judged[key] {
			continue // a shim joins one hierarchy at a time, then executes the server
		}
		if w.kill(t, server, key, threads[0]) {
			killed++
		}
	}
	w.origin = next
	for k := range w.judged {
		if _, ok := next[k]; !ok {
			delete(w.judged, k)
		}
	}
	return killed
}

// kill kills the process key, which left the cgroup of server, once pinned
// and judged again, and logs it. It reports whether it killed it. w.mu is
// held.
func (w *escapeWatch) kill(t *cgroupTree, server string, key procKey, cgroups map[string]string) bool {
	cmdline, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(key.pid), "cmdline"))
	attrs := []any{"server", server, "pid", key.pid, "cgroup", cgroups[t.killKey()],
		"cmdline", string(bytes.TrimSpace(bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '})))}
	killed := killPinned(key.pid, func() bool {
		s, ok := readStat(key.pid)
		threads := threadCgroups(key.pid)
		return ok && s.start == key.start && len(threads) > 0 && !t.holds(server, threads, map[string]bool{})
	})
	if w.judged == nil {
		w.judged = map[procKey]bool{}
	}
	switch {
	case killed:
		w.judged[key] = true // it may take a moment to die
		w.log.Warn("killed a process that left its server's cgroup", attrs...)
	case processStarted(key):
		w.judged[key] = true
		w.log.Error("cannot kill a process that left its server's cgroup", attrs...)
	}
	return killed
}

// quickStat is readStat for a look at every process each second: three
// system calls, reading into buf, where os.ReadFile makes more.
func quickStat(pid int, buf []byte) (procStat, bool) {
	fd, err := syscall.Open("/proc/"+strconv.Itoa(pid)+"/stat", syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return procStat{}, false
	}
	n, err := syscall.Read(fd, buf)
	syscall.Close(fd)
	if err != nil || n <= 0 {
		return procStat{}, false
	}
	// pid (comm) state ppid ... ; comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(buf[:n], ')')
	if i < 0 {
		return procStat{}, false
	}
	f := bytes.Fields(buf[i+1 : n])
	if len(f) < 20 {
		return procStat{}, false
	}
	ppid, err1 := strconv.Atoi(string(f[1]))
	start, err2 := strconv.ParseUint(string(f[19]), 10, 64)
	if err1 != nil || err2 != nil {
		return procStat{}, false
	}
	return procStat{state: f[0][0], ppid: ppid, start: start}, true
}

// processStarted reports whether the process key still runs.
func processStarted(key procKey) bool {
	s, ok := readStat(key.pid)
	return ok && s.start == key.start && s.state != 'Z'
}

// isShim reports whether process pid is corral's shim (runShim), whose
// executable is corral's own, exe.
func isShim(pid int, exe string) bool {
	dir := filepath.Join("/proc", strconv.Itoa(pid))
	if got, err := os.Readlink(filepath.Join(dir, "exe")); err != nil || got != exe {
		return false
	}
	cmdline, _ := os.ReadFile(filepath.Join(dir, "cmdline"))
	args := bytes.Split(cmdline, []byte{0})
	return len(args) > 1 && string(args[1]) == shimArg
}

// threadCgroups returns the cgroups of each thread of process pid, its main
// thread's first (v1 lets a thread move alone, through the tasks file); none
// once it is gone.
func threadCgroups(pid int) []map[string]string {
	dir := filepath.Join("/proc", strconv.Itoa(pid))
	main, err := os.ReadFile(filepath.Join(dir, "cgroup"))
	if err != nil {
		return nil
	}
	out := []map[string]string{parseProcCgroup(string(main))}
	tasks, _ := os.ReadDir(filepath.Join(dir, "task"))
	for _, task := range tasks {
		if task.Name() == strconv.Itoa(pid) {
			continue
		}
		if data, err := os.ReadFile(filepath.Join(dir, "task", task.Name(), "cgroup")); err == nil {
			out = append(out, parseProcCgroup(string(data)))
		}
	}
	return out
}

// killKey is the key, in own and procPaths, of the hierarchy whose cgroups
// corral kills: "" on v2, "freezer" on v1.
func (t *cgroupTree) killKey() string {
	if t.v2 {
		return ""
	}
	return "freezer"
}

// instancePath returns the instance's cgroup in the hierarchy of key as
// /proc/PID/cgroup names it.
func (t *cgroupTree) instancePath(key string) string {
	return path.Join(t.procPaths[key], cgroupPrefix+t.instance)
}

// serverOf returns the server whose cgroup, or a cgroup below it, holds a
// process whose cgroups are cgroups, in the hierarchy that kills; "" for
// none.
func (t *cgroupTree) serverOf(cgroups map[string]string) string {
	p, ok := cgroups[t.killKey()]
	if !ok {
		return ""
	}
	rel, ok := cutPathPrefix(p, t.instancePath(t.killKey()))
	if !ok || rel == "" {
		return ""
	}
	server, _, _ := strings.Cut(rel, "/")
	return server
}

// holds reports whether every thread, whose cgroups are threads, is in the
// cgroup of server, or below it, in each hierarchy where server has one.
// has caches, for one round, which hierarchies those are.
func (t *cgroupTree) holds(server string, threads []map[string]string, has map[string]bool) bool {
	for key := range t.procPaths {
		if t.v2 && key != "" {
			continue // one hierarchy, under every key
		}
		if key != t.killKey() {
			k := server + "\x00" + key
			in, seen := has[k]
			if !seen {
				_, err := os.Stat(filepath.Join(t.own[key], cgroupPrefix+t.instance, server))
				in = err == nil
				has[k] = in
			}
			if !in {
				continue
			}
		}
		want := path.Join(t.instancePath(key), server)
		for _, th := range threads {
			if _, ok := cutPathPrefix(th[key], want); !ok {
				return false
			}
		}
	}
	return true
}

// cutPathPrefix returns p below dir, without the slash between ("" for dir
// itself), and whether p is dir or below it.
func cutPathPrefix(p, dir string) (string, bool) {
	if p == dir {
		return "", true
	}
	if dir != "/" {
		dir += "/"
	}
	return strings.CutPrefix(p, dir)
}
