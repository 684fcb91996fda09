package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Gateway is the one MCP server that clients see: it answers initialize,
// ping and tools/list itself and routes tools/call to the backend that owns
// the tool. Its methods are safe for concurrent use.
type Gateway struct {
	cfg      *Config // replaced by Reload; read it with config
	log      *slog.Logger
	backends []*backend // sorted by name; replaced whole by Reload, never changed in place
	instance string     // the marker of this gateway's processes; see newInstanceID
	reaper   *orphanReaper

	// pageSize is the number of tools in one page of tools/list. If zero,
	// defaultPageSize.
	pageSize int

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

	// reloadMu orders Reload and Stop.
	reloadMu sync.Mutex

	// catMu orders the rebuilds of the catalog.
	catMu sync.Mutex

	mu         sync.Mutex
	lastHealth string // the last summary logged
	cat        *catalog
	sessions   map[*session]struct{}
	subs       map[subKey]map[*session]string // subscribers of each resource, with the URI each used
	parked     map[string]*exchange           // modern clients' calls waiting for their input, by requestState
	closed     bool
}

const defaultPageSize = 1000

// NewGateway returns a gateway for cfg. Its backends are not started. The
// reaper, if not nil, is told of every process the gateway starts; it is nil
// unless corral is a child subreaper.
func NewGateway(cfg *Config, log *slog.Logger, reaper *orphanReaper) *Gateway {
	g := &Gateway{cfg: cfg, log: log, cat: &catalog{}, sessions: map[*session]struct{}{}, subs: map[subKey]map[*session]string{}, parked: map[string]*exchange{},
		instance: newInstanceID(), reaper: reaper}
	g.cut, g.cutOff = context.WithCancel(context.Background())
	g.quiet, g.endQuiet = context.WithCancel(context.Background())
	for _, s := range cfg.Servers() {
		g.backends = append(g.backends, newBackend(g, cfg, s))
	}
	return g
}

// backendList returns the backends, sorted by name.
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
func (g *Gateway) Reload(cfg *Config) reloadReport {
	g.reloadMu.Lock()
	defer g.reloadMu.Unlock()
	var r reloadReport
	g.mu.Lock()
	old, oldCfg, closed := g.backends, g.cfg, g.closed
	g.mu.Unlock()
	if closed {
		return r
	}
	// Settings the HTTP server and its listener took when corral started.
	if cfg.Listen != oldCfg.Listen {
		r.NeedRestart = append(r.NeedRestart, fmt.Sprintf("listen (%s -> %s)", oldCfg.Listen, cfg.Listen))
		cfg.Listen = oldCfg.Listen
	}
	if cfg.MaxHeaderBytes != oldCfg.MaxHeaderBytes {
		r.NeedRestart = append(r.NeedRestart, "maxHeaderBytes")
		cfg.MaxHeaderBytes = oldCfg.MaxHeaderBytes
	}
	if cfg.ReadHeaderTimeout != oldCfg.ReadHeaderTimeout || cfg.ReadTimeout != oldCfg.ReadTimeout {
		r.NeedRestart = append(r.NeedRestart, "readHeaderTimeout, readTimeout")
		cfg.ReadHeaderTimeout, cfg.ReadTimeout = oldCfg.ReadHeaderTimeout, oldCfg.ReadTimeout
	}
	byName := map[string]*backend{}
	for _, b := range old {
		byName[b.name] = b
	}
	var next, stopping, starting []*backend
	why := map[*backend]string{}
	for _, s := range cfg.Servers() {
		b := byName[s.Name()]
		delete(byName, s.Name())
		if b != nil && fingerprint(oldCfg, b.cfg) == fingerprint(cfg, s) {
			next = append(next, b)
			r.Kept = append(r.Kept, s.Name())
			continue
		}
		nb := newBackend(g, cfg, s)
		next = append(next, nb)
		starting = append(starting, nb)
		if b != nil {
			stopping = append(stopping, b)
			why[b] = "was stopped by a reload, to restart with its changed settings; call again"
			r.Changed = append(r.Changed, s.Name())
		} else {
			r.Added = append(r.Added, s.Name())
		}
	}
	for _, b := range old {
		if byName[b.name] != nil {
			stopping = append(stopping, b)
			why[b] = "was removed from the config by a reload"
			r.Removed = append(r.Removed, b.name)
		}
	}
	g.mu.Lock()
	g.cfg, g.backends = cfg, next
	g.mu.Unlock()
	g.rebuildCatalog()

	// Old processes go first, so that a changed server never runs twice.
	var wg sync.WaitGroup
	for _, b := range stopping {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b.stop(nil, why[b])
		}()
	}
	wg.Wait()
	for _, b := range starting {
		b.start()
	}
	return r
}

// fingerprint sums up what running server s under cfg means; a server whose
// fingerprint changed must be restarted for a new config to apply to it.
func fingerprint(cfg *Config, s *ServerConfig) string {
	b, _ := json.Marshal(struct {
		Command, Cwd, Prefix, URL string
		Args                      []string
		Env, Headers              map[string]string
		Tools                     *ToolFilter
		MaxInFlight               int
		Sup                       Supervision
		Start, Stop, Kill         Duration
		MaxLine                   int64
	}{s.Command, s.Cwd, s.Prefix, s.URL, s.Args, s.Env, s.Headers, s.Tools, cfg.maxInFlight(s), cfg.supervision(s), cfg.StartTimeout, cfg.StopGrace, cfg.KillGrace, cfg.MaxLineBytes})
	return string(b)
}

