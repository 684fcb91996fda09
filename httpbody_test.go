package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
)

// The header names corral reads on every request are spelled as net/http
// keys them, so that reading one does not make its canonical form anew.
func TestCheckLegacyVersionAllocatesNothing(t *testing.T) {
	r := httptest.NewRequest("POST", mcpPath, nil)
	r.Header.Set("MCP-Protocol-Version", "2025-06-18")
	w := httptest.NewRecorder()
	msg := &wireMsg{ID: json.RawMessage("1"), Method: "tools/call"}
	allocs := testing.AllocsPerRun(100, func() {
		if !checkLegacyVersion(w, r, msg) {
			t.Fatal("checkLegacyVersion refused 2025-06-18")
		}
	})
	if allocs != 0 {
		t.Errorf("checkLegacyVersion allocates %v times a call, want 0", allocs)
	}
	if got := r.Header.Get(versionHeader); got != "2025-06-18" {
		t.Errorf("Header.Get(versionHeader) = %q, want the header set as MCP-Protocol-Version", got)
	}
	if http.CanonicalHeaderKey(versionHeader) != versionHeader {
		t.Errorf("versionHeader %q is not canonical", versionHeader)
	}
}

// A call whose servers send nothing related to it costs the front end two
// allocations over the gateway's own (the relatedStream and its send), and
// no goroutine.
func TestCallAddsTwoAllocations(t *testing.T) {
	tg := startGateway(t, `{"mcpServers":{"a": {"command":"FAKE","args":["-state","STATE"]}}}`)
	c := connect(t, tg.url)
	tg.h.mu.Lock()
	s := tg.h.sessions[c.sid]
	tg.h.mu.Unlock()
	in := legacyInbound(&wireMsg{JSONRPC: "2.0", ID: json.RawMessage("1"), Method: "ping"})
	r := httptest.NewRequest("POST", mcpPath, nil)
	w := httptest.NewRecorder()
	send := func([]byte) {}
	handle := testing.AllocsPerRun(200, func() { tg.gw.handle(r.Context(), s.session, in, send) })
	call := testing.AllocsPerRun(200, func() {
		if a, streamed := tg.h.call(w, r, s.session, in, s.session); a == nil || streamed {
			t.Fatalf("call(ping) = %v, %v; want an answer, not streamed", a, streamed)
		}
	})
	if call-handle > 2 {
		t.Errorf("call allocates %v times a ping, the gateway's handle %v: the front end adds %v, want at most 2", call, handle, call-handle)
	}
}
