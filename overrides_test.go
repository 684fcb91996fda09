package main

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// toolsBackend returns a backend named name that has listed tools, each a
// tool's JSON object, with overrides ovs.
func toolsBackend(t *testing.T, name string, ovs map[string]*ToolOverride, tools ...string) *backend {
	t.Helper()
	b := &backend{name: name, cfg: &ServerConfig{name: name, ToolOverrides: ovs}, up: &upstream{caps: capabilities{"tools": json.RawMessage("{}")}}}
	for _, raw := range tools {
		n, err := itemName(kindTool, json.RawMessage(raw))
		if err != nil {
			t.Fatal(err)
		}
		b.up.lists[kindTool] = append(b.up.lists[kindTool], backendItem{name: n, raw: json.RawMessage(raw)})
	}
	return b
}

func ptr(s string) *string { return &s }

const (
	createIssue = `{"name":"create_issue","description":"Create an issue.","inputSchema":{"type":"object","properties":{"owner":{"type":"string"},"repo":{"type":"string"},"title":{"type":"string"},"labels":{"type":"array"}},"required":["owner","repo","title"]}}`
	deleteRepo  = `{"name":"delete_repo","inputSchema":{"type":"object","properties":{"owner":{"type":"string"}}}}`
	listIssues  = `{"name":"list_issues","inputSchema":{"type":"object","properties":{"state":{"type":"string","enum":["open","closed"]},"limit":{"type":"integer"}}}}`
)

func TestToolOverridesRenameRetitleHideAndFixArgumentsAsClientsSeeThem(t *testing.T) {
	b := toolsBackend(t, "gh", map[string]*ToolOverride{
		"create_issue": {Name: "new_issue", Title: ptr("New issue"), Description: ptr("Open an issue in acme's repos."),
			FixedArguments: map[string]json.RawMessage{"owner": json.RawMessage(`"acme"`), "labels": json.RawMessage(`["triage"]`)}},
		"delete_repo": {Hide: true},
	}, createIssue, deleteRepo, listIssues)
	cat, _ := buildCatalog([]*backend{b})
	if len(cat.overrideProblems) != 0 {
		t.Fatalf("problems = %v, want none", cat.overrideProblems)
	}
	var names []string
	for _, it := range cat.lists[kindTool].items {
		names = append(names, it.name)
	}
	if want := []string{"list_issues", "new_issue"}; !slices.Equal(names, want) {
		t.Fatalf("tools = %q, want %q (delete_repo hidden, create_issue renamed)", names, want)
	}
	it := cat.lookup(kindTool, "new_issue")
	if it.orig != "create_issue" || it.backend != b {
		t.Errorf("new_issue routes to %q of %q, want create_issue of gh", it.orig, it.backend.name)
	}
	want := `{"name":"new_issue","title":"New issue","description":"Open an issue in acme's repos.","inputSchema":{"type":"object","properties":{"repo":{"type":"string"},"title":{"type":"string"}},"required":["repo","title"]}}`
	if !sameJSON(it.raw, []byte(want)) {
		t.Errorf("new_issue is listed as\n%s\nwant\n%s", it.raw, want)
	}
	if cat.lookup(kindTool, "create_issue") != nil || cat.lookup(kindTool, "delete_repo") != nil {
		t.Errorf("the server's own name of a renamed tool, or a hidden tool, is still in the catalog")
	}
	if !sameJSON(cat.lookup(kindTool, "list_issues").raw, []byte(listIssues)) {
		t.Errorf("a tool without an override changed: %s", cat.lookup(kindTool, "list_issues").raw)
	}

	t.Run("a prefix still applies to the new name", func(t *testing.T) {
		b.cfg.Prefix = "gh"
		defer func() { b.cfg.Prefix = "" }()
		cat, _ := buildCatalog([]*backend{b})
		if it := cat.lookup(kindTool, "gh__new_issue"); it == nil || it.orig != "create_issue" {
			t.Fatalf("gh__new_issue = %+v, want create_issue of gh", it)
		}
	})
}

