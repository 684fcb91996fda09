package main

// This file holds JSON-RPC batches, which MCP 2025-03-26 requires a server to
// accept and 2025-06-18 removed: a client's JSON array of messages, served in
// a session that negotiated 2025-03-26 by either front end (HTTP and stdio),
// and refused in any other with the error that says why. Like the front
// ends, it calls down into the gateway only.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
)

// batchVersion is the one protocol version with JSON-RPC batches.
const batchVersion = "2025-03-26"

// isBatch reports whether data, what a client sent as one message, is a JSON
// array: a batch.
func isBatch(data []byte) bool {
	i := skipSpace(data, 0)
	return i < len(data) && data[i] == '['
}

// batchRefusal returns the error that refuses a batch in a session that
// negotiated version ("" before initialize).
func batchRefusal(version string) *wireError {
	why := "this session has not been initialized"
	if version != "" {
		why = "this session negotiated " + version
	}
	return &wireError{Code: codeInvalidRequest, Message: fmt.Sprintf(
		"JSON-RPC batches are not supported (MCP removed them in 2025-06-18) but in a session of %s, and %s; send one message at a time", batchVersion, why)}
}

// splitBatch returns the messages of batch, a JSON array, without decoding
// them, or the error that answers the whole batch: not JSON (-32700), empty,
// or more than max messages (-32600). It counts before it keeps anything,
// so a batch of many tiny messages costs no more memory than max of them.
func splitBatch(data []byte, max int) ([]json.RawMessage, *wireError) {
	if !json.Valid(data) {
		return nil, &wireError{Code: codeParseError, Message: "invalid JSON: the batch is not a valid JSON array"}
	}
	var msgs []json.RawMessage
	i := skipSpace(data, 0) + 1 // past '['
	for {
		i = skipSpace(data, i)
		if data[i] == ']' {
			break
		}
		if len(msgs) == max {
			return nil, &wireError{Code: codeInvalidRequest, Message: fmt.Sprintf("a batch holds at most %d messages (maxInFlightPerSession); send the rest in another", max)}
		}
		start := i
		i = skipValue(data, i)
		msgs = append(msgs, json.RawMessage(data[start:i]))
		if i = skipSpace(data, i); data[i] == ',' {
			i++
		}
	}
	if len(msgs) == 0 {
		return nil, &wireError{Code: codeInvalidRequest, Message: "an empty batch: a batch holds at least one message"}
	}
	return msgs, nil
}

// batchItem is one message of a batch: the message, or the error that
// answers it (with its ID when it could be read).
type batchItem struct {
	msg  *wireMsg
	werr *wireError
}

// isRequest reports whether the item is answered: a request, or a message
// refused with an error.
func (it batchItem) isRequest() bool {
	return it.werr != nil || it.msg.ID != nil && it.msg.Method != ""
}

// decodeBatchItems decodes each message of a batch. Messages a batch may not
// hold get an error: initialize (MCP 2025-03-26 forbids it in a batch) and
// 2026-07-28 requests, whose era has no batches.
func decodeBatchItems(msgs []json.RawMessage) []batchItem {
	items := make([]batchItem, len(msgs))
	for i, raw := range msgs {
		msg, werr := decodeMessage(raw)
		switch {
		case werr != nil:
		case msg.Method == "initialize":
			werr = &wireError{Code: codeInvalidRequest, Message: "initialize must not be part of a JSON-RPC batch; send it alone"}
		case msg.Method != "" && metaVersionOf(msg.Params) != "":
			werr = &wireError{Code: codeInvalidRequest, Message: fmt.Sprintf("a %s message must not be part of a JSON-RPC batch (that era has none); send it alone", modernVersion)}
		}
		if werr != nil && msg == nil {
			msg = &wireMsg{}
		}
		items[i] = batchItem{msg: msg, werr: werr}
	}
	return items
}

// startBatch serves the items of a batch of session s: the notifications
// and answers at once, in order, before it returns; the requests each in a
// goroutine of its own, as if sent one by one, their messages related to
// them going to send (nil: the session's own). Each answer goes to answer,
// one call at a time, in the order they are ready; a request the client
// cancelled gets none. The returned wait blocks until every request has
// been answered; the caller must call it once.
func startBatch(ctx context.Context, gw *Gateway, s *session, items []batchItem, send func([]byte), answer func(*reply)) (wait func()) {
	var mu sync.Mutex
	give := func(r *reply) {
		if r != nil {
			mu.Lock()
			defer mu.Unlock()
			answer(r)
		}
	}
	var wg sync.WaitGroup
	for _, it := range items {
		switch {
		case it.werr != nil:
			give(errorReply(it.msg.ID, it.werr))
		case !it.isRequest():
			gw.handle(ctx, s, legacyInbound(it.msg), nil)
		default:
			wg.Add(1)
			go func() {
				defer wg.Done()
				give(gw.handle(ctx, s, legacyInbound(it.msg), send))
			}()
		}
	}
	return wg.Wait
}

