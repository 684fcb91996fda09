package main

// This file holds the legacy HTTP+SSE front end: the transport of MCP
// 2024-11-05, which many deployed clients and bridges still speak. GET /sse
// opens an event stream whose first event, "endpoint", names the URL the
// client POSTs its messages to (/messages?sessionId=ID); each POST gets 202
// Accepted, and every answer, notification and server's request comes on
// the stream. It is served by http.go's front end, on the same listener and
// behind the same Origin, Host and bearer checks; each stream is one of its
// sessions (an httpSession with sse set), under the same limits
// (maxSessions, maxStreams, maxRequestBytes, maxInFlightPerSession), and
// the stream closing ends it as DELETE ends a Streamable HTTP session.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"
)

// The paths of the legacy HTTP+SSE transport.
const (
	sseFrontPath         = "/sse"
	sseFrontMessagesPath = "/messages"
)

// defaultSSEFrontQueueBytes bounds the messages waiting to be written on one
// legacy SSE stream (see sseFrontQueue.push).
const defaultSSEFrontQueueBytes = 16 << 20

// sseFrontMessageOverhead is what one queued message is counted for besides its
// bytes, so that a flood of small messages is bounded too.
const sseFrontMessageOverhead = 64

// sseFrontQueue is the outlet of a legacy SSE session (see sessionLoop):
// the queue of messages for its stream, which the stream's handler writes.
// Its session's sessionLoop serves the calls, each in a goroutine of its
// own that the handler joins. Its methods are safe for concurrent use.
type sseFrontQueue struct {
	loop *sessionLoop // releases the answers held; set once, before the first put

	mu       sync.Mutex
	queue    []queued // for the stream, oldest first
	bytes    int64    // the size of queue, with sseFrontMessageOverhead each
	max      int64    // the most bytes queue may hold
	overflow bool     // the queue went over max: the session ends

	ready chan struct{} // holds a token while queue is not empty
	full  chan struct{} // closed when the queue goes over max
}

// queued is one message in an sseFrontQueue: an answer held for n bytes
// (frontEnd.hold), or a message that is not (n is 0).
type queued struct {
	m *reply
	n int64
}

// newSSEFrontQueue returns an empty queue that holds at most max bytes. With
// the batch its stream is writing (see take), a session holds at most twice
// that.
func newSSEFrontQueue(max int64) *sseFrontQueue {
	return &sseFrontQueue{max: max, ready: make(chan struct{}, 1), full: make(chan struct{})}
}

// put queues m for the stream (outlet). It never blocks: when the queue
// would go over its bound (a client that reads too slowly), the queue is
// emptied and full closed, which ends the session; a message alone in the
// queue is always taken, whatever its size. After that, put drops what it is
// given. An answer dropped is released at once.
func (q *sseFrontQueue) put(m *reply, n int64) {
	for _, d := range q.push(queued{m, n}) {
		q.release(d, nil)
	}
}

// push queues e, or returns what the queue dropped (see put).
func (q *sseFrontQueue) push(e queued) (dropped []queued) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.overflow {
		return []queued{e}
	}
	n := int64(e.m.len()) + sseFrontMessageOverhead
	if len(q.queue) > 0 && q.bytes+n > q.max {
		q.overflow = true
		dropped = append(q.queue, e)
		q.queue, q.bytes = nil, 0
		close(q.full)
		return dropped
	}
	q.queue = append(q.queue, e)
	q.bytes += n
	select {
	case q.ready <- struct{}{}:
	default:
	}
	return nil
}

// release releases what e holds, once it is written or dropped (err says
// why a write failed).
func (q *sseFrontQueue) release(e queued, err error) {
	if e.n > 0 {
		q.loop.written(e.n, e.m.len(), err)
	}
}

// overflowed reports whether the queue went over its bound.
func (q *sseFrontQueue) overflowed() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.overflow
}

// take returns the messages queued so far, for the stream to write, and
// empties the queue: what is being written no longer counts toward max.
// Each must be released (see release) once written or dropped.
func (q *sseFrontQueue) take() []queued {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := q.queue
	q.queue, q.bytes = nil, 0
	return out
}

// serveLegacySSE serves the paths of the legacy HTTP+SSE transport, once
// ServeHTTP has checked the request's Origin, Host and bearer token.
func (h *httpFrontEnd) serveLegacySSE(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == sseFrontPath {
		h.serveSSEFront(w, r)
		return
	}
	h.serveSSEFrontMessage(w, r)
}

