package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"
)

// mux carries any number of concurrent requests, from any number of clients,
// over one connection to a server (a msgConn: a child's stdin and stdout, or
// a remote server's session). It numbers the requests it sends itself,
// so callers' IDs never meet the server and never collide. Its methods are
// safe for concurrent use.
type mux struct {
	name     string
	log      *slog.Logger
	onNotify func(*wireMsg) // receives the server's notifications, on the reading goroutine

	// onRequest receives the server's requests other than ping, on the
	// reading goroutine; it must not block. If nil, they get -32601.
	onRequest func(*wireMsg)

	out    outbox        // messages for the server (muxwrite.go)
	slots  chan struct{} // one token per request in flight
	nextID atomic.Int64

	// lastRead is when the server last wrote a line (Unix nanoseconds).
	lastRead atomic.Int64

	// modern is set when the server speaks the modern era: every request
	// then carries the _meta it needs, put on by toServer. speakModern sets
	// toServer before modern, and CallFor reads it only once modern is set,
	// so the atomic orders the two.
	modern   atomic.Bool
	toServer eraTranslator

	// notes bounds the notifications passed on per second, and logs bounds
	// the log lines about a misbehaving server: a server cannot flood
	// sessions or corral's log.
	notes, logs perSecond

	calls sync.Pool // of free *pendingCall, with their channels
	lines sync.Pool // of free *[]byte, to encode requests in

	mu      sync.Mutex
	pending map[int64]*pendingCall // by the ID sent to the server
	asked   map[string]asked       // the server's requests waiting for a client, by the server's ID
	err     error                  // why the mux closed; set once
	done    chan struct{}          // closed when err is set
}

// newMux returns a mux for the server called name that allows at most
// maxInFlight requests at once. The caller runs writeLoop and readLoop on
// the connection.
func newMux(name string, maxInFlight int, log *slog.Logger, onNotify func(*wireMsg)) *mux {
	return &mux{
		name:     name,
		log:      log,
		onNotify: onNotify,
		// Room for every request in flight and a cancellation for each, so
		// that a cancellation never has to wait for space.
		out:     outbox{max: 2*maxInFlight + 16, kick: make(chan struct{}, 1)},
		slots:   make(chan struct{}, maxInFlight),
		pending: make(map[int64]*pendingCall),
		asked:   make(map[string]asked),
		done:    make(chan struct{}),
		notes:   perSecond{limit: defaultMaxNotifyRate},
		logs:    perSecond{limit: 10},
	}
}

// caller is the client request a call is made for, as the mux sees it: the
// client's progress token, restored on the server's progress, and a way to
// send the client a message while the call is in flight. Whatever else its
// owner keeps of the request is opaque to the mux, which hands the caller
// back as it was given (callers, and the translator of the server's era).
type caller interface {
	// progressToken returns the client's progress token, or nil.
	progressToken() json.RawMessage
	// send delivers msg on the request's stream; it never blocks.
	send(msg []byte)
}

// waitNoter is what a caller implements to hear how long its call waited:
// for room in the queue to the server ("queue_wait", here) or for the
// server to start ("restart_wait", backend.call). noteWaits reports whether
// it wants to hear at all, so that an untraced call is not timed.
type waitNoter interface {
	noteWaits() bool
	noteWait(what string, since time.Time)
}

// asked is a request of the server's passed on to a client, as the mux
// keeps it until it is settled: by the server's ID. Its owner is opaque to
// the mux.
type asked interface {
	serverID() json.RawMessage
}

// eraTranslator rewrites the params of a request for the server's protocol era;
// c is the client request it is made for, or nil for corral's own. The
// upstream client, which learns the server's era, supplies it.
type eraTranslator func(params json.RawMessage, c caller) json.RawMessage

// speakModern records that the server speaks the 2026-07-28 era, and how to
// put that era's _meta on each request sent to it. The upstream client calls
// it once, in its handshake, before any client's request is sent.
func (m *mux) speakModern(translate eraTranslator) {
	m.toServer = translate
	m.modern.Store(true)
}