// Start starts every backend in parallel and returns at once.
func (g *Gateway) Start() {
	for _, b := range g.backendList() {
		b.start()
	}
}

// errShuttingDown is the cause of the context of a call cut off by CutOff.
var errShuttingDown = errors.New("corral is shutting down")

// EndStreams ends the streams that carry only notifications (modern
// clients' listen requests). The front ends call it when shutdown begins.
func (g *Gateway) EndStreams() { g.endQuiet() }

// CutOff ends every call in flight: each is answered with an error saying
// corral is shutting down. The front ends call it when shutdownTimeout ends.
func (g *Gateway) CutOff() { g.cutOff() }

// Stop stops every backend in parallel with the stop ladder and blocks until
// all their processes are gone. Closing hurry makes the ladders skip their
// waits. No session is notified of anything after Stop begins.
func (g *Gateway) Stop(hurry <-chan struct{}) {
	g.reloadMu.Lock() // a reload under way finishes first: it may be starting servers
	defer g.reloadMu.Unlock()
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
	var wg sync.WaitGroup
	for _, b := range g.backendList() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b.stop(hurry, "was stopped: corral is shutting down")
		}()
	}
	wg.Wait()
	// Each backend swept what its server left; this catches what escaped
	// while corral was stopping them all.
	if killed := sweepMarked(g.instance, "", g.reaper); len(killed) > 0 {
		g.log.Warn("killed processes left behind by servers", "pids", pidList(killed))
	}
}

// backendChanged is called by a backend whenever its state or tools change.
func (g *Gateway) backendChanged() {
	g.rebuildCatalog()
	if !g.logHealth {
		return
	}
	report, _ := g.health()
	var b strings.Builder
	for i, h := range report.Backends {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s=%s", h.Name, h.State)
	}
	summary := b.String()
	g.mu.Lock()
	changed := summary != g.lastHealth
	g.lastHealth = summary
	g.mu.Unlock()
	if changed {
		g.log.Info("health", "status", report.Status, "servers", summary)
	}
}

// rebuildCatalog recomputes the catalog from the backends' lists and tells
// every session of each list that changed.
func (g *Gateway) rebuildCatalog() {
	// One rebuild at a time: two built concurrently could be installed in
	// the wrong order, and the older would hide a server's new lists.
	g.catMu.Lock()
	defer g.catMu.Unlock()
	cat, collisions := buildCatalog(g.backendList())
	g.mu.Lock()
	old := g.cat
	g.cat = cat
	var sessions []*session
	if !g.closed {
		for s := range g.sessions {
			s.mu.Lock()
			if s.initialized {
				sessions = append(sessions, s)
			}
			s.mu.Unlock()
		}
	}
	g.mu.Unlock()
	var notes []string
	for k := range numKinds {
		if !sameList(old.lists[k], cat.lists[k]) && !slices.Contains(notes, kinds[k].changed) {
			notes = append(notes, kinds[k].changed)
		}
	}
	if len(notes) == 0 {
		return
	}
	for _, c := range collisions {
		g.log.Warn("name collision: "+c, "fix", `give one of the servers a "prefix" in the config`)
	}
	for _, method := range notes {
		note, _ := encodeNotification(method, nil)
		for _, s := range sessions {
			s.send(note[:len(note)-1])
		}
	}
}

// session is one client's conversation with the gateway, over whatever front
// end. Its methods are safe for concurrent use.
type session struct {
	// notify sends a message the client did not ask for (a list_changed
	// notification). It must not block. If nil, such messages are dropped.
	notify func(msg []byte)

	mu              sync.Mutex
	initialized     bool // initialize was answered: notifications may follow
	protocolVersion string
	clientCaps      capabilities                  // what the client declared in initialize
	logLevel        string                        // set by logging/setLevel; "" if never
	inflight        map[string]context.CancelFunc // by the client's raw request ID
	cancelled       map[string]bool               // requests the client cancelled
	nextOut         int64                         // the last ID of a request corral sent the client
	outbound        map[int64]*outbound           // requests of servers waiting for the client's answer
	ended           bool                          // endSession was called: nothing more is sent
}

// outbound is a server's request passed on to a client. The client's
// answer goes to the server, under the server's ID, or to reply.
type outbound struct {
	m     *mux
	id    json.RawMessage // the server's ID for it
	reply chan *wireMsg   // if not nil, receives the answer instead (buffered)

	method string // the request, for a modern client's input_required
	params json.RawMessage

	// A request passed to a legacy client waits in its session, under the
	// session's ID for it, until it is settled (see settleAsked).
	s     *session
	out   int64
	rel   *related    // the client's call the server asked about
	timer *time.Timer // settles it at requestTimeout
}

// deliver passes the client's answer on.
func (o *outbound) deliver(a *wireMsg) {
	if o.reply != nil {
		o.reply <- a
		return
	}
	if a.Error != nil {
		o.m.answer(o.id, errorReply(o.id, a.Error))
		return
	}
	o.m.answer(o.id, resultReply(o.id, a.Result))
}

