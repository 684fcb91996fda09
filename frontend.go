package main

// This file holds what every front end does with a client's messages,
// written once: decode a message, find its era, hand it to the gateway, hold
// its answer until the transport has written it, drain the calls in flight,
// end. A front end implements only framing: how it reads a message and how it
// writes one.
//
// Two shapes of transport use these steps:
//
//   - A stream of messages each way, whose answers come back on one stream in
//     any order: -stdio (stdiofront.go) and legacy HTTP+SSE (ssefront.go).
//     Such a transport implements outlet, the writing side, and hands each
//     message it reads to a sessionLoop, which serves the session's calls.
//   - A request whose answer is its own response: Streamable HTTP (http.go).
//     It takes the same steps one request at a time: decodeClientMessage,
//     Gateway.handle, frontEnd.hold and frontEnd.written.
//
// A new transport of the first shape implements outlet and a reader; of the
// second, the framing of one request and its response.

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"sync"
)

// frontEnd is what every front end holds: the gateway it serves and the
// log. The front ends embed it.
type frontEnd struct {
	gw  *Gateway
	log *slog.Logger
}

// decodeClientMessage decodes one message a client sent, or returns the
// error answer to send back, under the message's id when one could be read.
func decodeClientMessage(data []byte) (*wireMsg, *reply) {
	msg, werr := decodeMessage(data)
	if werr == nil {
		return msg, nil
	}
	var id json.RawMessage
	if msg != nil {
		id = msg.ID
	}
	return nil, errorReply(id, werr)
}

// hold holds a, the answer to the request id of session s, until its
// transport has written it (see sessionSet.holdAnswer), and returns what to
// write and the bytes to release with written. sid names the session in the
// log ("" for a modern request, which has none). It is safe for concurrent
// use.
func (fe frontEnd) hold(s *session, sid string, id json.RawMessage, a *reply) (*reply, int64) {
	held, n, refused := fe.gw.sessions.holdAnswer(s, id, a)
	if refused != "" {
		fe.log.Warn("dropped an answer: the answers waiting for clients that do not read them are at a bound", "session", sid, "client", s.who.name, "bytes", a.len(), "limit", refused)
	}
	return held, n
}

// written releases the n bytes held for an answer of session s (see hold)
// once its transport has written it, of size bytes, or failed with err. A
// write that failed is logged: the client did not take it within
// writeTimeout, or went away. It is safe for concurrent use.
func (fe frontEnd) written(s *session, sid string, n int64, size int, err error) {
	if n > 0 {
		fe.gw.sessions.releaseAnswer(s, n)
	}
	switch {
	case err == nil:
	case errors.Is(err, os.ErrDeadlineExceeded):
		fe.log.Warn("a client did not read its answer within writeTimeout: its connection is closed and the answer dropped", "session", sid, "client", s.who.name, "bytes", size, "writeTimeout", fe.gw.config().WriteTimeout.D())
	default:
		fe.log.Debug("writing an answer failed: the client went away", "session", sid, "client", s.who.name, "bytes", size, "err", err)
	}
}

// outlet is the writing side of a transport that carries a session's
// messages on one stream (see sessionLoop): the framing it implements.
type outlet interface {
	// put passes m to be written to the client. When n is above zero, m is
	// an answer held for n bytes (frontEnd.hold), and the outlet calls
	// sessionLoop.written once m is written or dropped. put may block while
	// the transport is behind; it is called concurrently.
	put(m *reply, n int64)
}

// sessionLoop serves one session over a transport that carries its
// messages on one stream each way: each message the transport reads goes
// to dispatch (or serveBatch); each request runs in a goroutine of its own,
// which the loop owns, and its answer goes to the outlet, held until
// written. close and end drain and end the calls. Its methods are safe for
// concurrent use.
type sessionLoop struct {
	frontEnd
	s      *session
	name   string // names the session in the log
	out    outlet
	modern bool // the transport carries 2026-07-28 requests (-stdio), not only legacy ones

	ctx    context.Context // every call's context: cancelled by end
	cancel context.CancelFunc
	calls  sync.WaitGroup // the calls in flight; Add only under mu, while !closed

	mu     sync.Mutex
	closed bool // no more calls: the session is ending or corral stopping
}

