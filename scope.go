package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sync"
	"time"
)

// Server scopes. A server with "scope": "session" runs one process for
// each client session that calls it, started at the session's first
// request to it and stopped with the stop ladder when the session ends;
// everything the process sends (its requests to the client, progress, log
// messages, resource updates) belongs to that session alone.
//
// Such a server has two kinds of backends. Its catalog backend is the one
// in Gateway.backends: it runs once, as a probe, when corral starts (or a
// reload adds the server), to list the server's tools, prompts and
// resources for the catalog, and is stopped as soon as it has. A session's
// backend is a backend like any other (supervised, restarted on a crash
// with the usual backoff and breaker), owned by one session: it reports to
// sessionEvents, which pass what it says to that session only, and it
// marks its processes with a name of its own (name#N), so that its sweep
// spares the other sessions' processes of the server.

// counted returns the call metrics that count b's calls: a session's
// backend's count as its server's.
func (b *backend) counted() *callMetrics {
	if b.scope != nil && b.scope.catalog != nil {
		return &b.scope.catalog.metrics
	}
	return &b.metrics
}

// scopedServers are the session-scoped servers' pools of processes, by
// catalog backend, and what serves a session's requests to them. Its
// fields above mu are set by newScopedServers and never changed. Its
// methods are safe for concurrent use.
//
// Lock order: mu is a leaf: no other lock is taken while it is held (a
// pool's mu is taken only after it is released).
type scopedServers struct {
	config func() *Config // the config in force (requestTimeout)
	log    *slog.Logger   // the pools' logger: each session's backend logs with its number
	// events is what a catalog backend reports to, except that its run
	// becoming ready stops it (probeEvents): the gateway.
	events backendEvents
	// subs, tasks and requests are the owners that a session's backend
	// passes what the server says to, for its session alone
	// (sessionEvents); subs also holds the subscriptions that subscribe
	// and unsubscribe answer.
	subs     *subscriptions
	tasks    *taskTable
	requests *serverRequests

	mu    sync.Mutex
	pools map[*backend]*instancePool
}

// newScopedServers returns no pools, serving session-scoped servers with
// the config in force that config returns, logging to log, and reporting
// what the servers say to events, subs, tasks and requests (see the fields
// of scopedServers).
func newScopedServers(config func() *Config, log *slog.Logger, events backendEvents,
	subs *subscriptions, tasks *taskTable, requests *serverRequests) *scopedServers {
	return &scopedServers{config: config, log: log, events: events,
		subs: subs, tasks: tasks, requests: requests, pools: map[*backend]*instancePool{}}
}

func (ss *scopedServers) add(p *instancePool) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.pools[p.catalog] = p
}

// pool returns the pool of catalog backend b, or nil once it was stopped.
func (ss *scopedServers) pool(b *backend) *instancePool {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.pools[b]
}

// remove forgets the pool of catalog backend b and returns it, or nil.
func (ss *scopedServers) remove(b *backend) *instancePool {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	p := ss.pools[b]
	delete(ss.pools, b)
	return p
}

// all returns every pool.
func (ss *scopedServers) all() []*instancePool {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	out := make([]*instancePool, 0, len(ss.pools))
	for _, p := range ss.pools {
		out = append(out, p)
	}
	return out
}

// instancePool is one session-scoped server's processes: its catalog
// backend, and a backend per session that called it. Its methods are safe
// for concurrent use.
//
// Lock order: mu, then a session's mu (read in tryGet); no other lock is
// taken while mu is held.
type instancePool struct {
	ss      *scopedServers // the owner, whose owners a session's backend reports to
	catalog *backend
	log     *slog.Logger

	mu        sync.Mutex
	bySession map[*session]*backend
	lastCall  map[*session]time.Time // when each session's last call to the server began
	next      int                    // the number of the last session's backend
	closed    bool                   // stop began: no backend starts any more
	// stopping counts the backends of ended sessions (and, once stop
	// began, every backend) still being stopped: their processes count
	// against maxInstances until they are gone.
	stopping int
	// freed is closed, and replaced, each time a stopped backend is
	// counted out: get waits on it for a slot.
	freed chan struct{}
	// stops joins the stops the pool runs in the background: of the
	// probe, and of the backends of sessions that ended.
	stops sync.WaitGroup
}

// newCatalog returns the catalog backend of a session-scoped server, with
// its pool: build makes it, not started, reporting to events.
func (ss *scopedServers) newCatalog(build func(events backendEvents) *backend) *backend {
	p := &instancePool{ss: ss, log: ss.log, bySession: map[*session]*backend{}, lastCall: map[*session]time.Time{}, freed: make(chan struct{})}
	p.catalog = build(probeEvents{ss.events, p})
	p.catalog.scope = &backendScope{}
	ss.add(p)
	return p.catalog
}