// release settles o with its server, if it was recorded there, and stops
// its timer. It reports whether this call settled it: only that caller
// answers the server.
func (o *outbound) release() bool {
	if o.m != nil && o.s != nil && !o.m.settle(o) {
		return false
	}
	if o.timer != nil {
		o.timer.Stop()
	}
	return true
}

// forget removes o from the requests waiting for the session's answers,
// and reports whether the session has ended.
func (s *session) forget(o *outbound) (ended bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.outbound[o.out] == o {
		delete(s.outbound, o.out)
	}
	return s.ended
}

// waiting returns the number of requests of servers waiting for the
// session's answers.
func (s *session) waiting() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.outbound)
}

// newSession registers a session so that it hears of catalog changes.
func (g *Gateway) newSession(notify func([]byte)) *session {
	s := &session{notify: notify, inflight: map[string]context.CancelFunc{},
		cancelled: map[string]bool{}, outbound: map[int64]*outbound{}}
	g.mu.Lock()
	g.sessions[s] = struct{}{}
	g.mu.Unlock()
	return s
}

// detachedSession returns a session for one modern request: it hears of
// nothing else.
func (g *Gateway) detachedSession() *session {
	return &session{inflight: map[string]context.CancelFunc{}, cancelled: map[string]bool{}, outbound: map[int64]*outbound{}}
}

// endSession cancels the session's calls in flight, answers the servers'
// requests it never answered, ends its subscriptions, and forgets it.
func (g *Gateway) endSession(s *session) {
	g.mu.Lock()
	delete(g.sessions, s)
	g.mu.Unlock()
	s.mu.Lock()
	s.ended = true
	for _, cancel := range s.inflight {
		cancel()
	}
	out := s.outbound
	s.outbound = map[int64]*outbound{}
	level := s.logLevel
	s.mu.Unlock()
	for _, o := range out {
		if o.release() {
			o.deliver(&wireMsg{Error: &wireError{Code: codeInternalError, Message: "the client's session ended before it answered"}})
		}
	}
	g.unsubscribeAll(s)
	if level != "" {
		g.applyLogLevel()
	}
}

func (s *session) send(msg []byte) {
	if s.notify != nil {
		s.notify(msg)
	}
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
	if err := json.Unmarshal(data, &msg); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) {
			return nil, &wireError{Code: codeInvalidRequest, Message: "invalid JSON-RPC message: " + err.Error()}
		}
		return nil, &wireError{Code: codeParseError, Message: "invalid JSON: " + err.Error()}
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

// handle serves one message from a session and returns the answer to send
// back, or nil when the message needs none. ctx ends when the client goes
// away. send delivers a message related to the request (progress, a server's
// request to the client) on the request's own stream; it must not block.
// What it does with a request is the method's op in the table of methods
// (protocol.go), in the request's era: see handleLegacy and handleModern.
func (g *Gateway) handle(ctx context.Context, s *session, msg *wireMsg, send func([]byte)) *reply {
	if msg.Method == "" {
		g.clientAnswer(s, msg)
		return nil
	}
	if msg.ID == nil {
		g.handleNotification(s, msg)
		return nil
	}
	mr, merr := modernOf(msg.Params)
	if merr != nil {
		return errorReply(msg.ID, merr)
	}
	key := string(msg.ID)
	ctx, cancelCause := context.WithCancelCause(ctx)
	cancel := func() { cancelCause(context.Canceled) }
	defer cancel()
	max := g.config().MaxInFlightPerSession
	s.mu.Lock()
	n := len(s.inflight)
	_, dup := s.inflight[key]
	if n < max && !dup {
		s.inflight[key] = cancel
	}
	s.mu.Unlock()
	switch {
	case dup:
		// The specification forbids reusing an ID; counting calls by ID, the
		// limit below relies on it.
		return errorReply(msg.ID, &wireError{Code: codeInvalidRequest, Message: fmt.Sprintf("a request with id %s is already in flight in this session; IDs must not be reused", truncate(msg.ID, 50))})
	case n >= max:
		return errorReply(msg.ID, unavailable("this session has %d calls in flight, the limit (maxInFlightPerSession); wait for one to end", n))
	}
	defer context.AfterFunc(g.cut, func() { cancelCause(errShuttingDown) })()
	defer func() {
		s.mu.Lock()
		delete(s.inflight, key)
		delete(s.cancelled, key)
		s.mu.Unlock()
	}()
	if send == nil {
		send = s.send
	}
	if mr != nil {
		r := g.handleModern(ctx, s, msg, mr, send)
		if r == nil || s.wasCancelled(key) {
			return nil
		}
		return r
	}
	return g.handleLegacy(ctx, s, msg, key, send)
}

// wasCancelled reports whether the client cancelled its request key.
func (s *session) wasCancelled(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cancelled[key]
}

func asWireError(err error) *wireError {
	var we *wireError
	if errors.As(err, &we) {
		return we
	}
	return &wireError{Code: codeInternalError, Message: err.Error()}
}

func (g *Gateway) handleNotification(s *session, msg *wireMsg) {
	switch msg.Method {
	case "notifications/cancelled":
		var p struct {
			RequestID json.RawMessage `json:"requestId"`
		}
		if json.Unmarshal(msg.Params, &p) != nil {
			return
		}
		key := string(p.RequestID)
		s.mu.Lock()
		cancel := s.inflight[key]
		if cancel != nil {
			s.cancelled[key] = true
		}
		s.mu.Unlock()
		if cancel != nil {
			cancel()
		}
	case "notifications/initialized":
	default:
		g.log.Debug("notification from client ignored", "method", msg.Method)
	}
}

