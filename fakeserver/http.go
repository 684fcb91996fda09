//go:build linux || darwin

package main

// # HTTP
//
// With -http ADDR or -sse ADDR the server serves MCP over HTTP instead of
// stdio, so that a gateway can have it as a remote server. Standard input is
// not read. It first writes the URL it serves at, and a newline, on standard
// output (so that with ADDR 127.0.0.1:0 the caller learns the port), then
// serves until its lifetime, a signal or the crash tool ends the process.
//
// Each session is served by a server of its own, as a stdio process serves
// its one client: everything above (tools, resources, requests to the
// client, notifications, the -crash-after count) holds for each session
// apart, except the process-wide flags and state (-state, -lifetime,
// signals, the exit of the process by crash tools). Only the legacy era is
// served (initialize opens the session).
//
// With -http, Streamable HTTP (2025-11-25) at /mcp, stateful:
//
//	POST /mcp
//		A request: its answer is the response's body, one line of JSON with
//		Content-Type application/json (none with -no-content-type); the
//		server's other messages meanwhile go to the GET stream. initialize
//		(without Mcp-Session-Id) opens a session, whose ID the answer's
//		Mcp-Session-Id header carries. A notification or an answer: 202.
//		Without Mcp-Session-Id (but for initialize): 400 with a JSON-RPC
//		error; with an unknown one: 404; a body that is not one JSON-RPC
//		message (a batch included): 400 with error -32700.
//		With -conformance, a request whose client accepts text/event-stream
//		is answered with an event stream instead: the notifications/progress
//		of the request's progress token, then the answer, each a "message"
//		event, so that progress is never behind the answer.
//	GET /mcp
//		The session's stream (text/event-stream): the server's messages
//		that answer no POST, each a "message" event. Up to 256 messages
//		wait for it; more are dropped, which standard error says.
//	DELETE /mcp
//		Ends the session: 200.
//
// With -sse, the HTTP+SSE transport of 2024-11-05:
//
//	GET /sse
//		Opens a session and its event stream (text/event-stream), whose
//		first event is "endpoint", its data /messages?sessionId=ID; every
//		message of the server follows as a "message" event. Closing the
//		stream ends the session.
//	POST /messages?sessionId=ID
//		A message of the client: 202 "Accepted" once it has been handled as
//		a line of stdin would be (answers come on the stream). An unknown ID:
//		404.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
)

// httpMaxBody bounds the body of a POST.
const httpMaxBody = 64 << 20

// httpFront serves the process's HTTP sessions.
type httpFront struct {
	s *server // the process's own: its options, stdout and stderr

	mu       sync.Mutex
	sessions map[string]*httpSession // open sessions, by ID; a fake's are few
	last     int
}

// httpSession is one client's session, served by a server of its own
// whose output is routed to the session's streams.
type httpSession struct {
	id     string
	srv    *server
	sse    bool          // an HTTP+SSE session: every message goes to its stream
	stream chan []byte   // messages for the event stream (-sse) or the GET stream (-http)
	done   chan struct{} // closed when the session ends
	once   sync.Once

	readMu sync.Mutex // held while a message is handled, as stdio's one reader would

	mu       sync.Mutex
	waiting  map[string]chan []byte // POSTs waiting for the answer to a request, by compact ID
	progress map[string]chan []byte // with -conformance, the POSTs of those waiting, by compact progress token
}

// serveHTTP serves HTTP as -http or -sse says. It does not return.
func (s *server) serveHTTP() {
	addr, path := s.opts.httpAddr, "/mcp"
	if s.opts.sseAddr != "" {
		addr, path = s.opts.sseAddr, "/sse"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		s.logf("fakeserver: %v", err)
		s.exit(1, "listen failed")
	}
	f := &httpFront{s: s, sessions: make(map[string]*httpSession)}
	mux := http.NewServeMux()
	if s.opts.sseAddr != "" {
		mux.HandleFunc("GET /sse", f.sseStream)
		mux.HandleFunc("POST /messages", f.ssePost)
	} else {
		mux.HandleFunc("/mcp", f.streamable)
	}
	fmt.Fprintf(s.stdout, "http://%s%s\n", ln.Addr(), path)
	err = http.Serve(ln, mux)
	s.logf("fakeserver: serving HTTP: %v", err)
	s.exit(1, "listen failed")
}

