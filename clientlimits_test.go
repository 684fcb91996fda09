package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// limitedConfig is a config of two clients: alice, whose profile sets
// limits, and bob, who has none and sees every page.
func limitedConfig(t *testing.T, limits string) string {
	return `{
		"clients": {
			"alice": {"tokenFile": ` + tokenFile(t, aliceToken) + `, "profile": "p"},
			"bob":   {"tokenFile": ` + tokenFile(t, bobToken) + `}
		},
		"profiles": {"p": {"servers": {"a": {"tools": {"deny": ["crash"]}}}, ` + limits + `}},
		"mcpServers": {"a": {"command":"FAKE","args":["-state","STATE"]}}
	}`
}

// clientMetricsOf returns /metrics of tg, read with bob's token, parsed.
func clientMetricsOf(t *testing.T, tg *testGateway) exposition {
	t.Helper()
	req, _ := http.NewRequest("GET", strings.TrimSuffix(tg.url, mcpPath)+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+bobToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET /metrics: %s %s", resp.Status, body)
	}
	e, err := parseExposition(string(body))
	if err != nil {
		t.Fatalf("/metrics: %v", err)
	}
	return e
}

func TestAClientPastItsInFlightLimitGetsAnErrorNamingItWhileAnotherClientIsUnaffected(t *testing.T) {
	t.Parallel()
	tg := startGateway(t, limitedConfig(t, `"maxInFlight": 1`))
	alice := connectWith(t, tg.url, "Bearer "+aliceToken)
	bob := connectWith(t, tg.url, "Bearer "+bobToken)
	long := make(chan *wireMsg, 1)
	go func() { long <- alice.callTool(`"long"`, "sleep", `{"ms":600000}`) }()
	waitFor(t, 10*time.Second, "alice's call in flight", func() bool {
		for _, c := range tg.gw.status.clients() {
			if c.Name == "alice" && c.InFlight == 1 {
				return true
			}
		}
		return false
	})
	got := alice.callTool("2", "echo", `{"text":"x"}`)
	if got.Error == nil || got.Error.Code != codeUnavailable || !strings.Contains(got.Error.Message, `client "alice"`) ||
		!strings.Contains(got.Error.Message, "profiles.p.maxInFlight") || !bytes.Contains(got.Error.Data, []byte(`"limit":"maxInFlight"`)) {
		t.Errorf("alice's second call = %+v, want a -32000 naming alice and profiles.p.maxInFlight", got.Error)
	}
	for i := range 3 { // bob has no limit, and alice's call takes none of his
		if got := bob.callTool(`"b`+string(rune('0'+i))+`"`, "echo", `{"text":"x"}`); got.Error != nil {
			t.Errorf("bob's call while alice is at her limit = %+v, want a result", got.Error)
		}
	}
	alice.post(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"long"}}`)
	<-long
	if got := alice.callTool("3", "echo", `{"text":"x"}`); got.Error != nil {
		t.Errorf("alice's call once hers has ended = %+v, want a result", got.Error)
	}

	e := clientMetricsOf(t, tg)
	for series, want := range map[string]float64{
		`corral_client_calls_total{client="bob",outcome="ok"}`:                 3,
		`corral_client_calls_total{client="alice",outcome="ok"}`:               1,
		`corral_client_refusals_total{client="alice",reason="maxInFlight"}`:    1,
		`corral_client_refusals_total{client="bob",reason="maxInFlight"}`:      0,
		`corral_client_sessions{client="alice"}`:                               1,
		`corral_client_sessions{client="bob"}`:                                 1,
		`corral_client_refusals_total{client="alice",reason="callsPerSecond"}`: 0,
		`corral_client_calls_total{client="alice",outcome="refused"}`:          0,
		`corral_client_refusals_total{client="alice",reason="view"}`:           0,
		`corral_client_refusals_total{client="alice",reason="maxSessions"}`:    0,
	} {
		if got, ok := e.samples[series]; !ok || got != want {
			t.Errorf("/metrics %s = %v (present %v), want %v", series, got, ok, want)
		}
	}
	// A call outside alice's view is counted as refused for the view.
	if got := alice.callTool("4", "crash", `{"code":7}`); got.Error == nil {
		t.Fatalf("a tool alice does not see answered %+v", got)
	}
	if got := clientMetricsOf(t, tg).samples[`corral_client_refusals_total{client="alice",reason="view"}`]; got != 1 {
		t.Errorf("alice's refusals for the view = %v, want 1", got)
	}
}

func TestAClientPastItsRateIsToldWhenToRetry(t *testing.T) {
	t.Parallel()
	now := time.Unix(1000, 0)
	cl := newClientLimits()
	cl.now = func() time.Time { return now }
	lim := callLimits{client: "alice", profile: "p", callsPerSecond: 2}
	admit := func() *wireError {
		werr := cl.admit(lim, "tools/call")
		if werr == nil {
			cl.done("alice")
		}
		return werr
	}
	for i := range 2 { // a second's worth at once
		if werr := admit(); werr != nil {
			t.Fatalf("call %d of a burst of 2 = %v, want admitted", i, werr)
		}
	}
	werr := admit()
	var data struct {
		Limit        string `json:"limit"`
		Client       string `json:"client"`
		RetryAfterMs int64  `json:"retryAfterMs"`
	}
	if werr == nil || json.Unmarshal(werr.Data, &data) != nil {
		t.Fatalf("third call at once = %+v, want refused with data", werr)
	}
	if werr.Code != codeUnavailable || data.Limit != "callsPerSecond" || data.Client != "alice" || data.RetryAfterMs != 500 ||
		!strings.Contains(werr.Message, "profiles.p.callsPerSecond") || !strings.Contains(werr.Message, "try again in 500 ms") {
		t.Errorf("third call at once = %d %q %+v, want -32000 naming profiles.p.callsPerSecond, retry after 500 ms", werr.Code, werr.Message, data)
	}
	now = now.Add(300 * time.Millisecond)
	if werr := admit(); werr == nil || !strings.Contains(werr.Message, "try again in 200 ms") {
		t.Errorf("a call 300 ms later = %v, want refused, retry in 200 ms", werr)
	}
	now = now.Add(200 * time.Millisecond)
	if werr := admit(); werr != nil {
		t.Errorf("a call once the retry-after has passed = %v, want admitted", werr)
	}
	// Another client has its own bucket.
	if werr := cl.admit(callLimits{client: "bob", profile: "p", callsPerSecond: 2}, "tools/call"); werr != nil {
		t.Errorf("bob's first call = %v, want admitted", werr)
	}
	st := cl.status(nil, nil)
	if len(st) != 2 || st[0].Name != "alice" || st[0].Refused != 2 || len(st[0].Recent) != 2 || st[0].Recent[0].Reason != refusedRate {
		t.Errorf("status = %+v, want alice with 2 refusals for callsPerSecond", st)
	}
}

func TestAClientsSessionsAreBoundedByItsProfileAndTheStatusPageShowsTheClients(t *testing.T) {
	t.Parallel()
	tg := startGateway(t, limitedConfig(t, `"maxSessions": 1`))
	connectWith(t, tg.url, "Bearer "+aliceToken)
	c := &client{t: t, url: tg.url, auth: "Bearer " + aliceToken}
	resp, body := c.post(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"test","version":"1"}}}`)
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), `client \"alice\" has 1 open, the limit (profiles.p.maxSessions)`) {
		t.Errorf("alice's second session = %s %s, want 503 naming profiles.p.maxSessions", resp.Status, body)
	}
	connectWith(t, tg.url, "Bearer "+bobToken) // bob has no bound of his own
	connectWith(t, tg.url, "Bearer "+bobToken)

	var page bytes.Buffer
	if err := writeStatusPage(&page, tg.gw.status, time.Now(), ""); err != nil {
		t.Fatal(err)
	}
	html := page.String()
	for _, want := range []string{
		`<tr data-client="alice">`, `<tr data-client="bob">`,
		"<td class=\"sessions\">1</td>", "<td class=\"sessions\">2</td>", "maxSessions session",
	} {
		if !strings.Contains(html, want) {
			t.Errorf("status page lacks %q:\n%s", want, html)
		}
	}
	if got := clientMetricsOf(t, tg).samples[`corral_client_refusals_total{client="alice",reason="maxSessions"}`]; got != 1 {
		t.Errorf("alice's refusals for maxSessions = %v, want 1", got)
	}
}

