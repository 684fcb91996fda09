package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestParseTraceparent(t *testing.T) {
	t.Parallel()
	const trace, parent = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
	for _, tt := range []struct {
		name, v string
		ok      bool
		sampled bool
	}{
		{"a sampled context", "00-" + trace + "-" + parent + "-01", true, true},
		{"an unsampled one", "00-" + trace + "-" + parent + "-00", true, false},
		{"other flags with the sampled bit", "00-" + trace + "-" + parent + "-03", true, true},
		{"a later version with more after a dash", "cc-" + trace + "-" + parent + "-01-what-follows", true, true},
		{"version 00 with more", "00-" + trace + "-" + parent + "-01-x", false, false},
		{"a later version with more but no dash", "cc-" + trace + "-" + parent + "-01x", false, false},
		{"version ff", "ff-" + trace + "-" + parent + "-01", false, false},
		{"upper case", "00-" + strings.ToUpper(trace) + "-" + parent + "-01", false, false},
		{"an all-zero trace ID", "00-00000000000000000000000000000000-" + parent + "-01", false, false},
		{"an all-zero span ID", "00-" + trace + "-0000000000000000-01", false, false},
		{"too short", "00-" + trace + "-" + parent[:15] + "-01", false, false},
		{"not hex", "00-" + trace[:31] + "g-" + parent + "-01", false, false},
		{"wrong delimiters", "00_" + trace + "_" + parent + "_01", false, false},
		{"empty", "", false, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tc, ok := parseTraceparent(tt.v)
			if ok != tt.ok || ok && tc.sampled != tt.sampled {
				t.Errorf("parseTraceparent(%q) = %+v, %v; want ok %v, sampled %v", tt.v, tc, ok, tt.ok, tt.sampled)
			}
			if ok && string(appendTraceparent(nil, tc.trace, tc.span, tc.sampled))[3:52] != tt.v[3:52] {
				t.Errorf("parseTraceparent(%q) does not give its IDs back", tt.v)
			}
		})
	}
}

// otlpSpan is a span as an OTLP/HTTP JSON receiver decodes it.
type otlpSpan struct {
	TraceID      string `json:"traceId"`
	SpanID       string `json:"spanId"`
	ParentSpanID string `json:"parentSpanId"`
	TraceState   string `json:"traceState"`
	Name         string
	Kind         int
	Start        string `json:"startTimeUnixNano"`
	End          string `json:"endTimeUnixNano"`
	Attributes   []struct {
		Key   string
		Value struct {
			StringValue *string
			IntValue    *string
		}
	}
	Events []struct {
		Name string
		Time string `json:"timeUnixNano"`
	}
	Status struct {
		Code    int
		Message string
	}
}

// attr returns the value of attribute key, as a string, or "".
func (s otlpSpan) attr(key string) string {
	for _, a := range s.Attributes {
		if a.Key != key {
			continue
		}
		if a.Value.StringValue != nil {
			return *a.Value.StringValue
		}
		if a.Value.IntValue != nil {
			return *a.Value.IntValue
		}
	}
	return ""
}

// otlpReceiver is an OTLP/HTTP endpoint that keeps the spans posted to it.
type otlpReceiver struct {
	url string

	mu      sync.Mutex
	spans   []otlpSpan
	service string
	posts   int
}

// newOTLPReceiver starts an OTLP/HTTP JSON receiver for the test.
func newOTLPReceiver(t *testing.T) *otlpReceiver {
	rc := &otlpReceiver{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			ResourceSpans []struct {
				Resource struct {
					Attributes []struct {
						Key   string
						Value struct{ StringValue string }
					}
				}
				ScopeSpans []struct{ Spans []otlpSpan }
			}
		}
		if r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/json" || json.NewDecoder(r.Body).Decode(&req) != nil {
			t.Errorf("the receiver got %s %s (%s) that is not OTLP/HTTP JSON", r.Method, r.URL, r.Header.Get("Content-Type"))
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		rc.mu.Lock()
		defer rc.mu.Unlock()
		rc.posts++
		for _, rs := range req.ResourceSpans {
			for _, a := range rs.Resource.Attributes {
				if a.Key == "service.name" {
					rc.service = a.Value.StringValue
				}
			}
			for _, ss := range rs.ScopeSpans {
				rc.spans = append(rc.spans, ss.Spans...)
			}
		}
		io.WriteString(w, `{}`)
	}))
	t.Cleanup(srv.Close)
	rc.url = srv.URL + "/v1/traces"
	return rc
}

