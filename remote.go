package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// A remote MCP server, reached over Streamable HTTP (MCP 2025-11-25, and the
// request headers of 2026-07-28), as a msgConn, so that a mux and a backend
// serve it as they serve a process.

// Limits and durations of a remote connection; each is a field of
// remoteConn set from these, which tests may change before the first write.
const (
	// remoteMaxMessage is the largest message corral takes from a remote
	// server; a larger one fails the request it answers.
	remoteMaxMessage = 64 << 20

	// remoteRetryMin and remoteRetryMax bound the wait before the GET
	// stream is opened again after it ended or could not be opened.
	remoteRetryMin = time.Second
	remoteRetryMax = 30 * time.Second
)

const (
	// remoteHeld is how much of a message any response's reader may hold:
	// past it, the reader of a larger message takes the connection's one
	// token for large messages first, so that memory stays bounded (by
	// remoteHeld a response, and one maxLine) whatever the size and number
	// of the messages in flight. Messages no larger flow past it.
	remoteHeld = 256 << 10

	// remoteKeptBuf is the most a response's reader keeps of the buffer a
	// message grew, for the next message.
	remoteKeptBuf = 512 << 10

	// remoteReadBuf is the size of the buffer a response is read with; one
	// is allocated for each response, and a line longer than it is read in
	// pieces anyway.
	remoteReadBuf = 16 << 10

	// remoteErrorBody is how much of an HTTP error's body is read.
	remoteErrorBody = 64 << 10
)

// remoteConn speaks Streamable HTTP to one remote MCP server, as a msgConn:
// each message written is POSTed, concurrently with the others, and every
// message the server sends back (in a JSON answer, in a POST's event stream,
// or in the GET stream) is read whole, compacted, then returned by
// ReadMessage: a large message being read holds up no other. Its methods
// are safe for concurrent use.
type remoteConn struct {
	name    string
	url     string
	shown   string // url without credentials or query, which may hold secrets: for messages and logs
	headers map[string]string
	client  *http.Client
	log     *slog.Logger

	maxMessage         int64
	maxLine            int           // the largest message passed on: a larger one fails its request
	closeGrace         time.Duration // how long Close waits for the DELETE that ends the session
	retryMin, retryMax time.Duration

	// ctx ends when the connection is over, which aborts every request.
	ctx    context.Context
	cancel context.CancelFunc

	in  chan received // the server's messages, each whole, for ReadMessage
	big chan struct{} // holds the one token for reading a message over remoteHeld

	mu        sync.Mutex
	sessionID string               // the server's Mcp-Session-Id, once initialize is answered
	version   string               // the protocol version initialize settled on
	gate      chan struct{}        // closed when every message posted so far that later ones must follow has been posted
	inflight  map[string]*outgoing // requests being posted, by their compact ID
	streaming bool                 // the GET stream was started
	expired   bool                 // the server ended the session
	err       error                // why the connection is over; set once
	done      chan struct{}        // closed when err is set
	wg        sync.WaitGroup       // every goroutine the connection started

	closeOnce sync.Once
	closeErr  error

	untyped sync.Once // for the debug log line about answers without Content-Type

	// paramHeaders, if not nil, returns the x-mcp-header annotations of
	// the server's tool named tool (see toolParamHeaders). It is set
	// before the first message is written and not changed: a modern
	// tools/call then carries the Mcp-Param headers of its arguments, as
	// the 2026-07-28 specification asks of every client ("When a server's
	// tool definition includes x-mcp-header annotations, conforming
	// clients MUST mirror the designated parameter values into HTTP
	// headers").
	paramHeaders func(tool string) []paramHeader
}

