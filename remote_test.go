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
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// largeMessage is the size of a message larger than what a reader reads at
// once.
const largeMessage = 256 << 10

// remoteCallTimeout bounds every call and wait of these tests: an answer
// the connection loses fails the test, saying so, instead of hanging it
// until the package's timeout.
const remoteCallTimeout = 2 * time.Minute

// remoteMux runs a mux on c as a backend runs one on a child's pipes, and
// closes the mux with c's error when c is over, as the supervisor's watch
// must; tee, if not nil, gets each message the mux reads, as a line. When
// the test ends, c is closed and every goroutine joined.
func remoteMux(t *testing.T, c *remoteConn, tee io.Writer, onNotify func(*wireMsg)) *mux {
	t.Helper()
	return remoteMuxLimit(t, c, tee, onNotify, 32<<20)
}

// remoteMuxLimit is remoteMux with a connection that passes messages of at
// most maxLine bytes.
func remoteMuxLimit(t *testing.T, c *remoteConn, tee io.Writer, onNotify func(*wireMsg), maxLine int) *mux {
	t.Helper()
	c.maxLine = maxLine
	var conn msgConn = c
	if tee != nil {
		conn = teeConn{c, tee}
	}
	m := newMux("remote", 100, testLogger(t), onNotify)
	var wg sync.WaitGroup
	wg.Add(3)
	go func() { defer wg.Done(); m.writeLoop(conn) }()
	go func() { defer wg.Done(); m.readLoop(conn) }()
	go func() {
		defer wg.Done()
		select {
		case <-c.Done():
			m.close(unavailable("%v", c.Err()))
		case <-m.done:
		}
	}()
	t.Cleanup(func() {
		c.Close()
		m.close(unavailable("the test is over"))
		wg.Wait()
	})
	return m
}

// teeConn is a connection whose messages read are also written to w, one a
// line.
type teeConn struct {
	msgConn
	w io.Writer
}

func (c teeConn) ReadMessage() ([]byte, error) {
	msg, err := c.msgConn.ReadMessage()
	if err == nil {
		c.w.Write(append(bytes.Clone(msg), '\n'))
	}
	return msg, err
}

// connStdout reads c's messages, one a line.
func connStdout(c msgConn) io.Reader { return &lineView{c: c} }

// lineView is connStdout's reader.
type lineView struct {
	c   msgConn
	buf []byte
}

func (v *lineView) Read(p []byte) (int, error) {
	for len(v.buf) == 0 {
		msg, err := v.c.ReadMessage()
		if err != nil && !isTooLong(err) {
			return 0, err
		}
		v.buf = append(msg, '\n')
	}
	n := copy(p, v.buf)
	v.buf = v.buf[n:]
	return n, nil
}

// connStdin writes each line written to it, which may come in pieces, to
// c as one message.
func connStdin(c msgConn) io.Writer { return &messageSplitter{c: c} }

// messageSplitter is connStdin's writer.
type messageSplitter struct {
	c       msgConn
	partial []byte
}

func (w *messageSplitter) Write(p []byte) (int, error) {
	w.partial = append(w.partial, p...)
	for {
		i := bytes.IndexByte(w.partial, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := bytes.Clone(w.partial[:i])
		w.partial = w.partial[i+1:]
		if err := w.c.WriteMessage(line); err != nil {
			return 0, err
		}
	}
}

// remoteInit runs the handshake on m and returns the answer to initialize.
func remoteInit(t *testing.T, m *mux) *wireMsg {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	a, err := m.Call(ctx, "initialize", json.RawMessage(`{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}`))
	if err != nil || a.Error != nil {
		t.Fatalf("initialize = %+v, %v", a, err)
	}
	if err := m.Notify(ctx, "notifications/initialized", nil); err != nil {
		t.Fatal(err)
	}
	return a
}

// muxCallTool calls a tool through m and returns the answer.
func muxCallTool(t *testing.T, ctx context.Context, m *mux, tool, args string) *wireMsg {
	t.Helper()
	a, err := boundedCall(ctx, m, "tools/call", json.RawMessage(fmt.Sprintf(`{"name":%q,"arguments":%s}`, tool, args)))
	if err != nil {
		t.Fatalf("tools/call %s: %v", tool, err)
	}
	return a
}

// boundedCall is m.Call, for at most remoteCallTimeout. A call that ends
// with neither an answer nor an error by its deadline (ctx's, if sooner) had
// its answer lost, which its error then says.
func boundedCall(ctx context.Context, m *mux, method string, params json.RawMessage) (*wireMsg, error) {
	ctx, cancel := context.WithTimeout(ctx, remoteCallTimeout)
	defer cancel()
	start := time.Now()
	a, err := m.Call(ctx, method, params)
	if errors.Is(err, context.DeadlineExceeded) {
		return nil, fmt.Errorf("neither an answer nor an error after %v: the answer to %s %s was lost",
			time.Since(start).Round(time.Millisecond), method, truncate(params, 100))
	}
	return a, err
}

// within returns what ch receives, or fails the test if nothing comes in
// remoteCallTimeout.
func within[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(remoteCallTimeout):
		t.Fatalf("gave up after %v waiting for %s", remoteCallTimeout, what)
		panic("unreachable")
	}
}

