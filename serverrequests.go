package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"
	"strconv"
	"sync"
	"time"
)

// Server-to-client requests: a server's sampling, elicitation and roots
// requests go to the session whose call the server is serving, under an ID
// of the session's, and the client's answer goes back under the server's
// ID. A request waits in two places until it is settled: with its server
// (mux.ask, bounded by maxServerRequests) and in its session's outbound
// queue (session.enqueue, bounded by maxServerRequestsPerSession). A modern
// client is asked with an input_required result instead, and the call it
// interrupted waits, parked, for the client to send the request again; a
// modern server's input_required result for a legacy client becomes
// requests to the client's session (askClient).

// serverRequests passes servers' requests to clients' sessions and the
// clients' answers back, and keeps modern clients' calls parked while
// their clients are asked for input. Its fields are set by
// newServerRequests and never changed; a request itself waits with its
// server's mux and its session, so serverRequests has no lock of its own.
// Its methods are safe for concurrent use.
//
// Lock order: it holds no lock while it calls a mux, a session or a
// stream; parked's mu is a leaf.
type serverRequests struct {
	config func() *Config // the config in force (requestTimeout and the limits)
	log    *slog.Logger

	// taskOwner returns the session whose task the params of a request
	// of server b's are about (their related-task _meta), or nil; and
	// clientRelatedTask returns the params with that task under corral's
	// ID for it.
	taskOwner         func(b *backend, params json.RawMessage) *session
	clientRelatedTask func(b *backend, params json.RawMessage) json.RawMessage

	parked *parkedExchanges // modern clients' calls waiting for their input

	// sole returns the gateway's one session, when it has exactly one,
	// and whether its client is ready for requests (sessionSet.sole). A
	// server's request with no client call in flight goes to it. If nil,
	// such a request is refused. Set once, before any server starts.
	sole func() (s *session, ready bool, n int)
	// seesServer reports whether session s's view shows server; nil: every
	// view shows every server.
	seesServer func(s *session, server string) bool
	// holdForClient, set once before any server starts when corral
	// serves one client (-stdio), makes a request with no call in flight
	// that comes before that client is ready wait for it (held), within
	// requestTimeout, rather than be refused: servers ask for roots as
	// soon as they start, before the client has connected.
	holdForClient bool
	held          heldRequests
}

