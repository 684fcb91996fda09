package conformance

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
	"time"
)

// Cases about named clients: a gateway that tells its clients apart by
// their bearer tokens (setting "clients") must show each only what its
// profile shows (setting "profiles"), as if the rest did not exist; run a
// server that keeps one person's credentials as a process per client, with
// that client's own environment (setting "clientScope"); and, with an
// audit trail (setting "audit"), write down who called what and how it
// ended. A gateway whose adapter lacks the setting skips the case, naming
// it.

// waitReadyAs is waitReady for the named client's view.
func (g *gateway) waitReadyAs(client string, ready ...string) {
	g.t.Helper()
	saved := g.token
	g.token = g.tokens[client]
	defer func() { g.token = saved }()
	g.waitReady(ready)
}

// answerShape describes an answer with name written NAME: two answers of
// the same shape cannot be told apart but by the name they were asked for.
func answerShape(m *message, name string) string {
	if m.Error != nil {
		return fmt.Sprintf("error %d: %s", m.Error.Code, strings.ReplaceAll(m.Error.Message, name, "NAME"))
	}
	return "result " + strings.ReplaceAll(string(m.Result), name, "NAME")
}

// callByName calls the tool the gateway names name, with the fixed ID 7 so
// that answers compare.
func callByName(t *testing.T, s *session, name string, args any) *message {
	t.Helper()
	m, err := s.request(ctxFor(t, 30*time.Second), `7`, "tools/call", map[string]any{"name": name, "arguments": args})
	if err != nil {
		fatal(t, "calling %s: %v", name, err)
	}
	return m
}

func TestProfilesFilterListsAndRefuseCallsOutsideThem(t *testing.T) {
	guarantee(t)
	needsSessions(t)
	// alice's profile shows all of server one and nothing of two; bob's,
	// two's whoami and echo and nothing of one.
	opts := options{
		clients: []clientSpec{{name: "alice", profile: "ones"}, {name: "bob", profile: "twos"}},
		profiles: []profileSpec{
			{name: "ones", servers: []templateProfileServer{{Name: "one"}}},
			{name: "twos", servers: []templateProfileServer{{Name: "two", Tools: []string{"two_whoami", "two_echo"}}}},
		},
	}
	g := startGateway(t, servers("one", "two"), opts, "one")
	g.waitReadyAs("bob", "two")
	alice, bob := g.newSessionAs("alice"), g.newSessionAs("bob")

	names, err := alice.toolNames()
	if err != nil {
		fatal(t, "alice's tools/list: %v", err)
	}
	for _, n := range names {
		if strings.Contains(n, "two_") {
			fail(t, "alice's tools/list shows %s, a tool of server two, which her profile does not show", n)
		}
	}
	if !contains(names, g.toolName("one", "one_echo")) {
		fail(t, "alice's tools/list lacks %s, of server one, which her profile shows whole: %q", g.toolName("one", "one_echo"), names)
	}
	names, err = bob.toolNames()
	if err != nil {
		fatal(t, "bob's tools/list: %v", err)
	}
	sort.Strings(names)
	want := []string{g.toolName("two", "two_echo"), g.toolName("two", "two_whoami")}
	sort.Strings(want)
	if strings.Join(names, ",") != strings.Join(want, ",") {
		fail(t, "bob's tools/list = %q, want exactly %q (his profile shows two's whoami and echo only)", names, want)
	}

	// Calls outside each profile: the same answer as a tool that does not
	// exist, in the same session.
	for _, c := range []struct {
		who  string
		s    *session
		name string
		args any
	}{
		{"alice", alice, g.toolName("two", "two_whoami"), map[string]any{}},               // a server she does not see
		{"bob", bob, g.toolName("two", "two_sleep"), map[string]any{"ms": 1}},             // a tool of his server his profile leaves out
		{"bob", bob, g.toolName("one", "one_whoami"), map[string]any{}},                   // a server he does not see
		{"alice", alice, g.toolName("two", "two_echo"), map[string]any{"text": "hidden"}}, // bob's tool, not hers
	} {
		unknown := g.toolName("two", "two_no_such_tool")
		got := answerShape(callByName(t, c.s, c.name, c.args), c.name)
		ref := answerShape(callByName(t, c.s, unknown, map[string]any{}), unknown)
		if got != ref {
			fail(t, "%s's call of %s, outside the profile, answered %s; an unknown tool answers %s: want the same", c.who, c.name, got, ref)
		}
	}
	// Calls inside each profile reach their servers; by then the refused
	// calls, sent before them, would have too.
	if _, err := callText(t, alice, "one", "whoami", map[string]any{}); err != nil {
		fail(t, "alice's call of one's whoami, which her profile shows: %v", err)
	}
	if text, err := callText(t, bob, "two", "echo", map[string]any{"text": "seen"}); err != nil || text != "seen" {
		fail(t, "bob's call of two's echo, which his profile shows, answered %q, %v", text, err)
	}
	es := allEvents(g.stateDir)
	for tool, want := range map[string]int{"two_whoami": 0, "two_sleep": 0, "two_echo": 1, "one_whoami": 1} {
		if n := countTool(es, tool); n != want {
			fail(t, "the servers received %d call(s) of %s, want %d: a call outside a client's profile must never reach its server", n, tool, want)
		}
	}
}