// dialRemote returns a connection to the MCP server at url, called name in
// messages, that sends headers with every request and makes its requests
// with client (http.DefaultClient if nil; it must have no Timeout, which
// would cut off long calls and the GET stream). It does no I/O until a
// message is written. The caller runs the mux on it and calls Close when
// done.
func dialRemote(name, url string, headers map[string]string, client *http.Client, log *slog.Logger) *remoteConn {
	if client == nil {
		client = http.DefaultClient
	}
	ctx, cancel := context.WithCancel(context.Background())
	gate := make(chan struct{})
	close(gate)
	shown := shownURL(url)
	return &remoteConn{
		name: name, url: url, shown: shown, headers: maps.Clone(headers), client: client,
		log:        log.With("url", shown),
		maxMessage: remoteMaxMessage, maxLine: defaultMaxLineBytes, closeGrace: defaultStopGrace,
		retryMin: remoteRetryMin, retryMax: remoteRetryMax,
		ctx: ctx, cancel: cancel, in: make(chan received), big: make(chan struct{}, 1),
		gate: gate, inflight: map[string]*outgoing{}, done: make(chan struct{}),
	}
}

// shownURL returns raw without user information, query or fragment.
func shownURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "an invalid URL"
	}
	u.User, u.RawQuery, u.ForceQuery, u.Fragment, u.RawFragment = nil, "", false, "", ""
	return u.String()
}

// received is one message read from the server, or a *lineTooLongError
// for one over maxLine.
type received struct {
	msg []byte
	err error
}

// WriteMessage starts posting msg, one JSON-RPC message, in the background:
// it never waits for the network, and keeps msg. It fails with Err once the
// connection is over.
func (c *remoteConn) WriteMessage(msg []byte) error {
	if len(bytes.TrimSpace(msg)) == 0 {
		return nil
	}
	return c.send(msg)
}

// ReadMessage returns the server's next message, whole and compacted, or a
// *lineTooLongError for one over maxLine, which was dropped. It returns
// io.EOF once the connection is over. The server's messages wait, unread,
// while no one reads.
func (c *remoteConn) ReadMessage() ([]byte, error) {
	select {
	case in := <-c.in:
		return in.msg, in.err
	case <-c.done:
		return nil, io.EOF
	}
}

// deliver passes one message (or the error for one) to ReadMessage. It
// blocks until it is read, and fails once the connection is over.
func (c *remoteConn) deliver(msg []byte, err error) error {
	select {
	case c.in <- received{msg, err}:
		return nil
	case <-c.done:
		return errConnOver
	}
}

// takeBig waits for the token for reading a message over remoteHeld, and
// fails once the connection is over. The caller gives it back with
// <-c.big.
func (c *remoteConn) takeBig() error {
	select {
	case c.big <- struct{}{}:
		return nil
	case <-c.ctx.Done():
		return errConnOver
	}
}

// errConnOver is deliver's error once the connection is over.
var errConnOver = errors.New("the connection is over")

// Done returns a channel closed when the connection is over: closed, or
// ended by a fatal error (the server ended the session). Pending requests
// then never get an answer; the owner fails them with Err.
func (c *remoteConn) Done() <-chan struct{} { return c.done }

// Err returns why the connection is over, naming the server and its URL, or
// nil while it is not.
func (c *remoteConn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Close ends the connection: it aborts every request in flight and the GET
// stream, ends ReadMessage with EOF, ends the server's session with DELETE
// (if it opened one that has not ended), waiting for it at most closeGrace,
// and returns once every goroutine of the connection has returned. It
// returns the error of the DELETE, if any. Close may be called more than
// once; later calls return what the first returned.
func (c *remoteConn) Close() error {
	c.closeOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), c.closeGrace)
		defer cancel()
		c.fail(fmt.Errorf("server %q (%s): the connection was closed", c.name, c.shown))
		c.mu.Lock()
		sid, expired := c.sessionID, c.expired
		c.mu.Unlock()
		if sid != "" && !expired {
			c.closeErr = c.endSession(ctx, sid)
		}
		c.wg.Wait()
	})
	return c.closeErr
}

// fail ends the connection with err, unless it is over already.
func (c *remoteConn) fail(err error) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	c.err = err
	close(c.done)
	c.mu.Unlock()
	c.cancel()
}

