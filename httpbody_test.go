package main

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
)

// The header names corral reads on every request are spelled as net/http
// keys them, so that reading one does not make its canonical form anew.
func TestCheckLegacyVersionAllocatesNothing(t *testing.T) {
	r := httptest.NewRequest("POST", mcpPath, nil)
	r.Header.Set("MCP-Protocol-Version", "2025-06-18")
	w := httptest.NewRecorder()
	msg := &wireMsg{ID: json.RawMessage("1"), Method: "tools/call"}
	allocs := testing.AllocsPerRun(100, func() {
		if !checkLegacyVersion(w, r, msg) {
			t.Fatal("checkLegacyVersion refused 2025-06-18")
		}
	})
	if allocs != 0 {
		t.Errorf("checkLegacyVersion allocates %v times a call, want 0", allocs)
	}
	if got := r.Header.Get(versionHeader); got != "2025-06-18" {
		t.Errorf("Header.Get(versionHeader) = %q, want the header set as MCP-Protocol-Version", got)
	}
	if http.CanonicalHeaderKey(versionHeader) != versionHeader {
		t.Errorf("versionHeader %q is not canonical", versionHeader)
	}
}

// A call whose servers send nothing related to it costs the front end two
// allocations over the gateway's own (the relatedStream and its send), and
// no goroutine.
func TestCallAddsTwoAllocations(t *testing.T) {
	tg := startGateway(t, `{"mcpServers":{"a": {"command":"FAKE","args":["-state","STATE"]}}}`)
	c := connect(t, tg.url)
	tg.h.mu.Lock()
	s := tg.h.sessions[c.sid]
	tg.h.mu.Unlock()
	in := legacyInbound(&wireMsg{JSONRPC: "2.0", ID: json.RawMessage("1"), Method: "ping"})
	r := httptest.NewRequest("POST", mcpPath, nil)
	w := httptest.NewRecorder()
	send := func([]byte) {}
	handle := testing.AllocsPerRun(200, func() { tg.gw.handle(r.Context(), s.session, in, send) })
	call := testing.AllocsPerRun(200, func() {
		if a, streamed := tg.h.call(w, r, s.session, s.id, in, s.session); a == nil || streamed {
			t.Fatalf("call(ping) = %v, %v; want an answer, not streamed", a, streamed)
		}
	})
	if call-handle > 2 {
		t.Errorf("call allocates %v times a ping, the gateway's handle %v: the front end adds %v, want at most 2", call, handle, call-handle)
	}
}