func TestToolOverridesThatDoNotFitTheServersListAreNotAppliedAndNothingElseBreaks(t *testing.T) {
	for _, tc := range []struct {
		name    string
		ovs     map[string]*ToolOverride
		field   string // of the one problem
		listed  string // a tool clients then see
		unfixed string // a parameter still in listed's schema, if any
	}{{
		name:   "an override of a tool the server lacks",
		ovs:    map[string]*ToolOverride{"create_isue": {Name: "x"}, "list_issues": {Name: "issues"}},
		field:  `toolOverrides.create_isue`,
		listed: "issues",
	}, {
		name:   "a rename onto another tool's name",
		ovs:    map[string]*ToolOverride{"create_issue": {Name: "list_issues", Description: ptr("still applied")}},
		field:  `toolOverrides.create_issue.name`,
		listed: "create_issue",
	}, {
		name:    "a fixed argument the schema lacks",
		ovs:     map[string]*ToolOverride{"create_issue": {FixedArguments: map[string]json.RawMessage{"org": json.RawMessage(`"acme"`), "owner": json.RawMessage(`"acme"`)}}},
		field:   `toolOverrides.create_issue.fixedArguments.org`,
		listed:  "create_issue",
		unfixed: "repo",
	}, {
		name:    "a fixed argument of the wrong type",
		ovs:     map[string]*ToolOverride{"list_issues": {FixedArguments: map[string]json.RawMessage{"limit": json.RawMessage(`"ten"`)}}},
		field:   `toolOverrides.list_issues.fixedArguments.limit`,
		listed:  "list_issues",
		unfixed: "limit",
	}, {
		name:    "a fixed argument outside the schema's enum",
		ovs:     map[string]*ToolOverride{"list_issues": {FixedArguments: map[string]json.RawMessage{"state": json.RawMessage(`"all"`)}}},
		field:   `toolOverrides.list_issues.fixedArguments.state`,
		listed:  "list_issues",
		unfixed: "state",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			b := toolsBackend(t, "gh", tc.ovs, createIssue, deleteRepo, listIssues)
			other := toolsBackend(t, "other", nil, `{"name":"whoami"}`)
			cat, _ := buildCatalog([]*backend{b, other})
			if len(cat.overrideProblems) != 1 || cat.overrideProblems[0].field != tc.field || cat.overrideProblems[0].server != "gh" || cat.overrideProblems[0].fix == "" {
				t.Fatalf("problems = %+v, want one of server gh, field %s, with a fix", cat.overrideProblems, tc.field)
			}
			it := cat.lookup(kindTool, tc.listed)
			if it == nil {
				t.Fatalf("%s is not listed", tc.listed)
			}
			if tc.unfixed != "" {
				if _, ok := schemaParams(it.raw)[tc.unfixed]; !ok {
					t.Errorf("%s lost parameter %s: %s", tc.listed, tc.unfixed, it.raw)
				}
			}
			if cat.lookup(kindTool, "whoami") == nil || cat.lookup(kindTool, "delete_repo") == nil {
				t.Errorf("other tools left the catalog")
			}
		})
	}
}

func TestFixedArgumentsAreSetOnACallAndAClientThatSendsOneIsRefused(t *testing.T) {
	fixed := map[string]json.RawMessage{"owner": json.RawMessage(`"acme"`)}
	got, werr := withFixedArguments(json.RawMessage(`{"name":"new_issue","arguments":{"title":"t"}}`), "new_issue", fixed)
	if werr != nil || !sameJSON(got, []byte(`{"name":"new_issue","arguments":{"title":"t","owner":"acme"}}`)) {
		t.Errorf("withFixedArguments = %s, %v", got, werr)
	}
	got, werr = withFixedArguments(json.RawMessage(`{"name":"new_issue"}`), "new_issue", fixed)
	if werr != nil || !sameJSON(got, []byte(`{"name":"new_issue","arguments":{"owner":"acme"}}`)) {
		t.Errorf("withFixedArguments without arguments = %s, %v", got, werr)
	}
	_, werr = withFixedArguments(json.RawMessage(`{"name":"new_issue","arguments":{"owner":"evil"}}`), "new_issue", fixed)
	if werr == nil || werr.Code != codeInvalidParams || !strings.Contains(werr.Message, `"owner"`) || !strings.Contains(werr.Message, "without it") {
		t.Errorf("a client's own owner: error %+v, want -32602 naming the argument and the fix", werr)
	}
}

func TestProfilesMatchAToolByTheServersOwnNameWhateverItsOverride(t *testing.T) {
	b := toolsBackend(t, "gh", map[string]*ToolOverride{"delete_repo": {Name: "remove_repo"}}, createIssue, deleteRepo)
	cat, _ := buildCatalog([]*backend{b})
	v := profileView("safe", &ProfileConfig{Servers: map[string]*ProfileServer{"gh": {Tools: &ToolFilter{Deny: []string{"delete_*"}}}}})
	if cat.inView(v, kindTool, "remove_repo") {
		t.Errorf("a profile denying delete_* sees delete_repo renamed remove_repo")
	}
	if !cat.inView(v, kindTool, "create_issue") {
		t.Errorf("the profile does not see create_issue")
	}
}