// readLineWithin reads the next line of out, failing the test if none comes
// in remoteCallTimeout. After a failure out must not be read again.
func readLineWithin(t *testing.T, out *bufio.Reader) string {
	t.Helper()
	type read struct {
		line string
		err  error
	}
	ch := make(chan read, 1)
	go func() {
		line, err := out.ReadString('\n')
		ch <- read{line, err}
	}()
	r := within(t, ch, "a line on Stdout: a message was lost")
	if r.err != nil {
		t.Fatalf("reading Stdout: %v", r.err)
	}
	return strings.TrimSuffix(r.line, "\n")
}

func TestRemoteCorralServesThroughTheMuxLikeAChild(t *testing.T) {
	t.Parallel()
	tg := startGateway(t, `{"mcpServers":{"a":{"command":"FAKE","args":["-state","STATE","-name","a"]}}}`)
	c := dialRemote("corral", tg.url, map[string]string{"X-Test": "1"}, nil, testLogger(t))
	m := remoteMux(t, c, nil, nil)

	var init struct{ ProtocolVersion string }
	json.Unmarshal(remoteInit(t, m).Result, &init)
	if init.ProtocolVersion != "2025-11-25" {
		t.Errorf("initialize answered protocol version %q, want 2025-11-25", init.ProtocolVersion)
	}
	if sid, version := c.sessionNow(); sid == "" || version != "2025-11-25" {
		t.Errorf("after initialize the session is %q and the version %q, want a session and 2025-11-25", sid, version)
	}
	ctx, cancelCalls := context.WithTimeout(t.Context(), remoteCallTimeout)
	defer cancelCalls()
	var tools struct{ Tools []struct{ Name string } }
	if err := callInto(ctx, m, "tools/list", nil, &tools); err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(tools.Tools, func(x struct{ Name string }) bool { return x.Name == "echo" }) {
		t.Errorf("tools/list = %+v, want echo among them", tools.Tools)
	}
	if got := toolText(t, muxCallTool(t, ctx, m, "echo", `{"text":"hello, remote"}`)); got != "hello, remote" {
		t.Errorf("echo answered %q", got)
	}
	// The GET stream opens after notifications/initialized; corral counts it.
	waitFor(t, 5*time.Second, "the GET stream to open", func() bool { return tg.h.streams.Load() == 1 })

	if err := c.Close(); err != nil {
		t.Errorf("Close = %v", err)
	}
	tg.h.mu.Lock()
	sessions := len(tg.h.sessions)
	tg.h.mu.Unlock()
	if sessions != 0 {
		t.Errorf("after Close corral has %d sessions, want 0: Close must end the session with DELETE", sessions)
	}
	if err := c.Err(); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("Err after Close = %v, want it to say the connection was closed", err)
	}
}

