package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
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

	// logHealth, when set, logs a summary of every backend's state each
	// time it changes: with -stdio there is no /healthz to ask.
	logHealth bool

	// reloadMu orders Reload and Stop.
	reloadMu sync.Mutex

	mu         sync.Mutex
	lastHealth string // the last summary logged
	cat        *catalog
	sessions   map[*session]struct{}
	closed     bool
}

const defaultPageSize = 1000

// NewGateway returns a gateway for cfg. Its backends are not started. The
// reaper, if not nil, is told of every process the gateway starts; it is nil
// unless corral is a child subreaper.
func NewGateway(cfg *Config, log *slog.Logger, reaper *orphanReaper) *Gateway {
	g := &Gateway{cfg: cfg, log: log, cat: &catalog{}, sessions: map[*session]struct{}{},
		instance: newInstanceID(), reaper: reaper}
	g.cut, g.cutOff = context.WithCancel(context.Background())
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
			r.Changed = append(r.Changed, s.Name())
		} else {
			r.Added = append(r.Added, s.Name())
		}
	}
	for _, b := range old {
		if byName[b.name] != nil {
			stopping = append(stopping, b)
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
			b.stop(nil)
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
		Command, Cwd, Prefix string
		Args                 []string
		Env                  map[string]string
		MaxInFlight          int
		Sup                  Supervision
		Start, Stop, Kill    Duration
		MaxLine              int64
	}{s.Command, s.Cwd, s.Prefix, s.Args, s.Env, cfg.maxInFlight(s), cfg.supervision(s), cfg.StartTimeout, cfg.StopGrace, cfg.KillGrace, cfg.MaxLineBytes})
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
			b.stop(hurry)
		}()
	}
	wg.Wait()
	// Each backend swept what its server left; this catches what escaped
	// while corral was stopping them all.
	if killed := sweepMarked(g.instance, "", g.reaper); len(killed) > 0 {
		g.log.Warn("killed processes left behind by servers", "pids", pidList(killed))
	}
}

// catalog is the aggregated tool list. It is immutable once built.
type catalog struct {
	tools  []catalogTool // sorted by name
	byName map[string]*catalogTool
}

