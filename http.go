package main

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// mcpPath is the one endpoint of the Streamable HTTP transport.
const mcpPath = "/mcp"

// httpFrontEnd serves the gateway over Streamable HTTP (MCP 2025-11-25): POST
// for client messages, GET for the session's own stream of notifications,
// DELETE to end a session. Its methods are safe for concurrent use.
type httpFrontEnd struct {
	frontEnd
	streams  atomic.Int64 // open GET streams, for /metrics
	oauth    oauthHolder  // the validator of the "oauth" config in force
	loopback bool         // the listener is on a loopback address: check Host
	draining atomic.Bool  // SIGTERM came: /readyz answers 503, no new session (drain.go)

	sseQueueBytes atomic.Int64 // bounds a legacy SSE stream's queue (ssefront.go); if zero, 16 MiB

	mu       sync.Mutex
	sessions map[string]*httpSession
	closing  chan struct{} // closed when the server shuts down, to end GET streams
}

// httpSession is a session with its stream of notifications.
type httpSession struct {
	id string
	*session
	events chan []byte    // messages for the GET stream, made by eventQueue; dropped when full
	sse    *sseFrontQueue // set for a legacy SSE session (ssefront.go), which /mcp does not serve
	loop   *sessionLoop   // serves a legacy SSE session's calls; set with sse

	lastUsed atomic.Int64 // when the last request came (Unix nanoseconds)
	streams  atomic.Int32 // open GET streams

	mu     sync.Mutex
	stream chan struct{} // closed to end the current GET stream
	ended  chan struct{} // closed when the session ends
}

// busy reports whether the session has a call in flight or an open stream.
func (s *httpSession) busy() bool {
	if s.streams.Load() > 0 {
		return true
	}
	return s.session.inFlight() > 0
}

// sessionEventBuffer is how many unsent notifications a session may hold;
// past it they are dropped (they are list_changed hints, safe to lose).
const sessionEventBuffer = 64

// newHTTPFrontEnd returns the HTTP front end of gw. Loopback says the
// listener is on a loopback address, so that Host headers are checked.
func newHTTPFrontEnd(gw *Gateway, loopback bool, log *slog.Logger) *httpFrontEnd {
	return &httpFrontEnd{frontEnd: frontEnd{gw: gw, log: log}, loopback: loopback,
		sessions: map[string]*httpSession{}, closing: make(chan struct{})}
}

// shutdown ends every GET stream, so that http.Server.Shutdown need not wait
// for them.
func (h *httpFrontEnd) shutdown() {
	h.gw.EndStreams()
	h.mu.Lock()
	defer h.mu.Unlock()
	select {
	case <-h.closing:
	default:
		close(h.closing)
	}
}

// ServeHTTP checks the request's Origin, Host and bearer token, then serves
// /mcp (POST, GET, DELETE), the legacy SSE paths (ssefront.go), /healthz,
// /metrics or the admin API (adminhttp.go). It is safe for concurrent use.
func (h *httpFrontEnd) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h.serveProbe(w, r) { // /readyz, /livez: for anyone, as they are
		return
	}
	if msg := h.checkOrigin(r); msg != "" {
		writeHTTPError(w, http.StatusForbidden, codeInvalidRequest, msg)
		return
	}
	if wantsStatusPage(r) { // a browser at /: the page checks the token itself
		h.serveStatusPage(w, r, endpointURL(r))
		return
	}
	if strings.HasPrefix(r.URL.Path, protectedResourcePath) { // RFC 9728: no token needed
		h.serveResourceMetadata(w, r)
		return
	}
	if _, refused := h.identify(r); refused != nil {
		h.refuse(w, refused)
		return
	}
	if isAdminPath(r.URL.Path) {
		h.serveAdmin(w, r)
		return
	}
	if name, ok := profilePath(r.URL.Path); ok {
		if why := h.checkProfilePath(name); why != "" {
			writeHTTPError(w, http.StatusNotFound, codeInvalidRequest, why)
			return
		}
		if !refuseModernGetDelete(w, r) {
			h.serveMCP(w, r)
		}
		return
	}
	if r.URL.Path == "/healthz" || r.URL.Path == "/metrics" {
		if !h.seesAll(r) {
			writeHTTPError(w, http.StatusForbidden, codeInvalidRequest, r.URL.Path+" tells of every server: it needs authTokenFile's token, or the static token of a client whose profile sees every server")
			return
		}
	}
	switch r.URL.Path {
	case mcpPath:
	case sseFrontPath, sseFrontMessagesPath:
		h.serveLegacySSE(w, r)
		return
	case "/healthz":
		h.serveHealth(w, r)
		return
	case "/metrics":
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		writeMetrics(w, h.gw, h)
		return
	default:
		serveNotFound(w, r, endpointURL(r))
		return
	}
	if refuseModernGetDelete(w, r) {
		return
	}
	h.serveMCP(w, r)
}

