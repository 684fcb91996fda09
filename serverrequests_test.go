package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// The bounds on servers' requests to clients (sampling, elicitation,
// roots): maxServerRequestsPerSession and maxServerRequests, and the
// freeing of each request when it is answered, cancelled, timed out or its
// session ends.

// floodConfig runs one fakeserver with small bounds on its requests.
const floodConfig = `{"maxServerRequestsPerSession": 4, "maxServerRequests": 6, "requestTimeout": %q,
	"mcpServers":{"a": {"command":"FAKE","args":["-state","STATE","-name","a"]}}}`

// streamedCall is a client's tools/call whose event stream is read as it
// comes: the server's requests on it are not answered.
type streamedCall struct {
	requests chan *wireMsg // the requests and notifications on the stream
	answer   chan *wireMsg // the answer, or nil if the stream ended without one
}

// startCall posts a tools/call of tool with args in p's session, with id.
func startCall(t *testing.T, p *peer, id, tool, args string) *streamedCall {
	t.Helper()
	line := fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, id, tool, args)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	req, _ := http.NewRequestWithContext(ctx, "POST", p.url, strings.NewReader(line))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", p.sid)
	c := &streamedCall{requests: make(chan *wireMsg, 100), answer: make(chan *wireMsg, 1)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(c.answer)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Errorf("POST %s: %v", line, err)
			return
		}
		defer resp.Body.Close()
		if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			var m wireMsg
			json.NewDecoder(resp.Body).Decode(&m)
			c.answer <- &m
			return
		}
		readEvents(resp.Body, func(m *wireMsg) {
			if m.Method != "" {
				c.requests <- m
			} else {
				c.answer <- m
			}
		})
	}()
	t.Cleanup(func() { cancel(); <-done })
	return c
}

// text waits for the call's answer and returns its text.
func (c *streamedCall) text(t *testing.T) string {
	t.Helper()
	select {
	case m := <-c.answer:
		if m == nil {
			t.Fatal("the call's stream ended without an answer")
		}
		return text(t, m)
	case <-time.After(time.Minute):
		t.Fatal("the call was not answered within a minute")
		return ""
	}
}

// drain returns the messages of the call's stream received so far, once
// the call has been answered.
func (c *streamedCall) drain() []*wireMsg {
	var out []*wireMsg
	for {
		select {
		case m := <-c.requests:
			out = append(out, m)
		default:
			return out
		}
	}
}

// waiting returns the number of server requests waiting for p's session's
// answers, and for any client's answer to the test gateway's one server.
func waiting(t *testing.T, tg *testGateway, p *peer) (session, server int) {
	t.Helper()
	tg.h.mu.Lock()
	hs := tg.h.sessions[p.sid]
	tg.h.mu.Unlock()
	if hs != nil {
		session = hs.waiting()
	}
	b := tg.gw.backendList()[0]
	b.mu.Lock()
	m := b.mux
	b.mu.Unlock()
	return session, m.waiting()
}

