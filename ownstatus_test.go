package main

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"
)

// nextLog returns the next notifications/message of p's own stream,
// skipping list changes, as level, logger and data.
func nextLog(t *testing.T, p *peer) (level, logger, data string) {
	t.Helper()
	m := p.nextExcept("notifications/tools/list_changed", "notifications/resources/list_changed", "notifications/prompts/list_changed")
	if m.Method != "notifications/message" {
		t.Fatalf("the session's stream carried %s %s, want notifications/message", m.Method, m.Params)
	}
	var p2 struct {
		Level, Logger string
		Data          any
	}
	json.Unmarshal(m.Params, &p2)
	s, _ := p2.Data.(string)
	return p2.Level, p2.Logger, s
}

// readStatus reads corral://status through p and decodes it.
func readStatus(t *testing.T, p *peer) (gatewayStatus, string) {
	t.Helper()
	m, _ := p.call("resources/read", `{"uri":"corral://status"}`)
	var r struct {
		Contents []struct{ URI, MimeType, Text string }
	}
	result(t, m, &r)
	if len(r.Contents) != 1 || r.Contents[0].URI != statusURI || r.Contents[0].MimeType != "application/json" {
		t.Fatalf("resources/read corral://status = %s, want one application/json contents of corral://status", m.Result)
	}
	var st gatewayStatus
	if err := json.Unmarshal([]byte(r.Contents[0].Text), &st); err != nil {
		t.Fatalf("corral://status is not the status as JSON: %v\n%s", err, r.Contents[0].Text)
	}
	return st, r.Contents[0].Text
}

func TestStdioClientHearsOfACrashReadsCorralStatusAndHearsOfTheServerBack(t *testing.T) {
	t.Parallel()
	// The restart waits 3s (up to 4.5s with jitter): long enough for the
	// status to be read while the server is down, on a loaded machine.
	tg := startGateway(t, `{"restartDelay":"3s","maxRestartDelay":"3s","mcpServers":{
		"a": {"command":"FAKE","args":["-state","STATE","-name","a"]}
	}}`)
	p := newStdioPeer(t, tg.gw, `{}`) // a desktop client: it never sets a log level

	if got := p.listAll("resources/list", "resources", "uri"); len(got) == 0 || got[0] != statusURI {
		t.Errorf("resources/list = %v, want corral://status among them, first", got)
	}
	if m, _ := p.call("resources/subscribe", `{"uri":"corral://status"}`); m.Error == nil || m.Error.Code != codeInvalidParams {
		t.Errorf("resources/subscribe of corral://status = %+v, want %d", m, codeInvalidParams)
	}
	if st, _ := readStatus(t, p); len(st.Servers) != 1 || st.Servers[0].State != stateReady || st.Servers[0].PID == 0 {
		t.Errorf("corral://status while ready = %+v, want server a ready with its PID", st.Servers)
	}

	if m, _ := p.call("tools/call", `{"name":"crash","arguments":{}}`); m.Error == nil {
		t.Fatalf("the crash tool answered %s, want an error: the server exited", m.Result)
	}
	level, logger, data := nextLog(t, p)
	if level != "warning" || logger != "corral" || !strings.Contains(data, `server "a" crashed`) || !strings.Contains(data, "exit status") || !strings.Contains(data, statusURI) {
		t.Errorf("log message after the crash = %s %s %q, want a warning from corral naming the server, its exit status and corral://status", level, logger, data)
	}

	st, raw := readStatus(t, p)
	if len(st.Servers) != 1 {
		t.Fatalf("corral://status = %s, want server a", raw)
	}
	a := st.Servers[0]
	if a.State != stateBackoff || a.PID != 0 || a.RetryAt == "" || !strings.Contains(a.Error, "exited") || a.LastExit == "" {
		t.Errorf("corral://status of the crashed server = %+v, want backoff, no PID (its process is gone), its error, last exit and when it restarts", a.health)
	}

	level, logger, data = nextLog(t, p)
	if level != "notice" || logger != "corral" || !strings.Contains(data, `server "a" is back`) {
		t.Errorf("log message after the restart = %s %s %q, want a notice from corral that server a is back", level, logger, data)
	}
}