// pendingCall is a request waiting for its answer. An answer is sent to
// answer only under mu, by whoever removes the call from pending.
type pendingCall struct {
	answer chan *wireMsg // holds the one answer
	caller caller        // nil for corral's own requests
}

// perSecond lets through at most limit events a second and counts the rest.
// It is safe for concurrent use.
type perSecond struct {
	limit   int
	mu      sync.Mutex
	second  int64 // the Unix second being counted
	n       int
	dropped int
}

// allow reports whether one more event may pass now, and how many were
// dropped in the second before, the first time it is asked in a new second.
func (p *perSecond) allow(now time.Time) (ok bool, droppedBefore int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if sec := now.Unix(); sec != p.second {
		p.second, p.n, droppedBefore, p.dropped = sec, 0, p.dropped, 0
	}
	if p.n >= p.limit {
		p.dropped++
		return false, droppedBefore
	}
	p.n++
	return true, droppedBefore
}

// flush returns the number of events dropped since the last second
// counted, and forgets them.
func (p *perSecond) flush() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := p.dropped
	p.dropped = 0
	return n
}

// warn logs about a misbehaving server, at most a few lines a second.
func (m *mux) warn(msg string, args ...any) {
	ok, dropped := m.logs.allow(time.Now())
	if dropped > 0 {
		m.log.Warn("log lines about the server were dropped", "count", dropped)
	}
	if ok {
		m.log.Warn(msg, args...)
	}
}

// Call sends a request to the server and blocks until its answer arrives, ctx
// ends, or the mux closes. An answer that is a JSON-RPC error is returned as a
// message, not as an error. When ctx ends first, the server receives
// notifications/cancelled for the request (never for initialize, which the
// specification forbids cancelling) and its late answer is dropped. Call fails
// at once when maxInFlight requests are already in flight.
func (m *mux) Call(ctx context.Context, method string, params json.RawMessage) (*wireMsg, error) {
	return m.CallFor(ctx, method, params, nil)
}

// CallFor is Call for a client's request: c, if not nil, receives the
// server's progress notifications for it, and tells to whom the server's
// requests made while it is in flight go (callers). A progress token of c's
// replaces the one in params, whatever it is, by the ID sent to the server,
// which is unique among the requests in flight.
func (m *mux) CallFor(ctx context.Context, method string, params json.RawMessage, c caller) (*wireMsg, error) {
	select {
	case m.slots <- struct{}{}:
	default:
		return nil, unavailable("server %q is busy: %d requests are in flight, its limit (maxInFlight); try again later", m.name, cap(m.slots))
	}
	defer func() { <-m.slots }()

	id := m.nextID.Add(1)
	if m.modern.Load() {
		params = m.toServer(params, c)
	} else if c != nil {
		// A client's request, of either era, fitted to the server's
		// version; corral's own (the era probe among them) are as meant.
		params = legacyMeta(params)
	}
	if c != nil && c.progressToken() != nil {
		params = setMeta(params, metaProgressToken, strconv.AppendInt(nil, id, 10))
	}
	lp := m.lineBuf()
	line, err := appendRequest((*lp)[:0], id, method, params)
	if err != nil {
		return nil, err
	}
	pc := m.newPending(c)
	m.mu.Lock()
	if m.err != nil {
		m.mu.Unlock()
		return nil, m.err
	}
	m.pending[id] = pc
	m.mu.Unlock()

	if wn, ok := c.(waitNoter); ok && wn.noteWaits() {
		since := time.Now()
		err = m.put(ctx, line, true)
		wn.noteWait("queue_wait", since)
	} else {
		err = m.put(ctx, line, true)
	}
	m.freeLineBuf(lp, line)
	if err != nil {
		m.forget(id) // never queued, so nothing to cancel
		m.freePending(pc)
		return nil, err
	}

	select {
	case a := <-pc.answer:
		m.freePending(pc)
		return a, nil
	case <-m.done:
		select {
		case a := <-pc.answer: // it came just before the end
			m.freePending(pc)
			return a, nil
		default:
			m.freePending(pc)
			return nil, m.err
		}
	case <-ctx.Done():
		if m.forget(id) && method != "initialize" {
			m.cancel(id, context.Cause(ctx))
		}
		m.freePending(pc)
		return nil, ctxErr(ctx)
	}
}