// serveMCP serves a request to /mcp, or to a profile's /mcp/NAME, that
// ServeHTTP has authorized: POST, GET or DELETE.
func (h *httpFrontEnd) serveMCP(w http.ResponseWriter, r *http.Request) {
	// A modern POST is checked against its body, which decides its era.
	if v := r.Header.Get(versionHeader); r.Method != http.MethodPost && v != "" && !supportedVersion(v) {
		writeHTTPError(w, http.StatusBadRequest, codeInvalidRequest,
			fmt.Sprintf("unsupported MCP-Protocol-Version %q; corral speaks %s", v, strings.Join(allVersions(), ", ")))
		return
	}
	switch r.Method {
	case http.MethodPost:
		h.servePost(w, r)
	case http.MethodGet:
		h.serveGet(w, r)
	case http.MethodDelete:
		h.serveDelete(w, r)
	default:
		w.Header().Set("Allow", "GET, POST, DELETE")
		writeHTTPError(w, http.StatusMethodNotAllowed, codeInvalidRequest, r.Method+" is not supported on "+mcpPath)
	}
}

// authorized reports whether the request carries the configured bearer
// token or a named client's, compared in constant time, or no token is
// configured.
func (h *httpFrontEnd) authorized(r *http.Request) bool {
	_, ok := h.authenticate(r)
	return ok
}

// authenticate returns who sent r, and whether r may be served (see
// identify).
func (h *httpFrontEnd) authenticate(r *http.Request) (principal, bool) {
	who, refused := h.identify(r)
	return who, refused == nil
}

// identify returns who sent r, or why r may not be served: the named
// client whose token r carries, or the holder of authTokenFile's token
// (each compared in constant time, every one of them whatever matched);
// else, with "oauth", the caller an authorization server's token names
// (oauthPrincipal); anyone, when no token is configured.
func (h *httpFrontEnd) identify(r *http.Request) (principal, *authError) {
	cfg := h.gw.config()
	if !cfg.asksForToken() {
		return anonymousPrincipal, nil
	}
	got, ok := bearerToken(r.Header.Get("Authorization"))
	if !ok {
		return principal{}, &authError{status: http.StatusUnauthorized, msg: "missing bearer token; send Authorization: Bearer TOKEN"}
	}
	client := clientOf(cfg.clientTokens, got)
	operator := cfg.token != "" && subtle.ConstantTimeCompare([]byte(got), []byte(cfg.token)) == 1
	switch {
	case client != "":
		return clientPrincipal(client), nil
	case operator:
		return tokenPrincipal, nil
	case cfg.OAuth != nil:
		return h.oauthPrincipal(r.Context(), cfg, got)
	}
	return principal{}, &authError{status: http.StatusUnauthorized, code: "invalid_token", msg: "wrong bearer token; send Authorization: Bearer TOKEN"}
}

// oauthPrincipal returns the caller of token, an authorization server's
// access token, or why it is refused: 401 for a token that does not pass
// the validator's checks, 403 insufficient_scope for one short of
// oauth.scopes, and 403 for one that oauth.map gives no client.
func (h *httpFrontEnd) oauthPrincipal(ctx context.Context, cfg *Config, token string) (principal, *authError) {
	info, err := h.oauth.validatorFor(cfg.OAuth, h.log).validate(ctx, token)
	if err != nil {
		var ae *authError
		if !errors.As(err, &ae) {
			ae = invalidToken("%v", err)
		}
		return principal{}, ae
	}
	if missing := cfg.OAuth.missingScopes(info); len(missing) > 0 {
		return principal{}, &authError{status: http.StatusForbidden, code: "insufficient_scope",
			msg: fmt.Sprintf("the token does not carry scope %s; ask the authorization server for a token with scope %q", strings.Join(missing, " "), strings.Join(cfg.OAuth.Scopes, " "))}
	}
	client, ok := cfg.OAuth.clientFor(info)
	if !ok {
		return principal{}, &authError{status: http.StatusForbidden,
			msg: fmt.Sprintf("the token is valid, but no rule of oauth.map names a client for it (sub %q, client_id %q) and there is no oauth.defaultClient", info.sub, info.clientID)}
	}
	who := clientPrincipal(client)
	if client == "" {
		who.name = "oauth"
	}
	who.subject, who.oauth = info.sub, true
	return who, nil
}

