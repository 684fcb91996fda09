package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// testGateway is a gateway with fakeserver backends, served over HTTP by an
// httptest server.
type testGateway struct {
	gw  *Gateway
	h   *httpFrontEnd
	url string
	dir string // fakeserver state directory
}

// startGateway runs a gateway for the config JSON, in which every "FAKE"
// stands for the fakeserver binary and every "STATE" for a state directory.
// Everything is stopped when the test ends, and the test fails if any
// process of its backends is left.
func startGateway(t testing.TB, configJSON string, tweak ...func(*Gateway)) *testGateway {
	t.Helper()
	tg := startGatewayNoWait(t, configJSON, tweak...)
	for _, b := range tg.gw.backends {
		<-b.firstDone // so that state files and catalogs are there
	}
	return tg
}

// startGatewayNoWait is startGateway without waiting for the backends'
// first start.
func startGatewayNoWait(t testing.TB, configJSON string, tweak ...func(*Gateway)) *testGateway {
	t.Helper()
	dir := stateDir(t)
	path := writeConfig(t, configJSON, dir)
	cfg, err := LoadConfig(path, func(string) (string, bool) { return "", false }, func(string) {})
	if err != nil {
		t.Fatal(err)
	}
	gw := NewGateway(cfg, testLogger(t), nil) // no reaper: the test binary has children of its own
	for _, f := range tweak {
		f(gw)
	}
	gw.Start()
	h := newHTTPFrontEnd(gw, true, testLogger(t))
	ts := httptest.NewUnstartedServer(h)
	ts.Config = newHTTPServer(h, testLogger(t)) // corral's own limits
	ts.Start()
	t.Cleanup(func() {
		h.shutdown()
		ts.Close()
		gw.Stop(nil)
		requireGone(t, dir)
	})
	return &testGateway{gw: gw, h: h, url: ts.URL + mcpPath, dir: dir}
}

// client is a minimal Streamable HTTP MCP client for tests.
type client struct {
	t    testing.TB
	url  string
	sid  string
	auth string // the Authorization header, if any
}

// post sends body with the session header (if any) and returns the response
// and its body.
func (c *client) post(body string, headers ...string) (*http.Response, []byte) {
	c.t.Helper()
	req, _ := http.NewRequest("POST", c.url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if c.sid != "" {
		req.Header.Set("Mcp-Session-Id", c.sid)
	}
	if c.auth != "" {
		req.Header.Set("Authorization", c.auth)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i] == "Host" {
			req.Host = headers[i+1] // net/http sends req.Host, not the header
		}
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatalf("POST %s: %v", body, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	return resp, data
}

// connect opens a session.
func connect(t testing.TB, url string) *client {
	t.Helper()
	return connectWith(t, url, "")
}

// connectWith opens a session sending auth as the Authorization header.
func connectWith(t testing.TB, url, auth string) *client {
	t.Helper()
	c := &client{t: t, url: url, auth: auth}
	resp, body := c.post(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"test","version":"1"}}}`)
	if resp.StatusCode != 200 {
		t.Fatalf("initialize: %s %s", resp.Status, body)
	}
	c.sid = resp.Header.Get("Mcp-Session-Id")
	if c.sid == "" {
		t.Fatalf("initialize answered no Mcp-Session-Id")
	}
	c.post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return c
}

// request sends a request and returns the decoded answer.
func (c *client) request(id, method, params string) *wireMsg {
	c.t.Helper()
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":%q`, id, method)
	if params != "" {
		body += `,"params":` + params
	}
	resp, data := c.post(body + "}")
	if resp.StatusCode != 200 {
		c.t.Fatalf("%s: HTTP %s: %s", method, resp.Status, data)
	}
	var msg wireMsg
	if err := json.Unmarshal(data, &msg); err != nil {
		c.t.Fatalf("%s: answer is not JSON: %q", method, data)
	}
	if string(msg.ID) != id {
		c.t.Errorf("%s: answered under id %s, want the id sent, %s, as sent: %s", method, msg.ID, id, data)
	}
	return &msg
}

// callTool calls a tool and returns the answer.
func (c *client) callTool(id, tool, args string) *wireMsg {
	c.t.Helper()
	return c.request(id, "tools/call", fmt.Sprintf(`{"name":%q,"arguments":%s}`, tool, args))
}