// newPending returns a pendingCall for a request made for c, with an
// empty answer channel, reused when one is free.
func (m *mux) newPending(c caller) *pendingCall {
	pc, _ := m.calls.Get().(*pendingCall)
	if pc == nil {
		pc = &pendingCall{answer: make(chan *wireMsg, 1)}
	}
	pc.caller = c
	return pc
}

// freePending makes pc, no longer pending (no answer can be sent to it
// any more), free for reuse. An answer sent to it before it was forgotten
// is dropped.
func (m *mux) freePending(pc *pendingCall) {
	select {
	case <-pc.answer:
	default:
	}
	pc.caller = nil
	m.calls.Put(pc)
}

// lineBuf returns a buffer to encode a message in; freeLineBuf takes it
// back with the line encoded in it, once put has copied the line.
func (m *mux) lineBuf() *[]byte {
	if lp, _ := m.lines.Get().(*[]byte); lp != nil {
		return lp
	}
	return new([]byte)
}

func (m *mux) freeLineBuf(lp *[]byte, line []byte) {
	if cap(line) <= maxSpareBytes {
		*lp = line[:0]
		m.lines.Put(lp)
	}
}

// callers returns the caller of every client request in flight, oldest
// first.
func (m *mux) callers() []caller {
	m.mu.Lock()
	defer m.mu.Unlock()
	ids := make([]int64, 0, len(m.pending))
	for id, p := range m.pending {
		if p.caller != nil {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	out := make([]caller, len(ids))
	for i, id := range ids {
		out[i] = m.pending[id].caller
	}
	return out
}

// forget removes a pending request and reports whether it was still pending.
func (m *mux) forget(id int64) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.pending[id]
	delete(m.pending, id)
	return ok
}

// cancel tells the server to stop working on request id. It never blocks:
// the queue has room for one cancellation per request in flight, and when it
// is full anyway the server is not reading its stdin at all.
func (m *mux) cancel(id int64, why error) {
	reason := "cancelled"
	if errors.Is(why, context.DeadlineExceeded) {
		reason = "timed out in corral"
	}
	params, _ := json.Marshal(struct {
		RequestID int64  `json:"requestId"`
		Reason    string `json:"reason"`
	}{id, reason})
	line, _ := encodeNotification("notifications/cancelled", params)
	if m.put(context.Background(), line, false) == errOutboxFull {
		m.log.Warn("stdin queue full; dropping cancellation", "id", id)
	}
}

// Notify sends a notification to the server. It blocks until the notification
// is queued, ctx ends, or the mux closes.
func (m *mux) Notify(ctx context.Context, method string, params json.RawMessage) error {
	line, err := encodeNotification(method, params)
	if err != nil {
		return err
	}
	return m.put(ctx, line, true)
}

// ask records o, a request of the server's passed on to a client, until it
// is settled. It fails when max are already waiting (maxServerRequests), or
// one with the same ID is (the specification forbids reusing an ID).
func (m *mux) ask(o asked, max int) *wireError {
	key := string(o.serverID())
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case m.asked[key] != nil:
		return &wireError{Code: codeInvalidRequest, Message: fmt.Sprintf("a request of server %q with id %s already waits for the client's answer; IDs must not be reused", m.name, truncate(o.serverID(), 50))}
	case len(m.asked) >= max:
		return unavailable("server %q has %d requests waiting for clients' answers, the limit (maxServerRequests); corral refuses more until some are answered", m.name, len(m.asked))
	}
	m.asked[key] = o
	return nil
}

