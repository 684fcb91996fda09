package main

// This file holds the snapshot the status page (statuspage.go) reads: each
// server's health, as /healthz reports it, with its recent tool calls.

import (
	"time"
)

// gatewayStatus is what the status page shows: the health of each server, as
// /healthz reports it, with its recent tool calls, and the sessions open.
// It is also corral://status (ownstatus.go), as JSON.
type gatewayStatus struct {
	Time     time.Time      `json:"time"`
	Servers  []serverStatus `json:"servers"`
	Sessions int            `json:"sessions"`
	// Clients is each client's sessions, calls and recent refusals: for
	// the operator's page only, never in corral://status, which a client
	// reads.
	Clients []clientStatus `json:"-"`
	// PinChanges are the pinned tool definitions that changed (pins.go):
	// for the operator's page only, as Clients.
	PinChanges []pinChange `json:"-"`
}

// serverStatus is what the status page shows of one server.
type serverStatus struct {
	health
	// Recent counts the calls that ended, and those that failed, in each
	// of the windows of recentWindows.
	Recent [len(recentWindows)]recentCalls `json:"recent"`
}

// recentCalls counts the tool calls that ended in the last Minutes minutes.
type recentCalls struct {
	Minutes int   `json:"minutes"`
	Calls   int64 `json:"calls"`
	Errored int64 `json:"errored"`
}

// recentWindows are the windows, in minutes, over which the status page
// counts calls; none is over recentMinutes.
var recentWindows = [...]int{1, 5, recentMinutes}

// statusReader reads the snapshot the status page shows (statusSource). Its
// fields are set by NewGateway and never changed, so it has no lock of its
// own; it takes none while it calls them, one after another.
type statusReader struct {
	backendList func() []*backend // the backends in force, sorted by name
	sessions    func() int        // the sessions open
	clients     func() []clientStatus
	pins        func() []pinChange // if nil, none
}

// status returns what the status page shows now. It is safe for concurrent
// use.
func (r statusReader) status() gatewayStatus {
	now := time.Now()
	backends := r.backendList()
	st := gatewayStatus{Time: now, Servers: make([]serverStatus, len(backends)), Sessions: r.sessions()}
	if r.clients != nil {
		st.Clients = r.clients()
	}
	if r.pins != nil {
		st.PinChanges = r.pins()
	}
	for i, b := range backends {
		st.Servers[i].health = b.health()
		for w, n := range recentWindows {
			calls, errored := b.metrics.recent.sums(now, n)
			st.Servers[i].Recent[w] = recentCalls{Minutes: n, Calls: calls, Errored: errored}
		}
	}
	return st
}
