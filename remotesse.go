package main

// This file holds the connection to a remote server that speaks only the
// HTTP+SSE transport of 2024-11-05: the client opens the server's event
// stream (GET); its first event, "endpoint", names the URL to POST messages
// to; every message of the server, answers included, comes on the stream as
// a "message" event.

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// sseEndpointWait bounds the wait for the endpoint event, which a server
// sends as soon as the stream opens, before a message can be posted.
const sseEndpointWait = 10 * time.Second

// sseConn speaks the HTTP+SSE transport of 2024-11-05 to one remote MCP
// server, as a msgConn. The first message written opens the server's event
// stream; messages wait until its endpoint event has named where they are
// posted, then are posted there one at a time, in order, each by the call
// of WriteMessage that writes it (a server that does not take them holds up
// the writer, as a child that does not read its stdin does). The server's
// messages all come on the stream, each bounded as a remoteConn bounds them
// (a message over maxLine fails the one request it answers). The stream's
// end is the connection's: a new stream is a new session, which the
// backend opens by starting the server again, with backoff.
//
// Delivering the server's messages, ending the connection and joining its
// goroutines are the work of rc, a remoteConn that never posts. The methods
// of an sseConn are safe for concurrent use.
type sseConn struct {
	rc           *remoteConn
	endpointWait time.Duration // if zero, sseEndpointWait

	openOnce sync.Once
	endpoint chan struct{} // closed once post is set
	post     string        // where messages are posted; set once, by the stream's reader
}

// dialLink returns a connection to the remote server cfg of config gcfg,
// over the transport cfg names, with client and log as dialRemote's. It
// does no I/O until a message is written.
func dialLink(cfg *ServerConfig, gcfg *Config, client *http.Client, log *slog.Logger) remoteLink {
	rc := dialRemote(cfg.Name(), cfg.URL, cfg.Headers, client, log)
	rc.maxLine, rc.closeGrace = int(gcfg.MaxLineBytes), gcfg.StopGrace.D()
	if cfg.Type == "sse" {
		return newSSEConn(rc)
	}
	return rc
}

// newSSEConn returns a connection to the server at rc's URL, its event
// stream, with rc's headers, client, limits and log. It takes rc over: the
// caller uses only the sseConn. It does no I/O until a message is written.
func newSSEConn(rc *remoteConn) *sseConn {
	return &sseConn{rc: rc, endpoint: make(chan struct{})}
}

// WriteMessage posts msg, one JSON-RPC message, to the server's endpoint,
// once the event stream has named it, and returns when the server has
// answered the POST. A request the server refuses (an HTTP error) or cannot
// be posted is failed with an answer that says why; the connection goes on.
// WriteMessage fails with Err once the connection is over, and ends it if
// the stream names no endpoint within endpointWait.
func (c *sseConn) WriteMessage(msg []byte) error {
	if len(bytes.TrimSpace(msg)) == 0 {
		return nil
	}
	if err := c.rc.Err(); err != nil {
		return err
	}
	select {
	case <-c.endpoint:
	default:
		if err := c.awaitEndpoint(); err != nil {
			return err
		}
	}
	c.postMessage(msg)
	return nil
}

// awaitEndpoint opens the event stream, once, and waits until it has named
// the endpoint, or the connection is over; it ends the connection if the
// stream names none within endpointWait.
func (c *sseConn) awaitEndpoint() error {
	c.openOnce.Do(c.open)
	wait := c.endpointWait
	if wait == 0 {
		wait = sseEndpointWait
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-c.endpoint:
		return nil
	case <-c.rc.done:
	case <-t.C:
		c.rc.fail(fmt.Errorf("server %q (%s): its event stream named no endpoint to post messages to within %s; is it an HTTP+SSE server (type \"sse\")? A Streamable HTTP server's type is \"http\"",
			c.rc.name, c.rc.shown, wait))
	}
	return c.rc.Err()
}

// ReadMessage returns the server's next message, as remoteConn's does.
func (c *sseConn) ReadMessage() ([]byte, error) { return c.rc.ReadMessage() }

// Done returns a channel closed when the connection is over: closed, or
// its event stream ended.
func (c *sseConn) Done() <-chan struct{} { return c.rc.Done() }

// Err returns why the connection is over, naming the server and its URL, or
// nil while it is not.
func (c *sseConn) Err() error { return c.rc.Err() }

// Close ends the connection: it closes the event stream, which ends the
// session, aborts the POST under way, ends ReadMessage with EOF, and returns
// once every goroutine of the connection has returned. It may be called
// more than once.
func (c *sseConn) Close() error { return c.rc.Close() }

// open starts reading the event stream, unless the connection is over.
func (c *sseConn) open() { c.rc.goUnlessOver(c.stream) }

// stream reads the event stream until it ends, then ends the connection
// with why.
func (c *sseConn) stream() {
	err := c.readStream()
	if c.rc.ctx.Err() != nil {
		return // closed
	}
	c.rc.log.Warn("the event stream of the HTTP+SSE server ended; the session is over", "err", err)
	c.rc.fail(fmt.Errorf("server %q (%s): %v", c.rc.name, c.rc.shown, err))
}