// initialize answers a client's initialize with the version it asked for when
// corral speaks it, and corral's newest otherwise, as the specification says.
// The capabilities are those the servers offer, so it waits, until ctx ends,
// for servers still in their first start.
func (g *Gateway) initialize(ctx context.Context, s *session, params json.RawMessage) (any, error) {
	var p struct {
		ProtocolVersion string       `json:"protocolVersion"`
		Capabilities    capabilities `json:"capabilities"`
	}
	if err := json.Unmarshal(params, &p); err != nil || p.ProtocolVersion == "" {
		return nil, &wireError{Code: codeInvalidParams, Message: "initialize: params must be an object with a protocolVersion"}
	}
	v := p.ProtocolVersion
	if !supportedVersion(v) {
		v = protocolVersions[0]
	}
	s.mu.Lock()
	s.protocolVersion, s.clientCaps = v, p.Capabilities
	s.mu.Unlock()
	g.waitFirstStarts(ctx)
	caps := g.capabilities()
	s.mu.Lock()
	s.initialized = true
	s.mu.Unlock()
	res := map[string]any{
		"protocolVersion": v,
		"capabilities":    caps,
		"serverInfo":      map[string]string{"name": "corral", "version": version},
	}
	if in := g.instructions(); in != "" {
		res["instructions"] = in
	}
	return res, nil
}

// instructions returns what the servers tell clients in their handshakes:
// one server's text as it is, several under a heading naming each.
func (g *Gateway) instructions() string {
	type entry struct{ name, text string }
	var all []entry
	for _, b := range g.backendList() {
		b.mu.Lock()
		if b.instructions != "" {
			all = append(all, entry{b.name, b.instructions})
		}
		b.mu.Unlock()
	}
	if len(all) == 1 {
		return all[0].text
	}
	var out strings.Builder
	for i, e := range all {
		if i > 0 {
			out.WriteString("\n\n")
		}
		fmt.Fprintf(&out, "## Server %q\n\n%s", e.name, e.text)
	}
	return out.String()
}

// capabilities returns what the gateway offers clients: what any of its
// servers offers. Every list may change, as servers come and go.
func (g *Gateway) capabilities() map[string]any {
	caps := map[string]any{}
	listChanged := map[string]bool{"listChanged": true}
	for _, b := range g.backendList() {
		c := b.capabilities()
		if c.has(kindTool) {
			caps["tools"] = listChanged
		}
		if c.has(kindPrompt) {
			caps["prompts"] = listChanged
		}
		if c.has(kindResource) {
			r, _ := caps["resources"].(map[string]bool)
			if r == nil {
				r = map[string]bool{"listChanged": true}
				caps["resources"] = r
			}
			r["subscribe"] = r["subscribe"] || c.flag("resources", "subscribe")
		}
		for _, name := range []string{"completions", "logging"} {
			if c[name] != nil {
				caps[name] = struct{}{}
			}
		}
	}
	return caps
}

func supportedVersion(v string) bool { return slices.Contains(protocolVersions, v) }

// list answers a list request of kind k with a page of the aggregated
// catalog, with meta as its _meta if not nil (see catalog.page). It waits,
// until ctx ends, for backends still in their first start, so that a
// client that connects early sees everything.
func (g *Gateway) list(ctx context.Context, k kind, params, meta json.RawMessage) (json.RawMessage, error) {
	g.waitFirstStarts(ctx)
	g.mu.Lock()
	cat := g.cat
	g.mu.Unlock()
	size := g.pageSize
	if size <= 0 {
		size = defaultPageSize
	}
	return cat.page(k, params, size, meta)
}

// waitFirstStarts waits until every backend's first start has succeeded or
// failed, or ctx ends.
func (g *Gateway) waitFirstStarts(ctx context.Context) {
	for _, b := range g.backendList() {
		select {
		case <-b.firstDone:
		case <-ctx.Done():
			return
		}
	}
}

// lookup finds an item by the name clients use. A name not in the catalog
// may belong to a backend still in its first start: then it waits for the
// first starts, until ctx ends, and looks again.
func (g *Gateway) lookup(ctx context.Context, k kind, name string) *catalogItem {
	g.mu.Lock()
	it := g.cat.lookup(k, name)
	g.mu.Unlock()
	if it != nil {
		return it
	}
	g.waitFirstStarts(ctx)
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.cat.lookup(k, name)
}

// resolveURI finds the backend that serves a resource URI, and the server's
// own URI for it, after waiting for first starts if it must; see
// catalog.resolveURI.
func (g *Gateway) resolveURI(ctx context.Context, uri string) (*backend, string) {
	g.mu.Lock()
	cat := g.cat
	g.mu.Unlock()
	if b, orig := cat.resolveURI(g.backendList(), uri); b != nil {
		return b, orig
	}
	g.waitFirstStarts(ctx)
	g.mu.Lock()
	cat = g.cat
	g.mu.Unlock()
	return cat.resolveURI(g.backendList(), uri)
}

