package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
)

// session is one client's conversation with the gateway, over whatever front
// end: its calls in flight, the servers' requests waiting for its answers
// (its outbound queue) and the log level it asked for. Its methods are safe
// for concurrent use.
//
// Lock order: a session's mu is taken under sessionSet.mu, under the HTTP
// front end's mu (httpFrontEnd.expireIdle) and under an instancePool's mu,
// never the other way round. It is held only to read or change the
// session's fields; the one lock taken under it is callingSessions.mu
// (admit, retire), a leaf.
type session struct {
	// notify sends a message the client did not ask for (a list_changed
	// notification). It must not block. If nil, such messages are dropped.
	notify func(msg []byte)

	// who sent the session's requests, set by the front end that opened
	// it; never changed (principal.go).
	who principal
	// id is the session's ID for its front end ("" for -stdio and a
	// modern request's), which the audit trail writes; never changed.
	id string

	mu              sync.Mutex
	initialized     bool // initialize was answered: notifications may follow
	acknowledged    bool // the client sent notifications/initialized: requests may follow
	protocolVersion string
	clientCaps      capabilities                       // what the client declared in initialize
	logLevel        string                             // set by logging/setLevel; "" if never
	inflight        map[string]context.CancelCauseFunc // by the client's raw request ID
	cancelled       map[string]bool                    // requests the client cancelled
	nextOut         int64                              // the last ID of a request corral sent the client
	outbound        map[int64]*outbound                // requests of servers waiting for the client's answer
	ended           bool                               // endSession was called: nothing more is sent
	gone            chan struct{}                      // closed when ended, if made (see goneChan)
	unsentCount     int                                // answers of its calls waiting to be written to the client
	unsentBytes     int64                              // their bytes
	found           []string                           // in search mode, the tools find_tools found, oldest first (search.go)
}

// makeSession returns a session of who's that sends what the client did not
// ask for to notify (see session.notify). It is registered nowhere.
func makeSession(notify func([]byte), who principal) *session {
	return &session{notify: notify, who: who, inflight: map[string]context.CancelCauseFunc{},
		cancelled: map[string]bool{}, outbound: map[int64]*outbound{}}
}

// send passes a message the client did not ask for to notify, if any. It
// does not block.
func (s *session) send(msg []byte) {
	if s.notify != nil {
		s.notify(msg)
	}
}

// addFound adds the names of tools find_tools found to those the session's
// tools/list shows in search mode, keeping the last max of them, and
// reports whether any was new.
func (s *session) addFound(names []string, max int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	added := false
	for _, n := range names {
		if !slices.Contains(s.found, n) {
			s.found = append(s.found, n)
			added = true
		}
	}
	if len(s.found) > max {
		s.found = slices.Delete(s.found, 0, len(s.found)-max)
	}
	return added
}

// foundTools returns the names addFound keeps, oldest first.
func (s *session) foundTools() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.found)
}

// wasCancelled reports whether the client cancelled its request key.
func (s *session) wasCancelled(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cancelled[key]
}

// cancelRequest cancels the client's request key, if it is in flight, and
// remembers that the client cancelled it: it wants no answer.
func (s *session) cancelRequest(key string) {
	s.mu.Lock()
	cancel := s.inflight[key]
	if cancel != nil {
		s.cancelled[key] = true
	}
	s.mu.Unlock()
	if cancel != nil {
		cancel(context.Canceled)
	}
}

// enqueue records o, a server's request for the client, in the session's
// outbound queue under a new ID of the session's (set in o.out). It fails
// when the session has ended or max requests already wait.
func (s *session) enqueue(o *outbound, max int) *wireError {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return &wireError{Code: codeInternalError, Message: "the client's session has ended"}
	}
	if n := len(s.outbound); n >= max {
		return unavailable("%d requests of servers wait for the client's answers, the limit (maxServerRequestsPerSession); corral refuses more until some are answered", n)
	}
	s.nextOut++
	o.out = s.nextOut
	s.outbound[o.out] = o
	return nil
}

// take removes and returns the request waiting under the session's ID id,
// or nil.
func (s *session) take(id int64) *outbound {
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.outbound[id]
	delete(s.outbound, id)
	return o
}

// forget removes o from the requests waiting for the session's answers,
// and reports whether the session has ended.
func (s *session) forget(o *outbound) (ended bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.outbound[o.out] == o {
		delete(s.outbound, o.out)
	}
	return s.ended
}

