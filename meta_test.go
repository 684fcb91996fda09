package main

import (
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestLegacyMetaKeepsWhatTheServersVersionDefines(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, params string
		keys         []string // the _meta keys left, sorted; nil: params unchanged
	}{
		{"no _meta", `{"name":"echo"}`, nil},
		{"only what 2025-11-25 knows", `{"_meta":{"progressToken":1,"traceparent":"x","io.modelcontextprotocol/related-task":{"taskId":"t"}}}`, nil},
		{"a 2026-07-28 request", `{"name":"echo","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"c"},"io.modelcontextprotocol/logLevel":"info","progressToken":"p","traceparent":"tp","tracestate":"ts","baggage":"b","com.example/own":1}}`,
			[]string{"baggage", "com.example/own", "progressToken", "traceparent", "tracestate"}},
		{"other reserved prefixes", `{"_meta":{"dev.mcp/x":1,"org.modelcontextprotocol.api/y":2,"com.example.mcp/z":3,"mcp/w":4}}`, []string{"com.example.mcp/z", "mcp/w"}},
		{"a reserved name written with escapes", `{"_meta":{"io.modelcontextprotocol\u002fprotocolVersion":"2026-07-28","a":1}}`, []string{"a"}},
		{"_meta that is not an object", `{"_meta":"io.modelcontextprotocol/x"}`, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := legacyMeta(json.RawMessage(tt.params))
			if tt.keys == nil {
				if string(got) != tt.params {
					t.Errorf("legacyMeta(%s) = %s, want it unchanged", tt.params, got)
				}
				return
			}
			var p struct {
				Meta map[string]json.RawMessage `json:"_meta"`
			}
			if err := json.Unmarshal(got, &p); err != nil {
				t.Fatal(err)
			}
			if keys := slices.Sorted(maps.Keys(p.Meta)); !slices.Equal(keys, tt.keys) {
				t.Errorf("legacyMeta(%s) = %s, want the keys %v", tt.params, got, tt.keys)
			}
		})
	}
}

// TestModernRequestsMetaFitsTheServersVersion sends a 2026-07-28 request
// and a legacy one with _meta through corral to a legacy and a modern
// server, and reads what each received (fakeserver's meta tool).
func TestModernRequestsMetaFitsTheServersVersion(t *testing.T) {
	t.Parallel()
	tg := startGateway(t, `{"mcpServers":{
		"new": {"command":"FAKE","args":["-state","STATE","-name","new","-era","modern"]},
		"old": {"command":"FAKE","args":["-state","STATE","-name","old"],"prefix":"old"}
	}}`)
	// Under load the era probe may time out, and the modern server refuse
	// the initialize that follows; it is probed again at its restart.
	waitFor(t, 30*time.Second, "both servers ready", func() bool {
		for _, b := range tg.gw.backendList() {
			if b.health().State != stateReady {
				return false
			}
		}
		return true
	})
	clientMeta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},` +
		`"io.modelcontextprotocol/clientInfo":{"name":"modern-test","version":"1"},"io.modelcontextprotocol/logLevel":"info",` +
		`"io.modelcontextprotocol/tasks-extension-key":1,"progressToken":"pt",` +
		`"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01","tracestate":"congo=t61rcWkgMzE","com.example/own":"kept"}`
	received := func(t *testing.T, m *wireMsg) map[string]json.RawMessage {
		t.Helper()
		var meta map[string]json.RawMessage
		if err := json.Unmarshal([]byte(text(t, m)), &meta); err != nil {
			t.Fatalf("meta = %s: %v", m.Result, err)
		}
		return meta
	}

	_, m, _ := modernPost(t, tg.url, "tools/call", `{"name":"old__meta",`+clientMeta+`}`)
	old := received(t, m)
	for _, key := range []string{metaVersion, metaCaps, metaClientInfo, metaLogLevel, "io.modelcontextprotocol/tasks-extension-key"} {
		if old[key] != nil {
			t.Errorf("the 2025-11-25 server received %s in _meta: %s", key, m.Result)
		}
	}
	if string(old["traceparent"]) != `"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"` || string(old["tracestate"]) != `"congo=t61rcWkgMzE"` ||
		string(old["com.example/own"]) != `"kept"` || old["progressToken"] == nil {
		t.Errorf("the 2025-11-25 server received %s, want the trace context, the vendor key and a progress token kept", text(t, m))
	}

	_, m, _ = modernPost(t, tg.url, "tools/call", `{"name":"meta",`+clientMeta+`}`)
	if got := received(t, m); string(got[metaVersion]) != `"2026-07-28"` || got[metaCaps] == nil || string(got["com.example/own"]) != `"kept"` || got["traceparent"] == nil {
		t.Errorf("the 2026-07-28 server received %s, want the request's _meta", text(t, m))
	}

	// A legacy client's keys of a reserved prefix its version does not
	// define do not reach a legacy server either; its own keys do.
	legacy := newHTTPPeer(t, tg.url, `{}`)
	m, _ = legacy.call("tools/call", `{"name":"old__meta","_meta":{"dev.mcp/x":1,"com.example/y":2}}`)
	if got := text(t, m); strings.Contains(got, "dev.mcp") || !strings.Contains(got, `"com.example/y":2`) {
		t.Errorf("a legacy client's _meta reached the legacy server as %s", got)
	}
}

func TestSetMetaRawEditsInPlaceAsSetMetaWould(t *testing.T) {
	t.Parallel()
	const v = `"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"`
	for _, params := range []string{
		``, `{}`, ` { } `, `{"name":"echo"}`, `{"name":"echo","_meta":{}}`, `{"_meta":{"progressToken":1},"name":"x"}`,
		`{"_meta":{"traceparent":"old","tracestate":"s"}}`, `{"_meta":null,"name":"x"}`, `{"\u005fmeta":{"a":1}}`, `[1]`,
		`{"name":"echo" , "_meta" : { "traceparent" : "old" } }`,
	} {
		got := setMetaRaw(json.RawMessage(params), metaTraceparent, json.RawMessage(v))
		want := setMeta(json.RawMessage(params), metaTraceparent, json.RawMessage(v))
		var g, w any
		if json.Unmarshal(got, &g) != nil || json.Unmarshal(want, &w) != nil || !reflect.DeepEqual(g, w) {
			t.Errorf("setMetaRaw(%s) = %s, want the same as setMeta's %s", params, got, want)
		}
	}
}