func TestRemoteCallsRunConcurrentlyAndASlowOneHoldsUpNone(t *testing.T) {
	t.Parallel()
	tg := startGateway(t, `{"mcpServers":{"a":{"command":"FAKE","args":["-state","STATE","-name","a"]}}}`)
	c := dialRemote("corral", tg.url, nil, nil, testLogger(t))
	m := remoteMux(t, c, nil, nil)
	remoteInit(t, m)

	slowCtx, cancelSlow := context.WithCancel(t.Context())
	slow := make(chan error, 1)
	go func() {
		_, err := m.Call(slowCtx, "tools/call", json.RawMessage(`{"name":"sleep","arguments":{"ms":600000}}`))
		slow <- err
	}()
	server := fakeProcesses(t, tg.dir)[0].PID
	var slowID json.RawMessage
	waitFor(t, 10*time.Second, "the server to receive the slow call", func() bool {
		for _, e := range fakeEvents(t, tg.dir, server) {
			if e.Tool == "sleep" {
				slowID = e.ID
				return true
			}
		}
		return false
	})

	const n = 50
	var wg sync.WaitGroup
	errs := make(chan string, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			text := fmt.Sprintf("call %d", i)
			a, err := boundedCall(t.Context(), m, "tools/call", json.RawMessage(fmt.Sprintf(`{"name":"echo","arguments":{"text":%q,"delay_ms":%d}}`, text, rand.IntN(20))))
			var r struct{ Content []struct{ Text string } }
			if err == nil {
				json.Unmarshal(a.Result, &r)
			}
			if err != nil || len(r.Content) != 1 || r.Content[0].Text != text {
				errs <- fmt.Sprintf("call %d = %+v, %v", i, a, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	select {
	case err := <-slow:
		t.Fatalf("the slow call ended early: %v", err)
	default:
	}

	// Cancelling the slow call reaches the server as notifications/cancelled.
	cancelSlow()
	if err := within(t, slow, "the cancelled call to return"); err != context.Canceled {
		t.Errorf("the cancelled call returned %v", err)
	}
	waitFor(t, 10*time.Second, "the server to record the cancellation", func() bool {
		return slices.ContainsFunc(fakeEvents(t, tg.dir, server), func(e fakeEvent) bool {
			return e.Event == "cancelled" && string(e.RequestID) == string(slowID)
		})
	})
}

func TestRemoteLargeAnswersArriveWholeWhileOthersFlow(t *testing.T) {
	t.Parallel()
	tg := startGateway(t, `{"mcpServers":{"a":{"command":"FAKE","args":["-state","STATE","-name","a"]}}}`)
	c := dialRemote("corral", tg.url, nil, nil, testLogger(t))
	m := remoteMux(t, c, nil, nil)
	remoteInit(t, m)
	// Answers larger than a reader holds are written as they arrive, under
	// the stdout lock: lines of concurrent answers must never mix. The mux
	// would skip mixed lines, and their calls would get no answer.
	sizes := []int{8 << 20, 2 << 20, 2 << 20, 2 << 20, 1 << 20, 400 << 10, 10, 10, 10, 10}
	var wg sync.WaitGroup
	for _, size := range sizes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a, err := boundedCall(t.Context(), m, "tools/call", json.RawMessage(fmt.Sprintf(`{"name":"big","arguments":{"bytes":%d}}`, size)))
			if err != nil {
				t.Errorf("big %d: %v", size, err)
				return
			}
			var r struct{ Content []struct{ Text string } }
			if json.Unmarshal(a.Result, &r) != nil || len(r.Content) != 1 || len(r.Content[0].Text) != size {
				t.Errorf("big %d answered %s", size, truncate(a.Result, 200))
				return
			}
			for i, b := range []byte(r.Content[0].Text) {
				if b != byte('a'+i%26) {
					t.Errorf("big %d differs at byte %d", size, i)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// lineRecorder keeps what the mux reads, to check the order of lines.
type lineRecorder struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (r *lineRecorder) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.buf.Write(p)
}

func (r *lineRecorder) lines() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Split(strings.TrimSuffix(r.buf.String(), "\n"), "\n")
}

func TestRemoteProgressArrivesBeforeTheAnswer(t *testing.T) {
	t.Parallel()
	tg := startGateway(t, `{"mcpServers":{"a":{"command":"FAKE","args":["-state","STATE","-name","a"]}}}`)
	c := dialRemote("corral", tg.url, nil, nil, testLogger(t))
	// Call (without a related request) leaves the token as it is, and the
	// mux drops progress no request of its own asked for: what the mux
	// reads is recorded instead. It reads a line before acting on it, so
	// the answer's line is recorded before Call returns.
	rec := &lineRecorder{}
	m := remoteMux(t, c, rec, nil)
	remoteInit(t, m)

	a, err := boundedCall(t.Context(), m, "tools/call", json.RawMessage(`{"name":"progress","arguments":{"steps":3},"_meta":{"progressToken":"tok"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := toolText(t, a); got != "done 3" {
		t.Errorf("progress answered %q, want \"done 3\"", got)
	}
	var order []string
	for _, line := range rec.lines() {
		msg, err := decodeServerLine([]byte(line))
		switch {
		case err != nil:
			t.Errorf("a line on Stdout is not JSON-RPC: %q", line)
		case msg.Method == "notifications/progress":
			var p struct {
				ProgressToken string
				Progress      int
			}
			json.Unmarshal(msg.Params, &p)
			order = append(order, fmt.Sprintf("progress %s %d", p.ProgressToken, p.Progress))
		case bytes.Equal(msg.ID, a.ID):
			order = append(order, "answer")
		}
	}
	want := []string{"progress tok 1", "progress tok 2", "progress tok 3", "answer"}
	if !slices.Equal(order, want) {
		t.Errorf("lines about the call arrived as %q, want %q", order, want)
	}
}

// testRemote is a Streamable HTTP MCP server for tests. It answers
// initialize (opening session, if set), accepts notifications and answers,
// serves other requests with call, and GET with get (405 if nil). It records
// the headers of every request, by method.
type testRemote struct {
	session string
	version string // that initialize answers; if empty, 2025-06-18
	call    func(w http.ResponseWriter, r *http.Request, msg *wireMsg)
	get     func(w http.ResponseWriter, r *http.Request)

	mu      sync.Mutex
	headers map[string][]http.Header // by JSON-RPC method, "GET" or "DELETE"
	events  []string                 // what happened, in order, for tests that say so
	url     string
}

func newTestRemote(t *testing.T, tr *testRemote) *testRemote {
	tr.headers = map[string][]http.Header{}
	ts := httptest.NewServer(tr)
	t.Cleanup(ts.Close)
	tr.url = ts.URL + "/mcp?token=secret"
	return tr
}

func (tr *testRemote) record(key string, h http.Header) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.headers[key] = append(tr.headers[key], h.Clone())
}

func (tr *testRemote) event(e string) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.events = append(tr.events, e)
}

func (tr *testRemote) recorded(key string) []http.Header {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.headers[key]
}

func (tr *testRemote) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet:
		tr.record("GET", r.Header)
		if tr.get == nil {
			http.Error(w, "no stream here", http.StatusMethodNotAllowed)
			return
		}
		tr.get(w, r)
		return
	case http.MethodDelete:
		tr.record("DELETE", r.Header)
		w.WriteHeader(http.StatusNoContent)
		return
	}
	body, _ := io.ReadAll(r.Body)
	msg, err := decodeServerLine(body)
	if err != nil {
		http.Error(w, "not JSON-RPC", http.StatusBadRequest)
		return
	}
	tr.record(msg.Method, r.Header)
	switch {
	case msg.Method == "initialize":
		if tr.session != "" {
			w.Header().Set("Mcp-Session-Id", tr.session)
		}
		version := tr.version
		if version == "" {
			version = "2025-06-18"
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":%q,"capabilities":{"tools":{}},"serverInfo":{"name":"test","version":"1"}}}`, msg.ID, version)
	case msg.ID == nil || msg.Method == "":
		if msg.Method == "notifications/cancelled" {
			tr.event("cancelled " + string(msg.Params))
		}
		w.WriteHeader(http.StatusAccepted)
	case tr.call != nil:
		tr.call(w, r, msg)
	default:
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{}}`, msg.ID)
	}
}

// toolName returns the name in a tools/call's params.
func toolName(msg *wireMsg) string {
	var p struct{ Name string }
	json.Unmarshal(msg.Params, &p)
	return p.Name
}

func TestRemoteResponsesBecomeOneLinePerMessage(t *testing.T) {
	t.Parallel()
	note := `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"p","progress":1,"message":"a \"quoted\"\nline, {braces} and [brackets]"}}`
	answer := `{"jsonrpc":"2.0","id":424242,"result":{"content":[{"type":"text","text":"ok \\ é \u2028"}],"isError":false}}`
	// Larger than what a reader holds before writing: written as it comes.
	big := `{"jsonrpc":"2.0","id":424242,"result":{"content":[{"type":"text","text":"` + strings.Repeat(`é\"x\\ `, largeMessage/4) + `"}]}}`
	indent := func(msg string) string {
		var b bytes.Buffer
		if err := json.Indent(&b, []byte(msg), "", "  "); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	half := strings.Index(note, `"params":`) + len(`"params":`)
	cases := []struct {
		name        string
		contentType string
		body        string
		want        []string
	}{
		{"a pretty-printed JSON answer", "application/json", indent(answer) + "\n", []string{answer}},
		{"a JSON array of a notification and the answer", "application/json; charset=utf-8",
			"[ " + indent(note) + " ,\n\t" + answer + " ]", []string{note, answer}},
		{"events with comments, other fields, CRLF, an empty priming event and data over two lines", "text/event-stream",
			": hello\r\n\r\nid: 0\r\ndata:\r\n\r\nevent: message\r\nid: 1\r\nretry: 100\r\ndata: " + note[:half] + "\r\ndata:" + note[half:] + "\r\n\r\n" +
				"data: " + answer + "\n\n", []string{note, answer}},
		{"an answer larger than a reader holds, in an event", "text/event-stream", "data: " + big + "\n\n", []string{big}},
		{"a large pretty-printed answer", "application/json", indent(big), []string{big}},
	}
	tr := newTestRemote(t, &testRemote{call: func(w http.ResponseWriter, r *http.Request, msg *wireMsg) {
		tc := cases[0]
		for _, x := range cases {
			if x.name == toolName(msg) {
				tc = x
			}
		}
		w.Header().Set("Content-Type", tc.contentType)
		io.WriteString(w, strings.ReplaceAll(tc.body, "424242", string(msg.ID)))
	}})
	c := dialRemote("test", tr.url, nil, nil, testLogger(t))
	t.Cleanup(func() { c.Close() })
	out := bufio.NewReader(connStdout(c))
	for i, tc := range cases {
		ok := t.Run(tc.name, func(t *testing.T) {
			id := fmt.Sprint(i + 1)
			fmt.Fprintf(connStdin(c), `{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":%q}}`+"\n", id, tc.name)
			for _, want := range tc.want {
				want = strings.ReplaceAll(want, "424242", id)
				if got := readLineWithin(t, out); got != want {
					t.Errorf("line on Stdout = %s, want %s", truncate([]byte(got), 300), truncate([]byte(want), 300))
				}
			}
		})
		if !ok {
			break // Stdout may be out of step, or still read by a reader that gave up
		}
	}
}