// newServerRequests returns the server requests of a gateway whose config
// in force config returns, asking taskOwner and clientRelatedTask about
// requests related to a task (see the fields of serverRequests).
func newServerRequests(config func() *Config, log *slog.Logger, taskOwner func(*backend, json.RawMessage) *session, clientRelatedTask func(*backend, json.RawMessage) json.RawMessage) *serverRequests {
	return &serverRequests{config: config, log: log, taskOwner: taskOwner, clientRelatedTask: clientRelatedTask, parked: newParkedExchanges()}
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

// serverID returns the server's ID for o: o is what the mux keeps as asked.
func (o *outbound) serverID() json.RawMessage { return o.id }

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

// serverRequest passes a request a server sent to its client (sampling,
// elicitation, roots) to the one session with requests in flight to that
// server, on the stream of its latest such request, under an ID of the
// session's own. A request about a task (io.modelcontextprotocol/related-task
// in its _meta) counts only the requests of the session that owns the task,
// and names the task by corral's ID (see taskTable.related). The server gets an error instead when no session, or more
// than one, has requests in flight to it (corral cannot tell whom it asks),
// when that session's client did not declare the capability the request
// needs, or when maxServerRequests of the server's, or
// maxServerRequestsPerSession of the session's, wait for an answer. Called
// on the mux's reading goroutine; it does not block, and logs at most a few
// lines a second (mux.warn).
//
// The session is found among the callers of the requests in flight on m
// (mux.callers), which the mux hands back as the *related it was given: the
// mux's pending table is the one exact record of which clients' calls this
// process is serving now, changed under one lock as calls are sent, answered
// and retired at once by a crash. A table of its own here would have to be
// kept in step with it through crashes and restarts, and could only be less
// true.
func (sr *serverRequests) serverRequest(b *backend, m *mux, msg *wireMsg) {
	fail := func(code int, format string, args ...any) {
		why := fmt.Sprintf(format, args...)
		m.answer(msg.ID, errorReply(msg.ID, &wireError{Code: code, Message: why}))
		m.warn("refused a request of the server to a client", "method", msg.Method, "why", why)
	}
	info, known := methods[msg.Method]
	if !known || info.from != fromServer || info.notification {
		fail(codeMethodNotFound, "corral does not pass %s from servers to clients", msg.Method)
		return
	}
	var rel *related
	sessions := 0
	owner := sr.taskOwner(b, msg.Params) // a request about a task is its session's
	for _, c := range m.callers() {
		r := c.(*related)
		if owner != nil && r.s != owner {
			continue
		}
		if rel == nil || r.s != rel.s {
			sessions++
		}
		rel = r // the latest of the last session
	}
	switch {
	case sessions == 0 && owner == nil && sr.toSole(b, m, msg):
		return
	case sessions == 0:
		fail(codeInternalError, "corral passes %s to the client whose request the server is serving, and no client request is in flight to server %q (and corral has %s)", msg.Method, b.name, sr.soleText())
		return
	case sessions > 1:
		fail(codeInternalError, "corral passes %s to the client whose request the server is serving, and requests of %d clients are in flight to server %q, so it cannot tell which", msg.Method, sessions, b.name)
		return
	}
	sr.passRequest(b, m, msg, rel)
}

// toSole passes msg, a request of server b's over m made with no client
// call in flight, to the gateway's one session, and reports true, when
// there is exactly one and its client is ready. When corral serves one
// client (holdForClient) that is not ready yet, or has not connected, it
// holds msg until it is (sessionReady), or until requestTimeout, and
// reports true. Else it reports false: the caller refuses msg.
func (sr *serverRequests) toSole(b *backend, m *mux, msg *wireMsg) bool {
	if sr.sole == nil {
		return false
	}
	s, ready, n := sr.sole()
	switch {
	case s != nil && sr.seesServer != nil && !sr.seesServer(s, b.name):
		return false // a server the one client's view hides asks it nothing
	case ready:
		sr.passRequest(b, m, msg, soleRelated(s))
		return true
	case n <= 1 && sr.holdForClient:
		cfg := sr.config()
		timeout := cfg.requestTimeout(b.cfg)
		return sr.held.hold(b, m, msg, timeout, cfg.MaxServerRequestsPerSession, func() {
			why := fmt.Sprintf("the client was not ready within %s (requestTimeout) to be asked", timeout)
			m.answer(msg.ID, errorReply(msg.ID, &wireError{Code: codeTimeout, Message: why}))
			m.warn("refused a request of the server to a client", "method", msg.Method, "why", why)
		})
	}
	return false
}

// soleText says how many sessions corral has, for a refusal.
func (sr *serverRequests) soleText() string {
	n := 0
	if sr.sole != nil {
		_, _, n = sr.sole()
	}
	switch n {
	case 0:
		return "no client session"
	case 1:
		return "one client session, not ready yet"
	}
	return fmt.Sprintf("%d client sessions, so it cannot tell which to ask", n)
}

// soleRelated returns where a request of a server's to session s goes
// when it is about none of s's calls: s's own stream.
func soleRelated(s *session) *related {
	caps, _ := s.client()
	rel := &related{s: s, caps: caps}
	rel.setSend(s.send)
	return rel
}

// sessionReady passes the requests held for the client (see toSole) to
// session s, whose client has just become ready, if it is the one
// session.
func (sr *serverRequests) sessionReady(s *session) {
	if sr.sole == nil {
		return
	}
	if one, ready, _ := sr.sole(); one != s || !ready {
		return
	}
	for _, h := range sr.held.takeAll() {
		if sr.seesServer != nil && !sr.seesServer(s, h.b.name) {
			why := "the client's view does not show this server, so corral does not ask it"
			h.m.answer(h.msg.ID, errorReply(h.msg.ID, &wireError{Code: codeInternalError, Message: why}))
			continue
		}
		sr.passRequest(h.b, h.m, h.msg, soleRelated(s))
	}
}

// heldRequests are servers' requests waiting for corral's one client to be
// ready (serverRequests.toSole). Its methods are safe for concurrent use.
//
// Lock order: mu is a leaf.
type heldRequests struct {
	mu     sync.Mutex
	held   []*heldRequest
	closed bool
}

// heldRequest is a server's request held, and the timer that refuses it.
type heldRequest struct {
	b     *backend
	m     *mux
	msg   *wireMsg
	timer *time.Timer
}

// hold keeps msg, a request of b's over m, until takeAll, or until timeout,
// when it is forgotten and expire is called, and reports true; unless max
// requests are held already: then it reports false, and keeps nothing.
// Once stop was called, expire is called at once.
func (hr *heldRequests) hold(b *backend, m *mux, msg *wireMsg, timeout time.Duration, max int, expire func()) bool {
	hr.mu.Lock()
	if hr.closed {
		hr.mu.Unlock()
		expire()
		return true
	}
	defer hr.mu.Unlock()
	if len(hr.held) >= max {
		return false
	}
	h := &heldRequest{b: b, m: m, msg: msg}
	h.timer = time.AfterFunc(timeout, func() {
		if hr.forget(h) {
			expire()
		}
	})
	hr.held = append(hr.held, h)
	return true
}

// forget removes h, and reports whether it was still held.
func (hr *heldRequests) forget(h *heldRequest) bool {
	hr.mu.Lock()
	defer hr.mu.Unlock()
	i := slices.Index(hr.held, h)
	if i < 0 {
		return false
	}
	hr.held = slices.Delete(hr.held, i, i+1)
	return true
}

// takeAll returns the requests held, oldest first, their timers stopped,
// and forgets them.
func (hr *heldRequests) takeAll() []*heldRequest {
	hr.mu.Lock()
	defer hr.mu.Unlock()
	all := hr.held
	hr.held = nil
	for _, h := range all {
		h.timer.Stop()
	}
	return all
}

// stop forgets the requests held, their timers stopped, and makes hold
// refuse at once from now on. It may be called twice.
func (hr *heldRequests) stop() {
	hr.mu.Lock()
	defer hr.mu.Unlock()
	hr.closed = true
	for _, h := range hr.held {
		h.timer.Stop()
	}
	hr.held = nil
}

// passRequest passes msg, a request of server b's over m, to the client of
// rel, the call it is about (or, for a session-scoped server's process,
// the session's own stream): on rel's stream, under an ID of the
// session's. The server gets an error instead when the client did not
// declare the capability the request needs, or too many requests wait.
// It does not block.
func (sr *serverRequests) passRequest(b *backend, m *mux, msg *wireMsg, rel *related) {
	fail := func(code int, format string, args ...any) {
		why := fmt.Sprintf(format, args...)
		m.answer(msg.ID, errorReply(msg.ID, &wireError{Code: code, Message: why}))
		m.warn("refused a request of the server to a client", "method", msg.Method, "why", why)
	}
	capability := methods[msg.Method].capability
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
	if werr := sr.askSession(b, o); werr != nil {
		fail(werr.Code, "%s", werr.Message)
		return
	}
	line, _ := encodeRequest(o.out, msg.Method, sr.clientRelatedTask(b, msg.Params))
	rel.send(line[:len(line)-1])
}

// askSession records o, a request of server b's for o.s's client, with its
// server and in its session, under a new ID of the session's, until it is
// settled: answered, cancelled, timed out (requestTimeout) or its session
// ended. It fails when maxServerRequests of the server's or
// maxServerRequestsPerSession of the session's already wait.
func (sr *serverRequests) askSession(b *backend, o *outbound) *wireError {
	cfg := sr.config()
	timeout := cfg.requestTimeout(b.cfg)
	// Armed once o is recorded: o.timer is set before anyone else sees o.
	// The timer's goroutine, if it fires, only settles o; every other way
	// of settling o stops the timer (release), and a session's end settles
	// every request waiting in it.
	o.timer = time.AfterFunc(math.MaxInt64, func() {
		sr.settleAsked(o, &wireError{Code: codeTimeout, Message: fmt.Sprintf("the client did not answer within %s (requestTimeout); corral cancelled the request", timeout)}, "timed out in corral")
	})
	if werr := o.m.ask(o, cfg.MaxServerRequests); werr != nil {
		o.timer.Stop()
		return werr
	}
	if werr := o.s.enqueue(o, cfg.MaxServerRequestsPerSession); werr != nil {
		o.release()
		return werr
	}
	o.timer.Reset(timeout) // if o was settled meanwhile, the timer finds it so
	return nil
}

// settleAsked ends o, a request of a server's waiting for a session's
// answer, if it still waits: the client is told it is cancelled (with
// reason), and the server gets werr, unless werr is nil (the server
// cancelled it itself).
func (sr *serverRequests) settleAsked(o *outbound, werr *wireError, reason string) {
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
func (sr *serverRequests) serverCancelled(m *mux, params json.RawMessage) {
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
		sr.settleAsked(o.(*outbound), nil, "cancelled by the server")
	}
}

// cancelAsked ends the requests of a server still waiting for the answers
// of a client whose call rel they were about, now that the call was
// cancelled or timed out: the server was told to stop serving it.
func (sr *serverRequests) cancelAsked(rel *related) {
	for _, o := range rel.s.about(rel) {
		sr.settleAsked(o, &wireError{Code: codeInternalError, Message: "the client's request that this request was about was cancelled"}, "the request it was about was cancelled")
	}
}

// clientAnswer passes a client's answer to a server's request back to that
// server, under the server's own ID.
func (sr *serverRequests) clientAnswer(s *session, msg *wireMsg) {
	id, err := strconv.ParseInt(string(msg.ID), 10, 64)
	o := s.take(id)
	if err != nil || o == nil {
		sr.log.Debug("an answer from a client to no request of a server", "id", truncate(msg.ID, 50))
		return
	}
	if o.release() {
		o.deliver(msg)
	}
}

// park keeps ex, a modern client's call whose client is asked for input,
// under state until takeParked(state), or until timeout, when it is
// forgotten and its call cancelled; once stop was called, ex is cancelled
// at once (see parkedExchanges.park).
func (sr *serverRequests) park(state string, ex *exchange, timeout time.Duration) {
	sr.parked.park(state, ex, timeout)
}

// takeParked returns the exchange parked under state and forgets it, or
// nil.
func (sr *serverRequests) takeParked(state string) *exchange {
	return sr.parked.take(state)
}

// stop forgets every parked exchange and cancels its call, and makes park
// cancel those parked later. Gateway.Stop calls it once its servers are
// stopped, so that the calls' goroutines end and can be joined. It may be
// called twice.
func (sr *serverRequests) stop() {
	sr.parked.stop()
	sr.held.stop()
}

// parkedExchanges are modern clients' calls waiting for the client to send
// the request again with its input, by requestState. Each is forgotten, and
// its call cancelled, when the client has not come back within the call's
// timeout. Its methods are safe for concurrent use.
//
// Lock order: mu is a leaf: no other lock is taken while it is held.
type parkedExchanges struct {
	mu      sync.Mutex
	byState map[string]*parkedExchange
	closed  bool
}

// parkedExchange is an exchange waiting for its client, and the timer that
// forgets it.
type parkedExchange struct {
	ex    *exchange
	timer *time.Timer
}

func newParkedExchanges() *parkedExchanges {
	return &parkedExchanges{byState: map[string]*parkedExchange{}}
}

// park keeps ex under state until take(state), or until timeout, when it
// is forgotten and its call cancelled. Once stop was called, ex is
// cancelled at once: the client's coming back finds nothing.
func (p *parkedExchanges) park(state string, ex *exchange, timeout time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		ex.cancel()
		return
	}
	pe := &parkedExchange{ex: ex}
	// The timer's goroutine is stopped, or finds the exchange gone, by
	// take and stop.
	pe.timer = time.AfterFunc(timeout, func() {
		if p.take(state) != nil {
			ex.cancel()
		}
	})
	p.byState[state] = pe
}