// whoamiOf returns the PID and env value of the process that answers s's
// call of server's whoami.
func whoamiOf(t *testing.T, s *session, server string) (pid int, env string) {
	t.Helper()
	text, err := callText(t, s, server, "whoami", map[string]any{})
	if err != nil {
		fatal(t, "%s's whoami: %v", server, err)
	}
	var who struct {
		PID int
		Env string
	}
	if err := json.Unmarshal([]byte(text), &who); err != nil || who.PID == 0 {
		fatal(t, "%s's whoami answered %q", server, text)
	}
	return who.PID, who.Env
}

func TestAProcessPerClientWithItsOwnEnv(t *testing.T) {
	guarantee(t)
	needsSessions(t)
	const aliceValue, bobValue = "alice's value", "bob's value"
	opts := options{clients: []clientSpec{
		{name: "alice", env: map[string]map[string]string{"pc": {"WHOAMI_VALUE": aliceValue}}},
		{name: "bob", env: map[string]map[string]string{"pc": {"WHOAMI_VALUE": bobValue}}},
	}}
	g := startGateway(t, []serverSpec{{Name: "pc", scope: "client"}}, opts, "pc")
	alice1, bob, alice2 := g.newSessionAs("alice"), g.newSessionAs("bob"), g.newSessionAs("alice")
	pidA, envA := whoamiOf(t, alice1, "pc")
	pidB, envB := whoamiOf(t, bob, "pc")
	if pidA == pidB {
		fatal(t, "alice's and bob's calls both reached process %d, want a process per client", pidA)
	}
	if envA != aliceValue {
		fail(t, "alice's process has WHOAMI_VALUE %q, want her own %q", envA, aliceValue)
	}
	if envB != bobValue {
		fail(t, "bob's process has WHOAMI_VALUE %q, want his own %q", envB, bobValue)
	}
	pidA2, envA2 := whoamiOf(t, alice2, "pc")
	if pidA2 != pidA {
		fail(t, "alice's second session's call reached process %d, her first session's %d: want one process per client, shared by its sessions", pidA2, pidA)
	}
	if envA2 != aliceValue {
		fail(t, "alice's second session's process has WHOAMI_VALUE %q, want %q", envA2, aliceValue)
	}
	if again, _ := whoamiOf(t, bob, "pc"); again != pidB {
		fail(t, "bob's second call reached process %d, his first %d", again, pidB)
	}
}

// auditLine is what the suite reads of an audit trail's line.
type auditLine struct {
	Client, Server, Method, Name, Outcome string
}

func (l auditLine) String() string {
	return fmt.Sprintf("%s %s %s %s %s", l.Client, l.Server, l.Method, l.Name, l.Outcome)
}

// auditLines reads the audit trail's lines of method.
func auditLines(t *testing.T, file, method string) []auditLine {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil && !os.IsNotExist(err) {
		fatal(t, "reading the audit trail: %v", err)
	}
	var lines []auditLine
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var l auditLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			fatal(t, "the audit trail holds a line that is not JSON: %q", sc.Text())
		}
		if l.Method == method {
			lines = append(lines, l)
		}
	}
	return lines
}

func TestAuditLinesMatchCalls(t *testing.T) {
	guarantee(t)
	needsSessions(t)
	opts := options{
		clients:  []clientSpec{{name: "alice", profile: "some"}, {name: "bob"}},
		profiles: []profileSpec{{name: "some", servers: []templateProfileServer{{Name: "au", Tools: []string{"au_whoami", "au_sample"}}}}},
		audit:    true,
	}
	g := startGateway(t, servers("au"), opts, "au")
	alice, bob := g.newSessionAs("alice"), g.newSessionAs("bob")
	var want []auditLine
	expect := func(client, tool, outcome string) {
		want = append(want, auditLine{Client: client, Server: "au", Method: "tools/call", Name: g.toolName("au", "au_"+tool), Outcome: outcome})
	}
	if _, err := callText(t, alice, "au", "whoami", map[string]any{}); err != nil {
		fatal(t, "alice's whoami: %v", err)
	}
	expect("alice", "whoami", "ok")
	// A session that declared no sampling: the server's request for it
	// fails, and the server answers a tool error.
	if text, err := callText(t, alice, "au", "sample", map[string]any{}); err == nil || !strings.HasPrefix(err.Error(), "tool error") {
		fatal(t, "alice's sample, without sampling, answered %q, %v; want a tool error", text, err)
	}
	expect("alice", "sample", "tool_error")
	callByName(t, alice, g.toolName("au", "au_echo"), map[string]any{"text": "outside"})
	expect("alice", "echo", "refused")
	if _, err := callText(t, bob, "au", "echo", map[string]any{"text": "inside"}); err != nil {
		fatal(t, "bob's echo: %v", err)
	}
	expect("bob", "echo", "ok")

	var got []auditLine
	deadline := time.Now().Add(10 * time.Second)
	for {
		got = auditLines(t, g.audit, "tools/call")
		if len(got) >= len(want) || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond) // the trail gives no signal to wait on
	}
	key := func(ls []auditLine) []string {
		var ks []string
		for _, l := range ls {
			ks = append(ks, l.String())
		}
		sort.Strings(ks)
		return ks
	}
	if g, w := key(got), key(want); strings.Join(g, "\n") != strings.Join(w, "\n") {
		fail(t, "the audit trail's tools/call lines (client server method name outcome) are\n  %s\nwant one per call:\n  %s", strings.Join(g, "\n  "), strings.Join(w, "\n  "))
	}
}