// expire ends the connection because the server no longer knows session
// sid, if that is still the connection's session.
func (c *remoteConn) expire(sid string, status int) {
	c.mu.Lock()
	current := c.sessionID == sid
	if current {
		c.expired = true
	}
	c.mu.Unlock()
	if current {
		c.fail(fmt.Errorf("server %q (%s): the session expired (the server answered HTTP %d %s); it must be initialized again",
			c.name, c.shown, status, http.StatusText(status)))
	}
}

// endSession sends DELETE for session sid. A server that does not let
// clients end sessions (405), or has forgotten the session (404), is fine.
func (c *remoteConn) endSession(ctx context.Context, sid string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, c.url, nil)
	if err != nil {
		return fmt.Errorf("server %q (%s): ending the session: %v", c.name, c.shown, err)
	}
	_, version := c.sessionNow()
	c.setHeaders(req, "", sid, version)
	resp, err := c.client.Do(req)
	if err != nil {
		return fmt.Errorf("server %q (%s): ending the session: %v", c.name, c.shown, bareError(err))
	}
	resp.Body.Close()
	if ok := resp.StatusCode < 300 || resp.StatusCode == http.StatusMethodNotAllowed || resp.StatusCode == http.StatusNotFound; !ok {
		return fmt.Errorf("server %q (%s): ending the session: HTTP %s", c.name, c.shown, statusText(resp.StatusCode))
	}
	return nil
}

// outgoing is one message being posted.
type outgoing struct {
	line   []byte // the message, without its newline
	id     []byte // a request's compact ID; nil for a notification or an answer
	method string
	modern string            // the modern protocol version in the message's _meta, or ""
	name   string            // the Mcp-Name header of a modern request, or ""
	params map[string]string // the Mcp-Param headers of a modern tools/call
	// traceparent and tracestate are the trace context in a request's
	// _meta, sent as HTTP headers too, or "".
	traceparent, tracestate string

	// after is closed when the messages this one must follow have been
	// posted; barrier, if not nil, is closed when this one has been.
	after   <-chan struct{}
	barrier chan struct{}

	// abort is the request this message cancels: it is aborted once the
	// cancellation has been posted.
	abort *outgoing

	ctx    context.Context
	cancel context.CancelFunc
}

// send starts posting one message.
func (c *remoteConn) send(line []byte) error {
	msg, err := decodeServerLine(line)
	if err != nil {
		// The mux writes nothing but JSON-RPC; this is a broken invariant
		// of the writer, not the server's doing.
		c.log.Warn("not posting a line that is not JSON-RPC", "line", truncate(line, 200), "err", err)
		return nil
	}
	o := &outgoing{line: line, method: msg.Method}
	if msg.Method != "" && msg.ID != nil {
		o.id = compactRaw(msg.ID)
	}
	if o.modern = modernVersionOf(msg.Params); o.modern != "" {
		o.name = mcpName(msg.Method, msg.Params)
		if msg.Method == "tools/call" && c.paramHeaders != nil {
			if hs := c.paramHeaders(o.name); len(hs) > 0 {
				var p struct {
					Arguments json.RawMessage `json:"arguments"`
				}
				json.Unmarshal(msg.Params, &p)
				o.params = paramHeaderValues(hs, p.Arguments)
			}
		}
	}
	if o.id != nil {
		o.traceparent, o.tracestate = metaTraceContext(msg.Params)
	}
	var cancelled []byte // the compact ID of the request a cancellation is about
	if msg.Method == "notifications/cancelled" {
		var p struct {
			RequestID json.RawMessage `json:"requestId"`
		}
		json.Unmarshal(msg.Params, &p)
		cancelled = compactRaw(p.RequestID)
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return c.err
	}
	if target := c.inflight[string(cancelled)]; target != nil {
		if target.modern != "" {
			// In the modern era closing the request's stream is its
			// cancellation, and the server knows no notifications/cancelled.
			target.cancel()
			return nil
		}
		// In the legacy era a dropped connection is not a cancellation: the
		// server is told first, and the request aborted after, to free the
		// connection and whatever the server still sends.
		o.abort = target
	}
	o.ctx, o.cancel = context.WithCancel(c.ctx)
	o.after = c.gate
	if msg.Method == "initialize" || msg.Method == "notifications/initialized" {
		// What follows needs the session the answer to initialize opens,
		// and a server may refuse requests before notifications/initialized.
		o.barrier = make(chan struct{})
		c.gate = o.barrier
	}
	if o.id != nil {
		c.inflight[string(o.id)] = o
	}
	c.wg.Add(1)
	go c.post(o)
	return nil
}

