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
//
// A server with "scope": "client" is built the same way, but its processes
// belong to named clients rather than sessions: the first call of any of a
// client's sessions starts the client's process, with the client's own env
// and headers merged over the server's (ClientConfig.serverFor); the
// client's other sessions share it; it is stopped when the last of them
// ends, when a reload removes the client or changes its env or headers for
// the server, and with corral. A session with no named client gets
// errNeedsClient: the server's processes carry one client's secrets each,
// and there is none to choose. What such a process sends goes to its
// client's sessions alone (clientEvents).

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

// instancePool is one session- or client-scoped server's processes: its
// catalog backend, and a backend per owner that called it: per session, or
// per named client. Its methods are safe for concurrent use.
//
// Lock order: mu, then a session's mu (read in tryGet); no other lock is
// taken while mu is held.
type instancePool struct {
	ss      *scopedServers // the owner, whose owners a session's backend reports to
	catalog *backend
	log     *slog.Logger

	// perClient says the owners are named clients ("scope": "client"):
	// each owner key is a client's name, else a *session.
	perClient bool

	mu       sync.Mutex
	byOwner  map[any]*backend
	lastCall map[any]time.Time // when each owner's last call to the server began
	// members are, by client, the sessions that called the client's
	// process and have not ended (perClient only): it is stopped when the
	// last one ends.
	members map[string]map[*session]bool
	// values are, by client, the env and headers its process was started
	// with (perClient only), to tell whether a reload changed them.
	values map[string]string
	next   int  // the number of the last session's backend
	closed bool // stop began: no backend starts any more
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
func (ss *scopedServers) newCatalog(perClient bool, build func(events backendEvents) *backend) *backend {
	p := &instancePool{ss: ss, log: ss.log, perClient: perClient, byOwner: map[any]*backend{}, lastCall: map[any]time.Time{},
		members: map[string]map[*session]bool{}, values: map[string]string{}, freed: make(chan struct{})}
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
		`server %q has "scope": %q: each of its processes belongs to one client session or client, and a 2026-07-28 request has no session to keep it alive; call it in a session (initialize with protocol version 2025-11-25 or earlier), or give it "scope": "shared"`, b.name, b.cfg.Scope)}
}

