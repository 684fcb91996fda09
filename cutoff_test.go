package main

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestCutOffEndsEveryCallInFlightAndEachCallAfterIt checks CutOff through
// the gateway's set of sessions calling: a session registered nowhere (as
// a modern request's is) has its calls cut off too, a call admitted after
// CutOff is cut off at once, and a session leaves the set when its last
// call ends.
func TestCutOffEndsEveryCallInFlightAndEachCallAfterIt(t *testing.T) {
	t.Parallel()
	tg := startGateway(t, `{"mcpServers":{"a": {"command":"FAKE","args":["-state","STATE"]}}}`)
	g := tg.gw
	call := func(s *session, id string) <-chan *reply {
		msg, werr := decodeMessage([]byte(`{"jsonrpc":"2.0","id":"` + id + `","method":"tools/call","params":{"name":"sleep","arguments":{"ms":600000}}}`))
		if werr != nil {
			t.Fatal(werr)
		}
		done := make(chan *reply, 1)
		go func() { done <- g.handle(t.Context(), s, legacyInbound(msg), func([]byte) {}) }()
		return done
	}
	inFlight := func() int {
		n := 0
		for _, s := range g.sessions.calling.list() {
			n += s.inFlight()
		}
		return n
	}
	var answers []<-chan *reply
	for i := range 2 {
		s := makeSession(nil, anonymousPrincipal) // registered nowhere
		s.initialized = true
		answers = append(answers, call(s, fmt.Sprint("s", i, "a")), call(s, fmt.Sprint("s", i, "b")))
	}
	waitFor(t, 10*time.Second, "four calls in flight", func() bool { return inFlight() == 4 })
	g.CutOff()
	late := makeSession(nil, anonymousPrincipal)
	late.initialized = true
	answers = append(answers, call(late, "late"))
	for i, a := range answers {
		select {
		case r := <-a:
			var b strings.Builder
			r.WriteTo(&b)
			if !strings.Contains(b.String(), "shutting down") {
				t.Errorf("call %d cut off = %s, want an error saying corral is shutting down", i, b.String())
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("call %d not cut off by CutOff", i)
		}
	}
	if left := len(g.sessions.calling.list()); left != 0 {
		t.Errorf("sessions calling after every call ended = %d, want 0", left)
	}
}