// span waits for the span whose ID is id, or whose name is id when no
// span has that ID, and returns it.
func (rc *otlpReceiver) span(t *testing.T, id string) otlpSpan {
	t.Helper()
	var found otlpSpan
	waitFor(t, 10*time.Second, "span "+id, func() bool {
		rc.mu.Lock()
		defer rc.mu.Unlock()
		for _, s := range rc.spans {
			if s.SpanID == id || s.Name == id {
				found = s
				return true
			}
		}
		return false
	})
	return found
}

// count returns the spans received so far.
func (rc *otlpReceiver) count() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return len(rc.spans)
}

// tracingConfig returns a config whose servers are servers (JSON members)
// and whose spans go to endpoint, with extra tracing settings.
func tracingConfig(endpoint, extra, servers string) string {
	return fmt.Sprintf(`{"tracing":{"endpoint":%q,"interval":"20ms"%s},"mcpServers":{%s}}`, endpoint, extra, servers)
}

const (
	clientTrace  = "0af7651916cd43dd8448eb211c80319c"
	clientSpan   = "b7ad6b7169203331"
	clientParent = "00-" + clientTrace + "-" + clientSpan + "-01"
)

// receivedTraceparent returns the traceparent fakeserver's meta tool says
// its call carried, parsed.
func receivedTraceparent(t *testing.T, m *wireMsg) (trace, parent, flags string) {
	t.Helper()
	var meta struct{ Traceparent string }
	if err := json.Unmarshal([]byte(text(t, m)), &meta); err != nil {
		t.Fatalf("meta = %s: %v", m.Result, err)
	}
	f := strings.Split(meta.Traceparent, "-")
	if len(f) != 4 {
		t.Fatalf("the server received traceparent %q", meta.Traceparent)
	}
	return f[1], f[2], f[3]
}

// TestATraceGoesFromClientThroughCorralToAStdioServer checks the chain
// client -> corral's request span -> corral's call span -> the server, in
// both eras and from _meta or the HTTP header.
func TestATraceGoesFromClientThroughCorralToAStdioServer(t *testing.T) {
	t.Parallel()
	rc := newOTLPReceiver(t)
	tg := startGateway(t, tracingConfig(rc.url, `,"serviceName":"corral-test"`, `"a": {"command":"FAKE","args":["-state","STATE","-name","a"]}`))

	check := func(t *testing.T, m *wireMsg, wantParent, wantState string) (request otlpSpan) {
		t.Helper()
		trace, parent, flags := receivedTraceparent(t, m)
		if trace != clientTrace || flags != "01" || parent == clientSpan {
			t.Errorf("the server received trace %s, parent %s, flags %s; want the client's trace, corral's span, sampled", trace, parent, flags)
		}
		call := rc.span(t, parent)
		request = rc.span(t, call.ParentSpanID)
		if call.Kind != spanClient || call.TraceID != clientTrace || call.attr("corral.server") != "a" || call.attr("corral.outcome") != "ok" || call.TraceState != wantState {
			t.Errorf("corral's call span = %+v", call)
		}
		if request.Kind != spanServer || request.TraceID != clientTrace || request.ParentSpanID != wantParent || request.Name != "tools/call meta" ||
			request.attr("corral.server") != "a" || request.attr("gen_ai.tool.name") != "meta" || request.attr("corral.outcome") != "ok" || request.Status.Code != 1 {
			t.Errorf("corral's request span = %+v, want the client's span as parent and the call's attributes", request)
		}
		if request.Start > call.Start || request.End < call.End {
			t.Errorf("the request span (%s-%s) does not hold its call's (%s-%s)", request.Start, request.End, call.Start, call.End)
		}
		return request
	}

	t.Run("a legacy session's _meta", func(t *testing.T) {
		p := newHTTPPeer(t, tg.url, `{}`)
		m, _ := p.call("tools/call", `{"name":"meta","_meta":{"traceparent":"`+clientParent+`","tracestate":"congo=t61rcWkgMzE"}}`)
		request := check(t, m, clientSpan, "congo=t61rcWkgMzE")
		if request.attr("mcp.session.id") == "" || request.attr("corral.client") == "" {
			t.Errorf("the request span has no session or client: %+v", request.Attributes)
		}
	})
	t.Run("a modern request's _meta, over the HTTP header", func(t *testing.T) {
		// _meta wins over the header, as the more specific of the two.
		_, m, _ := modernPost(t, tg.url, "tools/call", `{"name":"meta",`+strings.Replace(modernMeta(`{}`), `{`, `{"traceparent":"`+clientParent+`",`, 1)+`}`,
			"traceparent", "00-11111111111111111111111111111111-2222222222222222-01")
		check(t, m, clientSpan, "")
	})
	t.Run("the HTTP header alone", func(t *testing.T) {
		_, m, _ := modernPost(t, tg.url, "tools/call", `{"name":"meta",`+modernMeta(`{}`)+`}`, "traceparent", "00-"+clientTrace+"-1234567890abcdef-01")
		check(t, m, "1234567890abcdef", "")
	})
	for _, bad := range []string{"00-00000000000000000000000000000000-" + clientSpan + "-01", "00-" + clientTrace + "-0000000000000000-01", "not a traceparent", "00-" + clientTrace + "-" + clientSpan + "-01-extra"} {
		t.Run("a bad traceparent starts a new trace: "+bad, func(t *testing.T) {
			p := newHTTPPeer(t, tg.url, `{}`)
			m, _ := p.call("tools/call", `{"name":"meta","_meta":{"traceparent":"`+bad+`"}}`)
			trace, parent, _ := receivedTraceparent(t, m)
			call := rc.span(t, parent)
			request := rc.span(t, call.ParentSpanID)
			if trace == clientTrace || request.TraceID != trace || request.ParentSpanID != "" {
				t.Errorf("after %q: the server got trace %s, and corral's request span is %+v; want a new trace, with corral's span its root", bad, trace, request)
			}
		})
	}
	rc.mu.Lock()
	service := rc.service
	rc.mu.Unlock()
	if service != "corral-test" {
		t.Errorf("service.name = %q, want the config's serviceName", service)
	}
}

