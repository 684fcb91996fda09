package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Gateway is the one MCP server that clients see: it answers initialize,
// ping and tools/list itself and routes tools/call to the backend that owns
// the tool. Its methods are safe for concurrent use.
//
// Gateway holds the wiring (config, backends, catalog, health) and the
// route; each other concern has its own type and lock: the sessions
// (session.go), their subscriptions (subscriptions.go) and tasks
// (tasks.go), the servers' requests to clients (serverrequests.go), the
// session-scoped servers' processes (scope.go), what clients are offered
// (offer.go) and what the backends report (gatewayEvents).
//
// Lock order, the one order of the locks that nest (each type's doc says
// its part of it): reloadMu (held while Reload stops and starts backends),
// then catMu (held while a rebuild reads the backends and tells the
// sessions), then any of g.mu, a backend's mu and sessionSet.mu. Under a
// backend's mu its lazyState.mu and its upstream's mu are taken. A
// session's mu is taken under sessionSet.mu, the HTTP front end's mu
// (expireIdle) or an instancePool's mu, and only callingSessions.mu is
// taken under it. These are leaves, held only to read or change their own
// fields, never while another lock is taken, a session is sent a message
// or a server is called: g.mu, callingSessions.mu, lazyState.mu,
// catalog.mu, scopedServers.mu, subscriptions.mu, parkedExchanges.mu,
// heldRequests.mu, serverNotices.mu, taskTable.mu and registry.mu. No lock of the gateway's is taken while a
// backend's mu is held.
type Gateway struct {
	cfg      *Config // replaced by Reload; read it with config
	acc      *access // the views of cfg's clients and profiles, replaced with it; read it with viewOf
	log      *slog.Logger
	backends []*backend // sorted by name; replaced whole by Reload, never changed in place
	instance string     // the marker of this gateway's processes; see newInstanceID
	reaper   *orphanReaper
	cgroups  *cgroupTree // where servers get cgroups of their own, if on

	// cut ends when calls still in flight at the end of shutdownTimeout are
	// cut off; see CutOff.
	cut    context.Context
	cutOff context.CancelFunc

	// quiet ends when corral begins to shut down: streams that carry only
	// notifications end then, as GET streams do.
	quiet    context.Context
	endQuiet context.CancelFunc

	// logHealth, when set, logs a summary of every backend's state each
	// time it changes: with -stdio there is no /healthz to ask.
	logHealth bool
	healthLog healthLog // what logHealth last logged

	// reloadMu orders Reload and Stop.
	reloadMu sync.Mutex

	// catMu orders the rebuilds of the catalog.
	catMu sync.Mutex
	// catWanted counts the calls of rebuildCatalog; catBuilt, under catMu,
	// is the count the catalog in force was built after (see rebuildCatalog).
	catWanted   atomic.Uint64
	catBuilt    uint64
	catRebuilds int // under catMu: the rebuilds made, which tests count
	// catAcc, under catMu, is the access whose views the sessions were
	// last told of changes in: the next rebuild tells each session what
	// changed from its view then to its view now.
	catAcc *access
	// collisions, under catMu, are the name collisions and the override
	// problems logged, so that each is logged once, when it appears, not
	// at every rebuild while it lasts.
	collisions map[string]bool
	// invalidTools, under catMu, are the tools left out for their
	// x-mcp-header annotations that were logged (catalog.invalidTools),
	// each once while it lasts, as collisions are.
	invalidTools map[string]bool

	mu     sync.Mutex // guards the fields below, and cfg and backends
	cat    *catalog
	closed bool

	pins           *pinStore       // the pinned tool definitions, and the changes seen (pins.go)
	sessions       *sessionSet     // the sessions, their calls in flight and their unsent answers (session.go)
	subs           *subscriptions  // the sessions' subscriptions to resources (subscriptions.go)
	listens        *listens        // what serves subscriptions/listen (listen.go)
	serverRequests *serverRequests // servers' requests to clients, and modern clients' parked calls (serverrequests.go)
	tasks          *taskTable      // the sessions' tasks, by corral's ID and the server's (tasks.go)
	scopes         *scopedServers  // the session-scoped servers' processes (scope.go)
	events         *gatewayEvents  // what the shared servers' backends report to
	offer          *offer          // what clients are offered: lists, items, capabilities (offer.go)
	search         toolSearch      // the search indexes of search mode (search.go)
	notices        *serverNotices  // what clients hear of servers going down and coming back, and corral://status (ownstatus.go)

	// lineBufs holds the servers' large stdout buffers, which a server
	// borrows only while a line or a burst of lines needs one (lineReader).
	lineBufs sync.Pool

	// owned are the goroutines the gateway starts that outlive the call
	// that starts them; Stop joins them.
	owned goroutines

	// registrar holds the servers added through the admin API (admin.go),
	// which every reload keeps.
	registrar *registrar

	status statusReader // what the status page reads (status.go)

	audit *auditTrail // the audit trail (audit.go)

	clients *clientLimits // each client's counts and limits (clientlimits.go)

	forwarder forwarder // what an era's forward needs (eraRules.forward)

	// tracer makes the requests' spans (tracing.go); nil while tracing is
	// off. It is made once, with the config corral starts with.
	tracer *tracer
}