// toolText returns the text of a tool result's first content item.
func toolText(t testing.TB, msg *wireMsg) string {
	t.Helper()
	if msg.Error != nil {
		t.Fatalf("tool call failed: %d %s", msg.Error.Code, msg.Error.Message)
	}
	var r struct {
		Content []struct{ Text string }
	}
	if err := json.Unmarshal(msg.Result, &r); err != nil || len(r.Content) == 0 {
		t.Fatalf("tool result %s has no text content", msg.Result)
	}
	return r.Content[0].Text
}

// listToolNames lists every tool through every page.
func (c *client) listToolNames() []string {
	c.t.Helper()
	var names []string
	params := ""
	for range 100 {
		msg := c.request(`"list"`, "tools/list", params)
		var r struct {
			Tools      []struct{ Name string }
			NextCursor string
		}
		if msg.Error != nil || json.Unmarshal(msg.Result, &r) != nil {
			c.t.Fatalf("tools/list = %+v", msg)
		}
		for _, tool := range r.Tools {
			names = append(names, tool.Name)
		}
		if r.NextCursor == "" {
			return names
		}
		params = fmt.Sprintf(`{"cursor":%q}`, r.NextCursor)
	}
	c.t.Fatal("tools/list never ended")
	return nil
}

func TestGatewayListsEveryToolAcrossPagesAndRoutesEachCall(t *testing.T) {
	t.Parallel()
	tg := startGateway(t, `{"mcpServers":{
		"one": {"command":"FAKE","args":["-state","STATE","-name","one","-prefix","one_","-extra-tools","3","-page-size","2"]},
		"two": {"command":"FAKE","args":["-state","STATE","-name","two"],"prefix":"two"}
	}}`, func(g *Gateway) { g.offer.pageSize = 4 })
	c := connect(t, tg.url)

	got := c.listToolNames()
	// Each of fakeserver's own tools, under both servers' prefixes.
	var want []string
	for _, tool := range fakeserverTools(t) {
		want = append(want, "one_"+tool, "two__"+tool)
	}
	want = append(want, "one_tool_000", "one_tool_001", "one_tool_002")
	slices.Sort(want)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("tools listed (-want +got):\n%s", diff)
	}

	for _, tc := range []struct{ tool, server string }{
		{"one_whoami", "one"}, {"two__whoami", "two"}, {"one_tool_002", "one"},
	} {
		text := toolText(t, c.callTool("1", tc.tool, `{}`))
		if !strings.Contains(text, `"name":"`+tc.server+`"`) {
			t.Errorf("calling %s reached %s, want server %s", tc.tool, text, tc.server)
		}
	}
}

func TestGatewayQualifiesCollidingNamesAndKeepsUniqueOnes(t *testing.T) {
	t.Parallel()
	tg := startGateway(t, `{"mcpServers":{
		"a": {"command":"FAKE","args":["-state","STATE","-name","a"]},
		"b": {"command":"FAKE","args":["-state","STATE","-name","b","-extra-tools","1"]}
	}}`)
	c := connect(t, tg.url)
	names := c.listToolNames()
	for _, name := range []string{"a__echo", "b__echo", "tool_000"} {
		if !slices.Contains(names, name) {
			t.Errorf("tools/list lacks %q; got %q", name, names)
		}
	}
	if slices.Contains(names, "echo") {
		t.Errorf("tools/list offers the colliding name \"echo\" itself; got %q", names)
	}
	if text := toolText(t, c.callTool("1", "a__whoami", `{}`)); !strings.Contains(text, `"name":"a"`) {
		t.Errorf("a__whoami reached %s", text)
	}
	if msg := c.callTool("2", "echo", `{"text":"x"}`); msg.Error == nil || msg.Error.Code != codeInvalidParams || !strings.Contains(msg.Error.Message, `"echo"`) {
		t.Errorf("calling the ambiguous name = %+v, want a %d error naming it", msg, codeInvalidParams)
	}
}

func TestAServersErrorReachesTheClientUnderTheClientsID(t *testing.T) {
	t.Parallel()
	tg := startGateway(t, `{"mcpServers":{"a": {"command":"FAKE","args":["-state","STATE"]}}}`)
	c := connect(t, tg.url)
	// Each ID is one corral's own numbering could produce, or confuse with.
	for _, id := range []string{`1`, `"1"`, `"e"`, `-3`, `9007199254740993`} {
		// Ill-typed arguments: the server, not corral, answers the error.
		msg := c.callTool(id, "echo", `{"text":5}`)
		if msg.Error == nil || msg.Error.Code != codeInvalidParams || !strings.Contains(msg.Error.Message, "invalid arguments") {
			t.Errorf("echo with a number for text, id %s = %+v, want the server's error -32602 invalid arguments", id, msg)
		}
		// client.request checks the ID.
	}
}