// answersAny reports whether any item of a batch is answered.
func answersAny(items []batchItem) bool {
	for _, it := range items {
		if it.isRequest() {
			return true
		}
	}
	return false
}

// batchReply returns the answers to a batch as one message: a JSON array.
func batchReply(answers []*reply) *reply {
	var b bytes.Buffer
	b.WriteByte('[')
	for i, a := range answers {
		if i > 0 {
			b.WriteByte(',')
		}
		a.WriteTo(&b)
	}
	b.WriteByte(']')
	return &reply{head: b.Bytes()}
}

// serveBatch serves a batch POSTed in the session its Mcp-Session-Id names,
// if that session negotiated 2025-03-26, as that version's specification
// says: 202 Accepted for a batch of notifications and answers only; else,
// for a client that accepts an event stream, a stream carrying the messages
// related to the requests and each answer as it is ready, or a JSON array
// of the answers. Anything else gets the error that says why.
func (h *httpFrontEnd) serveBatch(w http.ResponseWriter, r *http.Request, body []byte) {
	s := h.lookupSession(w, r)
	if s == nil {
		return
	}
	version := s.version()
	if version != batchVersion {
		writeJSONError(w, nil, batchRefusal(version))
		return
	}
	if v := strings.TrimSpace(r.Header.Get(versionHeader)); v != "" && v != batchVersion {
		writeJSONError(w, nil, &wireError{Code: codeInvalidRequest, Message: fmt.Sprintf(
			"the MCP-Protocol-Version header says %s, and this session negotiated %s; send the session's version", v, batchVersion)})
		return
	}
	msgs, werr := splitBatch(body, h.gw.config().MaxInFlightPerSession)
	if werr != nil {
		writeJSONError(w, nil, werr)
		return
	}
	items := decodeBatchItems(msgs)
	if !answersAny(items) {
		startBatch(r.Context(), h.gw, s.session, items, nil, func(*reply) {})()
		w.WriteHeader(http.StatusAccepted)
		return
	}
	if strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
		h.streamBatch(w, r, s, items)
		return
	}
	var answers []*reply
	startBatch(r.Context(), h.gw, s.session, items, nil, func(a *reply) { answers = append(answers, a) })()
	if len(answers) == 0 {
		w.WriteHeader(http.StatusAccepted) // every request was cancelled: nothing to answer
		return
	}
	h.sendAnswer(w, s.session, s.id, nil, batchReply(answers), func(*reply) int { return http.StatusOK })
}

// streamBatch answers a batch's requests on an event stream: the messages
// related to them (dropped past relatedBuffer for a slow client, like a
// single request's), and each answer as it is ready (never dropped). The
// stream ends after the last answer.
func (h *httpFrontEnd) streamBatch(w http.ResponseWriter, r *http.Request, s *httpSession, items []batchItem) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	h.writeDeadline(rc)
	rc.Flush()
	out := make(chan *reply, relatedBuffer)
	wrote := make(chan struct{})
	go func() { // joined below, before the handler returns
		defer close(wrote)
		var err error
		for m := range out {
			if err != nil {
				continue // the client is gone or did not read in time: drain out
			}
			h.writeDeadline(rc)
			if _, err = writeSSEFrontReply(w, m); err == nil {
				err = rc.Flush()
			}
			if err != nil {
				h.written(s.session, s.id, 0, m.len(), err)
			}
		}
	}()
	var mu sync.Mutex
	open := true
	send := func(m []byte) {
		mu.Lock()
		defer mu.Unlock()
		if !open {
			s.send(m) // the batch has been answered: the session's own stream
			return
		}
		select {
		case out <- &reply{head: m}:
		default:
			h.log.Warn("dropping a message related to a batch: the client reads too slowly")
		}
	}
	startBatch(r.Context(), h.gw, s.session, items, send, func(a *reply) { out <- a })()
	mu.Lock()
	open = false
	mu.Unlock()
	close(out)
	<-wrote
}