const defaultPageSize = 1000

// NewGateway returns a gateway for cfg. Its backends are not started. The
// reaper, if not nil, is told of every process the gateway starts; it is nil
// unless corral is a child subreaper.
func NewGateway(cfg *Config, log *slog.Logger, reaper *orphanReaper) *Gateway {
	g := &Gateway{cfg: cfg, acc: newAccess(cfg), log: log, cat: &catalog{},
		instance: newInstanceID(), reaper: reaper, clients: newClientLimits()}
	g.offer = &offer{catalog: g.currentCatalog, backends: g.backendList}
	g.tasks = newTaskTable(g.config, g.forward, &g.owned, func(who principal, server, tool string) bool {
		return g.currentCatalog().seesTool(g.viewOf(who), server, tool)
	})
	g.serverRequests = newServerRequests(g.config, log, g.tasks.relatedSession, g.tasks.clientRelated)
	// g.scopes, made below with g.subs, answers the subscriptions to
	// session-scoped servers.
	g.subs = newSubscriptions(g.config, g.backendList, &g.owned, g.offer.resolveURI, g.offer.unknown, g.viewOf,
		func(ctx context.Context, s *session, b *backend, key subKey, uri string, params json.RawMessage) (any, error) {
			return g.scopes.subscribe(ctx, s, b, key, uri, params)
		},
		func(ctx context.Context, s *session, b *backend, key subKey) (any, error) {
			return g.scopes.unsubscribe(ctx, s, b, key)
		})
	g.events = &gatewayEvents{} // filled below, once every owner is made
	g.scopes = newScopedServers(g.config, log, g.events, g.subs, g.tasks, g.serverRequests)
	g.registrar = newRegistrar(g.config, g.reconfigure, g.backendList)
	g.cgroups = newCgroupTree(g.instance)
	g.audit = newAuditTrail(log)
	g.healthLog.log = log
	g.audit.withArguments = func(server string) bool { return g.config().auditArguments(server) }
	g.audit.counted = g.clients.called
	g.audit.configure(cfg)
	g.pins = newPinStore(log, cfg)
	logContainment(log, g.cgroups, reaper != nil, cfg)
	g.cut, g.cutOff = context.WithCancel(context.Background())
	g.sessions = newSessionSet(g.config, g.cut, sessionHooks{
		waitFirstStarts: g.offer.waitFirstStarts, capabilities: g.offer.capabilities, instructions: g.offer.instructions,
		viewOf: g.viewOf, backends: g.backendList, scopedLogLevels: g.scopes.applyLogLevels,
		endScoped: g.scopes.end, unsubscribeAll: g.subs.unsubscribeAll, forgetTasks: g.tasks.forgetSession,
	})
	g.serverRequests.sole = g.sessions.sole
	g.serverRequests.seesServer = func(s *session, server string) bool { return g.sessions.viewOf(s.who).seesServer(server) }
	g.quiet, g.endQuiet = context.WithCancel(context.Background())
	g.status = statusReader{backendList: g.backendList, sessions: g.sessions.count, pins: g.pins.changed, clients: func() []clientStatus {
		// Every named client of the config in force, and every principal
		// that has sessions open or calls counted.
		return g.clients.status(slices.Sorted(maps.Keys(g.config().Clients)), g.sessions.countByName())
	}}
	g.notices = newServerNotices(g.sessions, g.status.status, func(v *view) func(string) bool { return visibleServers(g.currentCatalog(), v) })
	g.forwarder = forwarder{config: g.config, requests: g.serverRequests, cut: g.cut, owned: &g.owned, answerReply: g.answerReply}
	g.listens = newListens(log, g.subs, g.tasks, g.sessions.add, g.sessions.endSession, g.quiet.Done())
	*g.events = gatewayEvents{changed: g.backendChanged, sessions: g.sessions, subs: g.subs, tasks: g.tasks, requests: g.serverRequests, notices: g.notices}
	warnNoCacheDir(cfg, log)
	g.tracer = newTracer(cfg.Tracing, log)
	for _, s := range cfg.Servers() {
		g.backends = append(g.backends, g.newServer(cfg, s))
	}
	return g
}

// currentCatalog returns the catalog in force. A catalog is never changed
// once built: a rebuild replaces it whole.
func (g *Gateway) currentCatalog() *catalog {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.cat
}

// viewOf returns the view of who in the config in force (see
// access.viewOf). It is safe for concurrent use.
func (g *Gateway) viewOf(who principal) *view {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.acc.viewOf(who)
}

// searches reports whether who lists tools in search mode, in the config in
// force (search.go).
func (g *Gateway) searches(who principal) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.acc.searches(who)
}

// backendList returns the backends in force, sorted by name.
func (g *Gateway) backendList() []*backend {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.backends
}

// config returns the config in force.
func (g *Gateway) config() *Config {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.cfg
}

// reloadReport says what a reload did.
type reloadReport struct {
	Added, Removed, Changed, Kept []string
	NeedRestart                   []string // settings that take effect only when corral restarts
}

