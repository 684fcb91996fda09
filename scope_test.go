package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// scopedConfig runs one fakeserver, "a", with "scope": "session" and the
// extra settings given (a JSON fragment starting with a comma, or "").
func scopedConfig(extra string) string {
	return `{"restartDelay":"10ms","mcpServers":{"a": {"command":"FAKE","args":["-state","STATE","-name","a","-lifetime","2m"],"scope":"session"` + extra + `}}}`
}

// whoami returns the PID of the process that answered c's call of whoami.
func whoami(t *testing.T, c *client, id string) int {
	t.Helper()
	var who struct{ PID int }
	if err := json.Unmarshal([]byte(toolText(t, c.callTool(id, "whoami", `{}`))), &who); err != nil || who.PID == 0 {
		t.Fatalf("whoami: %v", err)
	}
	return who.PID
}

// sessionProcess returns the process of session-scoped server "a" that
// serves c's session.
func sessionProcess(t *testing.T, tg *testGateway, c *client) *process {
	t.Helper()
	tg.h.mu.Lock()
	hs := tg.h.sessions[c.sid]
	tg.h.mu.Unlock()
	if hs == nil {
		t.Fatalf("no session %s", c.sid)
	}
	p := tg.gw.scopes.pool(tg.gw.backendList()[0])
	inst := p.lookup(hs.session)
	if inst == nil {
		t.Fatalf("session %s has no process of the server", c.sid)
	}
	inst.mu.Lock()
	defer inst.mu.Unlock()
	return inst.proc
}

// deleteSession ends c's session with DELETE.
func deleteSession(t *testing.T, c *client) {
	t.Helper()
	req, _ := http.NewRequest("DELETE", c.url, nil)
	req.Header.Set("Mcp-Session-Id", c.sid)
	if c.auth != "" {
		req.Header.Set("Authorization", c.auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE = %v, %v", resp, err)
	}
	resp.Body.Close()
}

// exited waits until p has exited.
func exited(t *testing.T, p *process, what string) {
	t.Helper()
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s (pid %d) did not exit within 30s", what, p.pid)
	}
}

func TestSessionScopeGivesEachSessionItsOwnProcessStoppedWithIt(t *testing.T) {
	t.Parallel()
	tg := startGateway(t, scopedConfig(""))
	// The probe listed the server, and was stopped.
	probe := fakeProcesses(t, tg.dir)
	if len(probe) != 1 {
		t.Fatalf("%d processes at start, want the probe", len(probe))
	}
	waitFor(t, 10*time.Second, "the probe to stop", func() bool { return !alive(probe[0].PID) })
	one, two := connect(t, tg.url), connect(t, tg.url)
	pid1, pid2 := whoami(t, one, "1"), whoami(t, two, "1")
	if pid1 == pid2 || pid1 == probe[0].PID || pid2 == probe[0].PID {
		t.Fatalf("whoami = %d and %d (probe %d), want a process per session", pid1, pid2, probe[0].PID)
	}
	if again := whoami(t, one, "2"); again != pid1 {
		t.Errorf("the session's second call reached pid %d, want its process %d", again, pid1)
	}
	report, _ := tg.gw.health()
	if h := report.Backends[0]; h.State != stateReady || h.Scope != scopeSession || h.Instances == nil || *h.Instances != 2 {
		t.Errorf("health = %+v, want ready, scope session, 2 instances", h)
	}
	e := getMetrics(t, strings.TrimSuffix(tg.url, mcpPath)+"/metrics")
	if v, ok := e.samples[`corral_server_instances{server="a"}`]; !ok || v != 2 {
		t.Errorf("corral_server_instances{server=\"a\"} = %v (present %v), want 2", v, ok)
	}

	p1 := sessionProcess(t, tg, one)
	deleteSession(t, one)
	exited(t, p1, "the ended session's process")
	if !alive(pid2) {
		t.Errorf("the other session's process %d went with the ended session", pid2)
	}
	if again := whoami(t, two, "2"); again != pid2 {
		t.Errorf("the other session's call reached pid %d, want %d", again, pid2)
	}
	waitFor(t, 10*time.Second, "the instance count to drop", func() bool {
		report, _ := tg.gw.health()
		return *report.Backends[0].Instances == 1
	})
}