func TestDownServerCallAnswersOneShortLine(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("npm error ", 60)
	tg := startGateway(t, `{"restartDelay":"10ms","maxRestarts":1,"failedRetry":"1h","mcpServers":{
		"a": {"command":"FAKE","args":["-state","STATE","-name","a"]},
		"b": {"command":"/bin/sh","args":["-c","echo `+long+` >&2; exit 3"],"prefix":"b"},
		"c": {"command":"/bin/sh","args":["-c","echo `+long+` >&2; exit 3"],"prefix":"c"}
	}}`)
	waitState(t, tg.gw.backends[1], stateFailed, 30*time.Second)
	waitState(t, tg.gw.backends[2], stateFailed, 30*time.Second)
	p := newStdioPeer(t, tg.gw, `{}`)

	// A tool of b's: b never listed its tools, so corral knows the name
	// only by b's prefix.
	m, _ := p.call("tools/call", `{"name":"b__echo","arguments":{}}`)
	if m.Error == nil {
		t.Fatalf("a call to a failed server's tool answered %s, want an error", m.Result)
	}
	msg := m.Error.Message
	if !strings.Contains(msg, `server "b" has failed`) || !strings.Contains(msg, "tries it again at") || strings.Contains(msg, `server "c"`) ||
		strings.Contains(msg, "\n") || len(msg) > 600 {
		t.Errorf("error of a call to a failed server's tool (%d bytes) = %q, want one short line naming server b, its state and its retry, and not c", len(msg), msg)
	}
	// The failing servers tell the client when it has finished its handshake.
	// Other messages may come between (on a loaded machine, server a's
	// start can be slow enough to be reported): up to 8 are read.
	seen := map[string]string{}
	for i := 0; i < 8 && len(seen) < 2; i++ {
		level, _, data := nextLog(t, p)
		for _, name := range []string{"b", "c"} {
			if strings.HasPrefix(data, `server "`+name+`" has failed`) {
				seen[name] = level
			}
		}
		if len(seen) < 2 {
			t.Logf("log message at the handshake: %s %q", level, data)
		}
	}
	if seen["b"] != "error" || seen["c"] != "error" {
		t.Errorf("log messages at the handshake = %v, want an error for each failed server", seen)
	}
}

func TestServerRequestWithNoCallInFlightReachesTheOneStdioSession(t *testing.T) {
	t.Parallel()
	tg := startGateway(t, `{"mcpServers":{
		"fs": {"command":"FAKE","args":["-state","STATE","-name","fs","-roots-at-start"]}
	}}`, func(g *Gateway) { g.serverRequests.holdForClient = true }) // as -stdio sets it
	// event returns the reason of the server's first event named name, or "".
	event := func(name, method string) string {
		for _, s := range fakeProcesses(t, tg.dir) {
			for _, e := range fakeEvents(t, tg.dir, s.PID) {
				if e.Event == name && e.Method == method {
					return e.Reason + "."
				}
			}
		}
		return ""
	}
	// The server asks for roots as soon as it is ready, before the client
	// has connected: corral holds the request for it.
	waitFor(t, 10*time.Second, "the server to ask for roots at its start", func() bool { return event("server-request", "roots/list") != "" })
	answered := make(chan struct{}, 10)
	p := newStdioPeerAnswering(t, tg.gw, fullCaps, func(method string, _ json.RawMessage) (any, *wireError) {
		if method != "roots/list" {
			return nil, &wireError{Code: codeMethodNotFound, Message: "not " + method}
		}
		answered <- struct{}{}
		return map[string]any{"roots": []map[string]string{{"uri": "file:///workspace", "name": "workspace"}}}, nil
	})
	select {
	case <-answered:
	case <-time.After(30 * time.Second):
		t.Fatal("the server's roots/list at its start never reached the stdio client")
	}
	waitFor(t, 10*time.Second, "the server to record the client's roots", func() bool { return event("roots-at-start", "") != "" })
	if got := event("roots-at-start", ""); !strings.Contains(got, "file:///workspace") {
		t.Errorf("the server got %q at its start, want the client's roots", got)
	}

	// Once the client is there, a request with no call in flight goes to
	// it at once.
	if m, _ := p.call("tools/call", `{"name":"roots_later","arguments":{"delay_ms":50}}`); text(t, m) != "asking later" {
		t.Fatalf("roots_later = %q", text(t, m))
	}
	waitFor(t, 10*time.Second, "the server to record the roots it asked for later", func() bool { return event("roots-later", "") != "" })
	if got := event("roots-later", ""); !strings.Contains(got, "file:///workspace") {
		t.Errorf("the server got %q with no call in flight, want the client's roots", got)
	}

	// The client's roots change: the server hears of it.
	p.send(`{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}`)
	waitFor(t, 10*time.Second, "the server to hear roots/list_changed", func() bool {
		return event("notification", "notifications/roots/list_changed") != ""
	})
}