func TestRemoteHTTPErrorsFailOnlyTheirCall(t *testing.T) {
	t.Parallel()
	tr := newTestRemote(t, &testRemote{call: func(w http.ResponseWriter, r *http.Request, msg *wireMsg) {
		switch toolName(msg) {
		case "plain500":
			http.Error(w, "boom: the database is down", http.StatusInternalServerError)
		case "rpcError":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprintf(w, "{\n  \"jsonrpc\": \"2.0\",\n  \"id\": %s,\n  \"error\": {\"code\": -32602, \"message\": \"no such tool\"}\n}\n", msg.ID)
		case "otherRPCError":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"bad session header"}}`)
		case "noAnswer":
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"hi"}}`)
		case "html":
			w.Header().Set("Content-Type", "text/html")
			io.WriteString(w, "<html>hello</html>")
		case "tooBig":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"text":"%s"}}`, msg.ID, strings.Repeat("x", 8192))
		case "cutOff":
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprintf(w, `data: {"jsonrpc":"2.0","id":%s,"result":{"text":"hal`, msg.ID)
		case "dropped":
			conn, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				conn.Close()
			}
		default:
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"fine"}]}}`, msg.ID)
		}
	}})
	c := dialRemote("test", tr.url, nil, nil, testLogger(t))
	c.maxMessage = 4096
	m := remoteMux(t, c, nil, nil)
	remoteInit(t, m)
	shown := strings.TrimSuffix(tr.url, "?token=secret")
	for _, tc := range []struct {
		tool     string
		wantCode int
		want     []string
	}{
		{"plain500", codeUnavailable, []string{`server "test" (` + shown + `)`, "answered HTTP 500 Internal Server Error: boom: the database is down"}},
		{"rpcError", codeInvalidParams, []string{"no such tool"}},
		{"otherRPCError", codeUnavailable, []string{shown, "answered HTTP 400 Bad Request", "bad session header"}},
		{"noAnswer", codeUnavailable, []string{shown, "no answer to the request"}},
		{"html", codeUnavailable, []string{shown, `Content-Type "text/html"`}},
		{"tooBig", codeInternalError, []string{shown, "over the 4096-byte limit"}},
		{"cutOff", codeUnavailable, []string{shown, "no answer to the request"}},
		{"dropped", codeUnavailable, []string{shown, "cannot be reached"}},
	} {
		t.Run(tc.tool, func(t *testing.T) {
			a := muxCallTool(t, t.Context(), m, tc.tool, `{}`)
			if a.Error == nil || a.Error.Code != tc.wantCode {
				t.Fatalf("%s answered %+v, want error %d", tc.tool, a, tc.wantCode)
			}
			for _, w := range tc.want {
				if !strings.Contains(a.Error.Message, w) {
					t.Errorf("%s failed with %q, want it to say %q", tc.tool, a.Error.Message, w)
				}
			}
			if strings.Contains(a.Error.Message, "secret") {
				t.Errorf("%s failed with %q, which shows the URL's query", tc.tool, a.Error.Message)
			}
		})
	}
	if got := toolText(t, muxCallTool(t, t.Context(), m, "ok", `{}`)); got != "fine" {
		t.Errorf("after the failures a call answered %q", got)
	}
	if c.Err() != nil {
		t.Errorf("the failures ended the connection: %v", c.Err())
	}
}

func TestRemoteRequestsCarryTheSessionAndTheModernHeaders(t *testing.T) {
	t.Parallel()
	tr := newTestRemote(t, &testRemote{session: "sess-1", version: "2025-06-18"})
	c := dialRemote("test", tr.url, map[string]string{"Authorization": "Bearer xyz"}, nil, testLogger(t))
	t.Cleanup(func() { c.Close() })
	out := bufio.NewReader(connStdout(c))
	stdin := connStdin(c)
	roundTrip := func(line string) {
		t.Helper()
		io.WriteString(stdin, line+"\n")
		readLineWithin(t, out)
	}
	// tools/list is written before initialize is answered, in pieces that
	// do not follow the lines: it must wait for the session all the same.
	both := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}` + "\n" +
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}` + "\n"
	for _, piece := range []string{both[:10], both[10 : len(both)-20], both[len(both)-20:]} {
		io.WriteString(stdin, piece)
	}
	for range 2 {
		readLineWithin(t, out)
	}
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}`
	roundTrip(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"héllo wörld",` + meta + `}}`)
	roundTrip(`{"jsonrpc":"2.0","id":4,"method":"resources/read","params":{"uri":" file:///a b ",` + meta + `}}`)
	roundTrip(`{"jsonrpc":"2.0","id":5,"method":"prompts/get","params":{"name":"plain-name",` + meta + `}}`)

	b64 := func(s string) string { return "=?base64?" + base64.StdEncoding.EncodeToString([]byte(s)) + "?=" }
	for _, tc := range []struct {
		method string
		want   map[string]string // "" for a header that must be absent
	}{
		{"initialize", map[string]string{"Authorization": "Bearer xyz", "Content-Type": "application/json",
			"Accept": "application/json, text/event-stream", "Mcp-Session-Id": "", "MCP-Protocol-Version": "", "Mcp-Method": ""}},
		{"tools/list", map[string]string{"Authorization": "Bearer xyz", "Mcp-Session-Id": "sess-1", "MCP-Protocol-Version": "2025-06-18", "Mcp-Method": ""}},
		{"tools/call", map[string]string{"Authorization": "Bearer xyz", "Mcp-Session-Id": "", "MCP-Protocol-Version": "2026-07-28",
			"Mcp-Method": "tools/call", "Mcp-Name": b64("héllo wörld")}},
		{"resources/read", map[string]string{"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "resources/read", "Mcp-Name": b64(" file:///a b ")}},
		{"prompts/get", map[string]string{"Mcp-Method": "prompts/get", "Mcp-Name": "plain-name"}},
	} {
		hs := tr.recorded(tc.method)
		if len(hs) != 1 {
			t.Errorf("%s was posted %d times, want 1", tc.method, len(hs))
			continue
		}
		for k, want := range tc.want {
			if got := hs[0].Get(k); got != want {
				t.Errorf("%s was posted with %s: %q, want %q", tc.method, k, got, want)
			}
		}
	}
}

func TestHeaderValue(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"echo", "echo"},
		{"file:///a/b.txt?x=1", "file:///a/b.txt?x=1"},
		{"with inner spaces", "with inner spaces"},
		{" leading", "=?base64?IGxlYWRpbmc=?="},
		{"trailing ", "=?base64?dHJhaWxpbmcg?="},
		{"héllo", "=?base64?aMOpbGxv?="},
		{"tab\there", "=?base64?dGFiCWhlcmU=?="},
		{"=?base64?eA==?=", "=?base64?PT9iYXNlNjQ/ZUE9PT89?="},
	} {
		if got := headerValue(tc.in); got != tc.want {
			t.Errorf("headerValue(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestRemoteGetStreamCarriesTheServersMessagesAndReconnects(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	n := 0
	tr := newTestRemote(t, &testRemote{session: "sess-2", get: func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		n++
		i := n
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		switch i {
		case 1:
			// A stream that ends after one event, as a server's may.
			io.WriteString(w, ": open\n\nid: 7\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}\n\n")
		case 2:
			http.Error(w, "try later", http.StatusServiceUnavailable)
		default:
			io.WriteString(w, "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/prompts/list_changed\"}\n\n")
			http.NewResponseController(w).Flush()
			<-r.Context().Done()
		}
	}})
	c := dialRemote("test", tr.url, nil, nil, testLogger(t))
	c.retryMin, c.retryMax = time.Millisecond, 10*time.Millisecond
	notes := make(chan string, 10)
	m := remoteMux(t, c, nil, func(msg *wireMsg) { notes <- msg.Method })
	remoteInit(t, m)
	for _, want := range []string{"notifications/tools/list_changed", "notifications/prompts/list_changed"} {
		select {
		case got := <-notes:
			if got != want {
				t.Errorf("notification %q arrived, want %q", got, want)
			}
		case <-time.After(remoteCallTimeout):
			t.Fatalf("%s never arrived", want)
		}
	}
	hs := tr.recorded("GET")
	if len(hs) != 3 {
		t.Fatalf("GET was sent %d times, want 3", len(hs))
	}
	for i, h := range hs {
		if h.Get("Accept") != "text/event-stream" || h.Get("Mcp-Session-Id") != "sess-2" || h.Get("MCP-Protocol-Version") != "2025-06-18" {
			t.Errorf("GET %d had headers %v, want Accept, the session and the version", i+1, h)
		}
	}
	if got := hs[2].Get("Last-Event-ID"); got != "7" {
		t.Errorf("GET after the stream with event 7 had Last-Event-ID %q, want 7", got)
	}
}

func TestRemoteServerWithoutAStreamIsAskedOnce(t *testing.T) {
	t.Parallel()
	asked := make(chan struct{}, 100)
	tr := newTestRemote(t, &testRemote{get: func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no stream here", http.StatusMethodNotAllowed)
		asked <- struct{}{}
	}})
	c := dialRemote("test", tr.url, nil, nil, testLogger(t))
	c.retryMin, c.retryMax = time.Millisecond, time.Millisecond
	m := remoteMux(t, c, nil, nil)
	remoteInit(t, m)
	within(t, asked, "the GET")
	// A few round trips give a stream that retried every millisecond the
	// time to show it.
	for range 5 {
		muxCallTool(t, t.Context(), m, "x", `{}`)
	}
	if got := len(tr.recorded("GET")); got != 1 {
		t.Errorf("GET answered 405 and was sent %d times, want 1", got)
	}
}

func TestRemoteCancellationIsPostedThenTheRequestAborted(t *testing.T) {
	t.Parallel()
	started := make(chan struct{})
	aborted := make(chan struct{})
	var tr *testRemote
	tr = newTestRemote(t, &testRemote{session: "sess-3", call: func(w http.ResponseWriter, r *http.Request, msg *wireMsg) {
		close(started)
		<-r.Context().Done()
		tr.event("aborted")
		close(aborted)
	}})
	c := dialRemote("test", tr.url, nil, nil, testLogger(t))
	m := remoteMux(t, c, nil, nil)
	remoteInit(t, m)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := m.Call(ctx, "tools/call", json.RawMessage(`{"name":"hang"}`))
		done <- err
	}()
	within(t, started, "the server to receive the call")
	cancel()
	if err := within(t, done, "the cancelled call to return"); err != context.Canceled {
		t.Errorf("the cancelled call returned %v", err)
	}
	select {
	case <-aborted:
	case <-time.After(10 * time.Second):
		t.Fatal("the cancelled request's POST was never aborted")
	}
	tr.mu.Lock()
	events := slices.Clone(tr.events)
	tr.mu.Unlock()
	if len(events) != 2 || !strings.HasPrefix(events[0], `cancelled {"requestId":`) || events[1] != "aborted" {
		t.Errorf("the server saw %q, want the cancellation and then the abort", events)
	}
}

func TestRemoteSessionExpiryEndsTheConnection(t *testing.T) {
	t.Parallel()
	tr := newTestRemote(t, &testRemote{session: "sess-4", call: func(w http.ResponseWriter, r *http.Request, msg *wireMsg) {
		http.Error(w, "session not found", http.StatusNotFound)
	}})
	c := dialRemote("test", tr.url, nil, nil, testLogger(t))
	m := remoteMux(t, c, nil, nil)
	remoteInit(t, m)
	_, err := boundedCall(t.Context(), m, "tools/call", json.RawMessage(`{"name":"x"}`))
	shown := strings.TrimSuffix(tr.url, "?token=secret")
	if err == nil || !strings.Contains(err.Error(), "session expired") || !strings.Contains(err.Error(), shown) {
		t.Errorf("a call the server answered 404 for the session failed with %v, want the session expired, with the URL", err)
	}
	select {
	case <-c.Done():
	default:
		t.Fatal("Done is open after the session expired")
	}
	if err := c.Err(); err == nil || !strings.Contains(err.Error(), "session expired") || !strings.Contains(err.Error(), `"test"`) {
		t.Errorf("Err = %v, want the session expired, naming the server", err)
	}
	if _, err := connStdin(c).Write([]byte(`{"jsonrpc":"2.0","id":9,"method":"ping"}` + "\n")); err == nil {
		t.Error("a write after the session expired succeeded")
	}
	c.Close()
	if n := len(tr.recorded("DELETE")); n != 0 {
		t.Errorf("Close sent DELETE %d times for an expired session, want none", n)
	}
}

// remoteGoroutines returns the stacks of goroutines running remote.go's code.
func remoteGoroutines() []string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var found []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "main.(*remoteConn)") || strings.Contains(g, "main.(*msgReader)") || strings.Contains(g, "main.remoteStdin") {
			found = append(found, g)
		}
	}
	return found
}

// Not parallel: it counts every goroutine of remote.go in the process.
func TestRemoteCloseEndsTheSessionAndLeavesNoGoroutine(t *testing.T) {
	streaming := make(chan struct{})
	hang := make(chan struct{})
	tr := newTestRemote(t, &testRemote{session: "sess-5",
		get: func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(http.StatusOK)
			http.NewResponseController(w).Flush()
			close(streaming)
			<-r.Context().Done()
		},
		call: func(w http.ResponseWriter, r *http.Request, msg *wireMsg) {
			close(hang)
			<-r.Context().Done()
		},
	})
	c := dialRemote("test", tr.url, nil, nil, testLogger(t))
	m := remoteMux(t, c, nil, nil)
	remoteInit(t, m)
	within(t, streaming, "the GET stream to open")
	go boundedCall(t.Context(), m, "tools/call", json.RawMessage(`{"name":"hang"}`)) // until Close
	within(t, hang, "the server to receive the call")

	if err := c.Close(); err != nil {
		t.Errorf("Close = %v", err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("a second Close = %v", err)
	}
	if hs := tr.recorded("DELETE"); len(hs) != 1 || hs[0].Get("Mcp-Session-Id") != "sess-5" {
		t.Errorf("Close sent DELETE with %v, want one with the session", hs)
	}
	select {
	case <-c.Done():
	default:
		t.Error("Done is open after Close")
	}
	if n, err := connStdout(c).Read(make([]byte, 10)); err != io.EOF {
		t.Errorf("Stdout after Close read %d bytes, %v; want io.EOF", n, err)
	}
	if left := remoteGoroutines(); len(left) > 0 {
		t.Errorf("%d goroutines of the connection are left after Close:\n%s", len(left), strings.Join(left, "\n\n"))
	}
}

// bigText returns n bytes of the text the large answers of these tests
// carry: the alphabet, over and over.
func bigText(n int) string {
	var b strings.Builder
	b.Grow(n)
	for i := range n {
		b.WriteByte(byte('a' + i%26))
	}
	return b.String()
}

// checkBigAnswer reports what is wrong with a, the answer to a call for
// bigText(size), or "".
func checkBigAnswer(a *wireMsg, size int) string {
	var r struct{ Content []struct{ Text string } }
	if a.Error != nil || json.Unmarshal(a.Result, &r) != nil || len(r.Content) != 1 {
		return fmt.Sprintf("answered %+v %s", a.Error, truncate(a.Result, 200))
	}
	if got := r.Content[0].Text; got != bigText(size) {
		return fmt.Sprintf("answered %d bytes of text, not the %d expected", len(got), size)
	}
	return ""
}

func TestRemoteLargeAnswersInPiecesNeverMix(t *testing.T) {
	t.Parallel()
	// Every large answer sends a first part larger than a write to Stdout
	// but smaller than what a reader holds, then waits until every other
	// has sent its own, then sends the rest in pieces: their bytes arrive
	// interleaved, and so would be written if they were not held.
	const large, first = 4, largeMessage / 2
	var started sync.WaitGroup
	started.Add(large)
	allStarted := make(chan struct{})
	go func() { started.Wait(); close(allStarted) }()
	tr := newTestRemote(t, &testRemote{call: func(w http.ResponseWriter, r *http.Request, msg *wireMsg) {
		var p struct{ Arguments struct{ Bytes int } }
		json.Unmarshal(msg.Params, &p)
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"%s"}]}}`, msg.ID, bigText(p.Arguments.Bytes))
		w.Header().Set("Content-Type", "application/json")
		if toolName(msg) == "small" {
			io.WriteString(w, body)
			return
		}
		rc := http.NewResponseController(w)
		io.WriteString(w, body[:first])
		rc.Flush()
		started.Done()
		select {
		case <-allStarted:
		case <-time.After(10 * time.Second): // let a broken client fail, not hang
		case <-r.Context().Done():
			return
		}
		for rest := body[first:]; len(rest) > 0; {
			n := min(len(rest), 16<<10)
			io.WriteString(w, rest[:n])
			rc.Flush()
			rest = rest[n:]
		}
	}})
	c := dialRemote("test", tr.url, nil, nil, testLogger(t))
	m := remoteMux(t, c, nil, nil)
	remoteInit(t, m)
	var wg sync.WaitGroup
	call := func(tool string, size int) {
		defer wg.Done()
		a, err := boundedCall(t.Context(), m, "tools/call", json.RawMessage(fmt.Sprintf(`{"name":%q,"arguments":{"bytes":%d}}`, tool, size)))
		if err != nil {
			t.Errorf("%s %d: %v", tool, size, err)
		} else if what := checkBigAnswer(a, size); what != "" {
			t.Errorf("%s %d %s", tool, size, what)
		}
	}
	for i := range large {
		wg.Add(2)
		go call("large", 1<<20+i)
		go call("small", 10+i)
	}
	wg.Wait()
}

