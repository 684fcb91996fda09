package conformance

import (
	"strings"
	"testing"
	"time"
)

// Cases about servers that misbehave on purpose: what one server does must
// not cost the gateway more than a bounded share of what it has.

func TestStderrFloodIsNotCopiedUnboundedIntoTheGatewaysLog(t *testing.T) {
	guarantee(t)
	g := startGateway(t, servers("noisy"), options{}, "noisy")
	s := g.newSession()
	// A few lines first, to learn whether the gateway's log, as the suite
	// sees it (its stderr, and its stdout but with the stdio transport),
	// shows the servers' stderr at all.
	if text, err := callText(t, s, "noisy", "stderr", map[string]any{"bytes": 1000}); err != nil || text != "done" {
		fatal(t, "writing 1000 bytes to stderr: the server answered %q, %v", text, err)
	}
	const probe = "stderr tool line"
	if !g.outputSettles(10*time.Second, func(out string) bool { return strings.Contains(out, probe) }) {
		skip(t, "the gateway's output shows none of its servers' stderr (it drops it, or logs elsewhere): nothing to measure")
	}
	before := len(g.output())
	const flood = 10 << 20
	if text, err := callText(t, s, "noisy", "stderr", map[string]any{"bytes": flood}); err != nil || text != "done" {
		fatal(t, "after writing 10 MiB to stderr the server answered %q, %v", text, err)
	}
	// The server's writes return once the gateway has read all but a pipe's
	// worth of them; what the gateway logs of them may come a little later.
	g.outputSettles(15*time.Second, func(string) bool { return false })
	grew := len(g.output()) - before
	t.Logf("the gateway's log grew by %d bytes while the server wrote %d to its stderr", grew, flood)
	if grew > flood/10 {
		fail(t, "the gateway's log grew by %d bytes while a server wrote %d to its stderr, want at most a tenth of it (a bounded rate)", grew, flood)
	}
	if text, err := callText(t, s, "noisy", "echo", map[string]any{"text": "still"}); err != nil || text != "still" {
		fail(t, "the next call answered %q, %v", text, err)
	}
}

// outputSettles waits, up to d, until cond holds for the gateway's output,
// or the output has not grown for a second. It reports whether cond held.
// The gateway gives no signal of what it has written, so this polls.
func (g *gateway) outputSettles(d time.Duration, cond func(out string) bool) bool {
	deadline := time.Now().Add(d)
	last, since := -1, time.Now()
	for time.Now().Before(deadline) {
		out := g.output()
		if cond(out) {
			return true
		}
		if len(out) != last {
			last, since = len(out), time.Now()
		} else if time.Since(since) >= time.Second {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
	return cond(g.output())
}

func TestServerThatNeverFinishesStartingIsGivenUpOn(t *testing.T) {
	guarantee(t)
	// Each start times out, so the restarts come too far apart for a count
	// of restarts within a minute ever to stop them: only a gateway that
	// counts the starts that never got ready gives up.
	const startTimeout = 13 * time.Second
	opts := options{startTimeout: startTimeout}
	if adapter.has("restartDelay") {
		opts.restartDelay = 200 * time.Millisecond
	}
	specs, ready := withSteady(serverSpec{Name: "stuck", flags: []string{"-hang-initialize"}})
	g := startGateway(t, specs, opts, ready...)
	// Watch the starts until none comes for quiet (longer than a start and
	// the longest delay between two), within maxStarts.
	const maxStarts, quiet = 8, startTimeout + 10*time.Second
	limit := time.Duration(maxStarts+1) * (startTimeout + quiet)
	start, lastCount, lastChange := time.Now(), 0, time.Now()
	for time.Since(lastChange) < quiet {
		n := len(serverStarts(g.stateDir, "stuck"))
		if n > maxStarts {
			fatal(t, "the gateway started the server that never finishes starting %d times, want it given up on within %d starts", n, maxStarts)
		}
		if time.Since(start) > limit {
			fatal(t, "the gateway was still restarting the server that never finishes starting after %s (%d starts)", limit, n)
		}
		if n != lastCount {
			lastCount, lastChange = n, time.Now()
		}
		time.Sleep(100 * time.Millisecond) // the servers' records give no signal
	}
	if lastCount == 0 {
		fatal(t, "the gateway never started the server")
	}
	if len(ready) > 0 {
		if _, err := callText(t, g.newSession(), "steady", "echo", map[string]any{"text": "ok"}); err != nil {
			fail(t, "the other server stopped serving: %v", err)
		}
	}
}
