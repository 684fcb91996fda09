package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// sseFront is a gateway with fakeserver backends behind an HTTP front end
// whose log the test can wait on.
type sseFront struct {
	*testGateway
	h    *httpFrontEnd
	base string // http://127.0.0.1:PORT
	log  *logLines
}

// startSSEFront runs a gateway for configJSON (see startGateway) behind an
// HTTP front end of its own whose legacy SSE streams queue at most
// queueBytes (0 for the default). Everything stops when the test ends.
func startSSEFront(t *testing.T, configJSON string, queueBytes int64) *sseFront {
	t.Helper()
	tg := startGateway(t, configJSON)
	ll := &logLines{t: t, more: make(chan struct{})}
	log := slog.New(slog.NewTextHandler(ll, &slog.HandlerOptions{Level: slog.LevelDebug}))
	h := newHTTPFrontEnd(tg.gw, true, log)
	h.sseQueueBytes.Store(queueBytes)
	ts := httptest.NewUnstartedServer(h)
	ts.Config = newHTTPServer(h, log)
	ts.Start()
	t.Cleanup(func() { h.shutdown(); ts.Close() }) // before startGateway's: the gateway stops last
	return &sseFront{testGateway: tg, h: h, base: ts.URL, log: ll}
}

// logLines keeps a front end's log lines, and passes them to the test's log.
type logLines struct {
	t     testing.TB
	mu    sync.Mutex
	lines []string
	more  chan struct{} // closed and replaced at every line
}

func (l *logLines) Write(b []byte) (int, error) {
	l.t.Log(strings.TrimRight(string(b), "\n"))
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, string(b))
	close(l.more)
	l.more = make(chan struct{})
	return len(b), nil
}

// wait waits, at most 30s, for a line that matches re, and returns it.
func (l *logLines) wait(re string) string {
	l.t.Helper()
	rx := regexp.MustCompile(re)
	timeout := time.After(30 * time.Second)
	for i := 0; ; {
		l.mu.Lock()
		lines, more := l.lines[i:], l.more
		l.mu.Unlock()
		for _, line := range lines {
			i++
			if rx.MatchString(line) {
				return line
			}
		}
		select {
		case <-more:
		case <-timeout:
			l.t.Fatalf("no log line matching %q within 30s", re)
		}
	}
}

// sseClient is a client of the legacy HTTP+SSE transport for tests.
type sseClient struct {
	t        testing.TB
	endpoint string // where messages are POSTed, as the endpoint event named it, resolved
	first    string // the first event, as read
	auth     string // the Authorization header, if any
	body     io.ReadCloser
	cancel   context.CancelFunc
	done     chan struct{} // closed when the reader has returned

	mu      sync.Mutex
	waiting map[string]chan *wireMsg // by raw ID
	other   chan *wireMsg            // notifications and server requests
}

// dialSSEFront opens a stream at base+/sse and reads its endpoint event.
// With read false nothing is read after that (a client that reads too
// slowly). The stream is closed when the test ends.
func dialSSEFront(t testing.TB, base, auth string, read bool) *sseClient {
	t.Helper()
	resp, cancel := getSSE(t, base, auth, nil)
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		cancel()
		t.Fatalf("GET /sse = %s %s", resp.Status, b)
	}
	c := &sseClient{t: t, auth: auth, body: resp.Body, cancel: cancel, done: make(chan struct{}),
		waiting: map[string]chan *wireMsg{}, other: make(chan *wireMsg, 1000)}
	t.Cleanup(c.close)
	br := bufio.NewReader(resp.Body)
	var event, data string
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("reading the endpoint event: %v (read %q)", err, c.first)
		}
		c.first += line
		if line == "\n" {
			break
		}
		if v, ok := strings.CutPrefix(line, "event: "); ok {
			event = strings.TrimSpace(v)
		}
		if v, ok := strings.CutPrefix(line, "data: "); ok {
			data = strings.TrimSpace(v)
		}
	}
	if event != "endpoint" {
		t.Fatalf("the stream's first event = %q, want an endpoint event", c.first)
	}
	u, err := resp.Request.URL.Parse(data)
	if err != nil {
		t.Fatalf("endpoint %q: %v", data, err)
	}
	c.endpoint = u.String()
	if !read {
		close(c.done)
		return c
	}
	go func() {
		defer close(c.done)
		readEvents(br, c.dispatch)
	}()
	return c
}