// unknown says an item is unknown and, since it may belong to a server that
// never listed its items, which servers are not ready.
func (g *Gateway) unknown(k kind, name string) string {
	what := strings.TrimSuffix(kinds[k].field, "s")
	if k == kindTemplate {
		what = "resource"
	}
	msg := fmt.Sprintf("unknown %s %q; %s names the %ss there are", what, name, kinds[k].list, what)
	for _, b := range g.backendList() {
		h := b.health()
		if h.State != stateReady && len(b.items(k)) == 0 {
			msg += fmt.Sprintf(`; server %q, whose %ss are not known, is %s: %s`, b.name, what, h.State, h.Error)
		}
	}
	return msg
}

// route finds the backend a request goes to and the params to send it, with
// the server's own names in them.
func (g *Gateway) route(ctx context.Context, msg *wireMsg) (*backend, json.RawMessage, json.RawMessage, *wireError) {
	var p struct {
		Name string `json:"name"`
		URI  string `json:"uri"`
		Ref  struct {
			Type string `json:"type"`
			Name string `json:"name"`
			URI  string `json:"uri"`
		} `json:"ref"`
		Meta struct {
			Token json.RawMessage `json:"progressToken"`
		} `json:"_meta"`
	}
	if err := json.Unmarshal(msg.Params, &p); err != nil {
		return nil, nil, nil, &wireError{Code: codeInvalidParams, Message: msg.Method + ": params must be an object: " + err.Error()}
	}
	token := p.Meta.Token
	if string(token) == "null" {
		token = nil
	}
	b, params, werr := g.routeTo(ctx, msg, p.Name, p.URI, p.Ref.Type, p.Ref.Name, p.Ref.URI)
	return b, params, token, werr
}

// routeTo is route with the params decoded: name, uri, and a completion's
// ref. The method's routing member (see methods) says which of them routes
// it.
func (g *Gateway) routeTo(ctx context.Context, msg *wireMsg, name, uri, refType, refName, refURI string) (*backend, json.RawMessage, *wireError) {
	info := methods[msg.Method]
	var b *backend
	var params json.RawMessage
	var werr *wireError
	switch info.member {
	case routeName:
		b, params, werr = g.routeByName(ctx, msg, info.kind, name)
	case routeURI:
		b, params, werr = g.routeByURI(ctx, msg, uri)
	default:
		b, params, werr = g.routeByRef(ctx, msg, refType, refName, refURI)
	}
	if werr != nil {
		return nil, nil, werr
	}
	if info.capability != "" && b.capabilities()[info.capability] == nil {
		return nil, nil, &wireError{Code: codeMethodNotFound, Message: fmt.Sprintf("server %q does not offer %s", b.name, info.capability)}
	}
	return b, params, nil
}

// forward sends a client's request to backend b with params and returns the
// answer with the client's ID, or nil if the client cancelled the request.
// The server's progress for it (if token, the client's progress token, is
// not nil) and its requests to the client while it is in flight go to send.
// mr is the request's modern envelope, or nil.
func (g *Gateway) forward(ctx context.Context, s *session, msg *wireMsg, b *backend, params, token json.RawMessage, send func([]byte), mr *modernRequest) *reply {
	rel := &related{s: s, token: token, relatedSend: relatedSend{sendFn: send}}
	timeout := g.config().requestTimeout(b.cfg)
	if mr != nil {
		rel.modern, rel.caps, rel.logLevel = true, mr.caps, mr.logLevel
		return g.forwardModern(ctx, msg, b, params, rel, timeout)
	}
	s.mu.Lock()
	rel.caps, rel.logLevel = s.clientCaps, s.logLevel
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	defer func() {
		if ctx.Err() != nil {
			g.cancelAsked(rel) // before cancel, which would make every call look cancelled
		}
	}()
	start := time.Now()
	answer, err := b.call(ctx, msg.Method, params, rel)
	// A modern server may ask for the client's input first; a legacy client
	// is asked with requests of its own era. Only a modern server's result
	// can be such a request, so a legacy server's answer is not scanned.
	for round := 0; err == nil && answer.Error == nil && b.isModern(); round++ {
		ir := asInputRequired(answer.Result)
		if ir == nil {
			break
		}
		if round == maxInputRounds {
			err = fmt.Errorf("server %q asked for input more than %d times in one request", b.name, maxInputRounds)
			break
		}
		var retry json.RawMessage
		if retry, err = g.askClient(ctx, rel, params, ir); err == nil {
			answer, err = b.call(ctx, msg.Method, retry, rel)
		}
	}
	return g.answerReply(ctx, msg, b, answer, err, timeout, start, false)
}

// answerReply returns the answer to a forwarded request: the server's, or
// an error that says why there is none. ctx is the request's.
func (g *Gateway) answerReply(ctx context.Context, msg *wireMsg, b *backend, answer *wireMsg, err error, timeout time.Duration, start time.Time, modern bool) *reply {
	var r *reply
	outcome := outcomeOK
	what := msg.Method
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		outcome = outcomeTimeout
		r = errorReply(msg.ID, &wireError{Code: codeTimeout,
			Message: fmt.Sprintf("server %q did not answer %s within %s (requestTimeout); corral cancelled the request", b.name, what, timeout)})
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
	case modern:
		r = completeReply(msg.ID, answer.Result, cacheable(msg.Method))
	default:
		r = resultReply(msg.ID, answer.Result)
	}
	if msg.Method == "tools/call" {
		b.metrics.observe(outcome, time.Since(start))
	}
	return r
}

