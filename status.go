package main

// This file holds the snapshot the status page (statuspage.go) reads: each
// server's health, as /healthz reports it, with its recent tool calls.

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
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
	// ToolCost is what the server's tool definitions cost a client that
	// lists them all.
	ToolCost toolCost `json:"toolDefinitions"`
}

// toolCost is what one server's tool definitions cost the context of a
// client that lists every tool: how many tools it offers clients (those
// its tools filter lets through) and the bytes of their JSON as listed.
type toolCost struct {
	Server string `json:"-"`
	Tools  int    `json:"tools"`
	Bytes  int    `json:"bytes"`
}

// costOf returns what the tools of server s, as it listed them (tools),
// cost; filter is the server's own tools filter.
func costOf(s string, filter *ToolFilter, tools []backendItem) toolCost {
	c := toolCost{Server: s}
	for _, t := range tools {
		if filter.allows(t.name) {
			c.Tools++
			c.Bytes += len(t.raw)
		}
	}
	return c
}

// largestFirst sorts costs by bytes, the largest first, and by server name
// among equals.
func largestFirst(costs []toolCost) {
	slices.SortFunc(costs, func(a, b toolCost) int {
		if c := cmp.Compare(b.Bytes, a.Bytes); c != 0 {
			return c
		}
		return strings.Compare(a.Server, b.Server)
	})
}

// toolCostsReport returns what -check prints of the tool definitions of
// the servers whose catalog it knows: each server's tools and bytes,
// largest first, and the total; nothing if it knows none.
func toolCostsReport(costs []toolCost) []byte {
	if len(costs) == 0 {
		return nil
	}
	largestFirst(costs)
	var b strings.Builder
	fmt.Fprintf(&b, "tool definitions, largest first, of the servers whose catalog is cached (tokens estimated as bytes/4):\n")
	total := toolCost{}
	for _, c := range costs {
		tools := "tools"
		if c.Tools == 1 {
			tools = "tool"
		}
		fmt.Fprintf(&b, "  server %s: %d %s, %d bytes (about %d tokens)\n", quoteName(c.Server), c.Tools, tools, c.Bytes, c.Bytes/4)
		total.Tools += c.Tools
		total.Bytes += c.Bytes
	}
	fmt.Fprintf(&b, "  all of them: %d tools, %d bytes (about %d tokens)\n", total.Tools, total.Bytes, total.Bytes/4)
	return []byte(b.String())
}

// cachedToolCosts returns the cost of the tools of each server of cfg whose
// catalog tools (catalogcache.go's cachedTools) knows, for -check.
func cachedToolCosts(cfg *Config, tools func(server string) ([]backendItem, bool)) []toolCost {
	var costs []toolCost
	for _, name := range slices.Sorted(maps.Keys(cfg.MCPServers)) {
		s := cfg.MCPServers[name]
		items, ok := tools(name)
		if s == nil || !ok {
			continue
		}
		costs = append(costs, costOf(name, s.Tools, items))
	}
	return costs
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
		st.Servers[i].ToolCost = costOf(b.name, b.cfg.Tools, b.items(kindTool))
		for w, n := range recentWindows {
			calls, errored := b.metrics.recent.sums(now, n)
			st.Servers[i].Recent[w] = recentCalls{Minutes: n, Calls: calls, Errored: errored}
		}
	}
	return st
}
