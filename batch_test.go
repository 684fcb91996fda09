package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"slices"
	"strings"
	"testing"
	"time"
)

// connectVersion opens a session of protocol version v.
func connectVersion(t *testing.T, url, v string) *client {
	t.Helper()
	c := &client{t: t, url: url}
	resp, body := c.post(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"` + v + `","capabilities":{},"clientInfo":{"name":"test","version":"1"}}}`)
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"protocolVersion":"`+v+`"`) {
		t.Fatalf("initialize %s: %s %s", v, resp.Status, body)
	}
	c.sid = resp.Header.Get("Mcp-Session-Id")
	c.post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return c
}

// answerIDs returns the IDs of answers, sorted, and fails unless each is an
// answer.
func answerIDs(t *testing.T, answers []wireMsg) []string {
	t.Helper()
	var ids []string
	for _, a := range answers {
		if a.Method != "" || (a.Result == nil && a.Error == nil) {
			t.Errorf("%+v is not an answer", a)
		}
		ids = append(ids, string(a.ID))
	}
	slices.Sort(ids)
	return ids
}

func TestBatchesAreServedInA20250326SessionAsThatVersionSays(t *testing.T) {
	t.Parallel()
	tg := startGateway(t, `{"maxInFlightPerSession":4,"mcpServers":{"a": {"command":"FAKE","args":["-state","STATE","-name","a"]}}}`)
	c := connectVersion(t, tg.url, "2025-03-26")
	batch := `[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"one"}}},
		{"jsonrpc":"2.0","method":"notifications/roots/list_changed"},
		{"jsonrpc":"2.0","id":"1","method":"tools/call","params":{"name":"echo","arguments":{"text":"two"}}},
		{"jsonrpc":"2.0","id":1.5,"method":"ping"}]`

	// A client that accepts only JSON gets an array of the answers.
	resp, body := c.post(batch, "Accept", "application/json")
	var answers []wireMsg
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") || json.Unmarshal(body, &answers) != nil {
		t.Fatalf("batch = %s %s, want 200 with a JSON array", resp.Status, body)
	}
	if got := answerIDs(t, answers); !slices.Equal(got, []string{`"1"`, `1`, `null`}) {
		t.Errorf("batch answered IDs %v, want 1, \"1\" and null (the invalid ID)", got)
	}
	for _, a := range answers {
		switch string(a.ID) {
		case `1`, `"1"`:
			if want := map[string]string{`1`: "one", `"1"`: "two"}[string(a.ID)]; toolText(t, &a) != want {
				t.Errorf("answer %s = %s, want %s", a.ID, a.Result, want)
			}
		case `null`:
			if a.Error == nil || a.Error.Code != codeInvalidRequest {
				t.Errorf("the invalid message was answered %+v, want -32600", a)
			}
		}
	}

	// A client that accepts a stream gets the related messages and the
	// answers on it.
	resp, body = c.post(`[{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"progress","arguments":{"steps":2},"_meta":{"progressToken":"p"}}},
		{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"text":"three"}}}]`)
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("streamed batch = %s %s, want an event stream", resp.Status, body)
	}
	var streamed []wireMsg
	progress := 0
	readEvents(strings.NewReader(string(body)), func(m *wireMsg) {
		if m.Method == "notifications/progress" {
			progress++
		} else {
			streamed = append(streamed, *m)
		}
	})
	if got := answerIDs(t, streamed); !slices.Equal(got, []string{`2`, `3`}) || progress != 2 {
		t.Errorf("streamed batch answered %v with %d progress notifications, want 2 and 3 with 2", got, progress)
	}

	// Notifications and answers only: 202.
	if resp, body := c.post(`[{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":99}},{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}]`); resp.StatusCode != 202 || len(body) != 0 {
		t.Errorf("a batch of notifications = %s %q, want 202 with no body", resp.Status, body)
	}

	for _, bad := range []struct{ name, body, want string }{
		{"an empty batch", `[]`, "empty batch"},
		{"a batch over maxInFlightPerSession", `[` + strings.Repeat(`{"jsonrpc":"2.0","method":"notifications/roots/list_changed"},`, 4) + `{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}]`, "maxInFlightPerSession"},
		{"initialize in a batch", `[{"jsonrpc":"2.0","id":9,"method":"initialize","params":{}}]`, "initialize must not be part"},
	} {
		resp, body := c.post(bad.body, "Accept", "application/json")
		if !strings.Contains(string(body), `"code":-32600`) || !strings.Contains(string(body), bad.want) {
			t.Errorf("%s = %s %s, want -32600 saying %q", bad.name, resp.Status, body, bad.want)
		}
	}
	if resp, body := c.post(`[{"jsonrpc":"2.0","id":1,"method":"ping"}`); resp.StatusCode != 400 || !strings.Contains(string(body), `"code":-32700`) {
		t.Errorf("a batch that is not JSON = %s %s, want 400 with -32700", resp.Status, body)
	}
}

