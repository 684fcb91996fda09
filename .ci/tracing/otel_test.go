// Package tracing checks corral's spans with a real OpenTelemetry consumer:
// the OpenTelemetry Collector's own OTLP data model (go.opentelemetry.io/
// collector/pdata), whose JSON unmarshaler is what the Collector's OTLP/HTTP
// receiver decodes an application/json export with. The receiver here
// decodes what corral posts with it, and the test asserts the chain client
// -> corral's request span -> corral's call span -> the stdio server (the
// traceparent fakeserver received). It is a module of its own, so that the
// Collector's modules never enter corral's go.mod; .ci/tracing/run runs it:
//
//	cd .ci/tracing && CORRAL_BIN=/path/to/corral FAKESERVER_BIN=/path/to/fakeserver go test ./...
//
// Either binary that is unset is built from the repository.
package tracing

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// binary returns the path of the binary env names, or builds pkg (a package
// of the repository) into dir.
func binary(t *testing.T, env, pkg, dir string) string {
	t.Helper()
	if p := os.Getenv(env); p != "" {
		abs, _ := filepath.Abs(p)
		return abs
	}
	out := filepath.Join(dir, strings.TrimPrefix(filepath.Base(pkg), "."))
	if pkg == "." {
		out = filepath.Join(dir, "corral")
	}
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Dir = "../.."
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, b)
	}
	return out
}

// receiver is an OTLP/HTTP endpoint that decodes each export as the
// Collector does and keeps its spans, with their resource's service.name.
type receiver struct {
	mu       sync.Mutex
	spans    []ptrace.Span
	services []string
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	traces, err := (&ptrace.JSONUnmarshaler{}).UnmarshalTraces(body)
	if r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/json" || err != nil {
		http.Error(w, fmt.Sprintf("not an OTLP/HTTP JSON export: %v", err), http.StatusBadRequest)
		return
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for i := range traces.ResourceSpans().Len() {
		rs := traces.ResourceSpans().At(i)
		service, _ := rs.Resource().Attributes().Get("service.name")
		for j := range rs.ScopeSpans().Len() {
			spans := rs.ScopeSpans().At(j).Spans()
			for k := range spans.Len() {
				rc.spans = append(rc.spans, spans.At(k))
				rc.services = append(rc.services, service.Str())
			}
		}
	}
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, `{}`)
}

// span waits for the span whose ID is id and returns it, with its
// service.name.
func (rc *receiver) span(t *testing.T, id string) (ptrace.Span, string) {
	t.Helper()
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		rc.mu.Lock()
		for i, s := range rc.spans {
			if s.SpanID().String() == id {
				rc.mu.Unlock()
				return s, rc.services[i]
			}
		}
		rc.mu.Unlock()
	}
	t.Fatalf("no span %s reached the receiver", id)
	return ptrace.Span{}, ""
}

// startCorral runs corral with one fakeserver and tracing to endpoint, and
// returns its /mcp URL once it listens. It is stopped, and waited for, when
// the test ends.
func startCorral(t *testing.T, endpoint string) string {
	t.Helper()
	dir := t.TempDir()
	corral, fake := binary(t, "CORRAL_BIN", ".", dir), binary(t, "FAKESERVER_BIN", "./fakeserver", dir)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cfg, _ := json.Marshal(map[string]any{"listen": addr,
		"tracing":    map[string]any{"endpoint": endpoint, "serviceName": "corral-ci", "interval": "50ms"},
		"mcpServers": map[string]any{"a": map[string]any{"command": fake, "args": []string{"-name", "a"}}}})
	path := filepath.Join(dir, "corral.json")
	os.WriteFile(path, cfg, 0o600)
	cmd := exec.Command(corral, "-config", path)
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	listening := make(chan struct{})
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			log.WriteString(sc.Text() + "\n")
			if strings.Contains(sc.Text(), "serving MCP over Streamable HTTP") {
				close(listening)
			}
		}
	}()
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		<-copied
		if t.Failed() {
			t.Logf("corral's log:\n%s", log.String())
		}
	})
	select {
	case <-listening:
	case <-time.After(30 * time.Second):
		t.Fatalf("corral did not listen within 30s:\n%s", log.String())
	}
	url := "http://" + addr + "/mcp"
	// The server is ready once a call reaches it.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if _, err := call(url, "", ""); err == nil {
			return url
		} else if time.Now().After(deadline) {
			t.Fatalf("the server did not answer within 30s: %v", err)
		}
	}
}