func TestRemoteLargeOrBrokenAnswersFailOnlyTheirCall(t *testing.T) {
	t.Parallel()
	const muxLimit = 1 << 20
	tr := newTestRemote(t, &testRemote{call: func(w http.ResponseWriter, r *http.Request, msg *wireMsg) {
		var p struct{ Arguments struct{ Bytes int } }
		json.Unmarshal(msg.Params, &p)
		w.Header().Set("Content-Type", "application/json")
		answer := fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"%s"}]}}`, msg.ID, bigText(p.Arguments.Bytes))
		rc := http.NewResponseController(w)
		switch toolName(msg) {
		case "sized":
			for rest := answer; len(rest) > 0; {
				n := min(len(rest), 32<<10)
				io.WriteString(w, rest[:n])
				rc.Flush()
				rest = rest[n:]
			}
		case "invalid":
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"ok":tru}}`, msg.ID)
		case "invalidError":
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":"not an error object"}`, msg.ID)
		case "invalidEvent":
			// The stream stays open after the answer: its reader must not wait.
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprintf(w, "data: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"ok\":[1,]}}\n\n", msg.ID)
			rc.Flush()
			<-r.Context().Done()
		case "cut":
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "data: "+answer[:len(answer)/2])
		case "dropped":
			io.WriteString(w, answer[:len(answer)/2])
			rc.Flush()
			panic(http.ErrAbortHandler) // the connection is cut
		default:
			io.WriteString(w, answer)
		}
	}})
	shown := strings.TrimSuffix(tr.url, "?token=secret")
	for _, tc := range []struct {
		tool       string
		bytes      int
		maxMessage int64 // of the connection; 0 for the default
		wantCode   int
		want       string
	}{
		{"sized", 3 * muxLimit / 2, 0, codeInternalError, fmt.Sprintf("over the %d-byte line limit", muxLimit)},
		{"sized", muxLimit / 5, muxLimit / 8, codeInternalError, fmt.Sprintf("over the %d-byte limit", muxLimit/8)},
		// A message is passed on whole once read, whatever its size.
		{"sized", muxLimit - 1000, muxLimit / 2, codeInternalError, fmt.Sprintf("over the %d-byte limit", muxLimit/2)},
		{"invalid", 0, 0, codeUnavailable, "not valid JSON-RPC"},
		{"invalidError", 0, 0, codeUnavailable, "not valid JSON-RPC"},
		{"invalidEvent", 0, 0, codeUnavailable, "not valid JSON-RPC"},
		// An answer that breaks off is dropped, whatever its size, and the
		// connection fails the call.
		{"cut", muxLimit / 8, 0, codeUnavailable, "no answer to the request"},
		{"dropped", muxLimit / 8, 0, codeUnavailable, "broke off its answer"},
		{"cut", muxLimit / 2, 0, codeUnavailable, "no answer to the request"},
		{"dropped", muxLimit / 2, 0, codeUnavailable, "broke off its answer"},
	} {
		t.Run(fmt.Sprintf("%s %d", tc.tool, tc.bytes), func(t *testing.T) {
			t.Parallel()
			c := dialRemote("test", tr.url, nil, nil, testLogger(t))
			if tc.maxMessage > 0 {
				c.maxMessage = tc.maxMessage
			}
			m := remoteMuxLimit(t, c, nil, nil, muxLimit)
			remoteInit(t, m)
			// Calls that are answered flow around the one that fails.
			var wg sync.WaitGroup
			for i := range 3 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					a, err := boundedCall(t.Context(), m, "tools/call", json.RawMessage(fmt.Sprintf(`{"name":"sized","arguments":{"bytes":%d}}`, 1000*i)))
					if err != nil {
						t.Errorf("a call beside the failing one: %v", err)
					} else if what := checkBigAnswer(a, 1000*i); what != "" {
						t.Errorf("a call beside the failing one %s", what)
					}
				}()
			}
			a := muxCallTool(t, t.Context(), m, tc.tool, fmt.Sprintf(`{"bytes":%d}`, tc.bytes))
			wg.Wait()
			if a.Error == nil || a.Error.Code != tc.wantCode || !strings.Contains(a.Error.Message, tc.want) {
				t.Fatalf("answered %+v %s, want error %d saying %q", a.Error, truncate(a.Result, 100), tc.wantCode, tc.want)
			}
			if tc.wantCode == codeUnavailable && !strings.Contains(a.Error.Message, shown) {
				t.Errorf("failed with %q, which does not name the server's URL", a.Error.Message)
			}
			if what := checkBigAnswer(muxCallTool(t, t.Context(), m, "sized", `{"bytes":100}`), 100); what != "" {
				t.Errorf("after the failure a call %s", what)
			}
			if c.Err() != nil {
				t.Errorf("the failure ended the connection: %v", c.Err())
			}
		})
	}
}
