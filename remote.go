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
// request headers of 2026-07-28), made to look like a child's stdin and
// stdout, so that a mux and a backend serve it as they serve a process.

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
	// remoteHeld is how much of a message is held before it is written out:
	// a message no larger is written whole, so that a server slow to send
	// it holds up no other response; a larger one is written as it arrives,
	// with the stdout lock held, so that memory stays bounded whatever the
	// size and number of messages in flight.
	remoteHeld = 256 << 10

	// remoteChunk is the size of the pieces in which a large message is
	// written out.
	remoteChunk = 64 << 10

	// remoteReadBuf is the size of the buffer a response is read with; one
	// is allocated for each response, and a line longer than it is read in
	// pieces anyway.
	remoteReadBuf = 16 << 10

	// remoteErrorBody is how much of an HTTP error's body is read.
	remoteErrorBody = 64 << 10
)

// remoteConn speaks Streamable HTTP to one remote MCP server and presents it
// as a child process's pipes: each line written to Stdin is POSTed as one
// message, concurrently with the others, and every message the server sends
// back (in a JSON answer, in a POST's event stream, or in the GET stream) is
// one line on Stdout, whole, never interleaved with another. Its methods are
// safe for concurrent use.
type remoteConn struct {
	name    string
	url     string
	shown   string // url without credentials or query, which may hold secrets: for messages and logs
	headers map[string]string
	client  *http.Client
	log     *slog.Logger

	maxMessage         int64
	retryMin, retryMax time.Duration

	// ctx ends when the connection is over, which aborts every request.
	ctx    context.Context
	cancel context.CancelFunc

	stdout *io.PipeReader
	pw     *io.PipeWriter
	outMu  sync.Mutex // held while a message is written to pw

	wmu     sync.Mutex // serializes writes to Stdin
	partial []byte     // the start of a line written to Stdin without its newline

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
}

