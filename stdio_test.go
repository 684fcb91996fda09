package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
)

// startFake starts fakeserver with args through startProcess, with the given
// stop graces, and stops it when the test ends.
func startFake(t *testing.T, stopGrace, killGrace time.Duration, args ...string) *process {
	t.Helper()
	p, err := startProcess(processSpec{
		name:      "fake",
		command:   fakeserverBin,
		args:      args,
		stopGrace: stopGrace,
		killGrace: killGrace,
		pipeDrain: 200 * time.Millisecond,
		log:       testLogger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Stop(nil) })
	return p
}

// initialize sends initialize to p and waits for its answer, which fakeserver
// gives only once every descendant it was asked to start is running.
func initialize(t *testing.T, p *process) *bufio.Reader {
	t.Helper()
	io.WriteString(p.stdin, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`+"\n")
	r := bufio.NewReader(p.stdout)
	if line := readLine(t, r); !strings.Contains(string(line), `"result"`) {
		t.Fatalf("initialize answered %s", line)
	}
	return r
}

// stopBound bounds a stop in the tests, which takes milliseconds when the
// ladder works: a broken ladder fails the test in seconds, not when a grace
// of a minute or an hour, or the fakeserver's lifetime, ends.
const stopBound = 20 * time.Second

// stopWithin stops p (see process.Stop) and fails the test unless Stop
// returns within stopBound. Then it kills the processes marked with dir
// first, so that Stop and the test's cleanup return.
func stopWithin(t *testing.T, p *process, hurry <-chan struct{}, dir string) {
	t.Helper()
	done := make(chan struct{})
	go func() { p.Stop(hurry); close(done) }()
	select {
	case <-done:
		return
	case <-time.After(stopBound):
	}
	for _, pid := range liveMarked(dir) {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	t.Fatalf("Stop did not return within %s; the processes are killed now", stopBound)
}

func signalsOf(t *testing.T, dir string, pid int) []string {
	var sigs []string
	for _, e := range fakeEvents(t, dir, pid) {
		if e.Event == "signal" {
			sigs = append(sigs, e.Signal)
		}
	}
	return sigs
}

func TestStopLadder(t *testing.T) {
	t.Parallel()
	// A grace the server ignores is short, so that the ladder goes on at
	// once; a grace the server is expected to use is long, so that a loaded
	// machine cannot make it too slow: the wait ends when the server exits,
	// and costs nothing then.
	const ignored, used = 50 * time.Millisecond, time.Minute
	for _, tc := range []struct {
		name                 string
		args                 []string
		stopGrace, killGrace time.Duration
		wantSignals          []string // what the server process received
		wantExit             string
	}{
		{
			name:      "a server that exits when stdin closes gets no signal",
			stopGrace: used, killGrace: used,
			wantExit: "exit status 0",
		},
		{
			name:      "a server that ignores the end of stdin gets SIGTERM",
			args:      []string{"-ignore-stdin-close"},
			stopGrace: ignored, killGrace: used,
			wantSignals: []string{"terminated"},
			wantExit:    "exit status 0",
		},
		{
			name: "a server and grandchild that ignore SIGTERM are killed",
			args: []string{"-ignore-stdin-close", "-ignore-sigterm", "-grandchild", "group", "-grandchild-ignores-sigterm"},
			// A second to record the SIGTERM it ignores before SIGKILL.
			stopGrace: ignored, killGrace: time.Second,
			wantSignals: []string{"terminated"},
			wantExit:    "signal: killed",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := stateDir(t)
			p := startFake(t, tc.stopGrace, tc.killGrace, fakeArgs(dir, tc.args...)...)
			initialize(t, p)
			stopWithin(t, p, nil, dir)
			if got := p.exitDescription(); got != tc.wantExit {
				t.Errorf("server ended with %q, want %q", got, tc.wantExit)
			}
			if got := signalsOf(t, dir, p.pid); !slices.Equal(got, tc.wantSignals) {
				t.Errorf("server received signals %q, want %q", got, tc.wantSignals)
			}
			requireGone(t, dir)
		})
	}
}

func TestStopIsIdempotentAndConcurrent(t *testing.T) {
	t.Parallel()
	dir := stateDir(t)
	// killGrace leaves the server time to record the SIGTERM it ignores
	// before SIGKILL ends it: with 50ms a loaded machine lost the record.
	p := startFake(t, 50*time.Millisecond, time.Second, fakeArgs(dir, "-ignore-stdin-close", "-ignore-sigterm")...)
	initialize(t, p)
	done := make(chan struct{})
	for range 3 {
		go func() { p.Stop(nil); done <- struct{}{} }()
	}
	stopWithin(t, p, nil, dir) // then the three have returned too
	for range 3 {
		<-done
	}
	if got := signalsOf(t, dir, p.pid); len(got) != 1 {
		t.Errorf("server received signals %q, want one SIGTERM from one ladder", got)
	}
	requireGone(t, dir)
}

func TestSecondSignalSkipsTheLadderWaits(t *testing.T) {
	t.Parallel()
	dir := stateDir(t)
	// Graces far longer than the test may take: only hurry can end them.
	p := startFake(t, time.Hour, time.Hour, fakeArgs(dir, "-ignore-stdin-close", "-ignore-sigterm")...)
	initialize(t, p)
	hurry := make(chan struct{})
	close(hurry)
	stopWithin(t, p, hurry, dir)
	if got := p.exitDescription(); got != "signal: killed" {
		t.Errorf("hurried stop ended the server with %q, want it killed", got)
	}
	requireGone(t, dir)
}

func TestLeaderExitKillsWhatIsLeftInItsGroup(t *testing.T) {
	t.Parallel()
	dir := stateDir(t)
	p := startFake(t, time.Second, time.Second, fakeArgs(dir, "-grandchild", "group")...)
	r := initialize(t, p)
	io.WriteString(p.stdin, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"crash","arguments":{"code":7}}}`+"\n")
	select {
	case <-p.exited:
	case <-time.After(stopBound):
		t.Fatalf("the server asked to crash is not seen to exit within %s", stopBound)
	}
	if got := p.exitDescription(); got != "exit status 7" {
		t.Errorf("server ended with %q, want exit status 7", got)
	}
	if _, err := r.ReadBytes('\n'); err != io.EOF {
		t.Errorf("stdout after the crash: %v, want EOF", err)
	}
	requireGone(t, dir) // the sleeper in the group too, with no Stop called
}

