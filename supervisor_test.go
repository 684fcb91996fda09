package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestRestartPolicy(t *testing.T) {
	s := Supervision{
		RestartDelay: Duration(time.Second), MaxRestartDelay: Duration(8 * time.Second),
		StableAfter: Duration(16 * time.Second), MaxRestarts: 5, RestartWindow: Duration(60 * time.Second),
		FailedRetry: Duration(5 * time.Minute),
	}
	type exit struct {
		at       time.Duration // since the start of the test's clock
		readyFor time.Duration
	}
	type decision struct {
		Wait    time.Duration
		Failing bool
	}
	const ready = 100 * time.Millisecond // became ready, then crashed soon after
	for _, tc := range []struct {
		name  string
		exits []exit
		want  []decision
	}{
		{
			name:  "the delay doubles up to its cap",
			exits: []exit{{0, ready}, {1 * time.Second, ready}, {100 * time.Second, ready}, {200 * time.Second, ready}, {300 * time.Second, ready}, {400 * time.Second, ready}},
			want:  []decision{{1 * time.Second, false}, {2 * time.Second, false}, {4 * time.Second, false}, {8 * time.Second, false}, {8 * time.Second, false}, {8 * time.Second, false}},
		},
		{
			name:  "a stable run resets the delay",
			exits: []exit{{0, 0}, {10 * time.Second, 0}, {20 * time.Second, 16 * time.Second}, {30 * time.Second, 0}},
			want:  []decision{{1 * time.Second, false}, {2 * time.Second, false}, {1 * time.Second, false}, {2 * time.Second, false}},
		},
		{
			name: "the sixth exit within the window fails the server",
			exits: []exit{
				{0, 0}, {2 * time.Second, 0}, {5 * time.Second, 0}, {10 * time.Second, 0}, {19 * time.Second, 0},
				{28 * time.Second, 0},
			},
			want: []decision{
				{1 * time.Second, false}, {2 * time.Second, false}, {4 * time.Second, false}, {8 * time.Second, false}, {8 * time.Second, false},
				{5 * time.Minute, true},
			},
		},
		{
			name: "restarts older than the window are forgotten",
			exits: []exit{
				{0, ready}, {1 * time.Second, ready}, {2 * time.Second, ready}, {3 * time.Second, ready}, {4 * time.Second, ready},
				{65 * time.Second, ready},
			},
			want: []decision{{1 * time.Second, false}, {2 * time.Second, false}, {4 * time.Second, false}, {8 * time.Second, false}, {8 * time.Second, false}, {8 * time.Second, false}},
		},
		{
			name: "starts that never become ready fail the server however far apart they are",
			exits: []exit{
				{0, 0}, {100 * time.Second, 0}, {200 * time.Second, 0}, {300 * time.Second, 0}, {400 * time.Second, 0},
				{500 * time.Second, 0},
			},
			want: []decision{
				{1 * time.Second, false}, {2 * time.Second, false}, {4 * time.Second, false}, {8 * time.Second, false}, {8 * time.Second, false},
				{5 * time.Minute, true},
			},
		},
		{
			name: "a run that became ready ends a series of failed starts",
			exits: []exit{
				{0, 0}, {100 * time.Second, 0}, {200 * time.Second, 0}, {300 * time.Second, 0}, {400 * time.Second, 0},
				{500 * time.Second, ready}, {600 * time.Second, 0},
			},
			want: []decision{
				{1 * time.Second, false}, {2 * time.Second, false}, {4 * time.Second, false}, {8 * time.Second, false}, {8 * time.Second, false},
				{8 * time.Second, false}, {8 * time.Second, false},
			},
		},
		{
			name: "after the cool-down one more failure to start fails it again at once",
			exits: []exit{
				{0, 0}, {1 * time.Second, 0}, {2 * time.Second, 0}, {3 * time.Second, 0}, {4 * time.Second, 0}, {5 * time.Second, 0},
				{6 * time.Minute, 0},
			},
			want: []decision{
				{1 * time.Second, false}, {2 * time.Second, false}, {4 * time.Second, false}, {8 * time.Second, false}, {8 * time.Second, false}, {5 * time.Minute, true},
				{5 * time.Minute, true},
			},
		},
		{
			name: "after the cool-down a run that became ready is back in service",
			exits: []exit{
				{0, 0}, {1 * time.Second, 0}, {2 * time.Second, 0}, {3 * time.Second, 0}, {4 * time.Second, 0}, {5 * time.Second, 0},
				{6 * time.Minute, time.Second}, {7 * time.Minute, 0},
			},
			want: []decision{
				{1 * time.Second, false}, {2 * time.Second, false}, {4 * time.Second, false}, {8 * time.Second, false}, {8 * time.Second, false}, {5 * time.Minute, true},
				{1 * time.Second, false}, {2 * time.Second, false},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &restartPolicy{s: s, jitter: func() float64 { return 0 }}
			start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			var got []decision
			for _, e := range tc.exits {
				wait, failing := p.afterExit(start.Add(e.at), e.readyFor)
				got = append(got, decision{wait, failing})
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("decisions (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRestartPolicyJitterAddsUpToHalfTheDelay(t *testing.T) {
	s := Supervision{RestartDelay: Duration(time.Second), MaxRestartDelay: Duration(time.Second),
		StableAfter: Duration(time.Hour), MaxRestarts: 1000, RestartWindow: Duration(time.Second)}
	for _, j := range []float64{0, 0.5, 0.999} {
		p := &restartPolicy{s: s, jitter: func() float64 { return j }}
		wait, _ := p.afterExit(time.Now(), 0)
		if want := time.Second + time.Duration(j*float64(time.Second)/2); wait != want {
			t.Errorf("wait with jitter %v = %v, want %v", j, wait, want)
		}
	}
}

// waitState waits until b is in state s, on b's own change signal.
func waitState(t *testing.T, b *backend, s backendState, within time.Duration) {
	t.Helper()
	timeout := time.After(within)
	for {
		b.mu.Lock()
		state, changed := b.state, b.changed
		b.mu.Unlock()
		if state == s {
			return
		}
		select {
		case <-changed:
		case <-timeout:
			t.Fatalf("server %q still %s after %s, want %s", b.name, state, within, s)
		}
	}
}

// serversNamed returns the state files of the processes in role server
// named name, oldest first.
func serversNamed(t *testing.T, dir, name string) []fakeState {
	var out []fakeState
	for _, s := range fakeProcesses(t, dir) {
		if s.Role == "server" && s.Name == name {
			out = append(out, s)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Start.Before(out[j].Start) })
	return out
}

func TestCrashLoopBacksOffThenFailsWhileOthersServe(t *testing.T) {
	t.Parallel()
	tg := startGateway(t, `{"restartDelay":"100ms","maxRestartDelay":"10s","maxRestarts":3,"failedRetry":"1h","mcpServers":{
		"bad": {"command":"FAKE","args":["-state","STATE","-name","bad","-prefix","bad_","-crash-at-start"]},
		"good": {"command":"FAKE","args":["-state","STATE","-name","good"]}
	}}`)
	bad := tg.gw.backends[0]
	waitState(t, bad, stateFailed, 30*time.Second)

	starts := serversNamed(t, tg.dir, "bad")
	if len(starts) != 4 {
		t.Fatalf("the crashing server was started %d times, want 4 (the first start and maxRestarts 3)", len(starts))
	}
	// A gap between starts is the backoff (100ms, 200ms, 400ms, each plus
	// up to half of itself at random) plus the time the server took to
	// start and crash, which load can stretch but never shorten: so each
	// gap is at least its doubled delay, whatever the load. (The policy's
	// exact waits are TestRestartPolicy's, on a clock of its own.)
	for i := 1; i < len(starts); i++ {
		gap, delay := starts[i].Start.Sub(starts[i-1].Start), 100*time.Millisecond<<(i-1)
		if gap < delay {
			t.Errorf("gap %d between starts = %v, want at least %v (the delay doubling from restartDelay)", i, gap, delay)
		}
	}
	c := connect(t, tg.url)
	if got := toolText(t, c.callTool("1", "echo", `{"text":"fine"}`)); got != "fine" {
		t.Errorf("the other server answered %q", got)
	}
	msg := c.callTool("2", "bad_echo", `{"text":"x"}`)
	if msg.Error == nil || !strings.Contains(msg.Error.Message, `server "bad"`) || !strings.Contains(msg.Error.Message, "failed") || !strings.Contains(msg.Error.Message, "fatal: crash at start") {
		t.Errorf("call to the failing server's tool = %+v, want an error naming it, its state and its last stderr line", msg)
	}
	if h := bad.health(); h.State != stateFailed || h.RetryAt == "" || h.Restarts != 3 {
		t.Errorf("health of the failing server = %+v, want failed, 3 restarts and a retry time", h)
	}
}

func TestFailedServerIsTriedAgainAfterItsCoolDown(t *testing.T) {
	t.Parallel()
	release := filepath.Join(t.TempDir(), "release")
	// failedRetry leaves a loaded machine time to connect and call while
	// the server is still failed: with 300ms the retry had begun by then.
	tg := startGateway(t, `{"restartDelay":"20ms","maxRestarts":1,"failedRetry":"3s","mcpServers":{
		"flaky": {"command":"/bin/sh","args":["-c","[ -e `+release+` ] || { echo not yet >&2; exit 3; }; exec FAKE -state STATE -prefix f_"]}
	}}`)
	b := tg.gw.backends[0]
	waitState(t, b, stateFailed, 30*time.Second)
	c := connect(t, tg.url)
	// Calls to a failed server never wait: this one would otherwise wait for
	// the retry and succeed.
	if msg := c.callTool("1", "f_echo", `{"text":"x"}`); msg.Error == nil || !strings.Contains(msg.Error.Message, "not yet") {
		t.Fatalf("call while failed = %+v, want an immediate error with the last stderr line", msg)
	}
	os.WriteFile(release, nil, 0o600)
	waitState(t, b, stateReady, 30*time.Second)
	if got := toolText(t, c.callTool("2", "f_echo", `{"text":"back"}`)); got != "back" {
		t.Errorf("call after the retry = %q, want \"back\"", got)
	}
}

func TestHangInInitializeIsStoppedAndCountsAsACrash(t *testing.T) {
	t.Parallel()
	// startTimeout leaves a loaded machine time to start the server and let
	// it write its state file: with 300ms half the runs lost a start.
	tg := startGateway(t, `{"startTimeout":"2s","stopGrace":"50ms","restartDelay":"50ms","maxRestarts":1,"failedRetry":"1h","mcpServers":{
		"hung": {"command":"FAKE","args":["-state","STATE","-name","hung","-hang-initialize","-ignore-stdin-close"]}
	}}`)
	b := tg.gw.backends[0]
	waitState(t, b, stateFailed, 30*time.Second)
	if got := len(serversNamed(t, tg.dir, "hung")); got != 2 {
		t.Errorf("the hanging server was started %d times, want 2 (it counts as a crash)", got)
	}
	if h := b.health(); !strings.Contains(h.Error, "initialize: no answer within 2s (startTimeout)") {
		t.Errorf("health error = %q, want it to say initialize timed out", h.Error)
	}
	for _, s := range serversNamed(t, tg.dir, "hung") {
		if !slices.ContainsFunc(fakeEvents(t, tg.dir, s.PID), func(e fakeEvent) bool { return e.Event == "signal" }) {
			t.Errorf("hung server %d got no SIGTERM; want it stopped by the ladder", s.PID)
		}
	}
}

func TestSlowFailedStartsTripTheBreaker(t *testing.T) {
	t.Parallel()
	// Each start hangs until startTimeout, so no two restarts ever fall
	// within restartWindow: only the count of failed starts in a row can
	// stop the loop. startTimeout leaves a loaded machine time to start
	// each fake server far enough to record itself before it is stopped.
	tg := startGateway(t, `{"startTimeout":"2s","stopGrace":"50ms","restartDelay":"10ms","maxRestartDelay":"10ms","restartWindow":"100ms","maxRestarts":2,"failedRetry":"1h","mcpServers":{
		"hung": {"command":"FAKE","args":["-state","STATE","-name","hung","-hang-initialize","-ignore-stdin-close"]}
	}}`)
	b := tg.gw.backends[0]
	waitState(t, b, stateFailed, 30*time.Second)
	if got := len(serversNamed(t, tg.dir, "hung")); got != 3 {
		t.Errorf("the hanging server was started %d times, want 3 (the first start and maxRestarts 2)", got)
	}
	if h := b.health(); !strings.Contains(h.Error, "3 starts in a row that never became ready (maxRestarts)") {
		t.Errorf("health error = %q, want it to say why corral gave up", h.Error)
	}
}

func TestServerKilledFromOutsideComesBack(t *testing.T) {
	t.Parallel()
	tg := startGateway(t, `{"restartDelay":"50ms","mcpServers":{"a": {"command":"FAKE","args":["-state","STATE","-name","a"]}}}`)
	b := tg.gw.backends[0]
	first := serversNamed(t, tg.dir, "a")[0].PID
	syscall.Kill(first, syscall.SIGKILL)
	waitState(t, b, stateBackoff, 10*time.Second)
	waitState(t, b, stateReady, 10*time.Second)
	c := connect(t, tg.url)
	text := toolText(t, c.callTool("1", "whoami", `{}`))
	if strings.Contains(text, fmt.Sprintf(`"pid":%d`, first)) {
		t.Errorf("whoami after the kill = %s, want a new process", text)
	}
	if h := b.health(); h.LastExit != "signal: killed" {
		t.Errorf("last exit = %q, want \"signal: killed\"", h.LastExit)
	}
}

func TestServerThatStopsAnsweringPingsIsRestarted(t *testing.T) {
	t.Parallel()
	// A server that answers must never miss a ping, even on a loaded
	// machine: the timeout is seconds. The stopped one misses two within
	// about twice that.
	tg := startGateway(t, `{"pingInterval":"50ms","pingTimeout":"3s","maxMissedPings":2,"stopGrace":"50ms","killGrace":"50ms","restartDelay":"10ms","mcpServers":{
		"a": {"command":"FAKE","args":["-state","STATE","-name","a"]}
	}}`)
	b := tg.gw.backends[0]
	first := serversNamed(t, tg.dir, "a")[0].PID
	syscall.Kill(first, syscall.SIGSTOP) // alive, but answers nothing
	waitState(t, b, stateBackoff, 30*time.Second)
	if h := b.health(); !strings.Contains(h.Error, "missed 2 pings in a row") {
		t.Errorf("reason = %q, want it to say the pings were missed", h.Error)
	}
	waitState(t, b, stateReady, 30*time.Second)
	if got := len(serversNamed(t, tg.dir, "a")); got != 2 {
		t.Errorf("%d processes started, want 2", got)
	}
}

func TestStopDuringBackoffStartsNothing(t *testing.T) {
	t.Parallel()
	tg := startGateway(t, `{"restartDelay":"1h","mcpServers":{"bad": {"command":"FAKE","args":["-state","STATE","-name","bad","-crash-at-start"]}}}`)
	b := tg.gw.backends[0]
	waitState(t, b, stateBackoff, 10*time.Second)
	done := make(chan struct{})
	go func() { tg.gw.Stop(nil); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Stop during a backoff of 1h did not return")
	}
	if got := len(serversNamed(t, tg.dir, "bad")); got != 1 {
		t.Errorf("%d processes started, want only the first", got)
	}
	if state := b.snapshot(); state != stateStopped {
		t.Errorf("state after Stop = %s, want stopped", state)
	}
}

func TestStopDuringHandshakeStopsThatProcess(t *testing.T) {
	t.Parallel()
	tg := startGatewayNoWait(t, `{"startTimeout":"1h","stopGrace":"50ms","mcpServers":{"hung": {"command":"FAKE","args":["-state","STATE","-name","hung","-hang-initialize"]}}}`)
	waitFor(t, 10*time.Second, "the server to start", func() bool { return len(serversNamed(t, tg.dir, "hung")) == 1 })
	tg.gw.Stop(nil)
	requireGone(t, tg.dir)
	if got := len(serversNamed(t, tg.dir, "hung")); got != 1 {
		t.Errorf("%d processes started, want 1", got)
	}
}

func TestStopRacingStartsNeverLeavesAProcess(t *testing.T) {
	t.Parallel()
	// Many backends in a tight crash loop, stopped at an arbitrary moment:
	// whatever each was doing, nothing may be left and nothing may start
	// after Stop returns.
	cfg := `{"restartDelay":"1ms","maxRestartDelay":"1ms","maxRestarts":1000,"mcpServers":{`
	for i := range 8 {
		if i > 0 {
			cfg += ","
		}
		cfg += fmt.Sprintf(`"s%d": {"command":"FAKE","args":["-state","STATE","-name","s%d","-crash-at-start"]}`, i, i)
	}
	tg := startGateway(t, cfg+"}}")
	waitFor(t, 10*time.Second, "some restarts", func() bool { return len(fakeProcesses(t, tg.dir)) > 16 })
	tg.gw.Stop(nil)
	after := len(fakeProcesses(t, tg.dir))
	requireGone(t, tg.dir)
	if again := len(fakeProcesses(t, tg.dir)); again != after {
		t.Errorf("%d processes started after Stop returned", again-after)
	}
}

func TestServerWhoseCommandCannotStartFailsWithTheReason(t *testing.T) {
	t.Parallel()
	tg := startGateway(t, `{"restartDelay":"10ms","maxRestarts":2,"failedRetry":"1h","mcpServers":{
		"missing": {"command":"/nonexistent/mcp-server","prefix":"m"}
	}}`)
	b := tg.gw.backends[0]
	waitState(t, b, stateFailed, 10*time.Second)
	if h := b.health(); h.LastExit != "did not start" || !strings.Contains(h.Error, "/nonexistent/mcp-server") || h.PID != 0 {
		t.Errorf("health = %+v, want a failed server that did not start, naming its command", h)
	}
}
