package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"
)

func TestBearerTokenGuardsEveryPath(t *testing.T) {
	t.Parallel()
	const secret = "s3cret-token"
	token := filepath.Join(t.TempDir(), "token")
	os.WriteFile(token, []byte(secret+"\n"), 0o600)
	tg := startGateway(t, `{"authTokenFile":"`+token+`","admin":{"registration":true},"mcpServers":{"a": {"command":"FAKE","args":["-state","STATE"]}}}`)
	good := connectWith(t, tg.url, "Bearer "+secret)
	base := strings.TrimSuffix(tg.url, mcpPath)
	basic := func(password string) string {
		return "Basic " + base64.StdEncoding.EncodeToString([]byte("user:"+password))
	}
	// Wrong credentials, among them tokens a comparison of lengths or of
	// prefixes would let through.
	wrong := []struct{ name, auth string }{
		{"no token", ""},
		{"a token of another length", "Bearer nope"},
		{"a token of the right length, its last byte wrong", "Bearer s3cret-tokeN"},
		{"a token of the right length, its first byte wrong", "Bearer S3cret-token"},
		{"the token's prefix", "Bearer s3cret-toke"},
		{"the token with a byte more", "Bearer s3cret-token-"},
		{"the token in another scheme", basic(secret)},
	}
	paths := []struct{ method, path, body, accept string }{
		{"POST", mcpPath, `{"jsonrpc":"2.0","id":1,"method":"ping"}`, ""},
		{"GET", mcpPath, "", "text/event-stream"},
		{"DELETE", mcpPath, "", ""},
		{"GET", sseFrontPath, "", "text/event-stream"},
		{"POST", sseFrontMessagesPath + "?sessionId=x", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, ""},
		{"GET", "/healthz", "", ""},
		{"GET", "/metrics", "", ""},
		{"GET", adminServersPath, "", ""},
		{"POST", adminServersPath, `{}`, ""}, // 400 past the check: nothing is registered
		{"DELETE", adminServersPath + "/a", "", ""},
		{"GET", "/", "", "text/html"}, // the status page
	}
	do := func(t *testing.T, method, path, body, accept, auth string) int {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), method, base+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close() // ends a stream
		return resp.StatusCode
	}
	for _, p := range paths {
		t.Run(p.method+" "+p.path, func(t *testing.T) {
			creds := wrong
			if p.path == "/" { // the page takes the token as a Basic password too
				creds = append(creds[:len(creds)-1:len(creds)-1],
					struct{ name, auth string }{"a Basic password of the right length, wrong", basic("s3cret-tokeN")},
					struct{ name, auth string }{"a Basic password that is the token's prefix", basic("s3cret-toke")})
			}
			for _, c := range creds {
				if got := do(t, p.method, p.path, p.body, p.accept, c.auth); got != http.StatusUnauthorized {
					t.Errorf("%s %s with %s = %d, want 401", p.method, p.path, c.name, got)
				}
			}
			// The right token gets past the check, so that the 401s above
			// are the token's doing.
			if got := do(t, p.method, p.path, p.body, p.accept, "Bearer "+secret); got == http.StatusUnauthorized {
				t.Errorf("%s %s with the token = 401, want it past the check", p.method, p.path)
			}
		})
	}
	if got := toolText(t, good.callTool("1", "echo", `{"text":"ok"}`)); got != "ok" {
		t.Errorf("the session with the token answered %q", got)
	}
	// The scheme's name is case-insensitive (RFC 7235).
	lower := connectWith(t, tg.url, "bearer s3cret-token")
	if got := toolText(t, lower.callTool("2", "echo", `{"text":"ok"}`)); got != "ok" {
		t.Errorf("the session with a lowercase scheme answered %q", got)
	}
}

func TestBearerTokenSchemeIsCaseInsensitive(t *testing.T) {
	for _, tc := range []struct {
		header, want string // want "" for no token
	}{
		{"Bearer tok", "tok"},
		{"bearer tok", "tok"},
		{"BEARER tok", "tok"},
		{"BeArEr tok", "tok"},
		{"Bearer   tok", "tok"},
		{"Basic tok", ""},
		{"Bearertok", ""},
		{"Bearer", ""},
		{"Bearer ", ""},
		{"", ""},
	} {
		got, ok := bearerToken(tc.header)
		if !ok {
			got = ""
		}
		if got != tc.want || ok != (tc.want != "") {
			t.Errorf("bearerToken(%q) = %q, %v, want %q", tc.header, got, ok, tc.want)
		}
	}
}

