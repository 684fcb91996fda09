package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// clientScopedConfig runs one fakeserver, "a", with "scope": "client" and
// WHOAMI_VALUE=server-default, for clients alice (whose env for "a" sets
// WHOAMI_VALUE from the file secret, with ${file:...}) and bob (who sets it
// to bob-value), and a bearer token (rootToken) that names no client; extra
// is added to the server's entry (a JSON fragment starting with a comma, or
// "").
func clientScopedConfig(t *testing.T, secret, extra string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "alice-secret")
	if err := os.WriteFile(path, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return `{"restartDelay":"10ms","authTokenFile":` + tokenFile(t, rootToken) + `,
		"clients": {
			"alice": {"tokenFile": ` + tokenFile(t, aliceToken) + `, "env": {"a": {"WHOAMI_VALUE": "${file:` + path + `}"}}},
			"bob":   {"tokenFile": ` + tokenFile(t, bobToken) + `, "env": {"a": {"WHOAMI_VALUE": "bob-value"}}}
		},
		"mcpServers": {"a": {"command":"FAKE","args":["-state","STATE","-name","a","-lifetime","2m"],"scope":"client","env":{"WHOAMI_VALUE":"server-default"}` + extra + `}}}`
}

// whoamiEnv returns the PID of the process that answered c's call of
// whoami, and the value of WHOAMI_VALUE it runs with.
func whoamiEnv(t *testing.T, c *client, id string) (int, string) {
	t.Helper()
	var who struct {
		PID int
		Env string
	}
	if err := json.Unmarshal([]byte(toolText(t, c.callTool(id, "whoami", `{}`))), &who); err != nil || who.PID == 0 {
		t.Fatalf("whoami: %v", err)
	}
	return who.PID, who.Env
}