// newSessionLoop returns the loop that serves session s, named name in the
// log, whose messages out writes. Modern says the transport carries
// 2026-07-28 requests, whose own params say their era.
func newSessionLoop(fe frontEnd, s *session, name string, out outlet, modern bool) *sessionLoop {
	l := &sessionLoop{frontEnd: fe, s: s, name: name, out: out, modern: modern}
	l.ctx, l.cancel = context.WithCancel(context.Background())
	return l
}

// startCall reports whether a call may start, and counts it if so: false
// once close has been called.
func (l *sessionLoop) startCall() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	l.calls.Add(1)
	return true
}

// dispatch hands msg, a message the client sent, to the gateway: a
// notification or an answer to a server's request at once; a request in a
// goroutine of its own, joined by close, whose answer goes to the outlet.
// It reports false, and does nothing with a request, once close has been
// called.
func (l *sessionLoop) dispatch(msg *wireMsg) bool {
	if msg.ID == nil || msg.Method == "" {
		l.gw.handle(l.ctx, l.s, legacyInbound(msg), nil)
		return true
	}
	if !l.startCall() {
		return false
	}
	go func() {
		defer l.calls.Done()
		in, werr := legacyInbound(msg), (*wireError)(nil)
		if l.modern {
			in, werr = inboundOf(msg) // the request's era, from its params
		}
		if werr != nil {
			l.out.put(errorReply(msg.ID, werr), 0)
			return
		}
		if a := l.gw.handle(l.ctx, l.s, in, nil); a != nil {
			l.answer(msg.ID, a)
		}
	}()
	return true
}

// serveBatch serves a batch the client sent, if its session negotiated
// 2025-03-26: the notifications and answers at once, the requests
// concurrently, and their answers as one message, a JSON array, when the
// last is ready (none if there is none to send). Anything else gets the
// error that says why, returned to be sent back at once.
func (l *sessionLoop) serveBatch(data []byte) *reply {
	version := l.s.version()
	if version != batchVersion {
		return errorReply(nil, batchRefusal(version))
	}
	msgs, werr := splitBatch(data, l.gw.config().MaxInFlightPerSession)
	if werr != nil {
		return errorReply(nil, werr)
	}
	if !l.startCall() {
		return nil
	}
	var answers []*reply
	wait := startBatch(l.ctx, l.gw, l.s, decodeBatchItems(msgs), nil, func(a *reply) { answers = append(answers, a) })
	go func() {
		defer l.calls.Done()
		wait()
		if len(answers) > 0 {
			l.answer(nil, batchReply(answers))
		}
	}()
	return nil
}

// answer holds a, the answer to the request id, and passes it to the
// outlet.
func (l *sessionLoop) answer(id json.RawMessage, a *reply) {
	held, n := l.hold(l.s, l.name, id, a)
	l.out.put(held, n)
}

// written releases the n bytes held for an answer the outlet has written,
// of size bytes, or failed to write with err.
func (l *sessionLoop) written(n int64, size int, err error) {
	l.frontEnd.written(l.s, l.name, n, size, err)
}

// close refuses calls from now on, and returns a channel closed once the
// calls in flight have returned. It may be called more than once.
func (l *sessionLoop) close() <-chan struct{} {
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	idle := make(chan struct{})
	go func() { l.calls.Wait(); close(idle) }() // ends with the last call, which end waits for
	return idle
}

// end cancels the calls in flight, refuses new ones, and returns once every
// call has. The transport ends the session itself, before or after.
func (l *sessionLoop) end() {
	l.cancel()
	<-l.close()
}