func TestRemoteListenNeedsATokenOrAnExplicitFlag(t *testing.T) {
	t.Parallel()
	refused := startCorral(t, `{"listen":"0.0.0.0:0","mcpServers":{"a": {"command":"FAKE","args":["-state","STATE"]}}}`)
	if code := refused.waitExit(20 * time.Second); code != 2 {
		t.Errorf("corral on 0.0.0.0 with no token exited %d, want 2", code)
	}
	refused.mu.Lock()
	log := strings.Join(refused.log, "\n")
	refused.mu.Unlock()
	if !strings.Contains(log, "refusing to listen on 0.0.0.0:") || !strings.Contains(log, "-allow-remote-without-token") || len(fakeProcesses(t, refused.dir)) != 0 {
		t.Errorf("refusal: log %q, %d servers started; want the way out named and nothing started", log, len(fakeProcesses(t, refused.dir)))
	}

	allowed := startCorral(t, `{"listen":"0.0.0.0:0","mcpServers":{"a": {"command":"FAKE","args":["-state","STATE"]}}}`, "-allow-remote-without-token")
	allowed.waitLog(`level=WARN msg="listening on a non-loopback address with no bearer token`)
	allowed.waitLog(`serving MCP over Streamable HTTP`)
	allowed.cmd.Process.Signal(syscall.SIGTERM)
	if code := allowed.waitExit(20 * time.Second); code != 0 {
		t.Errorf("corral exited %d, want 0", code)
	}
}