// TestTracingSamplesByRatioAndByParent checks that with sampleRatio 0 no
// trace corral starts is exported, yet its context reaches the server with
// the sampled flag off, and that a client's sampled trace is exported.
func TestTracingSamplesByRatioAndByParent(t *testing.T) {
	t.Parallel()
	rc := newOTLPReceiver(t)
	tg := startGateway(t, tracingConfig(rc.url, `,"sampleRatio":0`, `"a": {"command":"FAKE","args":["-state","STATE","-name","a"]}`))
	p := newHTTPPeer(t, tg.url, `{}`)
	m, _ := p.call("tools/call", `{"name":"meta"}`)
	if _, _, flags := receivedTraceparent(t, m); flags != "00" {
		t.Errorf("an unsampled trace reached the server with flags %s, want 00", flags)
	}
	m, _ = p.call("tools/call", `{"name":"meta","_meta":{"traceparent":"00-`+clientTrace+`-`+clientSpan+`-00"}}`)
	if trace, _, flags := receivedTraceparent(t, m); trace != clientTrace || flags != "00" {
		t.Errorf("a client's unsampled trace reached the server as %s/%s", trace, flags)
	}
	m, _ = p.call("tools/call", `{"name":"meta","_meta":{"traceparent":"`+clientParent+`"}}`)
	_, parent, flags := receivedTraceparent(t, m)
	if flags != "01" {
		t.Errorf("a client's sampled trace reached the server with flags %s", flags)
	}
	rc.span(t, parent)
	if n := rc.count(); n != 2 {
		t.Errorf("%d spans exported, want the 2 of the sampled trace", n)
	}
}