// post posts one message and delivers what the server answers.
func (c *remoteConn) post(o *outgoing) {
	defer c.wg.Done()
	defer o.cancel()
	defer c.forget(o)
	if o.barrier != nil {
		defer close(o.barrier)
	}
	select {
	case <-o.after:
	case <-o.ctx.Done():
		return
	}
	if o.abort != nil {
		defer o.abort.cancel()
	}
	resp, sid := c.do(o)
	if resp == nil {
		return
	}
	defer resp.Body.Close()
	if !c.accepted(o, resp, sid) {
		return
	}
	if o.id == nil || resp.StatusCode == http.StatusAccepted || resp.StatusCode == http.StatusNoContent {
		return // a notification or an answer has nothing to read
	}
	c.readAnswer(o, resp)
}

// do sends the POST of o, with the headers of its session (sid) and era,
// and returns the response, or nil once it has failed o.
func (c *remoteConn) do(o *outgoing) (resp *http.Response, sid string) {
	req, err := http.NewRequestWithContext(o.ctx, http.MethodPost, c.url, bytes.NewReader(o.line))
	if err != nil {
		c.failed(o, "cannot be reached: its URL is invalid") // the error would repeat the URL
		return nil, ""
	}
	sid, version := c.sessionNow()
	if o.method == "initialize" {
		sid, version = "", "" // it opens a new session
	}
	if o.modern != "" {
		// A modern request carries its own version and needs no session.
		sid, version = "", o.modern
	}
	c.setHeaders(req, "application/json, text/event-stream", sid, version)
	req.Header.Set("Content-Type", "application/json")
	if o.traceparent != "" {
		// The HTTP hop is the same call: W3C Trace Context's headers carry
		// the context _meta does, for a server (or a proxy) that reads them.
		req.Header.Set("traceparent", o.traceparent)
		if o.tracestate != "" {
			req.Header.Set("tracestate", o.tracestate)
		}
	}
	if o.modern != "" {
		req.Header.Set("Mcp-Method", headerValue(o.method))
		if o.name != "" {
			req.Header.Set("Mcp-Name", headerValue(o.name))
		}
		for k, v := range o.params {
			req.Header.Set(k, v)
		}
	}
	resp, err = c.client.Do(req)
	if err != nil {
		if o.ctx.Err() == nil {
			c.failed(o, fmt.Sprintf("cannot be reached: %v", bareError(err)))
		}
		return nil, ""
	}
	return resp, sid
}

// accepted handles the status of the response to o, posted in session sid,
// and reports whether it succeeded; what initialize and
// notifications/initialized start is started then.
func (c *remoteConn) accepted(o *outgoing, resp *http.Response, sid string) bool {
	ok := resp.StatusCode >= 200 && resp.StatusCode < 300
	switch {
	case resp.StatusCode == http.StatusNotFound && sid != "":
		c.expire(sid, resp.StatusCode)
		return false
	case !ok:
		c.httpError(o, resp)
		return false
	case o.method == "initialize":
		c.setSession(resp.Header.Get("Mcp-Session-Id"))
	case o.method == "notifications/initialized":
		c.openStream()
	}
	return true
}

