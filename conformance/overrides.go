package conformance

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// Cases about tool overrides (setting "toolOverrides"): a gateway that
// renames a server's tool, hides one, or fixes an argument must show its
// clients the tool as changed, route a call of the new name to the
// server's own tool with the fixed argument set, never let the client
// choose that argument, and treat the old name and the hidden tool as
// unknown. A gateway whose adapter lacks the setting skips the case.

func TestToolOverridesRenameHideAndFixArgumentsAsTheClientSeesThem(t *testing.T) {
	guarantee(t)
	one := serverSpec{Name: "one", overrides: map[string]templateToolOverride{
		"one_echo":  {Name: "one_say", FixedArguments: map[string]any{"text": "fixed by the gateway"}},
		"one_crash": {Hide: true},
	}}
	g := startGateway(t, []serverSpec{one}, options{}, "one")
	s := g.newSession()
	defer s.close()

	m, err := s.request(ctxFor(t, 30*time.Second), `1`, "tools/list", map[string]any{})
	if err != nil || m.Error != nil {
		fatal(t, "tools/list: %v %+v", err, m)
	}
	var list struct {
		Tools []struct {
			Name        string `json:"name"`
			InputSchema struct {
				Properties map[string]json.RawMessage `json:"properties"`
				Required   []string                   `json:"required"`
			} `json:"inputSchema"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(m.Result, &list); err != nil {
		fatal(t, "tools/list: %v", err)
	}
	say, echo, crash := g.toolName("one", "one_say"), g.toolName("one", "one_echo"), g.toolName("one", "one_crash")
	found := false
	for _, tool := range list.Tools {
		switch tool.Name {
		case say:
			found = true
			if _, ok := tool.InputSchema.Properties["text"]; ok || contains(tool.InputSchema.Required, "text") {
				fail(t, "%s's inputSchema still has the fixed parameter text", say)
			}
			if _, ok := tool.InputSchema.Properties["delay_ms"]; !ok {
				fail(t, "%s's inputSchema lost delay_ms, which is not fixed", say)
			}
		case echo, crash:
			fail(t, "tools/list shows %s, renamed or hidden", tool.Name)
		}
	}
	if !found {
		fatal(t, "tools/list lacks %s, one_echo renamed", say)
	}

	text, err := callByNameText(t, s, say, map[string]any{})
	if err != nil || text != "fixed by the gateway" {
		fail(t, "%s {} answered %q, %v; want the fixed text", say, text, err)
	}
	// A client that sends the fixed argument gets an error or the fixed
	// value, never its own.
	if m := callByName(t, s, say, map[string]any{"text": "the client's"}); m.Error == nil && strings.Contains(string(m.Result), "the client's") {
		fail(t, "%s with the client's own text answered %s: the client chose a fixed argument", say, m.Result)
	}
	unknown := g.toolName("one", "one_no_such_tool")
	ref := answerShape(callByName(t, s, unknown, map[string]any{}), unknown)
	for _, name := range []string{echo, crash} {
		if got := answerShape(callByName(t, s, name, map[string]any{}), name); got != ref {
			fail(t, "a call of %s, renamed or hidden, answered %s; an unknown tool answers %s", name, got, ref)
		}
	}
	for _, e := range allEvents(g.stateDir) {
		if e.Method == "tools/call" && e.Tool != "one_echo" && e.Tool != "one_whoami" {
			fail(t, "the server was called for %q: only one_echo (as one_say) should reach it", e.Tool)
		}
	}
}

// callByNameText is callByName's text result.
func callByNameText(t *testing.T, s *session, name string, args any) (string, error) {
	t.Helper()
	return callByName(t, s, name, args).text()
}
