package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// Tokens of the tests' clients: 32 hexadecimal digits, 128 bits.
const (
	aliceToken = "a1b2c3d4e5f60718293a4b5c6d7e8f90"
	bobToken   = "0f1e2d3c4b5a69788796a5b4c3d2e1f0"
	rootToken  = "9a8b7c6d5e4f30211203f4e5d6c7b8a9"
)

// tokenFile writes token to a file of its own and returns the file's path,
// as JSON.
func tokenFile(t testing.TB, token string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(path, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	q, _ := json.Marshal(path)
	return string(q)
}

// fakeWith is the config of a fakeserver named name, with prefix, that
// offers every capability (tasks too) and tells clients its instructions.
func fakeWith(name, prefix string) string {
	return fmt.Sprintf(`{"command":"FAKE","args":["-state","STATE","-name",%q,"-capabilities","tools,resources,prompts,completions,logging,tasks","-instructions","the instructions of %s"],"prefix":%q}`, name, name, prefix)
}

// requestsTo returns the requests of each method server name's processes
// in tg received.
func requestsTo(t *testing.T, tg *testGateway, name string) map[string]int {
	t.Helper()
	n := map[string]int{}
	for _, s := range serversNamed(t, tg.dir, name) {
		for _, e := range fakeEvents(t, tg.dir, s.PID) {
			switch e.Event {
			case "request":
				n[e.Method]++
			case "subscribe":
				n["subscribe event"]++
			}
		}
	}
	return n
}

// clientFrontEnd sends one request of a client, as the front end it names
// does, and returns the answer.
type clientFrontEnd struct {
	name string
	// open opens the client's session (if the front end has sessions) and
	// returns what sends its requests; modern says the 2026-07-28 era's
	// methods are served, not the sessions'.
	open   func(t *testing.T, tg *testGateway) func(method, params string) *wireMsg
	modern bool
}

// aliceFrontEnds are the ways client alice, or a profile of the same view
// served without a token, reaches corral: every front end, both eras.
var aliceFrontEnds = []clientFrontEnd{
	{name: "Streamable HTTP", open: func(t *testing.T, tg *testGateway) func(string, string) *wireMsg {
		c := connectWith(t, tg.url, "Bearer "+aliceToken)
		n := 0
		return func(method, params string) *wireMsg {
			n++
			return c.request(fmt.Sprint(n), method, params)
		}
	}},
	{name: "a batch of a 2025-03-26 session", open: func(t *testing.T, tg *testGateway) func(string, string) *wireMsg {
		c := &client{t: t, url: tg.url, auth: "Bearer " + aliceToken}
		resp, body := c.post(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"test","version":"1"}}}`)
		if resp.StatusCode != 200 {
			t.Fatalf("initialize: %s %s", resp.Status, body)
		}
		c.sid = resp.Header.Get("Mcp-Session-Id")
		c.post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		return func(method, params string) *wireMsg {
			resp, body := c.post(fmt.Sprintf(`[{"jsonrpc":"2.0","id":1,"method":%q,"params":%s},{"jsonrpc":"2.0","id":2,"method":"ping"}]`, method, params), "Accept", "application/json")
			var answers []wireMsg
			if resp.StatusCode != 200 || json.Unmarshal(body, &answers) != nil || len(answers) != 2 {
				t.Fatalf("batch of %s = %s %s", method, resp.Status, body)
			}
			for _, a := range answers {
				if string(a.ID) == "1" {
					return &a
				}
			}
			t.Fatalf("batch of %s answered no id 1: %s", method, body)
			return nil
		}
	}},
	{name: "2026-07-28 over HTTP", modern: true, open: func(t *testing.T, tg *testGateway) func(string, string) *wireMsg {
		return func(method, params string) *wireMsg {
			params = strings.TrimSuffix(strings.TrimSpace(params), "}")
			if params != "{" {
				params += ","
			}
			_, m, _ := modernPost(t, tg.url, method, params+modernMeta(`{}`)+"}", "Authorization", "Bearer "+aliceToken)
			return m
		}
	}},
	{name: "legacy SSE", open: func(t *testing.T, tg *testGateway) func(string, string) *wireMsg {
		c := dialSSEFront(t, strings.TrimSuffix(tg.url, mcpPath), "Bearer "+aliceToken, true)
		c.initialize(`{}`)
		n := 0
		return func(method, params string) *wireMsg {
			n++
			return c.call(fmt.Sprint(n), method, params)
		}
	}},
	{name: "-stdio -profile", open: func(t *testing.T, tg *testGateway) func(string, string) *wireMsg {
		p := newStdioPeerAs(t, tg.gw, profilePrincipal(stdioPrincipal, "openOnly"), `{}`, nil)
		return func(method, params string) *wireMsg {
			m, _ := p.call(method, params)
			return m
		}
	}},
}

// openOnlyConfig has two servers, open (prefix o) and secret (prefix s),
// client alice, whose profile openOnly sees open alone, and client root,
// who sees both.
func openOnlyConfig(t *testing.T) string {
	return `{
		"clients": {
			"alice": {"tokenFile": ` + tokenFile(t, aliceToken) + `, "profile": "openOnly"},
			"root":  {"tokenFile": ` + tokenFile(t, rootToken) + `}
		},
		"profiles": {"openOnly": {"servers": {"open": {}}}},
		"mcpServers": {"open": ` + fakeWith("open", "o") + `, "secret": ` + fakeWith("secret", "s") + `}
	}`
}

func TestAClientOutsideItsViewGetsTheUnknownAnswerOnEveryFrontEndAndTheServerNeverHearsOfIt(t *testing.T) {
	t.Parallel()
	tg := startGateway(t, openOnlyConfig(t))
	// Each request names an item of the secret server, which alice's view
	// hides; its twin names one that exists nowhere. The answers must be
	// the same but for the name.
	requests := []struct {
		method, hidden, twin, params string
		legacyOnly                   bool
	}{
		{"tools/call", "s__echo", "zz__echo", `{"name":"NAME","arguments":{"text":"x"}}`, false},
		{"prompts/get", "s__greet", "zz__greet", `{"name":"NAME","arguments":{"who":"W"}}`, false},
		{"resources/read", "s+fake://secret/hello", "zz+fake://nothing/hello", `{"uri":"NAME"}`, false},
		{"resources/read", "s+fake://secret/echo/abc", "zz+fake://nothing/echo/abc", `{"uri":"NAME"}`, false},
		{"resources/subscribe", "s+fake://secret/counter", "zz+fake://nothing/counter", `{"uri":"NAME"}`, true},
		{"completion/complete", "s__greet", "zz__greet", `{"ref":{"type":"ref/prompt","name":"NAME"},"argument":{"name":"who","value":"a"}}`, false},
		{"completion/complete", "s+fake://secret/echo/{text}", "zz+fake://nothing/echo/{text}", `{"ref":{"type":"ref/resource","uri":"NAME"},"argument":{"name":"text","value":"t"}}`, false},
		{"tools/call", "s__task", "zz__task", `{"name":"NAME","arguments":{},"task":{"ttl":60000}}`, true},
	}
	lists := []struct{ method, field, key, want string }{
		{"tools/list", "tools", "name", "o__"},
		{"prompts/list", "prompts", "name", "o__"},
		{"resources/list", "resources", "uri", "o+"},
		{"resources/templates/list", "resourceTemplates", "uriTemplate", "o+"},
	}
	for _, fe := range aliceFrontEnds {
		t.Run(fe.name, func(t *testing.T) {
			send := fe.open(t, tg)
			for _, r := range requests {
				if r.legacyOnly && fe.modern {
					continue
				}
				hidden := send(r.method, strings.ReplaceAll(r.params, "NAME", r.hidden))
				twin := send(r.method, strings.ReplaceAll(r.params, "NAME", r.twin))
				if hidden.Error == nil || twin.Error == nil {
					t.Errorf("%s of %s = %s %+v, and of %s = %s %+v; want both refused", r.method, r.hidden, hidden.Result, hidden.Error, r.twin, twin.Result, twin.Error)
					continue
				}
				got := *hidden.Error
				got.Message = strings.ReplaceAll(got.Message, r.hidden, r.twin)
				if got.Code != twin.Error.Code || got.Message != twin.Error.Message {
					t.Errorf("%s of hidden %s = %d %q; want the answer to unknown %s, %d %q", r.method, r.hidden, hidden.Error.Code, hidden.Error.Message, r.twin, twin.Error.Code, twin.Error.Message)
				}
			}
			for _, l := range lists {
				m := send(l.method, `{}`)
				var res map[string]json.RawMessage
				result(t, m, &res)
				var items []map[string]any
				json.Unmarshal(res[l.field], &items)
				if len(items) == 0 {
					t.Errorf("%s is empty; want open's", l.method)
				}
				for _, it := range items {
					if name := fmt.Sprint(it[l.key]); !strings.HasPrefix(name, l.want) && name != statusURI { // corral's own, which every view sees
						t.Errorf("%s lists %q, which is not open's", l.method, name)
					}
				}
			}
			if m := send("tools/call", `{"name":"o__echo","arguments":{"text":"in view"}}`); text(t, m) != "in view" {
				t.Errorf("a call inside the view = %s", m.Result)
			}
		})
	}
	for _, method := range []string{"tools/call", "prompts/get", "resources/read", "resources/subscribe", "completion/complete", "subscribe event"} {
		if n := requestsTo(t, tg, "secret")[method]; n != 0 {
			t.Errorf("the secret server received %d %s requests from clients that may not see it", n, method)
		}
	}
	// The same call from root, who sees every server, does reach it: what
	// the test counts can count.
	root := connectWith(t, tg.url, "Bearer "+rootToken)
	if got := toolText(t, root.callTool("1", "s__echo", `{"text":"x"}`)); got != "x" {
		t.Errorf("root's call of s__echo = %q", got)
	}
	if n := requestsTo(t, tg, "secret")["tools/call"]; n != 1 {
		t.Errorf("after root's call, the secret server received %d tools/call requests, want 1", n)
	}
}

func TestTwoClientsThroughOneCorralEachSeeOnlyTheirServers(t *testing.T) {
	t.Parallel()
	tg := startGateway(t, `{
		"clients": {
			"alice": {"tokenFile": `+tokenFile(t, aliceToken)+`, "profile": "a"},
			"bob":   {"tokenFile": `+tokenFile(t, bobToken)+`, "profile": "b"}
		},
		"profiles": {"a": {"servers": {"alpha": {}}}, "b": {"servers": {"beta": {}}}},
		"mcpServers": {"alpha": `+fakeWith("alpha", "a")+`, "beta": `+fakeWith("beta", "b")+`}
	}`)
	for _, tc := range []struct {
		token, mine, other string
	}{
		{aliceToken, "a__", "b__"},
		{bobToken, "b__", "a__"},
	} {
		c := &client{t: t, url: tg.url, auth: "Bearer " + tc.token}
		resp, body := c.post(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"test","version":"1"}}}`)
		if resp.StatusCode != 200 {
			t.Fatalf("initialize: %s %s", resp.Status, body)
		}
		mine, other := strings.TrimSuffix(tc.mine, "__"), strings.TrimSuffix(tc.other, "__")
		otherServer := map[string]string{"a": "alpha", "b": "beta"}[other]
		if strings.Contains(string(body), "the instructions of "+otherServer) || !strings.Contains(string(body), "the instructions of "+map[string]string{"a": "alpha", "b": "beta"}[mine]) {
			t.Errorf("the client of %s__ tools was told the instructions %s; want its own server's only", mine, body)
		}
		c.sid = resp.Header.Get("Mcp-Session-Id")
		names := c.listToolNames()
		if len(names) == 0 {
			t.Errorf("the client of %s lists no tools", tc.mine)
		}
		for _, name := range names {
			if !strings.HasPrefix(name, tc.mine) {
				t.Errorf("the client of %s lists %q", tc.mine, name)
			}
		}
	}

	// A session is its opener's: another client's token does not reach it.
	alice := connectWith(t, tg.url, "Bearer "+aliceToken)
	bob := &client{t: t, url: tg.url, sid: alice.sid, auth: "Bearer " + bobToken}
	if resp, body := bob.post(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`); resp.StatusCode != http.StatusNotFound {
		t.Errorf("bob using alice's session = %s %s, want 404", resp.Status, body)
	}
	nobody := &client{t: t, url: tg.url, auth: "Bearer " + strings.Repeat("5", 32)}
	if resp, _ := nobody.post(`{"jsonrpc":"2.0","id":1,"method":"ping"}`); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("an unknown token = %s, want 401", resp.Status)
	}
	// Pages about every server are not a limited client's.
	for _, path := range []string{"/metrics", "/healthz"} {
		req, _ := http.NewRequest("GET", strings.TrimSuffix(tg.url, mcpPath)+path, nil)
		req.Header.Set("Authorization", "Bearer "+aliceToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("GET %s with alice's token = %s, want 403", path, resp.Status)
		}
	}
}

func TestAProfileFiltersToolsByPatternAndByTheirReadOnlyHint(t *testing.T) {
	t.Parallel()
	tg := startGateway(t, `{
		"profiles": {
			"safe": {"servers": {"*": {"tools": {"deny": ["sl*"]}}}, "readOnlyTools": true},
			"noEcho": {"servers": {"fake": {"tools": {"allow": ["*"], "deny": ["echo"]}, "prompts": {"deny": ["*"]}, "resources": {"allow": ["fake://fake/hello"]}}}}
		},
		"mcpServers": {"fake": {"command":"FAKE","args":["-state","STATE","-read-only","echo,whoami,sleep"]}}
	}`)
	g := tg.gw
	safe := g.sessions.detachedSession(profilePrincipal(anonymousPrincipal, "safe"))
	if got := toolsOf(t, g, safe); !slices.Equal(got, []string{"echo", "whoami"}) {
		t.Errorf("the read-only profile that denies sl* lists %q, want [echo whoami]", got)
	}
	noEcho := g.sessions.detachedSession(profilePrincipal(anonymousPrincipal, "noEcho"))
	got := toolsOf(t, g, noEcho)
	if slices.Contains(got, "echo") || !slices.Contains(got, "whoami") {
		t.Errorf("the profile that denies echo lists %q", got)
	}
	if m := serveAs(t, g, noEcho, "1", "prompts/list", `{}`); !strings.Contains(string(m.Result), `"prompts":[]`) {
		t.Errorf("the profile that denies every prompt lists %s", m.Result)
	}
	if m := serveAs(t, g, noEcho, "2", "resources/read", `{"uri":"fake://fake/counter"}`); m.Error == nil || m.Error.Code != codeResourceNotFound {
		t.Errorf("reading a resource the profile does not allow = %+v, want not found", m)
	}
	if m := serveAs(t, g, noEcho, "3", "resources/read", `{"uri":"fake://fake/hello"}`); m.Error != nil {
		t.Errorf("reading the one resource the profile allows = %+v", m.Error)
	}
}

func TestAProfileIsServedAtItsPathWhenNoClientsAreConfigured(t *testing.T) {
	t.Parallel()
	tg := startGateway(t, `{
		"profiles": {"openOnly": {"servers": {"open": {}}}},
		"mcpServers": {"open": `+fakeWith("open", "o")+`, "secret": `+fakeWith("secret", "s")+`}
	}`)
	c := connect(t, tg.url+"/openOnly")
	for _, name := range c.listToolNames() {
		if !strings.HasPrefix(name, "o__") {
			t.Errorf("/mcp/openOnly lists %q", name)
		}
	}
	if all := connect(t, tg.url).listToolNames(); !slices.Contains(all, "s__echo") {
		t.Errorf("/mcp lists %q, want every server's tools", all)
	}
	// A session is its profile's: /mcp does not serve it.
	c.url = tg.url
	if resp, _ := c.post(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`); resp.StatusCode != http.StatusNotFound {
		t.Errorf("the profile's session at /mcp = %s, want 404", resp.Status)
	}
	nope := &client{t: t, url: tg.url + "/nope"}
	if resp, body := nope.post(`{"jsonrpc":"2.0","id":0,"method":"ping"}`); resp.StatusCode != http.StatusNotFound || !strings.Contains(string(body), "openOnly") {
		t.Errorf("/mcp/nope = %s %s, want 404 naming the profiles there are", resp.Status, body)
	}

	withClients := startGateway(t, openOnlyConfig(t))
	c = &client{t: t, url: withClients.url + "/openOnly", auth: "Bearer " + aliceToken}
	if resp, _ := c.post(`{"jsonrpc":"2.0","id":0,"method":"ping"}`); resp.StatusCode != http.StatusNotFound {
		t.Errorf("/mcp/openOnly with clients configured = %s, want 404", resp.Status)
	}
}