// readAnswer delivers the messages of resp, the response to request o, and
// fails o if none of them answered it.
func (c *remoteConn) readAnswer(o *outgoing, resp *http.Response) {
	r := &msgReader{c: c, reqID: o.id}
	if o.method == "initialize" {
		r.onAnswer = c.initialized
	}
	var err error
	switch ct := mediaType(resp.Header.Get("Content-Type")); ct {
	case "text/event-stream":
		err = r.readSSE(resp.Body, nil)
	case "application/json":
		err = r.readJSON(resp.Body)
	case "":
		body, isJSON := c.sniffJSON(resp.Body)
		if !isJSON {
			c.failed(o, "answered without a Content-Type, with a body that is not JSON; it must answer application/json or text/event-stream")
			return
		}
		err = r.readJSON(body)
	default:
		c.failed(o, fmt.Sprintf("answered with Content-Type %q, neither application/json nor text/event-stream", ct))
		return
	}
	switch {
	case r.answered || o.ctx.Err() != nil || errors.Is(err, errConnOver):
		// Answered; or no one waits for the answer any more.
	case r.invalid:
		c.failed(o, "answered with a message that is not valid JSON-RPC")
	case errors.Is(err, errTooBig):
		c.deliver(encodeErrorResponse(o.id, &wireError{Code: codeInternalError,
			Message: fmt.Sprintf("server %q (%s) answered with a message over the %d-byte limit", c.name, c.shown, c.maxMessage)}), nil)
	case errors.Is(err, errLineBreak) || errors.Is(err, errNotMessage):
		c.failed(o, fmt.Sprintf("answered with what is not JSON-RPC: %v", err))
	case err != nil:
		c.failed(o, fmt.Sprintf("broke off its answer: %v", bareError(err)))
	default:
		c.failed(o, fmt.Sprintf("answered HTTP %s with no answer to the request", statusText(resp.StatusCode)))
	}
}

// sniffJSON reads the start of body, an answer without Content-Type (some
// hosted servers send none), and reports whether it starts as JSON
// messages do, or is empty: the body, read from its start, is then read as
// JSON, which the debug log says once for the connection.
func (c *remoteConn) sniffJSON(body io.Reader) (io.Reader, bool) {
	br := bufio.NewReaderSize(body, remoteReadBuf)
	for {
		b, err := br.ReadByte()
		switch {
		case err != nil:
			return br, true // empty: readJSON says there is no answer
		case b == ' ' || b == '\t' || b == '\r' || b == '\n':
			continue
		case b != '{' && b != '[':
			return br, false
		}
		br.UnreadByte()
		c.untyped.Do(func() {
			c.log.Debug("the server answers without a Content-Type; corral reads a body that starts as JSON as application/json")
		})
		return br, true
	}
}

// forget removes a request from the ones in flight.
func (c *remoteConn) forget(o *outgoing) {
	if o.id == nil {
		return
	}
	c.mu.Lock()
	if c.inflight[string(o.id)] == o {
		delete(c.inflight, string(o.id))
	}
	c.mu.Unlock()
}

// sessionNow returns the session ID and protocol version to send.
func (c *remoteConn) sessionNow() (sid, version string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sessionID, c.version
}

// setHeaders sets the configured headers on req, then the protocol's,
// which win.
func (c *remoteConn) setHeaders(req *http.Request, accept, sid, version string) {
	for k, v := range c.headers {
		if strings.EqualFold(k, "Host") {
			req.Host = v // net/http sends req.Host, not the header
			continue
		}
		req.Header.Set(k, v)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
	}
	if version != "" {
		req.Header.Set("MCP-Protocol-Version", version)
	}
}

// setSession records the session the answer to initialize opened, or that
// it opened none.
func (c *remoteConn) setSession(sid string) {
	for i := range len(sid) {
		if sid[i] < 0x21 || sid[i] > 0x7E {
			c.log.Warn("ignoring an Mcp-Session-Id that is not visible ASCII, as the specification requires")
			sid = ""
			break
		}
	}
	c.mu.Lock()
	c.sessionID = sid
	c.mu.Unlock()
}

// initialized records the protocol version of the answer to initialize,
// before the answer is written: every request after it carries the version.
func (c *remoteConn) initialized(answer []byte) {
	var a struct {
		Result struct {
			ProtocolVersion string `json:"protocolVersion"`
		} `json:"result"`
	}
	if json.Unmarshal(answer, &a) != nil || a.Result.ProtocolVersion == "" {
		return
	}
	c.mu.Lock()
	c.version = a.Result.ProtocolVersion
	c.mu.Unlock()
}