// clientProcess returns the process of client-scoped server "a" that
// serves client name, or nil if it has none.
func clientProcess(t *testing.T, tg *testGateway, name string) *process {
	t.Helper()
	b := tg.gw.scopes.pool(tg.gw.backendList()[0]).owners()[name]
	if b == nil {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.proc
}

func TestClientScopeGivesEachClientItsOwnProcessWithItsOwnEnvSharedByItsSessions(t *testing.T) {
	t.Parallel()
	tg := startGateway(t, clientScopedConfig(t, "alice-secret-value", ""))
	alice1 := connectWith(t, tg.url, "Bearer "+aliceToken)
	alice2 := connectWith(t, tg.url, "Bearer "+aliceToken)
	bob := connectWith(t, tg.url, "Bearer "+bobToken)
	pa1, ea1 := whoamiEnv(t, alice1, "1")
	pa2, ea2 := whoamiEnv(t, alice2, "1")
	pb, eb := whoamiEnv(t, bob, "1")
	t.Logf("alice's sessions: pid %d env %q, pid %d env %q; bob's: pid %d env %q", pa1, ea1, pa2, ea2, pb, eb)
	if pa1 != pa2 {
		t.Errorf("alice's two sessions reached pids %d and %d, want one process for the client", pa1, pa2)
	}
	if pa1 == pb {
		t.Errorf("alice and bob both reached pid %d, want a process each", pa1)
	}
	if ea1 != "alice-secret-value" || ea2 != "alice-secret-value" {
		t.Errorf("alice's process sees WHOAMI_VALUE %q and %q, want her own value", ea1, ea2)
	}
	if eb != "bob-value" {
		t.Errorf("bob's process sees WHOAMI_VALUE %q, want his own value", eb)
	}
	report, _ := tg.gw.health()
	if h := report.Backends[0]; h.Scope != scopeClient || h.Instances == nil || *h.Instances != 2 {
		t.Errorf("health = %+v, want scope client, 2 instances", h)
	}

	// Each process carries a marker of its own, so that the sweep after one
	// exits spares the other.
	owners := tg.gw.scopes.pool(tg.gw.backendList()[0]).owners()
	if ma, mb := owners["alice"].markerName(), owners["bob"].markerName(); ma == mb || !strings.HasPrefix(ma, "a#") || !strings.HasPrefix(mb, "a#") {
		t.Errorf("markers %q and %q, want one of its own (a#N) for each client's process", ma, mb)
	}

	// The process lives while one of alice's sessions does.
	pAlice := clientProcess(t, tg, "alice")
	deleteSession(t, alice1)
	if again, _ := whoamiEnv(t, alice2, "2"); again != pa1 {
		t.Errorf("alice's other session reached pid %d after one ended, want %d", again, pa1)
	}
	deleteSession(t, alice2)
	exited(t, pAlice, "alice's process once her last session ended")
	if !alive(pb) {
		t.Errorf("bob's process %d went with alice's sessions", pb)
	}

	// At corral's stop, bob's process goes too, and nothing is left.
	pBob := clientProcess(t, tg, "bob")
	tg.h.shutdown()
	tg.gw.Stop(nil)
	exited(t, pBob, "bob's process at shutdown")
	if left := markedProcesses(tg.gw.instance, ""); len(left) > 0 {
		t.Errorf("processes left after shutdown: %v", left)
	}
}

func TestClientScopeRefusesACallerThatNamesNoClient(t *testing.T) {
	t.Parallel()
	tg := startGateway(t, clientScopedConfig(t, "alice-secret-value", ""))
	root := connectWith(t, tg.url, "Bearer "+rootToken)
	m := root.callTool("1", "whoami", `{}`)
	if m.Error == nil || !strings.Contains(m.Error.Message, `server "a" has "scope": "client"`) || !strings.Contains(m.Error.Message, "names no client") {
		t.Fatalf("a call without a client = %+v, want an error naming the server, its scope and the missing client", m.Error)
	}
	if n := len(tg.gw.scopes.pool(tg.gw.backendList()[0]).owners()); n != 0 {
		t.Errorf("%d processes started for a caller with no client, want none", n)
	}
}

func TestClientScopeReloadThatChangesAClientsEnvRestartsOnlyItsProcess(t *testing.T) {
	t.Parallel()
	tg := startGateway(t, clientScopedConfig(t, "alice-old", ""))
	alice := connectWith(t, tg.url, "Bearer "+aliceToken)
	bob := connectWith(t, tg.url, "Bearer "+bobToken)
	pa, _ := whoamiEnv(t, alice, "1")
	pb, _ := whoamiEnv(t, bob, "1")
	pAlice := clientProcess(t, tg, "alice")

	next := strings.NewReplacer("FAKE", fakeserverBin, "STATE", tg.dir).Replace(clientScopedConfig(t, "alice-new", ""))
	cfg, err := ParseConfig("next.json", []byte(next), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r := tg.gw.Reload(cfg); len(r.Changed)+len(r.Added)+len(r.Removed) != 0 {
		t.Errorf("reload = %+v, want no server changed: only a client's env", r)
	}
	exited(t, pAlice, "alice's process, whose env the reload changed")
	pa2, ea2 := whoamiEnv(t, alice, "2")
	if pa2 == pa || ea2 != "alice-new" {
		t.Errorf("alice after the reload: pid %d (was %d) env %q, want a new process with alice-new", pa2, pa, ea2)
	}
	if pb2, eb2 := whoamiEnv(t, bob, "2"); pb2 != pb || eb2 != "bob-value" {
		t.Errorf("bob after the reload: pid %d (was %d) env %q, want his process untouched", pb2, pb, eb2)
	}
}

func TestClientScopeIdleStopStopsAClientsIdleProcessAndItsNextCallStartsAnother(t *testing.T) {
	t.Parallel()
	tg := startGateway(t, clientScopedConfig(t, "alice-secret-value", `,"idleStop":"200ms"`))
	alice := connectWith(t, tg.url, "Bearer "+aliceToken)
	pid1, _ := whoamiEnv(t, alice, "1")
	exited(t, clientProcess(t, tg, "alice"), "alice's idle process")
	pid2, env := whoamiEnv(t, alice, "2")
	if pid2 == pid1 || env != "alice-secret-value" {
		t.Errorf("the call after the idle stop reached pid %d (stopped: %d) with env %q, want a new process with alice's env", pid2, pid1, env)
	}
}

func TestClientScopeConfigErrorsNameTheClientAndField(t *testing.T) {
	tokens := t.TempDir()
	tok := filepath.Join(tokens, "t")
	if err := os.WriteFile(tok, []byte(aliceToken), 0o600); err != nil {
		t.Fatal(err)
	}
	tf, _ := json.Marshal(tok)
	for _, tc := range []struct{ name, clientExtra, servers, want string }{
		{"env for an unknown server", `"env":{"nope":{"K":"v"}}`, `"a":{"command":"x","scope":"client"}`,
			`clients.alice.env.nope: no server is named "nope"`},
		{"env for a shared server", `"env":{"a":{"K":"v"}}`, `"a":{"command":"x"}`,
			`clients.alice.env.a: server "a" is not "scope": "client"`},
		{"headers for a local server", `"headers":{"a":{"K":"v"}}`, `"a":{"command":"x","scope":"client"}`,
			`clients.alice.headers.a: server "a" is local`},
		{"env for a remote server", `"env":{"a":{"K":"v"}}`, `"a":{"url":"http://h/mcp","scope":"client"}`,
			`clients.alice.env.a: server "a" is remote`},
		{"an unset variable", `"env":{"a":{"K":"${NOPE}"}}`, `"a":{"command":"x","scope":"client"}`,
			`clients.alice.env.a.K:`},
		{"a field corral does not know", `"envs":{}`, `"a":{"command":"x","scope":"client"}`,
			`clients.alice: unknown field "envs"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := `{"clients":{"alice":{"tokenFile":` + string(tf) + `,` + tc.clientExtra + `}},"mcpServers":{` + tc.servers + `}}`
			_, err := ParseConfig("config.json", []byte(data), func(string) (string, bool) { return "", false }, func(string) {})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("ParseConfig = %v, want an error containing %q", err, tc.want)
			}
		})
	}
	_, err := ParseConfig("config.json", []byte(`{"mcpServers":{"a":{"command":"x","scope":"client"}}}`), func(string) (string, bool) { return "", false }, func(string) {})
	if err == nil || !strings.Contains(err.Error(), `mcpServers.a.scope: "client" runs a process per named client, and "clients" names none`) {
		t.Errorf("a client-scoped server without clients: ParseConfig = %v, want an error naming the server and scope", err)
	}
	_, err = ParseConfig("config.json", []byte(`{"mcpServers":{"a":{"command":"x","scope":"bogus"}}}`), func(string) (string, bool) { return "", false }, func(string) {})
	if err == nil || !strings.Contains(err.Error(), `or "client" (a process per named client)`) {
		t.Errorf("an unknown scope: ParseConfig = %v, want the error to name the scopes", err)
	}

	// A valid one: -check shows the client's env masked.
	c, err := ParseConfig("config.json", []byte(`{"clients":{"alice":{"tokenFile":`+string(tf)+`,"env":{"a":{"GITHUB_TOKEN":"${SECRET}"}}}},"mcpServers":{"a":{"command":"x","scope":"client"}}}`),
		func(name string) (string, bool) { return "s3cr3t-value", name == "SECRET" }, func(string) {})
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Clients["alice"].Env["a"]["GITHUB_TOKEN"]; got != "s3cr3t-value" {
		t.Errorf("alice's env for a = %q, want the variable's value", got)
	}
	shown := string(c.resolved())
	if strings.Contains(shown, "s3cr3t-value") || !strings.Contains(shown, `"GITHUB_TOKEN": "****"`) {
		t.Errorf("-check shows %s, want alice's env value masked", shown)
	}
	// A client's values written in a config file others can read are
	// warned of, as a server's are; references are not.
	readable := filepath.Join(tokens, "config.json")
	os.WriteFile(readable, []byte(`{}`), 0o644)
	if w := secretWarnings(readable, c); len(w) != 0 {
		t.Errorf("secretWarnings with a client's env from a reference = %q, want none", w)
	}
	lit, err := ParseConfig("config.json", []byte(`{"clients":{"alice":{"tokenFile":`+string(tf)+`,"env":{"a":{"GITHUB_TOKEN":"written-here"}}}},"mcpServers":{"a":{"command":"x","scope":"client"}}}`),
		func(string) (string, bool) { return "", false }, func(string) {})
	if err != nil {
		t.Fatal(err)
	}
	if w := secretWarnings(readable, lit); len(w) != 1 || !strings.Contains(w[0], "chmod 600") {
		t.Errorf("secretWarnings with a client's env written in a readable file = %q, want one warning", w)
	}
	if s := c.Servers()[0]; s.maxInstances() != defaultMaxInstances || !strings.Contains(shown, `"maxInstances": 16`) {
		t.Errorf("a client-scoped server's maxInstances = %d, want %d shown", s.maxInstances(), defaultMaxInstances)
	}
}

func TestClientScopeRemoteServerGetsEachClientsOwnHeaders(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	seen := map[string]string{} // the caller named in a call -> the X-Who header it came with
	tr := newTestRemote(t, &testRemote{session: "s", call: func(w http.ResponseWriter, r *http.Request, msg *wireMsg) {
		w.Header().Set("Content-Type", "application/json")
		switch msg.Method {
		case "tools/list":
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"tools":[{"name":"t","inputSchema":{"type":"object"}}]}}`, msg.ID)
		case "tools/call":
			var p struct {
				Arguments struct{ Caller string }
			}
			json.Unmarshal(msg.Params, &p)
			mu.Lock()
			seen[p.Arguments.Caller] = r.Header.Get("X-Who")
			mu.Unlock()
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"ok"}]}}`, msg.ID)
		default:
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{}}`, msg.ID)
		}
	}})
	u, _ := json.Marshal(tr.url)
	tg := startGateway(t, `{"clients": {
			"alice": {"tokenFile": `+tokenFile(t, aliceToken)+`, "headers": {"r": {"X-Who": "alice"}}},
			"bob":   {"tokenFile": `+tokenFile(t, bobToken)+`}
		},
		"mcpServers": {"r": {"url": `+string(u)+`, "scope": "client", "headers": {"X-Who": "server"}}}}`)
	for _, who := range []struct{ token, name string }{{aliceToken, "alice"}, {bobToken, "bob"}} {
		c := connectWith(t, tg.url, "Bearer "+who.token)
		if m := c.callTool("1", "t", `{"caller":"`+who.name+`"}`); m.Error != nil {
			t.Fatalf("%s's call: %+v", who.name, m.Error)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if seen["alice"] != "alice" || seen["bob"] != "server" {
		t.Errorf("X-Who by caller = %v, want alice's own header for alice and the server's for bob", seen)
	}
	if n := len(tg.gw.scopes.pool(tg.gw.backendList()[0]).owners()); n != 2 {
		t.Errorf("%d connections to the remote server, want one per client", n)
	}
}

func TestClientScopeLogsAndResourceUpdatesGoToTheClientsSessionsOnly(t *testing.T) {
	t.Parallel()
	tg := startGateway(t, clientScopedConfig(t, "alice-secret-value", ""))
	a1 := newHTTPPeerWith(t, tg.url, `{}`, "Bearer "+aliceToken)
	a2 := newHTTPPeerWith(t, tg.url, `{}`, "Bearer "+aliceToken)
	b := newHTTPPeerWith(t, tg.url, `{}`, "Bearer "+bobToken)
	for _, p := range []*peer{a1, a2, b} {
		if m, _ := p.call("logging/setLevel", `{"level":"info"}`); m.Error != nil {
			t.Fatalf("logging/setLevel: %+v", m.Error)
		}
	}
	if m, _ := a2.call("resources/subscribe", `{"uri":"fake://a/counter"}`); m.Error != nil {
		t.Fatalf("resources/subscribe: %+v", m.Error)
	}
	// Bob's process logs and changes its counter first: none of it is alice's.
	b.call("tools/call", `{"name":"touch","arguments":{}}`)
	b.call("tools/call", `{"name":"log","arguments":{"data":"from bob"}}`)
	a1.call("tools/call", `{"name":"log","arguments":{"data":"from alice"}}`)
	a1.call("tools/call", `{"name":"touch","arguments":{}}`)

	describe := func(m *wireMsg) string {
		var p struct{ Data, URI string }
		json.Unmarshal(m.Params, &p)
		return m.Method + " " + p.Data + p.URI
	}
	if got := describe(a1.nextExcept(listChanged...)); got != "notifications/message from alice" {
		t.Errorf("alice's first session's first message was %q, want her process's log message", got)
	}
	var got []string
	for range 2 {
		got = append(got, describe(a2.nextExcept(listChanged...)))
	}
	// Her second session shares the process: it hears its log message, and
	// the update of the resource it subscribed to, caused by her other session.
	if want := []string{"notifications/message from alice", "notifications/resources/updated fake://a/counter"}; strings.Join(got, "; ") != strings.Join(want, "; ") {
		t.Errorf("alice's second session's stream carried %q, want %q", got, want)
	}
	if got := describe(b.nextExcept(listChanged...)); got != "notifications/message from bob" {
		t.Errorf("bob's first message was %q, want his own process's log message", got)
	}
}