// refuse answers a request identify refused: its status, a challenge, and
// why. With "oauth" the challenge names corral's resource metadata and the
// scopes a token needs, so that a client can find where to get one.
func (h *httpFrontEnd) refuse(w http.ResponseWriter, e *authError) {
	if o := h.gw.config().OAuth; o != nil {
		if e.code != "" { // never the token itself: why it was refused
			h.log.Debug("refused a bearer token", "status", e.status, "error", e.code, "why", e.msg)
		}
		w.Header().Set("WWW-Authenticate", o.challenge(e))
	} else {
		w.Header().Set("WWW-Authenticate", `Bearer realm="corral"`)
	}
	writeHTTPError(w, e.status, codeInvalidRequest, e.msg)
}

// serveResourceMetadata serves corral's Protected Resource Metadata (RFC
// 9728) at /.well-known/oauth-protected-resource and at its path forms for
// the resource's path, /mcp and /mcp/NAME; 404 without "oauth".
func (h *httpFrontEnd) serveResourceMetadata(w http.ResponseWriter, r *http.Request) {
	o := h.gw.config().OAuth
	rest := strings.TrimPrefix(r.URL.Path, protectedResourcePath)
	_, profile := profilePath(rest)
	known := rest == "" || rest == mcpPath || profile || o != nil && rest == o.resourcePath()
	if o == nil || !known {
		serveNotFound(w, r, endpointURL(r))
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		writeHTTPError(w, http.StatusMethodNotAllowed, codeInvalidRequest, r.Method+" is not supported on "+r.URL.Path+"; GET it")
		return
	}
	body := o.protectedResourceMetadata()
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "max-age=300")
	w.Write(body)
}

// principalOf returns who sent r, a request ServeHTTP has authorized: at
// /mcp/NAME, served profile NAME.
func (h *httpFrontEnd) principalOf(r *http.Request) principal {
	who, _ := h.authenticate(r)
	if name, ok := profilePath(r.URL.Path); ok {
		who = profilePrincipal(who, name)
	}
	return who
}

// profilePath returns the profile a path of the form /mcp/NAME names, and
// whether it is of that form.
func profilePath(path string) (string, bool) {
	name, ok := strings.CutPrefix(path, mcpPath+"/")
	return name, ok && name != "" && !strings.Contains(name, "/")
}

// checkProfilePath returns why the profile path (/mcp/NAME) may not be
// served, or "": profiles are served by path only where no clients are
// configured (a client's token names its profile), and only those in the
// config.
func (h *httpFrontEnd) checkProfilePath(name string) string {
	cfg := h.gw.config()
	switch {
	case len(cfg.Clients) > 0:
		return fmt.Sprintf("%s/%s is not served: clients are configured, and each client's token decides what it sees; use %s", mcpPath, name, mcpPath)
	case cfg.Profiles[name] == nil:
		return fmt.Sprintf("no profile is named %q; the config's profiles are %q", name, profileNames(cfg))
	}
	return ""
}

// seesAll reports whether r's sender may read the pages about every
// server (/metrics, /healthz, the status page): the holder of
// authTokenFile's token, anyone when no token is configured, or a named
// client that sees every server, by its static token (an OAuth caller
// never: those pages keep their own tokens).
func (h *httpFrontEnd) seesAll(r *http.Request) bool {
	who, ok := h.authenticate(r)
	return ok && !who.oauth && who.profile == "" && h.gw.viewOf(who) == nil
}

// bearerToken returns the token of an Authorization header value in the
// Bearer scheme, and whether there is one. The scheme's name is
// case-insensitive (RFC 7235, section 2.1) and one or more spaces follow it
// (RFC 6750, section 2.1).
func bearerToken(header string) (string, bool) {
	scheme, token, _ := strings.Cut(header, " ")
	token = strings.TrimLeft(token, " ")
	return token, strings.EqualFold(scheme, "Bearer") && token != ""
}

// checkOrigin returns why the request must be refused, or "". A page in a
// browser may send requests to a local port; the specification requires the
// Origin check, and the Host check defeats DNS rebinding.
//
// A request with no Host at all passes the Host check: net/http refuses an
// HTTP/1.1 request without one, and a browser always sends one, so it is
// an HTTP/1.0 client such as a load balancer's health check, never a page
// a rebound name sent.
func (h *httpFrontEnd) checkOrigin(r *http.Request) string {
	if h.loopback && r.Host != "" && !isLoopbackHost(hostOnly(r.Host)) {
		return fmt.Sprintf("Host %q is not a loopback name; corral listens on a loopback address and refuses other Host headers (DNS rebinding)", r.Host)
	}
	origin := r.Header.Get("Origin")
	if origin == "" || slices.Contains(h.gw.config().AllowedOrigins, origin) {
		return ""
	}
	if u, err := url.Parse(origin); err == nil && (u.Scheme == "http" || u.Scheme == "https") && isLoopbackHost(u.Hostname()) {
		return ""
	}
	return fmt.Sprintf("Origin %q is not allowed; add it to allowedOrigins in the config to allow it", origin)
}