func TestReloadChangesAClientsViewWithListChangedAndEndsTheSessionsOfARemovedClient(t *testing.T) {
	t.Parallel()
	alice, bob := tokenFile(t, aliceToken), tokenFile(t, bobToken)
	config := func(aliceProfile string, withBob bool) string {
		c := `{"clients": {"alice": {"tokenFile": ` + alice + `, "profile": "` + aliceProfile + `"}`
		if withBob {
			c += `, "bob": {"tokenFile": ` + bob + `, "profile": "a"}`
		}
		return c + `}, "profiles": {"a": {"servers": {"alpha": {}}}, "ab": {"servers": {"alpha": {}, "beta": {}}}},
			"mcpServers": {"alpha": ` + fakeWith("alpha", "a") + `, "beta": ` + fakeWith("beta", "b") + `}}`
	}
	tg := startGateway(t, config("a", true))
	pids := map[string]int{"alpha": serversNamed(t, tg.dir, "alpha")[0].PID, "beta": serversNamed(t, tg.dir, "beta")[0].PID}
	reload := func(next string) {
		t.Helper()
		cfg, err := ParseConfig("next.json", []byte(strings.NewReplacer("FAKE", fakeserverBin, "STATE", tg.dir).Replace(next)), nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if r := tg.gw.Reload(cfg); len(r.Added)+len(r.Removed)+len(r.Changed) != 0 {
			t.Errorf("a reload of clients and profiles alone = %+v; want every server kept", r)
		}
	}
	listen := func(who principal) (*session, chan string) {
		notes := make(chan string, 10)
		s := listeningSession(func(m []byte) { notes <- string(m) }, who)
		tg.gw.sessions.add(s)
		t.Cleanup(func() { tg.gw.sessions.endSession(s) })
		return s, notes
	}
	_, aliceNotes := listen(clientPrincipal("alice"))
	bobSession, bobNotes := listen(clientPrincipal("bob"))
	bobHTTP := connectWith(t, tg.url, "Bearer "+bobToken)

	reload(config("ab", true))
	select {
	case n := <-aliceNotes:
		if !strings.Contains(n, "notifications/tools/list_changed") {
			t.Errorf("alice, whose view grew, was sent %s", n)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("alice, whose view grew, was sent no list_changed")
	}
	if got := toolsOf(t, tg.gw, tg.gw.sessions.detachedSession(clientPrincipal("alice"))); !slices.Contains(got, "b__echo") {
		t.Errorf("after the reload alice lists %q, want beta's tools too", got)
	}
	select {
	case n := <-bobNotes:
		t.Errorf("bob, whose view did not change, was sent %s", n)
	default:
	}

	// The same reload reads alice's token file again: she rotated it.
	var alicePath string
	json.Unmarshal([]byte(alice), &alicePath)
	const rotated = "c0ffee00112233445566778899aabbccddeeff"
	if err := os.WriteFile(alicePath, []byte(rotated), 0o600); err != nil {
		t.Fatal(err)
	}
	reload(config("ab", false))
	for token, want := range map[string]int{aliceToken: http.StatusUnauthorized, rotated: http.StatusOK} {
		c := &client{t: t, url: tg.url, auth: "Bearer " + token}
		if resp, body := c.post(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"test","version":"1"}}}`); resp.StatusCode != want {
			t.Errorf("initialize with alice's token %s after she rotated it = %s %s, want %d", token, resp.Status, body, want)
		}
	}
	if !bobSession.hasEnded() {
		t.Error("a session of bob, whom the reload removed, did not end")
	}
	if resp, _ := bobHTTP.post(`{"jsonrpc":"2.0","id":1,"method":"ping"}`); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("bob's token after his removal = %s, want 401", resp.Status)
	}
	if now := map[string]int{"alpha": serversNamed(t, tg.dir, "alpha")[0].PID, "beta": serversNamed(t, tg.dir, "beta")[0].PID}; fmt.Sprint(now) != fmt.Sprint(pids) {
		t.Errorf("the servers' processes are %v after the reloads, want %v: never restarted", now, pids)
	}
}

func TestATaskOfAToolTheClientMayNoLongerCallDoesNotExistForIt(t *testing.T) {
	t.Parallel()
	alice := tokenFile(t, aliceToken)
	config := func(profile string) string {
		return `{"clients": {"alice": {"tokenFile": ` + alice + `, "profile": "` + profile + `"}},
			"profiles": {"all": {"servers": {"*": {}}}, "noTask": {"servers": {"*": {"tools": {"deny": ["task"]}}}}},
			"mcpServers": {"fake": ` + fakeWith("fake", "") + `}}`
	}
	tg := startGateway(t, config("all"))
	c := connectWith(t, tg.url, "Bearer "+aliceToken)
	m := c.request("1", "tools/call", `{"name":"task","arguments":{"ms":60000},"task":{"ttl":60000}}`)
	var created struct{ Task struct{ TaskID string } }
	result(t, m, &created)
	if created.Task.TaskID == "" {
		t.Fatalf("tools/call of task made no task: %s", m.Result)
	}
	if m := c.request("2", "tasks/get", fmt.Sprintf(`{"taskId":%q}`, created.Task.TaskID)); m.Error != nil {
		t.Fatalf("tasks/get of alice's own task = %+v", m.Error)
	}
	cfg, err := ParseConfig("next.json", []byte(strings.NewReplacer("FAKE", fakeserverBin, "STATE", tg.dir).Replace(config("noTask"))), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	tg.gw.Reload(cfg)
	before := requestsTo(t, tg, "fake")["tasks/get"]
	m = c.request("3", "tasks/get", fmt.Sprintf(`{"taskId":%q}`, created.Task.TaskID))
	if m.Error == nil || m.Error.Code != codeInvalidParams || !strings.Contains(m.Error.Message, "unknown task") {
		t.Errorf("tasks/get of a task of a tool alice may no longer call = %+v, want unknown task", m)
	}
	if m := c.request("4", "tasks/list", `{}`); !strings.Contains(string(m.Result), `"tasks":[]`) {
		t.Errorf("tasks/list after the tool was taken away = %s, want no task", m.Result)
	}
	if after := requestsTo(t, tg, "fake")["tasks/get"]; after != before {
		t.Errorf("the server received %d tasks/get after the tool was taken away, want none", after-before)
	}
}

func TestClientsAndProfilesConfigErrorsNameTheClientOrProfileAndTheField(t *testing.T) {
	t.Parallel()
	strong, weak := tokenFile(t, aliceToken), tokenFile(t, "abcdefgh12345678")
	servers := `"mcpServers": {"fs": {"command": "true"}}`
	for _, tc := range []struct {
		name, config string
		want         []string
	}{
		{"a profile naming an unknown server", `{"profiles": {"dev": {"servers": {"github": {}}}}, ` + servers + `}`,
			[]string{`profiles.dev.servers.github`, `no server is named "github"`}},
		{"a client naming a missing profile", `{"clients": {"alice": {"tokenFile": ` + strong + `, "profile": "nope"}}, ` + servers + `}`,
			[]string{`clients.alice.profile`, `no profile is named "nope"`}},
		{"two clients with the same token", `{"clients": {"alice": {"tokenFile": ` + strong + `}, "bob": {"tokenFile": ` + strong + `}}, ` + servers + `}`,
			[]string{`clients.bob.tokenFile`, `also client alice's`}},
		{"a client with authTokenFile's token", `{"authTokenFile": ` + strong + `, "clients": {"alice": {"tokenFile": ` + strong + `}}, ` + servers + `}`,
			[]string{`clients.alice.tokenFile`, `also authTokenFile`}},
		{"a weak token", `{"clients": {"alice": {"tokenFile": ` + weak + `}}, ` + servers + `}`,
			[]string{`clients.alice.tokenFile`, `too weak`}},
		{"an empty token variable", `{"clients": {"ci": {"tokenEnv": "CORRAL_TEST_UNSET_TOKEN"}}, ` + servers + `}`,
			[]string{`clients.ci.tokenEnv`, `CORRAL_TEST_UNSET_TOKEN is not set`}},
		{"no token", `{"clients": {"ci": {"profile": ""}}, ` + servers + `}`,
			[]string{`clients.ci.tokenFile`, `has no token`}},
		{"a misspelt field of a profile's server", `{"profiles": {"dev": {"servers": {"fs": {"tool": {"deny": ["x"]}}}}}, ` + servers + `}`,
			[]string{`profiles.dev`, `unknown field "tool"`}},
		{"a misspelt field of a client", `{"clients": {"ci": {"tokenFile": ` + strong + `, "profil": "x"}}, ` + servers + `}`,
			[]string{`clients.ci`, `unknown field "profil"`}},
		{"both token sources", `{"clients": {"ci": {"tokenFile": ` + strong + `, "tokenEnv": "X"}}, ` + servers + `}`,
			[]string{`clients.ci.tokenFile`, `not both`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseConfig("c.json", []byte(tc.config), func(string) (string, bool) { return "", false }, nil)
			if err == nil {
				t.Fatal("ParseConfig = nil error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("ParseConfig error = %q, want it to hold %q", err, w)
				}
			}
		})
	}
	cfg, err := ParseConfig("c.json", []byte(`{"clients": {"ci": {"tokenEnv": "CI_TOKEN", "profile": "all"}}, "profiles": {"all": {"servers": {"*": {}}}}, `+servers+`}`),
		func(name string) (string, bool) { return "Zm9vYmFyYmF6cXV4cXV1eGNvcmdl", name == "CI_TOKEN" }, nil)
	if err != nil {
		t.Fatalf("a good config: %v", err)
	}
	if got := clientOf(cfg.clientTokens, "Zm9vYmFyYmF6cXV4cXV1eGNvcmdl"); got != "ci" {
		t.Errorf("clientOf(the token of ci) = %q, want ci", got)
	}
}