// Reload applies cfg, a new config, where it differs from the one in force:
// servers it adds are started, servers it removes are stopped with the stop
// ladder, servers whose settings changed are stopped and started again, and
// the others, with their calls in flight, are left alone. Settings read at
// each request (requestTimeout, maxRequestBytes, allowedOrigins, the bearer
// token, the session and stream limits, shutdownTimeout) apply at once;
// listen, maxHeaderBytes and the read timeouts need a restart and keep their
// old values. Reload blocks until the removed and changed servers are stopped.
// The servers registered through the admin API are kept (registry.merge).
func (g *Gateway) Reload(cfg *Config) reloadReport {
	g.reloadMu.Lock()
	defer g.reloadMu.Unlock()
	return g.reload(g.registrar.merge(cfg, g.log))
}

// errGatewayClosed is reconfigure's error once Stop has begun.
var errGatewayClosed = errors.New("corral is shutting down")

// reconfigure reloads, as Reload does, the config that edit makes of the
// one in force. edit runs under reloadMu, so that what it checks and
// changes (the admin API's registry) agrees with the config in force; if
// it returns an error, reconfigure returns it and reloads nothing. Once
// Stop has begun it returns errGatewayClosed and does not call edit.
func (g *Gateway) reconfigure(edit func(cfg *Config) (*Config, error)) error {
	g.reloadMu.Lock()
	defer g.reloadMu.Unlock()
	g.mu.Lock()
	cfg, closed := g.cfg, g.closed
	g.mu.Unlock()
	if closed {
		return errGatewayClosed
	}
	next, err := edit(cfg)
	if err != nil {
		return err
	}
	g.reload(next)
	return nil
}

// reload is Reload of cfg as it is, with reloadMu held.
func (g *Gateway) reload(cfg *Config) reloadReport {
	var r reloadReport
	g.mu.Lock()
	old, oldCfg, closed := g.backends, g.cfg, g.closed
	g.mu.Unlock()
	if closed {
		return r
	}
	r.NeedRestart = keepStartupSettings(cfg, oldCfg)
	plan := planReload(cfg, oldCfg, old, &r, g.newServer)
	g.mu.Lock()
	acc := newAccess(cfg)
	g.cfg, g.acc, g.backends = cfg, acc, plan.next
	g.mu.Unlock()
	g.audit.configure(cfg)
	g.pins.configure(cfg)
	g.rebuildCatalog()
	g.sessions.endRemoved(acc, g.log)
	g.scopes.reconfigure(cfg)
	g.replaceServers(cfg, plan)
	return r
}

// keepStartupSettings sets each setting of cfg that the HTTP server and
// its listener took when corral started (listen, replica, maxHeaderBytes,
// tracing, readHeaderTimeout and readTimeout) back to its value in old,
// the config in force, and returns a line for each that differed, for
// reloadReport.NeedRestart, or nil if none did.
func keepStartupSettings(cfg, old *Config) []string {
	var needRestart []string
	if cfg.Listen != old.Listen {
		needRestart = append(needRestart, fmt.Sprintf("listen (%s -> %s)", old.Listen, cfg.Listen))
		cfg.Listen = old.Listen
	}
	if cfg.Replica != old.Replica { // the IDs issued name the old one
		needRestart = append(needRestart, fmt.Sprintf("replica (%s -> %s)", old.Replica, cfg.Replica))
		cfg.Replica = old.Replica
	}
	if cfg.MaxHeaderBytes != old.MaxHeaderBytes {
		needRestart = append(needRestart, "maxHeaderBytes")
		cfg.MaxHeaderBytes = old.MaxHeaderBytes
	}
	if !reflect.DeepEqual(cfg.Tracing, old.Tracing) {
		needRestart = append(needRestart, "tracing")
		cfg.Tracing = old.Tracing
	}
	if cfg.ReadHeaderTimeout != old.ReadHeaderTimeout || cfg.ReadTimeout != old.ReadTimeout {
		needRestart = append(needRestart, "readHeaderTimeout, readTimeout")
		cfg.ReadHeaderTimeout, cfg.ReadTimeout = old.ReadHeaderTimeout, old.ReadTimeout
	}
	return needRestart
}

// reloadPlan is what a reload does to the servers.
type reloadPlan struct {
	next     []*backend          // the backends in force after it, in cfg.Servers order
	stopping []*backend          // the old backends it stops: removed or changed
	starting []*backend          // the new backends it starts: added or changed
	why      map[*backend]string // why each of stopping stops, for its calls in flight
}