// hostOnly returns the host of a Host header value, without its port.
func hostOnly(hostport string) string {
	if host, _, err := net.SplitHostPort(hostport); err == nil {
		return host
	}
	return strings.Trim(hostport, "[]")
}

// isLoopbackHost reports whether host is "localhost" or a loopback IP.
func isLoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// servePost serves one message a client POSTs: a modern (2026-07-28)
// request without a session, or a message of a legacy session, which an
// initialize request opens.
func (h *httpFrontEnd) servePost(w http.ResponseWriter, r *http.Request) {
	body, ok := h.readBody(w, r)
	if !ok {
		return
	}
	if isBatch(body) {
		h.serveBatch(w, r, body)
		return
	}
	msg, refused := decodeClientMessage(body)
	if refused != nil {
		writeAnswer(w, http.StatusBadRequest, refused)
		return
	}
	if msg.ID != nil && msg.Method != "" && claimsModern(msg.Params) {
		h.serveModern(w, r, msg)
		return
	}
	if (msg.ID == nil || msg.Method == "") && claimsModernMessage(r.Header.Get(versionHeader), msg) {
		h.serveModernMessage(w, r, msg)
		return
	}
	if !checkLegacyVersion(w, r, msg) {
		return
	}
	s := h.postSession(w, r, msg)
	if s == nil {
		return
	}
	if msg.ID == nil || msg.Method == "" {
		h.gw.handle(r.Context(), s.session, legacyInbound(msg), nil)
		w.WriteHeader(http.StatusAccepted)
		return
	}
	h.serveRequest(w, r, s, legacyInbound(msg))
}

// readBody reads the request's body, up to maxRequestBytes, or writes the
// error and reports false.
func (h *httpFrontEnd) readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	maxBytes := h.gw.config().MaxRequestBytes
	body, err := readBounded(w, r, maxBytes)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeHTTPError(w, http.StatusRequestEntityTooLarge, codeInvalidRequest,
				fmt.Sprintf("request body is over %d bytes (maxRequestBytes)", maxBytes))
			return nil, false
		}
		writeHTTPError(w, http.StatusBadRequest, codeParseError, "reading the request body: "+err.Error())
		return nil, false
	}
	return body, true
}

// checkLegacyVersion checks the MCP-Protocol-Version header of a message
// whose body does not claim the modern era, or writes the error and reports
// false.
func checkLegacyVersion(w http.ResponseWriter, r *http.Request, msg *wireMsg) bool {
	if v := strings.TrimSpace(r.Header.Get(versionHeader)); v == modernVersion && msg.ID != nil {
		// The header claims the modern era, the body does not.
		writeJSONError(w, msg.ID, &wireError{Code: codeInvalidParams,
			Message: fmt.Sprintf("a %s request must carry params._meta with %q and %q", modernVersion, metaVersion, metaCaps)})
		return false
	}
	if v := r.Header.Get(versionHeader); v != "" && !supportedVersion(v) {
		writeHTTPError(w, http.StatusBadRequest, codeInvalidRequest,
			fmt.Sprintf("unsupported MCP-Protocol-Version %q; corral speaks %s", v, strings.Join(allVersions(), ", ")))
		return false
	}
	return true
}

// postSession returns the session a legacy message belongs to: a new one
// for initialize, whose ID goes in the response's header, else the one its
// Mcp-Session-Id names. It writes the error and returns nil when there is
// none.
func (h *httpFrontEnd) postSession(w http.ResponseWriter, r *http.Request, msg *wireMsg) *httpSession {
	if msg.Method != "initialize" {
		return h.lookupSession(w, r)
	}
	if msg.ID == nil {
		writeHTTPError(w, http.StatusBadRequest, codeInvalidRequest, "initialize must be a request, with an id")
		return nil
	}
	if h.refuseWhileDraining(w, "initialize") {
		return nil
	}
	s, why := h.newSession(h.principalOf(r))
	if s == nil {
		writeHTTPError(w, http.StatusServiceUnavailable, codeUnavailable, why+"; end one with DELETE, or try again later")
		return nil
	}
	w.Header().Set("Mcp-Session-Id", s.id)
	return s
}

