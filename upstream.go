package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// clientCapabilities are the capabilities corral declares to a legacy
// server: those its clients may have. A request that needs one goes to the
// client whose call the server is serving, if that client declared it
// (serverRequests.serverRequest).
var clientCapabilities = map[string]any{"sampling": struct{}{}, "elicitation": struct{}{}, "roots": map[string]bool{"listChanged": true},
	// MCP Apps: corral passes a server's ui:// resources and its tools'
	// _meta.ui on to clients, so a server may offer them; a host that
	// renders none ignores them.
	"extensions": map[string]any{uiExtension: map[string]any{"mimeTypes": []string{uiMimeType}}}}

// The MCP Apps extension (SEP-1865): its identifier in the extensions
// capability, and the MIME type of its resources.
const (
	uiExtension = "io.modelcontextprotocol/ui"
	uiMimeType  = "text/html;profile=mcp-app"
)

// probeTimeout bounds the wait for the answer to server/discover; a legacy
// server may not answer a request before initialize at all.
const probeTimeout = 3 * time.Second

// upstreamHooks are how an upstream client reports to the backend that owns
// it. Each is called with no lock of the upstream held, and must not be nil.
type upstreamHooks struct {
	// listed is called when the server's lists or capabilities changed: at
	// the end of a handshake, and after lists were listed again.
	listed func()
	// told is called with the instructions the server gave in a handshake
	// whose first step succeeded.
	told func(instructions string)
	// subscribed returns the server's own URIs of the resources sessions
	// subscribed to, for a modern server's listen request.
	subscribed func() []string
	// tasks returns the server's own IDs of the tasks 2026-07-28 clients
	// made on it (the tasks extension), for a modern server's listen
	// request: their statuses come on it as notifications/tasks.
	tasks func() []string
}

// upstream is corral as the MCP client of one server. Given the mux of a
// run of the server, over a live connection, it completes the handshake
// (and so learns the server's era), lists what the server offers, lists
// again when the server says a list changed, pings, asks for log levels
// and keeps a modern server's listen request open. What it learned outlives
// the run: the lists and capabilities until the next handshake replaces
// them, the era as the first guess of the next handshake.
//
// Its methods are safe for concurrent use. Its lock is never held while it
// calls its hooks or the mux, and may be taken while the owning backend's
// lock is held (backend.setLogLevel), never the other way round.
type upstream struct {
	server        string
	gcfg          *Config
	cfg           *ServerConfig
	log           *slog.Logger
	relistenDelay time.Duration // the wait before listening again after the server ended the stream
	hooks         upstreamHooks

	mu       sync.Mutex
	lists    [numKinds][]backendItem // the last lists the server gave; kept after it exits
	ttls     [numKinds]int64         // the smallest ttlMs of each list's pages (0 from a legacy server)
	caps     capabilities            // what the server declared in its last handshake
	era      string                  // "modern" or "legacy" after a handshake succeeded; "" to probe
	relisten context.CancelFunc      // ends a modern server's listen request, to send it again

	stale [numKinds]atomic.Bool // lists the server said changed, not yet listed again
}

// newUpstream returns the client of server cfg of config gcfg, which has
// learned nothing yet. relistenDelay is the wait before a modern server's
// listen request is sent again after the server ended it.
func newUpstream(gcfg *Config, cfg *ServerConfig, log *slog.Logger, relistenDelay time.Duration, hooks upstreamHooks) *upstream {
	return &upstream{server: cfg.Name(), gcfg: gcfg, cfg: cfg, log: log, relistenDelay: relistenDelay, hooks: hooks}
}

// handshake learns over m which era the server speaks and what it offers,
// and lists what it offers, within StartTimeout. A server is asked
// server/discover first: a result that names the modern version, or the
// modern error for an unsupported version, means a modern server; any other
// error, or no answer, a legacy one, which is initialized. The era found is
// kept for the server's next starts, and probed again after a failure. It
// blocks until the handshake is over, and calls hooks.listed once it
// succeeded.
func (u *upstream) handshake(m *mux) error {
	timeout := u.gcfg.StartTimeout.D()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	u.mu.Lock()
	era := u.era
	u.era = "" // until this handshake succeeds
	u.mu.Unlock()
	var caps capabilities
	if era != "legacy" {
		var ok bool
		if caps, ok = u.discover(ctx, m, era == "modern"); ok {
			era = "modern"
		}
	}
	if era != "modern" {
		var err error
		if caps, err = u.initialize(ctx, m); err != nil {
			return err
		}
		era = "legacy"
	}
	var lists [numKinds][]backendItem
	var ttls [numKinds]int64
	bound := u.newCatalogBound()
	for k := range numKinds {
		if !caps.has(k) {
			continue
		}
		var err error
		if lists[k], ttls[k], err = u.listItems(ctx, m, k, bound); err != nil {
			return startError(kinds[k].list, timeout, err)
		}
	}
	u.mu.Lock()
	u.lists, u.ttls, u.caps, u.era = lists, ttls, caps, era
	u.mu.Unlock()
	// The catalog has the server's names before the server is ready, so
	// that a request that sees it ready finds them.
	u.hooks.listed()
	return nil
}