// planReload compares the servers of cfg with old, the backends of oldCfg,
// and returns what a reload to cfg does: a server whose fingerprint is the
// same keeps its backend, one that is new or changed gets a new backend
// (made, not started), and one cfg lacks is stopped. It adds each server's
// name to r's Added, Changed, Kept or Removed. It makes backends with
// newServer, and starts and stops nothing.
func planReload(cfg, oldCfg *Config, old []*backend, r *reloadReport, newServer func(*Config, *ServerConfig) *backend) reloadPlan {
	byName := map[string]*backend{}
	for _, b := range old {
		byName[b.name] = b
	}
	p := reloadPlan{why: map[*backend]string{}}
	for _, s := range cfg.Servers() {
		b := byName[s.Name()]
		delete(byName, s.Name())
		if b != nil && fingerprint(oldCfg, b.cfg) == fingerprint(cfg, s) {
			p.next = append(p.next, b)
			r.Kept = append(r.Kept, s.Name())
			continue
		}
		nb := newServer(cfg, s)
		p.next = append(p.next, nb)
		p.starting = append(p.starting, nb)
		if b != nil {
			p.stopping = append(p.stopping, b)
			p.why[b] = "was stopped by a reload, to restart with its changed settings; call again"
			r.Changed = append(r.Changed, s.Name())
		} else {
			r.Added = append(r.Added, s.Name())
		}
	}
	for _, b := range old {
		if byName[b.name] != nil {
			p.stopping = append(p.stopping, b)
			p.why[b] = "was removed from the config by a reload"
			r.Removed = append(r.Removed, b.name)
		}
	}
	return p
}

// replaceServers stops plan's stopping backends in parallel, with the
// stop ladder, and blocks until they are gone; then it removes the catalog
// cache files of the servers cfg lacks and starts plan's starting
// backends, without waiting for them.
func (g *Gateway) replaceServers(cfg *Config, plan reloadPlan) {
	// Old processes go first, so that a changed server never runs twice.
	var wg sync.WaitGroup
	for _, b := range plan.stopping {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g.stopServer(b, nil, plan.why[b])
		}()
	}
	wg.Wait()
	g.sweepCatalogCache(cfg)
	for _, b := range plan.starting {
		g.startServer(b)
	}
}

// sweepCatalogCache removes the catalog cache files of cfg's servers that
// are gone, and logs each.
func (g *Gateway) sweepCatalogCache(cfg *Config) {
	for _, path := range sweepCatalogCache(cfg) {
		g.log.Info("removed the catalog cache file of a server that is gone", "file", path)
	}
}

// fingerprint sums up what running server s under cfg means; a server whose
// fingerprint changed must be restarted for a new config to apply to it.
//
// It is every field of s, so that a field added to ServerConfig restarts the
// server unless it is left out here on purpose, with the settings s inherits
// from cfg resolved (a server's own value equal to the top level's counts as
// no change), and the top-level settings each process starts with.
// TestFingerprintCoversEveryServerConfigField keeps the list of fields left
// out.
func fingerprint(cfg *Config, s *ServerConfig) string {
	own := *s
	// Left out, as a running server does not need a restart for them:
	own.EnvFile = ""     // its variables are in Env, which counts
	own.Disabled = false // a disabled server is not running
	own.Audit = nil      // read at each call (Config.auditArguments)
	// A kept server keeps its old values of these: they apply to the servers
	// a reload starts, as docs/config.md#reload says.
	own.RequestTimeout, own.MaxCatalogItems, own.MaxCatalogBytes = 0, 0, 0
	// Counted below as resolved against cfg.
	own.MaxInFlight, own.Supervision, own.Limits, own.Sandbox, own.Start = 0, Supervision{}, Limits{}, nil, ""
	b, _ := json.Marshal(struct {
		Own               ServerConfig
		MaxInFlight       int
		Sup               Supervision
		Limits            Limits
		Sandbox           *SandboxConfig
		Lazy              bool
		Start, Stop, Kill Duration
		MaxLine           int64
		NoPrefix          bool
	}{own, cfg.maxInFlight(s), cfg.supervision(s), cfg.limits(s), cfg.sandbox(s), s.isLazy(),
		cfg.StartTimeout, cfg.StopGrace, cfg.KillGrace, cfg.MaxLineBytes, s.NoPrefix})
	return string(b)
}

// newServer returns the backend of server s of cfg, not started: for a
// session-scoped server, its catalog backend, with its pool.
func (g *Gateway) newServer(cfg *Config, s *ServerConfig) *backend {
	build := func(events backendEvents) *backend {
		b := newBackend(events, g.log, g.instance, g.reaper, g.cgroups, cfg, s)
		b.lineBufs = &g.lineBufs
		return b
	}
	if s.scoped() {
		return g.scopes.newCatalog(s.clientScoped(), build)
	}
	return build(g.events)
}

// serverCatalog makes the catalog of session-scoped server b known, for
// clients to list before any session has a process of it: b's lists (what
// b.items returns) are filled by a probe, a run of b that is stopped as
// soon as it listed the server (probeEvents.backendReady). A catalog cache
// on disk (issue 16, "start": "lazy") plugs in here: with b's lists
// cached, it fills them from the cache instead and starts no probe.
func (g *Gateway) serverCatalog(b *backend) { b.start() }

// startServer starts backend b: a shared server's process, or a
// session-scoped server's probe (serverCatalog). It returns at once.
func (g *Gateway) startServer(b *backend) {
	if b.scope != nil {
		g.serverCatalog(b)
		return
	}
	b.start()
}

