package conformance

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// What fakeserver records about itself in its state directory (see the
// package documentation of fakeserver).

type fakeState struct {
	PID   int       `json:"pid"`
	PPID  int       `json:"ppid"`
	PGID  int       `json:"pgid"`
	Role  string    `json:"role"`
	Name  string    `json:"name"`
	Start time.Time `json:"start"`
}

type fakeEvent struct {
	Time      time.Time       `json:"time"`
	Event     string          `json:"event"`
	Signal    string          `json:"signal"`
	Method    string          `json:"method"`
	Tool      string          `json:"tool"`
	ID        json.RawMessage `json:"id"`
	RequestID json.RawMessage `json:"requestId"`
	// ProgressToken is a tools/call's params._meta.progressToken.
	ProgressToken json.RawMessage `json:"progressToken"`
}

// processes returns every process recorded in dir, oldest first.
func processes(dir string) []fakeState {
	files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	var all []fakeState
	for _, f := range files {
		var s fakeState
		if data, err := os.ReadFile(f); err == nil && json.Unmarshal(data, &s) == nil {
			all = append(all, s)
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].Start.Before(all[j].Start) })
	return all
}

// serverStarts returns the server processes named name, oldest first.
func serverStarts(dir, name string) []fakeState {
	var out []fakeState
	for _, s := range processes(dir) {
		if s.Role == "server" && s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

// events returns the events process pid recorded in dir.
func events(dir string, pid int) []fakeEvent {
	data, _ := os.ReadFile(filepath.Join(dir, strconv.Itoa(pid)+".events"))
	var out []fakeEvent
	for _, line := range bytes.Split(data, []byte("\n")) {
		var e fakeEvent
		if json.Unmarshal(line, &e) == nil {
			out = append(out, e)
		}
	}
	return out
}

// allEvents returns the events of every process recorded in dir.
func allEvents(dir string) []fakeEvent {
	var out []fakeEvent
	for _, s := range processes(dir) {
		out = append(out, events(dir, s.PID)...)
	}
	return out
}

func requireLinux(t *testing.T) {
	if runtime.GOOS != "linux" {
		skip(t, "the suite reads /proc, which only Linux has")
	}
}

// procStat returns the state letter and parent of pid, from /proc.
func procStat(pid int) (state byte, ppid int, ok bool) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, false
	}
	f := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+1:]))
	if len(f) < 2 {
		return 0, 0, false
	}
	ppid, _ = strconv.Atoi(f[1])
	return f[0][0], ppid, true
}

// alive reports whether pid is a running process (not a zombie).
func alive(pid int) bool {
	state, _, ok := procStat(pid)
	return ok && state != 'Z'
}

// marked returns the live processes whose command line contains dir: every
// fakeserver started for a case carries its state directory in its
// arguments, so this finds them from /proc, whatever the gateway did.
func marked(dir string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() || !alive(pid) {
			continue
		}
		if cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline")); err == nil && bytes.Contains(cmdline, []byte(dir)) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// killMarked kills what a case left behind, so that one gateway's leak does
// not disturb the next case.
func killMarked(dir string) {
	for _, pid := range marked(dir) {
		syscall.Kill(pid, syscall.SIGKILL)
	}
}

// waitGone waits up to d for every process marked with dir to be gone and
// returns those still alive.
func waitGone(dir string, d time.Duration) []int {
	deadline := time.Now().Add(d)
	for {
		left := marked(dir)
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(20 * time.Millisecond) // processes of others give no signal
	}
}

// describe says what each PID is, for failure messages.
func describe(dir string, pids []int) string {
	roles := map[int]string{}
	for _, s := range processes(dir) {
		roles[s.PID] = s.Role + " of " + s.Name
	}
	var parts []string
	for _, pid := range pids {
		r := roles[pid]
		if r == "" {
			r = "unrecorded"
		}
		parts = append(parts, strconv.Itoa(pid)+" ("+r+")")
	}
	return strings.Join(parts, ", ")
}

// status returns a field of /proc/PID/status in KiB (VmRSS, VmHWM) or as a
// count (Threads).
func status(pid int, field string) float64 {
	data, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			f := strings.Fields(v)
			if len(f) > 0 {
				n, _ := strconv.ParseFloat(f[0], 64)
				return n
			}
		}
	}
	return 0
}
