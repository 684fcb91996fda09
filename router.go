package main

import (
	"bytes"
	"context"
	"encoding/json"
	"time"
)

// The steps of the router: what Gateway.handle does with a request of
// either era (Gateway.serve); offer.routeTo finds the server a forwarded
// request goes to, by the method's routing member (see methods in
// protocol.go), within the view of the request's principal.

// inbound is one request from a client in corral's one internal form: the
// message, the era it came in, and what the era decides. The era layer
// (era.go) makes it where the message enters (see inboundOf), once; it is
// not changed after.
type inbound struct {
	msg   *wireMsg
	era   era // eraLegacy or eraModern, never both: which methods are served
	rules eraRules
	// caps and logLevel are what a modern request says of its client; a
	// legacy client said them once, at initialize, to its session.
	caps     capabilities
	logLevel string
	// cancel ends the context handle serves the request under, with a
	// cause; handle sets it. The legacy era's forward ends it with
	// context.DeadlineExceeded at requestTimeout (see armDeadline).
	cancel context.CancelCauseFunc
	// traceHeader and traceState are the request's HTTP traceparent and
	// tracestate headers, which its front end sets; its _meta's come first
	// (see requestTraceContext).
	traceHeader, traceState string
	// span is the request's span in corral while tracing is on (tracing.go);
	// handle sets it.
	span *span
	// serverName is the server's own name for the tool or prompt the
	// request names, where it is not the client's (a prefix, a collision,
	// an override's rename), for the audit trail; serve sets it.
	serverName string
}

// eraRules is what the gateway asks of a request's era: the little that
// still differs once a request is in the internal form. The era layer
// implements it (legacyEra in era.go, modernEra in modern.go); the gateway
// calls nothing else of that layer. Implementations hold no state and are
// safe for concurrent use.
type eraRules interface {
	// result returns the answer to request id that carries result, as
	// the era's results leave for the client, with the caching hints
	// cache says (a legacy result has none). The result is not copied.
	result(id, result json.RawMessage, cache cacheHints) *reply
	// ownMeta returns the _meta of a result corral makes itself, or nil.
	ownMeta() json.RawMessage
	// notServed returns the error that answers a method corral does not
	// serve in the era.
	notServed(method string) *wireError
	// silencedByCancel reports whether a client that cancelled a request
	// wants no answer to it whatever corral did with it; else it wants
	// none only to a forwarded one.
	silencedByCancel() bool
	// forward sends f's request to its server and returns the answer with
	// the client's ID (see Gateway.answerReply), or nil if the client
	// cancelled the request. It blocks until the call ends or the era lets
	// it go on without the client (modern.go: input_required).
	forward(ctx context.Context, fw *forwarder, f *forwarding) *reply
}

// searchCall serves a tools/call of a client in search mode (search.go),
// of view v: a call of find_tools is answered (r); a call of call_tool is
// returned as the tools/call it stands for (call), a copy of in with the
// same ID; a call of any other tool, which the client may call by name as
// any client may, is returned as it is.
func (g *Gateway) searchCall(ctx context.Context, s *session, v *view, in *inbound) (r *reply, call *inbound) {
	msg := in.msg
	c, ok, werr := readSearchCall(msg.Params)
	switch {
	case werr != nil:
		return errorReply(msg.ID, werr), nil
	case !ok:
		return nil, in
	case c.name == findToolsName:
		query, limit, werr := findQuery(c.args)
		if werr != nil {
			return errorReply(msg.ID, werr), nil
		}
		g.offer.waitFirstStarts(ctx)
		found := g.search.find(g.currentCatalog(), v, query, limit)
		var names []string
		for _, it := range found {
			names = append(names, it.name)
		}
		if s.addFound(names, maxFoundListed) {
			// For clients that call tools by name only: what was found is
			// in the session's tools/list from now on.
			note, _ := encodeNotification(kinds[kindTool].changed, nil)
			s.send(note[:len(note)-1])
		}
		return in.rules.result(msg.ID, findResult(found), cacheHints{}), nil
	}
	params, werr := callToolParams(msg.Params, c.args)
	if werr != nil {
		return errorReply(msg.ID, werr), nil
	}
	m := *msg
	m.Params = params
	next := *in
	next.msg = &m
	return nil, &next
}