// stopServer stops backend b with the stop ladder and, for a
// session-scoped server, every session's process of it, in parallel. It
// blocks until they are gone; see backend.stop for hurry and why.
func (g *Gateway) stopServer(b *backend, hurry <-chan struct{}, why string) {
	g.scopes.stopSessions(b, hurry, why)
	b.stop(hurry, why)
}

// Start removes the catalog cache files of servers that are gone (see
// sweepCatalogCache), then starts every backend in parallel and returns
// at once. From then until Stop, corral looks for processes that leave
// their server's cgroup every escapeWatchEvery, and kills them.
func (g *Gateway) Start() {
	g.sweepCatalogCache(g.config())
	g.cgroups.watchEscapes(g.log, escapeWatchEvery)
	for _, b := range g.backendList() {
		g.startServer(b)
	}
}

// errShuttingDown is the cause of the context of a call cut off by CutOff.
var errShuttingDown = errors.New("corral is shutting down")

// EndStreams ends the streams that carry only notifications (modern
// clients' listen requests). The front ends call it when shutdown begins.
func (g *Gateway) EndStreams() { g.endQuiet() }

// CutOff ends every call in flight: each is answered with an error saying
// corral is shutting down. The front ends call it when shutdownTimeout ends.
func (g *Gateway) CutOff() {
	g.cutOff()
	g.sessions.cutCalls()
}

// Stop stops every backend in parallel with the stop ladder and blocks until
// all their processes are gone and every goroutine the gateway started has
// returned. Closing hurry makes the ladders skip their waits. No session is
// notified of anything after Stop begins.
func (g *Gateway) Stop(hurry <-chan struct{}) {
	g.reloadMu.Lock() // a reload under way finishes first: it may be starting servers
	defer g.reloadMu.Unlock()
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
	g.sessions.close()
	var wg sync.WaitGroup
	for _, b := range g.backendList() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g.stopServer(b, hurry, "was stopped: corral is shutting down")
		}()
	}
	wg.Wait()
	// With the servers gone, the calls of parked exchanges and the
	// unsubscribes still under way end at once.
	g.serverRequests.stop()
	g.owned.stop()
	// Each backend swept what its server left; this catches what escaped
	// while corral was stopping them all.
	if killed := sweepMarked(g.instance, "", g.reaper); len(killed) > 0 {
		g.log.Warn("killed processes left behind by servers", "pids", pidList(killed))
	}
	if err := g.cgroups.close(); err != nil {
		g.log.Warn("cannot remove corral's cgroups", "err", err)
	}
	g.audit.close() // every call has ended
	g.tracer.close()
}

// backendChanged is called by a backend whenever its state or tools change.
func (g *Gateway) backendChanged() {
	g.rebuildCatalog()
	if g.logHealth {
		g.mu.Lock()
		closed := g.closed
		g.mu.Unlock()
		g.healthLog.note(g.backendList(), closed)
	}
}

// rebuildCatalog recomputes the catalog from the backends' lists and tells
// every session of each list that changed.
//
// It returns once a catalog built from what the backends held when it was
// called is in force and the sessions are told: a burst of changes from
// many servers is served by one rebuild. Each call counts itself in
// catWanted before it waits for catMu, and a rebuild notes the count before
// it reads the backends, so a call that finds a rebuild made after its count
// has nothing left to do.
func (g *Gateway) rebuildCatalog() {
	want := g.catWanted.Add(1)
	// One rebuild at a time: two built concurrently could be installed in
	// the wrong order, and the older would hide a server's new lists.
	g.catMu.Lock()
	defer g.catMu.Unlock()
	if g.catBuilt >= want {
		return
	}
	g.catBuilt = g.catWanted.Load()
	g.catRebuilds++
	g.mu.Lock()
	old := g.cat
	g.mu.Unlock()
	backends := g.backendList()
	cat, collisions := rebuildFrom(old, backends, g.pins.check(backends))
	g.mu.Lock()
	g.cat = cat
	acc := g.acc
	g.mu.Unlock()
	oldAcc := g.catAcc
	if oldAcc == nil {
		oldAcc = acc
	}
	g.catAcc = acc
	changed := false
	for k := range numKinds {
		changed = changed || !sameList(old.lists[k], cat.lists[k])
	}
	// A tool left out changes no list, so this is logged whether or not
	// one changed.
	bad := map[string]bool{}
	for _, line := range cat.invalidTools {
		if !g.invalidTools[line] {
			g.log.Warn(line)
		}
		bad[line] = true
	}
	g.invalidTools = bad
	if changed {
		logged := map[string]bool{}
		for _, c := range collisions {
			if !g.collisions[c] {
				g.log.Warn("name collision: "+c, "fix", `give one of the servers a "prefix" in the config`)
			}
			logged[c] = true
		}
		for _, p := range cat.overrideProblems {
			key := p.String()
			if !g.collisions[key] {
				g.log.Warn("tool override not applied: "+p.msg, "server", p.server, "tool", p.tool, "field", p.field, "fix", p.fix)
			}
			logged[key] = true
		}
		g.collisions = logged // one that ends and comes back is logged again
	} else if oldAcc == acc {
		return // no list changed, and no view did
	}
	// Each session hears of the lists that changed as its view sees them,
	// before and after: a client whose view hides a change hears nothing of
	// it, and one whose view a reload changed hears of it.
	type views struct{ before, after *view }
	notes := map[views][][]byte{}
	for _, s := range g.sessions.initialized() {
		vs := views{oldAcc.viewOf(s.who), acc.viewOf(s.who)}
		n, ok := notes[vs]
		if !ok {
			n = changedLists(old.listsFor(vs.before), cat.listsFor(vs.after))
			notes[vs] = n
		}
		for _, note := range n {
			s.send(note)
		}
	}
}