// readStream opens the event stream and delivers its messages until it
// ends, and returns why it ended.
func (c *sseConn) readStream() error {
	rc := c.rc
	req, err := http.NewRequestWithContext(rc.ctx, http.MethodGet, rc.url, nil)
	if err != nil {
		return fmt.Errorf("cannot be reached: its URL is invalid")
	}
	rc.setHeaders(req, "text/event-stream", "", "")
	resp, err := rc.client.Do(req)
	if err != nil {
		return fmt.Errorf("cannot be reached: %v", bareError(err))
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode != http.StatusOK:
		body, _ := io.ReadAll(io.LimitReader(resp.Body, remoteErrorBody))
		what := "its event stream answered HTTP " + statusText(resp.StatusCode)
		if s := strings.TrimSpace(strings.ToValidUTF8(string(body[:min(len(body), 200)]), "")); s != "" {
			what += ": " + s
		}
		switch resp.StatusCode {
		case http.StatusBadRequest, http.StatusNotFound, http.StatusMethodNotAllowed:
			what += `; if it is a Streamable HTTP server, its type is "http"`
		}
		return errors.New(what)
	case mediaType(resp.Header.Get("Content-Type")) != "text/event-stream":
		return fmt.Errorf("its event stream answered with Content-Type %q, not text/event-stream; is it a Streamable HTTP server (type \"http\")?",
			resp.Header.Get("Content-Type"))
	}
	r := &msgReader{c: rc, onEvent: c.event}
	switch err := r.readSSE(resp.Body, nil); {
	case err == nil:
		return fmt.Errorf("the server ended its event stream, and with it the session")
	case errors.Is(err, errTooBig):
		return fmt.Errorf("sent a message over the %d-byte limit on its event stream", rc.maxMessage)
	case errors.Is(err, errNotMessage) || errors.Is(err, errLineBreak):
		return fmt.Errorf("sent what is not JSON-RPC on its event stream: %v", err)
	default:
		return fmt.Errorf("its event stream broke off: %v", bareError(err))
	}
}

// event handles an event of the stream other than a message: the endpoint
// event, the first, names the URL messages are posted to, relative to the
// stream's. It is called by the stream's reader alone.
func (c *sseConn) event(name string, data []byte) error {
	if name != "endpoint" {
		c.rc.log.Debug("ignoring an event of the HTTP+SSE server's stream", "event", truncate([]byte(name), 64))
		return nil
	}
	select {
	case <-c.endpoint:
		c.rc.log.Debug("ignoring a second endpoint event; messages go where the first said", "endpoint", shownURL(c.post))
		return nil
	default:
	}
	post, err := c.resolve(data)
	if err != nil {
		return err
	}
	c.post = post
	close(c.endpoint)
	c.rc.log.Debug("the HTTP+SSE server named its endpoint", "endpoint", shownURL(post))
	return nil
}

// resolve returns the URL the endpoint event's data names, resolved
// against the stream's URL. It must have the stream's origin: the headers
// configured for the server (often its credentials) go nowhere else.
func (c *sseConn) resolve(data []byte) (string, error) {
	base, err := url.Parse(c.rc.url)
	if err != nil {
		return "", fmt.Errorf("cannot be reached: its URL is invalid")
	}
	ref, err := url.Parse(strings.TrimSpace(string(data)))
	if err != nil {
		return "", fmt.Errorf("its endpoint event names %q, which is not a URL: %v", truncate(data, 200), err)
	}
	u := base.ResolveReference(ref)
	if origin(u) != origin(base) {
		return "", fmt.Errorf("its endpoint event names %s, of another origin than its event stream (%s); corral posts messages only to the origin (scheme, host and port) of the url configured, so that its headers go nowhere else",
			shownURL(u.String()), origin(base))
	}
	return u.String(), nil
}

// origin returns the origin of u: its scheme, host and port, lower case,
// with the scheme's default port if it names none.
func origin(u *url.URL) string {
	scheme, port := strings.ToLower(u.Scheme), u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[scheme]
	}
	return scheme + "://" + strings.ToLower(u.Hostname()) + ":" + port
}

// postMessage posts msg to the endpoint, and fails the request it is, if
// it is one, when the server does not take it. A POST answered 404 means
// the server no longer knows the session: the connection is over.
func (c *sseConn) postMessage(msg []byte) {
	rc := c.rc
	o := &outgoing{}
	if m, err := decodeServerLine(msg); err == nil {
		o.method = m.Method
		if m.Method != "" && m.ID != nil {
			o.id = compactRaw(m.ID)
		}
	}
	req, err := http.NewRequestWithContext(rc.ctx, http.MethodPost, c.post, bytes.NewReader(msg))
	if err != nil {
		rc.failed(o, "cannot be reached: its endpoint is not a URL")
		return
	}
	rc.setHeaders(req, "", "", "")
	req.Header.Set("Content-Type", "application/json")
	resp, err := rc.client.Do(req)
	if err != nil {
		if rc.ctx.Err() == nil {
			rc.failed(o, fmt.Sprintf("cannot be reached: %v", bareError(err)))
		}
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		io.Copy(io.Discard, io.LimitReader(resp.Body, remoteErrorBody)) // the answer comes on the stream
		return
	}
	rc.httpError(o, resp)
	if resp.StatusCode == http.StatusNotFound {
		rc.fail(fmt.Errorf("server %q (%s): the server no longer knows the session (a POST to its endpoint answered HTTP %s)",
			rc.name, rc.shown, statusText(resp.StatusCode)))
	}
}