func TestStatusListenServesTheStatusPageBesideStdio(t *testing.T) {
	t.Parallel()
	c := startCorral(t, `{"mcpServers":{"a": {"command":"FAKE","args":["-state","STATE","-name","a"]}}}`,
		"-stdio", "-status-listen", "127.0.0.1:0")
	url := c.waitLog(`serving the status page.* url=(\S+)`)[1]
	resp, page := getPage(t, "GET", url, "Accept", "*/*") // no browser needed on this port
	if resp.StatusCode != 200 || !strings.Contains(page, `data-server="a"`) || !strings.Contains(page, stdioEndpoint) {
		t.Errorf("GET %s = %d, want the status page with server a, saying MCP is on stdin and stdout:\n%s", url, resp.StatusCode, page)
	}
	if resp, body := getPage(t, "POST", url+"mcp", "Accept", "application/json"); resp.StatusCode != 404 || !strings.Contains(body, "status page at / and /healthz only") {
		t.Errorf("POST %smcp = %d %q, want 404: this port serves no MCP", url, resp.StatusCode, body)
	}
	if resp, _ := getPage(t, "GET", url+"healthz"); resp.StatusCode != 200 && resp.StatusCode != 503 {
		t.Errorf("GET %shealthz = %d, want the health report", url, resp.StatusCode)
	}
	c.stdin.Close()
	if code := c.waitExit(20 * time.Second); code != 0 {
		t.Errorf("corral exited with %d after stdin closed, want 0", code)
	}
	requireGone(t, c.dir)
}

func TestCorralsLogMessagesGoToSessionsThatAskedForTheirLevelOrNeverSetOne(t *testing.T) {
	t.Parallel()
	ss := newSessionSet(nil, t.Context(), sessionHooks{})
	mk := func(version, level string) *session {
		s := ss.newSession(func([]byte) {}, stdioPrincipal, "")
		s.initialized, s.protocolVersion, s.logLevel = true, version, level
		return s
	}
	never, debug, errorOnly := mk("2025-11-25", ""), mk("2025-06-18", "debug"), mk("2025-11-25", "error")
	listening := mk("", "") // a 2026-07-28 client's: it asks per request
	ended := mk("2025-11-25", "")
	ended.end() // still in the set, as between its end and its removal
	for _, tc := range []struct {
		level string
		want  []*session
	}{
		{"notice", []*session{never, debug}},
		{"warning", []*session{never, debug}},
		{"error", []*session{never, debug, errorOnly}},
	} {
		got := ss.hearingCorral(slices.Index(logLevels, tc.level))
		if len(got) != len(tc.want) {
			t.Errorf("hearingCorral(%s) = %d sessions, want %d", tc.level, len(got), len(tc.want))
		}
		for _, s := range tc.want {
			if !slices.Contains(got, s) {
				t.Errorf("hearingCorral(%s) leaves out a session with level %q", tc.level, s.logLevel)
			}
		}
		if slices.Contains(got, listening) {
			t.Errorf("hearingCorral(%s) includes a 2026-07-28 client's session", tc.level)
		}
	}
}

func TestAServerTheOneClientsProfileHidesAsksItNothing(t *testing.T) {
	t.Parallel()
	tg := startGateway(t, `{"profiles": {"onlyOpen": {"servers": {"open": {}}}}, "mcpServers":{
		"open": {"command":"FAKE","args":["-state","STATE","-name","open"]},
		"hidden": {"command":"FAKE","args":["-state","STATE","-name","hidden","-roots-at-start"],"prefix":"h"}
	}}`, func(g *Gateway) { g.serverRequests.holdForClient = true }) // as -stdio sets it
	hiddenEvent := func(name, method string) string {
		for _, s := range fakeProcesses(t, tg.dir) {
			for _, e := range fakeEvents(t, tg.dir, s.PID) {
				if e.Event == name && e.Method == method && s.Name == "hidden" {
					return e.Reason + "."
				}
			}
		}
		return ""
	}
	waitFor(t, 10*time.Second, "the hidden server to ask for roots at its start", func() bool { return hiddenEvent("server-request", "roots/list") != "" })
	asked := make(chan string, 10)
	p := newStdioPeerAs(t, tg.gw, profilePrincipal(stdioPrincipal, "onlyOpen"), fullCaps, func(method string, _ json.RawMessage) (any, *wireError) {
		asked <- method
		return map[string]any{"roots": []map[string]string{{"uri": "file:///secret", "name": "secret"}}}, nil
	})
	// The held request is refused once the client is ready, not passed.
	waitFor(t, 30*time.Second, "the hidden server's roots/list to be answered", func() bool { return hiddenEvent("roots-at-start", "") != "" })
	if got := hiddenEvent("roots-at-start", ""); strings.Contains(got, "file:///secret") {
		t.Errorf("the hidden server got the client's roots: %q", got)
	}
	p.send(`{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}`)
	if m, _ := p.call("tools/list", `{}`); m.Error != nil {
		t.Fatalf("tools/list: %+v", m.Error)
	}
	select {
	case m := <-asked:
		t.Errorf("the client was asked %s by a server its profile hides", m)
	default:
	}
	if got := hiddenEvent("notification", "notifications/roots/list_changed"); got != "" {
		t.Errorf("the hidden server heard the client's roots/list_changed")
	}
}