// failed fails the request o with an error that names the server, its URL
// and what went wrong; for a notification or an answer, which no one waits
// for, it logs a warning.
func (c *remoteConn) failed(o *outgoing, what string) {
	if o.id == nil {
		c.log.Warn("posting a message to the remote server failed", "method", o.method, "err", what)
		return
	}
	c.deliver(encodeErrorResponse(o.id, unavailable("server %q (%s) %s", c.name, c.shown, what)), nil)
}

// httpError handles an HTTP error status. A JSON-RPC error answering the
// request is passed on as it is; anything else fails the request with the
// status and the start of the body.
func (c *remoteConn) httpError(o *outgoing, resp *http.Response) {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, remoteErrorBody))
	if o.id != nil {
		if msg, err := decodeServerLine(body); err == nil && msg.Error != nil && msg.Method == "" && bytes.Equal(compactRaw(msg.ID), o.id) {
			c.deliver(compactRaw(body), nil)
			return
		}
	}
	what := "answered HTTP " + statusText(resp.StatusCode)
	if s := strings.TrimSpace(strings.ToValidUTF8(string(body[:min(len(body), 200)]), "")); s != "" {
		what += ": " + s
	}
	c.failed(o, what)
}

// goUnlessOver runs f on a goroutine of the connection's, which Close
// joins, unless the connection is over: once Close has begun it joins no
// more goroutines. It does not block.
func (c *remoteConn) goUnlessOver(f func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		f()
	}()
}

// openStream starts the GET stream, once.
func (c *remoteConn) openStream() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.streaming || c.err != nil {
		return
	}
	c.streaming = true
	c.wg.Add(1)
	go c.stream()
}

// errNoStream is the answer of a server that offers no GET stream.
var errNoStream = errors.New("the server offers no GET stream (HTTP 405)")

// stream keeps the GET stream open, for the messages the server sends
// unasked, until the connection is over: it opens it again after it ends,
// waiting longer after each failure in a row.
func (c *remoteConn) stream() {
	defer c.wg.Done()
	wait := c.retryMin
	var lastID string // of the last event, to resume from
	failures := 0
	for {
		start := time.Now()
		opened, err := c.streamOnce(&lastID)
		if c.ctx.Err() != nil {
			return
		}
		if errors.Is(err, errNoStream) {
			c.log.Debug("the server offers no stream of its own messages (GET answered 405); it can still send them with its answers")
			return
		}
		if opened && time.Since(start) >= wait {
			// The server ended a stream that had served, as some do every
			// few minutes: open it again soon.
			wait, failures = c.retryMin, 0
			c.log.Debug("the GET stream ended; opening it again", "err", err, "in", wait)
		} else {
			failures++
			level := slog.LevelWarn
			if failures > 1 {
				level = slog.LevelDebug // said already, at the first failure in a row
			}
			c.log.Log(c.ctx, level, "the GET stream ended or could not be opened; opening it again", "err", err, "in", wait)
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-c.ctx.Done():
			t.Stop()
			return
		}
		wait = min(2*wait, c.retryMax)
	}
}