func TestTokenBits(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		token string
		pass  bool
	}{
		{"a1b2c3d4e5f60718293a4b5c6d7e8f90", true},          // 32 hex digits: 128 bits
		{"a1b2c3d4e5f60718293a4b5c6d7e8f9", false},          // 31
		{"Zm9vYmFyYmF6cXV4cXV1eGNvcmdl", true},              // 28 base64 characters
		{"Zm9vYmFyYmF6cXV4cXV1eA", true},                    // 22
		{"Zm9vYmFyYmF6cXV4cXV1e", false},                    // 21
		{"1234567890123456789012345678901234567", false},    // 37 decimal digits
		{"12345678901234567890123456789012345678901", true}, // 41
		{strings.Repeat("ab", 40), false},                   // long, but two characters
		{"", false},
	} {
		if got := tokenBits(tc.token) >= minTokenBits; got != tc.pass {
			t.Errorf("tokenBits(%q) = %.1f; passes = %v, want %v", tc.token, tokenBits(tc.token), got, tc.pass)
		}
	}
}

func TestCheckPrintsEachClientsProfileAndThePatternsThatMatchNothing(t *testing.T) {
	t.Parallel()
	cfg, err := ParseConfig("c.json", []byte(`{
		"clients": {"alice": {"tokenFile": `+tokenFile(t, aliceToken)+`, "profile": "dev"}, "root": {"tokenFile": `+tokenFile(t, rootToken)+`}},
		"profiles": {"dev": {"servers": {"github": {"tools": {"deny": ["delete_*", "dleete_*"]}}, "fs": {"resources": {"allow": ["file:///nowhere/*"]}}}}},
		"mcpServers": {"github": {"command": "true"}, "fs": {"command": "true"}, "other": {"command": "true"}}
	}`), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	items := func(server, field string) ([]string, bool) {
		switch {
		case server == "github" && field == "tools":
			return []string{"create_issue", "delete_repo"}, true
		case server == "github":
			return nil, true
		}
		return nil, false // fs never ran: its items are not known
	}
	got := string(cfg.profilesReport(items))
	for _, want := range []string{
		"client alice: profile dev\n",
		"client root: every server\n",
		"  server fs: resources.allow [\"file:///nowhere/*\"]\n",
		"  server github: tools.deny [\"delete_*\" \"dleete_*\"]\n",
		`warning: server github: tools pattern "dleete_*" matches none of the 2 tools`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("profilesReport =\n%s\nwant it to hold %q", got, want)
		}
	}
	for _, unwanted := range []string{`"delete_*" matches none`, "server other", "file:///nowhere/*\" matches none"} {
		if strings.Contains(got, unwanted) {
			t.Errorf("profilesReport =\n%s\nwant no %q", got, unwanted)
		}
	}
}

func TestCorralStdioWithAProfileServesOnlyItsServers(t *testing.T) {
	t.Parallel()
	c := startCorral(t, `{"profiles": {"onlyA": {"servers": {"a": {}}}}, "mcpServers":{
		"a": {"command":"FAKE","args":["-state","STATE","-name","a"],"prefix":"a"},
		"b": {"command":"FAKE","args":["-state","STATE","-name","b"],"prefix":"b"}
	}}`, "-stdio", "-profile", "onlyA")
	send := func(line string) {
		t.Helper()
		if _, err := io.WriteString(c.stdin, line+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	send(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	for {
		var m wireMsg
		line := readLine(t, c.stdout)
		if json.Unmarshal(line, &m) != nil || string(m.ID) != "2" {
			continue
		}
		if !strings.Contains(string(line), `"a__echo"`) || strings.Contains(string(line), `"b__`) {
			t.Errorf("tools/list of -stdio -profile onlyA = %s, want a's tools alone", line)
		}
		break
	}
	c.stdin.Close()
	if code := c.waitExit(20 * time.Second); code != 0 {
		t.Errorf("corral exited with %d, want 0", code)
	}
}