func TestSessionScopeServerRequestsReachTheOwnerWhileOthersCall(t *testing.T) {
	t.Parallel()
	tg := startGateway(t, scopedConfig(""))
	busy := newHTTPPeer(t, tg.url, fullCaps)
	release := filepath.Join(t.TempDir(), "release")
	held := make(chan struct{})
	go func() {
		defer close(held)
		busy.call("tools/call", fmt.Sprintf(`{"name":"wait","arguments":{"file":%q}}`, release))
	}()
	defer func() {
		os.WriteFile(release, nil, 0o600)
		<-held
	}()
	waitFor(t, 10*time.Second, "the other session's call to reach its process", func() bool {
		for _, p := range fakeProcesses(t, tg.dir) {
			for _, e := range fakeEvents(t, tg.dir, p.PID) {
				if e.Tool == "wait" {
					return true
				}
			}
		}
		return false
	})
	asker := newHTTPPeer(t, tg.url, fullCaps)
	asker.answer = func(method string, _ json.RawMessage) (any, *wireError) {
		return map[string]any{"role": "assistant", "content": map[string]string{"type": "text", "text": "mine"}, "model": "test"}, nil
	}
	busy.answer = func(method string, _ json.RawMessage) (any, *wireError) {
		t.Errorf("the busy session was asked %s, which the asker's process sent", method)
		return nil, &wireError{Code: codeInternalError, Message: "not mine"}
	}
	m, _ := asker.call("tools/call", `{"name":"sample","arguments":{}}`)
	if got := text(t, m); got != "sampled: mine" {
		t.Errorf("sample while another session has a call in flight = %q, want %q", got, "sampled: mine")
	}
}

func TestSessionScopeCrashRestartsOnlyThatSessionsProcess(t *testing.T) {
	t.Parallel()
	tg := startGateway(t, scopedConfig(""))
	one, two := connect(t, tg.url), connect(t, tg.url)
	pid1, pid2 := whoami(t, one, "1"), whoami(t, two, "1")
	p1 := sessionProcess(t, tg, one)
	one.callTool("2", "crash", `{}`)
	exited(t, p1, "the crashed process")
	// The crashed process's sweep must spare the other session's process,
	// which carries the same server's name.
	var again int
	waitFor(t, 10*time.Second, "the crashed session's process to be restarted", func() bool {
		p := sessionProcess(t, tg, one)
		if p == nil || p == p1 {
			return false
		}
		again = whoami(t, one, "3")
		return true
	})
	if again == pid1 || again == pid2 {
		t.Errorf("after the crash the session's call reached pid %d, want a new process (old %d, other session's %d)", again, pid1, pid2)
	}
	if !alive(pid2) {
		t.Fatalf("the other session's process %d did not survive the crash of %d", pid2, pid1)
	}
	if got := whoami(t, two, "2"); got != pid2 {
		t.Errorf("the other session's call reached pid %d, want its own %d", got, pid2)
	}
}

func TestSessionScopeMaxInstancesRefusesPastTheBound(t *testing.T) {
	t.Parallel()
	tg := startGateway(t, scopedConfig(`,"maxInstances":1`))
	one, two := connect(t, tg.url), connect(t, tg.url)
	whoami(t, one, "1")
	m := two.callTool("1", "whoami", `{}`)
	if m.Error == nil || m.Error.Code != codeUnavailable || !strings.Contains(m.Error.Message, `server "a"`) || !strings.Contains(m.Error.Message, "maxInstances") {
		t.Fatalf("a second session's call with maxInstances 1 = %+v, want -32000 naming the server and maxInstances", m.Error)
	}
	p1 := sessionProcess(t, tg, one)
	deleteSession(t, one)
	exited(t, p1, "the ended session's process")
	waitFor(t, 10*time.Second, "the ended session's process to be counted out", func() bool {
		report, _ := tg.gw.health()
		return *report.Backends[0].Instances == 0
	})
	whoami(t, two, "2")
}