// about returns the requests waiting for the session's answers that are
// about the client's call rel.
func (s *session) about(rel *related) []*outbound {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*outbound
	for _, o := range s.outbound {
		if o.rel == rel {
			out = append(out, o)
		}
	}
	return out
}

// version returns the protocol version the session agreed in initialize,
// or "" if it never did (a 2026-07-28 request's session).
func (s *session) version() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.protocolVersion
}

// client returns what the client declared in initialize and the least
// severe log level it asked for ("" if it never did).
func (s *session) client() (caps capabilities, logLevel string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.clientCaps, s.logLevel
}

// goneChan returns a channel closed when the session ends, for a front
// end's stream to wait on: a reload that removes the session's client ends
// it from under its front end. It is made at the first call: most sessions
// never have a stream. It is safe for concurrent use.
func (s *session) goneChan() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gone == nil {
		s.gone = make(chan struct{})
		if s.ended {
			close(s.gone)
		}
	}
	return s.gone
}

// acknowledge records that the client sent notifications/initialized: it
// is ready for requests of servers.
func (s *session) acknowledge() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.acknowledged = true
}

// hasEnded reports whether end was called.
func (s *session) hasEnded() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ended
}

// admit records the client's request key as in flight, with cancel to
// cancel it, unless the session already has max in flight or one with the
// same key. It returns the number in flight before, and whether key was in
// flight already; the call is admitted when neither stops it. The first
// call in flight adds the session to calling, under the session's mu, so
// that calling holds exactly the sessions with calls in flight.
func (s *session) admit(key string, cancel context.CancelCauseFunc, max int, calling *callingSessions) (n int, dup bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n = len(s.inflight)
	_, dup = s.inflight[key]
	if n < max && !dup {
		if n == 0 {
			calling.add(s)
		}
		s.inflight[key] = cancel
	}
	return n, dup
}

// retire forgets the client's request key, once it has ended; the last
// call in flight removes the session from calling.
func (s *session) retire(key string, calling *callingSessions) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.inflight, key)
	delete(s.cancelled, key)
	if len(s.inflight) == 0 {
		calling.remove(s)
	}
}

// cancelCalls cancels every call in flight with cause.
func (s *session) cancelCalls(cause error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, cancel := range s.inflight {
		cancel(cause)
	}
}

// waiting returns the number of requests of servers waiting for the
// session's answers.
func (s *session) waiting() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.outbound)
}

// end marks the session ended and cancels its calls in flight. It returns
// the requests of servers still waiting for its answers (its queue is then
// empty) and the log level it had asked for. Calling it twice returns no
// requests the second time.
func (s *session) end() (waiting map[int64]*outbound, level string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.ended && s.gone != nil {
		close(s.gone)
	}
	s.ended = true
	for _, cancel := range s.inflight {
		cancel(context.Canceled)
	}
	waiting = s.outbound
	s.outbound = map[int64]*outbound{}
	return waiting, s.logLevel
}

// sessionSet is the gateway's sessions: it opens and ends them, answers
// their initialize and logging/setLevel, passes the servers' log messages to
// those that asked for them, admits their calls until CutOff (cutoff.go) and
// bounds the answers waiting to be written to their clients (unsent.go). The
// sessions it holds are those that hear of changes: catalog changes,
// servers' log messages, resource updates (through subscriptions). Its
// config, cut and hooks are set by newSessionSet and never changed; calling
// and unsent keep their own counts. Its methods are safe for concurrent use.
//
// Lock order: sessionSet.mu, then a session's mu, under which calling's mu
// is taken (session.admit, session.retire), a leaf. None of them is held
// while a hook is called, a session is sent a message or a server is told
// a log level.
type sessionSet struct {
	config  func() *Config  // the config in force (the bounds of unsent answers)
	cut     context.Context // ends when CutOff begins (see Gateway.CutOff)
	hooks   sessionHooks    // what the sessions need of the rest of the gateway
	calling callingSessions // the sessions with calls in flight (cutoff.go)
	unsent  unsentBytes     // the bytes of answers waiting to be written to clients (unsent.go)

	mu     sync.Mutex
	all    map[*session]struct{}
	closed bool // the gateway is stopping: no session hears of catalog changes
}