// changedLists returns the list_changed notifications of the lists that
// differ between before and after, once each.
func changedLists(before, after *[numKinds]catalogList) [][]byte {
	var methods []string
	for k := range numKinds {
		if !sameList(before[k], after[k]) && !slices.Contains(methods, kinds[k].changed) {
			methods = append(methods, kinds[k].changed)
		}
	}
	notes := make([][]byte, len(methods))
	for i, method := range methods {
		note, _ := encodeNotification(method, nil)
		notes[i] = note[:len(note)-1]
	}
	return notes
}

// decodeMessage parses one message from a client and checks it is a JSON-RPC
// 2.0 request, notification or response. On failure it returns the error to
// answer with; the ID in the returned message is then set if it could be read.
func decodeMessage(data []byte) (*wireMsg, *wireError) {
	data = bytes.TrimSpace(data)
	if len(data) > 0 && data[0] == '[' {
		return nil, &wireError{Code: codeInvalidRequest, Message: "JSON-RPC batches are not supported (MCP removed them in 2025-06-18); send one message at a time"}
	}
	var msg wireMsg
	if !scanMessage(data, &msg) { // not the plain form: decoded whole
		msg = wireMsg{}
		if err := json.Unmarshal(data, &msg); err != nil {
			var typeErr *json.UnmarshalTypeError
			if errors.As(err, &typeErr) {
				return nil, &wireError{Code: codeInvalidRequest, Message: "invalid JSON-RPC message: " + err.Error()}
			}
			return nil, &wireError{Code: codeParseError, Message: "invalid JSON: " + err.Error()}
		}
	}
	if msg.JSONRPC != "2.0" {
		return &msg, &wireError{Code: codeInvalidRequest, Message: `invalid JSON-RPC message: "jsonrpc" must be "2.0"`}
	}
	if msg.ID != nil {
		if !validID(msg.ID) {
			id := msg.ID
			msg.ID = nil
			return &msg, &wireError{Code: codeInvalidRequest, Message: fmt.Sprintf("invalid JSON-RPC message: id must be a string or an integer, not %s", truncate(id, 50))}
		}
	}
	if msg.Method == "" && (msg.ID == nil || (msg.Result == nil && msg.Error == nil)) {
		return &msg, &wireError{Code: codeInvalidRequest, Message: `invalid JSON-RPC message: no "method", and not an answer`}
	}
	return &msg, nil
}

// handle serves one message from a session, in the internal form its front
// end made of it (see inboundOf), and returns the answer to send back, or
// nil when the message needs none. ctx ends when the client goes away. send
// delivers a message related to the request (progress, a server's request
// to the client) on the request's own stream; it must not block; if nil,
// the session's own. handle blocks until the request is served, and is safe
// for concurrent use. What it does with a request is serve's.
func (g *Gateway) handle(ctx context.Context, s *session, in *inbound, send func([]byte)) *reply {
	msg := in.msg
	if msg.Method == "" {
		g.serverRequests.clientAnswer(s, msg)
		return nil
	}
	if msg.ID == nil {
		g.handleNotification(s, msg)
		return nil
	}
	if g.tracer != nil {
		return g.tracer.request(s, in, func() *reply { return g.handleRequest(ctx, s, in, send) })
	}
	return g.handleRequest(ctx, s, in, send)
}

// handleRequest is handle of a request.
func (g *Gateway) handleRequest(ctx context.Context, s *session, in *inbound, send func([]byte)) *reply {
	msg := in.msg
	key := string(msg.ID)
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(context.Canceled)
	cfg := g.config()
	// An answer not yet written counts as a call in flight (unsent.go).
	unsent, werr := g.sessions.unsentRefusal(cfg, s)
	if werr != nil {
		return errorReply(msg.ID, werr)
	}
	max := cfg.MaxInFlightPerSession
	n, dup := g.sessions.admit(s, key, cancel, max-unsent)
	in.cancel = cancel
	switch {
	case dup:
		// The specification forbids reusing an ID; counting calls by ID, the
		// limit below relies on it.
		return errorReply(msg.ID, &wireError{Code: codeInvalidRequest, Message: fmt.Sprintf("a request with id %s is already in flight in this session; IDs must not be reused", truncate(msg.ID, 50))})
	case n >= max-unsent:
		return errorReply(msg.ID, unavailable("this session has %d calls in flight and %d answers its client has not read, the limit (maxInFlightPerSession); wait for one to end", n, unsent))
	}
	defer g.sessions.retire(s, key)
	if lim, ok := limitsOf(cfg, s.who); ok && (lim.maxInFlight > 0 || lim.callsPerSecond > 0) {
		if werr := g.clients.admit(lim, msg.Method); werr != nil {
			return errorReply(msg.ID, werr)
		}
		defer g.clients.done(lim.client)
	}
	if send == nil {
		send = s.send
	}
	r := g.serve(ctx, s, in, key, send)
	if r != nil && in.rules.silencedByCancel() && s.wasCancelled(key) {
		return nil
	}
	return r
}