// newSession opens a session.
func (f *httpFront) newSession(sse bool) *httpSession {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.last++
	h := &httpSession{
		id: fmt.Sprintf("fake-%d-%d", f.s.pid, f.last), sse: sse,
		stream: make(chan []byte, 256), done: make(chan struct{}),
		waiting: make(map[string]chan []byte), progress: make(map[string]chan []byte),
	}
	h.srv = newServer(f.s.opts, nil, nil, f.s.stderr)
	h.srv.output = sessionOutput{h}
	f.sessions[h.id] = h
	f.s.logf("fakeserver: session %s opened", h.id)
	return h
}

// session returns the open session id, or nil.
func (f *httpFront) session(id string) *httpSession {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.sessions[id]
}

// endSession ends h. Its requests still being handled are never answered.
func (f *httpFront) endSession(h *httpSession) {
	f.mu.Lock()
	delete(f.sessions, h.id)
	f.mu.Unlock()
	h.once.Do(func() { close(h.done) })
	f.s.logf("fakeserver: session %s ended", h.id)
}

// handle handles body, one message of the client, as a line of stdin.
func (h *httpSession) handle(body []byte) {
	h.readMu.Lock()
	defer h.readMu.Unlock()
	h.srv.handleLine(body)
}

// await returns the channel the answer to the request with compact ID id
// will be sent on; with a progress token (compact, or "" for none), its
// notifications/progress too.
func (h *httpSession) await(id, token string) chan []byte {
	ch := make(chan []byte, 1)
	h.mu.Lock()
	h.waiting[id] = ch
	if token != "" {
		ch = make(chan []byte, 64)
		h.waiting[id] = ch
		h.progress[token] = ch
	}
	h.mu.Unlock()
	return ch
}

// forget stops waiting for the answer to id and the progress of token.
func (h *httpSession) forget(id, token string) {
	h.mu.Lock()
	delete(h.waiting, id)
	delete(h.progress, token)
	h.mu.Unlock()
}

// progressToken returns the compact params._meta.progressToken of the
// message m, or "".
func progressToken(params json.RawMessage) string {
	var p struct {
		Meta struct {
			ProgressToken json.RawMessage `json:"progressToken"`
		} `json:"_meta"`
		ProgressToken json.RawMessage `json:"progressToken"` // of notifications/progress
	}
	decodeParams(params, &p) // none is as good as a bad one
	t := p.Meta.ProgressToken
	if t == nil {
		t = p.ProgressToken
	}
	if t := compact(t); t != nil && string(t) != "null" {
		return string(t)
	}
	return ""
}

// route sends line, one message of the server, where it goes: an answer
// to the POST waiting for it, anything else to the session's stream. An
// HTTP+SSE session's stream takes every message, as fast as it is read.
func (h *httpSession) route(line []byte) {
	if h.sse {
		select {
		case h.stream <- line:
		case <-h.done:
		}
		return
	}
	var m message
	if json.Unmarshal(line, &m) == nil && m.Method == "" && m.ID != nil {
		id := string(compact(m.ID))
		h.mu.Lock()
		ch := h.waiting[id]
		delete(h.waiting, id)
		h.mu.Unlock()
		if ch != nil {
			select {
			case ch <- line: // room for the one answer, or after up to 63 progress notifications
				return
			default:
				h.srv.logf("fakeserver: session %s: a POST's stream is full; its answer goes to the GET stream", h.id)
			}
		}
	}
	if m.Method == "notifications/progress" {
		h.mu.Lock()
		ch := h.progress[progressToken(m.Params)]
		h.mu.Unlock()
		if ch != nil {
			select {
			case ch <- line:
				return
			default: // full: the GET stream takes it
			}
		}
	}
	select {
	case h.stream <- line:
	default:
		h.srv.logf("fakeserver: session %s: no GET stream takes the server's messages; dropped one", h.id)
	}
}

// sessionOutput is a session's server's output: each line written is a
// message, routed by route.
type sessionOutput struct{ h *httpSession }

func (o sessionOutput) Write(b []byte) (int, error) {
	for line := range bytes.SplitSeq(b, []byte("\n")) {
		if len(bytes.TrimSpace(line)) > 0 {
			o.h.route(bytes.Clone(line))
		}
	}
	return len(b), nil
}

// pump writes the session's stream to w as "message" events until the
// client goes or the session ends.
func (h *httpSession) pump(w http.ResponseWriter, r *http.Request) {
	fl, _ := w.(http.Flusher)
	for {
		select {
		case line := <-h.stream:
			fmt.Fprintf(w, "event: message\ndata: %s\n\n", line)
			if fl != nil {
				fl.Flush()
			}
		case <-r.Context().Done():
			return
		case <-h.done:
			return
		}
	}
}