// sessionHooks are what the sessions need of the rest of the gateway. Only
// initialize, setLogLevel and endSession call them: a set whose users call
// none of those (a test's) may be given none.
type sessionHooks struct {
	// waitFirstStarts blocks, until ctx ends, while servers are in their
	// first start; capabilities and instructions then return what corral
	// offers clients (offer.go). initialize answers with them.
	waitFirstStarts func(ctx context.Context)
	capabilities    func(v *view) map[string]any
	instructions    func(v *view) string

	// viewOf returns the view of who in the config in force
	// (Gateway.viewOf): initialize offers, and serverLog passes on, only
	// what it sees. If nil, every principal sees everything.
	viewOf func(who principal) *view

	// backends returns the backends in force, each of which applyLogLevel
	// tells the level the sessions want; scopedLogLevels asks each
	// session's process of a session-scoped server for its session's level.
	backends        func() []*backend
	scopedLogLevels func()

	// endScoped, unsubscribeAll and forgetTasks end what an ended session
	// leaves behind: its processes of session-scoped servers, its
	// subscriptions and its tasks. endSession calls them, in that order,
	// after the session has ended.
	endScoped      func(s *session)
	unsubscribeAll func(s *session)
	forgetTasks    func(s *session)
}

// newSessionSet returns an empty set whose bounds are config's, whose calls
// admitted once cut has ended are cut off at once, and which needs of the
// rest of the gateway what hooks give it.
func newSessionSet(config func() *Config, cut context.Context, hooks sessionHooks) *sessionSet {
	return &sessionSet{config: config, cut: cut, hooks: hooks, all: map[*session]struct{}{}}
}

// add registers s.
func (ss *sessionSet) add(s *session) {
	ss.mu.Lock()
	ss.all[s] = struct{}{}
	ss.mu.Unlock()
}

// countByName returns the number of sessions registered of each
// principal, by its name.
func (ss *sessionSet) countByName() map[string]int {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	n := map[string]int{}
	for s := range ss.all {
		n[s.who.name]++
	}
	return n
}

// remove forgets s. It may be called twice.
func (ss *sessionSet) remove(s *session) {
	ss.mu.Lock()
	delete(ss.all, s)
	ss.mu.Unlock()
}

// close makes initialized return no session from now on. It may be called
// twice.
func (ss *sessionSet) close() {
	ss.mu.Lock()
	ss.closed = true
	ss.mu.Unlock()
}

// count returns the number of sessions.
func (ss *sessionSet) count() int {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return len(ss.all)
}

// initialized returns the sessions whose initialize was answered, or none
// once the set is closed.
func (ss *sessionSet) initialized() []*session {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	var out []*session
	if ss.closed {
		return out
	}
	for s := range ss.all {
		s.mu.Lock()
		if s.initialized {
			out = append(out, s)
		}
		s.mu.Unlock()
	}
	return out
}

// of returns the sessions of the principals for which match reports true.
func (ss *sessionSet) of(match func(who principal) bool) []*session {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	var out []*session
	for s := range ss.all {
		if match(s.who) {
			out = append(out, s)
		}
	}
	return out
}

// logging returns the sessions that asked for log messages of level (an
// index in logLevels).
func (ss *sessionSet) logging(level int) []*session {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	var to []*session
	for s := range ss.all {
		s.mu.Lock()
		if i := slices.Index(logLevels, s.logLevel); i >= 0 && i <= level {
			to = append(to, s)
		}
		s.mu.Unlock()
	}
	return to
}

// hearingCorral returns the sessions that hear corral's own log messages
// of level (an index in logLevels): the legacy sessions whose initialize
// was answered that asked for that level or a less severe one, or never
// asked (the specification lets a server choose what to send then); none
// once the set is closed.
func (ss *sessionSet) hearingCorral(level int) []*session {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	var to []*session
	if ss.closed {
		return to
	}
	for s := range ss.all {
		s.mu.Lock()
		want := slices.Index(logLevels, s.logLevel)
		if s.initialized && s.protocolVersion != "" && !s.ended && want <= level {
			to = append(to, s)
		}
		s.mu.Unlock()
	}
	return to
}

