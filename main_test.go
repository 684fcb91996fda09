package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Binaries built once for the whole test run.
var (
	fakeserverBin string
	corralBin     string
)

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == shimArg {
		os.Exit(runShim(argOrEmpty(2))) // a server started contained, by a gateway of a test
	}
	if addr, ok := os.LookupEnv(listenerEnv); ok { // the test binary as a prerequisite (prereq_test.go)
		os.Exit(runListener(addr, os.Args[len(os.Args)-1]))
	}
	dir, err := os.MkdirTemp("", "corral-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fakeserverBin = filepath.Join(dir, "fakeserver")
	corralBin = filepath.Join(dir, "corral")
	for _, b := range [][]string{{fakeserverBin, "./fakeserver"}, {corralBin, "."}} {
		out, err := exec.Command("go", "build", "-o", b[0], b[1]).CombinedOutput()
		if err != nil {
			fmt.Fprintf(os.Stderr, "building %s: %v\n%s", b[1], err, out)
			os.RemoveAll(dir)
			os.Exit(1)
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// testLogger returns a logger that writes into the test's log.
func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

// writeConfig writes a config file in which every "FAKE" stands for the
// fakeserver binary and every "STATE" for dir, and returns its path.
func writeConfig(t testing.TB, configJSON, dir string) string {
	t.Helper()
	configJSON = strings.ReplaceAll(configJSON, "FAKE", fakeserverBin)
	configJSON = strings.ReplaceAll(configJSON, "STATE", dir)
	path := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(path, []byte(configJSON), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// fakeArgs returns fakeserver arguments that record state in dir and bound
// the process's life, followed by extra.
func fakeArgs(dir string, extra ...string) []string {
	return append([]string{"-state", dir, "-lifetime", "2m"}, extra...)
}

// fakeState is a fakeserver state file.
type fakeState struct {
	PID   int       `json:"pid"`
	PGID  int       `json:"pgid"`
	SID   int       `json:"sid"`
	Role  string    `json:"role"`
	Name  string    `json:"name"`
	Start time.Time `json:"start"`
}

// fakeEvent is a line of a fakeserver events file.
type fakeEvent struct {
	Event     string          `json:"event"`
	Signal    string          `json:"signal"`
	Method    string          `json:"method"`
	Tool      string          `json:"tool"`
	ID        json.RawMessage `json:"id"`
	RequestID json.RawMessage `json:"requestId"`
	Code      int             `json:"code"`

	ProgressToken json.RawMessage `json:"progressToken"`
	Capabilities  json.RawMessage `json:"capabilities"`
	URI           string          `json:"uri"`
	URIs          []string        `json:"uris"`
	Meta          json.RawMessage `json:"meta"`
	Level         string          `json:"level"`
	Reason        string          `json:"reason"`
	Notifications json.RawMessage `json:"notifications"` // a listen's, as asked
}

// fakeProcesses returns the state of every process recorded in dir.
func fakeProcesses(t *testing.T, dir string) []fakeState {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	var states []fakeState
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var s fakeState
		if err := json.Unmarshal(data, &s); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		states = append(states, s)
	}
	return states
}

// fakeEvents returns the events recorded by process pid in dir.
func fakeEvents(t *testing.T, dir string, pid int) []fakeEvent {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, strconv.Itoa(pid)+".events"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	// The server may be appending an event as we read: a last line without
	// its newline is not whole yet, and is read next time.
	if i := bytes.LastIndexByte(data, '\n'); i >= 0 {
		data = data[:i+1]
	} else {
		data = nil
	}
	var events []fakeEvent
	for _, line := range bytes.Split(bytes.TrimSpace(data), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var e fakeEvent
		if err := json.Unmarshal(line, &e); err != nil {
			t.Fatalf("events of %d: %q: %v", pid, line, err)
		}
		events = append(events, e)
	}
	return events
}

// liveMarked returns the PIDs of live processes whose command line contains
// marker, and of zombies that this test process has failed to reap, read from
// /proc, not from any bookkeeping of the test or of corral. (Zombies whose
// parent is init are init's to reap; in some sandboxes init never does.)
func liveMarked(marker string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...
		fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(fields) < 2 {
			continue
		}
		if fields[0] == "Z" {
			if ppid, _ := strconv.Atoi(fields[1]); ppid == os.Getpid() {
				pids = append(pids, pid)
			}
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if bytes.Contains(cmdline, []byte(marker)) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// requireGone fails the test unless no process marked with dir (every
// fakeserver started with -state dir) is alive or a zombie. Processes that
// are not corral's children (re-parented grandchildren) are reaped by
// someone else, so this waits a little for them, by polling /proc.
func requireGone(t testing.TB, dir string) {
	t.Helper()
	var left []int
	for deadline := time.Now().Add(5 * time.Second); ; {
		if left = liveMarked(dir); len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, pid := range left {
		stat, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		t.Errorf("process %d is still there: %s", pid, stat)
	}
}

// stateDir returns a fresh state directory whose processes are all killed
// when the test ends, whatever happened.
func stateDir(t testing.TB) string {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("process tests read /proc, which only Linux has")
	}
	dir := t.TempDir()
	t.Cleanup(func() {
		for _, pid := range liveMarked(dir) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	return dir
}

// waitFor polls cond, which reads state that changes without a signal to wait
// on (files written by other processes), until it holds or d passes.
func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(d); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("gave up after %s waiting for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// readLine reads one line from r or fails the test.
func readLine(t testing.TB, r *bufio.Reader) []byte {
	t.Helper()
	line, err := r.ReadBytes('\n')
	if err != nil {
		t.Fatalf("reading a line: %v (got %q)", err, line)
	}
	return line
}