func TestProfileLimitsThatAreNegativeAreConfigErrorsNamingTheField(t *testing.T) {
	t.Parallel()
	for field, value := range map[string]string{"maxInFlight": "-1", "callsPerSecond": "-0.5", "maxSessions": "-2"} {
		cfg := `{"profiles": {"p": {"servers": {}, "` + field + `": ` + value + `}}, "mcpServers": {"a": {"command": "x"}}}`
		_, err := ParseConfig("corral.json", []byte(cfg), func(string) (string, bool) { return "", false }, func(string) {})
		if err == nil || !strings.Contains(err.Error(), "profiles.p."+field) {
			t.Errorf("%s: %s = %v, want an error naming profiles.p.%s", field, value, err, field)
		}
	}
}

// BenchmarkClientAccountingPerCall is what clientlimits.go adds to each
// call of a limited client: admit, done, and the outcome counted.
func BenchmarkClientAccountingPerCall(b *testing.B) {
	cl := newClientLimits()
	lim := callLimits{client: "alice", profile: "p", maxInFlight: 1000, callsPerSecond: 1e9}
	b.ReportAllocs()
	for b.Loop() {
		if werr := cl.admit(lim, "tools/call"); werr != nil {
			b.Fatal(werr)
		}
		cl.done("alice")
		cl.called("alice", auditOK, "a")
	}
}