func TestSessionScopeANewSessionWaitsForTheSlotOfAnEndedSessionsStoppingProcess(t *testing.T) {
	t.Parallel()
	// The server stays after its stdin closes: the stop ladder takes its
	// first step's 2 s, during which the ended session's process runs.
	tg := startGateway(t, `{"restartDelay":"10ms","mcpServers":{"a": {"command":"FAKE","scope":"session","maxInstances":1,
		"args":["-state","STATE","-name","a","-lifetime","2m","-ignore-stdin-close"]}}}`)
	one := connect(t, tg.url)
	pid1 := whoami(t, one, "1")
	p1 := sessionProcess(t, tg, one)
	deleteSession(t, one)
	two := connect(t, tg.url)
	m := two.callTool("1", "whoami", `{}`)
	if m.Error != nil {
		t.Fatalf("a new session's call while the ended session's process stops = %+v, want it to wait for that slot", m.Error)
	}
	select {
	case <-p1.exited:
	default:
		t.Errorf("the new session's process started before the ended session's process %d exited: more than maxInstances ran", pid1)
	}
	if pid2 := whoami(t, two, "2"); pid2 == pid1 {
		t.Errorf("the new session's call reached the ended session's process %d", pid1)
	}
}

func TestSessionScopeRefusesModernRequestsAndShutdownLeavesNothing(t *testing.T) {
	t.Parallel()
	tg := startGateway(t, scopedConfig(""))
	_, m, _ := modernPost(t, tg.url, "tools/call", `{"name":"whoami","arguments":{},`+modernMeta(`{}`)+`}`)
	if m.Error == nil || m.Error.Code != codeMethodNotFound || !strings.Contains(m.Error.Message, `server "a" has "scope": "session"`) {
		t.Errorf("a modern call = %+v, want -32601 naming the server and its scope", m.Error)
	}
	var procs []*process
	for i := range 3 {
		c := connect(t, tg.url)
		whoami(t, c, fmt.Sprint(i))
		procs = append(procs, sessionProcess(t, tg, c))
	}
	tg.h.shutdown()
	tg.gw.Stop(nil)
	for _, p := range procs {
		exited(t, p, "a session's process at shutdown")
	}
	if left := markedProcesses(tg.gw.instance, ""); len(left) > 0 {
		t.Errorf("processes left after shutdown: %v", left)
	}
}