// startEvents starts an event stream response.
func startEvents(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
}

// sseStream serves GET /sse: a new session of the HTTP+SSE transport.
func (f *httpFront) sseStream(w http.ResponseWriter, r *http.Request) {
	h := f.newSession(true)
	defer f.endSession(h)
	startEvents(w)
	fmt.Fprintf(w, "event: endpoint\ndata: /messages?sessionId=%s\n\n", h.id)
	if fl, ok := w.(http.Flusher); ok {
		fl.Flush()
	}
	h.pump(w, r)
}

// ssePost serves POST /messages: a message of an HTTP+SSE session.
func (f *httpFront) ssePost(w http.ResponseWriter, r *http.Request) {
	h := f.session(r.URL.Query().Get("sessionId"))
	if h == nil {
		http.Error(w, "unknown session", http.StatusNotFound)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, httpMaxBody))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	h.handle(body)
	w.WriteHeader(http.StatusAccepted)
	io.WriteString(w, "Accepted")
}

// streamable serves /mcp with -http.
func (f *httpFront) streamable(w http.ResponseWriter, r *http.Request) {
	if f.s.opts.conformance && !localOrigin(r) {
		http.Error(w, "Host or Origin is not a local one", http.StatusForbidden)
		return
	}
	if r.Method == http.MethodPost {
		f.streamablePost(w, r)
		return
	}
	h := f.session(r.Header.Get("Mcp-Session-Id"))
	switch {
	case r.Method != http.MethodGet && r.Method != http.MethodDelete:
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	case h == nil:
		http.Error(w, "unknown session", http.StatusNotFound)
	case r.Method == http.MethodDelete:
		f.endSession(h)
	default:
		startEvents(w)
		if fl, ok := w.(http.Flusher); ok {
			fl.Flush()
		}
		h.pump(w, r)
	}
}

// streamablePost serves a POST to /mcp.
func (f *httpFront) streamablePost(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, httpMaxBody))
	var m message
	if err != nil || json.Unmarshal(body, &m) != nil {
		writeRPCError(w, http.StatusBadRequest, nil, codeParseError, "parse error")
		return
	}
	sid := r.Header.Get("Mcp-Session-Id")
	var h *httpSession
	switch {
	case sid == "" && m.Method == "initialize":
		h = f.newSession(false)
	case sid == "":
		writeRPCError(w, http.StatusBadRequest, m.ID, codeInvalidRequest, "no Mcp-Session-Id: send initialize first")
		return
	default:
		if h = f.session(sid); h == nil {
			writeRPCError(w, http.StatusNotFound, m.ID, codeInvalidRequest, "unknown session")
			return
		}
	}
	if m.Method == "" || m.ID == nil {
		h.handle(body)
		w.WriteHeader(http.StatusAccepted)
		return
	}
	id := string(compact(m.ID))
	var token string
	if f.s.opts.conformance && strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
		token = progressToken(m.Params)
	}
	answer := h.await(id, token)
	defer h.forget(id, token)
	h.handle(body)
	var line []byte
	for line == nil {
		select {
		case l := <-answer:
			var a message
			if json.Unmarshal(l, &a) == nil && a.Method != "" {
				if !started(w) {
					startEvents(w)
				}
				fmt.Fprintf(w, "event: message\ndata: %s\n\n", l)
				if fl, ok := w.(http.Flusher); ok {
					fl.Flush()
				}
				continue
			}
			line = l
		case <-r.Context().Done():
			return
		case <-h.done:
			if !started(w) {
				writeRPCError(w, http.StatusNotFound, m.ID, codeInvalidRequest, "the session ended")
			}
			return
		}
	}
	if started(w) {
		fmt.Fprintf(w, "event: message\ndata: %s\n\n", line)
		return
	}
	if m.Method == "initialize" {
		w.Header().Set("Mcp-Session-Id", h.id)
	}
	if f.s.opts.noContentType {
		w.Header()["Content-Type"] = nil // net/http would sniff one
	} else {
		w.Header().Set("Content-Type", "application/json")
	}
	w.Write(append(line, '\n'))
}

// started reports whether w's header was written: an event stream started.
func started(w http.ResponseWriter) bool {
	return w.Header().Get("Content-Type") == "text/event-stream"
}

// writeRPCError answers with an HTTP status and a JSON-RPC error.
func writeRPCError(w http.ResponseWriter, status int, id json.RawMessage, code int, msg string) {
	if id == nil {
		id = nullID
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(response{JSONRPC: "2.0", ID: id, Error: &rpcError{Code: code, Message: msg}})
}
