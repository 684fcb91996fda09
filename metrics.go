package main

// This file holds corral's metrics: the counters each backend keeps of its
// tool calls. metricspage.go writes them out.

import (
	"sort"
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
}

// observe records a call that ended with outcome after d.
func (m *callMetrics) observe(outcome callOutcome, d time.Duration) {
	m.outcomes[outcome].Add(1)
	secs := d.Seconds()
	i := sort.SearchFloat64s(latencyBuckets[:], secs) // first bound >= secs
	m.buckets[i].Add(1)
	m.sumNanos.Add(int64(d))
}
