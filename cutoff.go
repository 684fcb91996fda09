package main

import (
	"context"
	"sync"
)

// callingSessions is the sessions with calls in flight: what CutOff
// cancels at the end of shutdownTimeout. One set for the gateway, instead
// of a context.AfterFunc on the cut context for every call, which cost
// three allocations a call. A session is in it while its inflight map is
// not empty (see sessionSet.admit and sessionSet.retire), whether or not it
// is registered in the sessionSet: a modern request's session is not. Its
// methods are safe for concurrent use; the zero value is empty.
//
// Lock order: mu is a leaf, taken under a session's mu (session.admit,
// session.retire).
type callingSessions struct {
	mu  sync.Mutex
	all map[*session]struct{}
}

func (cs *callingSessions) add(s *session) {
	cs.mu.Lock()
	if cs.all == nil {
		cs.all = map[*session]struct{}{}
	}
	cs.all[s] = struct{}{}
	cs.mu.Unlock()
}

func (cs *callingSessions) remove(s *session) {
	cs.mu.Lock()
	delete(cs.all, s)
	cs.mu.Unlock()
}

func (cs *callingSessions) list() []*session {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	list := make([]*session, 0, len(cs.all))
	for s := range cs.all {
		list = append(list, s)
	}
	return list
}

// admit records the client's request key as in flight in session s (see
// session.admit). An admitted call made once CutOff has begun is cut off at
// once.
func (ss *sessionSet) admit(s *session, key string, cancel context.CancelCauseFunc, max int) (n int, dup bool) {
	n, dup = s.admit(key, cancel, max, &ss.calling)
	// CutOff cancels ss.cut before it lists the sessions calling: a call
	// added after the list sees the cut here.
	if n < max && !dup && ss.cut.Err() != nil {
		cancel(errShuttingDown)
	}
	return n, dup
}

// retire forgets the client's request key in session s, once it has ended.
func (ss *sessionSet) retire(s *session, key string) { s.retire(key, &ss.calling) }

// cutCalls cancels every call in flight with errShuttingDown. CutOff
// calls it once ss.cut has ended.
func (ss *sessionSet) cutCalls() {
	for _, s := range ss.calling.list() {
		s.cancelCalls(errShuttingDown)
	}
}