func TestGatewayAnswersErrorsAndKeepsServing(t *testing.T) {
	t.Parallel()
	tg := startGateway(t, `{"mcpServers":{"a": {"command":"FAKE","args":["-state","STATE"]}}}`)
	c := connect(t, tg.url)
	for _, tc := range []struct {
		name, method, params string
		wantCode             int
	}{
		{"an unknown tool", "tools/call", `{"name":"nope","arguments":{}}`, codeInvalidParams},
		{"tools/call without a name", "tools/call", `{"arguments":{}}`, codeInvalidParams},
		{"a method corral does not implement", "nope/nothing", ``, codeMethodNotFound},
		{"a bad cursor", "tools/list", `{"cursor":"***"}`, codeInvalidParams},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msg := c.request(`"e"`, tc.method, tc.params)
			if msg.Error == nil || msg.Error.Code != tc.wantCode || string(msg.ID) != `"e"` {
				t.Errorf("%s %s = %+v, want error %d with id \"e\"", tc.method, tc.params, msg, tc.wantCode)
			}
		})
	}
	if got := toolText(t, c.callTool("9", "echo", `{"text":"still here"}`)); got != "still here" {
		t.Errorf("echo after the errors = %q", got)
	}
}

func TestThousandConcurrentCallsFromTwentySessionsKeepTheirIDs(t *testing.T) {
	t.Parallel()
	const sessions, perSession = 20, 50
	tg := startGateway(t, `{"maxInFlight":2000,"mcpServers":{"a": {"command":"FAKE","args":["-state","STATE"]}}}`)
	clients := make([]*client, sessions)
	for i := range clients {
		clients[i] = connect(t, tg.url)
	}
	var mu sync.Mutex
	var failures []string
	var wg sync.WaitGroup
	for s, c := range clients {
		for n := range perSession {
			wg.Add(1)
			go func() {
				defer wg.Done()
				// Every session uses the same IDs, half as numbers and half
				// as strings of the same digits, some with odd spacing.
				id := []string{fmt.Sprint(n), fmt.Sprintf(`"%d"`, n), fmt.Sprintf(`"id %d é"`, n), fmt.Sprintf("%d", n+1000)}[n%4]
				text := fmt.Sprintf("session %d call %d", s, n)
				delay := rand.IntN(20) // answers come back out of order
				body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":"echo","arguments":{"text":%q,"delay_ms":%d}}}`, id, text, delay)
				resp, data := c.post(body)
				// The ID comes back exactly as sent, byte for byte.
				var msg wireMsg
				json.Unmarshal(data, &msg)
				var r struct{ Content []struct{ Text string } }
				json.Unmarshal(msg.Result, &r)
				if resp.StatusCode != 200 || string(msg.ID) != id || len(r.Content) != 1 || r.Content[0].Text != text {
					mu.Lock()
					failures = append(failures, fmt.Sprintf("session %d call %d (id %s): got %s", s, n, id, truncate(data, 300)))
					mu.Unlock()
				}
			}()
		}
	}
	wg.Wait()
	if len(failures) > 0 {
		t.Fatalf("%d of %d calls came back wrong; first: %s", len(failures), sessions*perSession, failures[0])
	}
	// One child served them all.
	if procs := fakeProcesses(t, tg.dir); len(procs) != 1 {
		t.Errorf("%d server processes ran, want 1 shared by every session", len(procs))
	}
}