func TestReloadKeepsARemoteListenerBehindItsToken(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	token := filepath.Join(dir, "token")
	os.WriteFile(token, []byte("s3cret-token\n"), 0o600)
	server := `"a": {"command":"FAKE","args":["-state","STATE"]}`
	status := func(c *corralProc) int {
		t.Helper()
		port := c.url[strings.LastIndexByte(c.url, ':'):] // the listener is on every address, loopback too
		resp, err := http.Post("http://127.0.0.1"+port, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	reload := func(c *corralProc, config string) {
		t.Helper()
		path := c.cmd.Args[2]
		config = strings.ReplaceAll(strings.ReplaceAll(config, "FAKE", fakeserverBin), "STATE", c.dir)
		if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
			t.Fatal(err)
		}
		c.cmd.Process.Signal(syscall.SIGHUP)
	}

	c := startCorral(t, `{"listen":"0.0.0.0:0","authTokenFile":"`+token+`","mcpServers":{`+server+`}}`)
	c.waitHTTP(1)
	if got := status(c); got != http.StatusUnauthorized {
		t.Fatalf("a request without the token = %d, want 401", got)
	}
	// The token's file and the setting go, and a reload is asked for.
	os.Remove(token)
	reload(c, `{"listen":"0.0.0.0:0","mcpServers":{`+server+`}}`)
	c.waitLog(`level=ERROR msg="reload: refused: the config has no bearer token, and corral listens on an address other than loopback; the running config stays in force" addr=0\.0\.0\.0:\d+ fix=".*-allow-remote-without-token"`)
	if got := status(c); got != http.StatusUnauthorized {
		t.Errorf("after the refused reload, a request without the token = %d, want 401", got)
	}
	// Registration turned on without a token is refused at a reload as at
	// the start.
	reload(c, `{"listen":"0.0.0.0:0","admin":{"registration":true},"mcpServers":{`+server+`}}`)
	c.waitLog(`reload: the config has errors; the running config stays in force.*admin\.registration: needs a bearer token`)
	if got := status(c); got != http.StatusUnauthorized {
		t.Errorf("after the second refused reload, a request without the token = %d, want 401", got)
	}

	// With -allow-remote-without-token, the reload applies, with a warning.
	os.WriteFile(token, []byte("s3cret-token\n"), 0o600)
	allowed := startCorral(t, `{"listen":"0.0.0.0:0","authTokenFile":"`+token+`","mcpServers":{`+server+`}}`, "-allow-remote-without-token")
	allowed.waitHTTP(1)
	reload(allowed, `{"listen":"0.0.0.0:0","mcpServers":{`+server+`}}`)
	allowed.waitLog(`level=WARN msg="reload: no bearer token while listening on a non-loopback address`)
	allowed.waitLog(`msg=reloaded`)
	if got := status(allowed); got == http.StatusUnauthorized {
		t.Errorf("with -allow-remote-without-token, after the reload a request without a token = %d, want it past the token check", got)
	}
}

func TestLimitsRefuseOnlyTheOffender(t *testing.T) {
	t.Parallel()
	tg := startGateway(t, `{"maxInFlightPerSession":2,"maxStreams":1,"maxHeaderBytes":4096,"mcpServers":{"a": {"command":"FAKE","args":["-state","STATE"]}}}`)
	greedy, polite := connect(t, tg.url), connect(t, tg.url)
	server := fakeProcesses(t, tg.dir)[0].PID

	// Calls in flight per session, held until the test releases them.
	release := filepath.Join(t.TempDir(), "release")
	done := make(chan *wireMsg, 2)
	for i := range 2 {
		go func() { done <- greedy.callTool(fmt.Sprint(i), "wait", fmt.Sprintf(`{"file":%q}`, release)) }()
	}
	waitFor(t, 5*time.Second, "two calls in flight", func() bool {
		n := 0
		for _, e := range fakeEvents(t, tg.dir, server) {
			if e.Tool == "wait" {
				n++
			}
		}
		return n == 2
	})
	if msg := greedy.callTool("3", "echo", `{"text":"x"}`); msg.Error == nil || !strings.Contains(msg.Error.Message, "maxInFlightPerSession") {
		t.Errorf("a third call in the session = %+v, want an error naming maxInFlightPerSession", msg)
	}
	if msg := greedy.callTool("0", "echo", `{"text":"x"}`); msg.Error == nil || msg.Error.Code != codeInvalidRequest || !strings.Contains(msg.Error.Message, "already in flight") {
		t.Errorf("a call reusing the ID of one in flight = %+v, want a %d error (IDs must not be reused)", msg, codeInvalidRequest)
	}
	if got := toolText(t, polite.callTool("1", "echo", `{"text":"fine"}`)); got != "fine" {
		t.Errorf("another session's call answered %q", got)
	}
	os.WriteFile(release, nil, 0o600)
	for range 2 {
		if got := toolText(t, <-done); got != "released" {
			t.Errorf("a call within the limit answered %q", got)
		}
	}

	// Open event streams.
	open := func(c *client) *http.Response {
		ctx, cancel := context.WithCancel(t.Context())
		t.Cleanup(cancel)
		req, _ := http.NewRequestWithContext(ctx, "GET", tg.url, nil)
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Mcp-Session-Id", c.sid)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	if resp := open(greedy); resp.StatusCode != 200 {
		t.Fatalf("the first stream: %s", resp.Status)
	}
	if resp := open(polite); resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("a stream past maxStreams: %s, want 503", resp.Status)
	}

	// Header size.
	if resp, _ := polite.post(`{"jsonrpc":"2.0","id":9,"method":"ping"}`, "X-Padding", strings.Repeat("x", 16<<10)); resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("16 KiB of headers past maxHeaderBytes 4096: %s, want 431", resp.Status)
	}
	if got := toolText(t, polite.callTool("2", "echo", `{"text":"still"}`)); got != "still" {
		t.Errorf("after the refusals the polite session answered %q", got)
	}
}

