package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// goSDKPost sends body as the official Go SDK (v1.8.0) sends a message of a
// 2026-07-28 client: its streamable client sets Content-Type, Accept,
// Mcp-Protocol-Version (for a notification, from the negotiated version:
// the body carries no _meta) and Mcp-Method for requests and notifications
// alike (mcp/streamable.go Write, setMCPHeaders; streamable_headers.go
// setStandardHeaders), and never a session. ctx ends the request.
func goSDKPost(ctx context.Context, t testing.TB, url, method, body string) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, "POST", url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", modernVersion)
	req.Header.Set("Mcp-Method", method)
	if strings.Contains(body, `"name":"sleep"`) {
		req.Header.Set("Mcp-Name", "sleep")
	}
	return http.DefaultClient.Do(req)
}

// goSDKCancel is the notifications/cancelled the Go SDK sends when the
// context of call id ends (mcp/transport.go call): the request's ID, the
// context's error as the reason, no _meta.
func goSDKCancel(id string) string {
	return `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"reason":"context canceled","requestId":` + id + `}}`
}

// sleepCall is a modern tools/call of fakeserver's sleep tool with ID id,
// sleeping ms milliseconds.
func sleepCall(id string, ms int) string {
	return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"sleep","arguments":{"ms":` + fmt.Sprint(ms) + `},` + modernMeta(`{}`) + `}}`
}

// serverCalls returns the IDs the server had for the calls of tool it
// received, in order.
func serverCalls(t *testing.T, dir, tool string) (pid int, ids []string) {
	t.Helper()
	pid = fakeProcesses(t, dir)[0].PID
	for _, e := range fakeEvents(t, dir, pid) {
		if e.Event == "request" && e.Tool == tool {
			ids = append(ids, string(e.ID))
		}
	}
	return pid, ids
}

// serverCancelled reports whether the server heard notifications/cancelled
// for its request id.
func serverCancelled(t *testing.T, dir string, pid int, id string) bool {
	for _, e := range fakeEvents(t, dir, pid) {
		if e.Event == "cancelled" && string(e.RequestID) == id {
			return true
		}
	}
	return false
}

// scrapeMetrics returns the samples of /metrics, by name with labels.
func scrapeMetrics(t *testing.T, mcpURL string) map[string]string {
	t.Helper()
	resp, err := http.Get(strings.TrimSuffix(mcpURL, mcpPath) + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got := map[string]string{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if line := sc.Text(); line != "" && !strings.HasPrefix(line, "#") {
			name, value, _ := strings.Cut(line, " ")
			got[name] = value
		}
	}
	return got
}

func TestModernNotificationsAreAcceptedAndTheGoSDKsCancelEndsItsCall(t *testing.T) {
	t.Parallel()
	tg := startGateway(t, `{"mcpServers":{"a": {"command":"FAKE","args":["-state","STATE","-name","a"]}}}`)
	ctx := t.Context()
	post := func(method, body string) (int, string) {
		t.Helper()
		resp, err := goSDKPost(ctx, t, tg.url, method, body)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(data)
	}
	// What the Go SDK sends after AddRoots, and a cancel of nothing.
	for _, n := range []string{
		`{"jsonrpc":"2.0","method":"notifications/roots/list_changed","params":{}}`,
		goSDKCancel("99"),
	} {
		if status, body := post(strings.Split(strings.Split(n, `"method":"`)[1], `"`)[0], n); status != 202 || body != "" {
			t.Errorf("POST %s = %d %q, want 202 Accepted with no body", n, status, body)
		}
	}

	// A call in flight. When its context ends the Go SDK sends
	// notifications/cancelled and drops the call's POST: the dropped stream
	// is what cancels it.
	callCtx, dropCall := context.WithCancel(ctx)
	answered := make(chan string, 1)
	go func() {
		resp, err := goSDKPost(callCtx, t, tg.url, "tools/call", sleepCall("1", 60000))
		if err != nil {
			answered <- err.Error()
			return
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		answered <- fmt.Sprintf("%d %s", resp.StatusCode, data)
	}()
	var pid int
	var ids []string
	waitFor(t, 10*time.Second, "the server to get the call", func() bool { pid, ids = serverCalls(t, tg.dir, "sleep"); return len(ids) == 1 })
	if status, body := post("notifications/cancelled", goSDKCancel("1")); status != 202 {
		t.Fatalf("notifications/cancelled = %d %s, want 202", status, body)
	}
	dropCall()
	waitFor(t, 10*time.Second, "the server to hear of the cancellation", func() bool { return serverCancelled(t, tg.dir, pid, ids[0]) })
	select {
	case got := <-answered:
		if strings.Contains(got, `"result"`) {
			t.Errorf("the cancelled call was answered %s, want no answer", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the cancelled call's POST did not end")
	}
}

func TestModernCancelNotificationNeverEndsACallWhoseStreamIsOpen(t *testing.T) {
	t.Parallel()
	tg := startGateway(t, `{"mcpServers":{"a": {"command":"FAKE","args":["-state","STATE","-name","a"]}}}`)
	// One client's call 7, whose stream stays open; another client, with no
	// session to tell them apart, POSTs a cancel naming 7. On HTTP only
	// closing a request's stream cancels it, so the call is answered.
	answered := make(chan string, 1)
	go func() {
		resp, err := goSDKPost(t.Context(), t, tg.url, "tools/call", sleepCall("7", 1500))
		if err != nil {
			answered <- err.Error()
			return
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		answered <- string(data)
	}()
	var pid int
	var ids []string
	waitFor(t, 10*time.Second, "the server to get the call", func() bool { pid, ids = serverCalls(t, tg.dir, "sleep"); return len(ids) == 1 })
	resp, err := goSDKPost(t.Context(), t, tg.url, "notifications/cancelled", goSDKCancel("7"))
	if err != nil || resp.StatusCode != 202 {
		t.Fatalf("notifications/cancelled = %v, %v; want 202", resp, err)
	}
	resp.Body.Close()
	select {
	case got := <-answered:
		if !strings.Contains(got, `"result"`) {
			t.Errorf("the call whose stream stayed open was answered %q, want its result", got)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the call was never answered")
	}
	if serverCancelled(t, tg.dir, pid, ids[0]) {
		t.Errorf("the server heard its request %s cancelled by another client's notification", ids[0])
	}
}

func TestCancelledModernCallsAreCountedInMetrics(t *testing.T) {
	t.Parallel()
	tg := startGateway(t, `{"mcpServers":{"a": {"command":"FAKE","args":["-state","STATE","-name","a"]}}}`)
	// Two calls, each cancelled by closing its stream, one after the Go
	// SDK's notifications/cancelled.
	ctx, closeStreams := context.WithCancel(t.Context())
	ended := make(chan struct{}, 2)
	for _, id := range []string{"1", "2"} {
		go func() {
			defer func() { ended <- struct{}{} }()
			if resp, err := goSDKPost(ctx, t, tg.url, "tools/call", sleepCall(id, 60000)); err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
	}
	var pid int
	var ids []string
	waitFor(t, 10*time.Second, "the server to get both calls", func() bool { pid, ids = serverCalls(t, tg.dir, "sleep"); return len(ids) == 2 })
	resp, err := goSDKPost(t.Context(), t, tg.url, "notifications/cancelled", goSDKCancel("2"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	closeStreams()
	<-ended
	<-ended
	waitFor(t, 10*time.Second, "both calls to be cancelled on the server", func() bool {
		return serverCancelled(t, tg.dir, pid, ids[0]) && serverCancelled(t, tg.dir, pid, ids[1])
	})
	// The handlers count the call as they return, which the client does not
	// wait for.
	waitFor(t, 10*time.Second, "/metrics to count both calls", func() bool {
		got := scrapeMetrics(t, tg.url)
		return got[`corral_calls_total{server="a"}`] == "2" && got[`corral_call_cancellations_total{server="a"}`] == "2"
	})
}

func TestModernGetDeleteAndBadNotificationsAreRefusedAsTheSpecSays(t *testing.T) {
	t.Parallel()
	tg := startGateway(t, `{"mcpServers":{"a": {"command":"FAKE","args":["-state","STATE","-name","a"]}}}`)
	for _, method := range []string{"GET", "DELETE"} {
		req, _ := http.NewRequest(method, tg.url, nil)
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("MCP-Protocol-Version", modernVersion)
		req.Header.Set("Mcp-Session-Id", "ignored")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var m wireMsg
		if resp.StatusCode != 405 || resp.Header.Get("Allow") != "POST" || json.Unmarshal(data, &m) != nil || m.Error == nil || !strings.Contains(m.Error.Message, "POST each request") {
			t.Errorf("%s with MCP-Protocol-Version %s = %s, Allow %q, %s; want 405, Allow: POST and a JSON-RPC error that says what to do",
				method, modernVersion, resp.Status, resp.Header.Get("Allow"), data)
		}
	}
	for _, c := range []struct {
		name, method, body string
		code               int
	}{
		{"a response", "", `{"jsonrpc":"2.0","id":1,"result":{}}`, codeInvalidRequest},
		{"an Mcp-Method that disagrees", "notifications/progress", goSDKCancel("1"), codeHeaderMismatch},
		{"an unsupported version in _meta", "notifications/cancelled", `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1,"_meta":{"io.modelcontextprotocol/protocolVersion":"2099-01-01"}}}`, codeUnsupportedVersion},
	} {
		resp, err := goSDKPost(t.Context(), t, tg.url, c.method, c.body)
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var m wireMsg
		if resp.StatusCode != 400 || json.Unmarshal(data, &m) != nil || m.Error == nil || m.Error.Code != c.code {
			t.Errorf("%s = %s %s, want 400 with code %d", c.name, resp.Status, data, c.code)
		}
	}
}