// readBounded reads a body whose length it knows into one buffer, and keeps
// maxRequestBytes' bound whatever the body declares.
func TestReadBounded(t *testing.T) {
	const max = 100
	tests := []struct {
		name     string
		body     string
		length   int64 // the declared Content-Length; -1: unknown (chunked)
		want     string
		tooBig   bool
		wantFail bool
		max      int64 // if zero, max
	}{
		{name: "a body of its declared length is read whole", body: `{"a":1}`, length: 7, want: `{"a":1}`},
		{name: "an empty body is read as empty", body: "", length: 0, want: ""},
		{name: "a body of unknown length is read whole", body: `{"b":2}`, length: -1, want: `{"b":2}`},
		{name: "a body of exactly maxRequestBytes is read", body: strings.Repeat("x", max), length: max, want: strings.Repeat("x", max)},
		{name: "a body that declares more than maxRequestBytes is refused", body: strings.Repeat("x", max+1), length: max + 1, tooBig: true},
		{name: "a body of unknown length over maxRequestBytes is refused", body: strings.Repeat("x", max+1), length: -1, tooBig: true},
		{name: "a body that declares more than a buffer made in advance is read whole", body: strings.Repeat("y", exactBodyBytes+1), length: exactBodyBytes + 1, want: strings.Repeat("y", exactBodyBytes+1), max: 1 << 20},
		{name: "a body shorter than its declared length fails", body: "abc", length: 5, wantFail: true},
		{name: "a body longer than its declared length fails", body: "abcdef", length: 5, wantFail: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", mcpPath, strings.NewReader(tt.body))
			r.ContentLength = tt.length
			got, err := readBounded(httptest.NewRecorder(), r, cmp.Or(tt.max, max))
			var tooBig *http.MaxBytesError
			switch {
			case tt.tooBig:
				if !errors.As(err, &tooBig) {
					t.Errorf("readBounded = %q, %v; want a *http.MaxBytesError", got, err)
				}
			case tt.wantFail:
				if err == nil || errors.As(err, &tooBig) {
					t.Errorf("readBounded = %q, %v; want an error that is not about the size", got, err)
				}
			case err != nil || string(got) != tt.want:
				t.Errorf("readBounded = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

// A body that declares its length costs one allocation, its buffer, and is
// read to its end, which lets net/http notice the client going away.
func TestReadBoundedAllocatesOnce(t *testing.T) {
	const body = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"}}}`
	src := strings.NewReader(body)
	r := httptest.NewRequest("POST", mcpPath, nil)
	r.Body = io.NopCloser(src)
	r.ContentLength = int64(len(body))
	w := httptest.NewRecorder()
	allocs := testing.AllocsPerRun(100, func() {
		src.Reset(body)
		if got, err := readBounded(w, r, 1<<20); err != nil || string(got) != body {
			t.Fatalf("readBounded = %q, %v; want the body", got, err)
		}
		if src.Len() != 0 {
			t.Fatal("readBounded left bytes unread")
		}
	})
	if allocs != 1 {
		t.Errorf("readBounded allocates %v times a body, want 1", allocs)
	}
}

// Through the front end, a request body over maxRequestBytes gets 413 whether
// it declares its length or not.
func TestBodyOverMaxRequestBytes(t *testing.T) {
	tg := startGateway(t, `{"maxRequestBytes": 1000, "mcpServers":{"a": {"command":"FAKE","args":["-state","STATE"]}}}`)
	c := connect(t, tg.url)
	big := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":%q}}}`, strings.Repeat("x", 2000))
	for _, chunked := range []bool{false, true} {
		var body io.Reader = strings.NewReader(big)
		if chunked {
			body = io.MultiReader(body) // hides the length: sent chunked
		}
		req, _ := http.NewRequest("POST", tg.url, body)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", c.sid)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(data), "maxRequestBytes") {
			t.Errorf("POST of %d bytes (chunked %v) = %s %s; want 413 naming maxRequestBytes", len(big), chunked, resp.Status, data)
		}
	}
	if m := c.callTool("2", "echo", `{"text":"small"}`); m.Error != nil {
		t.Errorf("a small call after the refused ones = %+v, want an answer", m.Error)
	}
}

// headerOnly is a ResponseWriter that keeps its header and discards the
// rest. Like net/http's, it has WriteString.
type headerOnly struct{ h http.Header }

func (w headerOnly) Header() http.Header               { return w.h }
func (w headerOnly) Write(p []byte) (int, error)       { return len(p), nil }
func (w headerOnly) WriteString(s string) (int, error) { return len(s), nil }
func (w headerOnly) WriteHeader(int)                   {}

// A small JSON answer leaves its Content-Length to net/http, which sets it
// without allocating; writeAnswer allocates nothing.
func TestWriteAnswerAllocatesNothing(t *testing.T) {
	a := resultReply(json.RawMessage("7"), json.RawMessage(`{"content":[{"type":"text","text":"hello"}]}`))
	w := headerOnly{h: http.Header{}}
	allocs := testing.AllocsPerRun(100, func() { writeAnswer(w, http.StatusOK, a) })
	if allocs != 0 {
		t.Errorf("writeAnswer allocates %v times a small answer, want 0", allocs)
	}
}

// countingListener counts the writes to the connections it accepts.
type countingListener struct {
	net.Listener
	writes *atomic.Int64
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	return countingConn{c, l.writes}, err
}

type countingConn struct {
	net.Conn
	writes *atomic.Int64
}

func (c countingConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

// A JSON answer carries its Content-Length, never chunked, small or large,
// and a small one leaves in one write to the connection, headers and body.
func TestJSONAnswerHasContentLengthInOneWrite(t *testing.T) {
	tg := startGateway(t, `{"mcpServers":{"a": {"command":"FAKE","args":["-state","STATE"]}}}`)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var writes atomic.Int64
	srv := newHTTPServer(tg.h, testLogger(t))
	served := make(chan struct{})
	go func() { defer close(served); srv.Serve(countingListener{ln, &writes}) }()
	t.Cleanup(func() { srv.Close(); <-served })
	url := "http://" + ln.Addr().String() + mcpPath
	c := connect(t, url)
	for _, tt := range []struct {
		name, tool, args string
		oneWrite         bool
	}{
		{name: "a small answer", tool: "echo", args: `{"text":"hello"}`, oneWrite: true},
		{name: "an answer over net/http's buffers", tool: "big", args: `{"bytes":100000}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for _, accept := range []string{"application/json", "application/json, text/event-stream"} {
				body := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, tt.tool, tt.args)
				req, _ := http.NewRequest("POST", url, strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", accept)
				req.Header.Set("Mcp-Session-Id", c.sid)
				before := writes.Load()
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				data, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				n := writes.Load() - before
				if resp.StatusCode != 200 || resp.ContentLength != int64(len(data)) || len(resp.TransferEncoding) > 0 {
					t.Errorf("Accept %s: %s, Content-Length %d, Transfer-Encoding %v, %d bytes; want 200 with the body's length, not chunked",
						accept, resp.Status, resp.ContentLength, resp.TransferEncoding, len(data))
				}
				if tt.oneWrite && n != 1 {
					t.Errorf("Accept %s: the answer took %d writes to the connection, want 1", accept, n)
				}
			}
		})
	}
}

// An idle session (opened, never streamed to) holds no queue for a GET
// stream: the queue is made with the first message or stream, and a
// message sent before a stream opens still reaches it.
func TestIdleSessionHoldsNoEventQueue(t *testing.T) {
	tg := startGateway(t, `{"maxSessions": 3000, "mcpServers":{"a": {"command":"FAKE","args":["-state","STATE"]}}}`)
	const n = 2000
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	sessions := make([]*httpSession, 0, n)
	before := heap()
	for range n {
		s, _ := tg.h.newSession(anonymousPrincipal)
		sessions = append(sessions, s)
	}
	perSession := float64(heap()-before) / n
	t.Logf("an idle session: %.0f bytes of heap", perSession)
	if perSession > 2048 {
		t.Errorf("an idle session holds %.0f bytes of heap, want at most 2048", perSession)
	}
	s := sessions[0]
	s.send([]byte(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`))
	if got := <-s.eventQueue(); !strings.Contains(string(got), "list_changed") {
		t.Errorf("the queue holds %s, want the message sent before it was asked for", got)
	}
	for _, s := range sessions {
		tg.h.endSession(s)
	}
}