func TestTimeoutFailsTheCallAndCancelsItOnTheServer(t *testing.T) {
	t.Parallel()
	// Long enough that no call but the hanging one times out on a loaded
	// machine; the hanging one takes all of it.
	tg := startGateway(t, `{"requestTimeout":"2s","mcpServers":{"a": {"command":"FAKE","args":["-state","STATE"]}}}`)
	c := connect(t, tg.url)
	msg := c.callTool(`"h"`, "hang", `{}`)
	if msg.Error == nil || msg.Error.Code != codeTimeout || !strings.Contains(msg.Error.Message, "requestTimeout") || !strings.Contains(msg.Error.Message, `"a"`) {
		t.Fatalf("hanging call = %+v, want a %d error naming the server and requestTimeout", msg, codeTimeout)
	}
	if got := toolText(t, c.callTool("2", "echo", `{"text":"after"}`)); got != "after" {
		t.Errorf("call after the timeout = %q, want \"after\"", got)
	}
	server := fakeProcesses(t, tg.dir)[0].PID
	var hangID json.RawMessage
	waitFor(t, 5*time.Second, "the server to record the cancellation", func() bool {
		for _, e := range fakeEvents(t, tg.dir, server) {
			if e.Event == "request" && e.Tool == "hang" {
				hangID = e.ID
			}
			if e.Event == "cancelled" && hangID != nil && string(e.RequestID) == string(hangID) {
				return true
			}
		}
		return false
	})
	if string(hangID) == `"h"` {
		t.Errorf("the server saw the client's own ID %s; corral must number requests itself", hangID)
	}
}

func TestCrashFailsEveryPendingCallAtOnceAndTheServerComesBack(t *testing.T) {
	t.Parallel()
	// requestTimeout: a crash that failed no call would show in 15 s, not
	// at the default 60 s.
	tg := startGateway(t, `{"restartDelay":"50ms","requestTimeout":"15s","mcpServers":{"a": {"command":"FAKE","args":["-state","STATE"]}}}`)
	c := connect(t, tg.url)
	server := fakeProcesses(t, tg.dir)[0].PID
	const n = 50
	answers := make(chan *wireMsg, n)
	for i := range n {
		go func() { answers <- c.callTool(fmt.Sprint(i), "sleep", `{"ms":600000}`) }()
	}
	waitFor(t, 10*time.Second, "the server to receive every call", func() bool {
		count := 0
		for _, e := range fakeEvents(t, tg.dir, server) {
			if e.Tool == "sleep" {
				count++
			}
		}
		return count == n
	})
	crash := c.callTool(`"crash"`, "crash", `{"code":9}`)
	for _, msg := range append([]*wireMsg{crash}, collect(answers, n)...) {
		// Failing at the timeout would say "requestTimeout" instead.
		if msg.Error == nil || msg.Error.Code != codeUnavailable || !strings.Contains(msg.Error.Message, "exit status 9") || !strings.Contains(msg.Error.Message, "crashing with code 9") {
			t.Fatalf("call pending at the crash = %+v, want a %d error with the exit status and last stderr line", msg, codeUnavailable)
		}
	}
	// A call made while the server waits to restart waits for it.
	text := toolText(t, c.callTool(`"after"`, "whoami", `{}`))
	if strings.Contains(text, fmt.Sprintf(`"pid":%d`, server)) {
		t.Errorf("call after the crash reached %s, the dead process; want a new one", text)
	}
	if h := tg.gw.backends[0].health(); h.Restarts != 1 || h.LastExit != "exit status 9" {
		t.Errorf("health after one crash = %+v, want 1 restart and the last exit", h)
	}
}

func TestCallRightAfterACrashWaitsForTheRestartWhileAGrandchildHoldsThePipes(t *testing.T) {
	t.Parallel()
	// The grandchild keeps the dead server's stdout and stderr open, so
	// its pipes reach EOF only when corral gives up waiting for them.
	// requestTimeout: a call left waiting would fail in 15 s, not 60 s.
	tg := startGateway(t, `{"restartDelay":"50ms","requestTimeout":"15s","mcpServers":{"a": {"command":"FAKE","args":["-state","STATE","-name","a","-grandchild","setsid","-grandchild-holds-stdout"]}}}`)
	c := connect(t, tg.url)
	server := serversNamed(t, tg.dir, "a")[0].PID
	crash := c.callTool(`"crash"`, "crash", `{"code":9}`)
	if crash.Error == nil || !strings.Contains(crash.Error.Message, "exit status 9") {
		t.Fatalf("call that crashed the server = %+v, want an error with its exit status", crash)
	}
	if state := tg.gw.backends[0].snapshot(); state == stateReady {
		t.Errorf("state once the crash was answered = %s, want the server out of ready", state)
	}
	msg := c.callTool(`"after"`, "whoami", `{}`)
	if msg.Error != nil {
		t.Fatalf("call made right after the crash = error %d %q, want it to wait for the restart", msg.Error.Code, msg.Error.Message)
	}
	if text := toolText(t, msg); strings.Contains(text, fmt.Sprintf(`"pid":%d`, server)) {
		t.Errorf("call after the crash reached %s, the dead process; want a new one", text)
	}
}

