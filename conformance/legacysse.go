package conformance

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"
)

// sseSession opens a session on the gateway's legacy SSE front end (the
// adapter's sseURL), whatever the adapter's transport, and initializes it.
// It is closed when the test ends.
func (g *gateway) sseSession() (*session, *sseConn) {
	g.t.Helper()
	in := newInbox()
	c, err := dialSSE(g.sseURL, in.add)
	if err != nil {
		fatal(g.t, "opening a legacy SSE stream at %s: %v", g.sseURL, err)
	}
	g.t.Cleanup(c.close)
	s := &session{g: g, conn: c, in: in}
	m, err := s.request(ctxFor(g.t, 30*time.Second), `0`, "initialize", map[string]any{"protocolVersion": "2024-11-05", "capabilities": map[string]any{},
		"clientInfo": map[string]string{"name": "corral-conformance", "version": "1"}})
	if err == nil && m.Error != nil {
		err = fmt.Errorf("error %d: %s", m.Error.Code, m.Error.Message)
	}
	if err != nil {
		fatal(g.t, "initialize over the legacy SSE front end: %v", err)
	}
	if err := c.notify([]byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)); err != nil {
		fatal(g.t, "notifications/initialized over the legacy SSE front end: %v", err)
	}
	return s, c
}

// TestLegacySSEFrontEndAnswersOnTheStreamAndItsClosingCancelsCalls checks a
// gateway's legacy HTTP+SSE front end (MCP 2024-11-05), for an adapter that
// declares one (sseURL): the stream names its POST endpoint, answers to
// concurrent calls come on the stream each to its own request, and closing
// the stream ends the session: its call in flight is cancelled at the
// server, and its endpoint takes no more messages.
func TestLegacySSEFrontEndAnswersOnTheStreamAndItsClosingCancelsCalls(t *testing.T) {
	guarantee(t)
	if adapter.SSEURL == "" {
		skip(t, "the adapter declares no legacy SSE front end (sseURL)")
	}
	g := startGateway(t, servers("ls"), options{}, "ls")
	s, c := g.sseSession()
	// The first call sent is the slowest: the answers come in the other order.
	var wg sync.WaitGroup
	errs := make([]error, 5)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			want := fmt.Sprintf("call %d", i)
			m, err := s.call(ctxFor(t, 30*time.Second), fmt.Sprint(i+1), "ls", "echo", map[string]any{"text": want, "delay_ms": (len(errs) - i) * 100})
			if got, err := m.textOr(err); err != nil || got != want {
				errs[i] = fmt.Errorf("call %d answered %q, %v; want %q", i+1, got, err, want)
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			fail(t, "concurrent calls over the legacy SSE front end: %v", err)
		}
	}

	hangCtx := ctxFor(t, 60*time.Second)
	go s.call(hangCtx, `"hang"`, "ls", "hang", map[string]any{}) // ends with the stream, or the test
	var pid int
	var serverID json.RawMessage
	for deadline := time.Now().Add(10 * time.Second); serverID == nil; {
		for _, p := range serverStarts(g.stateDir, "ls") {
			for _, e := range events(g.stateDir, p.PID) {
				if e.Event == "request" && e.Tool == "ls_hang" {
					pid, serverID = p.PID, e.ID
				}
			}
		}
		if time.Now().After(deadline) {
			fatal(t, "the call of hang did not reach the server within 10s")
		}
		time.Sleep(20 * time.Millisecond) // the server's records give no signal
	}
	c.close()
	cancelled := func() bool {
		for _, e := range events(g.stateDir, pid) {
			if e.Event == "cancelled" && string(e.RequestID) == string(serverID) {
				return true
			}
		}
		return false
	}
	const within = 10 * time.Second
	for deadline := time.Now().Add(within); !cancelled(); {
		if time.Now().After(deadline) {
			fatal(t, "the server never received notifications/cancelled for its request %s within %s of the client closing its SSE stream, which ends its session", serverID, within)
		}
		time.Sleep(20 * time.Millisecond) // the server's records give no signal
	}
	if err := c.notify([]byte(`{"jsonrpc":"2.0","id":9,"method":"ping"}`)); err == nil {
		fail(t, "the endpoint of a closed stream (%s) accepted a message; want it refused, its session having ended", c.endpoint)
	}
	s2, _ := g.sseSession()
	if text, err := callText(t, s2, "ls", "echo", map[string]any{"text": "after"}); err != nil || text != "after" {
		fail(t, "a new session after the closed one answered %q, %v", text, err)
	}
}