// getSSE sends GET base+/sse with auth and the headers given in pairs. The
// stream lives until the returned function is called.
func getSSE(t testing.TB, base, auth string, headers []string) (*http.Response, context.CancelFunc) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", base+sseFrontPath, nil)
	req.Header.Set("Accept", "text/event-stream")
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i] == "Host" {
			req.Host = headers[i+1]
		}
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatalf("GET /sse: %v", err)
	}
	return resp, func() { cancel(); resp.Body.Close() }
}

func (c *sseClient) dispatch(m *wireMsg) {
	if m.Method != "" {
		c.other <- m
		return
	}
	c.mu.Lock()
	w := c.waiting[string(m.ID)]
	delete(c.waiting, string(m.ID))
	c.mu.Unlock()
	if w == nil {
		c.t.Errorf("an answer to no request: %+v", m)
		return
	}
	w <- m
}

// close closes the stream and waits for the reader. It may be called twice.
func (c *sseClient) close() {
	c.cancel()
	c.body.Close()
	<-c.done
}

// post POSTs body to the endpoint and returns the status and the body.
func (c *sseClient) post(body string) (int, string) {
	c.t.Helper()
	req, _ := http.NewRequest("POST", c.endpoint, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if c.auth != "" {
		req.Header.Set("Authorization", c.auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatalf("POST %s: %v", body, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// start sends a request and returns the channel its answer will come on.
func (c *sseClient) start(id, method, params string) <-chan *wireMsg {
	c.t.Helper()
	w := make(chan *wireMsg, 1)
	c.mu.Lock()
	c.waiting[id] = w
	c.mu.Unlock()
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":%q,"params":%s}`, id, method, params)
	if code, b := c.post(body); code != http.StatusAccepted {
		c.t.Fatalf("POST %s = %d %s, want 202", body, code, b)
	}
	return w
}

// call sends a request and waits, at most 30s, for its answer on the stream.
func (c *sseClient) call(id, method, params string) *wireMsg {
	c.t.Helper()
	select {
	case m := <-c.start(id, method, params):
		return m
	case <-time.After(30 * time.Second):
		c.t.Fatalf("no answer to %s %s on the stream", method, params)
		return nil
	}
}

// initialize opens the MCP session, declaring caps.
func (c *sseClient) initialize(caps string) {
	c.t.Helper()
	m := c.call("0", "initialize", `{"protocolVersion":"2024-11-05","capabilities":`+caps+`,"clientInfo":{"name":"test","version":"1"}}`)
	if m.Error != nil || !strings.Contains(string(m.Result), `"protocolVersion":"2024-11-05"`) {
		c.t.Fatalf("initialize answered %+v %s", m.Error, m.Result)
	}
	if code, b := c.post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`); code != http.StatusAccepted {
		c.t.Fatalf("notifications/initialized = %d %s", code, b)
	}
}

// metric returns the value of a metric without labels on /metrics.
func metric(t *testing.T, base, name string) string {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	m := regexp.MustCompile(`(?m)^` + name + ` (\S+)$`).FindStringSubmatch(string(b))
	if m == nil {
		t.Fatalf("/metrics has no %s:\n%s", name, b)
	}
	return m[1]
}

func TestLegacySSEServesASessionOnItsStream(t *testing.T) {
	t.Parallel()
	f := startSSEFront(t, `{"mcpServers":{"a": {"command":"FAKE","args":["-state","STATE","-name","a"]}}}`, 0)
	c := dialSSEFront(t, f.base, "", true)
	if !regexp.MustCompile(`^event: endpoint\ndata: /messages\?sessionId=[A-Za-z0-9_-]+\.[0-9a-f]{32}\n\n$`).MatchString(c.first) {
		t.Errorf("first event = %q, want the endpoint event naming /messages?sessionId=ID", c.first)
	}
	c.initialize(`{"sampling":{}}`)
	if got := toolText(t, c.call("1", "tools/call", `{"name":"echo","arguments":{"text":"über"}}`)); got != "über" {
		t.Errorf("echo answered %q on the stream, want %q", got, "über")
	}

	t.Run("concurrent calls each get their own answer", func(t *testing.T) {
		// The first sent is the slowest: answers come in the other order.
		// 7 and "7" are two requests.
		const n = 10
		answers := map[string]<-chan *wireMsg{}
		for i := range n {
			id := fmt.Sprint(i + 2)
			if i%2 == 1 {
				id = fmt.Sprintf(`"%d"`, i+1)
			}
			answers[id] = c.start(id, "tools/call", fmt.Sprintf(`{"name":"echo","arguments":{"text":%q,"delay_ms":%d}}`, "call "+id, (n-i)*30))
		}
		for id, a := range answers {
			select {
			case m := <-a:
				if got := toolText(t, m); got != "call "+id || string(m.ID) != id {
					t.Errorf("call %s answered %q with id %s", id, got, m.ID)
				}
			case <-time.After(30 * time.Second):
				t.Fatalf("no answer to call %s", id)
			}
		}
	})

	t.Run("a server's request comes on the stream and its answer reaches the server", func(t *testing.T) {
		a := c.start("20", "tools/call", `{"name":"sample","arguments":{"prompt":"hi"}}`)
		var req *wireMsg
		select {
		case req = <-c.other:
		case <-time.After(30 * time.Second):
			t.Fatal("no sampling/createMessage on the stream")
		}
		for req.Method != "sampling/createMessage" { // list_changed may come first
			req = <-c.other
		}
		answer := fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"role":"assistant","model":"m","content":{"type":"text","text":"from the client"}}}`, req.ID)
		if code, b := c.post(answer); code != http.StatusAccepted {
			t.Fatalf("POST of the answer = %d %s", code, b)
		}
		if got := toolText(t, <-a); got != "sampled: from the client" {
			t.Errorf("sample answered %q", got)
		}
	})

	t.Run("metrics and health count the session and its stream", func(t *testing.T) {
		if got := healthSessions(t, f.base); got != 1 {
			t.Errorf("/healthz sessions = %d, want 1", got)
		}
		if got := metric(t, f.base, "corral_sessions"); got != "1" {
			t.Errorf("corral_sessions = %s, want 1", got)
		}
		if got := metric(t, f.base, "corral_event_streams"); got != "1" {
			t.Errorf("corral_event_streams = %s, want 1", got)
		}
	})

	t.Run("an open stream's session never expires", func(t *testing.T) {
		if n := f.h.expireIdle(time.Now().Add(48 * time.Hour)); n != 0 {
			t.Errorf("expireIdle ended %d sessions, want none while the stream is open", n)
		}
	})

	sid := strings.TrimPrefix(c.endpoint, f.base+"/messages?sessionId=")
	for _, tc := range []struct {
		name, method, url, sid, body string
		want                         int
	}{
		{"an unknown sessionId gets 404", "POST", f.base + "/messages?sessionId=0123", "", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, 404},
		{"a missing sessionId gets 400", "POST", f.base + "/messages", "", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, 400},
		{"GET on /messages gets 405", "GET", c.endpoint, "", "", 405},
		{"POST on /sse gets 405", "POST", f.base + "/sse", "", `{}`, 405},
		{"malformed JSON gets 400", "POST", c.endpoint, "", `{"jsonrpc":`, 400},
		{"the session is not one of /mcp", "POST", f.base + "/mcp", sid, `{"jsonrpc":"2.0","id":1,"method":"ping"}`, 404},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(tc.method, tc.url, strings.NewReader(tc.body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			if tc.sid != "" {
				req.Header.Set("Mcp-Session-Id", tc.sid)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Errorf("%s %s = %d %s, want %d", tc.method, tc.url, resp.StatusCode, b, tc.want)
			}
		})
	}
	if got := toolText(t, c.call("30", "tools/call", `{"name":"echo","arguments":{"text":"still"}}`)); got != "still" {
		t.Errorf("after the bad requests echo answered %q", got)
	}
}

func TestLegacySSEStreamClosingEndsTheSessionAndCancelsItsCalls(t *testing.T) {
	t.Parallel()
	f := startSSEFront(t, `{"mcpServers":{"a": {"command":"FAKE","args":["-state","STATE","-name","a"]}}}`, 0)
	c := dialSSEFront(t, f.base, "", true)
	c.initialize(`{}`)
	c.start("1", "tools/call", `{"name":"hang","arguments":{}}`)
	var pid int
	var serverID json.RawMessage
	waitFor(t, 10*time.Second, "the call to reach the server", func() bool {
		for _, s := range fakeProcesses(t, f.dir) {
			for _, e := range fakeEvents(t, f.dir, s.PID) {
				if e.Event == "request" && e.Tool == "hang" {
					pid, serverID = s.PID, e.ID
					return true
				}
			}
		}
		return false
	})
	c.close()
	f.log.wait(`legacy SSE session ended: the client closed the stream`)
	waitFor(t, 10*time.Second, "the server to hear the call was cancelled", func() bool {
		for _, e := range fakeEvents(t, f.dir, pid) {
			if e.Event == "cancelled" && string(e.RequestID) == string(serverID) {
				return true
			}
		}
		return false
	})
	if code, b := c.post(`{"jsonrpc":"2.0","id":2,"method":"ping"}`); code != http.StatusNotFound {
		t.Errorf("POST to the closed stream's endpoint = %d %s, want 404", code, b)
	}
	if got := metric(t, f.base, "corral_sessions"); got != "0" {
		t.Errorf("corral_sessions = %s after the stream closed, want 0", got)
	}
	if got := healthSessions(t, f.base); got != 0 {
		t.Errorf("/healthz sessions = %d after the stream closed, want 0", got)
	}
}

// healthSessions returns the sessions /healthz counts.
func healthSessions(t *testing.T, base string) int {
	t.Helper()
	resp, err := http.Get(base + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r struct{ Sessions *int }
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || r.Sessions == nil {
		t.Fatalf("/healthz: %v, sessions %v", err, r.Sessions)
	}
	return *r.Sessions
}

func TestLegacySSECallsInFlightAtShutdownGetTheirAnswers(t *testing.T) {
	t.Parallel()
	f := startSSEFront(t, `{"mcpServers":{"a": {"command":"FAKE","args":["-state","STATE"]}}}`, 0)
	c := dialSSEFront(t, f.base, "", true)
	c.initialize(`{}`)
	release := filepath.Join(t.TempDir(), "release")
	answer := c.start("1", "tools/call", fmt.Sprintf(`{"name":"wait","arguments":{"file":%q}}`, release))
	waitFor(t, 10*time.Second, "the call to reach the server", func() bool {
		for _, s := range fakeProcesses(t, f.dir) {
			for _, e := range fakeEvents(t, f.dir, s.PID) {
				if e.Tool == "wait" {
					return true
				}
			}
		}
		return false
	})
	f.h.shutdown() // as http.Server.Shutdown does first
	if code, b := c.post(`{"jsonrpc":"2.0","id":2,"method":"ping"}`); code != http.StatusServiceUnavailable {
		t.Errorf("a new call once shutdown began = %d %s, want 503", code, b)
	}
	os.WriteFile(release, nil, 0o600)
	select {
	case m := <-answer:
		if got := toolText(t, m); got != "released" {
			t.Errorf("the call in flight at shutdown answered %q, want released", got)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the call in flight at shutdown got no answer on the stream")
	}
	f.log.wait(`legacy SSE session ended: corral is shutting down`)
	<-c.done // the stream ended
}

func TestLegacySSEHasTheChecksAndLimitsOfStreamableHTTP(t *testing.T) {
	t.Parallel()
	token := filepath.Join(t.TempDir(), "token")
	os.WriteFile(token, []byte("s3cret\n"), 0o600)
	f := startSSEFront(t, `{"authTokenFile":"`+token+`","maxSessions":1,"maxRequestBytes":1024,"mcpServers":{"a": {"command":"FAKE","args":["-state","STATE"]}}}`, 0)
	const auth = "Bearer s3cret"
	for _, tc := range []struct {
		name    string
		headers []string
		want    int
	}{
		{"no token", nil, 401},
		{"a wrong token", []string{"Authorization", "Bearer nope"}, 401},
		{"a foreign Origin", []string{"Authorization", auth, "Origin", "https://evil.example"}, 403},
		{"a Host that is not loopback", []string{"Authorization", auth, "Host", "evil.example"}, 403},
	} {
		t.Run("GET /sse with "+tc.name, func(t *testing.T) {
			resp, cancel := getSSE(t, f.base, "", tc.headers)
			defer cancel()
			if resp.StatusCode != tc.want {
				t.Errorf("GET /sse = %s, want %d", resp.Status, tc.want)
			}
		})
	}
	c := dialSSEFront(t, f.base, auth, true)
	c.initialize(`{}`)
	for _, tc := range []struct {
		name    string
		headers []string
		want    int
	}{
		{"no token", nil, 401},
		{"a foreign Origin", []string{"Authorization", auth, "Origin", "https://evil.example"}, 403},
	} {
		t.Run("POST /messages with "+tc.name, func(t *testing.T) {
			req, _ := http.NewRequest("POST", c.endpoint, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
			for i := 0; i+1 < len(tc.headers); i += 2 {
				req.Header.Set(tc.headers[i], tc.headers[i+1])
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Errorf("POST /messages = %s, want %d", resp.Status, tc.want)
			}
		})
	}
	t.Run("a body over maxRequestBytes gets 413", func(t *testing.T) {
		body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"` + strings.Repeat("x", 2000) + `"}}}`
		if code, b := c.post(body); code != http.StatusRequestEntityTooLarge {
			t.Errorf("POST of %d bytes = %d %s, want 413", len(body), code, b)
		}
	})
	t.Run("maxSessions counts SSE sessions with the others", func(t *testing.T) {
		resp, cancel := getSSE(t, f.base, auth, nil)
		defer cancel()
		if resp.StatusCode != http.StatusServiceUnavailable {
			t.Errorf("a second GET /sse = %s, want 503 (maxSessions 1)", resp.Status)
		}
		cl := &client{t: t, url: f.base + mcpPath, auth: auth}
		if resp, b := cl.post(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`); resp.StatusCode != http.StatusServiceUnavailable {
			t.Errorf("a Streamable HTTP initialize = %s %s, want 503 (maxSessions 1)", resp.Status, b)
		}
	})
	if got := toolText(t, c.call("2", "tools/call", `{"name":"echo","arguments":{"text":"ok"}}`)); got != "ok" {
		t.Errorf("the session with the token answered %q", got)
	}
}

func TestLegacySSEClientThatReadsTooSlowlyLosesItsSession(t *testing.T) {
	t.Parallel()
	f := startSSEFront(t, `{"maxInFlightPerSession":4,"mcpServers":{"a": {"command":"FAKE","args":["-state","STATE"]}}}`, 256<<10)
	c := dialSSEFront(t, f.base, "", false) // reads the endpoint event, then nothing
	// Answers of 1 MiB (or errors, past maxInFlightPerSession) until the
	// kernel's buffers and the queue are full, and the session ends.
	deadline := time.Now().Add(30 * time.Second)
	for i := 0; ; i++ {
		if time.Now().After(deadline) {
			t.Fatalf("%d calls in 30s never ended the session of a client that reads nothing", i)
		}
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"big","arguments":{"bytes":1048576}}}`, i)
		code, b := c.post(body)
		if code == http.StatusNotFound {
			break
		}
		if code != http.StatusAccepted {
			t.Fatalf("POST = %d %s", code, b)
		}
	}
	line := f.log.wait(`legacy SSE session ended: the client reads too slowly`)
	if !strings.Contains(line, "262144 bytes") {
		t.Errorf("log line %q does not name the bound", line)
	}
	waitFor(t, 10*time.Second, "the stream to be uncounted", func() bool { return metric(t, f.base, "corral_event_streams") == "0" })
}

// A legacy SSE client that stops reading while an answer is written to its
// stream, below the queue's bound, is cut off after writeTimeout, and the
// log names its session.
func TestLegacySSEClientThatStopsReadingIsCutOffAfterWriteTimeout(t *testing.T) {
	t.Parallel()
	f := startSSEFront(t, `{"writeTimeout":"1s","mcpServers":{"a": {"command":"FAKE","args":["-state","STATE"]}}}`, 64<<20)
	c := dialSSEFront(t, f.base, "", false) // reads the endpoint event, then nothing
	// 24 MiB: more than the kernel's buffers take, less than the queue.
	if code, b := c.post(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"big","arguments":{"bytes":25165824}}}`); code != http.StatusAccepted {
		t.Fatalf("POST = %d %s", code, b)
	}
	line := f.log.wait(`legacy SSE session ended: the client did not read a message within writeTimeout`)
	_, sid, _ := strings.Cut(c.endpoint, "sessionId=")
	if sid == "" || !strings.Contains(line, "session="+sid) {
		t.Errorf("the log line %q does not name the session (endpoint %s)", line, c.endpoint)
	}
	waitFor(t, 10*time.Second, "the stream to be uncounted", func() bool { return metric(t, f.base, "corral_event_streams") == "0" })
}

