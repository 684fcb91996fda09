package main

import (
	"bufio"
	"io"
	"slices"
	"strings"
	"testing"
	"time"
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
			name:      "a server and grandchild that ignore SIGTERM are killed",
			args:      []string{"-ignore-stdin-close", "-ignore-sigterm", "-grandchild", "group", "-grandchild-ignores-sigterm"},
			stopGrace: ignored, killGrace: ignored,
			wantSignals: []string{"terminated"},
			wantExit:    "signal: killed",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := stateDir(t)
			p := startFake(t, tc.stopGrace, tc.killGrace, fakeArgs(dir, tc.args...)...)
			initialize(t, p)
			p.Stop(nil)
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
	p := startFake(t, 50*time.Millisecond, 50*time.Millisecond, fakeArgs(dir, "-ignore-stdin-close", "-ignore-sigterm")...)
	initialize(t, p)
	done := make(chan struct{})
	for range 3 {
		go func() { p.Stop(nil); done <- struct{}{} }()
	}
	for range 3 {
		<-done
	}
	p.Stop(nil)
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
	p.Stop(hurry)
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
	<-p.exited
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
	p.Stop(nil)
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