// serveRequest serves a request of session s: the answer as JSON, or as an
// event stream when the client accepts one and a server sends messages
// related to the request first. An initialize that fails ends the session
// it opened.
func (h *httpFrontEnd) serveRequest(w http.ResponseWriter, r *http.Request, s *httpSession, in *inbound) {
	msg := in.msg
	var answer *reply
	if strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
		var streamed bool
		if answer, streamed = h.call(w, r, s.session, s.id, in, s.session); streamed {
			return
		}
	} else {
		// Messages related to the request go to the session's stream.
		answer = h.gw.handle(r.Context(), s.session, in, nil)
	}
	if answer == nil {
		answer = errorReply(msg.ID, &wireError{Code: codeInternalError, Message: "request cancelled by the client"})
	}
	if msg.Method == "initialize" && answer.result == nil {
		h.endSession(s)
		w.Header().Del("Mcp-Session-Id")
	}
	h.sendAnswer(w, s.session, s.id, msg.ID, answer, func(*reply) int { return http.StatusOK })
}

// sendAnswer writes a, the answer to the request id of session s, as JSON
// with the status status gives it (see writeAnswer). It holds a until it is
// written (frontEnd.hold), and gives the client writeTimeout to take it: past
// that, the write fails and net/http closes the connection. The log names
// the session (sid, "" for a modern request) when a is dropped or not
// taken in time. It blocks until a is written or has failed.
func (h *httpFrontEnd) sendAnswer(w http.ResponseWriter, s *session, sid string, id json.RawMessage, a *reply, status func(*reply) int) {
	held, n := h.hold(s, sid, id, a)
	h.writeDeadline(http.NewResponseController(w))
	err := writeAnswer(w, status(held), held)
	h.written(s, sid, n, held.len(), err)
}

// writeDeadline gives the writes to rc's connection writeTimeout from now:
// a client that does not take them by then has its connection closed. An
// answer, and each event of a stream, sets it before it is written; it
// stays set for the rest of the request (net/http writes what is buffered
// when the handler returns), and net/http clears it before the next request
// of the connection.
func (h *httpFrontEnd) writeDeadline(rc *http.ResponseController) {
	rc.SetWriteDeadline(time.Now().Add(h.gw.config().WriteTimeout.D()))
}

// writeJSONError answers 400 Bad Request with a JSON-RPC error for the
// request with the given id (nil if unknown).
func writeJSONError(w http.ResponseWriter, id json.RawMessage, werr *wireError) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	w.Write(encodeErrorResponse(id, werr))
}

// relatedBuffer is how many messages related to one request (progress, a
// server's requests) may wait for a slow client; past it they are dropped.
const relatedBuffer = 256

// call serves a request whose client accepts an event stream. The answer
// is returned, to be sent as JSON, unless a server sends messages related to
// the request first: then the response becomes an event stream that carries
// them, in order, and then the answer (streamed is true). The stream's
// writer starts with the first such message, so that a plain call costs no
// goroutine; after answers, messages go to after's own stream (if after is
// not nil). A streamed answer is held and written as sendAnswer does; sid
// names the session in the log ("" for a modern request).
func (h *httpFrontEnd) call(w http.ResponseWriter, r *http.Request, s *session, sid string, in *inbound, after *session) (answer *reply, streamed bool) {
	rs := &relatedStream{h: h, w: w, after: after, method: in.msg.Method}
	answer = h.gw.handle(r.Context(), s, in, rs.send)
	if !rs.end() {
		return answer, false
	}
	if answer != nil {
		held, n := h.hold(s, sid, in.msg.ID, answer)
		h.writeDeadline(http.NewResponseController(w))
		_, err := writeSSEFrontReply(w, held) // the handler's return sends the end
		h.written(s, sid, n, held.len(), err)
	}
	return nil, true
}

// relatedStream carries the messages related to one request (see call) to
// its response, which it turns into an event stream with the first one.
// Its fields in one value, rather than variables a closure captures, keep
// a plain call to two allocations here (the value and its send).
type relatedStream struct {
	h      *httpFrontEnd
	w      http.ResponseWriter
	after  *session // takes messages once the request has ended; may be nil
	method string   // the request's, for the log

	mu      sync.Mutex
	rel     chan []byte   // messages for the stream; made by the first one
	wrote   chan struct{} // closed when the writer has written them all
	ended   bool          // the request has ended: messages go to after
	dropped int           // messages dropped for a slow client: logged once, then counted
}

// send passes m to the stream, starting its writer with the first message.
// It does not block, and is safe for concurrent use.
func (rs *relatedStream) send(m []byte) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.ended {
		if rs.after != nil {
			rs.after.send(m) // the request has ended: the session's own stream
		}
		return
	}
	if rs.rel == nil {
		rs.rel, rs.wrote = make(chan []byte, relatedBuffer), make(chan struct{})
		go rs.write(rs.rel, rs.wrote)
	}
	select {
	case rs.rel <- m:
	default:
		if rs.dropped == 0 {
			rs.h.log.Warn("dropping messages related to a request: the client reads too slowly", "method", rs.method)
		}
		rs.dropped++
	}
}