// TestTracingToABadEndpointNeverSlowsCalls checks, for an endpoint that
// hangs, one that answers 500 and one that is down, that calls take no
// longer than with tracing off, and that the spans lost are counted.
func TestTracingToABadEndpointNeverSlowsCalls(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(hang.Close)
	t.Cleanup(func() { close(release) }) // before hang.Close, which waits for its handlers
	fail := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no", http.StatusInternalServerError)
	}))
	t.Cleanup(fail.Close)
	down := httptest.NewServer(http.NotFoundHandler())
	downURL := down.URL
	down.Close()

	for _, tt := range []struct {
		name, endpoint, reason string
	}{
		{"an endpoint that never answers", hang.URL + "/v1/traces", "queue_full"},
		{"an endpoint that answers 500", fail.URL + "/v1/traces", "export_failed"},
		{"an endpoint that is down", downURL + "/v1/traces", "export_failed"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tg := startGateway(t, tracingConfig(tt.endpoint, `,"maxQueue":4,"maxBatch":2,"timeout":"30s"`, `"a": {"command":"FAKE","args":["-state","STATE","-name","a"]}`))
			p := newHTTPPeer(t, tg.url, `{}`)
			start := time.Now()
			const calls = 40
			for i := range calls {
				if m, _ := p.call("tools/call", fmt.Sprintf(`{"name":"echo","arguments":{"text":"%d"}}`, i)); text(t, m) != fmt.Sprint(i) {
					t.Fatalf("call %d = %s", i, m.Result)
				}
			}
			// An export that hangs holds 30 s (the timeout); 40 calls that
			// each waited for one would take far longer than this bound.
			if d := time.Since(start); d > 20*time.Second {
				t.Errorf("%d calls took %s", calls, d)
			}
			metric := `corral_trace_spans_dropped_total{reason="` + tt.reason + `"}`
			waitFor(t, 10*time.Second, metric+" above 0", func() bool {
				v := scrapeMetrics(t, tg.url)[metric]
				return v != "" && v != "0"
			})
		})
	}
}

// TestARemoteServerGetsTheTraceContextInTheHTTPHeaderToo checks that a
// remote server gets corral's call span as the traceparent header as well
// as in _meta: the remote server is another corral, tracing to the same
// receiver, behind a proxy that keeps the header.
func TestARemoteServerGetsTheTraceContextInTheHTTPHeaderToo(t *testing.T) {
	t.Parallel()
	rc := newOTLPReceiver(t)
	up := startGateway(t, tracingConfig(rc.url, "", `"a": {"command":"FAKE","args":["-state","STATE","-name","a"]}`))
	target, _ := url.Parse(up.url)
	var mu sync.Mutex
	var headers []string
	proxy := httptest.NewServer(&httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		mu.Lock()
		headers = append(headers, r.In.Header.Get("traceparent"))
		mu.Unlock()
		r.SetURL(target)
		r.Out.URL.Path = target.Path
	}})
	t.Cleanup(proxy.Close)
	down := startGateway(t, tracingConfig(rc.url, "", `"up": {"url":"`+proxy.URL+`/mcp","prefix":"up"}`))
	p := newHTTPPeer(t, down.url, `{}`)
	m, _ := p.call("tools/call", `{"name":"up__meta","_meta":{"traceparent":"`+clientParent+`"}}`)
	trace, parent, _ := receivedTraceparent(t, m)
	// The chain: up's call span <- up's request span <- down's call span.
	upCall := rc.span(t, parent)
	upRequest := rc.span(t, upCall.ParentSpanID)
	downCall := rc.span(t, upRequest.ParentSpanID)
	if trace != clientTrace || downCall.Kind != spanClient || downCall.attr("corral.server") != "up" || rc.span(t, downCall.ParentSpanID).ParentSpanID != clientSpan {
		t.Errorf("the chain through two corrals is broken: down's call span %+v", downCall)
	}
	mu.Lock()
	defer mu.Unlock()
	want := "00-" + clientTrace + "-" + downCall.SpanID + "-01"
	found := false
	for _, h := range headers {
		found = found || h == want
	}
	if !found {
		t.Errorf("the remote server's traceparent headers were %q, want one %s", headers, want)
	}
}

// TestACallThatWaitsForItsServerToRestartSaysSoInItsSpan checks the
// restart wait of a call made while its server restarts, and the queue
// wait every traced call has.
func TestACallThatWaitsForItsServerToRestartSaysSoInItsSpan(t *testing.T) {
	t.Parallel()
	rc := newOTLPReceiver(t)
	tg := startGateway(t, tracingConfig(rc.url, "", `"a": {"command":"FAKE","args":["-state","STATE","-name","a"],"restartDelay":"300ms"}`))
	p := newHTTPPeer(t, tg.url, `{}`)
	p.call("tools/call", `{"name":"crash","arguments":{}}`)
	b := tg.gw.backendList()[0]
	waitFor(t, 10*time.Second, "the server to be down", func() bool { return b.health().State != stateReady })
	m, _ := p.call("tools/call", `{"name":"meta"}`)
	_, parent, _ := receivedTraceparent(t, m)
	call := rc.span(t, parent)
	events := map[string]bool{}
	for _, e := range call.Events {
		events[e.Name] = true
	}
	if call.attr("corral.restart_wait_us") == "" || !events["corral.restart_wait"] || call.attr("corral.queue_wait_us") == "" {
		t.Errorf("the call span of a call that waited for a restart = %+v, want its restart and queue waits", call)
	}
}