// serverRequest passes a request a server sent to its client (sampling,
// elicitation, roots) to the one session with requests in flight to that
// server, on the stream of its latest such request, under an ID of the
// session's own. The server gets an error instead when no session, or more
// than one, has requests in flight to it (corral cannot tell whom it asks),
// when that session's client did not declare the capability the request
// needs, or when maxServerRequests of the server's, or
// maxServerRequestsPerSession of the session's, wait for an answer. Called
// on the mux's reading goroutine; it does not block, and logs at most a few
// lines a second (mux.warn).
func (g *Gateway) serverRequest(b *backend, m *mux, msg *wireMsg) {
	fail := func(code int, format string, args ...any) {
		why := fmt.Sprintf(format, args...)
		m.answer(msg.ID, errorReply(msg.ID, &wireError{Code: code, Message: why}))
		m.warn("refused a request of the server to a client", "method", msg.Method, "why", why)
	}
	capability, known := map[string]string{
		"sampling/createMessage": "sampling",
		"elicitation/create":     "elicitation",
		"roots/list":             "roots",
	}[msg.Method]
	if !known {
		fail(codeMethodNotFound, "corral does not pass %s from servers to clients", msg.Method)
		return
	}
	var rel *related
	sessions := 0
	for _, r := range m.relatedCalls() {
		if rel == nil || r.s != rel.s {
			sessions++
		}
		rel = r // the latest of the last session
	}
	switch {
	case sessions == 0:
		fail(codeInternalError, "corral passes %s to the client whose request the server is serving, and no client request is in flight to server %q", msg.Method, b.name)
		return
	case sessions > 1:
		fail(codeInternalError, "corral passes %s to the client whose request the server is serving, and requests of %d clients are in flight to server %q, so it cannot tell which", msg.Method, sessions, b.name)
		return
	}
	if rel.caps[capability] == nil {
		fail(codeMethodNotFound, "the client did not declare the %s capability, so corral does not pass %s to it", capability, msg.Method)
		return
	}
	if rel.modern {
		// A modern client is asked with an input_required result.
		select {
		case rel.inputs <- &outbound{m: m, id: msg.ID, method: msg.Method, params: msg.Params}:
		default:
			fail(codeUnavailable, "%d requests of server %q wait for the client's answers, the limit (maxServerRequestsPerSession); corral refuses more until some are answered", cap(rel.inputs), b.name)
		}
		return
	}
	// The params are not kept: they are in the line sent to the client, and
	// would keep the whole line the server wrote alive.
	o := &outbound{m: m, id: msg.ID, s: rel.s, rel: rel}
	if werr := g.askSession(b, o); werr != nil {
		fail(werr.Code, "%s", werr.Message)
		return
	}
	line, _ := encodeRequest(o.out, msg.Method, msg.Params)
	rel.send(line[:len(line)-1])
}

// askSession records o, a request of server b's for o.s's client, with its
// server and in its session, under a new ID of the session's, until it is
// settled: answered, cancelled, timed out (requestTimeout) or its session
// ended. It fails when maxServerRequests of the server's or
// maxServerRequestsPerSession of the session's already wait.
func (g *Gateway) askSession(b *backend, o *outbound) *wireError {
	cfg := g.config()
	timeout := cfg.requestTimeout(b.cfg)
	// Armed once o is recorded: o.timer is set before anyone else sees o.
	o.timer = time.AfterFunc(math.MaxInt64, func() {
		g.settleAsked(o, &wireError{Code: codeTimeout, Message: fmt.Sprintf("the client did not answer within %s (requestTimeout); corral cancelled the request", timeout)}, "timed out in corral")
	})
	if werr := o.m.ask(o, cfg.MaxServerRequests); werr != nil {
		o.timer.Stop()
		return werr
	}
	s := o.s
	s.mu.Lock()
	if s.ended {
		s.mu.Unlock()
		o.release()
		return &wireError{Code: codeInternalError, Message: "the client's session has ended"}
	}
	if n := len(s.outbound); n >= cfg.MaxServerRequestsPerSession {
		s.mu.Unlock()
		o.release()
		return unavailable("%d requests of servers wait for the client's answers, the limit (maxServerRequestsPerSession); corral refuses more until some are answered", n)
	}
	s.nextOut++
	o.out = s.nextOut
	s.outbound[o.out] = o
	s.mu.Unlock()
	o.timer.Reset(timeout) // if o was settled meanwhile, the timer finds it so
	return nil
}

// settleAsked ends o, a request of a server's waiting for a session's
// answer, if it still waits: the client is told it is cancelled (with
// reason), and the server gets werr, unless werr is nil (the server
// cancelled it itself).
func (g *Gateway) settleAsked(o *outbound, werr *wireError, reason string) {
	if !o.release() {
		return
	}
	ended := o.s.forget(o)
	if werr != nil {
		o.m.answer(o.id, errorReply(o.id, werr))
	}
	if ended {
		return // no one to tell
	}
	params, _ := json.Marshal(struct {
		RequestID int64  `json:"requestId"`
		Reason    string `json:"reason"`
	}{o.out, reason})
	note, _ := encodeNotification("notifications/cancelled", params)
	o.rel.send(note[:len(note)-1])
}

