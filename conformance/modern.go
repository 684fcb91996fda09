package conformance

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// The 2026-07-28 era over Streamable HTTP: no initialize and no session;
// every request carries its version and its client's capabilities in
// _meta, and mirrors its method (and name) in headers.

// modernVersion is the protocol version of the era.
const modernVersion = "2026-07-28"

// modernMeta is the _meta every request of a modern client carries.
var modernMeta = map[string]any{
	"io.modelcontextprotocol/protocolVersion":    modernVersion,
	"io.modelcontextprotocol/clientCapabilities": map[string]any{},
	"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "conformance", "version": "1"},
}

// modernPost POSTs one message of a modern client with the headers the
// version asks for (MCP-Protocol-Version, Mcp-Method, and Mcp-Name when
// name is not empty) and no session. The caller closes the body.
func modernPost(ctx context.Context, url string, msg map[string]any, name string) (*http.Response, error) {
	body, _ := json.Marshal(msg)
	c := &httpConn{url: url}
	headers := []string{"MCP-Protocol-Version", modernVersion, "Mcp-Method", msg["method"].(string)}
	if name != "" {
		headers = append(headers, "Mcp-Name", name)
	}
	return c.post(ctx, body, headers...)
}

// modernRequest sends a modern request and returns its answer, failing the
// case unless the gateway answers it statelessly (no Mcp-Session-Id).
func modernRequest(t *testing.T, url string, id int, method, name string, params map[string]any) *message {
	t.Helper()
	params["_meta"] = modernMeta
	resp, err := modernPost(ctxFor(t, 30*time.Second), url, map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params}, name)
	if err != nil {
		fatal(t, "%s: %v", method, err)
	}
	if sid := resp.Header.Get("Mcp-Session-Id"); sid != "" {
		fail(t, "%s: the gateway answered a %s request with a session (Mcp-Session-Id %q); the version has none", method, modernVersion, sid)
	}
	answer := readAnswer(resp)
	var m message
	if err := json.Unmarshal(answer, &m); err != nil || string(m.ID) != fmt.Sprint(id) {
		fatal(t, "%s: HTTP %s, answered %s; want the answer to request %d", method, resp.Status, truncate(answer), id)
	}
	if m.Error != nil {
		fatal(t, "%s: the gateway answered error %d %s", method, m.Error.Code, m.Error.Message)
	}
	return &m
}

// TestStatelessClientsOf20260728AreServedAndCanCancel checks the 2026-07-28
// era over Streamable HTTP: server/discover lists the version, a tools/call
// without a session is answered, a notification gets 202 Accepted, and
// closing a call's response stream cancels the call on the server.
func TestStatelessClientsOf20260728AreServedAndCanCancel(t *testing.T) {
	guarantee(t)
	if adapter.Transport != "http" {
		skip(t, "the case is about the Streamable HTTP transport of %s", modernVersion)
	}
	if !adapter.speaks(modernVersion) {
		skip(t, "the adapter does not list %s in protocols", modernVersion)
	}
	g := startGateway(t, servers("mo"), options{}, "mo")

	var d struct {
		SupportedVersions []string `json:"supportedVersions"`
		Capabilities      map[string]json.RawMessage
	}
	m := modernRequest(t, g.url, 1, "server/discover", "", map[string]any{})
	if json.Unmarshal(m.Result, &d) != nil || !contains(d.SupportedVersions, modernVersion) || d.Capabilities["tools"] == nil {
		fail(t, "server/discover answered %s, want supportedVersions with %s and the tools capability", truncate(m.Result), modernVersion)
	}

	echo := g.toolName("mo", "mo_echo")
	m = modernRequest(t, g.url, 2, "tools/call", echo, map[string]any{"name": echo, "arguments": map[string]any{"text": "stateless"}})
	if text, err := m.text(); err != nil || text != "stateless" {
		fail(t, "a stateless tools/call of %s answered %q, %v; want the server's \"stateless\"", echo, text, err)
	}

	// A notification (the one a client of this version may send, naming a
	// request that is not in flight) is accepted with 202 and no body.
	resp, err := modernPost(ctxFor(t, 15*time.Second), g.url, map[string]any{"jsonrpc": "2.0", "method": "notifications/cancelled",
		"params": map[string]any{"requestId": 99, "reason": "conformance"}}, "")
	if err != nil {
		fatal(t, "posting a notification: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted || len(strings.TrimSpace(string(body))) != 0 {
		fail(t, "a %s notification got HTTP %s %s, want 202 Accepted with no body", modernVersion, resp.Status, truncate(body))
	}

	// Closing a call's response stream cancels it on the server.
	sleep := g.toolName("mo", "mo_sleep")
	ctx, closeStream := context.WithCancel(ctxFor(t, 60*time.Second))
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		msg := map[string]any{"jsonrpc": "2.0", "id": 3, "method": "tools/call",
			"params": map[string]any{"name": sleep, "arguments": map[string]any{"ms": 600000}, "_meta": modernMeta}}
		if resp, err := modernPost(ctx, g.url, msg, sleep); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}()
	var pid int
	var serverID json.RawMessage
	for deadline := time.Now().Add(10 * time.Second); serverID == nil; {
		for _, p := range serverStarts(g.stateDir, "mo") {
			for _, e := range events(g.stateDir, p.PID) {
				if e.Event == "request" && e.Tool == "mo_sleep" {
					pid, serverID = p.PID, e.ID
				}
			}
		}
		if time.Now().After(deadline) {
			closeStream()
			<-ended
			fatal(t, "the call of sleep did not reach the server within 10s")
		}
		time.Sleep(20 * time.Millisecond) // the server's records give no signal
	}
	closeStream()
	<-ended
	const within = 10 * time.Second
	for deadline := time.Now().Add(within); ; {
		cancelled := false
		for _, e := range events(g.stateDir, pid) {
			cancelled = cancelled || e.Event == "cancelled" && string(e.RequestID) == string(serverID)
		}
		if cancelled {
			break
		}
		if time.Now().After(deadline) {
			fatal(t, "closing the response stream of a %s call did not cancel it: the server never received notifications/cancelled for its request %s within %s", modernVersion, serverID, within)
		}
		time.Sleep(20 * time.Millisecond) // the server's records give no signal
	}
	m = modernRequest(t, g.url, 4, "tools/call", echo, map[string]any{"name": echo, "arguments": map[string]any{"text": "after"}})
	if text, err := m.text(); err != nil || text != "after" {
		fail(t, "after the cancellation the gateway answered %q, %v", text, err)
	}
}