// sole returns the one session, if there is exactly one, with whether its
// client is ready for requests (it sent notifications/initialized and the
// session has not ended), and the number of sessions.
func (ss *sessionSet) sole() (s *session, ready bool, n int) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	n = len(ss.all)
	if n != 1 || ss.closed {
		return nil, false, n
	}
	for s = range ss.all {
	}
	s.mu.Lock()
	ready = s.acknowledged && !s.ended
	s.mu.Unlock()
	return s, ready, n
}

// wantedLogLevel returns the most verbose level a session asked for, or "".
func (ss *sessionSet) wantedLogLevel() string {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	best := len(logLevels)
	for s := range ss.all {
		s.mu.Lock()
		if i := slices.Index(logLevels, s.logLevel); i >= 0 && i < best {
			best = i
		}
		s.mu.Unlock()
	}
	if best == len(logLevels) {
		return ""
	}
	return logLevels[best]
}

// listeningSession returns a session of who's for a 2026-07-28 client's
// subscriptions/listen: initialized, so that it hears of changes, which go
// to notify. It is registered nowhere.
func listeningSession(notify func([]byte), who principal) *session {
	s := makeSession(notify, who)
	s.initialized = true
	return s
}

// newSession registers a session of who's, whose front end calls it id, so
// that it hears of catalog changes.
func (ss *sessionSet) newSession(notify func([]byte), who principal, id string) *session {
	s := makeSession(notify, who)
	s.id = id
	ss.add(s)
	return s
}

// detachedSession returns a session for one modern request of who's: it
// hears of nothing else.
func (ss *sessionSet) detachedSession(who principal) *session {
	return makeSession(nil, who)
}

// endSession cancels the session's calls in flight, answers the servers'
// requests it never answered, ends its processes of session-scoped servers,
// its subscriptions and its tasks (see sessionHooks), and forgets it.
func (ss *sessionSet) endSession(s *session) {
	ss.remove(s)
	out, level := s.end()
	for _, o := range out {
		if o.release() {
			o.deliver(&wireMsg{Error: &wireError{Code: codeInternalError, Message: "the client's session ended before it answered"}})
		}
	}
	ss.hooks.endScoped(s)
	ss.hooks.unsubscribeAll(s)
	ss.hooks.forgetTasks(s)
	if level != "" {
		ss.applyLogLevel()
	}
}

// initialize answers a client's initialize with the version it asked for when
// corral speaks it, and corral's newest otherwise, as the specification says.
// The capabilities are those the servers offer, so it waits, until ctx ends,
// for servers still in their first start.
func (ss *sessionSet) initialize(ctx context.Context, s *session, params json.RawMessage) (any, error) {
	var p struct {
		ProtocolVersion string       `json:"protocolVersion"`
		Capabilities    capabilities `json:"capabilities"`
	}
	if err := json.Unmarshal(params, &p); err != nil || p.ProtocolVersion == "" {
		return nil, &wireError{Code: codeInvalidParams, Message: "initialize: params must be an object with a protocolVersion"}
	}
	v := p.ProtocolVersion
	if !supportedVersion(v) {
		v = protocolVersions[0]
	}
	s.mu.Lock()
	s.protocolVersion, s.clientCaps = v, p.Capabilities
	s.mu.Unlock()
	ss.hooks.waitFirstStarts(ctx)
	seen := ss.viewOf(s.who)
	caps := ss.hooks.capabilities(seen)
	s.mu.Lock()
	s.initialized = true
	s.mu.Unlock()
	res := map[string]any{
		"protocolVersion": v,
		"capabilities":    caps,
		"serverInfo":      map[string]string{"name": "corral", "version": version},
	}
	if in := ss.hooks.instructions(seen); in != "" {
		res["instructions"] = in
	}
	return res, nil
}

// viewOf returns the view of who, through the hook; nil (everything) if
// the set has none.
func (ss *sessionSet) viewOf(who principal) *view {
	if ss.hooks.viewOf == nil {
		return who.view
	}
	return ss.hooks.viewOf(who)
}

func supportedVersion(v string) bool { return slices.Contains(protocolVersions, v) }

// logLevels are the levels of notifications/message, least severe first.
var logLevels = []string{"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"}