// discover asks the server server/discover and reports whether it speaks
// the modern era, with its capabilities if so. known says the server spoke
// it last time: then it waits as long as ctx allows.
func (u *upstream) discover(ctx context.Context, m *mux, known bool) (capabilities, bool) {
	if !known {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, probeTimeout)
		defer cancel()
	}
	a, err := m.Call(ctx, "server/discover", modernParams(nil, nil))
	if err != nil {
		u.log.Debug("server/discover: no answer; trying initialize", "err", err)
		return nil, false
	}
	if a.Error != nil {
		if a.Error.Code == codeUnsupportedVersion {
			u.log.Warn("the server speaks a modern protocol version corral does not; trying initialize", "err", a.Error.Message)
		} else {
			u.log.Debug("server/discover answered an error; trying initialize", "code", a.Error.Code)
		}
		return nil, false
	}
	var res struct {
		SupportedVersions []string     `json:"supportedVersions"`
		Capabilities      capabilities `json:"capabilities"`
		Instructions      string       `json:"instructions"`
		Meta              map[string]struct {
			Name    string `json:"name"`
			Version string `json:"version"`
		} `json:"_meta"`
	}
	if json.Unmarshal(a.Result, &res) != nil || !slices.Contains(res.SupportedVersions, modernVersion) {
		u.log.Debug("server/discover answered no modern version; trying initialize", "result", truncate(a.Result, 200))
		return nil, false
	}
	m.speakModern(modernParams)
	u.hooks.told(res.Instructions)
	info := res.Meta[metaServerInfo]
	u.log.Info("discovered", "serverName", info.Name, "serverVersion", info.Version, "protocolVersion", modernVersion)
	if res.Capabilities == nil {
		res.Capabilities = capabilities{}
	}
	return res.Capabilities, true
}

// initialize completes the legacy handshake and returns the server's
// capabilities.
func (u *upstream) initialize(ctx context.Context, m *mux) (capabilities, error) {
	timeout := u.gcfg.StartTimeout.D()
	params, _ := json.Marshal(map[string]any{
		"protocolVersion": protocolVersions[0],
		"capabilities":    clientCapabilities,
		"clientInfo":      map[string]string{"name": "corral", "version": version},
	})
	var init struct {
		ProtocolVersion string       `json:"protocolVersion"`
		Capabilities    capabilities `json:"capabilities"`
		Instructions    string       `json:"instructions"`
		ServerInfo      struct {
			Name    string `json:"name"`
			Version string `json:"version"`
		} `json:"serverInfo"`
	}
	if err := callInto(ctx, m, "initialize", params, &init); err != nil {
		return nil, startError("initialize", timeout, err)
	}
	if !slices.Contains(protocolVersions, init.ProtocolVersion) {
		return nil, fmt.Errorf("initialize: server answered protocol version %q; corral speaks %s",
			init.ProtocolVersion, strings.Join(protocolVersions, ", "))
	}
	if err := m.Notify(ctx, "notifications/initialized", nil); err != nil {
		return nil, startError("notifications/initialized", timeout, err)
	}
	u.log.Info("initialized", "serverName", init.ServerInfo.Name, "serverVersion", init.ServerInfo.Version, "protocolVersion", init.ProtocolVersion)
	if init.Capabilities == nil {
		init.Capabilities = capabilities{}
	}
	u.hooks.told(init.Instructions)
	return init.Capabilities, nil
}

// listChanged handles the server's notification method if it says a list
// changed: it marks those lists as due for listing again, wakes
// refreshLoop through refresh, and reports true. It does not block.
func (u *upstream) listChanged(method string, refresh chan<- struct{}) bool {
	due := false
	for k := range numKinds {
		if kinds[k].changed == method {
			u.stale[k].Store(true)
			due = true
		}
	}
	if due {
		select {
		case refresh <- struct{}{}:
		default: // a refresh is already due
		}
	}
	return due
}