func TestBatchesAreRefusedInSessionsOfLaterVersions(t *testing.T) {
	t.Parallel()
	tg := startGateway(t, `{"mcpServers":{"a": {"command":"FAKE","args":["-state","STATE","-name","a"]}}}`)
	ping := `[{"jsonrpc":"2.0","id":1,"method":"ping"}]`
	for _, v := range []string{"2025-06-18", "2025-11-25"} {
		c := connectVersion(t, tg.url, v)
		resp, body := c.post(ping)
		if resp.StatusCode != 400 || !strings.Contains(string(body), `"code":-32600`) || !strings.Contains(string(body), "this session negotiated "+v) {
			t.Errorf("a batch in a %s session = %s %s, want 400 with -32600 naming the version", v, resp.Status, body)
		}
	}
	c := &client{t: t, url: tg.url}
	if resp, body := c.post(ping); resp.StatusCode != 400 || !strings.Contains(string(body), "Mcp-Session-Id") {
		t.Errorf("a batch without a session = %s %s, want 400 asking for a session", resp.Status, body)
	}
}

func TestBatchesOverStdioInA20250326Session(t *testing.T) {
	t.Parallel()
	tg := startGateway(t, `{"mcpServers":{"a": {"command":"FAKE","args":["-state","STATE","-name","a"]}}}`)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan struct{})
	go func() {
		defer close(served)
		serveStdio(ctx, tg.gw, stdioPrincipal, inR, outW, 1<<20, time.Second, testLogger(t))
		outW.Close()
	}()
	t.Cleanup(func() { cancel(); inW.Close(); io.Copy(io.Discard, outR); <-served })
	lines := bufio.NewReader(outR)
	roundTrip := func(line string) string {
		t.Helper()
		if _, err := io.WriteString(inW, line+"\n"); err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(readLine(t, lines)))
	}
	batch := `[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/roots/list_changed"},{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"b"}}}]`
	// Before initialize, and in a session of a later version, refused.
	if got := roundTrip(batch); !strings.Contains(got, `"code":-32600`) || !strings.Contains(got, "not been initialized") {
		t.Errorf("a batch before initialize = %s, want -32600", got)
	}
	if got := roundTrip(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`); !strings.Contains(got, `"protocolVersion":"2025-03-26"`) {
		t.Fatalf("initialize = %s", got)
	}
	var answers []wireMsg
	got := roundTrip(batch)
	if json.Unmarshal([]byte(got), &answers) != nil {
		t.Fatalf("batch = %s, want one line holding a JSON array", got)
	}
	if ids := answerIDs(t, answers); !slices.Equal(ids, []string{"1", "2"}) {
		t.Errorf("batch answered %v, want 1 and 2", ids)
	}
}

// FuzzSplitBatch checks splitBatch against encoding/json: whatever a client
// sends, it never panics, keeps at most max messages, and what it keeps are
// exactly the array's elements.
func FuzzSplitBatch(f *testing.F) {
	for _, seed := range []string{`[]`, `[1]`, `[{"a":"]"},[1,[2]],"x\"]"]`, ` [ 1 , 2 ] `, `[1,2,3,4,5]`, `[`, `[1,]`, `["\u005d"]`} {
		f.Add([]byte(seed))
	}
	const max = 4
	f.Fuzz(func(t *testing.T, data []byte) {
		if !isBatch(data) {
			return
		}
		got, werr := splitBatch(data, max)
		var want []json.RawMessage
		err := json.Unmarshal(data, &want)
		switch {
		case err != nil:
			if werr == nil {
				t.Fatalf("splitBatch(%q) accepted what encoding/json refuses: %v", data, err)
			}
		case len(want) == 0 || len(want) > max:
			if werr == nil || werr.Code != codeInvalidRequest {
				t.Fatalf("splitBatch(%q) = %d messages, %v; want -32600 for %d", data, len(got), werr, len(want))
			}
		case werr != nil:
			t.Fatalf("splitBatch(%q) = %v, want %d messages", data, werr, len(want))
		case len(got) != len(want):
			t.Fatalf("splitBatch(%q) = %d messages, want %d", data, len(got), len(want))
		default:
			for i := range want {
				if string(got[i]) != string(want[i]) {
					t.Fatalf("splitBatch(%q)[%d] = %s, want %s", data, i, got[i], want[i])
				}
			}
		}
	})
}