func collect(c <-chan *wireMsg, n int) []*wireMsg {
	var all []*wireMsg
	for range n {
		all = append(all, <-c)
	}
	return all
}

func TestLargeMessagesPassIntact(t *testing.T) {
	t.Parallel()
	tg := startGateway(t, `{"mcpServers":{"a": {"command":"FAKE","args":["-state","STATE"]}}}`)
	c := connect(t, tg.url)
	for _, size := range []int{1 << 20, 16 << 20} {
		text := toolText(t, c.callTool("1", "big", fmt.Sprintf(`{"bytes":%d}`, size)))
		if len(text) != size {
			t.Fatalf("big answer of %d bytes arrived with %d", size, len(text))
		}
		for i := range len(text) {
			if text[i] != byte('a'+i%26) {
				t.Fatalf("big answer of %d bytes differs at byte %d", size, i)
			}
		}
	}
	req := strings.Repeat("0123456789", 1<<20/10)
	if got := toolText(t, c.callTool("2", "echo", fmt.Sprintf(`{"text":%q}`, req))); got != req {
		t.Fatalf("1 MiB request came back with %d bytes", len(got))
	}
}

func TestAnswerOverTheLineLimitFailsOnlyThatCall(t *testing.T) {
	t.Parallel()
	tg := startGateway(t, `{"maxLineBytes":65536,"mcpServers":{"a": {"command":"FAKE","args":["-state","STATE"]}}}`)
	c := connect(t, tg.url)
	msg := c.callTool("1", "big", `{"bytes":100000}`)
	if msg.Error == nil || !strings.Contains(msg.Error.Message, "maxLineBytes") || !strings.Contains(msg.Error.Message, `"a"`) {
		t.Fatalf("answer over the limit = %+v, want an error naming the server and maxLineBytes", msg)
	}
	if got := toolText(t, c.callTool("2", "echo", `{"text":"fine"}`)); got != "fine" {
		t.Errorf("next call = %q, want the server still serving", got)
	}
}

func TestNoisyServersKeepServing(t *testing.T) {
	t.Parallel()
	tg := startGateway(t, `{"mcpServers":{"a": {"command":"FAKE","args":["-state","STATE"]}}}`)
	c := connect(t, tg.url)
	if got := toolText(t, c.callTool("1", "stderr", fmt.Sprintf(`{"bytes":%d}`, 10<<20))); got != "done" {
		t.Errorf("after 10 MiB of stderr the call answered %q", got)
	}
	if got := toolText(t, c.callTool("2", "garbage", `{"lines":20}`)); got != "done" {
		t.Errorf("after garbage on stdout the call answered %q", got)
	}
	if got := toolText(t, c.callTool("3", "echo", `{"text":"ok"}`)); got != "ok" {
		t.Errorf("next call answered %q", got)
	}
}