// stopSessions stops every session's process of backend b, if b is a
// session-scoped server's catalog backend, in parallel, and forgets its
// pool. It blocks until they are gone; see backend.stop for hurry and why.
func (ss *scopedServers) stopSessions(b *backend, hurry <-chan struct{}, why string) {
	if p := ss.remove(b); p != nil {
		p.stop(hurry, why)
	}
}

// errNeedsSession answers a 2026-07-28 request routed to a session-scoped
// server: such a request has no session to own a process, and a process
// per request would start (and hand-shake) a server for every call.
func errNeedsSession(b *backend) *wireError {
	return &wireError{Code: codeMethodNotFound, Message: fmt.Sprintf(
		`server %q has "scope": "session": each of its processes belongs to one client session, and a 2026-07-28 request has none; call it in a session (initialize with protocol version 2025-11-25 or earlier), or give it "scope": "shared"`, b.name)}
}

// forSession returns the backend that serves session s's requests to server
// b: b itself for a shared server; for a session-scoped one, the session's
// own backend, started at its first request, which may wait, within ctx and
// the server's requestTimeout, for a slot (see instancePool.get). modern
// says the request is a 2026-07-28 one, which has no session: it gets
// errNeedsSession.
func (ss *scopedServers) forSession(ctx context.Context, s *session, modern bool, b *backend) (*backend, *wireError) {
	if b.scope == nil {
		return b, nil
	}
	if modern {
		return nil, errNeedsSession(b)
	}
	p := ss.pool(b)
	if p == nil {
		return nil, unavailable("server %q was stopped; call again", b.name)
	}
	ctx, cancel := context.WithTimeout(ctx, ss.config().requestTimeout(b.cfg))
	defer cancel()
	return p.get(ctx, s)
}

// end stops the session's processes of session-scoped servers, in the
// background (see instancePool.end). endSession calls it after s.end, so
// that no process starts for s after it.
func (ss *scopedServers) end(s *session) {
	for _, p := range ss.all() {
		p.end(s)
	}
}

// get returns session s's backend of the server, starting it if s has
// none yet. It fails when s has ended, the pool is stopping, or the
// server already runs maxInstances processes of sessions that have not
// ended. The processes of ended sessions, which the stop ladder may take
// seconds to end, still count against maxInstances: while one of them
// holds the slot s needs, get blocks until one is gone or ctx ends.
func (p *instancePool) get(ctx context.Context, s *session) (*backend, *wireError) {
	for {
		within := time.Duration(math.MaxInt64)
		if deadline, ok := ctx.Deadline(); ok {
			within = time.Until(deadline)
		}
		b, freed, werr := p.tryGet(s, within)
		if freed == nil {
			return b, werr
		}
		select {
		case <-freed:
		case <-ctx.Done():
			return nil, werr
		}
	}
}

// tryGet is get without waiting: when only processes of ended sessions
// hold the slot s needs, or a session that makes no call will have held it
// idle for sessionIdleTimeout within the time get may still wait, it
// returns the error for s along with the channel closed when a slot may be
// had.
func (p *instancePool) tryGet(s *session, within time.Duration) (*backend, <-chan struct{}, *wireError) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if b := p.bySession[s]; b != nil {
		p.lastCall[s] = time.Now()
		return b, nil, nil
	}
	ended := s.hasEnded()
	c := p.catalog
	switch max := c.cfg.maxInstances(); {
	case p.closed:
		return nil, nil, unavailable("server %q was stopped; call again", c.name)
	case ended:
		return nil, nil, &wireError{Code: codeInternalError, Message: "the client's session has ended"}
	case c.scope.instances.Load() >= int64(max):
		werr := unavailable(`server %q has "scope": "session" and runs %d processes, one per session, the limit (maxInstances); corral starts one for this session once another session ends, or raise maxInstances`, c.name, max)
		var soon time.Duration
		if p.stopping == 0 {
			soon = p.reclaimIdle(time.Duration(p.ss.config().SessionIdleTimeout))
		}
		if p.stopping == 0 && soon > 0 && soon < within {
			// A session that makes no call holds the place: it is
			// reclaimed then, if it still makes none.
			ready := make(chan struct{})
			time.AfterFunc(soon, func() { close(ready) })
			return nil, ready, werr
		}
		if p.stopping > 0 {
			return nil, p.freed, werr // an ended session's process, going
		}
		return nil, nil, werr
	}
	p.next++
	b := newBackend(sessionEvents{p.ss, s}, p.log.With("instance", p.next), c.instance, c.reaper, c.cgroups, c.gcfg, c.cfg)
	b.scope = &backendScope{marker: fmt.Sprintf("%s#%d", c.name, p.next), catalog: c}
	b.lineBufs = c.lineBufs
	c.scope.instances.Add(1)
	p.bySession[s] = b
	p.lastCall[s] = time.Now()
	b.start()
	return b, nil, nil
}