// forwarder is what an era's forward needs of the gateway. NewGateway sets
// its fields, and they never change; what they refer to is safe for
// concurrent use.
type forwarder struct {
	config   func() *Config  // the config in force
	requests *serverRequests // servers' requests to clients, and modern clients' parked calls
	// cut ends when calls still in flight at the end of shutdownTimeout are
	// cut off (Gateway.CutOff).
	cut context.Context
	// owned runs the calls that outlive the request that starts them (a
	// modern client's call waiting for its input); Stop joins them.
	owned *goroutines
	// answerReply is Gateway.answerReply: the answer to a forwarded request,
	// shaped for its era, or the error that says why there is none.
	answerReply func(ctx context.Context, in *inbound, b *backend, answer *wireMsg, err error, timeout time.Duration, start time.Time) *reply
}

// forwarding is a request on its way to a server: the request, the server,
// the params with the server's own names, what goes with it (f.rel), and
// its requestTimeout.
type forwarding struct {
	in      *inbound
	b       *backend
	params  json.RawMessage
	rel     *related
	timeout time.Duration
}

// serve serves a request, in whichever era it came: corral answers it, or
// forwards it to the server its routing member names. What it does is the
// method's op in the table of methods, for the request's era; the era's
// rules shape the result. key is the request's key in the session's
// inflight. It returns nil if the client cancelled a forwarded request: it
// wants no answer.
func (g *Gateway) serve(ctx context.Context, s *session, in *inbound, key string, send func([]byte)) *reply {
	msg := in.msg
	info := served(msg.Method, in.era)
	v := g.viewOf(s.who)
	var result any
	var err error
	switch info.op {
	case opInitialize:
		result, err = g.sessions.initialize(ctx, s, msg.Params)
	case opPing:
		result = json.RawMessage("{}")
	case opDiscover:
		result = g.offer.discover(ctx, v)
	case opList:
		if info.kind == kindTool && g.searches(s.who) {
			result, err = searchToolsPage(msg.Params, in.rules.ownMeta(), foundInView(g.currentCatalog(), v, s)...)
			break
		}
		result, err = g.offer.list(ctx, v, info.kind, msg.Params, in.rules.ownMeta())
		if page, ok := result.(json.RawMessage); ok && err == nil && info.kind == kindResource {
			result = withStatusItem(page, msg.Params) // corral's own, which every view sees
		}
	case opForward:
		return g.serveForward(ctx, s, v, in, key, send)
	case opTask:
		start := g.audit.clock()
		r := g.tasks.serveEither(ctx, s, in, send)
		if r == nil || s.wasCancelled(key) {
			r = nil
		}
		g.audit.call(ctx, start, s, in, nil, nil, r)
		return r
	case opTaskList:
		result, err = g.tasks.list(ctx, s, msg.Params)
	case opSubscribe:
		if namesStatusURI(msg.Params) {
			err = &wireError{Code: codeInvalidParams, Message: "resources/subscribe: " + statusURI + " takes no subscription; corral's log messages (logger \"corral\") say when a server goes down or comes back"}
			break
		}
		result, err = g.subs.subscribe(ctx, s, msg.Params)
	case opUnsubscribe:
		result, err = g.subs.unsubscribe(ctx, s, msg.Params)
	case opSetLevel:
		result, err = g.sessions.setLogLevel(s, msg.Params)
	case opListen:
		return g.listens.listen(ctx, s.who, in.caps, msg, send)
	default:
		err = in.rules.notServed(msg.Method)
	}
	if err != nil {
		return errorReply(msg.ID, asWireError(err))
	}
	raw, ok := result.(json.RawMessage) // a page of a list: not encoded again
	if !ok {
		raw, _ = json.Marshal(result)
	}
	cache := cacheHints{cacheable: info.cacheable}
	if info.op == opList && in.era == eraModern {
		cache.ttlMs = g.offer.listTTL(v, info.kind)
	}
	return in.rules.result(msg.ID, raw, cache)
}