// answerAll answers each server request in msgs with a sampling result.
func answerAll(p *peer, msgs []*wireMsg) {
	for _, m := range msgs {
		if m.ID != nil {
			p.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"role":"assistant","content":{"type":"text","text":"ok"},"model":"test"}}`, m.ID))
		}
	}
}

func TestServerRequestsPastTheBoundsFailAtOnceAndAreFreedWhenAnsweredOrTheSessionEnds(t *testing.T) {
	t.Parallel()
	tg := startGateway(t, fmt.Sprintf(floodConfig, "60s"))
	a := newHTTPPeer(t, tg.url, fullCaps)

	// Ten requests at once: four reach the client, the other six fail at
	// once, naming the bound. Twice: answering the four frees them.
	for round := range 2 {
		c := startCall(t, a, fmt.Sprint(round+1), "flood_sampling", `{"count":10,"answers":6}`)
		got := c.text(t)
		if !strings.HasPrefix(got, "answered 6 of 10: 0 results, 6 errors; first error: -32000 4 requests of servers wait for the client's answers, the limit (maxServerRequestsPerSession)") {
			t.Fatalf("round %d: flood_sampling of 10 = %q, want 6 refused at once naming maxServerRequestsPerSession", round, got)
		}
		asked := c.drain()
		if len(asked) != 4 {
			t.Errorf("round %d: the client was asked %d requests, want 4", round, len(asked))
		}
		if s, m := waiting(t, tg, a); s != 4 || m != 4 {
			t.Errorf("round %d: %d requests wait in the session, %d for the server, want 4 and 4", round, s, m)
		}
		answerAll(a, asked)
		if s, m := waiting(t, tg, a); s != 0 || m != 0 {
			t.Errorf("round %d: once answered, %d requests wait in the session, %d for the server, want none", round, s, m)
		}
	}

	// Four left waiting in a's session; b may have two more, the server's
	// bound of six.
	c := startCall(t, a, "3", "flood_sampling", `{"count":4,"answers":0}`)
	c.text(t)
	b := newHTTPPeer(t, tg.url, fullCaps)
	c = startCall(t, b, "1", "flood_sampling", `{"count":10,"answers":8}`)
	if got := c.text(t); !strings.HasPrefix(got, `answered 8 of 10: 0 results, 8 errors; first error: -32000 server "a" has 6 requests waiting for clients' answers, the limit (maxServerRequests)`) {
		t.Fatalf("flood_sampling of 10 past the server's bound = %q, want 8 refused naming maxServerRequests", got)
	}
	if s, m := waiting(t, tg, b); s != 2 || m != 6 {
		t.Errorf("%d requests wait in the second session, %d for the server, want 2 and 6", s, m)
	}

	// The first session ends: its four are freed.
	req, _ := http.NewRequest("DELETE", tg.url, nil)
	req.Header.Set("Mcp-Session-Id", a.sid)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE = %v, %v", resp, err)
	}
	if s, m := waiting(t, tg, b); s != 2 || m != 2 {
		t.Errorf("after the first session ended, %d requests wait in the second session, %d for the server, want 2 and 2", s, m)
	}
}