func TestHTTPRejectsBadRequestsAndKeepsServing(t *testing.T) {
	t.Parallel()
	tg := startGateway(t, `{"maxRequestBytes":1024,"allowedOrigins":["https://app.example"],"mcpServers":{"a": {"command":"FAKE","args":["-state","STATE"]}}}`)
	c := connect(t, tg.url)
	ping := `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	noSession := &client{t: t, url: tg.url}
	unknown := &client{t: t, url: tg.url, sid: "0123456789abcdef0123456789abcdef"}
	for _, tc := range []struct {
		name       string
		c          *client
		body       string
		headers    []string
		wantStatus int
		wantCode   int // in the JSON-RPC error body; 0 for none
	}{
		{"malformed JSON", c, `{"jsonrpc":`, nil, 400, codeParseError},
		{"a batch", c, `[` + ping + `]`, nil, 400, codeInvalidRequest},
		{"a message without jsonrpc 2.0", c, `{"id":1,"method":"ping"}`, nil, 400, codeInvalidRequest},
		{"a null id", c, `{"jsonrpc":"2.0","id":null,"method":"ping"}`, nil, 400, codeInvalidRequest},
		{"a fractional id", c, `{"jsonrpc":"2.0","id":1.5,"method":"ping"}`, nil, 400, codeInvalidRequest},
		{"an id with an exponent", c, `{"jsonrpc":"2.0","id":1e999,"method":"ping"}`, nil, 400, codeInvalidRequest},
		{"a negative fractional id", c, `{"jsonrpc":"2.0","id":-0.5,"method":"ping"}`, nil, 400, codeInvalidRequest},
		{"an array id", c, `{"jsonrpc":"2.0","id":[1],"method":"ping"}`, nil, 400, codeInvalidRequest},
		{"a negative integer id", c, `{"jsonrpc":"2.0","id":-3,"method":"ping"}`, nil, 200, 0},
		{"a foreign Origin", c, ping, []string{"Origin", "https://evil.example"}, 403, codeInvalidRequest},
		{"a rebinding Host", c, ping, []string{"Host", "evil.example:80"}, 403, codeInvalidRequest},
		{"an oversized body", c, `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"` + strings.Repeat("x", 2048) + `"}}`, nil, 413, codeInvalidRequest},
		{"no session", noSession, ping, nil, 400, codeInvalidRequest},
		{"an unknown session", unknown, ping, nil, 404, codeInvalidRequest},
		{"an unsupported protocol version", c, ping, []string{"MCP-Protocol-Version", "1999-01-01"}, 400, codeInvalidRequest},
		{"an allowed Origin", c, ping, []string{"Origin", "https://app.example"}, 200, 0},
		{"a loopback Origin", c, ping, []string{"Origin", "http://localhost:6274"}, 200, 0},
		{"a notification", c, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, nil, 202, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := tc.c.post(tc.body, tc.headers...)
			if resp.StatusCode != tc.wantStatus {
				t.Fatalf("status = %s (%s), want %d", resp.Status, body, tc.wantStatus)
			}
			if tc.wantCode != 0 {
				var msg wireMsg
				if json.Unmarshal(body, &msg) != nil || msg.Error == nil || msg.Error.Code != tc.wantCode {
					t.Errorf("body = %s, want a JSON-RPC error %d", body, tc.wantCode)
				}
			}
		})
	}
	if got := toolText(t, c.callTool("1", "echo", `{"text":"ok"}`)); got != "ok" {
		t.Errorf("after the bad requests a call answered %q", got)
	}
	// DELETE ends the session; the session ID is then unknown.
	req, _ := http.NewRequest("DELETE", tg.url, nil)
	req.Header.Set("Mcp-Session-Id", c.sid)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE = %v, %v", resp, err)
	}
	resp.Body.Close()
	if resp, _ := c.post(ping); resp.StatusCode != 404 {
		t.Errorf("request on an ended session = %s, want 404", resp.Status)
	}
}

func TestListChangedReachesTheSessionStream(t *testing.T) {
	t.Parallel()
	// The server starts only after the session has opened its stream: its
	// tools joining the catalog must be announced.
	release := filepath.Join(t.TempDir(), "release")
	tg := startGatewayNoWait(t, `{"mcpServers":{"late": {"command":"/bin/sh","args":["-c","while [ ! -e `+release+` ]; do sleep 0.01; done; exec FAKE -state STATE"]}}}`)
	c := connect(t, tg.url)
	req, _ := http.NewRequest("GET", tg.url, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", c.sid)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET stream = %v, %v", resp, err)
	}
	defer resp.Body.Close()
	os.WriteFile(release, nil, 0o600)
	// connect's initialize waited for the server's first start, which
	// cannot end before the release: on a loaded machine it may end at
	// startTimeout, and the session then hears from corral that the server
	// is down, before its tools are announced.
	var other []string
	announced := false
	readEvents(resp.Body, func(m *wireMsg) {
		switch {
		case announced:
		case m.Method == "notifications/tools/list_changed":
			announced = true
			resp.Body.Close() // ends readEvents
		case m.Method == "notifications/message" && strings.Contains(string(m.Params), `"logger":"corral"`):
		default:
			other = append(other, m.Method)
		}
	})
	if !announced || len(other) > 0 {
		t.Errorf("stream carried %q, and notifications/tools/list_changed: %v; want it, after corral's log messages at most", other, announced)
	}
}

func TestInitializeWaitsForServersStillInTheirFirstStart(t *testing.T) {
	t.Parallel()
	// The server cannot start until the test releases it, after the client's
	// initialize has arrived: the answer must wait, to declare what the
	// server offers, and the server's tools must be there after it.
	release := filepath.Join(t.TempDir(), "release")
	tg := startGatewayNoWait(t, `{"mcpServers":{"late": {"command":"/bin/sh","args":["-c","while [ ! -e `+release+` ]; do sleep 0.01; done; exec FAKE -state STATE -prefix late_ -capabilities tools,prompts"]}}}`)
	connected := make(chan *peer, 1)
	go func() { connected <- newHTTPPeer(t, tg.url, `{}`) }()
	waitFor(t, 10*time.Second, "the initialize request to arrive", func() bool {
		tg.h.mu.Lock()
		defer tg.h.mu.Unlock()
		return len(tg.h.sessions) == 1
	})
	os.WriteFile(release, nil, 0o600)
	p := <-connected
	m, _ := p.call("initialize", `{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}`)
	var r struct{ Capabilities map[string]any }
	result(t, m, &r)
	if r.Capabilities["prompts"] == nil || fmt.Sprint(r.Capabilities["resources"]) != "map[listChanged:true]" {
		t.Errorf("capabilities = %v, want the late server's tools and prompts, and resources for corral's own only", r.Capabilities)
	}
	if got := p.listAll("tools/list", "tools", "name"); !slices.Contains(got, "late_echo") {
		t.Errorf("tools after initialize = %q, want the late server's", got)
	}
	if m, _ := p.call("tools/call", `{"name":"late_echo","arguments":{"text":"waited"}}`); text(t, m) != "waited" {
		t.Errorf("tools/call = %s", m.Result)
	}
}

func TestIdleSessionsEndButBusyOnesStay(t *testing.T) {
	t.Parallel()
	tg := startGateway(t, `{"sessionIdleTimeout":"1m","mcpServers":{"a": {"command":"FAKE","args":["-state","STATE"]}}}`)
	idle, streaming, calling := connect(t, tg.url), connect(t, tg.url), connect(t, tg.url)

	req, _ := http.NewRequest("GET", tg.url, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", streaming.sid)
	stream, err := http.DefaultClient.Do(req)
	if err != nil || stream.StatusCode != 200 {
		t.Fatalf("GET stream = %v, %v", stream, err)
	}
	defer stream.Body.Close()
	// The call stays in flight until the test releases it, whatever the load.
	release := filepath.Join(t.TempDir(), "release")
	answer := make(chan *wireMsg, 1)
	go func() { answer <- calling.callTool("1", "wait", fmt.Sprintf(`{"file":%q}`, release)) }()
	server := fakeProcesses(t, tg.dir)[0].PID
	waitFor(t, 5*time.Second, "the call and the stream to be under way", func() bool {
		return slices.ContainsFunc(fakeEvents(t, tg.dir, server), func(e fakeEvent) bool { return e.Tool == "wait" }) &&
			tg.h.streams.Load() == 1
	})

	// An hour later, by the clock expireIdle is given.
	if n := tg.h.expireIdle(time.Now().Add(time.Hour)); n != 1 {
		t.Errorf("expireIdle ended %d sessions, want 1 (the idle one)", n)
	}
	if resp, body := idle.post(`{"jsonrpc":"2.0","id":1,"method":"ping"}`); resp.StatusCode != 404 {
		t.Errorf("the idle session answered %s %s, want 404 (ended)", resp.Status, body)
	}
	os.WriteFile(release, nil, 0o600)
	if got := toolText(t, <-answer); got != "released" {
		t.Errorf("the call in flight answered %q", got)
	}
	for _, c := range []*client{streaming, calling} {
		if resp, body := c.post(`{"jsonrpc":"2.0","id":2,"method":"ping"}`); resp.StatusCode != 200 {
			t.Errorf("a busy session answered %s %s, want it kept", resp.Status, body)
		}
	}
}

func TestSessionLimit(t *testing.T) {
	t.Parallel()
	tg := startGateway(t, `{"maxSessions":2,"mcpServers":{"a": {"command":"FAKE","args":["-state","STATE"]}}}`)
	first := connect(t, tg.url)
	connect(t, tg.url)
	c := &client{t: t, url: tg.url}
	init := `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	resp, body := c.post(init)
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "maxSessions") {
		t.Errorf("a third session = %s %s, want 503 naming maxSessions", resp.Status, body)
	}
	req, _ := http.NewRequest("DELETE", tg.url, nil)
	req.Header.Set("Mcp-Session-Id", first.sid)
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
	}
	if resp, body := c.post(init); resp.StatusCode != 200 {
		t.Errorf("a session after one ended = %s %s, want 200", resp.Status, body)
	}
}