func TestScopeConfigErrorsNameTheServerAndField(t *testing.T) {
	for _, tc := range []struct{ name, entry, want string }{
		{"an unknown scope", `{"command":"x","scope":"clients"}`, `mcpServers.a.scope: unknown scope "clients"`},
		{"a negative maxInstances", `{"command":"x","scope":"session","maxInstances":-1}`, `mcpServers.a.maxInstances: must not be negative`},
		{"maxInstances on a shared server", `{"command":"x","maxInstances":3}`, `mcpServers.a.maxInstances: bounds the processes of a server with "scope": "session"`},
		{"a session-scoped remote server", `{"url":"http://h/mcp","scope":"session"}`, `mcpServers.a.scope: "session" needs a "command"`},
		{"a session-scoped server with a prerequisite", `{"command":"x","scope":"session","prerequisite":{"command":"y","ready":{"tcp":"127.0.0.1:1"}}}`, `mcpServers.a.prerequisite: cannot go with "scope": "session"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseConfig("config.json", []byte(`{"mcpServers":{"a":`+tc.entry+`}}`), func(string) (string, bool) { return "", false }, func(string) {})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("ParseConfig = %v, want an error containing %q", err, tc.want)
			}
		})
	}
	c, err := ParseConfig("config.json", []byte(`{"mcpServers":{"a":{"command":"x","scope":"session"}}}`), func(string) (string, bool) { return "", false }, func(string) {})
	if err != nil {
		t.Fatal(err)
	}
	if s := c.Servers()[0]; !s.sessionScoped() || s.maxInstances() != defaultMaxInstances {
		t.Errorf("scope session = %v, maxInstances = %d, want session and %d", s.sessionScoped(), s.maxInstances(), defaultMaxInstances)
	}
}

// onlyProcess returns the process of the one session that has one of
// session-scoped server "a" in gw.
func onlyProcess(t *testing.T, gw *Gateway) *process {
	t.Helper()
	owners := gw.scopes.pool(gw.backendList()[0]).owners()
	if len(owners) != 1 {
		t.Fatalf("%d sessions have a process of the server, want 1", len(owners))
	}
	for _, b := range owners {
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.proc
	}
	return nil
}

func TestSessionScopeProcessEndsWhenTheSessionExpiresOrItsSSEStreamCloses(t *testing.T) {
	t.Parallel()
	t.Run("idle expiry", func(t *testing.T) {
		tg := startGateway(t, scopedConfig(""))
		c := connect(t, tg.url)
		whoami(t, c, "1")
		p := onlyProcess(t, tg.gw)
		if n := tg.h.expireIdle(time.Now().Add(1000 * time.Hour)); n != 1 {
			t.Fatalf("expireIdle ended %d sessions, want 1", n)
		}
		exited(t, p, "the expired session's process")
	})
	t.Run("legacy SSE stream closed", func(t *testing.T) {
		f := startSSEFront(t, scopedConfig(""), 0)
		c := dialSSEFront(t, f.base, "", true)
		c.initialize(`{}`)
		if m := c.call("1", "tools/call", `{"name":"whoami","arguments":{}}`); m.Error != nil {
			t.Fatalf("whoami over legacy SSE = %+v", m.Error)
		}
		p := onlyProcess(t, f.gw)
		c.close()
		exited(t, p, "the closed stream's session's process")
	})
}

// TestSessionScopeHundredSessionsLeaveNoProcess is the figure of
// docs/performance.md: 100 sessions, ten at a time, each calling a
// session-scoped server and ending with DELETE, leave no process of it
// running, while corral still runs.
func TestSessionScopeHundredSessionsLeaveNoProcess(t *testing.T) {
	t.Parallel()
	const sessions, atOnce = 100, 10
	tg := startGateway(t, scopedConfig(""))
	start := time.Now()
	procs := make(chan *process, sessions)
	pids := make(chan int, sessions)
	for batch := 0; batch < sessions; batch += atOnce {
		// A batch's subtests run in parallel; t.Run returns when all end.
		t.Run(fmt.Sprintf("sessions %d-%d", batch+1, batch+atOnce), func(t *testing.T) {
			for i := range atOnce {
				t.Run(fmt.Sprint(batch+i+1), func(t *testing.T) {
					t.Parallel()
					c := connect(t, tg.url)
					pids <- whoami(t, c, "1")
					procs <- sessionProcess(t, tg, c)
					deleteSession(t, c)
				})
			}
		})
	}
	close(procs)
	close(pids)
	for p := range procs {
		exited(t, p, "an ended session's process")
	}
	distinct := map[int]bool{}
	for pid := range pids {
		distinct[pid] = true
	}
	left := markedProcesses(tg.gw.instance, "")
	t.Logf("%d sessions (%d at a time) in %s: %d distinct processes; processes of the server left running: %d",
		sessions, atOnce, time.Since(start).Round(time.Millisecond), len(distinct), len(left))
	if len(distinct) != sessions || len(left) != 0 {
		t.Errorf("want %d processes, none left", sessions)
	}
	// A process is counted out once its backend's stop has joined its
	// goroutines, a moment after the process itself is gone.
	waitFor(t, 10*time.Second, "the instance count to drop to 0", func() bool {
		report, _ := tg.gw.health()
		return *report.Backends[0].Instances == 0
	})
}

func TestSessionScopeServerRequestWithNoCallInFlightGoesOnTheSessionsStream(t *testing.T) {
	t.Parallel()
	tg := startGateway(t, scopedConfig(""))
	p := newHTTPPeer(t, tg.url, fullCaps)
	if m, _ := p.call("tools/call", `{"name":"roots_later","arguments":{"delay_ms":50}}`); text(t, m) != "asking later" {
		t.Fatalf("roots_later = %q", text(t, m))
	}
	var req *wireMsg
	select {
	case req = <-p.notes:
	case <-time.After(30 * time.Second):
		t.Fatal("no request of the server's came on the session's GET stream within 30s")
	}
	if req.Method != "roots/list" || req.ID == nil {
		t.Fatalf("the GET stream carried %s %s, want the server's roots/list", req.Method, req.Params)
	}
	(&client{t: t, url: p.url, sid: p.sid}).post(`{"jsonrpc":"2.0","id":` + string(req.ID) + `,"result":{"roots":[{"uri":"file:///mine","name":"mine"}]}}`)
	waitFor(t, 10*time.Second, "the server to record the session's roots", func() bool {
		for _, s := range fakeProcesses(t, tg.dir) {
			for _, e := range fakeEvents(t, tg.dir, s.PID) {
				if e.Event == "roots-later" {
					if !strings.Contains(e.Reason, "file:///mine") {
						t.Fatalf("the server got %q, want the session's roots", e.Reason)
					}
					return true
				}
			}
		}
		return false
	})
}

func TestSessionScopeLogsAndResourceUpdatesGoToTheOwnerOnly(t *testing.T) {
	t.Parallel()
	tg := startGateway(t, scopedConfig(""))
	a, b := newHTTPPeer(t, tg.url, `{}`), newHTTPPeer(t, tg.url, `{}`)
	for _, p := range []*peer{a, b} {
		if m, _ := p.call("logging/setLevel", `{"level":"info"}`); m.Error != nil {
			t.Fatalf("logging/setLevel: %+v", m.Error)
		}
	}
	if m, _ := a.call("resources/subscribe", `{"uri":"fake://a/counter"}`); m.Error != nil {
		t.Fatalf("resources/subscribe: %+v", m.Error)
	}
	a.call("tools/call", `{"name":"log","arguments":{"data":"from A"}}`)
	a.call("tools/call", `{"name":"touch","arguments":{}}`)
	// B's process logs and changes its counter too: none of it is A's.
	b.call("tools/call", `{"name":"touch","arguments":{}}`)
	b.call("tools/call", `{"name":"log","arguments":{"data":"from B"}}`)
	a.call("tools/call", `{"name":"touch","arguments":{}}`)

	describe := func(m *wireMsg) string {
		var p struct{ Data, URI string }
		json.Unmarshal(m.Params, &p)
		return m.Method + " " + p.Data + p.URI
	}
	var got []string
	for range 3 {
		got = append(got, describe(a.nextExcept(listChanged...)))
	}
	want := []string{"notifications/message from A", "notifications/resources/updated fake://a/counter", "notifications/resources/updated fake://a/counter"}
	if strings.Join(got, "; ") != strings.Join(want, "; ") {
		t.Errorf("session A's stream carried %q, want %q", got, want)
	}
	if got := describe(b.nextExcept(listChanged...)); got != "notifications/message from B" {
		t.Errorf("session B's first message was %q, want its own process's log message", got)
	}
}

func TestSessionScopeReloadThatChangesTheServerStopsEverySessionsProcess(t *testing.T) {
	t.Parallel()
	tg := startGateway(t, scopedConfig(""))
	c := connect(t, tg.url)
	old := whoami(t, c, "1")
	p := sessionProcess(t, tg, c)
	next := strings.NewReplacer("FAKE", fakeserverBin, "STATE", tg.dir).Replace(scopedConfig(`,"maxInstances":3`))
	cfg, err := ParseConfig("next.json", []byte(next), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r := tg.gw.Reload(cfg); fmt.Sprint(r.Changed) != "[a]" {
		t.Fatalf("Reload = %+v, want a changed", r)
	}
	exited(t, p, "the session's process of the changed server") // Reload returns once it is gone
	for _, b := range tg.gw.backendList() {
		<-b.firstDone // the new probe has listed the server
	}
	if got := whoami(t, c, "2"); got == old {
		t.Errorf("after the reload the session's call reached the old process %d", old)
	}
}

func TestPerSessionExampleParses(t *testing.T) {
	c, err := LoadConfig("examples/per-session.json", func(string) (string, bool) { return "", false }, func(string) {})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range c.Servers() {
		if want := s.Name() == "everything"; s.sessionScoped() != want {
			t.Errorf("server %q session-scoped = %v, want %v", s.Name(), s.sessionScoped(), want)
		}
	}
}

func TestSessionScopeTasksOfTwoSessionsProcessesDoNotCollide(t *testing.T) {
	t.Parallel()
	// Each session's process numbers its tasks task-1, task-2...
	tg := startGateway(t, `{"mcpServers":{"a": {"command":"FAKE","args":["-state","STATE","-name","a","-capabilities","tools,tasks"],"scope":"session"}}}`)
	one, two := newHTTPPeer(t, tg.url, `{}`), newHTTPPeer(t, tg.url, `{}`)
	first := createTask(t, one, "task", 60000)
	second := createTask(t, two, "task", 60000)
	for _, c := range []struct {
		p    *peer
		task taskState
	}{{one, first}, {two, second}} {
		m, _ := c.p.call("tasks/get", fmt.Sprintf(`{"taskId":%q}`, c.task.TaskID))
		var got taskState
		result(t, m, &got)
		if got != (taskState{c.task.TaskID, "working"}) {
			t.Errorf("tasks/get of the session's own task %s = %s %+v, want it working", c.task.TaskID, m.Result, m.Error)
		}
	}
}

func TestSessionScopeIdleStopStopsASessionsIdleProcessAndItsNextCallStartsAnother(t *testing.T) {
	t.Parallel()
	tg := startGateway(t, scopedConfig(`,"idleStop":"200ms"`))
	one := connect(t, tg.url)
	pid1 := whoami(t, one, "1")
	p1 := sessionProcess(t, tg, one)
	exited(t, p1, "the session's idle process")
	pid2 := whoami(t, one, "2")
	if pid2 == pid1 {
		t.Errorf("the call after the idle stop reached pid %d, the stopped process", pid2)
	}
}

func TestSessionScopeASessionThatOnlyHoldsAStreamGivesItsPlaceToOneThatCalls(t *testing.T) {
	t.Parallel()
	tg := startGateway(t, `{"sessionIdleTimeout":"1s","mcpServers":{"a": {"command":"FAKE","scope":"session","maxInstances":1,
		"args":["-state","STATE","-name","a","-lifetime","2m"]}}}`)
	holder := connect(t, tg.url)
	// Taken before the holder's last call: corral's own record of that
	// call is later, so the idle time measured from here is at least
	// corral's, and the lower bound below can only fail if corral gave
	// the place early. (Taken after the call, as it once was, a slow
	// answer made a correct corral look early.)
	lastCall := time.Now()
	pid1 := whoami(t, holder, "1")
	p1 := sessionProcess(t, tg, holder)
	// An open GET stream keeps the holder's session alive past
	// sessionIdleTimeout, with its process.
	req, _ := http.NewRequestWithContext(t.Context(), "GET", tg.url, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", holder.sid)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET stream = %v, %v", resp, err)
	}
	defer resp.Body.Close()

	caller := connect(t, tg.url)
	m := caller.callTool("1", "whoami", `{}`)
	if m.Error != nil {
		t.Fatalf("a session's call while another session only holds a stream = %+v, want it to get that session's place once it has made no call for sessionIdleTimeout", m.Error)
	}
	// A lower bound only: a slow machine makes it longer, never shorter.
	if idle := time.Since(lastCall); idle < time.Second {
		t.Errorf("the call got the holder's place %s after the holder's last call; want it only once the holder made no call for sessionIdleTimeout (1s)", idle)
	}
	exited(t, p1, "the process of the session that only held a stream")
	if pid2 := whoami(t, caller, "2"); pid2 == pid1 {
		t.Errorf("the new session's call reached the holder's process %d", pid1)
	}
	// The holder is still a session: its next call waits for a place in
	// turn and gets a process of its own once the caller is idle.
	if m := holder.callTool("2", "whoami", `{}`); m.Error != nil {
		t.Errorf("the holder's next call = %+v, want a new process once the caller has been idle for sessionIdleTimeout", m.Error)
	}
}