// reclaimIdle frees, for a session that waits for a slot, the slot of the
// session whose last call to the server began longest ago, if that was
// idle or more ago and the session has no call in flight: an open GET
// stream keeps a session alive, and must not let it hold a process that
// others wait for. Its process is stopped in the background, counted in
// stopping until it is gone; the session's next call starts a new one.
// When none can be freed yet, it returns how long until the first of the
// sessions with no call in flight will have been idle that long, or zero
// if every session has a call in flight. p.mu is held, and stop has not
// begun.
func (p *instancePool) reclaimIdle(idle time.Duration) (soon time.Duration) {
	var victim *session
	var oldest time.Time
	for s := range p.bySession {
		if s.inFlight() > 0 {
			continue
		}
		last := p.lastCall[s]
		if left := idle - time.Since(last); left > 0 {
			if soon == 0 || left < soon {
				soon = left
			}
			continue
		}
		if victim == nil || last.Before(oldest) {
			victim, oldest = s, last
		}
	}
	if victim == nil {
		return soon
	}
	b := p.bySession[victim]
	delete(p.bySession, victim)
	delete(p.lastCall, victim)
	p.stopping++
	why := fmt.Sprintf("was stopped: its session made no call to it for %s (sessionIdleTimeout) and another session needs its place (maxInstances); the session's next call starts a new process", idle)
	p.log.Warn("a session's process gives its place to another session", "server", p.catalog.name, "idle", time.Since(oldest).Round(time.Second))
	p.stops.Add(1)
	go func() {
		defer p.stops.Done()
		p.retire(b, nil, why)
	}()
	return 0
}

// lookup returns session s's backend of the server, or nil.
func (p *instancePool) lookup(s *session) *backend {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.bySession[s]
}

// background runs f on a goroutine that stop joins, and reports whether it
// did: once stop began, it does not.
func (p *instancePool) background(f func()) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.stops.Add(1)
	go func() {
		defer p.stops.Done()
		f()
	}()
	return true
}

// end stops session s's backend of the server, if any, with the stop
// ladder, in the background: it does not block.
func (p *instancePool) end(s *session) {
	p.mu.Lock()
	b := p.bySession[s]
	delete(p.bySession, s)
	delete(p.lastCall, s)
	if b != nil {
		p.stopping++
	}
	p.mu.Unlock()
	if b == nil {
		return
	}
	if !p.background(func() { p.retire(b, nil, "was stopped: its client's session ended") }) {
		p.retire(b, nil, "was stopped: its client's session ended") // stop is stopping the others
	}
}

// retire stops b, a session's backend counted in stopping, and counts it
// out of the server's processes once it is gone, waking the gets waiting
// for a slot.
func (p *instancePool) retire(b *backend, hurry <-chan struct{}, why string) {
	b.stop(hurry, why)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.catalog.scope.instances.Add(-1)
	p.stopping--
	close(p.freed)
	p.freed = make(chan struct{})
}

// stop stops every session's backend of the server in parallel, and joins
// the stops under way. No backend starts after stop begins. It blocks until
// every process is gone.
func (p *instancePool) stop(hurry <-chan struct{}, why string) {
	p.mu.Lock()
	p.closed = true
	all := p.bySession
	p.bySession = map[*session]*backend{}
	p.stopping += len(all)
	p.mu.Unlock()
	p.catalog.scope.listed.Store(false)
	var wg sync.WaitGroup
	for _, b := range all {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.retire(b, hurry, why)
		}()
	}
	wg.Wait()
	p.stops.Wait()
}

// probeEvents are what a session-scoped server's catalog backend reports
// to: the gateway's events (scopedServers.events), except that the run
// becoming ready (it has listed the server) stops it, and it subscribes to
// nothing.
type probeEvents struct {
	backendEvents
	pool *instancePool
}

// backendReady stops the probe, in the background: its lists stay in the
// catalog.
func (pe probeEvents) backendReady(b *backend, _ *mux) {
	b.scope.listed.Store(true)
	pe.pool.background(func() {
		b.stop(nil, "was stopped: it ran only to list the server; each session gets a process of its own")
	})
}

func (pe probeEvents) subscribedURIs(string) []string { return nil }

// sessionEvents are what a session's backend of a session-scoped server
// reports to: what the server sends goes to session s alone.
type sessionEvents struct {
	ss *scopedServers // whose subs, tasks and requests it passes to
	s  *session
}

var _ backendEvents = sessionEvents{}