// serverCancelled serves a server's notifications/cancelled for one of its
// requests waiting for a client: the client is told, and corral forgets it.
func (g *Gateway) serverCancelled(m *mux, params json.RawMessage) {
	var p struct {
		RequestID json.RawMessage `json:"requestId"`
	}
	if json.Unmarshal(params, &p) != nil || p.RequestID == nil {
		return
	}
	var c bytes.Buffer
	if json.Compact(&c, p.RequestID) != nil {
		return
	}
	if o := m.askedAs(c.Bytes()); o != nil {
		g.settleAsked(o, nil, "cancelled by the server")
	}
}

// cancelAsked ends the requests of a server still waiting for the answers
// of a client whose call rel they were about, now that the call was
// cancelled or timed out: the server was told to stop serving it.
func (g *Gateway) cancelAsked(rel *related) {
	s := rel.s
	var about []*outbound
	s.mu.Lock()
	for _, o := range s.outbound {
		if o.rel == rel {
			about = append(about, o)
		}
	}
	s.mu.Unlock()
	for _, o := range about {
		g.settleAsked(o, &wireError{Code: codeInternalError, Message: "the client's request that this request was about was cancelled"}, "the request it was about was cancelled")
	}
}

// clientAnswer passes a client's answer to a server's request back to that
// server, under the server's own ID.
func (g *Gateway) clientAnswer(s *session, msg *wireMsg) {
	id, err := strconv.ParseInt(string(msg.ID), 10, 64)
	s.mu.Lock()
	o := s.outbound[id]
	delete(s.outbound, id)
	s.mu.Unlock()
	if err != nil || o == nil {
		g.log.Debug("an answer from a client to no request of a server", "id", truncate(msg.ID, 50))
		return
	}
	if o.release() {
		o.deliver(msg)
	}
}

// logLevels are the levels of notifications/message, least severe first.
var logLevels = []string{"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"}

// setLogLevel answers logging/setLevel: the session receives the servers'
// log messages at that level and above, and the servers are asked for the
// most verbose level any session wants.
func (g *Gateway) setLogLevel(s *session, params json.RawMessage) (any, error) {
	var p struct {
		Level string `json:"level"`
	}
	json.Unmarshal(params, &p)
	if !slices.Contains(logLevels, p.Level) {
		return nil, &wireError{Code: codeInvalidParams, Message: fmt.Sprintf("logging/setLevel: unknown level %q; want one of %s", p.Level, strings.Join(logLevels, ", "))}
	}
	s.mu.Lock()
	s.logLevel = p.Level
	s.mu.Unlock()
	g.applyLogLevel()
	return struct{}{}, nil
}

// applyLogLevel asks every server that logs for the most verbose level any
// session wants, if it changed.
func (g *Gateway) applyLogLevel() {
	level := g.wantedLogLevel()
	for _, b := range g.backendList() {
		b.setLogLevel(level)
	}
}

// wantedLogLevel returns the most verbose level a session asked for, or "".
func (g *Gateway) wantedLogLevel() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	best := len(logLevels)
	for s := range g.sessions {
		s.mu.Lock()
		if i := slices.Index(logLevels, s.logLevel); i >= 0 && i < best {
			best = i
		}
		s.mu.Unlock()
	}
	if best == len(logLevels) {
		return ""
	}
	return logLevels[best]
}

// serverLog passes a server's log message to the sessions that asked for
// messages of its level, and to the one modern request in flight to the
// server that asked for them, with the server's name in its logger:
// "server", or "server/logger" when the server named a logger.
func (g *Gateway) serverLog(b *backend, params json.RawMessage) {
	var p struct {
		Level  string `json:"level"`
		Logger string `json:"logger"`
	}
	json.Unmarshal(params, &p)
	b.log.Debug("log message from server", "params", truncate(params, 1000))
	level := slices.Index(logLevels, p.Level)
	if level < 0 {
		return
	}
	logger := b.name
	if p.Logger != "" {
		logger += "/" + p.Logger
	}
	note, _ := encodeNotification("notifications/message", setMember(params, "logger", logger))
	note = note[:len(note)-1]
	g.mu.Lock()
	var to []*session
	for s := range g.sessions {
		s.mu.Lock()
		if i := slices.Index(logLevels, s.logLevel); i >= 0 && i <= level {
			to = append(to, s)
		}
		s.mu.Unlock()
	}
	g.mu.Unlock()
	for _, s := range to {
		s.send(note)
	}
	// A modern client asks for log messages per request: they go on the
	// stream of its request to this server, when there is exactly one.
	var mine *related
	b.mu.Lock()
	m := b.mux
	b.mu.Unlock()
	if m != nil {
		for _, r := range m.relatedCalls() {
			if r.modern && r.logLevel != "" {
				if mine != nil {
					return // more than one: corral cannot tell whose it is
				}
				mine = r
			}
		}
	}
	if mine != nil && slices.Index(logLevels, mine.logLevel) <= level {
		mine.send(note)
	}
}

// subKey names a subscription to a server's resource.
type subKey struct {
	server, uri string // the server's own URI
}

