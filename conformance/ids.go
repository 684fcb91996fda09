package conformance

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestIDsThatAreNotStringsOrIntegersAreRefused checks that a request whose
// ID MCP does not allow (only strings and integers are) is refused with
// JSON-RPC -32600 in a JSON body the client can parse, and never reaches a
// server; then a call with a valid ID works.
func TestIDsThatAreNotStringsOrIntegersAreRefused(t *testing.T) {
	guarantee(t)
	if adapter.Transport != "http" {
		skip(t, "the case posts raw messages, which only the Streamable HTTP transport allows the suite to do")
	}
	g := startGateway(t, servers("ids"), options{}, "ids")
	s := g.newSession()
	c := s.conn.(*httpConn)
	tool := toolName(t, "ids", "ids_echo")
	for _, id := range []string{`1.5`, `1e999`, `-0.5`, `[1,"x"]`, `{"a":1,"b":2}`, `true`} {
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":%q,"arguments":{"text":"refused"}}}`, id, tool)
		resp, err := c.post(ctxFor(t, 30*time.Second), []byte(body))
		if err != nil {
			fatal(t, "posting a request with id %s: %v", id, err)
		}
		answer := readAnswer(resp)
		var m message
		switch {
		case resp.StatusCode != 400 && resp.StatusCode != 200:
			fail(t, "a request with id %s: HTTP %d (%s), want 400 or 200 with JSON-RPC error -32600", id, resp.StatusCode, truncate(answer))
		case json.Unmarshal(answer, &m) != nil:
			fail(t, "a request with id %s was answered with a body that is not JSON: %s", id, truncate(answer))
		case m.Error == nil || m.Error.Code != -32600:
			fail(t, "a request with id %s was answered %s, want JSON-RPC error -32600", id, truncate(answer))
		}
	}
	// The servers handle their requests in order: once a later call is
	// answered, a refused one that got through would be on record.
	if text, err := callText(t, s, "ids", "echo", map[string]any{"text": "ok"}); err != nil || text != "ok" {
		fatal(t, "after the refused requests echo answered %q, %v", text, err)
	}
	if n := countTool(allEvents(g.stateDir), "ids_echo"); n != 1 {
		fail(t, "the server received %d echo requests, want only the one with a valid ID", n)
	}
}

// readAnswer returns the body of resp, or, for an event stream, the data of
// its first event, and closes the body.
func readAnswer(resp *http.Response) []byte {
	defer resp.Body.Close()
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		body, _ := io.ReadAll(resp.Body)
		return body
	}
	var answer []byte
	sseEvents(resp.Body, func(_, data string) bool {
		answer = []byte(data)
		return false
	})
	return answer
}