// write writes the messages of rel as events, flushing each, and a
// heartbeat every heartbeatInterval (a subscriptions/listen stream is
// otherwise silent for as long as nothing changes), until rel is closed,
// then closes wrote. end owns it and waits for it.
func (rs *relatedStream) write(rel <-chan []byte, wrote chan<- struct{}) {
	defer close(wrote)
	rs.w.Header().Set("Content-Type", "text/event-stream")
	rs.w.Header().Set("Cache-Control", "no-cache")
	rs.w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(rs.w)
	beat, stop := rs.h.heartbeats()
	defer stop()
	var err error
	for {
		select {
		case m, ok := <-rel:
			if !ok {
				return
			}
			if err != nil {
				continue // the client is gone or did not read: drain rel
			}
			rs.h.writeDeadline(rc)
			if _, err = writeSSE(rs.w, m); err == nil {
				err = rc.Flush()
			}
		case <-beat:
			if err == nil {
				err = rs.h.writeHeartbeat(rs.w, rc)
			}
		}
	}
}

// end marks the request ended, waits for the stream's writer, if any, to
// have written every message, and reports whether the response became a
// stream.
func (rs *relatedStream) end() bool {
	rs.mu.Lock()
	rs.ended = true
	if rs.dropped > 1 {
		rs.h.log.Warn("dropped messages related to a request: the client read too slowly", "method", rs.method, "count", rs.dropped)
	}
	rel := rs.rel
	rs.mu.Unlock()
	if rel == nil {
		return false
	}
	close(rel)
	<-rs.wrote
	return true
}

// serveModern serves a modern (2026-07-28) request: no session, headers
// that must agree with the body, the answer as JSON or, when the server
// sends progress first, as an event stream; closing it cancels the request.
func (h *httpFrontEnd) serveModern(w http.ResponseWriter, r *http.Request, msg *wireMsg) {
	answer := func(status int, a *reply) { writeAnswer(w, status, a) }
	// The headers first: a version in the header that is not the body's is
	// a mismatch, whatever the version.
	if werr := checkModernHeaders(r.Header.Get, msg); werr != nil {
		answer(http.StatusBadRequest, errorReply(msg.ID, werr))
		return
	}
	in, werr := inboundOf(msg) // modern: servePost saw its params claim it
	if werr != nil {
		answer(modernStatus(errorReply(nil, werr)), errorReply(msg.ID, werr))
		return
	}
	s := h.gw.sessions.detachedSession(h.principalOf(r))
	a, streamed := h.call(w, r, s, "", in, nil)
	if streamed {
		return
	}
	if a == nil {
		return // the client went away, which cancelled the request
	}
	h.sendAnswer(w, s, "", msg.ID, a, modernStatus)
}

// session returns the session whose ID is id, or nil.
func (h *httpFrontEnd) session(id string) *httpSession {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.sessions[id]
}

// lookupSession returns the session named by the request's Mcp-Session-Id, or
// writes the error the specification asks for and returns nil.
func (h *httpFrontEnd) lookupSession(w http.ResponseWriter, r *http.Request) *httpSession {
	id := r.Header.Get("Mcp-Session-Id")
	if id == "" {
		writeHTTPError(w, http.StatusBadRequest, codeInvalidRequest, "missing Mcp-Session-Id header; send initialize first to open a session")
		return nil
	}
	s := h.session(id)
	if s == nil {
		if why := h.wrongReplica(id, "Mcp-Session-Id"); why != "" {
			writeHTTPError(w, http.StatusNotFound, codeInvalidRequest, why)
			return nil
		}
	}
	if s == nil || s.sse != nil || !h.owns(r, s) {
		writeHTTPError(w, http.StatusNotFound, codeInvalidRequest, "unknown or ended session; send initialize to open a new one")
		return nil
	}
	s.lastUsed.Store(time.Now().UnixNano())
	return s
}

// owns reports whether s, an open session, is one the sender of r may use:
// it was opened by the same principal (another client's session ID is
// unknown to it), and has not been ended under the front end (a reload
// that removed its client ends it: then it is ended here too).
func (h *httpFrontEnd) owns(r *http.Request, s *httpSession) bool {
	if s.hasEnded() {
		h.endSession(s)
		return false
	}
	return s.who == h.principalOf(r)
}

// newSession opens a session of who's, or returns nil and why not when
// maxSessions are open, or its client's (see addSession).
func (h *httpFrontEnd) newSession(who principal) (*httpSession, string) {
	s := &httpSession{}
	return h.addSession(s, who, func(msg []byte) {
		select {
		case s.eventQueue() <- msg:
		default:
		}
	})
}