// catalogTool is one tool as clients see it.
type catalogTool struct {
	name    string          // the name clients call it by
	orig    string          // the backend's name for it
	backend *backend        // nil for a placeholder
	raw     json.RawMessage // the tool object, renamed when name != orig
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

// rebuildCatalog recomputes the catalog from the backends' tool lists and
// tells every session when it changed.
func (g *Gateway) rebuildCatalog() {
	cat, collisions := buildCatalog(g.backendList())
	g.mu.Lock()
	changed := !sameCatalog(g.cat, cat)
	g.cat = cat
	var sessions []*session
	if changed && !g.closed {
		for s := range g.sessions {
			sessions = append(sessions, s)
		}
	}
	g.mu.Unlock()
	if !changed {
		return
	}
	for _, c := range collisions {
		g.log.Warn("tool name collision: "+c, "fix", `give one of the servers a "prefix" in the config`)
	}
	note := []byte(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`)
	for _, s := range sessions {
		s.send(note)
	}
}

// buildCatalog names every tool of every backend. A tool keeps its own name
// unless its server has a prefix (then "prefix__name"), or another server
// without a prefix has a tool of the same name: then each of the colliding
// tools is named "server__name", so that no call can reach the wrong server.
func buildCatalog(backends []*backend) (*catalog, []string) {
	type entry struct {
		b    *backend
		t    backendTool
		name string
	}
	var entries []entry
	owners := map[string][]string{} // plain name -> servers offering it without a prefix
	for _, b := range backends {
		tools, _ := b.snapshot()
		for _, t := range tools {
			name := t.name
			if b.cfg.Prefix != "" {
				name = b.cfg.Prefix + toolSeparator + t.name
			} else {
				owners[name] = append(owners[name], b.name)
			}
			entries = append(entries, entry{b, t, name})
		}
	}
	var collisions []string
	for name, servers := range owners {
		if len(servers) > 1 {
			collisions = append(collisions, fmt.Sprintf("servers %q all offer tool %q; it is offered as %s", servers, name, qualifiedNames(servers, name)))
		}
	}
	sort.Strings(collisions)
	cat := &catalog{byName: make(map[string]*catalogTool, len(entries))}
	for _, e := range entries {
		if e.b.cfg.Prefix == "" && len(owners[e.name]) > 1 {
			e.name = e.b.name + toolSeparator + e.t.name
		}
		if _, dup := cat.byName[e.name]; dup {
			collisions = append(collisions, fmt.Sprintf("tool %q of server %q is left out: the name is taken", e.name, e.b.name))
			continue
		}
		raw := e.t.raw
		if e.name != e.t.name {
			raw = renameTool(raw, e.name)
		}
		cat.tools = append(cat.tools, catalogTool{name: e.name, orig: e.t.name, backend: e.b, raw: raw})
		cat.byName[e.name] = nil
	}
	sort.Slice(cat.tools, func(i, j int) bool { return cat.tools[i].name < cat.tools[j].name })
	for i := range cat.tools {
		cat.byName[cat.tools[i].name] = &cat.tools[i]
	}
	return cat, collisions
}

func qualifiedNames(servers []string, name string) string {
	var b bytes.Buffer
	for i, s := range servers {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%q", s+toolSeparator+name)
	}
	return b.String()
}

// renameTool returns the tool object raw with its name replaced.
func renameTool(raw json.RawMessage, name string) json.RawMessage {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return raw // listTools checked it is an object with a name
	}
	fields["name"], _ = json.Marshal(name)
	out, _ := json.Marshal(fields)
	return out
}

func sameCatalog(a, b *catalog) bool {
	return slices.EqualFunc(a.tools, b.tools, func(x, y catalogTool) bool {
		return x.name == y.name && x.backend == y.backend && bytes.Equal(x.raw, y.raw)
	})
}

// session is one client's conversation with the gateway, over whatever front
// end. Its methods are safe for concurrent use.
type session struct {
	// notify sends a message the client did not ask for (a list_changed
	// notification). It must not block. If nil, such messages are dropped.
	notify func(msg []byte)

	mu              sync.Mutex
	protocolVersion string
	inflight        map[string]context.CancelFunc // by the client's raw request ID
}

// newSession registers a session so that it hears of catalog changes.
func (g *Gateway) newSession(notify func([]byte)) *session {
	s := &session{notify: notify, inflight: map[string]context.CancelFunc{}}
	g.mu.Lock()
	g.sessions[s] = struct{}{}
	g.mu.Unlock()
	return s
}

// endSession cancels the session's calls in flight and forgets it.
func (g *Gateway) endSession(s *session) {
	g.mu.Lock()
	delete(g.sessions, s)
	g.mu.Unlock()
	s.mu.Lock()
	for _, cancel := range s.inflight {
		cancel()
	}
	s.mu.Unlock()
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
		if c := msg.ID[0]; c != '"' && c != '-' && (c < '0' || c > '9') {
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
// away.
func (g *Gateway) handle(ctx context.Context, s *session, msg *wireMsg) *reply {
	if msg.Method == "" {
		return nil // an answer to a request corral never sends
	}
	if msg.ID == nil {
		g.handleNotification(s, msg)
		return nil
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
		s.mu.Unlock()
	}()

	var result any
	var err error
	switch msg.Method {
	case "initialize":
		result, err = g.initialize(s, msg.Params)
	case "ping":
		result = json.RawMessage("{}")
	case "tools/list":
		result, err = g.listTools(ctx, msg.Params)
	case "tools/call":
		return g.callTool(ctx, msg)
	default:
		err = &wireError{Code: codeMethodNotFound, Message: fmt.Sprintf("method %q is not supported by corral", msg.Method)}
	}
	if err != nil {
		return errorReply(msg.ID, asWireError(err))
	}
	raw, ok := result.(json.RawMessage)
	if !ok {
		raw, _ = json.Marshal(result)
	}
	return resultReply(msg.ID, raw)
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
		s.mu.Lock()
		cancel := s.inflight[string(p.RequestID)]
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
func (g *Gateway) initialize(s *session, params json.RawMessage) (any, error) {
	var p struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	if err := json.Unmarshal(params, &p); err != nil || p.ProtocolVersion == "" {
		return nil, &wireError{Code: codeInvalidParams, Message: "initialize: params must be an object with a protocolVersion"}
	}
	v := p.ProtocolVersion
	if !supportedVersion(v) {
		v = protocolVersions[0]
	}
	s.mu.Lock()
	s.protocolVersion = v
	s.mu.Unlock()
	return map[string]any{
		"protocolVersion": v,
		"capabilities":    map[string]any{"tools": map[string]bool{"listChanged": true}},
		"serverInfo":      map[string]string{"name": "corral", "version": version},
	}, nil
}

func supportedVersion(v string) bool { return slices.Contains(protocolVersions, v) }

// listTools answers tools/list with a page of the aggregated catalog. It
// waits, until ctx ends, for backends still in their first start, so that a
// client that connects early sees every tool.
func (g *Gateway) listTools(ctx context.Context, params json.RawMessage) (any, error) {
	g.waitFirstStarts(ctx)
	var p struct {
		Cursor string `json:"cursor"`
	}
	if len(params) > 0 {
		if err := json.Unmarshal(params, &p); err != nil {
			return nil, &wireError{Code: codeInvalidParams, Message: "tools/list: invalid params: " + err.Error()}
		}
	}
	after := ""
	if p.Cursor != "" {
		c, err := base64.RawURLEncoding.DecodeString(p.Cursor)
		if err != nil || len(c) == 0 {
			return nil, &wireError{Code: codeInvalidParams, Message: "tools/list: invalid cursor"}
		}
		after = string(c)
	}
	g.mu.Lock()
	cat := g.cat
	g.mu.Unlock()
	// The cursor is the last name sent, so that a page boundary survives a
	// change of the catalog between pages.
	i := sort.Search(len(cat.tools), func(i int) bool { return cat.tools[i].name > after })
	size := g.pageSize
	if size <= 0 {
		size = defaultPageSize
	}
	end := min(i+size, len(cat.tools))
	tools := make([]json.RawMessage, 0, end-i)
	for _, t := range cat.tools[i:end] {
		tools = append(tools, t.raw)
	}
	res := struct {
		Tools      []json.RawMessage `json:"tools"`
		NextCursor string            `json:"nextCursor,omitempty"`
	}{Tools: tools}
	if end < len(cat.tools) {
		res.NextCursor = base64.RawURLEncoding.EncodeToString([]byte(cat.tools[end-1].name))
	}
	return res, nil
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

// lookupTool finds a tool by the name clients call it. A name not in the
// catalog may belong to a backend still in its first start: then it waits
// for the first starts, until ctx ends, and looks again.
func (g *Gateway) lookupTool(ctx context.Context, name string) *catalogTool {
	g.mu.Lock()
	t := g.cat.byName[name]
	g.mu.Unlock()
	if t != nil {
		return t
	}
	g.waitFirstStarts(ctx)
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.cat.byName[name]
}

// unknownTool says a tool is unknown and, since it may belong to a server
// that never listed its tools, which servers are not ready.
func (g *Gateway) unknownTool(name string) string {
	msg := fmt.Sprintf("unknown tool %q; tools/list names the tools there are", name)
	for _, b := range g.backendList() {
		h := b.health()
		if h.State != stateReady && h.Tools == 0 {
			msg += fmt.Sprintf(`; server %q, whose tools are not known, is %s: %s`, b.name, h.State, h.Error)
		}
	}
	return msg
}

// callTool routes tools/call to the backend that owns the tool, with the
// server's own name for it, and returns the answer with the client's ID.
func (g *Gateway) callTool(ctx context.Context, msg *wireMsg) *reply {
	var p struct {
		Name string `json:"name"`
	}
	if err := json.Unmarshal(msg.Params, &p); err != nil || p.Name == "" {
		return errorReply(msg.ID, &wireError{Code: codeInvalidParams, Message: "tools/call: params must be an object with a tool name"})
	}
	name := p.Name
	t := g.lookupTool(ctx, name)
	if t == nil {
		return errorReply(msg.ID, &wireError{Code: codeInvalidParams, Message: g.unknownTool(name)})
	}
	params := msg.Params
	if t.orig != name {
		// Renamed by a prefix or a collision: the server gets its own name.
		var fields map[string]json.RawMessage
		json.Unmarshal(msg.Params, &fields) // an object: decoded above
		fields["name"], _ = json.Marshal(t.orig)
		params, _ = json.Marshal(fields)
	}
	timeout := g.config().requestTimeout(t.backend.cfg)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	answer, err := t.backend.call(ctx, "tools/call", params)
	var r *reply
	outcome := outcomeOK
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		outcome = outcomeTimeout
		r = errorReply(msg.ID, &wireError{Code: codeTimeout,
			Message: fmt.Sprintf("server %q did not answer tools/call %q within %s (requestTimeout); corral cancelled the request", t.backend.name, name, timeout)})
	case errors.Is(context.Cause(ctx), errShuttingDown):
		outcome = outcomeUnavailable
		r = errorReply(msg.ID, unavailable("corral is shutting down: tools/call %q was cut off at the end of shutdownTimeout (%s)", name, g.config().ShutdownTimeout.D()))
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
		r = resultReply(msg.ID, answer.Result)
	}
	t.backend.metrics.observe(outcome, time.Since(start))
	return r
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