// subscribe answers resources/subscribe. The server hears of the first
// subscriber to a resource only; its updates go to every subscriber.
func (g *Gateway) subscribe(ctx context.Context, s *session, params json.RawMessage) (any, error) {
	b, key, uri, err := g.subscription(ctx, "resources/subscribe", params)
	if err != nil {
		return nil, err
	}
	if !b.capabilities().flag("resources", "subscribe") {
		return nil, &wireError{Code: codeMethodNotFound, Message: fmt.Sprintf("server %q, which serves %q, does not offer subscriptions", b.name, uri)}
	}
	g.mu.Lock()
	subs := g.subs[key]
	first := len(subs) == 0
	if subs == nil {
		subs = map[*session]string{}
		g.subs[key] = subs
	}
	subs[s] = uri
	g.mu.Unlock()
	if !first {
		return struct{}{}, nil
	}
	if b.isModern() {
		b.resubscribe()
		return struct{}{}, nil
	}
	ctx, cancel := context.WithTimeout(ctx, g.config().requestTimeout(b.cfg))
	defer cancel()
	if err := b.callInto(ctx, "resources/subscribe", setMember(params, "uri", key.uri)); err != nil {
		g.mu.Lock()
		delete(g.subs[key], s)
		g.mu.Unlock()
		return nil, err
	}
	return struct{}{}, nil
}

// unsubscribe answers resources/unsubscribe; the server hears of the last
// subscriber's going.
func (g *Gateway) unsubscribe(ctx context.Context, s *session, params json.RawMessage) (any, error) {
	b, key, _, err := g.subscription(ctx, "resources/unsubscribe", params)
	if err != nil {
		return nil, err
	}
	if g.dropSubscriber(key, s) {
		b.unsubscribe(ctx, key.uri)
	}
	return struct{}{}, nil
}

// subscription finds the backend and key of the URI in a subscription
// request's params.
func (g *Gateway) subscription(ctx context.Context, method string, params json.RawMessage) (*backend, subKey, string, error) {
	var p struct {
		URI string `json:"uri"`
	}
	if json.Unmarshal(params, &p) != nil || p.URI == "" {
		return nil, subKey{}, "", &wireError{Code: codeInvalidParams, Message: method + ": params must hold a uri"}
	}
	b, orig := g.resolveURI(ctx, p.URI)
	if b == nil {
		return nil, subKey{}, "", &wireError{Code: codeResourceNotFound, Message: g.unknown(kindResource, p.URI)}
	}
	return b, subKey{b.name, orig}, p.URI, nil
}

// dropSubscriber removes s from the subscribers of key and reports whether
// it was the last.
func (g *Gateway) dropSubscriber(key subKey, s *session) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	subs := g.subs[key]
	if _, ok := subs[s]; !ok {
		return false
	}
	delete(subs, s)
	if len(subs) > 0 {
		return false
	}
	delete(g.subs, key)
	return true
}

// unsubscribeAll ends a session's subscriptions.
func (g *Gateway) unsubscribeAll(s *session) {
	g.mu.Lock()
	var keys []subKey
	for key, subs := range g.subs {
		if _, ok := subs[s]; ok {
			keys = append(keys, key)
		}
	}
	g.mu.Unlock()
	for _, key := range keys {
		if !g.dropSubscriber(key, s) {
			continue
		}
		for _, b := range g.backendList() {
			if b.name == key.server {
				go b.unsubscribe(context.Background(), key.uri)
			}
		}
	}
}

// subscribedURIs returns the server's own URIs of the resources of server
// that sessions subscribed to.
func (g *Gateway) subscribedURIs(server string) []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	uris := []string{}
	for key := range g.subs {
		if key.server == server {
			uris = append(uris, key.uri)
		}
	}
	slices.Sort(uris)
	return uris
}

// resourceUpdated passes a server's notifications/resources/updated to the
// sessions subscribed to the resource, with the URI each of them used.
func (g *Gateway) resourceUpdated(b *backend, params json.RawMessage) {
	var p struct {
		URI string `json:"uri"`
	}
	json.Unmarshal(params, &p)
	g.mu.Lock()
	subs := maps.Clone(g.subs[subKey{b.name, p.URI}])
	g.mu.Unlock()
	for s, uri := range subs {
		note, _ := encodeNotification("notifications/resources/updated", setMember(params, "uri", uri))
		s.send(note[:len(note)-1])
	}
}

// backendReady brings a server that just became ready up to date with the
// sessions: their log level and their subscriptions to its resources.
func (g *Gateway) backendReady(b *backend, m *mux) {
	b.setLogLevel(g.wantedLogLevel())
	if m.modern.Load() {
		return // its listen request carries the subscriptions
	}
	for _, uri := range g.subscribedURIs(b.name) {
		ctx, cancel := context.WithTimeout(context.Background(), g.config().requestTimeout(b.cfg))
		if err := callInto(ctx, m, "resources/subscribe", setMember(json.RawMessage("{}"), "uri", uri), &struct{}{}); err != nil {
			b.log.Warn("subscribing again after a restart failed", "uri", uri, "err", err)
		}
		cancel()
	}
}

// healthReport is the body of /healthz.
type healthReport struct {
	Status   string   `json:"status"` // "ok" when every backend is ready, else "degraded"
	Backends []health `json:"backends"`
	Time     string   `json:"time"`
}

func (g *Gateway) health() (healthReport, bool) {
	r := healthReport{Status: "ok", Time: time.Now().UTC().Format(time.RFC3339)}
	ok := true
	for _, b := range g.backendList() {
		h := b.health()
		if h.State != stateReady {
			ok = false
			r.Status = "degraded"
		}
		r.Backends = append(r.Backends, h)
	}
	return r, ok
}