// backendChanged does nothing: the catalog is the catalog backend's, and
// the health the server's.
func (se sessionEvents) backendChanged() {}

// stateChanged does nothing: a session's process of a session-scoped
// server is started for its session's calls, whose errors say what went
// wrong; the server's catalog backend (its probe) reports to the gateway.
func (se sessionEvents) stateChanged(*backend, backendState, backendState, string) {}

// backendReady brings a new run up to date with the session: its log
// level and its subscriptions to the server's resources.
func (se sessionEvents) backendReady(b *backend, m *mux) {
	se.ss.tasks.forgetWhere(func(tk *task) bool { return tk.b == b && tk.run != m }) // see taskTable.forgetServer
	_, level := se.s.client()
	b.catchUp(m, level, func() []string { return se.subscribedURIs(b.name) })
}

// serverRequest passes the server's request to the session: only its
// calls are in flight to this process, so the one-session rule of
// serverRequests.serverRequest finds it, on the stream of its latest call. With
// none in flight (a server asking for roots on its own), it goes on the
// session's own stream.
func (se sessionEvents) serverRequest(b *backend, m *mux, msg *wireMsg) {
	info, known := methods[msg.Method]
	if len(m.callers()) > 0 || !known || info.from != fromServer || info.notification {
		se.ss.requests.serverRequest(b, m, msg)
		return
	}
	caps, _ := se.s.client()
	rel := &related{s: se.s, caps: caps}
	rel.setSend(se.s.send)
	se.ss.requests.passRequest(b, m, msg, rel)
}

// serverLog passes the server's log message to the session, if it asked
// for messages of its level.
func (se sessionEvents) serverLog(b *backend, params json.RawMessage) {
	_, wanted := se.s.client()
	want := slices.Index(logLevels, wanted)
	if note, level := logNote(b, params); note != nil && want >= 0 && want <= level {
		se.s.send(note)
	}
}

// resourceUpdated passes the update to the session, if it subscribed to
// the resource, with the URI it used.
func (se sessionEvents) resourceUpdated(b *backend, params json.RawMessage) {
	se.ss.subs.tellUpdated(b.name, params, se.s)
}

func (se sessionEvents) serverCancelled(m *mux, params json.RawMessage) {
	se.ss.requests.serverCancelled(m, params)
}

func (se sessionEvents) taskStatus(b *backend, params json.RawMessage) { se.ss.tasks.status(b, params) }

// subscribedURIs returns the server's own URIs of the session's
// subscriptions to server's resources.
func (se sessionEvents) subscribedURIs(server string) []string {
	var uris []string
	for _, key := range se.ss.subs.keysOf(se.s) {
		if key.server == server {
			uris = append(uris, key.uri)
		}
	}
	slices.Sort(uris)
	return uris
}

// applyLogLevels asks each session's process of a session-scoped server
// for the level its session wants.
func (ss *scopedServers) applyLogLevels() {
	for _, p := range ss.all() {
		for s, b := range p.owners() {
			_, level := s.client()
			b.setLogLevel(level)
		}
	}
}

// owners returns every session's backend of the server, by session.
func (p *instancePool) owners() map[*session]*backend {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[*session]*backend, len(p.bySession))
	for s, b := range p.bySession {
		out[s] = b
	}
	return out
}

// subscribe answers session s's resources/subscribe to a resource
// of session-scoped server b: its own process of b hears of it. A
// 2026-07-28 listen request's session, which never initialized, gets
// errNeedsSession: its subscription would start a process of its own.
func (ss *scopedServers) subscribe(ctx context.Context, s *session, b *backend, key subKey, uri string, params json.RawMessage) (any, error) {
	sessionless := s.version() == ""
	inst, werr := ss.forSession(ctx, s, sessionless, b)
	if werr != nil {
		return nil, werr
	}
	ss.subs.add(key, s, uri)
	if inst.isModern() {
		inst.resubscribe()
		return struct{}{}, nil
	}
	ctx, cancel := context.WithTimeout(ctx, ss.config().requestTimeout(b.cfg))
	defer cancel()
	if err := inst.callInto(ctx, "resources/subscribe", setMember(params, "uri", key.uri)); err != nil {
		ss.subs.undo(key, s)
		return nil, err
	}
	return struct{}{}, nil
}

// unsubscribe answers session s's resources/unsubscribe of a resource of
// session-scoped server b: its own process of b hears of it.
func (ss *scopedServers) unsubscribe(ctx context.Context, s *session, b *backend, key subKey) (any, error) {
	ss.subs.drop(key, s)
	if p := ss.pool(b); p != nil {
		if inst := p.lookup(s); inst != nil {
			inst.unsubscribe(ctx, key.uri)
		}
	}
	return struct{}{}, nil
}