func TestStopReturnsWhenADescendantHoldsThePipesOpen(t *testing.T) {
	t.Parallel()
	dir := stateDir(t)
	// The setsid grandchild leaves the group, so no group signal reaches it,
	// and it keeps the server's stdout and stderr open after the server exits.
	p := startFake(t, 100*time.Millisecond, 100*time.Millisecond,
		fakeArgs(dir, "-grandchild", "setsid", "-grandchild-holds-stdout")...)
	r := initialize(t, p)
	stopWithin(t, p, nil, dir)
	if _, err := r.ReadBytes('\n'); err == nil {
		t.Errorf("stdout is still readable after Stop, want it closed")
	}
	var sleepers int
	for _, s := range fakeProcesses(t, dir) {
		if s.Role == "sleeper" {
			sleepers++
		}
	}
	if sleepers != 1 {
		t.Fatalf("found %d sleepers, want the grandchild recorded", sleepers)
	}
	// The escaped grandchild is still alive here: killing it is the
	// subreaper's job (not yet built); stateDir's cleanup kills it.
}

// recordingHandler is a slog.Handler that keeps every record. It is safe
// for concurrent use.
type recordingHandler struct {
	mu      sync.Mutex
	records []slog.Record
}

func (h *recordingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *recordingHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *recordingHandler) WithGroup(string) slog.Handler            { return h }

func (h *recordingHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.records = append(h.records, r.Clone())
	return nil
}

// stderrLogged returns how many of the server's stderr lines were logged,
// and the counts of the lines left out, as reported, one pair per report.
func (h *recordingHandler) stderrLogged() (logged int, reports [][2]int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, r := range h.records {
		switch {
		case strings.HasPrefix(r.Message, "stderr: "):
			logged++
		case strings.HasPrefix(r.Message, "stderr lines left out of the log"):
			var report [2]int64
			r.Attrs(func(a slog.Attr) bool {
				switch a.Key {
				case "lines":
					report[0] = a.Value.Int64()
				case "bytes":
					report[1] = a.Value.Int64()
				}
				return true
			})
			reports = append(reports, report)
		}
	}
	return logged, reports
}