// refreshLoop lists again over m, each time the server says they changed,
// the lists that changed, and calls hooks.listed. It returns when m closes.
func (u *upstream) refreshLoop(m *mux, refresh <-chan struct{}) {
	for {
		select {
		case <-refresh:
		case <-m.done:
			return
		}
		for k := range numKinds {
			if !u.stale[k].Swap(false) || !u.capabilities().has(k) {
				continue
			}
			u.relist(m, k)
		}
		u.hooks.listed()
	}
}

// relist lists kind k again over m, within StartTimeout, and keeps the new
// list; when that fails, the old list stays.
func (u *upstream) relist(m *mux, k kind) {
	bound := u.newCatalogBound()
	for j := range numKinds {
		for _, it := range u.items(j) {
			if j != k {
				bound.add(it.raw) // the other lists, over or not, leave this one less
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), u.gcfg.StartTimeout.D())
	items, ttl, err := u.listItems(ctx, m, k, bound)
	cancel()
	if err != nil {
		u.log.Warn("listing again after list_changed failed; keeping the old list", "method", kinds[k].list, "err", err)
		return
	}
	u.mu.Lock()
	u.lists[k], u.ttls[k] = items, ttl
	u.mu.Unlock()
}

// ping asks the server over m whether it is there, and blocks until it
// answers or ctx ends. The modern era has no ping: there server/discover,
// as cheap, stands in for it.
func (u *upstream) ping(ctx context.Context, m *mux) error {
	method := "ping"
	if m.modern.Load() {
		method = "server/discover"
	}
	_, err := m.Call(ctx, method, nil)
	return err
}

// takesLogLevel reports whether the server, running over m, takes
// logging/setLevel: it declared logging, and is not modern (a modern server
// has no logging/setLevel: each request says its level).
func (u *upstream) takesLogLevel(m *mux) bool {
	return u.capabilities()["logging"] != nil && !m.modern.Load()
}

// setLevel asks the server over m for log messages at level and above, and
// blocks until it answers or requestTimeout passes; a failure is logged.
func (u *upstream) setLevel(m *mux, level string) {
	ctx, cancel := context.WithTimeout(context.Background(), u.gcfg.requestTimeout(u.cfg))
	defer cancel()
	params, _ := json.Marshal(map[string]string{"level": level})
	if err := callInto(ctx, m, "logging/setLevel", params, &struct{}{}); err != nil {
		u.log.Warn("logging/setLevel failed", "level", level, "err", err)
	}
}

// listenLoop keeps a subscriptions/listen request open over m to a modern
// server, for the notifications a legacy server sends unasked: list
// changes, updates of the resources sessions subscribed to
// (hooks.subscribed), and the statuses of the tasks modern clients made on
// it (hooks.tasks, the tasks extension's taskIds, with the extension
// declared in the request's capabilities, as the extension requires). When
// the subscriptions or the tasks change (resubscribe), the request is sent
// again with the new sets. It returns when m closes.
func (u *upstream) listenLoop(m *mux) {
	for {
		// The request can be cancelled before the sets are read: a change
		// made while they are read sends it again.
		ctx, cancel := context.WithCancel(context.Background())
		u.mu.Lock()
		u.relisten = cancel
		u.mu.Unlock()
		notifications := map[string]any{
			"toolsListChanged": true, "promptsListChanged": true, "resourcesListChanged": true,
			"resourceSubscriptions": u.hooks.subscribed(),
		}
		listen := map[string]any{"notifications": notifications}
		if ids := u.hooks.tasks(); len(ids) > 0 {
			notifications["taskIds"] = ids
			// corral's own requests declare no capabilities but this one
			// (see modernParams): "Servers MUST return this error
			// [-32021] for non-declaring clients requesting task
			// notifications on subscriptions/listen."
			listen["_meta"] = map[string]any{metaCaps: map[string]any{"extensions": map[string]any{tasksExtension: struct{}{}}}}
		}
		params, _ := json.Marshal(listen)
		_, err := m.Call(ctx, "subscriptions/listen", params)
		cancel()
		select {
		case <-m.done:
			return
		default:
		}
		if err == nil {
			// The server ended the stream; wait a moment before asking again.
			t := time.NewTimer(u.relistenDelay)
			select {
			case <-t.C:
			case <-m.done:
				t.Stop()
				return
			}
		}
	}
}

// resubscribe sends a modern server's listen request again, with the
// subscriptions as they are now. It does not block.
func (u *upstream) resubscribe() {
	if u == nil {
		return // a backend of a test's, which never ran
	}
	u.mu.Lock()
	cancel := u.relisten
	u.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// listTTL returns the smallest ttlMs of the pages of the server's last
// list of kind k: 0 for a legacy server, whose lists carry none.
func (u *upstream) listTTL(k kind) int64 {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.ttls[k]
}

// items returns the server's last list of kind k.
func (u *upstream) items(k kind) []backendItem {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.lists[k]
}

// capabilities returns what the server declared in its last handshake.
func (u *upstream) capabilities() capabilities {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.caps
}

// startError says which step of a start failed, and, when it timed out,
// which setting bounded it.
func startError(step string, timeout time.Duration, err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s: no answer within %s (startTimeout)", step, timeout)
	}
	return fmt.Errorf("%s: %w", step, err)
}

// callInto makes a call and decodes its result into v; a JSON-RPC error
// answer is returned as an error.
func callInto(ctx context.Context, m *mux, method string, params json.RawMessage, v any) error {
	a, err := m.Call(ctx, method, params)
	if err != nil {
		return err
	}
	if a.Error != nil {
		return fmt.Errorf("server answered error %d: %w", a.Error.Code, a.Error)
	}
	if err := json.Unmarshal(a.Result, v); err != nil {
		return fmt.Errorf("invalid result: %v", err)
	}
	return nil
}

// maxListPages bounds the pages of one listing, against a server whose
// cursors never end.
const maxListPages = 1000

// catalogBound counts a server's catalog as it is listed, against the
// bounds of its config (maxCatalogItems, maxCatalogBytes). It is not safe
// for concurrent use.
type catalogBound struct {
	server   string
	maxItems int
	maxBytes int64
	items    int   // counted so far
	bytes    int64 // counted so far
}

// newCatalogBound returns a bound for the server's catalog with nothing
// counted yet.
func (u *upstream) newCatalogBound() *catalogBound {
	items, size := u.gcfg.catalogBound(u.cfg)
	return &catalogBound{server: u.server, maxItems: items, maxBytes: size}
}

// add counts one item whose JSON is raw, and returns an error, for the
// server's start or the log, once the catalog is over either bound.
func (c *catalogBound) add(raw []byte) error {
	c.items++
	c.bytes += int64(len(raw))
	over := func(n int64, what, key string) error {
		return fmt.Errorf("server %q lists more than %d %s of tools, prompts, resources and templates, the bound (%s); raise %s in the server's entry or at the top level of the config if it is expected", c.server, n, what, key, key)
	}
	switch {
	case c.items > c.maxItems:
		return over(int64(c.maxItems), "items", "maxCatalogItems")
	case c.bytes > c.maxBytes:
		return over(c.maxBytes, "bytes", "maxCatalogBytes")
	}
	return nil
}

// listItems is the package's listItems, except that a server that
// declared the capability but answers its list with -32601 (method not
// found) has none of kind k: its wrong declaration costs that list only,
// not its start. The method is logged (with the server's name) as a
// warning, except for resources/templates/list, which many servers that
// list resources do not know.
func (u *upstream) listItems(ctx context.Context, m *mux, k kind, bound *catalogBound) ([]backendItem, int64, error) {
	items, ttl, err := listItems(ctx, m, k, bound)
	var we *wireError
	if err == nil || !errors.As(err, &we) || we.Code != codeMethodNotFound {
		return items, ttl, err
	}
	if k == kindTemplate {
		u.log.Debug("the server does not know resources/templates/list; it has no resource templates", "method", kinds[k].list)
	} else {
		u.log.Warn("the server declared a capability but does not know its list method; corral lists none of it and serves the rest", "method", kinds[k].list, "err", err)
	}
	return nil, 0, nil
}

// listItems lists every item of kind k the server has, following
// nextCursor, counting each item against bound. An item's JSON is kept as the server sent it (made compact if it holds a
// line break): the catalog serves it as it is, unless it renames the item.
func listItems(ctx context.Context, m *mux, k kind, bound *catalogBound) ([]backendItem, int64, error) {
	var items []backendItem
	ttl := int64(-1) // none seen yet
	seen := map[string]bool{}
	cursor := ""
	for page := 0; ; page++ {
		if page == maxListPages {
			return nil, 0, fmt.Errorf("more than %d pages", maxListPages)
		}
		var params json.RawMessage
		if cursor != "" {
			params, _ = json.Marshal(map[string]string{"cursor": cursor})
		}
		var res map[string]json.RawMessage
		if err := callInto(ctx, m, kinds[k].list, params, &res); err != nil {
			return nil, 0, err
		}
		var list []json.RawMessage
		if err := json.Unmarshal(res[kinds[k].field], &list); err != nil {
			return nil, 0, fmt.Errorf("invalid result: %q is not a list", kinds[k].field)
		}
		// "If ttlMs is absent, clients SHOULD assume a default of 0";
		// "If ttlMs is negative, clients SHOULD ignore it and treat it as 0".
		var pageTTL int64
		json.Unmarshal(res["ttlMs"], &pageTTL)
		if ttl < 0 || max(pageTTL, 0) < ttl {
			ttl = max(pageTTL, 0)
		}
		for _, raw := range list {
			var fields map[string]json.RawMessage
			var name string
			if json.Unmarshal(raw, &fields) != nil || json.Unmarshal(fields[kinds[k].key], &name) != nil || name == "" {
				return nil, 0, fmt.Errorf("an item without a %s: %s", kinds[k].key, truncate(raw, 200))
			}
			if seen[name] {
				continue // listed twice (a server whose pages overlap)
			}
			seen[name] = true
			if bytes.ContainsAny(raw, "\r\n") {
				raw = compactRaw(raw) // a newline would end a client's line
			}
			if err := bound.add(raw); err != nil {
				return nil, 0, err
			}
			items = append(items, backendItem{name: name, raw: raw})
		}
		var next string
		json.Unmarshal(res["nextCursor"], &next)
		if next == "" {
			return items, ttl, nil
		}
		cursor = next
	}
}

// modernClient is what a 2026-07-28 server is told of the client a request
// is for, in its _meta; the gateway's caller of a client's request has it.
type modernClient interface {
	clientCaps() capabilities
	clientLogLevel() string
}

// modernParams returns params with the _meta a modern server needs: the
// protocol version, the client's capabilities (those of c, or, for
// corral's own requests, none unless params declare some: its listen
// request's, see upstream.listenLoop), corral's identity unless the client
// gave its own, and the log level the client wants, if any.
func modernParams(params json.RawMessage, c caller) json.RawMessage {
	var fields map[string]json.RawMessage
	json.Unmarshal(params, &fields)
	if fields == nil {
		fields = map[string]json.RawMessage{}
	}
	var meta map[string]json.RawMessage
	json.Unmarshal(fields["_meta"], &meta)
	if meta == nil {
		meta = map[string]json.RawMessage{}
	}
	meta[metaVersion], _ = json.Marshal(modernVersion)
	caps, logLevel := capabilities{}, ""
	if c == nil && meta[metaCaps] != nil {
		json.Unmarshal(meta[metaCaps], &caps)
	}
	if mc, ok := c.(modernClient); ok {
		if mc.clientCaps() != nil {
			caps = mc.clientCaps()
		}
		logLevel = mc.clientLogLevel()
	}
	meta[metaCaps], _ = json.Marshal(caps)
	if meta[metaClientInfo] == nil {
		meta[metaClientInfo], _ = json.Marshal(map[string]string{"name": "corral", "version": version})
	}
	if logLevel != "" {
		meta[metaLogLevel], _ = json.Marshal(logLevel)
	}
	fields["_meta"], _ = json.Marshal(meta)
	out, _ := json.Marshal(fields)
	return out
}

// backendItem is one item as its server listed it.
type backendItem struct {
	name string          // the server's name for it: a name, a URI or a URI template
	raw  json.RawMessage // the object as the server sent it
}

// cached returns what the upstream knows of the server, for the cache.
func (u *upstream) cached(instructions string) *cachedCatalog {
	u.mu.Lock()
	defer u.mu.Unlock()
	cc := &cachedCatalog{Version: catalogCacheVersion, Server: u.server, Capabilities: u.caps, Instructions: instructions, Lists: map[string][]json.RawMessage{}}
	for k := range numKinds {
		for _, it := range u.lists[k] {
			cc.Lists[kinds[k].field] = append(cc.Lists[kinds[k].field], it.raw)
		}
	}
	return cc
}

// restore makes the upstream know what cc, a checked cache file, holds, as
// if the server had said it in a handshake.
func (u *upstream) restore(cc *cachedCatalog) {
	var lists [numKinds][]backendItem
	for k := range numKinds {
		for _, raw := range cc.Lists[kinds[k].field] {
			name, _ := itemName(k, raw) // load checked it
			lists[k] = append(lists[k], backendItem{name: name, raw: raw})
		}
	}
	caps := cc.Capabilities
	if caps == nil {
		caps = capabilities{}
	}
	u.mu.Lock()
	u.lists, u.caps = lists, caps
	u.mu.Unlock()
}