// addSession gives s a new random id that names the replica
// (newReplicaID), marks it used now and registers it,
// then opens its gateway session, which sends s's messages to deliver. It
// returns s, or nil (s not registered, no gateway session) and why not
// when maxSessions are open, or the maxSessions of the profile of who's
// client are open of that client's. Both front ends (Streamable HTTP and
// legacy SSE) open sessions through it, so that they count against one
// maxSessions.
func (h *httpFrontEnd) addSession(s *httpSession, who principal, deliver func(msg []byte)) (*httpSession, string) {
	s.id = newReplicaID(h.gw.config().Replica)
	s.ended = make(chan struct{})
	s.lastUsed.Store(time.Now().UnixNano())
	cfg := h.gw.config()
	lim, limited := limitsOf(cfg, who)
	limited = limited && lim.maxSessions > 0
	h.mu.Lock()
	if len(h.sessions) >= cfg.MaxSessions {
		h.mu.Unlock()
		return nil, fmt.Sprintf("too many sessions: %d are open, the limit (maxSessions)", cfg.MaxSessions)
	}
	if limited {
		n := 0
		for _, o := range h.sessions {
			if o.who.client == who.client {
				n++
			}
		}
		if n >= lim.maxSessions {
			h.mu.Unlock()
			h.gw.clients.refuseSession(who.client)
			return nil, fmt.Sprintf("too many sessions: client %q has %d open, the limit (profiles.%s.maxSessions)", who.client, n, quoteName(lim.profile))
		}
	}
	h.sessions[s.id] = s
	h.mu.Unlock()
	s.session = h.gw.sessions.newSession(deliver, who, s.id)
	return s, ""
}

// eventQueue returns the queue of messages for the session's GET stream,
// made with the first message or stream: most sessions never have either,
// and the queue (sessionEventBuffer messages) would be over half of an idle
// session's memory. It is safe for concurrent use.
func (s *httpSession) eventQueue() chan []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.events == nil {
		s.events = make(chan []byte, sessionEventBuffer)
	}
	return s.events
}

// expireIdle ends the sessions that, at now, have been idle (no request, no
// call in flight, no open stream) for longer than sessionIdleTimeout, and
// returns how many it ended.
func (h *httpFrontEnd) expireIdle(now time.Time) int {
	cut := now.Add(-h.gw.config().SessionIdleTimeout.D()).UnixNano()
	h.mu.Lock()
	var idle []*httpSession
	for _, s := range h.sessions {
		if s.lastUsed.Load() < cut && !s.busy() {
			idle = append(idle, s)
		}
	}
	h.mu.Unlock()
	for _, s := range idle {
		h.endSession(s)
	}
	return len(idle)
}

// expireLoop runs expireIdle every so often until done is closed.
func (h *httpFrontEnd) expireLoop(done <-chan struct{}) {
	every := min(h.gw.config().SessionIdleTimeout.D()/4, time.Minute)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case now := <-t.C:
			if n := h.expireIdle(now); n > 0 {
				h.log.Info("ended idle sessions", "count", n, "idleFor", h.gw.config().SessionIdleTimeout.D())
			}
		case <-done:
			return
		}
	}
}

// endSession ends s, if it is still open, with the gateway's session under
// it, and ends its GET stream. It may be called twice.
func (h *httpFrontEnd) endSession(s *httpSession) {
	h.mu.Lock()
	_, ok := h.sessions[s.id]
	delete(h.sessions, s.id)
	h.mu.Unlock()
	if ok {
		h.gw.sessions.endSession(s.session)
		close(s.ended)
	}
}

// serveDelete ends the session the request names.
func (h *httpFrontEnd) serveDelete(w http.ResponseWriter, r *http.Request) {
	if s := h.lookupSession(w, r); s != nil {
		h.endSession(s)
		w.WriteHeader(http.StatusNoContent)
	}
}

// serveGet streams the session's notifications as server-sent events until
// the client goes away, the session ends, another GET takes over, or corral
// shuts down.
func (h *httpFrontEnd) serveGet(w http.ResponseWriter, r *http.Request) {
	if !strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
		writeHTTPError(w, http.StatusNotAcceptable, codeInvalidRequest, "GET opens an event stream; send Accept: text/event-stream")
		return
	}
	s := h.lookupSession(w, r)
	if s == nil {
		return
	}
	if max := h.gw.config().MaxStreams; h.streams.Load() >= int64(max) {
		writeHTTPError(w, http.StatusServiceUnavailable, codeUnavailable, fmt.Sprintf("too many event streams: %d are open, the limit (maxStreams)", max))
		return
	}
	mine := s.takeStream()
	h.streams.Add(1)
	defer h.streams.Add(-1)
	s.streams.Add(1)
	defer s.streams.Add(-1)
	h.stream(w, r, s, mine)
}