func TestTracingSettingsAreCheckedAndShown(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		tracing, want string
	}{
		{`{"sampleRatio":0.5}`, `tracing.endpoint: is missing`},
		{`{"endpoint":"127.0.0.1:4318"}`, `tracing.endpoint: is "127.0.0.1:4318", not an http or https URL`},
		{`{"endpoint":"http://h/v1/traces","sampleRatio":1.5}`, `tracing.sampleRatio: is 1.5, outside 0 to 1`},
		{`{"endpoint":"http://h/v1/traces","maxQueue":-1}`, `tracing.maxQueue: must not be negative, got -1`},
		{`{"endpoint":"http://h/v1/traces","headers":{"a b":"c"}}`, `tracing.headers: has "a b", not a valid HTTP header name`},
		{`{"endpoint":"http://h/v1/traces","sampleratio":1}`, `unknown field "sampleratio"; did you mean "sampleRatio"?`},
		{`{"endpoint":"http://h/v1/traces","sampleRatio":"all"}`, `tracing: sampleRatio: want a number from 0 to 1, got string`},
	} {
		_, err := ParseConfig("config.json", []byte(`{"tracing":`+tt.tracing+`,"mcpServers":{"a":{"command":"x"}}}`), nil, nil)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("tracing %s: error %v, want %q", tt.tracing, err, tt.want)
		}
	}
	cfg, err := ParseConfig("config.json", []byte(`{"tracing":{"endpoint":"http://127.0.0.1:4318/v1/traces?key=secret","headers":{"Authorization":"Bearer x"}},"mcpServers":{"a":{"command":"x"}}}`), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var shown struct{ Tracing map[string]any }
	json.Unmarshal(cfg.resolved(), &shown)
	want := map[string]any{"endpoint": "http://127.0.0.1:4318/v1/traces?key=" + secretMask, "sampleRatio": 1.0, "serviceName": "corral",
		"headers": map[string]any{"Authorization": secretMask}, "maxQueue": 2048.0, "maxBatch": 512.0, "interval": "2s", "timeout": "10s"}
	if fmt.Sprint(shown.Tracing) != fmt.Sprint(want) {
		t.Errorf("-check shows tracing as %v, want %v", shown.Tracing, want)
	}
}

// BenchmarkToolsCallThroughCorralHTTPTraced is BenchmarkToolsCallThroughCorralHTTP
// with tracing on, every trace sampled (sampleRatio 1), exported to an
// endpoint that reads and discards what it is sent (docs/performance.md
// compares the two).
func BenchmarkToolsCallThroughCorralHTTPTraced(b *testing.B) {
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
	}))
	defer sink.Close()
	benchToolsCallHTTP(b, tracingConfig(sink.URL+"/v1/traces", `,"sampleRatio":1.0,"interval":"1s"`, `"a": {"command":"FAKE","args":["-state","STATE"]}`))
}

func TestAReloadKeepsTheTracingCorralStartedWith(t *testing.T) {
	t.Parallel()
	rc := newOTLPReceiver(t)
	servers := `"a": {"command":"FAKE","args":["-state","STATE","-name","a"]}`
	tg := startGateway(t, tracingConfig(rc.url, "", servers))
	reload := func(extra string) reloadReport {
		cfg, err := ParseConfig("next.json", []byte(strings.NewReplacer("FAKE", fakeserverBin, "STATE", tg.dir).Replace(tracingConfig(rc.url, extra, servers))), nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		return tg.gw.Reload(cfg)
	}
	same, changed := reload(""), reload(`,"sampleRatio":0.5`)
	if slices.Contains(same.NeedRestart, "tracing") || !slices.Contains(changed.NeedRestart, "tracing") || tg.gw.config().Tracing.SampleRatio != nil {
		t.Errorf("reloads: unchanged %v, changed %v; want only the change of tracing to need a restart, and the old settings kept", same.NeedRestart, changed.NeedRestart)
	}
}