// serveSSEFront serves GET /sse: it opens a legacy SSE session and streams its
// messages until the client goes away, it reads too slowly, or corral shuts
// down; then it ends the session, and returns once its calls have.
func (h *httpFrontEnd) serveSSEFront(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", "GET")
		writeHTTPError(w, http.StatusMethodNotAllowed, codeInvalidRequest, r.Method+" is not supported on "+sseFrontPath+"; GET opens a legacy SSE session, whose messages are POSTed to the URL of its endpoint event")
		return
	}
	if h.refuseWhileDraining(w, "GET "+sseFrontPath) {
		return
	}
	if max := h.gw.config().MaxStreams; h.streams.Load() >= int64(max) {
		writeHTTPError(w, http.StatusServiceUnavailable, codeUnavailable, fmt.Sprintf("too many event streams: %d are open, the limit (maxStreams)", max))
		return
	}
	s, why := h.newSSEFrontSession(h.principalOf(r))
	if s == nil {
		writeHTTPError(w, http.StatusServiceUnavailable, codeUnavailable, why+"; close a stream, or try again later")
		return
	}
	h.streams.Add(1)
	defer h.streams.Add(-1)
	defer s.streams.Add(-1) // counted by newSSEFrontSession, so that it is never idle while open
	idle, why := h.pumpSSEFront(w, r, s)
	if level := slog.LevelInfo; why != "" {
		if s.sse.overflowed() || strings.Contains(why, "writeTimeout") { // the client stopped reading
			level = slog.LevelWarn
		}
		h.log.Log(context.Background(), level, "legacy SSE session ended: "+why, "session", s.id, "client", s.who.name)
	}
	h.endSession(s)
	s.loop.cancel()
	if idle == nil {
		idle = s.loop.close()
	}
	<-idle
	for _, e := range s.sse.take() { // the calls have returned: no answer comes after these
		s.sse.release(e, nil)
	}
}

// newSSEFrontSession opens a legacy SSE session of who's, or returns nil
// and why not when maxSessions are open, or its client's (addSession). Its
// stream is counted open: serveSSEFront uncounts it.
func (h *httpFrontEnd) newSSEFrontSession(who principal) (*httpSession, string) {
	max := h.sseQueueBytes.Load()
	if max <= 0 {
		max = defaultSSEFrontQueueBytes
	}
	s := &httpSession{sse: newSSEFrontQueue(max)}
	s.streams.Add(1)
	if _, why := h.addSession(s, who, func(msg []byte) { s.sse.put(&reply{head: msg}, 0) }); why != "" {
		return nil, why
	}
	s.loop = newSessionLoop(h.frontEnd, s.session, s.id, s.sse, false)
	s.sse.loop = s.loop
	return s, ""
}

// pumpSSEFront writes the endpoint event, then the session's messages as
// they come (see writeSSEFrontQueue). A write blocked on a client that reads
// nothing is cut off when the queue overflows. It returns why the stream
// ended when the log should say, and the channel closed when the calls have
// returned, if it asked for one.
func (h *httpFrontEnd) pumpSSEFront(w http.ResponseWriter, r *http.Request, s *httpSession) (idle <-chan struct{}, why string) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	h.writeDeadline(rc)
	if _, err := fmt.Fprintf(w, "event: endpoint\ndata: %s?sessionId=%s\n\n", sseFrontMessagesPath, s.id); err != nil {
		return nil, "the client closed the stream: " + err.Error()
	}
	rc.Flush()
	done, cut := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(cut)
		select {
		case <-s.sse.full:
			rc.SetWriteDeadline(time.Now()) // fails the write under way, if any
		case <-done:
		}
	}()
	defer func() { close(done); <-cut }()
	return h.writeSSEFrontQueue(w, r, s, rc)
}