// takeStream makes a new GET the session's stream, and returns the channel
// closed when another GET takes over. One stream per session: a new GET
// replaces the old one, so that a client that reconnects is not refused
// while the old connection lingers.
func (s *httpSession) takeStream() <-chan struct{} {
	mine := make(chan struct{})
	s.mu.Lock()
	if s.stream != nil {
		close(s.stream)
	}
	s.stream = mine
	s.mu.Unlock()
	return mine
}

// stream writes the session's events to w until a write fails, another GET
// takes over (mine is closed), the session ends, corral shuts down or the
// client goes away.
func (h *httpFrontEnd) stream(w http.ResponseWriter, r *http.Request, s *httpSession, mine <-chan struct{}) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	h.writeDeadline(rc)
	rc.Flush()
	events := s.eventQueue()
	gone := s.session.goneChan()
	beat, stop := h.heartbeats()
	defer stop()
	for {
		select {
		case <-beat:
			if h.writeHeartbeat(w, rc) != nil {
				return
			}
		case msg := <-events:
			h.writeDeadline(rc)
			if _, err := writeSSE(w, msg); err != nil {
				return
			}
			if err := rc.Flush(); err != nil {
				h.written(s.session, s.id, 0, len(msg), err)
				return
			}
		case <-mine:
			return
		case <-s.ended:
			return
		case <-gone: // ended by a reload that removed its client
			h.endSession(s)
			return
		case <-h.closing:
			return
		case <-r.Context().Done():
			return
		}
	}
}

// writeSSE writes one message as a server-sent event. A JSON message holds no
// newline, so it fits one data line.
func writeSSE(w io.Writer, msg []byte) (int, error) {
	return fmt.Fprintf(w, "event: message\ndata: %s\n\n", msg)
}

// serveHealth writes the gateway's health report as JSON, with 200: its
// status says whether every server is ready. One server down does not make
// the replica unwell (a balancer or orchestrator reading the status would
// take every server's calls away for one server's crash); /readyz says
// whether to send it new sessions.
func (h *httpFrontEnd) serveHealth(w http.ResponseWriter, r *http.Request) {
	report, _ := h.gw.health()
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(report)
}

// writeHTTPError answers with an HTTP status and a JSON-RPC error body.
func writeHTTPError(w http.ResponseWriter, status, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(encodeErrorResponse(nil, &wireError{Code: code, Message: msg}))
}

// newHTTPServer returns the http.Server for h, with the limits of the
// config in force.
func newHTTPServer(h *httpFrontEnd, log *slog.Logger) *http.Server {
	cfg := h.gw.config()
	return &http.Server{
		Handler: h,
		// Against clients that send slowly (slowloris) or too much.
		ReadHeaderTimeout: cfg.ReadHeaderTimeout.D(),
		ReadTimeout:       cfg.ReadTimeout.D(),
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    cfg.MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
}

// serveHTTP serves the gateway on ln until ctx ends, then shuts the server
// down: it stops accepting, lets requests in flight finish for at most drain
// (or until skip ends), and then cuts the rest off.
func serveHTTP(ctx, skip context.Context, drain time.Duration, ln net.Listener, h *httpFrontEnd, log *slog.Logger) error {
	srv := newHTTPServer(h, log)
	srv.RegisterOnShutdown(h.shutdown)
	expired := make(chan struct{})
	go func() { defer close(expired); h.expireLoop(h.closing) }()
	defer func() { h.shutdown(); <-expired }()
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	h.drain(skip)
	drainCtx, cancel := context.WithTimeout(skip, drain)
	defer cancel()
	if err := srv.Shutdown(drainCtx); err != nil {
		// Answer the calls still in flight with an error, give their
		// handlers a moment to write it, then close what is left.
		log.Warn("calls still in flight at the end of shutdownTimeout are cut off")
		h.gw.CutOff()
		ctx, cancel := context.WithTimeout(skip, time.Second)
		defer cancel()
		if srv.Shutdown(ctx) != nil {
			srv.Close()
		}
	}
	<-errc
	return nil
}

// sessionUnsent returns how many answers of the session id wait to be
// written to its client, and their bytes; none if there is no such session.
func (h *httpFrontEnd) sessionUnsent(id string) (count int, bytes int64) {
	h.mu.Lock()
	s := h.sessions[id]
	h.mu.Unlock()
	if s == nil {
		return 0, 0
	}
	return s.unsent()
}
