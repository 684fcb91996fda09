package main

// This file holds the status page /metrics: every metric of the gateway and
// of its HTTP front end in the Prometheus text exposition format (version
// 0.0.4), written with the standard library alone. It reads the counters of
// metrics.go and calls down into the gateway; nothing below calls it.

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
)

// writeMetrics writes every metric of gw and of its HTTP front end h (nil
// with -stdio) to w, the body of the status page /metrics, followed by the
// process's and the Go runtime's (see processmetrics.go). It is safe for
// concurrent use.
func writeMetrics(w io.Writer, gw *Gateway, h *httpFrontEnd) {
	var b strings.Builder
	snaps := snapshotMetrics(gw.backendList())
	writeCallCounts(&b, snaps)
	writeCallDurations(&b, snaps)
	writeServerStates(&b, snaps)
	writeInstances(&b, snaps)
	metricFamily(&b, "corral_sessions", "gauge", "Open MCP sessions, over every front end.")
	fmt.Fprintf(&b, "corral_sessions %d\n", gw.sessions.count())
	if h != nil {
		metricFamily(&b, "corral_event_streams", "gauge", "Open GET event streams of the HTTP front end.")
		fmt.Fprintf(&b, "corral_event_streams %d\n", h.streams.Load())
	}
	writeClientMetrics(&b, gw)
	if counts := gw.pins.counts(); len(counts) > 0 {
		metricFamily(&b, "corral_pin_changes_total", "counter", `Changed tool definitions seen of servers with "pin" set, each change once.`)
		for _, name := range slices.Sorted(maps.Keys(counts)) {
			fmt.Fprintf(&b, "corral_pin_changes_total{server=\"%s\"} %d\n", labelValue(name), counts[name])
		}
	}
	metricFamily(&b, "corral_audit_lines_lost_total", "counter", "Lines of the audit trail that could not be written.")
	fmt.Fprintf(&b, "corral_audit_lines_lost_total %d\n", gw.audit.lostLines())
	writeTraceMetrics(&b, gw.tracer)
	writeProcessMetrics(&b)
	writeRuntimeMetrics(&b)
	io.WriteString(w, b.String())
}

// backendMetrics is what the metrics say of one backend, read once so that
// its counters agree with each other within one page.
type backendMetrics struct {
	name     string // as a label value
	h        health
	m        *callMetrics
	outcomes [numOutcomes]int64
}

// snapshotMetrics reads the health and the call outcomes of each backend.
func snapshotMetrics(backends []*backend) []backendMetrics {
	snaps := make([]backendMetrics, len(backends))
	for i, be := range backends {
		snaps[i] = backendMetrics{name: labelValue(be.name), h: be.health(), m: &be.metrics}
		for o := range snaps[i].outcomes {
			snaps[i].outcomes[o] = be.metrics.outcomes[o].Load()
		}
	}
	return snaps
}

// metricFamily writes the HELP and TYPE lines of a metric family.
func metricFamily(b *strings.Builder, name, typ, help string) {
	fmt.Fprintf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, typ)
}

// writeCallCounts writes the counts of tool calls: all of them, and those
// that ended in an error, a timeout or a cancellation.
func writeCallCounts(b *strings.Builder, snaps []backendMetrics) {
	metricFamily(b, "corral_calls_total", "counter", "Tool calls routed to a server, however they ended.")
	for _, s := range snaps {
		var n int64
		for _, c := range s.outcomes {
			n += c
		}
		fmt.Fprintf(b, "corral_calls_total{server=\"%s\"} %d\n", s.name, n)
	}
	metricFamily(b, "corral_call_errors_total", "counter", "Tool calls that ended in an error, by kind (timeouts and cancellations are counted apart).")
	for _, s := range snaps {
		for o, kind := range errorKinds {
			if kind != "" {
				fmt.Fprintf(b, "corral_call_errors_total{server=\"%s\",kind=\"%s\"} %d\n", s.name, kind, s.outcomes[o])
			}
		}
	}
	metricFamily(b, "corral_call_timeouts_total", "counter", "Tool calls the server did not answer within requestTimeout.")
	for _, s := range snaps {
		fmt.Fprintf(b, "corral_call_timeouts_total{server=\"%s\"} %d\n", s.name, s.outcomes[outcomeTimeout])
	}
	metricFamily(b, "corral_call_cancellations_total", "counter", "Tool calls cancelled by the client or ended by its going away.")
	for _, s := range snaps {
		fmt.Fprintf(b, "corral_call_cancellations_total{server=\"%s\"} %d\n", s.name, s.outcomes[outcomeCancelled])
	}
}

// writeCallDurations writes the histogram of how long tool calls took.
func writeCallDurations(b *strings.Builder, snaps []backendMetrics) {
	metricFamily(b, "corral_call_duration_seconds", "histogram", "How long tool calls took, from the gateway's point of view.")
	for _, s := range snaps {
		var cum int64
		for i := range s.m.buckets {
			cum += s.m.buckets[i].Load()
			le := "+Inf"
			if i < len(latencyBuckets) {
				le = strconv.FormatFloat(latencyBuckets[i], 'g', -1, 64)
			}
			fmt.Fprintf(b, "corral_call_duration_seconds_bucket{server=\"%s\",le=\"%s\"} %d\n", s.name, le, cum)
		}
		fmt.Fprintf(b, "corral_call_duration_seconds_sum{server=\"%s\"} %g\n", s.name, time.Duration(s.m.sumNanos.Load()).Seconds())
		fmt.Fprintf(b, "corral_call_duration_seconds_count{server=\"%s\"} %d\n", s.name, cum)
	}
}