// serveForward serves a request serve forwards (op opForward) to the server
// its routing member names, in v: the session-scoped process of s where
// the server has one, as a task where the call makes one. Each way out
// writes the request's audit line (audit.go): there its outcome is known.
func (g *Gateway) serveForward(ctx context.Context, s *session, v *view, in *inbound, key string, send func([]byte)) *reply {
	msg := in.msg
	if msg.Method == "resources/read" && namesStatusURI(msg.Params) {
		return in.rules.result(msg.ID, g.notices.readStatus(v), cacheHints{cacheable: true}) // it changes at any time: ttlMs 0
	}
	start := g.audit.clock()
	if msg.Method == "tools/call" && g.searches(s.who) {
		// find_tools is answered here; call_tool goes on as the
		// tools/call it stands for, with what every call gets.
		r, call := g.searchCall(ctx, s, v, in)
		if r != nil {
			g.audit.call(ctx, start, s, in, nil, nil, r)
			return r
		}
		in, msg = call, call.msg
	}
	routed, params, token, werr := g.route(ctx, v, msg)
	if werr == nil && !start.IsZero() && methods[msg.Method].member == routeName {
		in.serverName = forwardedName(msg.Params, params)
	}
	var b *backend
	if werr == nil {
		b, werr = g.scopes.forSession(ctx, s, in.era == eraModern, routed) // a session-scoped server's process of s
	}
	if werr != nil {
		g.audit.call(ctx, start, s, in, routed, werr, nil)
		return errorReply(msg.ID, werr)
	}
	in.span.forCall(msg, b.name)
	var r *reply
	switch {
	case in.era == eraLegacy && taskAugmented(params):
		r = g.tasks.forward(ctx, s, in, b, params, token, send)
	case in.era == eraModern && msg.Method == "tools/call":
		r = g.tasks.forwardModern(ctx, s, in, b, params, token, send) // a task, where the server makes one
	default:
		r = g.forward(ctx, s, in, b, params, token, send)
	}
	if r == nil || s.wasCancelled(key) {
		g.audit.call(ctx, start, s, in, routed, nil, nil)
		return nil // the client cancelled it: it wants no answer
	}
	g.audit.call(ctx, start, s, in, routed, nil, r)
	return r
}

// cacheHints are what a modern result of a cacheable method (server/discover,
// the lists, resources/read) carries for caches, ttlMs and cacheScope; a
// legacy result has none. Its zero value is a result that is not
// cacheable.
type cacheHints struct {
	cacheable bool
	// ttlMs is the ttlMs a result that has none gets: for a list corral
	// merged, the smallest of its servers' (see offer.listTTL).
	ttlMs int64
	// private makes a server's cacheScope "public" "private": the result
	// varies by caller, whose views of the servers differ.
	private bool
	// noStore sets ttlMs to 0, whatever the server said: the request
	// carried requestState or inputResponses, whose "Results ... MUST NOT
	// be cached, as they depend on inputs that are not part of the cache
	// key".
	noStore bool
}

// carriesRequestState reports whether params, a modern request's, carry
// requestState or inputResponses: the request is a retry of a multi
// round-trip request, whose result is not to be cached.
func carriesRequestState(params json.RawMessage) bool {
	if !bytes.Contains(params, []byte(`"requestState"`)) && !bytes.Contains(params, []byte(`"inputResponses"`)) {
		return false
	}
	found := false
	members(params, func(key string, _ []byte) { found = found || key == "requestState" || key == "inputResponses" })
	return found
}

// forwardedName returns the name that params, a request's params as the
// route made them for its server, give the item, if it is not the one
// sent, the client's params, give it; else "".
func forwardedName(sent, params json.RawMessage) string {
	var a, b routing
	if !scanRouting(sent, &a) {
		json.Unmarshal(sent, &a)
	}
	if !scanRouting(params, &b) {
		json.Unmarshal(params, &b)
	}
	if a.Name == b.Name {
		return ""
	}
	return b.Name
}