// take returns the exchange parked under state and forgets it, or nil.
func (p *parkedExchanges) take(state string) *exchange {
	p.mu.Lock()
	defer p.mu.Unlock()
	pe := p.byState[state]
	if pe == nil {
		return nil
	}
	delete(p.byState, state)
	pe.timer.Stop()
	return pe.ex
}

// stop forgets every parked exchange and cancels its call, and makes park
// cancel those parked later. Gateway.Stop calls it, so that the calls'
// goroutines end and can be joined. It may be called twice.
func (p *parkedExchanges) stop() {
	p.mu.Lock()
	all := p.byState
	p.byState = map[string]*parkedExchange{}
	p.closed = true
	p.mu.Unlock()
	for _, pe := range all {
		pe.timer.Stop()
		pe.ex.cancel()
	}
}

// exchange is a call of a modern client to a legacy server that made
// requests of the client: the call goes on while the client, told what the
// server asks with an input_required result, answers and sends the request
// again with corral's requestState.
type exchange struct {
	rel    *related
	done   chan struct{} // closed when the call has ended
	answer *wireMsg
	err    error
	cancel context.CancelFunc

	pending map[string]*outbound // input requests the client has yet to answer, by key
	n       int                  // input requests so far
}

// related is where the messages a server sends about one client request go
// while the request is in flight: its progress, and the server's requests to
// the client.
type related struct {
	s           *session
	token       json.RawMessage // the client's progress token, or nil
	caps        capabilities    // the client's capabilities
	logLevel    string          // the least severe log level the client wants, or ""
	modern      bool            // the client speaks the modern era: no requests to it
	inputs      chan *outbound  // a modern client's exchange: the server's requests of it
	trace       *span           // the span of the call to the server while tracing is on, or nil
	relatedSend                 // delivers a message on the request's stream
}