// writeServerStates writes each server's restarts, state and requests in
// flight.
func writeServerStates(b *strings.Builder, snaps []backendMetrics) {
	metricFamily(b, "corral_restarts_total", "counter", "Times corral started a server again after it exited.")
	for _, s := range snaps {
		fmt.Fprintf(b, "corral_restarts_total{server=\"%s\"} %d\n", s.name, s.h.Restarts)
	}
	metricFamily(b, "corral_server_state", "gauge", "1 for the state each server is in, 0 for the others.")
	for _, s := range snaps {
		for _, st := range []backendState{stateStarting, stateReady, stateBackoff, stateFailed, stateStopped, stateIdle} {
			v := 0
			if s.h.State == st {
				v = 1
			}
			fmt.Fprintf(b, "corral_server_state{server=\"%s\",state=\"%s\"} %d\n", s.name, st, v)
		}
	}
	metricFamily(b, "corral_in_flight", "gauge", "Requests sent to a server and not yet answered.")
	for _, s := range snaps {
		fmt.Fprintf(b, "corral_in_flight{server=\"%s\"} %d\n", s.name, s.h.InFlight)
	}
}

// writeInstances writes the number of processes of each session-scoped
// server, if any: one series per server, not one per session.
func writeInstances(b *strings.Builder, snaps []backendMetrics) {
	header := false
	for _, s := range snaps {
		if s.h.Instances != nil {
			if !header {
				metricFamily(b, "corral_server_instances", "gauge", `Processes of a server with "scope": "session", one per session.`)
				header = true
			}
			fmt.Fprintf(b, "corral_server_instances{server=\"%s\"} %d\n", s.name, *s.h.Instances)
		}
	}
}

// clientOutcomes are the outcomes of corral_client_calls_total: those of
// the audit trail.
var clientOutcomes = []string{auditOK, auditToolError, auditError, auditTimeout, auditCancelled, auditRefused}

// clientReasons are the reasons of corral_client_refusals_total.
var clientReasons = []string{refusedView, refusedInFlight, refusedRate, refusedMaxSessions}

// writeClientMetrics writes, for each client (each named client of the
// config in force, and each principal counted: "stdio", "anonymous",
// "bearer token"), its calls by outcome, its refusals by reason and its
// sessions open.
func writeClientMetrics(b *strings.Builder, gw *Gateway) {
	sessions := gw.sessions.countByName()
	names := append(slices.Collect(maps.Keys(gw.config().Clients)), slices.Collect(maps.Keys(sessions))...)
	clients := gw.clients.metrics(names)
	metricFamily(b, "corral_client_calls_total", "counter", "Calls routed for a client (tools, resources, prompts, completions, tasks), by how they ended; refused is outside the client's view.")
	for _, c := range clients {
		for _, o := range clientOutcomes {
			fmt.Fprintf(b, "corral_client_calls_total{client=\"%s\",outcome=\"%s\"} %d\n", labelValue(c.name), o, c.calls[o])
		}
	}
	metricFamily(b, "corral_client_refusals_total", "counter", "Calls and sessions refused a client: outside its view, or past a limit of its profile (maxInFlight, callsPerSecond, maxSessions).")
	for _, c := range clients {
		for _, r := range clientReasons {
			fmt.Fprintf(b, "corral_client_refusals_total{client=\"%s\",reason=\"%s\"} %d\n", labelValue(c.name), r, c.refused[r])
		}
	}
	metricFamily(b, "corral_client_sessions", "gauge", "Open MCP sessions of each client.")
	for _, c := range clients {
		fmt.Fprintf(b, "corral_client_sessions{client=\"%s\"} %d\n", labelValue(c.name), sessions[c.name])
	}
}

// labelValue escapes a Prometheus label value.
func labelValue(s string) string {
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s)
}

// writeTraceMetrics writes the counts of spans exported and dropped, if
// tracing is on.
func writeTraceMetrics(b *strings.Builder, t *tracer) {
	if t == nil {
		return
	}
	exported, queueFull, failed := t.spanCounts()
	metricFamily(b, "corral_trace_spans_exported_total", "counter", "Spans the OTLP endpoint (tracing.endpoint) took.")
	fmt.Fprintf(b, "corral_trace_spans_exported_total %d\n", exported)
	metricFamily(b, "corral_trace_spans_dropped_total", "counter", "Spans dropped rather than slow a call: the export queue was full, or the export failed.")
	fmt.Fprintf(b, "corral_trace_spans_dropped_total{reason=\"queue_full\"} %d\n", queueFull)
	fmt.Fprintf(b, "corral_trace_spans_dropped_total{reason=\"export_failed\"} %d\n", failed)
}
