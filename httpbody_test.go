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