// dialRemote returns a connection to the MCP server at url, called name in
// messages, that sends headers with every request and makes its requests
// with client (http.DefaultClient if nil; it must have no Timeout, which
// would cut off long calls and the GET stream). It does no I/O until a
// message is written to Stdin. The caller runs the mux on Stdin and Stdout
// and calls Close when done.
func dialRemote(name, url string, headers map[string]string, client *http.Client, log *slog.Logger) *remoteConn {
	if client == nil {
		client = http.DefaultClient
	}
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	gate := make(chan struct{})
	close(gate)
	shown := shownURL(url)
	return &remoteConn{
		name: name, url: url, shown: shown, headers: maps.Clone(headers), client: client,
		log:        log.With("url", shown),
		maxMessage: remoteMaxMessage, retryMin: remoteRetryMin, retryMax: remoteRetryMax,
		ctx: ctx, cancel: cancel, stdout: pr, pw: pw,
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

// Stdin returns the writer the mux's writeLoop writes to: each
// newline-terminated line is one JSON-RPC message, POSTed in the background.
// A write never waits for the network; it fails with Err once the connection
// is over.
func (c *remoteConn) Stdin() io.Writer { return remoteStdin{c} }

// Stdout returns the reader the mux's readLoop reads: one line for each
// message of the server. It ends with io.EOF when the connection is over.
// The server's messages wait, unread, while the reader does not read.
func (c *remoteConn) Stdout() io.Reader { return c.stdout }

// Done returns a channel closed when the connection is over: closed, or
// ended by a fatal error (the server ended the session). Pending requests
// then never get an answer on Stdout; the owner fails them with Err.
func (c *remoteConn) Done() <-chan struct{} { return c.done }

// Err returns why the connection is over, naming the server and its URL, or
// nil while it is not.
func (c *remoteConn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Close ends the connection: it aborts every request in flight and the GET
// stream, ends Stdout with EOF, ends the server's session with DELETE (if it
// opened one that has not ended), waiting for it at most until ctx ends, and
// returns once every goroutine of the connection has returned. It returns
// the error of the DELETE, if any. Close may be called more than once; later
// calls return what the first returned.
func (c *remoteConn) Close(ctx context.Context) error {
	c.closeOnce.Do(func() {
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
	c.pw.Close() // a write blocked on the reader returns at once
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

// remoteStdin is a remoteConn's Stdin.
type remoteStdin struct{ c *remoteConn }

// Write posts each line in p; a line may come in pieces, though the mux
// writes whole lines.
func (w remoteStdin) Write(p []byte) (int, error) {
	c := w.c
	c.wmu.Lock()
	defer c.wmu.Unlock()
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			c.partial = append(c.partial, p...)
			break
		}
		// The line is copied (append to nil allocates): a writer may reuse p
		// once Write returns.
		line := append(c.partial, p[:i]...)
		c.partial, p = nil, p[i+1:]
		line = bytes.TrimSuffix(line, []byte("\r"))
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		if err := c.send(line); err != nil {
			return n - len(p), err
		}
	}
	return n, nil
}

// outgoing is one message being posted.
type outgoing struct {
	line   []byte // the message, without its newline
	id     []byte // a request's compact ID; nil for a notification or an answer
	method string
	modern string // the modern protocol version in the message's _meta, or ""
	name   string // the Mcp-Name header of a modern request, or ""

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

// post posts one message and writes what the server answers to Stdout.
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

	req, err := http.NewRequestWithContext(o.ctx, http.MethodPost, c.url, bytes.NewReader(o.line))
	if err != nil {
		c.failed(o, "cannot be reached: its URL is invalid") // the error would repeat the URL
		return
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
	if o.modern != "" {
		req.Header.Set("Mcp-Method", headerValue(o.method))
		if o.name != "" {
			req.Header.Set("Mcp-Name", headerValue(o.name))
		}
	}
	resp, err := c.client.Do(req)
	if err != nil {
		if o.ctx.Err() == nil {
			c.failed(o, fmt.Sprintf("cannot be reached: %v", bareError(err)))
		}
		return
	}
	defer resp.Body.Close()

	ok := resp.StatusCode >= 200 && resp.StatusCode < 300
	switch {
	case resp.StatusCode == http.StatusNotFound && sid != "":
		c.expire(sid, resp.StatusCode)
		return
	case !ok:
		c.httpError(o, resp)
		return
	case o.method == "initialize":
		c.setSession(resp.Header.Get("Mcp-Session-Id"))
	case o.method == "notifications/initialized":
		c.openStream()
	}
	if o.id == nil || resp.StatusCode == http.StatusAccepted || resp.StatusCode == http.StatusNoContent {
		return // a notification or an answer has nothing to read
	}

	r := &msgReader{c: c, reqID: o.id}
	if o.method == "initialize" {
		r.onAnswer = c.initialized
	}
	switch ct := mediaType(resp.Header.Get("Content-Type")); ct {
	case "text/event-stream":
		err = r.readSSE(resp.Body, nil)
	case "application/json", "":
		err = r.readJSON(resp.Body)
	default:
		c.failed(o, fmt.Sprintf("answered with Content-Type %q, neither application/json nor text/event-stream", ct))
		return
	}
	switch {
	case r.answered || o.ctx.Err() != nil || errors.Is(err, io.ErrClosedPipe):
		// Answered; or no one waits for the answer any more.
	case r.invalid:
		c.failed(o, "answered with a message that is not valid JSON-RPC")
	case errors.Is(err, errTooBig):
		c.writeLine(encodeErrorResponse(o.id, &wireError{Code: codeInternalError,
			Message: fmt.Sprintf("server %q (%s) answered with a message over the %d-byte limit", c.name, c.shown, c.maxMessage)}))
	case errors.Is(err, errLineBreak) || errors.Is(err, errNotMessage):
		c.failed(o, fmt.Sprintf("answered with what is not JSON-RPC: %v", err))
	case err != nil:
		c.failed(o, fmt.Sprintf("broke off its answer: %v", bareError(err)))
	default:
		c.failed(o, fmt.Sprintf("answered HTTP %s with no answer to the request", statusText(resp.StatusCode)))
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
	c.writeLine(encodeErrorResponse(o.id, unavailable("server %q (%s) %s", c.name, c.shown, what)))
}

// httpError handles an HTTP error status. A JSON-RPC error answering the
// request is passed on as it is; anything else fails the request with the
// status and the start of the body.
func (c *remoteConn) httpError(o *outgoing, resp *http.Response) {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, remoteErrorBody))
	if o.id != nil {
		if msg, err := decodeServerLine(body); err == nil && msg.Error != nil && msg.Method == "" && bytes.Equal(compactRaw(msg.ID), o.id) {
			c.writeLine(compactRaw(body))
			return
		}
	}
	what := "answered HTTP " + statusText(resp.StatusCode)
	if s := strings.TrimSpace(strings.ToValidUTF8(string(body[:min(len(body), 200)]), "")); s != "" {
		what += ": " + s
	}
	c.failed(o, what)
}

// writeLine writes one whole line to Stdout.
func (c *remoteConn) writeLine(line []byte) {
	c.outMu.Lock()
	defer c.outMu.Unlock()
	c.pw.Write(append(line, '\n')) // fails only when the connection is over
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

// streamOnce opens the GET stream and copies its messages to Stdout until it
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

// errTooBig reports a message over the connection's maxMessage.
var errTooBig = errors.New("message over the size limit")

// msgReader writes the messages of one response to Stdout, each compacted to
// one line: JSON-RPC messages, or arrays of them, in a JSON body or in the
// data of server-sent events. It reads the messages as they come, in
// constant memory, and tells whether one answered the request the response
// is for. It is not safe for concurrent use.
type msgReader struct {
	c        *remoteConn
	reqID    []byte       // the compact ID of the request answered; nil for the GET stream
	onAnswer func([]byte) // if not nil, gets the answer to reqID before it is written, when it was held whole
	answered bool         // a message answering reqID was written
	invalid  bool         // a message that seemed to answer reqID was not valid JSON-RPC, and was dropped

	// Where the scan is.
	depth int  // of brackets, counting an array of messages
	array bool // inside an array of messages
	inMsg bool
	inStr bool
	esc   bool

	// What the scan found among the message's top-level members.
	keyPos bool   // the next string at the top level is a member name
	inKey  bool   // reading a top-level member name
	key    []byte // its first bytes
	isID   bool   // the last member name was "id"
	capID  bool   // reading the value of "id"
	id     []byte
	idLong bool
	method bool // it has a method: a request or a notification
	answer bool // it has a result or an error

	buf    []byte // the message's bytes not yet written
	size   int64  // the message's bytes so far
	locked bool   // holds c.outMu: the message is written as it arrives
}

// errLineBreak reports a raw line break inside a string, invalid in JSON,
// which would end the line early.
var errLineBreak = errors.New("a raw line break inside a JSON string")

// errNotMessage reports JSON that is neither an object nor an array.
var errNotMessage = errors.New("a JSON value that is neither a message nor an array of messages")

// feed scans p, the next bytes of the response's messages.
func (r *msgReader) feed(p []byte) error {
	run := -1 // the start in p of message bytes to keep
	if r.inMsg {
		run = 0
	}
	flush := func(end int) error {
		if run >= 0 && end > run {
			if err := r.emit(p[run:end]); err != nil {
				return err
			}
		}
		run = -1
		return nil
	}
	keep := func(i int) {
		if run < 0 {
			run = i
		}
	}
	base := 0 // the depth at which a message starts
	if r.array {
		base = 1
	}
	for i := 0; i < len(p); {
		b := p[i]
		if r.inStr {
			if r.esc {
				r.esc = false
				r.note(p[i : i+1])
				i++
				continue
			}
			// Most of a large message is the inside of a string: skip to
			// its next special byte.
			j := bytes.IndexAny(p[i:], "\"\\\n\r")
			if j < 0 {
				r.note(p[i:])
				i = len(p)
				continue
			}
			if j > 0 {
				r.note(p[i : i+j])
				i += j
				continue
			}
			switch b {
			case '"':
				r.inStr = false
				if r.inKey {
					r.endKey()
				} else {
					r.note(p[i : i+1])
				}
			case '\\':
				r.esc = true
				r.note(p[i : i+1])
			default:
				return errLineBreak
			}
			i++
			continue
		}
		switch {
		case b == ' ' || b == '\t' || b == '\n' || b == '\r':
			if err := flush(i); err != nil {
				return err
			}
		case !r.inMsg:
			switch {
			case b == '{' && r.depth == base:
				r.start()
				keep(i)
				r.depth++
			case b == '[' && r.depth == 0:
				r.array, r.depth, base = true, 1, 1
			case b == ']' && r.array && r.depth == 1:
				r.array, r.depth, base = false, 0, 0
			case b == ',' && r.array && r.depth == 1:
			default:
				return errNotMessage
			}
		default:
			keep(i)
			top := r.depth == base+1 // b is directly inside the message
			switch b {
			case '"':
				r.inStr = true
				if top && r.keyPos {
					r.inKey, r.key = true, r.key[:0]
				} else {
					r.note(p[i : i+1])
				}
			case '{', '[':
				r.depth++
				r.note(p[i : i+1])
			case '}', ']':
				r.depth--
				if r.depth == base {
					if err := flush(i + 1); err != nil {
						return err
					}
					if err := r.end(); err != nil {
						return err
					}
					break
				}
				r.note(p[i : i+1])
			case ':':
				if top {
					r.keyPos, r.capID, r.isID = false, r.isID, false
				} else {
					r.note(p[i : i+1])
				}
			case ',':
				if top {
					r.keyPos, r.capID = true, false
				} else {
					r.note(p[i : i+1])
				}
			default:
				r.note(p[i : i+1])
			}
		}
		i++
	}
	return flush(len(p))
}

// note records b, bytes of the message, if they belong to a top-level
// member name or to the value of "id".
func (r *msgReader) note(b []byte) {
	switch {
	case r.inKey:
		r.key = append(r.key, b[:min(len(b), 8-len(r.key))]...)
	case r.capID:
		if len(r.id)+len(b) > maxScannedID {
			r.idLong = true
			return
		}
		r.id = append(r.id, b...)
	}
}

// endKey ends a top-level member name.
func (r *msgReader) endKey() {
	r.inKey = false
	switch string(r.key) {
	case "id":
		r.isID = true
	case "method":
		r.method = true
	case "result", "error":
		r.answer = true
	}
}

// start begins a message.
func (r *msgReader) start() {
	r.inMsg, r.keyPos, r.inKey, r.isID, r.capID = true, true, false, false, false
	r.id, r.idLong, r.method, r.answer, r.size = r.id[:0], false, false, false, 0
}

// emit adds bytes of the message. A message larger than remoteHeld is
// written as it comes, holding the stdout lock until its end.
func (r *msgReader) emit(b []byte) error {
	r.size += int64(len(b))
	if r.size > r.c.maxMessage {
		return errTooBig
	}
	r.buf = append(r.buf, b...)
	switch {
	case !r.locked && len(r.buf) > remoteHeld:
		r.c.outMu.Lock()
		r.locked = true
	case r.locked && len(r.buf) >= remoteChunk:
	default:
		return nil
	}
	_, err := r.c.pw.Write(r.buf)
	r.buf = r.buf[:0]
	return err
}

// end ends a message: its last bytes and its newline are written out.
func (r *msgReader) end() error {
	r.inMsg = false
	if r.answer && !r.method && r.reqID != nil && !r.idLong && bytes.Equal(r.id, r.reqID) {
		switch {
		case r.locked:
			// Written in part already: the scan's word is all there is.
			r.answered = true
		case !isAnswerTo(r.buf, r.reqID):
			// The mux would skip it as it skips any line it cannot decode,
			// and the caller would wait for an answer that never comes:
			// it is dropped here, and the request failed.
			r.c.log.Warn("dropped an answer that is not valid JSON-RPC", "line", truncate(r.buf, 200))
			r.invalid = true
			r.buf = r.buf[:0]
			return nil
		default:
			r.answered = true
			if r.onAnswer != nil {
				r.onAnswer(r.buf)
			}
		}
	}
	r.buf = append(r.buf, '\n')
	if !r.locked {
		r.c.outMu.Lock()
	}
	_, err := r.c.pw.Write(r.buf)
	r.c.outMu.Unlock()
	r.locked = false
	r.buf = r.buf[:0]
	if cap(r.buf) > 2*remoteHeld {
		r.buf = nil // what a large message grew is not kept for the next
	}
	return err
}

// isAnswerTo reports whether msg is what the mux takes as the answer to
// the request with compact ID id.
func isAnswerTo(msg, id []byte) bool {
	m, err := decodeServerLine(msg)
	return err == nil && m.Method == "" && (m.Result != nil || m.Error != nil) && bytes.Equal(compactRaw(m.ID), id)
}

// abort drops the message under way, if any, and starts afresh: a message
// written in part is ended with a newline, which makes it a line the mux
// skips as invalid.
func (r *msgReader) abort() {
	if r.locked {
		r.c.pw.Write([]byte{'\n'})
		r.c.outMu.Unlock()
		r.locked = false
	}
	r.buf = r.buf[:0]
	r.depth, r.array, r.inMsg, r.inStr, r.esc = 0, false, false, false, false
}

// endValue is called where the messages must be whole: at the end of a JSON
// body or of an event. It reports a message cut off there, and drops it.
func (r *msgReader) endValue() error {
	cut := r.inMsg
	r.abort()
	if cut {
		return errors.New("a message was cut off")
	}
	return nil
}

// readJSON reads a JSON body of messages.
func (r *msgReader) readJSON(body io.Reader) error {
	buf := make([]byte, remoteReadBuf)
	for {
		n, err := body.Read(buf)
		if n > 0 {
			if ferr := r.feed(buf[:n]); ferr != nil {
				r.abort()
				return ferr
			}
		}
		if err == io.EOF {
			return r.endValue()
		}
		if err != nil {
			r.abort()
			return err
		}
	}
}

// readSSE reads an event stream (text/event-stream): the data of each event
// holds messages. Comments and fields other than data and id are ignored;
// lines end with LF or CRLF. It returns nil at the end of the stream, or once
// the request the response is for has been answered (or answered with what
// is not JSON-RPC): a server should end the stream then, and what it would
// still send is no one's. If lastID is not
// nil, it is set to the ID of each event that has one.
func (r *msgReader) readSSE(body io.Reader, lastID *string) error {
	br := bufio.NewReaderSize(body, remoteReadBuf)
	const (
		fieldOther = iota
		fieldData
		fieldID
	)
	field := fieldOther
	lineStart := true
	hasData := false // the event has a data line
	var id []byte
	for {
		piece, err := br.ReadSlice('\n')
		whole := err == nil // piece ends a line
		if err == bufio.ErrBufferFull {
			err = nil
		}
		if err != nil && err != io.EOF {
			r.abort()
			return err
		}
		content := piece
		if whole {
			content = trimEOL(piece)
		}
		if lineStart && len(piece) > 0 {
			switch {
			case whole && len(content) == 0:
				// A blank line ends the event.
				if cerr := r.endValue(); cerr != nil {
					r.c.log.Warn("dropped an event whose data ended inside a message", "err", cerr)
				}
				if id != nil && lastID != nil {
					*lastID = string(id)
				}
				hasData, id = false, nil
				if r.answered || r.invalid {
					return nil
				}
			case content[0] == ':':
				field = fieldOther // a comment
			default:
				name, value, found := bytes.Cut(content, []byte(":"))
				if !found && !whole {
					name = nil // a name longer than the buffer: no field of ours
				}
				content = bytes.TrimPrefix(value, []byte(" "))
				switch string(name) {
				case "data":
					field = fieldData
					if hasData {
						// Data lines are joined by a newline, which is
						// whitespace between JSON tokens.
						if ferr := r.feed([]byte{'\n'}); ferr != nil {
							r.abort()
							return ferr
						}
					}
					hasData = true
				case "id":
					field, id = fieldID, []byte{}
				default:
					field = fieldOther
				}
			}
		}
		switch field {
		case fieldData:
			if ferr := r.feed(content); ferr != nil {
				r.abort()
				return ferr
			}
		case fieldID:
			if len(id)+len(content) <= 1024 && !bytes.ContainsRune(content, 0) {
				id = append(id, content...)
			}
		}
		if whole {
			lineStart, field = true, fieldOther
		} else {
			lineStart = false
		}
		if err == io.EOF {
			// An event the stream ended inside of is dropped.
			r.abort()
			return nil
		}
	}
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

// mcpName returns the Mcp-Name header of a modern request: the tool, prompt
// or resource it is about.
func mcpName(method string, params json.RawMessage) string {
	member := ""
	switch method {
	case "tools/call", "prompts/get":
		member = "name"
	case "resources/read":
		member = "uri"
	default:
		return ""
	}
	var name string
	members(params, func(key string, value []byte) {
		if key == member {
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