// setLogLevel answers logging/setLevel: the session receives the servers'
// log messages at that level and above, and the servers are asked for the
// most verbose level any session wants.
func (ss *sessionSet) setLogLevel(s *session, params json.RawMessage) (any, error) {
	var p struct {
		Level string `json:"level"`
	}
	json.Unmarshal(params, &p)
	if !slices.Contains(logLevels, p.Level) {
		return nil, &wireError{Code: codeInvalidParams, Message: fmt.Sprintf("logging/setLevel: unknown level %q; want one of %s", p.Level, strings.Join(logLevels, ", "))}
	}
	s.mu.Lock()
	s.logLevel = p.Level
	s.mu.Unlock()
	ss.applyLogLevel()
	return struct{}{}, nil
}

// applyLogLevel asks every server that logs for the most verbose level any
// session wants, if it changed.
func (ss *sessionSet) applyLogLevel() {
	level := ss.wantedLogLevel()
	for _, b := range ss.hooks.backends() {
		b.setLogLevel(level)
	}
	ss.hooks.scopedLogLevels()
}

// serverLog passes a server's log message to the sessions that asked for
// messages of its level, and to the one modern request in flight to the
// server that asked for them, with the server's name in its logger:
// "server", or "server/logger" when the server named a logger.
func (ss *sessionSet) serverLog(b *backend, params json.RawMessage) {
	b.log.Debug("log message from server", "params", truncate(params, 1000))
	note, level := logNote(b, params)
	if note == nil {
		return
	}
	for _, s := range ss.logging(level) {
		if ss.viewOf(s.who).seesServer(b.name) { // a server outside the view says nothing to it
			s.send(note)
		}
	}
	// A modern client asks for log messages per request: they go on the
	// stream of its request to this server, when there is exactly one.
	if mine := modernLogger(b); mine != nil && slices.Index(logLevels, mine.logLevel) <= level {
		mine.send(note)
	}
}

// logNote returns server b's log message, params, as the notification a
// client gets, with the server's name in its logger, and the index of its
// level in logLevels; nil if its level is not one.
func logNote(b *backend, params json.RawMessage) (note []byte, level int) {
	var p struct {
		Level  string `json:"level"`
		Logger string `json:"logger"`
	}
	json.Unmarshal(params, &p)
	level = slices.Index(logLevels, p.Level)
	if level < 0 {
		return nil, level
	}
	logger := b.name
	if p.Logger != "" {
		logger += "/" + p.Logger
	}
	note, _ = encodeNotification("notifications/message", setMember(params, "logger", logger))
	return note[:len(note)-1], level
}

// modernLogger returns the one modern client's request in flight to b
// that asked for log messages, or nil if there is none or more than one
// (corral cannot tell whose a message is).
func modernLogger(b *backend) *related {
	var mine *related
	m := b.currentRun()
	if m == nil {
		return nil
	}
	for _, c := range m.callers() {
		if r := c.(*related); r.modern && r.logLevel != "" {
			if mine != nil {
				return nil
			}
			mine = r
		}
	}
	return mine
}

// inFlight returns how many of the session's requests are in flight. It is
// safe for concurrent use.
func (s *session) inFlight() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.inflight)
}

// holdAnswer counts an answer of n bytes as waiting to be written to the
// session's client, and reports true, unless the answers already waiting
// hold bytes and n more would take them past max: then it counts nothing
// and reports false. An answer alone is always held, whatever its size.
// Each answer held must be released once, with releaseAnswer. It is safe
// for concurrent use.
func (s *session) holdAnswer(n, max int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.unsentCount > 0 && s.unsentBytes+n > max {
		return false
	}
	s.unsentCount++
	s.unsentBytes += n
	return true
}

// releaseAnswer forgets an answer of n bytes that holdAnswer held: it has
// been written, or its writing failed.
func (s *session) releaseAnswer(n int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.unsentCount--
	s.unsentBytes -= n
}

// unsent returns how many answers of the session's calls wait to be
// written to its client, and their bytes.
func (s *session) unsent() (count int, bytes int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.unsentCount, s.unsentBytes
}

// endRemoved ends the sessions of the named clients acc does not have: a
// reload removed them, each logged to log. Their front ends see the sessions end
// (session.goneChan), and their tokens are unknown from now on.
func (ss *sessionSet) endRemoved(acc *access, log *slog.Logger) {
	for _, s := range ss.of(func(who principal) bool { return !acc.knows(who) }) {
		log.Info("ended a session of a client the reload removed", "client", s.who.name)
		ss.endSession(s)
	}
}