// call sends a 2026-07-28 tools/call of fakeserver's meta tool, with
// traceparent in _meta (if meta) and as the HTTP header (if header), and
// returns the traceparent the server received.
func call(url, meta, header string) (string, error) {
	m := map[string]any{"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": map[string]any{}}
	if meta != "" {
		m["traceparent"] = meta
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call",
		"params": map[string]any{"name": "meta", "arguments": map[string]any{}, "_meta": m}})
	req, _ := http.NewRequest("POST", url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", "meta")
	if header != "" {
		req.Header.Set("traceparent", header)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var answer struct {
		Result struct{ Content []struct{ Text string } }
		Error  *struct{ Message string }
	}
	if err := json.NewDecoder(resp.Body).Decode(&answer); err != nil {
		return "", fmt.Errorf("%s: %v", resp.Status, err)
	}
	if answer.Error != nil || len(answer.Result.Content) != 1 {
		return "", fmt.Errorf("%s: %+v", resp.Status, answer)
	}
	var got struct{ Traceparent string }
	json.Unmarshal([]byte(answer.Result.Content[0].Text), &got)
	return got.Traceparent, nil
}

func attr(s ptrace.Span, key string) string {
	v, ok := s.Attributes().Get(key)
	if !ok {
		return ""
	}
	return v.AsString()
}

func TestTheCollectorSeesTheChainClientCorralServer(t *testing.T) {
	rc := &receiver{}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	url := startCorral(t, srv.URL+"/v1/traces")

	const clientTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	for _, tt := range []struct {
		name, meta, header, clientSpan string
	}{
		{"the trace context in _meta", "00-" + clientTrace + "-00f067aa0ba902b7-01", "", "00f067aa0ba902b7"},
		{"the HTTP traceparent header", "", "00-" + clientTrace + "-1111222233334444-01", "1111222233334444"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := call(url, tt.meta, tt.header)
			if err != nil {
				t.Fatal(err)
			}
			f := strings.Split(got, "-")
			if len(f) != 4 || f[1] != clientTrace || f[3] != "01" {
				t.Fatalf("the stdio server received traceparent %q, want the client's trace, sampled", got)
			}
			// server <- corral's call span <- corral's request span <- client
			callSpan, service := rc.span(t, f[2])
			request, _ := rc.span(t, callSpan.ParentSpanID().String())
			checks := []struct {
				what string
				ok   bool
			}{
				{"the call span is a CLIENT span of the client's trace", callSpan.Kind() == ptrace.SpanKindClient && callSpan.TraceID().String() == clientTrace},
				{"the request span is a SERVER span of the client's trace", request.Kind() == ptrace.SpanKindServer && request.TraceID().String() == clientTrace},
				{"the request span's parent is the client's span", request.ParentSpanID().String() == tt.clientSpan},
				{"the request span is named after the call", request.Name() == "tools/call meta"},
				{"the spans say the server, the tool and the outcome", attr(request, "corral.server") == "a" && attr(request, "gen_ai.tool.name") == "meta" && attr(request, "corral.outcome") == "ok" && attr(callSpan, "corral.server") == "a"},
				{"the spans end well", request.Status().Code() == ptrace.StatusCodeOk && callSpan.Status().Code() == ptrace.StatusCodeOk},
				{"the request span holds the call span in time", request.StartTimestamp() <= callSpan.StartTimestamp() && callSpan.EndTimestamp() <= request.EndTimestamp() && callSpan.StartTimestamp() < callSpan.EndTimestamp() && callSpan.StartTimestamp() > pcommon.Timestamp(0)},
				{"the resource is the configured service", service == "corral-ci"},
			}
			for _, c := range checks {
				if !c.ok {
					t.Errorf("%s: no (request span %s %q parent %s, call span %s parent %s)", c.what, request.SpanID(), request.Name(), request.ParentSpanID(), callSpan.SpanID(), callSpan.ParentSpanID())
				}
			}
		})
	}
}