func TestStderrFloodIsLoggedAtABoundedRateWithACountOfWhatIsLeftOut(t *testing.T) {
	for _, tc := range []struct {
		name               string
		line               string
		lines              int
		lineRate, byteRate int
		wantLogged         int
		reportAfterASecond bool // else the count comes when stderr ends
	}{
		{name: "short lines are bounded by the line rate", line: "y", lines: 10000, lineRate: 10, byteRate: 1 << 20, wantLogged: 10, reportAfterASecond: true},
		{name: "long lines are bounded by the byte rate", line: strings.Repeat("x", 100), lines: 1000, lineRate: 1000, byteRate: 1000, wantLogged: 10, reportAfterASecond: true},
		{name: "what is left out is counted when stderr ends", line: "y", lines: 500, lineRate: 100, byteRate: 1 << 20, wantLogged: 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// In the bubble, time stands still while the flood is read: the
			// bucket holds one second's worth, and no more comes in.
			synctest.Test(t, func(t *testing.T) {
				h := &recordingHandler{}
				r, w := io.Pipe()
				tail := &lineTail{max: stderrTailLines}
				done := make(chan struct{})
				go func() {
					defer close(done)
					drainLines(r, tail, slog.New(h), nil, tc.lineRate, tc.byteRate)
				}()
				for range tc.lines {
					io.WriteString(w, tc.line+"\n")
				}
				synctest.Wait()
				logged, reports := h.stderrLogged()
				if logged != tc.wantLogged || len(reports) != 0 {
					t.Errorf("after a flood of %d lines in no time: %d logged and reports %v, want %d logged and no report yet", tc.lines, logged, reports, tc.wantLogged)
				}
				if tc.reportAfterASecond {
					time.Sleep(time.Second)
					synctest.Wait()
					if _, reports := h.stderrLogged(); len(reports) != 1 {
						t.Errorf("a second after the flood the log has %d reports of the lines left out, want 1", len(reports))
					}
					io.WriteString(w, "after the flood\n") // the bucket is full again
				}
				w.Close()
				<-done
				dropped := int64(tc.lines - tc.wantLogged)
				want := [][2]int64{{dropped, dropped * int64(len(tc.line))}}
				logged, reports = h.stderrLogged()
				if diff := cmp.Diff(want, reports); diff != "" {
					t.Errorf("reports of the lines left out (-want +got):\n%s", diff)
				}
				if tc.reportAfterASecond && logged != tc.wantLogged+1 {
					t.Errorf("%d lines logged in all, want %d: the line after the flood too", logged, tc.wantLogged+1)
				}
				if got := len(tail.all()); got != stderrTailLines {
					t.Errorf("the tail kept %d lines, want %d: every line counts for it, logged or not", got, stderrTailLines)
				}
			})
		})
	}
}

func TestServerStderrFloodReachesTheLogAtABoundedRate(t *testing.T) {
	t.Parallel()
	const lines, rate = 100000, 10
	h := &recordingHandler{}
	start := time.Now()
	p, err := startProcess(processSpec{
		name:        "noisy",
		command:     "/bin/sh",
		args:        []string{"-c", fmt.Sprintf("yes | head -n %d >&2", lines)},
		stopGrace:   time.Second,
		killGrace:   time.Second,
		pipeDrain:   100 * time.Millisecond,
		log:         slog.New(h),
		stderrLines: rate,
		stderrBytes: 1 << 20,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Stop(nil) })
	select {
	case <-p.stderrDone: // read to its end, and what was left out counted
	case <-time.After(time.Minute):
		t.Fatal("the shell's stderr did not end within a minute")
	}
	took := time.Since(start)
	<-p.exited
	if desc := p.exitDescription(); desc != "exit status 0" {
		t.Fatalf("the shell ended with %q, want exit status 0", desc)
	}
	logged, reports := h.stderrLogged()
	var dropped int64
	for _, r := range reports {
		dropped += r[0]
	}
	if int64(logged)+dropped != lines {
		t.Errorf("%d lines logged and %d reported left out, want %d in all", logged, dropped, lines)
	}
	// The bucket starts with a second's worth and gains rate a second.
	if most := rate * (1 + int(took/time.Second) + 1); logged > most {
		t.Errorf("%d of %d lines logged in %s, want at most %d at %d a second", logged, lines, took, most, rate)
	}
}