func TestServerRequestsAreFreedWhenCancelledOrTimedOut(t *testing.T) {
	t.Parallel()
	tg := startGateway(t, fmt.Sprintf(floodConfig, "2s"))
	p := newHTTPPeer(t, tg.url, fullCaps)
	// cancelledIDs returns the IDs the client was told were cancelled, and
	// the reasons it was given.
	cancelled := func(msgs []*wireMsg) (ids, reasons []string) {
		for _, m := range msgs {
			if m.Method == "notifications/cancelled" {
				var params struct {
					RequestID json.RawMessage
					Reason    string
				}
				json.Unmarshal(m.Params, &params)
				ids = append(ids, string(params.RequestID))
				if !slices.Contains(reasons, params.Reason) {
					reasons = append(reasons, params.Reason)
				}
			}
		}
		slices.Sort(ids) // they may come in any order
		return ids, reasons
	}
	cancelledIDs := func(msgs []*wireMsg) []string {
		ids, _ := cancelled(msgs)
		return ids
	}
	checkReasons := func(t *testing.T, msgs []*wireMsg, want string) {
		t.Helper()
		if _, reasons := cancelled(msgs); len(reasons) != 1 || reasons[0] != want {
			t.Errorf("the client was told of the cancellations with reasons %q, want %q", reasons, want)
		}
	}
	requestIDs := func(msgs []*wireMsg) []string {
		var ids []string
		for _, m := range msgs {
			if m.Method == "sampling/createMessage" {
				ids = append(ids, string(m.ID))
			}
		}
		slices.Sort(ids)
		return ids
	}

	t.Run("by the server", func(t *testing.T) {
		c := startCall(t, p, `"cancel"`, "flood_sampling", `{"count":3,"cancel":true}`)
		if got := c.text(t); got != "sent 3, cancelled 3" {
			t.Fatalf("flood_sampling with cancel = %q", got)
		}
		// The cancellations came on the call's stream, or after the
		// answer on the session's.
		msgs := c.drain()
		for len(cancelledIDs(msgs)) < 3 {
			msgs = append(msgs, p.next())
		}
		if got, want := strings.Join(cancelledIDs(msgs), " "), strings.Join(requestIDs(msgs), " "); got != want {
			t.Errorf("the client was told of the cancellation of %s, want %s", got, want)
		}
		checkReasons(t, msgs, "cancelled by the server")
		if s, m := waiting(t, tg, p); s != 0 || m != 0 {
			t.Errorf("once the server cancelled them, %d requests wait in the session, %d for the server, want none", s, m)
		}
	})

	t.Run("with the client's call", func(t *testing.T) {
		c := startCall(t, p, `"long"`, "flood_sampling", `{"count":2}`)
		var asked []*wireMsg
		for len(asked) < 2 {
			select {
			case m := <-c.requests:
				asked = append(asked, m)
			case <-time.After(30 * time.Second):
				t.Fatal("the client was not asked twice")
			}
		}
		p.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"long"}}`)
		var told []*wireMsg
		for len(cancelledIDs(told)) < 2 {
			select {
			case m := <-c.requests:
				told = append(told, m)
			case m := <-p.notes:
				told = append(told, m)
			case <-time.After(30 * time.Second):
				t.Fatalf("the client was told of the cancellation of %v only", cancelledIDs(told))
			}
		}
		if got, want := strings.Join(cancelledIDs(told), " "), strings.Join(requestIDs(asked), " "); got != want {
			t.Errorf("the client was told of the cancellation of %s, want %s", got, want)
		}
		checkReasons(t, told, "the request it was about was cancelled")
		if s, m := waiting(t, tg, p); s != 0 || m != 0 {
			t.Errorf("once the call was cancelled, %d requests wait in the session, %d for the server, want none", s, m)
		}
	})

	t.Run("at requestTimeout", func(t *testing.T) {
		c := startCall(t, p, `"timeout"`, "flood_sampling", `{"count":2,"answers":0}`)
		c.text(t)
		asked := c.drain()
		var told []*wireMsg
		for len(cancelledIDs(told)) < 2 {
			told = append(told, p.next()) // after requestTimeout, on the session's stream
		}
		if got, want := strings.Join(cancelledIDs(told), " "), strings.Join(requestIDs(asked), " "); got != want {
			t.Errorf("the client was told of the cancellation of %s, want %s", got, want)
		}
		checkReasons(t, told, "timed out in corral")
		if s, m := waiting(t, tg, p); s != 0 || m != 0 {
			t.Errorf("after requestTimeout, %d requests wait in the session, %d for the server, want none", s, m)
		}
	})
}

// countingHandler counts the log records by message, and keeps the
// attributes of each.
type countingHandler struct {
	mu      sync.Mutex
	records map[string][]map[string]any
}

func (h *countingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *countingHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *countingHandler) WithGroup(string) slog.Handler            { return h }
func (h *countingHandler) Handle(_ context.Context, r slog.Record) error {
	attrs := map[string]any{}
	r.Attrs(func(a slog.Attr) bool { attrs[a.Key] = a.Value.Any(); return true })
	h.mu.Lock()
	h.records[r.Message] = append(h.records[r.Message], attrs)
	h.mu.Unlock()
	return nil
}

func TestRefusedServerRequestsAreLoggedAtABoundedRateWithACountOfTheRest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		cfg, err := LoadConfig(writeConfig(t, `{"mcpServers":{"a":{"command":"FAKE"}}}`, dir), func(string) (string, bool) { return "", false }, func(string) {})
		if err != nil {
			t.Fatal(err)
		}
		h := &countingHandler{records: map[string][]map[string]any{}}
		g := NewGateway(cfg, slog.New(h), nil)
		b := g.backendList()[0]
		m := newMux("a", 2048, b.log, nil) // room for every refusal in its queue
		// No client calls the server: each of its requests is refused.
		flood := func(n int) {
			for i := range n {
				g.events.serverRequest(b, m, &wireMsg{ID: json.RawMessage(fmt.Sprint(i + 1)), Method: "sampling/createMessage", Params: json.RawMessage(`{}`)})
			}
		}
		flood(1000)
		time.Sleep(time.Second) // of the bubble's clock
		flood(1)
		// The count of what a flood's last second dropped is logged when
		// the server's connection ends, if no line comes after.
		time.Sleep(time.Second)
		flood(20)
		m.close(errShuttingDown)
		h.mu.Lock()
		defer h.mu.Unlock()
		refused, dropped := h.records["refused a request of the server to a client"], h.records["log lines about the server were dropped"]
		if len(refused) != 21 {
			t.Errorf("1,000 refusals in a second, one in the next and 20 in the third were logged %d times, want 10, 1 and 10", len(refused))
		}
		var counts []string
		for _, d := range dropped {
			counts = append(counts, fmt.Sprint(d["count"]))
		}
		if got := strings.Join(counts, " "); got != "990 10" {
			t.Errorf("the counts of lines dropped were logged as %q, want 990 (in the next second) and 10 (at the end)", got)
		}
		m.out.mu.Lock()
		got := m.out.n // no writeLoop runs: every answer waits in the queue
		m.out.mu.Unlock()
		if got != 1021 {
			t.Errorf("the server was answered %d times, want every one of its 1,021 requests", got)
		}
	})
}