// progressToken returns the client's progress token, or nil: related is
// the mux's caller.
func (r *related) progressToken() json.RawMessage { return r.token }

// clientCaps returns the client's capabilities, and clientLogLevel the
// least severe level it wants logged, for a 2026-07-28 server's _meta.
func (r *related) clientCaps() capabilities { return r.caps }
func (r *related) clientLogLevel() string   { return r.logLevel }

// noteWaits and noteWait pass the waits of the call to its span (see
// waitNoter).
func (r *related) noteWaits() bool                       { return r.trace.noteWaits() }
func (r *related) noteWait(what string, since time.Time) { r.trace.noteWait(what, since) }

// relatedSend is the part of related that a resumed exchange swaps: the
// stream of the request the client sent last.
type relatedSend struct {
	mu     sync.Mutex
	sendFn func([]byte)
}

func (r *relatedSend) setSend(f func([]byte)) {
	r.mu.Lock()
	r.sendFn = f
	r.mu.Unlock()
}

// send delivers a message on the stream of the request; it never blocks.
func (r *relatedSend) send(msg []byte) {
	r.mu.Lock()
	f := r.sendFn
	r.mu.Unlock()
	f(msg)
}

// askClient serves a modern server's input_required result for a legacy
// client: each of inputRequests, by key, becomes a request to the client's
// session, and the params to send the server again carry the client's
// answers and requestState, the server's state, if not "". It blocks until
// the client answers every request or ctx ends.
func (sr *serverRequests) askClient(ctx context.Context, rel *related, params json.RawMessage, inputRequests map[string]json.RawMessage, requestState string) (json.RawMessage, error) {
	s := rel.s
	replies := map[string]chan *wireMsg{}
	var ids []int64
	defer func() {
		for _, id := range ids {
			s.take(id) // those the client did not answer
		}
	}()
	max := sr.config().MaxServerRequestsPerSession
	for _, key := range slices.Sorted(maps.Keys(inputRequests)) {
		var in struct {
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		}
		json.Unmarshal(inputRequests[key], &in)
		c := make(chan *wireMsg, 1)
		o := &outbound{reply: c}
		if werr := s.enqueue(o, max); werr != nil {
			return nil, werr
		}
		id := o.out
		ids = append(ids, id)
		line, err := encodeRequest(id, in.Method, in.Params)
		if err != nil {
			return nil, err
		}
		rel.send(line[:len(line)-1])
		replies[key] = c
	}
	responses := map[string]json.RawMessage{}
	for key, c := range replies {
		select {
		case a := <-c:
			if a.Error != nil {
				return nil, fmt.Errorf("the client refused %s: %w", key, a.Error)
			}
			responses[key] = a.Result
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	params = setMember(params, "inputResponses", responses)
	if requestState != "" {
		params = setMember(params, "requestState", requestState)
	}
	return params, nil
}

// rootsChanged passes a client's notifications/roots/list_changed to every
// shared server of backends that is running and that view v (session s's)
// shows, when s is the gateway's one session: the servers ask that session
// for roots (toSole), so its roots are theirs. With more sessions, whose
// roots differ, it is not passed on.
func (sr *serverRequests) rootsChanged(s *session, msg *wireMsg, v *view, backends []*backend) {
	if sr.sole == nil {
		return
	}
	if one, _, n := sr.sole(); one != s {
		sr.log.Debug("roots/list_changed of one of several sessions not passed on", "sessions", n)
		return
	}
	for _, b := range backends {
		if m := b.currentRun(); m != nil && b.scope == nil && !m.modern.Load() && v.seesServer(b.name) {
			m.notifyNow(msg.Method, nil)
		}
	}
}
