package conformance

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"
)

// Cases about search mode (setting "searchMode"): a profile whose clients
// list two tools, find_tools(query, limit) and call_tool(name, arguments),
// instead of every tool. What the profile does not show must stay unknown
// through both: find_tools never names it, and call_tool never reaches it.

// callSearchTool calls one of search mode's own tools, name, with the fixed
// ID 7 so that answers compare.
func callSearchTool(t *testing.T, s *session, name string, args map[string]any) *message {
	t.Helper()
	m, err := s.request(ctxFor(t, 30*time.Second), `7`, "tools/call", map[string]any{"name": name, "arguments": args})
	if err != nil {
		fatal(t, "calling %s: %v", name, err)
	}
	return m
}

func TestSearchModeNeverRevealsOrCallsAToolOutsideAView(t *testing.T) {
	guarantee(t)
	needsSessions(t)
	// alice's profile shows all of server one and two's whoami alone, in
	// search mode; root, the first client, whose token the suite waits
	// for the servers with, sees every tool listed.
	opts := options{
		clients: []clientSpec{{name: "root"}, {name: "alice", profile: "finder"}},
		profiles: []profileSpec{{name: "finder", search: true, servers: []templateProfileServer{
			{Name: "one"}, {Name: "two", Tools: []string{"two_whoami"}},
		}}},
	}
	g := startGateway(t, servers("one", "two"), opts, "one")
	g.waitReadyAs("root", "two")
	alice := g.newSessionAs("alice")

	names, err := alice.toolNames()
	if err != nil {
		fatal(t, "alice's tools/list: %v", err)
	}
	if strings.Join(names, ",") != "find_tools,call_tool" {
		fail(t, "alice's tools/list in search mode = %q, want find_tools and call_tool alone", names)
	}
	// A query with every word of the fake server's tools' names finds as
	// many tools as the limit lets it; none may be two's but whoami.
	found, err := callSearchTool(t, alice, "find_tools", map[string]any{
		"query": "echo whoami sleep hang wait big stderr garbage crash flood touch progress log sample elicit roots task links alloc fork",
		"limit": 50,
	}).text()
	if err != nil {
		fatal(t, "find_tools: %v", err)
	}
	if !strings.Contains(found, g.toolName("one", "one_echo")) || !strings.Contains(found, g.toolName("two", "two_whoami")) {
		fail(t, "find_tools of every tool's words did not find %s and %s, which alice's profile shows: %s", g.toolName("one", "one_echo"), g.toolName("two", "two_whoami"), truncate([]byte(found)))
	}
	for _, name := range regexp.MustCompile(`two_[a-z_]+`).FindAllString(found, -1) {
		if name != "two_whoami" {
			fail(t, "find_tools named %s, a tool of server two that alice's profile does not show", name)
		}
	}
	// call_tool of a tool outside the view answers as call_tool of a tool
	// that does not exist.
	hidden, unknown := g.toolName("two", "two_echo"), g.toolName("two", "two_no_such_tool")
	got := answerShape(callSearchTool(t, alice, "call_tool", map[string]any{"name": hidden, "arguments": map[string]any{"text": "hidden"}}), hidden)
	ref := answerShape(callSearchTool(t, alice, "call_tool", map[string]any{"name": unknown, "arguments": map[string]any{}}), unknown)
	if got != ref {
		fail(t, "call_tool of %s, outside alice's profile, answered %s; of an unknown tool, %s: want the same", hidden, got, ref)
	}
	text, err := callSearchTool(t, alice, "call_tool", map[string]any{"name": g.toolName("one", "one_echo"), "arguments": map[string]any{"text": "seen"}}).text()
	if err != nil || text != "seen" {
		fail(t, "call_tool of %s, inside alice's profile, answered %q, %v; want seen", g.toolName("one", "one_echo"), text, err)
	}
	es := allEvents(g.stateDir)
	for tool, want := range map[string]int{"two_echo": 0, "one_echo": 1} {
		if n := countTool(es, tool); n != want {
			fail(t, "the servers received %s", fmt.Sprintf("%d call(s) of %s, want %d: call_tool outside a client's profile must never reach its server", n, tool, want))
		}
	}
}