func TestToolOverridesConfigErrorsNameTheServerTheFieldAndTheFix(t *testing.T) {
	for _, tc := range []struct{ entry, want string }{
		{`"toolOverrides": {"echo": {"descripton": "x"}}`, `mcpServers.a.toolOverrides.echo: unknown field "descripton"; did you mean "description"?`},
		{`"toolOverrides": {"echo": {"name": "a b"}}`, `mcpServers.a.toolOverrides.echo.name: invalid tool name "a b"`},
		{`"toolOverrides": {"echo": {"name": "x"}, "sleep": {"name": "x"}}`, `mcpServers.a.toolOverrides.sleep.name: tool "echo" is renamed to "x" too`},
		{`"toolOverrides": {"echo": {"hide": "yes"}}`, `mcpServers.a.toolOverrides.echo.hide: want true or false`},
		{`"toolOverrides": {"echo": {"fixedArguments": {"": 1}}}`, `mcpServers.a.toolOverrides.echo.fixedArguments: an argument's name is empty`},
		{`"toolOverrides": []`, `mcpServers.a.toolOverrides: want an object`},
		{`"pin": "strict"`, `mcpServers.a.pin: unknown value "strict"`},
		{`"prefix": true`, `mcpServers.a.prefix: true is not a prefix`},
	} {
		t.Run(tc.want, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "c.json")
			if err := os.WriteFile(path, []byte(`{"mcpServers": {"a": {"command": "x", `+tc.entry+`}}}`), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := LoadConfig(path, func(string) (string, bool) { return "", false }, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("LoadConfig = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestToolOverridesThroughTheGateway(t *testing.T) {
	log := new(lockedBuffer)
	tg := startGateway(t, `{"audit":{"file":"STATE/audit.jsonl"},"mcpServers":{
		"a": {"command":"FAKE","args":["-state","STATE","-name","a"],"prefix":"a",
		      "toolOverrides":{"echo":{"name":"say","description":"Says hello.","fixedArguments":{"text":"hello"}},
		                       "crash":{"hide":true},
		                       "nosuch":{"title":"x"},
		                       "sleep":{"fixedArguments":{"ms":"long"}}}}}}`,
		func(g *Gateway) { g.log = slog.New(slog.NewTextHandler(log, nil)) })
	c := connect(t, tg.url)
	names := c.listToolNames()
	if !slices.Contains(names, "a__say") || slices.Contains(names, "a__echo") || slices.Contains(names, "a__crash") || !slices.Contains(names, "a__sleep") {
		t.Fatalf("tools = %q, want a__say and a__sleep, not a__echo or a__crash", names)
	}
	if got := toolText(t, c.callTool("1", "a__say", `{}`)); got != "hello" {
		t.Errorf("a__say {} answered %q, want the fixed text, hello", got)
	}
	if msg := c.callTool("2", "a__say", `{"text":"bye"}`); msg.Error == nil || msg.Error.Code != codeInvalidParams || !strings.Contains(msg.Error.Message, `"text"`) {
		t.Errorf("a__say with its fixed argument = %+v, want -32602 naming it", msg)
	}
	for _, name := range []string{"a__echo", "a__crash"} {
		if msg := c.callTool("3", name, `{}`); msg.Error == nil || !strings.Contains(msg.Error.Message, "unknown tool") {
			t.Errorf("%s = %+v, want unknown tool", name, msg)
		}
	}
	if got := toolText(t, c.callTool("4", "a__sleep", `{"ms":1}`)); got != "slept" {
		t.Errorf("a__sleep, whose bad override is not applied, answered %q", got)
	}
	lines := readAudit(t, filepath.Join(tg.dir, "audit.jsonl"))
	if len(lines) == 0 || lines[0].Name != "a__say" || lines[0].Server != "a" || lines[0].Outcome != auditOK {
		t.Errorf("first audit line = %+v, want the call of a__say on server a", lines)
	}
	if trail := string(mustRead(t, filepath.Join(tg.dir, "audit.jsonl"))); !strings.Contains(trail, `"name":"a__say","serverName":"echo"`) {
		t.Errorf("the audit line of a__say does not name the server's tool, echo:\n%s", trail)
	}
	out := log.String()
	for _, want := range []string{`tool override not applied`, `field=toolOverrides.nosuch`, `field=toolOverrides.sleep.fixedArguments.ms`} {
		if strings.Count(out, want) < 1 {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
	if n := strings.Count(out, "field=toolOverrides.nosuch "); n != 1 {
		t.Errorf("the problem of toolOverrides.nosuch is logged %d times, want once", n)
	}
}

func TestATaskOfARenamedToolWithAFixedArgumentReachesTheServersTool(t *testing.T) {
	tg := startGateway(t, `{"mcpServers":{
		"a": {"command":"FAKE","args":["-state","STATE","-name","a","-capabilities","tools,tasks"],
		      "toolOverrides":{"task":{"name":"background","fixedArguments":{"ms":20}}}}}}`)
	p := newHTTPPeer(t, tg.url, `{}`)
	p.call("initialize", `{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}`)
	m, _ := p.call("tools/call", `{"name":"background","arguments":{},"task":{"ttl":60000}}`)
	var r struct{ Task taskState }
	result(t, m, &r)
	if r.Task.TaskID == "" {
		t.Fatalf("background as a task = %s, want a task", m.Result)
	}
	m, _ = p.call("tasks/result", fmt.Sprintf(`{"taskId":%q}`, r.Task.TaskID))
	if got := text(t, m); got != "task done 20" {
		t.Errorf("tasks/result = %q, want the server's task tool run with the fixed ms, 20", got)
	}
	m, _ = p.call("tasks/get", fmt.Sprintf(`{"taskId":%q}`, r.Task.TaskID))
	if m.Error != nil {
		t.Errorf("tasks/get of the renamed tool's task: %+v", m.Error)
	}
}

func TestCheckShowsOverridesThatDoNotFitALazyServersCachedCatalog(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "c.json")
	if err := os.WriteFile(path, []byte(`{"cacheDir": "cache", "mcpServers": {
		"gh": {"command": "true", "start": "lazy", "toolOverrides": {"create_issue": {"name": "new_issue", "fixedArguments": {"owner": 7}}, "nosuch": {"hide": true}}},
		"fresh": {"command": "true", "start": "lazy", "toolOverrides": {"x": {"hide": true}}}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := LoadConfig(path, func(string) (string, bool) { return "", false }, nil)
	if err != nil {
		t.Fatal(err)
	}
	cacheDir, _ := cfg.catalogCacheDir()
	cache := newCatalogCache(cacheDir, cfg, cfg.MCPServers["gh"])
	if err := cache.save(&cachedCatalog{Version: catalogCacheVersion, Server: "gh", Capabilities: capabilities{"tools": json.RawMessage(`{}`)},
		Lists: map[string][]json.RawMessage{"tools": {json.RawMessage(createIssue), json.RawMessage(listIssues)}}}); err != nil {
		t.Fatal(err)
	}
	got := string(overridesReport(cfg, cachedTools(cfg)))
	for _, want := range []string{
		"server gh: toolOverrides:\n",
		`  "create_issue": renamed "new_issue", owner fixed to 7`,
		`  not applied: toolOverrides.create_issue.fixedArguments.owner: 7 is an integer, and the schema wants string; the argument is not fixed; give a value the parameter's schema accepts`,
		`  not applied: toolOverrides.nosuch: the server lists no tool "nosuch"`,
		"server fresh: toolOverrides:\n  \"x\": hidden\n  checked against the server's tools/list when it lists its tools (its catalog is not known yet)\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("overridesReport =\n%s\nwant it to hold %q", got, want)
		}
	}
}

// BenchmarkRebuildCatalog200PrefixedServersWithOverrides is
// BenchmarkRebuildCatalog200PrefixedServers with every tool of every
// server overridden (renamed, with a new description): the cost of
// overrides, applied at each rebuild.
func BenchmarkRebuildCatalog200PrefixedServersWithOverrides(b *testing.B) {
	g, _ := listingGateway(b, 200, 5, true)
	for _, be := range g.backends {
		be.cfg.ToolOverrides = map[string]*ToolOverride{}
		for _, it := range be.items(kindTool) {
			be.cfg.ToolOverrides[it.name] = &ToolOverride{Name: "new_" + it.name, Description: ptr("Overridden.")}
		}
	}
	g.rebuildCatalog()
	if g.currentCatalog().lookup(kindTool, "p0__new_tool_0") == nil {
		b.Fatal("the overrides are not applied")
	}
	b.ReportAllocs()
	for b.Loop() {
		g.rebuildCatalog()
	}
}
