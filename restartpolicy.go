package main

// This file holds the restart policy a backend's supervisor follows after
// each exit of its server (supervisor.go).

import (
	"fmt"
	"strings"
	"time"
)

// restartPolicy decides, after each exit of a server, how long to wait before
// starting it again, or that it is failing. It reads no clock, so tests can
// drive it with times of their own. It is not safe for concurrent use.
//
// Two rules make a server failing: more than MaxRestarts restarts within
// RestartWindow (a fast crash loop), and more than MaxRestarts starts in a
// row that never became ready, however far apart (a slow one: a server that
// hangs in its handshake until StartTimeout, whose restarts the doubling
// delay spreads wider than any window).
type restartPolicy struct {
	s      Supervision
	jitter func() float64 // in [0, 1)

	delay        time.Duration // the last backoff, before jitter; zero after a stable run
	restarts     []time.Time   // the restarts within the window
	failedStarts int           // runs in a row that never became ready
	probation    bool          // the next run follows a failed period
	gaveUp       string        // why the policy last gave up, for messages
}

// afterExit is called when a run ends at now, after being ready for readyFor
// (zero if it never became ready). It returns how long to wait before the
// next start, and whether the server is now failing; the wait is then the
// FailedRetry cool-down.
func (p *restartPolicy) afterExit(now time.Time, readyFor time.Duration) (wait time.Duration, failing bool) {
	if readyFor == 0 {
		p.failedStarts++
	} else {
		p.failedStarts = 0
	}
	if p.probation {
		if readyFor == 0 {
			p.gaveUp = "a retry after the cool-down that did not become ready"
			return p.s.FailedRetry.D(), true // tried again after the cool-down, and still broken
		}
		p.probation = false // it became ready: back in service, with a clean slate
	}
	if readyFor >= p.s.StableAfter.D() {
		p.delay = 0
	}
	cut := now.Add(-p.s.RestartWindow.D())
	kept := p.restarts[:0]
	for _, t := range p.restarts {
		if t.After(cut) {
			kept = append(kept, t)
		}
	}
	p.restarts = kept
	switch {
	case len(p.restarts) >= p.s.MaxRestarts:
		p.gaveUp = fmt.Sprintf("%d restarts within %s (maxRestarts, restartWindow)", p.s.MaxRestarts, p.s.RestartWindow.D())
	case p.failedStarts > p.s.MaxRestarts:
		p.gaveUp = fmt.Sprintf("%d starts in a row that never became ready (maxRestarts)", p.failedStarts)
	default:
		p.restarts = append(p.restarts, now)
		if p.delay == 0 {
			p.delay = p.s.RestartDelay.D()
		} else {
			p.delay = min(2*p.delay, p.s.MaxRestartDelay.D())
		}
		return p.delay + time.Duration(p.jitter()*float64(p.delay)/2), false
	}
	p.restarts, p.delay, p.failedStarts, p.probation = nil, 0, 0, true
	return p.s.FailedRetry.D(), true
}

// plan returns the waits before the restarts the policy allows from now on,
// should each start fail at once, before it gives up: first, the wait
// afterExit just returned; then each later delay before its jitter. It
// changes nothing.
func (p *restartPolicy) plan(first time.Duration) []time.Duration {
	waits := []time.Duration{first}
	restarts, failed, delay := len(p.restarts), p.failedStarts, p.delay
	for {
		failed++
		if restarts >= p.s.MaxRestarts || failed > p.s.MaxRestarts {
			return waits
		}
		restarts++
		delay = min(2*delay, p.s.MaxRestartDelay.D())
		waits = append(waits, delay)
	}
}

// planText says plan (see plan) for the log: "in 1.2s, 2s, 4s, then giving
// up until failedRetry (5m0s) has passed".
func planText(plan []time.Duration, failedRetry time.Duration) string {
	var b strings.Builder
	b.WriteString("in ")
	for i, d := range plan {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(d.Round(time.Millisecond).String())
	}
	if len(plan) > 1 {
		b.WriteString(" (each but the first plus up to half again)")
	}
	fmt.Fprintf(&b, ", then giving up until failedRetry (%s) has passed", failedRetry)
	return b.String()
}