func TestAReloadThatChangesAClientsLimitAppliesItToTheNextCallsAndKeepsTheCounts(t *testing.T) {
	t.Parallel()
	tg := startGateway(t, limitedConfig(t, `"maxInFlight": 1`))
	reload := func(limits string) {
		t.Helper()
		next := strings.NewReplacer("FAKE", fakeserverBin, "STATE", tg.dir).Replace(limitedConfig(t, limits))
		cfg, err := ParseConfig("next.json", []byte(next), nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		tg.gw.Reload(cfg)
	}
	alice := connectWith(t, tg.url, "Bearer "+aliceToken)
	long := make(chan *wireMsg, 1)
	go func() { long <- alice.callTool(`"long"`, "sleep", `{"ms":600000}`) }()
	waitFor(t, 10*time.Second, "alice's call in flight", func() bool {
		for _, c := range tg.gw.status.clients() {
			if c.Name == "alice" && c.InFlight == 1 {
				return true
			}
		}
		return false
	})
	if got := alice.callTool("2", "echo", `{"text":"x"}`); got.Error == nil {
		t.Fatalf("alice's second call at maxInFlight 1 = %s, want refused", got.Result)
	}
	reload(`"maxInFlight": 2`)
	if got := alice.callTool("3", "echo", `{"text":"x"}`); got.Error != nil {
		t.Errorf("alice's second call once a reload raised maxInFlight to 2 = %+v, want a result", got.Error)
	}
	reload(`"maxInFlight": 1`) // her call in flight still counts
	if got := alice.callTool("4", "echo", `{"text":"x"}`); got.Error == nil || !strings.Contains(got.Error.Message, "has 1 calls in flight") {
		t.Errorf("alice's second call once a reload lowered maxInFlight to 1 again = %+v, want refused, 1 in flight", got.Error)
	}
	alice.post(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"long"}}`)
	<-long
}