// settle forgets o, a request recorded by ask, and reports whether it was
// still waiting: only the caller that settles it answers the server.
func (m *mux) settle(o asked) bool {
	key := string(o.serverID())
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.asked[key] != o {
		return false
	}
	delete(m.asked, key)
	return true
}

// askedAs returns the server's request recorded under its ID id, or nil.
func (m *mux) askedAs(id json.RawMessage) asked {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.asked[string(id)]
}

// waiting returns the number of the server's requests waiting for a
// client's answer.
func (m *mux) waiting() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.asked)
}

// inFlight returns the number of requests waiting for an answer.
func (m *mux) inFlight() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.pending)
}

// readLoop reads the server's messages from c until the connection is over,
// and returns the error that ended it. Answers go to their callers;
// messages that are not JSON-RPC are logged and skipped; a message over the
// connection's size limit fails the one request it answers. readLoop does
// not close the mux: the owner does, once it knows why the server went away.
func (m *mux) readLoop(c msgConn) error {
	for {
		line, err := c.ReadMessage()
		m.lastRead.Store(time.Now().UnixNano())
		if err != nil {
			// Only here: tooLong escapes to the heap, and a line read
			// well should not pay for it.
			var tooLong *lineTooLongError
			if errors.As(err, &tooLong) {
				m.failTooLong(tooLong)
				continue
			}
			return err
		}
		m.dispatch(line)
	}
}

// dispatch routes one line from the server.
func (m *mux) dispatch(line []byte) {
	if !utf8.Valid(line) {
		// Clients may reject a message that is not UTF-8; pass it on repaired.
		m.warn("a line on stdout is not valid UTF-8; invalid bytes are replaced with U+FFFD")
		line = bytes.ToValidUTF8(line, []byte("\uFFFD"))
	}
	msg, err := decodeServerLine(line)
	if err != nil {
		m.warn("skipping a line on stdout that is not JSON-RPC", "line", truncate(line, 200), "err", err)
		m.failUndecodable(line, err)
		return
	}
	switch {
	case msg.Method == "ping" && msg.ID != nil:
		// corral answers ping itself, as the specification requires of every peer.
		m.answer(msg.ID, resultReply(msg.ID, json.RawMessage("{}")))
	case msg.Method != "" && msg.ID != nil:
		if m.onRequest == nil {
			m.answer(msg.ID, errorReply(msg.ID, &wireError{Code: codeMethodNotFound,
				Message: fmt.Sprintf("corral does not pass %s from servers to clients", msg.Method)}))
			return
		}
		m.onRequest(msg)
	case msg.Method == "notifications/progress":
		m.progress(msg)
	case msg.Method != "":
		ok, dropped := m.notes.allow(time.Now())
		if dropped > 0 {
			m.log.Warn("dropped notifications: the server sent more than maxNotificationsPerSecond", "dropped", dropped, "limit", m.notes.limit)
		}
		if ok && m.onNotify != nil {
			m.onNotify(msg)
		}
	case msg.ID != nil && (msg.Result != nil || msg.Error != nil):
		m.deliver(msg)
	default:
		m.warn("skipping a message that is neither a request, a notification nor an answer", "line", truncate(line, 200))
	}
}

// deliver hands an answer to the caller waiting for it.
func (m *mux) deliver(msg *wireMsg) {
	id, isInt := sentID(msg.ID)
	m.mu.Lock()
	pc, ok := m.pending[id]
	delete(m.pending, id)
	if ok {
		pc.answer <- msg // buffered, and the only send: never blocks
	}
	m.mu.Unlock()
	switch {
	case ok:
	case !isInt || id <= 0 || id > m.nextID.Load():
		m.warn("dropping an answer with an ID corral never sent", "id", truncate(msg.ID, 50))
	default:
		// A late answer to a request that timed out or was cancelled, or a
		// second answer to one.
		m.log.Debug("dropping an answer to a request that is no longer pending", "id", id)
	}
}