func TestNotificationFloodIsDroppedAndTheServerKeepsServing(t *testing.T) {
	t.Parallel()
	const limit, sent = 10, 20000
	tg := startGateway(t, fmt.Sprintf(`{"maxNotificationsPerSecond":%d,"mcpServers":{
		"noisy": {"command":"FAKE","args":["-state","STATE","-prefix","n_"]},
		"quiet": {"command":"FAKE","args":["-state","STATE","-prefix","q_"]}
	}}`, limit))
	p := newHTTPPeer(t, tg.url, `{}`)
	if m, _ := p.call("logging/setLevel", `{"level":"info"}`); m.Error != nil {
		t.Fatalf("setLevel: %+v", m.Error)
	}
	start := time.Now()
	if m, _ := p.call("tools/call", fmt.Sprintf(`{"name":"n_flood","arguments":{"count":%d}}`, sent)); text(t, m) != "done" {
		t.Errorf("the flooding call answered %s", m.Result)
	}
	// Every line of the flood was read before its answer, so it spans at
	// most this many of the limit's one-second windows.
	windows := 2 + int(time.Since(start)/time.Second)
	// The quiet server's log message follows on the session's stream
	// whatever of the flood passed.
	if m, _ := p.call("tools/call", `{"name":"q_log","arguments":{"level":"error","data":"marker"}}`); text(t, m) != "logged" {
		t.Fatalf("the quiet server's log answered %s", m.Result)
	}
	passed := 0
	for {
		m := p.nextExcept(listChanged...)
		var lp struct{ Data string }
		json.Unmarshal(m.Params, &lp)
		if lp.Data == "marker" {
			break
		}
		if m.Method == "notifications/message" {
			passed++
		}
		if passed > limit*windows {
			t.Fatalf("at least %d of %d notifications passed, want at most %d (%d a second over %d windows)", passed, sent, limit*windows, limit, windows)
		}
	}
	if passed == 0 {
		t.Errorf("none of the %d notifications passed, want the first %d of a second", sent, limit)
	}
	c := connect(t, tg.url)
	if got := toolText(t, c.callTool("2", "n_echo", `{"text":"after"}`)); got != "after" {
		t.Errorf("the flooding server then answered %q", got)
	}
	if got := toolText(t, c.callTool("3", "q_echo", `{"text":"calm"}`)); got != "calm" {
		t.Errorf("the other server answered %q", got)
	}
}

func TestMuxBoundsNotificationsPerSecond(t *testing.T) {
	m, srv := newTestMux(t, 8, 1<<20)
	delivered := make(chan struct{}, 1000)
	m.onNotify = func(*wireMsg) { delivered <- struct{}{} }
	m.notes.limit = 10
	var flood bytes.Buffer
	for range 1000 {
		flood.WriteString(`{"jsonrpc":"2.0","method":"notifications/message","params":{}}` + "\n")
	}
	start := time.Now()
	io.Copy(srv.out, &flood)
	// A call after the flood proves every line of it was read.
	c := goCall(t.Context(), m, "ping", ``)
	req := srv.read(t)
	srv.write(t, fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{}}`, req.ID))
	<-c
	// The flood spans at most two seconds' windows unless reading 1000
	// lines took longer than a second.
	if limit := 10 * (2 + int(time.Since(start)/time.Second)); len(delivered) > limit || len(delivered) < 10 {
		t.Errorf("%d of 1000 notifications passed, want between 10 and %d", len(delivered), limit)
	}
}

func TestMuxDistrustsTheServer(t *testing.T) {
	m, srv := newTestMux(t, 8, 1<<20)
	c := goCall(t.Context(), m, "tools/call", `{}`)
	req := srv.read(t)
	// An answer to an ID corral never sent, and one with invalid UTF-8.
	srv.write(t, `{"jsonrpc":"2.0","id":999999,"result":{"stolen":true}}`)
	srv.write(t, fmt.Sprintf("{\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"text\":\"bad \xff\xfe bytes\"}}", req.ID))
	r := <-c
	if r.err != nil {
		t.Fatal(r.err)
	}
	if bytes.Contains(r.msg.Result, []byte("stolen")) || !utf8.Valid(r.msg.Result) || !bytes.Contains(r.msg.Result, []byte("bad \uFFFD")) {
		t.Errorf("the caller got %q, want its own answer with the invalid bytes replaced", r.msg.Result)
	}
}

func TestSlowClientIsCutOffAndOthersAreServed(t *testing.T) {
	t.Parallel()
	tg := startGateway(t, `{"readHeaderTimeout":"300ms","mcpServers":{"a": {"command":"FAKE","args":["-state","STATE"]}}}`)
	conn, err := net.Dial("tcp", strings.TrimPrefix(strings.TrimSuffix(tg.url, mcpPath), "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// Half a request line, then nothing: the server must hang up.
	io.WriteString(conn, "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
	polite := connect(t, tg.url)
	if got := toolText(t, polite.callTool("1", "echo", `{"text":"served"}`)); got != "served" {
		t.Errorf("a polite session during the slow one answered %q", got)
	}
	conn.SetReadDeadline(time.Now().Add(5 * time.Second)) // the default of 10s would not do
	if _, err := io.ReadAll(conn); err != nil {
		t.Errorf("the slow connection was not closed by the server: %v", err)
	}
}
