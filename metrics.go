package main

// This file holds corral's metrics: the counters each backend keeps of its
// tool calls. metricspage.go writes them out.

import (
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// callOutcome is how a tool call ended; each call ends exactly one way.
type callOutcome int

const (
	outcomeOK          callOutcome = iota
	outcomeTimeout                 // no answer within requestTimeout
	outcomeCancelled               // the client cancelled it or went away
	outcomeUnavailable             // the server was not running, was too busy, or corral was stopping
	outcomeServerError             // the server answered with a JSON-RPC error
	outcomeInternal                // anything else
	numOutcomes
)

// errorKinds name the error outcomes in corral_call_errors_total.
var errorKinds = [numOutcomes]string{outcomeUnavailable: "unavailable", outcomeServerError: "server_error", outcomeInternal: "internal"}

// latencyBuckets are the upper bounds, in seconds, of the call duration
// histogram's buckets.
var latencyBuckets = [...]float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}

// callMetrics counts one backend's tool calls. It is safe for concurrent
// use. Its counters live as long as the backend: across restarts, but not
// across a reload that changes the server.
type callMetrics struct {
	outcomes [numOutcomes]atomic.Int64
	buckets  [len(latencyBuckets) + 1]atomic.Int64 // the last is +Inf
	sumNanos atomic.Int64
	recent   minuteCounts // for the status page; not in /metrics
}

// observe records a call that ended with outcome after d.
func (m *callMetrics) observe(outcome callOutcome, d time.Duration) {
	m.outcomes[outcome].Add(1)
	secs := d.Seconds()
	i := sort.SearchFloat64s(latencyBuckets[:], secs) // first bound >= secs
	m.buckets[i].Add(1)
	m.sumNanos.Add(int64(d))
	m.recent.add(time.Now(), outcome.failed())
}

// failed reports whether a call that ended with o failed from its caller's
// point of view: every outcome but success and the caller's own
// cancellation.
func (o callOutcome) failed() bool {
	return o != outcomeOK && o != outcomeCancelled
}

// recentMinutes is how many minutes of tool calls minuteCounts remembers.
const recentMinutes = 15

// minuteCounts counts one backend's tool calls, and those that failed, in
// each of the last recentMinutes minutes: a ring of per-minute buckets, each
// stamped with its minute, so that a bucket left from an earlier turn of the
// ring counts for nothing. Its zero value is ready to use; it is safe for
// concurrent use and holds a fixed amount of memory.
type minuteCounts struct {
	mu      sync.Mutex
	buckets [recentMinutes]minuteBucket
}

// minuteBucket is the count of one minute.
type minuteBucket struct {
	minute         int64 // minutes since the Unix epoch, plus one: 0 marks a bucket never used
	calls, errored int64
}

// add counts a call that ended at now, and failed if failed.
func (c *minuteCounts) add(now time.Time, failed bool) {
	m := unixMinute(now)
	c.mu.Lock()
	defer c.mu.Unlock()
	b := &c.buckets[m%recentMinutes]
	if b.minute != m {
		*b = minuteBucket{minute: m}
	}
	b.calls++
	if failed {
		b.errored++
	}
}

// sums returns the calls, and the failed ones, that ended in the last n
// minutes at now: the current minute and the n-1 before it. n is at most
// recentMinutes.
func (c *minuteCounts) sums(now time.Time, n int) (calls, errored int64) {
	m := unixMinute(now)
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, b := range c.buckets {
		if b.minute <= m && b.minute > m-int64(n) {
			calls += b.calls
			errored += b.errored
		}
	}
	return calls, errored
}

// unixMinute returns the minute of t, counted from 1 at the Unix epoch's.
func unixMinute(t time.Time) int64 {
	return t.Unix()/60 + 1
}