// failUndecodable fails the request a line that could not be decoded
// seems to answer, found by its "id", rather than leave its caller waiting
// for its deadline. A line with a "method" may be a request of the server's,
// whose ID is the server's own, and is left alone.
func (m *mux) failUndecodable(line []byte, why error) {
	if bytes.Contains(line, []byte(`"method"`)) {
		return
	}
	var sc idScanner
	sc.feed(line)
	id, err := strconv.ParseInt(string(sc.id()), 10, 64)
	if err != nil {
		return
	}
	m.mu.Lock()
	pc, ok := m.pending[id]
	delete(m.pending, id)
	if ok {
		pc.answer <- &wireMsg{ID: sc.id(), Error: &wireError{Code: codeInternalError,
			Message: fmt.Sprintf("server %q answered with a message that is not valid JSON-RPC (%v)", m.name, why)}}
	}
	m.mu.Unlock()
}

// failTooLong fails the request that a line over the limit answered.
func (m *mux) failTooLong(e *lineTooLongError) {
	id, err := strconv.ParseInt(string(e.id), 10, 64)
	m.mu.Lock()
	pc, ok := m.pending[id]
	delete(m.pending, id)
	if ok && err == nil {
		pc.answer <- &wireMsg{ID: e.id, Error: &wireError{Code: codeInternalError,
			Message: fmt.Sprintf("server %q answered with a %s", m.name, e.Error())}}
	}
	m.mu.Unlock()
	m.log.Warn("skipped a line over the size limit", "bytes", e.size, "max", e.max, "id", string(e.id))
}

// answer sends r, the answer to the server's request id, to the server. It
// never blocks: when the queue is full the server is not reading its stdin.
func (m *mux) answer(id json.RawMessage, r *reply) {
	var line bytes.Buffer
	r.WriteTo(&line)
	line.WriteByte('\n')
	if m.put(context.Background(), line.Bytes(), false) == errOutboxFull {
		m.warn("stdin queue full; dropping an answer to the server's request", "id", truncate(id, 50))
	}
}

// notifyNow sends a notification to the server if the queue has room.
func (m *mux) notifyNow(method string, params json.RawMessage) {
	line, err := encodeNotification(method, params)
	if err != nil {
		return
	}
	if m.put(context.Background(), line, false) == errOutboxFull {
		m.log.Warn("stdin queue full; dropping a notification to the server", "method", method)
	}
}

// progress passes a progress notification on to the client whose request it
// is about, with the client's own token, in the order the server sent them.
// Progress for a request no longer in flight is dropped.
func (m *mux) progress(msg *wireMsg) {
	var p struct {
		Token json.RawMessage `json:"progressToken"`
	}
	json.Unmarshal(msg.Params, &p)
	id, err := strconv.ParseInt(string(p.Token), 10, 64)
	m.mu.Lock()
	var c caller
	if pc := m.pending[id]; err == nil && pc != nil {
		c = pc.caller
	}
	m.mu.Unlock()
	var token json.RawMessage
	if c != nil {
		token = c.progressToken()
	}
	if token == nil {
		m.log.Debug("dropping progress for a request not in flight", "progressToken", truncate(p.Token, 50))
		return
	}
	params := setMember(msg.Params, metaProgressToken, token)
	note, _ := encodeNotification("notifications/progress", params)
	c.send(note[:len(note)-1])
}

// close retires every pending request with err and stops the mux. Only the
// first call has an effect.
func (m *mux) close(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.err != nil {
		return
	}
	m.err = err
	clear(m.pending)
	close(m.done)
	if n := m.logs.flush(); n > 0 {
		m.log.Warn("log lines about the server were dropped", "count", n)
	}
}
