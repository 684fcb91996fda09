package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"time"
)

// rawGet sends "GET path HTTP/1.0" with no Host header and no other header
// but those given (whole lines), as a load balancer's default check does,
// and returns the status code and the body.
func rawGet(t *testing.T, base, path string, lines ...string) (int, string) {
	t.Helper()
	u, _ := url.Parse(base)
	conn, err := net.DialTimeout("tcp", u.Host, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(conn, "GET %s HTTP/1.0\r\n%s\r\n", path, strings.Join(append(lines, ""), "\r\n"))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func TestProbesAnswerAnyBalancerAndTellNothing(t *testing.T) {
	t.Parallel()
	tg := startGateway(t, `{"authTokenFile":`+tokenFile(t, rootToken)+`,"mcpServers":{
		"a": {"command":"FAKE","args":["-state","STATE","-name","a"]},
		"down": {"command":"/nonexistent/server"}}}`)
	base := strings.TrimSuffix(tg.url, mcpPath)
	for _, path := range []string{readyPath, livePath} {
		code, body := rawGet(t, base, path)
		if code != 200 || (body != "ready\n" && body != "alive\n") {
			t.Errorf("GET %s with no Host and no token = %d %q, want 200 and one word", path, code, body)
		}
		if code, _ := rawGet(t, base, path, "Host: evil.example", "Origin: http://evil.example"); code != 200 {
			t.Errorf("GET %s with a foreign Host and Origin = %d, want 200: it tells nothing", path, code)
		}
	}
	// /healthz: the token still, but no Host is no rebinding; and a
	// server down does not fail the replica.
	if code, _ := rawGet(t, base, "/healthz"); code != http.StatusUnauthorized {
		t.Errorf("GET /healthz with no token = %d, want 401", code)
	}
	code, body := rawGet(t, base, "/healthz", "Authorization: Bearer "+rootToken)
	if code != 200 || !strings.Contains(body, `"status": "degraded"`) {
		t.Errorf("GET /healthz with the token, no Host, one server down = %d %s, want 200 and status degraded", code, body)
	}
	if code, _ := rawGet(t, base, "/healthz", "Authorization: Bearer "+rootToken, "Host: evil.example"); code != http.StatusForbidden {
		t.Errorf("GET /healthz with a foreign Host = %d, want 403 (DNS rebinding)", code)
	}

	// Draining: readiness fails, liveness does not; no new session, the
	// open one goes on.
	auth := "Bearer " + rootToken
	open := connectWith(t, tg.url, auth)
	tg.h.draining.Store(true)
	if code, body := rawGet(t, base, readyPath); code != http.StatusServiceUnavailable || body != "draining\n" {
		t.Errorf("GET /readyz while draining = %d %q, want 503 draining", code, body)
	}
	if code, _ := rawGet(t, base, livePath); code != 200 {
		t.Errorf("GET /livez while draining = %d, want 200", code)
	}
	fresh := &client{t: t, url: tg.url, auth: auth}
	resp, data := fresh.post(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || resp.Header.Get("Mcp-Session-Id") != "" ||
		!strings.Contains(string(data), "shutting down and opens no new session") {
		t.Errorf("initialize while draining = %s %s (Retry-After %q), want 503 with Retry-After", resp.Status, data, resp.Header.Get("Retry-After"))
	}
	sse, stop := getSSE(t, base, auth, nil)
	stop()
	if sse.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("GET /sse while draining = %s, want 503", sse.Status)
	}
	if got := toolText(t, open.callTool("1", "echo", `{"text":"still"}`)); got != "still" {
		t.Errorf("a call of an open session while draining = %q", got)
	}
}

func TestIDsNameTheirReplicaAndAWrongReplicaIsNamed(t *testing.T) {
	t.Parallel()
	tg := startGateway(t, `{"replica":"r1","mcpServers":{"a": {"command":"FAKE","args":["-state","STATE","-name","a","-capabilities","tools,tasks"]}}}`)
	base := strings.TrimSuffix(tg.url, mcpPath)
	c := connect(t, tg.url)
	if !strings.HasPrefix(c.sid, "r1.") || len(c.sid) != len("r1.")+32 {
		t.Errorf("Mcp-Session-Id = %q, want r1. and 32 hexadecimal digits", c.sid)
	}
	// A session of replica r2, sent here.
	other := &client{t: t, url: tg.url, sid: "r2.00112233445566778899aabbccddeeff"}
	resp, data := other.post(`{"jsonrpc":"2.0","id":1,"method":"ping"}`)
	if resp.StatusCode != 404 || !strings.Contains(string(data), `belongs to replica \"r2\", and this is replica \"r1\"`) {
		t.Errorf("another replica's session = %s %s, want 404 naming both replicas", resp.Status, data)
	}
	// An ID of no replica stays an unknown session.
	other.sid = "00112233445566778899aabbccddeeff"
	if resp, data := other.post(`{"jsonrpc":"2.0","id":1,"method":"ping"}`); resp.StatusCode != 404 || strings.Contains(string(data), "replica") {
		t.Errorf("an unknown session = %s %s, want 404 with no replica", resp.Status, data)
	}
	req, _ := http.NewRequest("POST", base+sseFrontMessagesPath+"?sessionId=r2.00", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	data, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 404 || !strings.Contains(string(data), `replica \"r2\"`) || !strings.Contains(string(data), "sessionId query parameter") {
		t.Errorf("/messages of another replica's session = %s %s, want 404 naming r2", resp.Status, data)
	}
	// A task ID names the replica; another's is named.
	m := c.request("2", "tools/call", `{"name":"task","arguments":{"ms":60000},"task":{"ttl":60000}}`)
	if !strings.Contains(string(m.Result), `"taskId":"r1.`) {
		t.Errorf("a task created here = %s, want its taskId to start with r1.", m.Result)
	}
	m = c.request("3", "tasks/get", `{"taskId":"r2.00112233445566778899aabbccddeeff"}`)
	if m.Error == nil || !strings.Contains(m.Error.Message, `belongs to replica "r2", and this is replica "r1"`) {
		t.Errorf("tasks/get of another replica's task = %+v, want an error naming both", m.Error)
	}
	// requestState: this replica's names it; another's is named.
	meta := modernMeta(`{"sampling":{}}`)
	_, m, _ = modernPost(t, tg.url, "tools/call", `{"name":"sample","arguments":{"prompt":"hi"},`+meta+`}`)
	if !strings.Contains(string(m.Result), `"requestState":"corral-r1.`) {
		t.Errorf("input_required = %s, want a requestState that starts with corral-r1.", m.Result)
	}
	status, m, _ := modernPost(t, tg.url, "tools/call", `{"name":"sample","arguments":{"prompt":"hi"},"inputResponses":{"input-1":{}},"requestState":"corral-r2.00112233445566778899aabbccddeeff",`+meta+`}`)
	if status == 200 || m.Error == nil || !strings.Contains(m.Error.Message, `requestState belongs to replica "r2", and this is replica "r1"`) {
		t.Errorf("another replica's requestState = %d %+v, want an error naming both", status, m.Error)
	}
}

func TestReplicaNameIsChecked(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"a.b", "sp ace", strings.Repeat("x", 64)} {
		_, err := ParseConfig("c.json", []byte(fmt.Sprintf(`{"replica":%q,"mcpServers":{"a":{"command":"x"}}}`, name)), nil, nil)
		if err == nil || !strings.Contains(err.Error(), "replica") || !strings.Contains(err.Error(), "letters, digits") {
			t.Errorf("replica %q: %v, want an error naming replica and what it may hold", name, err)
		}
	}
	cfg, err := ParseConfig("c.json", []byte(`{"mcpServers":{"a":{"command":"x"}}}`), nil, nil)
	if err != nil || checkReplicaName(cfg.Replica) != nil || cfg.HeartbeatInterval.D() != 15*time.Second || cfg.DrainDelay != 0 {
		t.Errorf("defaults: replica %q, heartbeatInterval %v, drainDelay %v, err %v; want the host's name, 15s, 0", cfg.Replica, cfg.HeartbeatInterval.D(), cfg.DrainDelay.D(), err)
	}
}

// readUntilHeartbeat reads an event stream's lines until a heartbeat,
// and fails the test if none comes within 10s.
func readUntilHeartbeat(t *testing.T, what string, body io.Reader) {
	t.Helper()
	found := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(body)
		for sc.Scan() {
			if sc.Text() == ": ping" {
				found <- true
				return
			}
		}
		found <- false
	}()
	select {
	case ok := <-found:
		if !ok {
			t.Errorf("%s ended with no heartbeat", what)
		}
	case <-time.After(10 * time.Second):
		t.Errorf("%s carried no heartbeat within 10s", what)
	}
}

func TestEveryLongLivedStreamCarriesHeartbeats(t *testing.T) {
	t.Parallel()
	tg := startGateway(t, `{"heartbeatInterval":"50ms","mcpServers":{"a": {"command":"FAKE","args":["-state","STATE","-name","a"]}}}`)
	base := strings.TrimSuffix(tg.url, mcpPath)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	open := func(method, url, body string, headers ...string) *http.Response {
		req, _ := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Content-Type", "application/json")
		for i := 0; i+1 < len(headers); i += 2 {
			req.Header.Set(headers[i], headers[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	c := connect(t, tg.url)
	readUntilHeartbeat(t, "a session's GET stream", open("GET", tg.url, "", "Mcp-Session-Id", c.sid).Body)
	readUntilHeartbeat(t, "/sse", open("GET", base+sseFrontPath, "").Body)
	listen := fmt.Sprintf(`{"jsonrpc":"2.0","id":"l1","method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true},%s}}`, modernMeta(`{}`))
	readUntilHeartbeat(t, "subscriptions/listen", open("POST", tg.url, listen, "MCP-Protocol-Version", modernVersion, "Mcp-Method", "subscriptions/listen").Body)
}

func TestSIGTERMDrainsBeforeTheShutdown(t *testing.T) {
	t.Parallel()
	const drain = 3 * time.Second
	c := startCorral(t, `{"listen":"127.0.0.1:0","replica":"drainer","drainDelay":"3s","shutdownTimeout":"2s","stopGrace":"200ms","killGrace":"300ms","mcpServers":{
		"a": {"command":"FAKE","args":["-state","STATE","-name","a"]}}}`)
	c.waitHTTP(1)
	base := strings.TrimSuffix(c.url, mcpPath)
	if code, _ := rawGet(t, base, readyPath); code != 200 {
		t.Fatalf("GET /readyz before SIGTERM = %d, want 200", code)
	}
	open := connect(t, c.url)
	start := time.Now()
	c.cmd.Process.Signal(syscall.SIGTERM)
	waitFor(t, 10*time.Second, "/readyz to answer 503", func() bool {
		code, _ := rawGet(t, base, readyPath)
		return code == http.StatusServiceUnavailable
	})
	if got := toolText(t, open.callTool("1", "echo", `{"text":"during the drain"}`)); got != "during the drain" {
		t.Errorf("a call of an open session during the drain = %q", got)
	}
	fresh := &client{t: t, url: c.url}
	resp, data := fresh.post(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "1" || !strings.Contains(string(data), `replica \"drainer\"`) {
		t.Errorf("initialize during the drain = %s %s, want 503, Retry-After: 1, naming the replica", resp.Status, data)
	}
	if time.Since(start) >= drain {
		t.Logf("the machine is slow: the checks above ran past drainDelay; they prove less")
	}
	// drainDelay, then shutdownTimeout + stopGrace + killGrace at most,
	// with slack for a loaded machine.
	if code := c.waitExit(drain + 2*time.Second + 500*time.Millisecond + 10*time.Second); code != 0 {
		t.Errorf("corral exited with %d, want 0", code)
	}
	if took := time.Since(start); took < drain {
		t.Errorf("corral exited %v after SIGTERM, before drainDelay (%v) ended", took, drain)
	} else {
		t.Logf("corral exited %v after SIGTERM (drainDelay %v)", took.Round(time.Millisecond), drain)
	}
	c.waitLog(`msg="draining: /readyz answers 503.*replica=drainer drainDelay=3s`)
	requireGone(t, c.dir)
}

func TestAReloadKeepsTheReplicasName(t *testing.T) {
	t.Parallel()
	const src = `{"replica":"NAME","drainDelay":"DRAIN","mcpServers":{"a": {"command":"FAKE","args":["-state","STATE","-name","a"]}}}`
	tg := startGateway(t, strings.NewReplacer("NAME", "r1", "DRAIN", "1s").Replace(src))
	next, err := ParseConfig("config.json", []byte(strings.NewReplacer("NAME", "r2", "DRAIN", "2s", "STATE", tg.dir, "FAKE", fakeserverBin).Replace(src)), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := tg.gw.Reload(next)
	if fmt.Sprint(r.NeedRestart) != "[replica (r1 -> r2)]" {
		t.Errorf("NeedRestart = %q, want the replica's name", r.NeedRestart)
	}
	if cfg := tg.gw.config(); cfg.Replica != "r1" || cfg.DrainDelay.D() != 2*time.Second {
		t.Errorf("after the reload: replica %q, drainDelay %v; want r1 kept (the IDs issued name it) and 2s applied", cfg.Replica, cfg.DrainDelay.D())
	}
	if c := connect(t, tg.url); !strings.HasPrefix(c.sid, "r1.") {
		t.Errorf("a session opened after the reload = %q, want r1.", c.sid)
	}
}
