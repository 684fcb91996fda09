package conformance

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// The case here checks that a trace goes through the gateway: a client's
// W3C trace context in _meta (SEP-414) reaches the server in the same
// trace, and a gateway that traces (setting "tracing") takes part in it, as
// a span between the client's and the server's.

// clientTraceparent is the trace context the case's client sends.
const (
	caseTrace       = "4bf92f3577b34da6a3ce929d0e0e4736"
	caseClientSpan  = "00f067aa0ba902b7"
	caseTraceparent = "00-" + caseTrace + "-" + caseClientSpan + "-01"
)

// spanSink is an OTLP/HTTP JSON receiver that keeps each span's parent, by
// span ID, in the case's trace.
type spanSink struct {
	mu      sync.Mutex
	parents map[string]string
}

func (k *spanSink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req struct {
		ResourceSpans []struct {
			ScopeSpans []struct {
				Spans []struct {
					TraceID      string `json:"traceId"`
					SpanID       string `json:"spanId"`
					ParentSpanID string `json:"parentSpanId"`
				}
			}
		}
	}
	body, _ := io.ReadAll(r.Body)
	if json.Unmarshal(body, &req) != nil {
		http.Error(w, "not OTLP/HTTP JSON", http.StatusBadRequest)
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, rs := range req.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				if strings.EqualFold(s.TraceID, caseTrace) {
					k.parents[strings.ToLower(s.SpanID)] = strings.ToLower(s.ParentSpanID)
				}
			}
		}
	}
	io.WriteString(w, "{}")
}

// parent returns the parent of span id, once the gateway has exported it.
func (k *spanSink) parent(id string) (string, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	p, ok := k.parents[id]
	return p, ok
}

func TestTraceContextGoesThroughTheGatewayInOneTrace(t *testing.T) {
	guarantee(t)
	sink := &spanSink{parents: map[string]string{}}
	opts := options{}
	if adapter.has("tracing") {
		srv := httptest.NewServer(sink)
		t.Cleanup(srv.Close)
		opts.traceEndpoint = srv.URL + "/v1/traces"
	}
	g := startGateway(t, servers("trc"), opts, "trc")
	s := g.newSession()
	params := map[string]any{"name": toolName(t, "trc", "trc_meta"), "arguments": map[string]any{},
		"_meta": map[string]any{"traceparent": caseTraceparent}}
	m, err := s.request(ctxFor(t, 30*time.Second), `1`, "tools/call", params)
	var text string
	if err == nil {
		text, err = m.text()
	}
	if err != nil {
		fatal(t, "tools/call of meta: %v", err)
	}
	var meta struct{ Traceparent string }
	json.Unmarshal([]byte(text), &meta)
	f := strings.Split(meta.Traceparent, "-")
	if len(f) != 4 || f[1] != caseTrace {
		fatal(t, "the server received _meta %s: the client's trace %s did not reach it (a gateway passes _meta.traceparent on, or continues its trace)", text, caseTrace)
	}
	if !adapter.has("tracing") {
		if f[2] != caseClientSpan {
			t.Logf("the server's parent span is %s, not the client's: the gateway put a span of its own between them, which it does not export here", f[2])
		}
		skip(t, "the adapter has no tracing setting: the trace reached the server, but whether the gateway's own spans join it is not checked")
	}
	// server <- the gateway's span(s) <- the client's span: follow the
	// server's parent up through what the gateway exported.
	id, hops := f[2], 0
	for ; id != caseClientSpan; hops++ {
		if hops == 10 {
			fatal(t, "more than 10 of the gateway's spans between the server and the client")
		}
		var parent string
		deadline := time.Now().Add(15 * time.Second)
		for ok := false; !ok; {
			if parent, ok = sink.parent(id); !ok && time.Now().After(deadline) {
				fatal(t, "the server's traceparent names span %s, which the gateway did not export within 15s", id)
			}
			if !ok {
				time.Sleep(20 * time.Millisecond)
			}
		}
		if parent == "" {
			fatal(t, "the gateway's span %s is the root of the trace, not the child of the client's span %s", id, caseClientSpan)
		}
		id = parent
	}
	if hops == 0 {
		fatal(t, "the server's parent span is the client's: the gateway, which traces, left itself out of the trace")
	}
}