// writeSSEFrontQueue writes the session's messages as they come, and a
// heartbeat every heartbeatInterval, until the
// client goes away (the stream's context ends or a write fails), the queue
// overflows, the session ends, or, once corral shuts down, the calls in
// flight have returned. Its results are pumpSSEFront's.
func (h *httpFrontEnd) writeSSEFrontQueue(w http.ResponseWriter, r *http.Request, s *httpSession, rc *http.ResponseController) (idle <-chan struct{}, why string) {
	q := s.sse
	closing := h.closing
	gone := s.session.goneChan()
	drained := false // the calls have returned: write what is left, then end
	beat, stop := h.heartbeats()
	defer stop()
	for {
		for es := q.take(); len(es) > 0; es = es[1:] {
			h.writeDeadline(rc)
			if q.overflowed() { // pumpSSEFront's cut must not be undone
				releaseAll(q, es, nil)
				return idle, fmt.Sprintf("the client reads too slowly: over %d bytes of messages waited to be written on its stream", q.max)
			}
			if _, err := writeSSEFrontReply(w, es[0].m); err != nil {
				releaseAll(q, es, err)
				return idle, h.writeFailure(q, err)
			}
			q.release(es[0], nil)
		}
		if err := rc.Flush(); err != nil {
			return idle, h.writeFailure(q, err)
		}
		if drained {
			return idle, "corral is shutting down"
		}
		select {
		case <-q.ready:
		case <-beat:
			h.writeDeadline(rc)
			if _, err := io.WriteString(w, heartbeat); err != nil {
				return idle, h.writeFailure(q, err)
			}
		case <-q.full:
			return idle, fmt.Sprintf("the client reads too slowly: over %d bytes of messages waited to be written on its stream", q.max)
		case <-s.ended:
			return idle, ""
		case <-gone:
			return idle, "its client was removed from the config"
		case <-r.Context().Done():
			return idle, "the client closed the stream"
		case <-closing:
			// Calls in flight may finish within shutdownTimeout, their
			// answers written; then the stream ends.
			closing, idle = nil, s.loop.close()
		case <-idle:
			drained = true
		}
	}
}

// releaseAll releases the messages es, which the stream will not write: its
// first failed with err.
func releaseAll(q *sseFrontQueue, es []queued, err error) {
	for _, e := range es {
		q.release(e, err)
		err = nil
	}
}

// writeFailure says why a write to a legacy SSE stream failed with err, for
// the log.
func (h *httpFrontEnd) writeFailure(q *sseFrontQueue, err error) string {
	switch {
	case q.overflowed():
		return fmt.Sprintf("the client reads too slowly: over %d bytes of messages waited to be written on its stream", q.max)
	case errors.Is(err, os.ErrDeadlineExceeded):
		return fmt.Sprintf("the client did not read a message within writeTimeout (%v)", h.gw.config().WriteTimeout.D())
	}
	return "the client closed the stream: " + err.Error()
}

// writeSSEFrontReply writes one message as a server-sent event.
func writeSSEFrontReply(w io.Writer, m *reply) (int64, error) {
	n, err := io.WriteString(w, "event: message\ndata: ")
	if err != nil {
		return int64(n), err
	}
	k, err := m.WriteTo(w)
	if err != nil {
		return int64(n) + k, err
	}
	j, err := io.WriteString(w, "\n\n")
	return int64(n+j) + k, err
}

// serveSSEFrontMessage serves POST /messages?sessionId=ID: one message of a
// legacy SSE session. A well-formed message gets 202 Accepted; a request's
// answer comes on the session's stream.
func (h *httpFrontEnd) serveSSEFrontMessage(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		writeHTTPError(w, http.StatusMethodNotAllowed, codeInvalidRequest, r.Method+" is not supported on "+sseFrontMessagesPath+"; POST a message of a legacy SSE session there")
		return
	}
	id := r.URL.Query().Get("sessionId")
	if id == "" {
		writeHTTPError(w, http.StatusBadRequest, codeInvalidRequest, "missing sessionId in the query; open a stream with GET "+sseFrontPath+" and POST to the URL its endpoint event names")
		return
	}
	body, ok := h.readBody(w, r)
	if !ok {
		return
	}
	s := h.session(id)
	if s == nil {
		if why := h.wrongReplica(id, "sessionId query parameter"); why != "" {
			writeHTTPError(w, http.StatusNotFound, codeInvalidRequest, why)
			return
		}
	}
	if s == nil || s.sse == nil || !h.owns(r, s) {
		writeHTTPError(w, http.StatusNotFound, codeInvalidRequest, "unknown or ended session; open a new one with GET "+sseFrontPath)
		return
	}
	s.lastUsed.Store(time.Now().UnixNano())
	msg, refused := decodeClientMessage(body)
	if refused != nil {
		writeAnswer(w, http.StatusBadRequest, refused)
		return
	}
	if !checkLegacyVersion(w, r, msg) {
		return
	}
	if msg.ID != nil && msg.Method != "" {
		select {
		case <-h.closing:
			writeHTTPError(w, http.StatusServiceUnavailable, codeUnavailable, "corral is shutting down; calls in flight finish, new ones are refused")
			return
		default:
		}
	}
	if !s.loop.dispatch(msg) {
		writeHTTPError(w, http.StatusNotFound, codeInvalidRequest, "the session has ended; open a new one with GET "+sseFrontPath)
		return
	}
	w.WriteHeader(http.StatusAccepted)
}