func asWireError(err error) *wireError {
	var we *wireError
	if errors.As(err, &we) {
		return we
	}
	return &wireError{Code: codeInternalError, Message: err.Error()}
}

// handleNotification serves a notification from session s: what it does is
// the method's op in the table of methods (see heard).
func (g *Gateway) handleNotification(s *session, msg *wireMsg) {
	switch heard(msg.Method).op {
	case opCancel:
		var p struct {
			RequestID json.RawMessage `json:"requestId"`
		}
		if json.Unmarshal(msg.Params, &p) != nil {
			return
		}
		s.cancelRequest(string(p.RequestID))
	case opAcknowledged:
		// The client is ready: it hears of the servers that are down,
		// which may have failed before it came, and is asked what servers
		// asked of it before (serverRequests.toSole).
		s.acknowledge()
		g.notices.tellDown(s)
		g.serverRequests.sessionReady(s)
	case opRootsChanged:
		g.serverRequests.rootsChanged(s, msg, g.sessions.viewOf(s.who), g.backendList())
	default:
		g.log.Debug("notification from client ignored", "method", msg.Method)
	}
}

// route finds the backend a request goes to and the params to send it, with
// the server's own names in them.
func (g *Gateway) route(ctx context.Context, v *view, msg *wireMsg) (*backend, json.RawMessage, json.RawMessage, *wireError) {
	var p routing
	if !scanRouting(msg.Params, &p) { // not the plain form: decoded whole
		// Into a routing of its own, so that p, which Unmarshal would
		// make escape, stays on the stack in the plain form.
		whole := new(routing)
		if err := json.Unmarshal(msg.Params, whole); err != nil {
			return nil, nil, nil, &wireError{Code: codeInvalidParams, Message: msg.Method + ": params must be an object: " + err.Error()}
		}
		p = *whole
	}
	token := p.Meta.Token
	if string(token) == "null" {
		token = nil
	}
	b, params, werr := g.offer.routeTo(ctx, v, msg, p.Name, p.URI, p.Ref.Type, p.Ref.Name, p.Ref.URI)
	return b, params, token, werr
}

// forward sends a client's request to backend b with params and returns the
// answer with the client's ID, or nil if the client cancelled the request.
// The server's progress for it (if token, the client's progress token, is
// not nil) and its requests to the client while it is in flight go to send.
// How it waits for the answer is the request's era's (eraRules.forward).
func (g *Gateway) forward(ctx context.Context, s *session, in *inbound, b *backend, params, token json.RawMessage, send func([]byte)) *reply {
	c := &struct { // one allocation for the two
		f   forwarding
		rel related
	}{rel: related{s: s, token: token, relatedSend: relatedSend{sendFn: send}}}
	c.f = forwarding{in: in, b: b, params: params, rel: &c.rel, timeout: g.config().requestTimeout(b.cfg)}
	if in.span == nil {
		return in.rules.forward(ctx, &g.forwarder, &c.f)
	}
	// The call to the server is a span of its own, the parent of the
	// server's: its context replaces the client's in _meta.
	child := in.span.child(in.msg.Method + " " + b.name)
	child.set("corral.server", b.name)
	c.f.params = setMetaRaw(params, metaTraceparent, child.traceparentJSON())
	c.rel.trace = child
	r := in.rules.forward(ctx, &g.forwarder, &c.f)
	child.finish(replyOutcome(in.msg.Method, r))
	return r
}

// answerReply returns the answer to a forwarded request: the server's,
// shaped for the request's era, or an error that says why there is none.
// ctx is the request's.
func (g *Gateway) answerReply(ctx context.Context, in *inbound, b *backend, answer *wireMsg, err error, timeout time.Duration, start time.Time) *reply {
	msg := in.msg
	var r *reply
	outcome := outcomeOK
	what := msg.Method
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled) && errors.Is(context.Cause(ctx), context.DeadlineExceeded):
		outcome = outcomeTimeout
		r = errorReply(msg.ID, &wireError{Code: codeTimeout, Message: timeoutMessage(err, b.name, what, timeout)})
	case errors.Is(context.Cause(ctx), errShuttingDown):
		outcome = outcomeUnavailable
		r = errorReply(msg.ID, unavailable("corral is shutting down: %s was cut off at the end of shutdownTimeout (%s)", what, g.config().ShutdownTimeout.D()))
	case errors.Is(err, context.Canceled):
		outcome = outcomeCancelled
		r = errorReply(msg.ID, &wireError{Code: codeInternalError, Message: "request cancelled"})
	case err != nil:
		we := asWireError(err)
		outcome = outcomeInternal
		if we.Code == codeUnavailable {
			outcome = outcomeUnavailable
		}
		r = errorReply(msg.ID, we)
	case answer.Error != nil:
		outcome = outcomeServerError
		r = errorReply(msg.ID, answer.Error)
	default:
		r = in.rules.result(msg.ID, clientURIs(g.currentCatalog, g.backendList, b, answer.Result), g.forwardedCache(in))
	}
	if msg.Method == "tools/call" {
		b.counted().observe(outcome, time.Since(start))
	}
	return r
}