// streamOnce opens the GET stream and delivers its messages until it
// ends. It reports whether the stream opened, and why it ended.
func (c *remoteConn) streamOnce(lastID *string) (opened bool, err error) {
	req, err := http.NewRequestWithContext(c.ctx, http.MethodGet, c.url, nil)
	if err != nil {
		return false, err
	}
	sid, version := c.sessionNow()
	c.setHeaders(req, "text/event-stream", sid, version)
	if *lastID != "" {
		req.Header.Set("Last-Event-ID", *lastID)
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return false, bareError(err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusMethodNotAllowed:
		return false, errNoStream
	case resp.StatusCode == http.StatusNotFound && sid != "":
		c.expire(sid, resp.StatusCode)
		return false, errors.New("the session expired")
	case resp.StatusCode != http.StatusOK:
		return false, fmt.Errorf("GET answered HTTP %s", statusText(resp.StatusCode))
	case mediaType(resp.Header.Get("Content-Type")) != "text/event-stream":
		return false, fmt.Errorf("GET answered with Content-Type %q, not text/event-stream", resp.Header.Get("Content-Type"))
	}
	r := &msgReader{c: c}
	err = r.readSSE(resp.Body, lastID)
	if err == nil {
		err = errors.New("the server ended it")
	}
	return true, err
}

// modernVersionOf returns the modern protocol version in params' _meta, or "".
func modernVersionOf(params json.RawMessage) string {
	if !bytes.Contains(params, []byte(metaVersion)) {
		return "" // the common case, decided without decoding
	}
	var version string
	members(params, func(key string, value []byte) {
		if key != "_meta" {
			return
		}
		members(value, func(key string, value []byte) {
			if key == metaVersion {
				json.Unmarshal(value, &version)
			}
		})
	})
	return version
}

// metaTraceContext returns the traceparent and tracestate of params' _meta
// that can be header values (printable ASCII), or "".
func metaTraceContext(params json.RawMessage) (traceparent, tracestate string) {
	traceparent, tracestate = metaTraceFields(params)
	if !printableASCII(traceparent) {
		return "", ""
	}
	if !printableASCII(tracestate) {
		tracestate = ""
	}
	return traceparent, tracestate
}

// metaTraceFields returns the traceparent and tracestate strings of
// params' _meta as they are, or "".
func metaTraceFields(params json.RawMessage) (traceparent, tracestate string) {
	if !bytes.Contains(params, []byte(metaTraceparent)) {
		return "", "" // the common case, decided without decoding
	}
	members(params, func(key string, value []byte) {
		if key != "_meta" {
			return
		}
		members(value, func(key string, value []byte) {
			switch key {
			case metaTraceparent:
				json.Unmarshal(value, &traceparent)
			case metaTracestate:
				json.Unmarshal(value, &tracestate)
			}
		})
	})
	return traceparent, tracestate
}

// printableASCII reports whether s is printable ASCII alone.
func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7E {
			return false
		}
	}
	return true
}

// mcpName returns the Mcp-Name header of a modern request: the tool, prompt
// or resource it is about.
func mcpName(method string, params json.RawMessage) string {
	info := methods[method]
	if !info.mcpName {
		return ""
	}
	var name string
	members(params, func(key string, value []byte) {
		if key == info.member {
			json.Unmarshal(value, &name)
		}
	})
	return name
}

// headerValue returns s as a header value: as it is if it is printable
// ASCII without leading or trailing spaces, else base64 encoded as
// "=?base64?...?=", as the modern era asks. A value that looks encoded
// already is encoded too, so that the server decodes it back to itself.
func headerValue(s string) string {
	plain := strings.TrimSpace(s) == s && !(strings.HasPrefix(s, "=?") && strings.HasSuffix(s, "?="))
	for i := 0; plain && i < len(s); i++ {
		plain = s[i] >= 0x20 && s[i] <= 0x7E
	}
	if plain {
		return s
	}
	return "=?base64?" + base64.StdEncoding.EncodeToString([]byte(s)) + "?="
}

// compactRaw returns raw without insignificant whitespace, or raw as it is
// if it is not valid JSON.
func compactRaw(raw []byte) []byte {
	raw = bytes.TrimSpace(raw)
	if !bytes.ContainsAny(raw, " \t\r\n") {
		return raw
	}
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return raw
	}
	return b.Bytes()
}

// mediaType returns the media type of a Content-Type, lower case, without
// parameters.
func mediaType(contentType string) string {
	t, _, _ := strings.Cut(contentType, ";")
	return strings.ToLower(strings.TrimSpace(t))
}

// statusText returns "503 Service Unavailable" for 503.
func statusText(code int) string {
	return fmt.Sprintf("%d %s", code, http.StatusText(code))
}

// bareError returns err without the *url.Error around it, whose message
// repeats the URL with its query, which may hold secrets.
func bareError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// remoteHTTPClient returns the client for a remote server: no overall
// timeout (calls have their own deadlines, and event streams last),
// connections kept for concurrent calls, proxies from the environment.
func remoteHTTPClient() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 64
	return &http.Client{Transport: t}
}