// errNeedsClient answers a request of a session with no named client to a
// client-scoped server: its processes each carry one client's env and
// headers, and the session is none's.
func errNeedsClient(b *backend, who principal) *wireError {
	return &wireError{Code: codeInvalidRequest, Message: fmt.Sprintf(
		`server %q has "scope": "client": it runs a process per named client, with that client's env and headers, and this caller (%s) names no client; call it with a named client's bearer token (see "clients"), or give the server "scope": "session" or "shared"`, b.name, who.name)}
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
	if b.cfg.clientScoped() && s.who.client == "" {
		return nil, errNeedsClient(b, s.who)
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
	key := p.owner(s)
	ended := s.hasEnded()
	if b := p.byOwner[key]; b != nil && !(p.perClient && ended) {
		p.lastCall[key] = time.Now()
		p.join(s)
		return b, nil, nil
	}
	c := p.catalog
	switch max := c.cfg.maxInstances(); {
	case p.closed:
		return nil, nil, unavailable("server %q was stopped; call again", c.name)
	case ended:
		return nil, nil, &wireError{Code: codeInternalError, Message: "the client's session has ended"}
	case c.scope.instances.Load() >= int64(max) && p.perClient:
		werr := unavailable(`server %q has "scope": "client" and runs %d processes, one per client, the limit (maxInstances); corral starts one for client %s once another client's sessions end, or raise maxInstances`, c.name, max, quoteName(s.who.client))
		if p.stopping > 0 {
			return nil, p.freed, werr
		}
		return nil, nil, werr
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
	var events backendEvents = sessionEvents{p.ss, s}
	cfg, log := c.cfg, p.log.With("instance", p.next)
	if p.perClient {
		events = clientEvents{p.ss, p, s.who.client}
		cfg = p.ss.config().Clients[s.who.client].serverFor(c.cfg)
		p.values[s.who.client] = clientValues(cfg)
		log = log.With("client", s.who.client)
	}
	b := newBackend(events, log, c.instance, c.reaper, c.cgroups, c.gcfg, cfg)
	b.scope = &backendScope{marker: fmt.Sprintf("%s#%d", c.name, p.next), catalog: c}
	b.lineBufs = c.lineBufs
	c.scope.instances.Add(1)
	p.byOwner[key] = b
	p.lastCall[key] = time.Now()
	p.join(s)
	b.start()
	return b, nil, nil
}

// owner returns the key of session s's process in the pool: its client's
// name for a client-scoped server, else s.
func (p *instancePool) owner(s *session) any {
	if p.perClient {
		return s.who.client
	}
	return s
}

// join counts s among its client's sessions that use the client's process,
// for a client-scoped server. p.mu is held.
func (p *instancePool) join(s *session) {
	if !p.perClient {
		return
	}
	m := p.members[s.who.client]
	if m == nil {
		m = map[*session]bool{}
		p.members[s.who.client] = m
	}
	m[s] = true
}

// clientValues returns what of cfg, a client's process's server config,
// a reload that changes restarts the process: its env and headers (fmt
// prints maps sorted).
func clientValues(cfg *ServerConfig) string {
	return fmt.Sprint(cfg.Env, cfg.Headers)
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
	for key := range p.byOwner {
		s := key.(*session) // never called for a client-scoped server
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
	b := p.byOwner[victim]
	delete(p.byOwner, victim)
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
	return p.byOwner[p.owner(s)]
}

// sessionsOf returns the sessions of client that use its process, for a
// client-scoped server.
func (p *instancePool) sessionsOf(client string) []*session {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]*session, 0, len(p.members[client]))
	for s := range p.members[client] {
		out = append(out, s)
	}
	return out
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
// ladder, in the background: it does not block. For a client-scoped
// server, s leaves its client's sessions, and the client's process is
// stopped only if s was the last of them.
func (p *instancePool) end(s *session) {
	why := "was stopped: its client's session ended"
	p.mu.Lock()
	key := p.owner(s)
	if p.perClient {
		m := p.members[s.who.client]
		if !m[s] {
			p.mu.Unlock()
			return
		}
		delete(m, s)
		if len(m) > 0 {
			p.mu.Unlock()
			return
		}
		delete(p.members, s.who.client)
		why = "was stopped: the last session of its client ended"
	}
	b := p.byOwner[key]
	delete(p.byOwner, key)
	delete(p.lastCall, key)
	if b != nil {
		p.stopping++
	}
	p.mu.Unlock()
	if b == nil {
		return
	}
	p.retireBackground(b, why)
}

// retireBackground retires b, counted in stopping, in the background, or
// at once once stop began (it is stopping the others).
func (p *instancePool) retireBackground(b *backend, why string) {
	if !p.background(func() { p.retire(b, nil, why) }) {
		p.retire(b, nil, why)
	}
}

// reconfigure stops, for a client-scoped server, the process of each
// client that cfg, the config a reload put in force, no longer has or
// gives other env or headers for the server: the client's next call
// starts one with its new values. Its sessions stay its members.
func (p *instancePool) reconfigure(cfg *Config) {
	if !p.perClient {
		return
	}
	var gone []*backend
	p.mu.Lock()
	for key, b := range p.byOwner {
		client := key.(string)
		cl, ok := cfg.Clients[client]
		if ok && clientValues(cl.serverFor(p.catalog.cfg)) == p.values[client] {
			continue
		}
		delete(p.byOwner, key)
		delete(p.lastCall, key)
		delete(p.values, client)
		p.stopping++
		gone = append(gone, b)
	}
	p.mu.Unlock()
	for _, b := range gone {
		p.retireBackground(b, "was stopped by a reload that changed or removed its client's env or headers for it; the client's next call starts it again")
	}
}

// reconfigure restarts the client-scoped servers' processes whose client's
// values cfg changed (see instancePool.reconfigure).
func (ss *scopedServers) reconfigure(cfg *Config) {
	for _, p := range ss.all() {
		p.reconfigure(cfg)
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
	all := p.byOwner
	p.byOwner = map[any]*backend{}
	p.members = map[string]map[*session]bool{}
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

func (pe probeEvents) modernTaskIDs(*backend) []string { return nil }

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

func (se sessionEvents) modernTaskIDs(b *backend) []string { return se.ss.tasks.serverTaskIDs(b) }

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
		for key, b := range p.owners() {
			if s, ok := key.(*session); ok {
				_, level := s.client()
				b.setLogLevel(level)
			} else if level := p.clientLevel(key.(string)); level != "" {
				b.setLogLevel(level)
			}
		}
	}
}

// clientLevel returns the most verbose log level that one of client's
// sessions asked for, or "" if none asked.
func (p *instancePool) clientLevel(client string) string {
	best := ""
	for _, s := range p.sessionsOf(client) {
		if _, level := s.client(); level != "" && (best == "" || slices.Index(logLevels, level) < slices.Index(logLevels, best)) {
			best = level
		}
	}
	return best
}

// owners returns every owner's backend of the server, by owner key.
func (p *instancePool) owners() map[any]*backend {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[any]*backend, len(p.byOwner))
	for k, b := range p.byOwner {
		out[k] = b
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
		if inst := p.lookup(s); inst != nil && !p.anotherSubscribes(s, key) {
			inst.unsubscribe(ctx, key.uri)
		}
	}
	return struct{}{}, nil
}

// anotherSubscribes reports whether a session other than s that shares
// s's process (a session of the same client, for a client-scoped server)
// is still subscribed to key: the process keeps the subscription for it.
func (p *instancePool) anotherSubscribes(s *session, key subKey) bool {
	if !p.perClient {
		return false
	}
	for _, o := range p.sessionsOf(s.who.client) {
		if o != s && slices.Contains(p.ss.subs.keysOf(o), key) {
			return true
		}
	}
	return false
}

// clientEvents are what a named client's process of a client-scoped
// server reports to: what the server sends goes to that client's sessions
// alone, never to another client's.
type clientEvents struct {
	ss     *scopedServers
	pool   *instancePool
	client string
}

var _ backendEvents = clientEvents{}

func (ce clientEvents) backendChanged()                                           {}
func (ce clientEvents) stateChanged(*backend, backendState, backendState, string) {}

// backendReady brings a new run up to date with the client's sessions:
// the most verbose log level one asked for, and their subscriptions.
func (ce clientEvents) backendReady(b *backend, m *mux) {
	ce.ss.tasks.forgetWhere(func(tk *task) bool { return tk.b == b && tk.run != m })
	b.catchUp(m, ce.pool.clientLevel(ce.client), func() []string { return ce.subscribedURIs(b.name) })
}

// serverRequest passes the server's request to the client: to the session
// whose call is in flight, as for a shared server; with none in flight, on
// the stream of one of the client's sessions.
func (ce clientEvents) serverRequest(b *backend, m *mux, msg *wireMsg) {
	info, known := methods[msg.Method]
	sessions := ce.pool.sessionsOf(ce.client)
	if len(m.callers()) > 0 || !known || info.from != fromServer || info.notification || len(sessions) == 0 {
		ce.ss.requests.serverRequest(b, m, msg)
		return
	}
	s := sessions[0]
	caps, _ := s.client()
	rel := &related{s: s, caps: caps}
	rel.setSend(s.send)
	ce.ss.requests.passRequest(b, m, msg, rel)
}

// serverLog passes the server's log message to each of the client's
// sessions that asked for messages of its level.
func (ce clientEvents) serverLog(b *backend, params json.RawMessage) {
	note, level := logNote(b, params)
	if note == nil {
		return
	}
	for _, s := range ce.pool.sessionsOf(ce.client) {
		_, wanted := s.client()
		if want := slices.Index(logLevels, wanted); want >= 0 && want <= level {
			s.send(note)
		}
	}
}

// resourceUpdated passes the update to each of the client's sessions that
// subscribed to the resource.
func (ce clientEvents) resourceUpdated(b *backend, params json.RawMessage) {
	for _, s := range ce.pool.sessionsOf(ce.client) {
		ce.ss.subs.tellUpdated(b.name, params, s)
	}
}

func (ce clientEvents) serverCancelled(m *mux, params json.RawMessage) {
	ce.ss.requests.serverCancelled(m, params)
}

func (ce clientEvents) taskStatus(b *backend, params json.RawMessage) { ce.ss.tasks.status(b, params) }

func (ce clientEvents) modernTaskIDs(b *backend) []string { return ce.ss.tasks.serverTaskIDs(b) }

// subscribedURIs returns the server's own URIs of the client's sessions'
// subscriptions to server's resources, each once.
func (ce clientEvents) subscribedURIs(server string) []string {
	var uris []string
	for _, s := range ce.pool.sessionsOf(ce.client) {
		for _, key := range ce.ss.subs.keysOf(s) {
			if key.server == server && !slices.Contains(uris, key.uri) {
				uris = append(uris, key.uri)
			}
		}
	}
	slices.Sort(uris)
	return uris
}
