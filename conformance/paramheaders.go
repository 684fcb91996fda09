package conformance

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestParamHeadersOf20260728AreCheckedAgainstTheBody checks what MCP
// 2026-07-28 asks of a server that processes a request's body (SEP-2243):
// a tools/call of a tool whose inputSchema marks an argument with
// x-mcp-header must carry it in an Mcp-Param-{Name} header, plain or
// "=?base64?...?=", equal to the body's value; "Servers MUST reject
// requests with a 400 Bad Request HTTP status and JSON-RPC error code
// -32020 (HeaderMismatch) if any validation fails". And a tool whose
// annotation breaks the rules (here one on a number) "MUST" be excluded
// from tools/list. Server ph (fakeserver -param-headers) lists params
// (region: x-mcp-header Region; count: Count) and bad_header. A call whose
// headers match (Region Base64-encoded) is answered; a header with another
// value, a missing header and invalid Base64 get 400 with -32020, and none
// of those reach the server.
func TestParamHeadersOf20260728AreCheckedAgainstTheBody(t *testing.T) {
	guarantee(t)
	if adapter.Transport != "http" {
		skip(t, "the case is about the Streamable HTTP transport of %s", modernVersion)
	}
	if !adapter.speaks(modernVersion) {
		skip(t, "the adapter does not list %s in protocols", modernVersion)
	}
	if !adapter.has("paramHeaders") {
		skip(t, "the adapter has no paramHeaders setting (the gateway checks %s parameter headers, SEP-2243)", modernVersion)
	}
	g := startGateway(t, []serverSpec{{Name: "ph", flags: []string{"-param-headers"}}}, options{}, "ph")
	params, bad := g.toolName("ph", "ph_params"), g.toolName("ph", "ph_bad_header")

	m := modernRequest(t, g.url, 1, "tools/list", "", map[string]any{})
	var list struct{ Tools []struct{ Name string } }
	json.Unmarshal(m.Result, &list)
	var names []string
	for _, tl := range list.Tools {
		names = append(names, tl.Name)
	}
	if !contains(names, params) || contains(names, bad) {
		fail(t, "tools/list = %q; want %s, and not %s, whose x-mcp-header is on a number", names, params, bad)
	}

	call := func(id int, headers ...string) (int, *message) {
		t.Helper()
		msg := map[string]any{"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": map[string]any{
			"name": params, "arguments": map[string]any{"region": "Hello, 世界", "count": 7}, "_meta": modernMeta}}
		body, _ := json.Marshal(msg)
		c := &httpConn{url: g.url}
		resp, err := c.post(ctxFor(t, 30*time.Second), body, append([]string{"MCP-Protocol-Version", modernVersion, "Mcp-Method", "tools/call", "Mcp-Name", params}, headers...)...)
		if err != nil {
			fatal(t, "tools/call: %v", err)
		}
		answer := readAnswer(resp)
		var a message
		if err := json.Unmarshal(answer, &a); err != nil || string(a.ID) != fmt.Sprint(id) {
			fatal(t, "tools/call: HTTP %s, answered %s; want the answer to request %d", resp.Status, truncate(answer), id)
		}
		return resp.StatusCode, &a
	}
	const region = "=?base64?SGVsbG8sIOS4lueVjA==?=" // "Hello, 世界", as the specification's own example encodes it
	if status, a := call(2, "Mcp-Param-Region", region, "Mcp-Param-Count", "7"); status != http.StatusOK || a.Error != nil {
		fail(t, "a call whose Mcp-Param headers match got HTTP %d %+v, want the server's answer", status, a.Error)
	}
	for i, tc := range []struct {
		what    string
		headers []string
	}{
		{"a header with another value", []string{"Mcp-Param-Region", "us-west1", "Mcp-Param-Count", "7"}},
		{"a missing header", []string{"Mcp-Param-Region", region}},
		{"invalid Base64", []string{"Mcp-Param-Region", "=?base64?%%%?=", "Mcp-Param-Count", "7"}},
	} {
		status, a := call(3+i, tc.headers...)
		if status != http.StatusBadRequest || a.Error == nil || a.Error.Code != -32020 {
			code := 0
			if a.Error != nil {
				code = a.Error.Code
			}
			fail(t, "%s got HTTP %d, error %d; want 400 with -32020 (HeaderMismatch)", tc.what, status, code)
		}
	}
	calls := 0
	for _, p := range serverStarts(g.stateDir, "ph") {
		for _, e := range events(g.stateDir, p.PID) {
			if e.Event == "request" && strings.HasSuffix(e.Tool, "params") {
				calls++
			}
		}
	}
	if calls != 1 {
		fail(t, "the server received %d calls of params, want 1: the refused ones must not reach it", calls)
	}
}
