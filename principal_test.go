package main

import (
	"encoding/json"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
)

// serveAs serves one request of session s, as its front end would, and
// returns the answer.
func serveAs(t *testing.T, g *Gateway, s *session, id, method, params string) *wireMsg {
	t.Helper()
	r := g.handle(t.Context(), s, legacyInbound(&wireMsg{JSONRPC: "2.0", ID: json.RawMessage(id), Method: method, Params: json.RawMessage(params)}), nil)
	if r == nil {
		t.Fatalf("%s got no answer", method)
	}
	var b strings.Builder
	r.WriteTo(&b)
	var m wireMsg
	if err := json.Unmarshal([]byte(b.String()), &m); err != nil {
		t.Fatalf("%s answered %q: %v", method, b.String(), err)
	}
	if string(m.ID) != id {
		t.Fatalf("%s answered under id %s, want %s", method, m.ID, id)
	}
	return &m
}

// toolsOf returns the names of the tools session s lists.
func toolsOf(t *testing.T, g *Gateway, s *session) []string {
	t.Helper()
	m := serveAs(t, g, s, "1", "tools/list", `{}`)
	var res struct{ Tools []struct{ Name string } }
	if m.Error != nil || json.Unmarshal(m.Result, &res) != nil {
		t.Fatalf("tools/list = %+v", m)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
	}
	return names
}

// callsOf returns the number of calls server b has answered, whatever
// their outcome.
func callsOf(b *backend) int64 {
	var n int64
	for i := range b.metrics.outcomes {
		n += b.metrics.outcomes[i].Load()
	}
	return n
}

func TestAViewHidesItemsFromListsAndFromTheRoute(t *testing.T) {
	t.Parallel()
	tg := startGateway(t, `{"mcpServers":{
		"alpha": {"command":"FAKE","args":["-state","STATE","-name","alpha"],"prefix":"a"},
		"beta":  {"command":"FAKE","args":["-state","STATE","-name","beta"],"prefix":"b"}
	}}`)
	g := tg.gw
	noBeta := &view{name: "no beta", allows: func(k kind, server, name string, _ json.RawMessage) bool { return server != "beta" }}
	everyone := g.sessions.detachedSession(anonymousPrincipal)
	limited := g.sessions.detachedSession(principal{name: "test", view: noBeta})

	all := toolsOf(t, g, everyone)
	seen := toolsOf(t, g, limited)
	var want []string
	for _, name := range all {
		if !strings.HasPrefix(name, "b__") {
			want = append(want, name)
		}
	}
	if len(want) == 0 || len(want) == len(all) {
		t.Fatalf("the full list %q must hold tools of both servers", all)
	}
	if !slices.Equal(seen, want) {
		t.Errorf("the view without beta lists %q, want %q", seen, want)
	}

	var beta *backend
	for _, b := range g.backendList() {
		if b.name == "beta" {
			beta = b
		}
	}
	before := callsOf(beta)
	m := serveAs(t, g, limited, `"x"`, "tools/call", `{"name":"b__echo","arguments":{"text":"hi"}}`)
	if m.Error == nil || !strings.Contains(m.Error.Message, "b__echo") {
		t.Errorf("calling a tool outside the view = %+v, want an unknown tool's error naming it", m)
	}
	if got := callsOf(beta); got != before {
		t.Errorf("a call outside the view reached the server: it answered %d calls, %d before", got, before)
	}
	if got := toolText(t, serveAs(t, g, everyone, "7", "tools/call", `{"name":"b__echo","arguments":{"text":"hi"}}`)); got != "hi" {
		t.Errorf("the same call outside any view = %q, want \"hi\"", got)
	}
	if got := toolText(t, serveAs(t, g, limited, "8", "tools/call", `{"name":"a__echo","arguments":{"text":"hi"}}`)); got != "hi" {
		t.Errorf("a call inside the view = %q, want \"hi\"", got)
	}

	cat := g.currentCatalog()
	if cat.listsFor(noBeta) != cat.listsFor(noBeta) {
		t.Error("the catalog built a view's lists twice; want them built once and kept")
	}
	if cat.listsFor(nil) != &cat.lists {
		t.Error("a nil view's lists are not the catalog's own")
	}
}

func TestEachFrontEndSetsItsPrincipal(t *testing.T) {
	t.Parallel()
	h := &httpFrontEnd{frontEnd: frontEnd{gw: &Gateway{cfg: &Config{}}}}
	r := httptest.NewRequest("POST", "/mcp", nil)
	if who, ok := h.authenticate(r); !ok || who != anonymousPrincipal {
		t.Errorf("with no token configured, authenticate = %+v, %v; want the anonymous principal", who, ok)
	}
	h.gw.cfg.token = "0123456789abcdef0123456789abcdef"
	for _, tc := range []struct {
		name, header string
		want         principal
		ok           bool
	}{
		{"the token", "Bearer 0123456789abcdef0123456789abcdef", tokenPrincipal, true},
		{"a wrong token of the same length", "Bearer 0123456789abcdef0123456789abcdeX", principal{}, false},
		{"the token's prefix", "Bearer 0123456789abcdef", principal{}, false},
		{"no token", "", principal{}, false},
	} {
		r.Header.Set("Authorization", tc.header)
		if who, ok := h.authenticate(r); ok != tc.ok || who != tc.want {
			t.Errorf("%s: authenticate = %+v, %v; want %+v, %v", tc.name, who, ok, tc.want, tc.ok)
		}
	}
}