func TestLegacySSEAnswerWaitingOnTheStreamIsHeldUntilWrittenThenReleased(t *testing.T) {
	t.Parallel()
	// writeTimeout is long: the answer stays held until the client goes away.
	f := startSSEFront(t, `{"writeTimeout":"10m","mcpServers":{"a": {"command":"FAKE","args":["-state","STATE"]}}}`, 64<<20)
	c := dialSSEFront(t, f.base, "", false) // reads the endpoint event, then nothing
	_, sid, _ := strings.Cut(c.endpoint, "sessionId=")
	// 24 MiB: more than the kernel's buffers take, so its write blocks.
	if code, b := c.post(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"big","arguments":{"bytes":25165824}}}`); code != http.StatusAccepted {
		t.Fatalf("POST = %d %s", code, b)
	}
	waitFor(t, 60*time.Second, "the unread answer to be held for the session", func() bool {
		count, bytes := f.h.sessionUnsent(sid)
		return count == 1 && bytes > 24<<20
	})
	c.close() // the client goes away: the write under way fails
	f.log.wait(`legacy SSE session ended: the client closed the stream`)
	// The session is gone: only the total of every session's is left to see.
	waitFor(t, 60*time.Second, "the answer to be released", func() bool { return f.gw.sessions.unsent.load() == 0 })
}
