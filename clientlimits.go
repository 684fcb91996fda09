package main

// This file holds what corral counts of each client: its calls in flight
// and its rate, held to its profile's maxInFlight and callsPerSecond; its
// calls by outcome; and the calls and sessions refused it, by reason, with
// the last few for the status page. The gateway admits each request through
// it (Gateway.handle) and counts each forwarded call's outcome
// (Gateway.auditCall); the HTTP front end asks it before it opens a session
// of a named client (maxSessions). /metrics and the status page read it.
//
// A client is counted under its principal's name: a named client's name
// (from the config, so the set of names stays bounded), or "stdio",
// "anonymous", "bearer token". The counts are kept across reloads: a reload
// that changes a limit applies it to the calls that come after.

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"sync"
	"time"
)

// The reasons a call or session is refused, as /metrics labels them.
const (
	refusedView        = "view"           // outside the client's view: answered as unknown
	refusedInFlight    = "maxInFlight"    // the client's calls in flight are at its profile's bound
	refusedRate        = "callsPerSecond" // the client's calls came faster than its profile's rate
	refusedMaxSessions = "maxSessions"    // the client's sessions are at its profile's bound
)

// recentRefusals is how many refusals of each client the status page shows.
const recentRefusals = 5

// clientLimits counts each client's calls and holds them to its profile's
// limits. Its methods are safe for concurrent use. Lock order: mu is a
// leaf.
type clientLimits struct {
	now func() time.Time // the clock of the rate; time.Now but in tests

	mu sync.Mutex
	by map[string]*clientCounts // by principal name
}

// clientCounts is what clientLimits keeps of one client.
type clientCounts struct {
	inFlight int
	tokens   float64   // of the rate's bucket: calls it may make now
	filled   time.Time // when tokens was last brought up to date; zero: full
	calls    map[string]int64
	refused  map[string]int64
	recent   [recentRefusals]clientRefusal // a ring; next is the oldest
	next     int
}

// clientRefusal is one refusal, for the status page.
type clientRefusal struct {
	Time   time.Time `json:"time"`
	Reason string    `json:"reason"`
	What   string    `json:"what"` // the method, or the server of an item outside the view
}

// clientStatus is what the status page shows of one client.
type clientStatus struct {
	Name     string          `json:"name"`
	Sessions int             `json:"sessions"`
	InFlight int             `json:"inFlight"`
	Calls    int64           `json:"calls"`
	Refused  int64           `json:"refused"`
	Recent   []clientRefusal `json:"recent"` // newest first
}

func newClientLimits() *clientLimits {
	return &clientLimits{now: time.Now, by: map[string]*clientCounts{}}
}

// callLimits are the limits of one named client in the config in force,
// and where they are set, for messages.
type callLimits struct {
	client, profile string
	maxInFlight     int
	callsPerSecond  float64
	maxSessions     int
}

// limitsOf returns who's limits in cfg, and whether it has any: only a
// named client whose profile sets one has.
func limitsOf(cfg *Config, who principal) (callLimits, bool) {
	if who.client == "" {
		return callLimits{}, false
	}
	c := cfg.Clients[who.client]
	if c == nil || c.Profile == "" {
		return callLimits{}, false
	}
	p := cfg.Profiles[c.Profile]
	if p == nil || (p.MaxInFlight == 0 && p.CallsPerSecond == 0 && p.MaxSessions == 0) {
		return callLimits{}, false
	}
	return callLimits{client: who.client, profile: c.Profile, maxInFlight: p.MaxInFlight, callsPerSecond: p.CallsPerSecond, maxSessions: p.MaxSessions}, true
}

// counts returns the counts of name, made if new. mu is held.
func (cl *clientLimits) counts(name string) *clientCounts {
	c := cl.by[name]
	if c == nil {
		c = &clientCounts{calls: map[string]int64{}, refused: map[string]int64{}}
		cl.by[name] = c
	}
	return c
}

// refuse counts a refusal of c for reason, of what, at now. mu is held.
func (c *clientCounts) refuse(now time.Time, reason, what string) {
	c.refused[reason]++
	c.recent[c.next] = clientRefusal{Time: now, Reason: reason, What: what}
	c.next = (c.next + 1) % recentRefusals
}