// forwardedCache returns the caching hints of the result of a forwarded
// request in (see cacheHints): a server's cacheScope "public" becomes
// "private" where callers see different servers or items (named clients,
// profiles) or must show a token, since a shared cache would give it to
// callers corral would refuse ("Caches MUST NOT be shared across
// authorization contexts"); a result of a request that carries
// requestState or inputResponses gets ttlMs 0.
func (g *Gateway) forwardedCache(in *inbound) cacheHints {
	if in.era != eraModern || !cacheable(in.msg.Method) {
		return cacheHints{}
	}
	cfg := g.config()
	return cacheHints{cacheable: true,
		private: len(cfg.Clients) > 0 || len(cfg.Profiles) > 0 || cfg.AuthTokenFile != "",
		noStore: carriesRequestState(in.msg.Params)}
}

// gatewayEvents is what a shared server's backend reports to: each event
// goes to the owner it concerns, and a change of the backend's state or
// lists to changed (Gateway.backendChanged). NewGateway sets its fields
// once, before it makes any backend; its methods are safe for concurrent
// use.
type gatewayEvents struct {
	changed  func()
	sessions *sessionSet
	subs     *subscriptions
	tasks    *taskTable
	requests *serverRequests
	notices  *serverNotices
}

var _ backendEvents = (*gatewayEvents)(nil)

func (e *gatewayEvents) backendChanged() { e.changed() }

// stateChanged tells the sessions of a server that went down or came back
// (serverNotices.stateChanged).
func (e *gatewayEvents) stateChanged(b *backend, from, to backendState, why string) {
	e.notices.stateChanged(b, from, to, why)
}

// backendReady brings a server that just became ready up to date with the
// sessions: their log level and their subscriptions to its resources.
func (e *gatewayEvents) backendReady(b *backend, m *mux) {
	e.tasks.forgetServer(b, m)
	b.catchUp(m, e.sessions.wantedLogLevel(), func() []string { return e.subs.resend(b.name, m) })
}

// resourceUpdated passes a server's notifications/resources/updated to the
// sessions subscribed to the resource, with the URI each of them used
// (subscriptions.tellUpdated); it does not block.
func (e *gatewayEvents) resourceUpdated(b *backend, params json.RawMessage) {
	e.subs.tellUpdated(b.name, params, nil)
}

// subscribedURIs returns the server's own URIs of the resources of server
// that sessions subscribed to, sorted.
func (e *gatewayEvents) subscribedURIs(server string) []string { return e.subs.uris(server) }

// taskStatus passes a server's notifications/tasks/status to the session
// whose task it is, or its notifications/tasks to the listen streams of the
// modern client whose task it is (taskTable.status).
func (e *gatewayEvents) taskStatus(b *backend, params json.RawMessage) { e.tasks.status(b, params) }

// modernTaskIDs returns the server's IDs of the tasks modern clients made
// on b (taskTable.serverTaskIDs).
func (e *gatewayEvents) modernTaskIDs(b *backend) []string { return e.tasks.serverTaskIDs(b) }

// serverLog passes a server's log message to the sessions
// (sessionSet.serverLog), on m's reading goroutine.
func (e *gatewayEvents) serverLog(b *backend, params json.RawMessage) {
	e.sessions.serverLog(b, params)
}

// serverRequest and serverCancelled pass a server's request to a client,
// and its cancellation of one, to the server requests (serverrequests.go),
// on m's reading goroutine; neither blocks.
func (e *gatewayEvents) serverRequest(b *backend, m *mux, msg *wireMsg) {
	e.requests.serverRequest(b, m, msg)
}
func (e *gatewayEvents) serverCancelled(m *mux, params json.RawMessage) {
	e.requests.serverCancelled(m, params)
}

// healthReport is the body of /healthz.
type healthReport struct {
	Status   string   `json:"status"` // "ok" when every backend is ready, else "degraded"
	Backends []health `json:"backends"`
	Sessions int      `json:"sessions"` // open MCP sessions, over every front end
	Time     string   `json:"time"`
}

func (g *Gateway) health() (healthReport, bool) {
	r := healthReport{Status: "ok", Sessions: g.sessions.count(), Time: time.Now().UTC().Format(time.RFC3339)}
	ok := true
	for _, b := range g.backendList() {
		h := b.health()
		if h.State != stateReady && h.State != stateIdle { // idle is well: a request starts it
			ok = false
			r.Status = "degraded"
		}
		r.Backends = append(r.Backends, h)
	}
	return r, ok
}
