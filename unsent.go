package main

// This file holds the bound on answers that wait to be written to clients:
// a client that stops reading must not make corral hold its answers without
// end. An answer is held from the moment the gateway has it until the front
// end has written it, or failed to (writeTimeout bounds that time on HTTP):
// meanwhile it counts toward its session's maxInFlightPerSession and toward
// maxUnsentBytesPerSession and maxUnsentBytes.

import (
	"math"
	"sync/atomic"
)

// unsentBytes counts the bytes of the answers waiting to be written to
// clients, of all sessions. Its zero value counts none; its methods are safe
// for concurrent use.
type unsentBytes struct{ n atomic.Int64 }

// hold counts n bytes more and reports true, unless bytes are held already
// and n more would take them past max: then it counts nothing and reports
// false.
func (u *unsentBytes) hold(n, max int64) bool {
	for {
		old := u.n.Load()
		if old > 0 && old+n > max {
			return false
		}
		if u.n.CompareAndSwap(old, old+n) {
			return true
		}
	}
}

// release forgets n bytes that hold counted.
func (u *unsentBytes) release(n int64) { u.n.Add(-n) }

// load returns the bytes held.
func (u *unsentBytes) load() int64 { return u.n.Load() }

// unsentRefusal returns how many answers of session s wait to be written to
// its client, and the error for a new call of s while the answers waiting
// are at a bound of cfg, or nil.
func (ss *sessionSet) unsentRefusal(cfg *Config, s *session) (count int, werr *wireError) {
	count, bytes := s.unsent()
	switch {
	case count > 0 && bytes >= cfg.MaxUnsentBytesPerSession:
		return count, unavailable("%d answers of this session (%s) wait for its client to read them, the limit (maxUnsentBytesPerSession); read them before calling again", count, formatSize(bytes))
	case ss.unsent.load() >= cfg.MaxUnsentBytes:
		return count, unavailable("the answers waiting for their clients to read them hold %s, the limit (maxUnsentBytes); try again later", formatSize(ss.unsent.load()))
	}
	return count, nil
}

// smallAnswer is the size of an answer held past the bounds: an error
// (such as the one for a call refused because of them) must reach the
// client, and maxInFlightPerSession bounds how many a session holds.
const smallAnswer = 4 << 10

// holdAnswer holds a, the answer to the request id of session s, until its
// front end has written it or failed to, and returns what to write and the
// bytes held, which releaseAnswer releases, once. When holding a would take
// the session's answers past maxUnsentBytesPerSession, or all answers past
// maxUnsentBytes, a is dropped and a short error naming the setting is held
// in its place, and refused names the setting, for the front end's log. An
// answer of at most smallAnswer bytes is always held. It is safe for concurrent use.
func (ss *sessionSet) holdAnswer(s *session, id []byte, a *reply) (held *reply, n int64, refused string) {
	cfg := ss.config()
	n = int64(a.len())
	perSession, overall := cfg.MaxUnsentBytesPerSession, cfg.MaxUnsentBytes
	if n <= smallAnswer {
		perSession, overall = math.MaxInt64, math.MaxInt64
	}
	switch {
	case !s.holdAnswer(n, perSession):
		refused = "maxUnsentBytesPerSession"
	case !ss.unsent.hold(n, overall):
		s.releaseAnswer(n)
		refused = "maxUnsentBytes"
	default:
		return a, n, ""
	}
	bound := cfg.MaxUnsentBytesPerSession
	if refused == "maxUnsentBytes" {
		bound = cfg.MaxUnsentBytes
	}
	held = errorReply(id, unavailable("the answer (%s) was dropped: with it, the answers waiting for clients to read them would go past %s (%s); read the answers before calling again",
		formatSize(n), refused, formatSize(bound)))
	n = int64(held.len())
	s.holdAnswer(n, math.MaxInt64)
	ss.unsent.hold(n, math.MaxInt64)
	return held, n, refused
}

// releaseAnswer releases the n bytes holdAnswer held for an answer of
// session s.
func (ss *sessionSet) releaseAnswer(s *session, n int64) {
	s.releaseAnswer(n)
	ss.unsent.release(n)
}