// admit admits a request of method from a client with limits lim, or
// returns the error to answer it with. An admitted call is in flight until
// done.
func (cl *clientLimits) admit(lim callLimits, method string) *wireError {
	now := cl.now()
	cl.mu.Lock()
	defer cl.mu.Unlock()
	c := cl.counts(lim.client)
	if lim.maxInFlight > 0 && c.inFlight >= lim.maxInFlight {
		c.refuse(now, refusedInFlight, method)
		return limitError(lim, refusedInFlight, 0,
			"client %q has %d calls in flight, the limit (profiles.%s.maxInFlight); wait for one to end", lim.client, c.inFlight, quoteName(lim.profile))
	}
	if r := lim.callsPerSecond; r > 0 {
		burst := math.Max(1, math.Ceil(r)) // a second's worth of calls at once
		if c.filled.IsZero() {
			c.tokens = burst
		} else {
			c.tokens = math.Min(burst, c.tokens+now.Sub(c.filled).Seconds()*r)
		}
		c.filled = now
		if c.tokens < 1 {
			wait := time.Duration(math.Ceil((1 - c.tokens) / r * float64(time.Second)))
			ms := (wait + time.Millisecond - 1) / time.Millisecond
			c.refuse(now, refusedRate, method)
			return limitError(lim, refusedRate, int64(ms),
				"client %q calls more than %g times a second, the limit (profiles.%s.callsPerSecond); try again in %d ms", lim.client, r, quoteName(lim.profile), ms)
		}
		c.tokens--
	}
	c.inFlight++
	return nil
}

// limitError is the answer to a call refused for limit: a -32000 whose
// message says which limit and what to do, and whose data says it to a
// program, with retryAfterMs when waiting that long lets the next call in.
func limitError(lim callLimits, limit string, retryAfterMs int64, format string, args ...any) *wireError {
	data := map[string]any{"limit": limit, "client": lim.client, "profile": lim.profile}
	if retryAfterMs > 0 {
		data["retryAfterMs"] = retryAfterMs
	}
	raw, _ := json.Marshal(data)
	return &wireError{Code: codeUnavailable, Message: fmt.Sprintf(format, args...), Data: raw}
}

// done ends a call of client that admit admitted.
func (cl *clientLimits) done(client string) {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	cl.counts(client).inFlight--
}

// called counts a call of the principal named name that ended with outcome
// (an outcome of the audit trail); one outside its view (auditRefused) is
// counted as refused for the view too, with server, the one that has it.
func (cl *clientLimits) called(name, outcome, server string) {
	var now time.Time
	if outcome == auditRefused {
		now = cl.now()
	}
	cl.mu.Lock()
	defer cl.mu.Unlock()
	c := cl.counts(name)
	c.calls[outcome]++
	if outcome == auditRefused {
		c.refuse(now, refusedView, server)
	}
}

// refuseSession counts a session of client refused for its maxSessions.
func (cl *clientLimits) refuseSession(client string) {
	now := cl.now()
	cl.mu.Lock()
	defer cl.mu.Unlock()
	cl.counts(client).refuse(now, refusedMaxSessions, "session")
}

// clientMetrics is what /metrics says of one client.
type clientMetrics struct {
	name    string
	calls   map[string]int64 // by outcome
	refused map[string]int64 // by reason
}

// metrics returns the counts of every client counted, and of each name in
// also (the configured clients), sorted by name.
func (cl *clientLimits) metrics(also []string) []clientMetrics {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	names := map[string]bool{}
	for _, n := range also {
		names[n] = true
	}
	for n := range cl.by {
		names[n] = true
	}
	var out []clientMetrics
	for _, n := range slices.Sorted(maps.Keys(names)) {
		m := clientMetrics{name: n, calls: map[string]int64{}, refused: map[string]int64{}}
		if c := cl.by[n]; c != nil {
			maps.Copy(m.calls, c.calls)
			maps.Copy(m.refused, c.refused)
		}
		out = append(out, m)
	}
	return out
}

// status returns what the status page shows of each client counted, of
// each name in also, and of each with sessions open (sessions, by name),
// sorted by name.
func (cl *clientLimits) status(also []string, sessions map[string]int) []clientStatus {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	names := map[string]bool{}
	for _, n := range also {
		names[n] = true
	}
	for n := range sessions {
		names[n] = true
	}
	for n := range cl.by {
		names[n] = true
	}
	var out []clientStatus
	for _, n := range slices.Sorted(maps.Keys(names)) {
		st := clientStatus{Name: n, Sessions: sessions[n]}
		if c := cl.by[n]; c != nil {
			st.InFlight = c.inFlight
			for _, v := range c.calls {
				st.Calls += v
			}
			for _, v := range c.refused {
				st.Refused += v
			}
			for i := range recentRefusals {
				r := c.recent[(c.next-1-i+2*recentRefusals)%recentRefusals]
				if !r.Time.IsZero() {
					st.Recent = append(st.Recent, r)
				}
			}
		}
		out = append(out, st)
	}
	return out
}
