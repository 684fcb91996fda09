package main

// This file holds what the HTTP front end does for a load balancer in
// front of several replicas: the probes (/readyz, /livez), the drain that
// SIGTERM starts before the shutdown, the heartbeats of long-lived event
// streams, and the answer to a request that reached the wrong replica.

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"
)

// The probes' paths: readiness (200 while corral takes new sessions, 503
// once it drains) and liveness (200 while corral serves HTTP at all).
const (
	readyPath = "/readyz"
	livePath  = "/livez"
)

// drainRetryAfter is the Retry-After of a request refused while draining:
// by then the balancer has, or soon has, taken the replica out.
const drainRetryAfter = 1 * time.Second

// heartbeat is the comment line a long-lived event stream carries every
// heartbeatInterval; clients ignore it (a line that starts with ':').
const heartbeat = ": ping\n\n"

// serveProbe serves /readyz and /livez, and reports whether r was one of
// them. They need no token and pass no Host or Origin check, so that any
// balancer's or orchestrator's default check gets an answer, and so they
// tell nothing but that: a word, no server, no session, no version.
func (h *httpFrontEnd) serveProbe(w http.ResponseWriter, r *http.Request) bool {
	if r.URL.Path != readyPath && r.URL.Path != livePath {
		return false
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		w.WriteHeader(http.StatusMethodNotAllowed)
		return true
	}
	switch {
	case r.URL.Path == livePath:
		io.WriteString(w, "alive\n")
	case h.draining.Load():
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, "draining\n")
	default:
		io.WriteString(w, "ready\n")
	}
	return true
}

// drain begins the shutdown: /readyz answers 503 and new sessions are
// refused from now on, and for drainDelay (or until skip ends: a second
// signal) the sessions open and their calls go on, so that the balancer
// sees the replica leave before its port closes.
func (h *httpFrontEnd) drain(skip context.Context) {
	h.draining.Store(true)
	d := h.gw.config().DrainDelay.D()
	if d <= 0 {
		return
	}
	h.log.Info("draining: /readyz answers 503 and new sessions are refused; open sessions go on until drainDelay ends, then the shutdown begins", "replica", h.gw.config().Replica, "drainDelay", d)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-skip.Done():
	}
}

// refuseWhileDraining answers 503, with Retry-After, a request that would
// open a session (what) while corral drains, and reports whether it did.
func (h *httpFrontEnd) refuseWhileDraining(w http.ResponseWriter, what string) bool {
	if !h.draining.Load() {
		return false
	}
	w.Header().Set("Retry-After", strconv.Itoa(int(drainRetryAfter/time.Second)))
	writeHTTPError(w, http.StatusServiceUnavailable, codeUnavailable, fmt.Sprintf(
		"replica %q is shutting down and opens no new session (%s); send it again, and the balancer sends it to another replica", h.gw.config().Replica, what))
	return true
}

// heartbeats returns a channel that ticks every heartbeatInterval, for a
// long-lived stream's loop to write heartbeat on, and the function that
// stops it.
func (h *httpFrontEnd) heartbeats() (<-chan time.Time, func()) {
	t := time.NewTicker(h.gw.config().HeartbeatInterval.D())
	return t.C, t.Stop
}

// writeHeartbeat writes a heartbeat on a stream and flushes it, within
// writeTimeout.
func (h *httpFrontEnd) writeHeartbeat(w io.Writer, rc *http.ResponseController) error {
	h.writeDeadline(rc)
	if _, err := io.WriteString(w, heartbeat); err != nil {
		return err
	}
	return rc.Flush()
}

// wrongReplica returns the error for a request naming id, a session ID
// corral does not know, when another replica issued it; "" otherwise.
// what says where the ID was (the Mcp-Session-Id header, the sessionId
// query parameter).
func (h *httpFrontEnd) wrongReplica(id, what string) string {
	mine := h.gw.config().Replica
	owner := elsewhere(id, mine)
	if owner == "" {
		return ""
	}
	return fmt.Sprintf("session %q belongs to replica %q, and this is replica %q: the load balancer must send every request of a session to the replica named before the '.' of its %s (see docs/operations.md); if that replica is gone, open a new session", id, owner, mine, what)
}
