package main

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// listedBackend returns a backend that has listed, for each kind, the
// items named in lists (tools and prompts by name, resources by URI,
// templates by URI template), as a stand-in for a started server.
func listedBackend(name, prefix string, lists map[kind][]string) *backend {
	b := &backend{name: name, cfg: &ServerConfig{Prefix: prefix, name: name}, up: &upstream{caps: capabilities{}}}
	for k, names := range lists {
		b.up.caps[kinds[k].capability] = json.RawMessage("{}")
		for _, n := range names {
			raw, _ := json.Marshal(map[string]string{kinds[k].key: n, "description": "of " + name})
			b.up.lists[k] = append(b.up.lists[k], backendItem{name: n, raw: raw})
		}
	}
	return b
}

func TestCatalogPrefixedNameBelongsToItsPrefixsServerAlone(t *testing.T) {
	type want struct {
		k       kind
		name    string // as clients use it
		server  string // "" if it reaches no server
		orig    string // the server's own name for it
		squatAs string // if set, the squatter's item is offered under this name
	}
	for _, tc := range []struct {
		name     string
		backends []*backend // sorted by name, as the gateway keeps them
		want     []want
	}{{
		name: "an unprefixed server's prefixed-looking tool and prompt do not shadow the prefix's",
		backends: []*backend{
			listedBackend("aaa", "", map[kind][]string{kindTool: {"gh__whoami", "gh__other"}, kindPrompt: {"gh__greet"}}),
			listedBackend("zzz", "gh", map[kind][]string{kindTool: {"whoami"}, kindPrompt: {"greet"}}),
		},
		want: []want{
			{kindTool, "gh__whoami", "zzz", "whoami", "aaa__gh__whoami"},
			{kindTool, "gh__other", "", "", "aaa__gh__other"},
			{kindPrompt, "gh__greet", "zzz", "greet", "aaa__gh__greet"},
		},
	}, {
		name: "a collision qualified by a server's name does not take a prefix's name",
		backends: []*backend{
			listedBackend("gh", "", map[kind][]string{kindTool: {"whoami"}}),
			listedBackend("hub", "", map[kind][]string{kindTool: {"whoami"}}),
			listedBackend("zzz", "gh", map[kind][]string{kindTool: {"whoami"}}),
		},
		want: []want{
			{kindTool, "gh__whoami", "zzz", "whoami", ""},
			{kindTool, "hub__whoami", "hub", "whoami", ""},
		},
	}, {
		name: "of nested prefixes the longer owns its namespace",
		backends: []*backend{
			listedBackend("x", "a", map[kind][]string{kindTool: {"b__c", "d"}}),
			listedBackend("y", "a__b", map[kind][]string{kindTool: {"c"}}),
		},
		want: []want{
			{kindTool, "a__b__c", "y", "c", ""},
			{kindTool, "a__d", "x", "d", ""},
		},
	}, {
		name: "an unprefixed server's prefixed-looking resource does not shadow the prefix's",
		backends: []*backend{
			listedBackend("aaa", "", map[kind][]string{kindResource: {"gh+file:///x"}}),
			listedBackend("zzz", "gh", map[kind][]string{kindResource: {"file:///x"}}),
		},
		want: []want{{kindResource, "gh+file:///x", "zzz", "file:///x", "aaa+gh+file:///x"}},
	}, {
		name: "an unprefixed server's template does not take a URI in a prefix's namespace",
		backends: []*backend{
			listedBackend("aaa", "", map[kind][]string{kindTemplate: {"g{rest}"}}),
			listedBackend("zzz", "gh", map[kind][]string{kindResource: {"file:///listed"}}),
		},
		want: []want{
			{kindResource, "gh+file:///unlisted", "zzz", "file:///unlisted", ""},
			{kindResource, "go:x", "aaa", "go:x", ""},
		},
	}, {
		name: "the one server that offers resources does not take a URI in another's prefix's namespace",
		backends: []*backend{
			listedBackend("aaa", "", map[kind][]string{kindResource: {"file:///a"}}),
			listedBackend("zzz", "gh", map[kind][]string{kindTool: {"whoami"}}),
		},
		want: []want{
			{kindResource, "gh+file:///a", "zzz", "file:///a", ""},
			{kindResource, "file:///b", "aaa", "file:///b", ""},
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			cat, _ := buildCatalog(tc.backends)
			for _, w := range tc.want {
				var b *backend
				var orig string
				if w.k == kindResource {
					b, orig = cat.resolveURI(nil, tc.backends, w.name)
				} else if it := cat.lookup(w.k, w.name); it != nil {
					b, orig = it.backend, it.orig
				}
				got := ""
				if b != nil {
					got = b.name
				}
				if got != w.server || orig != w.orig {
					t.Errorf("%s %q reaches server %q as %q, want %q as %q", kinds[w.k].list, w.name, got, orig, w.server, w.orig)
				}
				if w.squatAs == "" {
					continue
				}
				if it := cat.lookup(w.k, w.squatAs); it == nil || it.backend.name != "aaa" {
					t.Errorf("%s: the squatting server's item is not offered as %q", kinds[w.k].list, w.squatAs)
				}
			}
		})
	}
}

func TestGatewayUnprefixedServerCannotTakeAPrefixedToolName(t *testing.T) {
	t.Parallel()
	// aaa sorts first and lists gh__whoami; the name is zzz's.
	tg := startGateway(t, `{"mcpServers":{
		"aaa": {"command":"FAKE","args":["-state","STATE","-name","aaa","-prefix","gh__"]},
		"zzz": {"command":"FAKE","args":["-state","STATE","-name","zzz"],"prefix":"gh"}
	}}`)
	c := connect(t, tg.url)
	if text := toolText(t, c.callTool("1", "gh__whoami", `{}`)); !strings.Contains(text, `"name":"zzz"`) {
		t.Errorf("gh__whoami reached %s, want server zzz (prefix gh)", text)
	}
	if text := toolText(t, c.callTool("2", "aaa__gh__whoami", `{}`)); !strings.Contains(text, `"name":"aaa"`) {
		t.Errorf("aaa__gh__whoami reached %s, want server aaa", text)
	}
}

func TestServerOverTheCatalogBoundFailsItsStart(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, setting, want string
	}{
		{"more items", `"maxCatalogItems": 10`, `server "big" lists more than 10 items of tools, prompts, resources and templates, the bound (maxCatalogItems); raise maxCatalogItems`},
		{"more bytes", `"maxCatalogBytes": 4000`, `server "big" lists more than 4000 bytes of tools, prompts, resources and templates, the bound (maxCatalogBytes); raise maxCatalogBytes`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tg := startGateway(t, `{"restartDelay": "10m", "mcpServers":{
				"big": {"command":"FAKE","args":["-state","STATE","-name","big","-extra-tools","40","-page-size","5"], `+tc.setting+`},
				"small": {"command":"FAKE","args":["-state","STATE","-name","small","-capabilities","tools"]}
			}}`)
			big, small := tg.gw.backends[0], tg.gw.backends[1] // sorted by name
			if h := big.health(); h.State == stateReady || !strings.Contains(h.Error, tc.want) {
				t.Errorf("server big is %s with error %q, want not ready with an error that says %q", h.State, h.Error, tc.want)
			}
			if h := small.health(); h.State != stateReady {
				t.Errorf("server small, under the bound, is %s (%s), want ready", h.State, h.Error)
			}
			c := connect(t, tg.url)
			if text := toolText(t, c.callTool("1", "whoami", `{}`)); !strings.Contains(text, `"name":"small"`) {
				t.Errorf("whoami reached %s, want server small", text)
			}
		})
	}
}

// catalogOf returns a gateway with no servers whose catalog holds n tools
// of about size bytes each, and the catalog's size in bytes.
func catalogOf(tb testing.TB, n, size int) (*Gateway, int) {
	var names []string
	for i := range n {
		names = append(names, fmt.Sprintf("tool_%05d_%s", i, strings.Repeat("x", size)))
	}
	b := listedBackend("big", "", map[kind][]string{kindTool: names})
	total := 0
	for _, it := range b.up.lists[kindTool] {
		total += len(it.raw)
	}
	cfg := &Config{}
	cfg.applyDefaults()
	g := NewGateway(cfg, testLogger(tb), nil)
	g.cat, _ = buildCatalog([]*backend{b})
	return g, total
}

// listTools serves one tools/list, as a session's request, and returns the
// answer's size in bytes.
func listTools(tb testing.TB, g *Gateway, s *session) int {
	r := g.handle(context.Background(), s, legacyInbound(&wireMsg{JSONRPC: "2.0", ID: json.RawMessage("1"), Method: "tools/list"}), nil)
	if r == nil || r.code != 0 {
		tb.Fatalf("tools/list = %+v, want a result", r)
	}
	return r.len()
}

func TestServingAListDoesNotCopyTheCatalogPerRequest(t *testing.T) {
	g, catalogBytes := catalogOf(t, 1000, 4096)
	s := g.sessions.detachedSession(anonymousPrincipal)
	most := uint64(0)
	for range 5 {
		// As after any collection: nothing pooled by an earlier request
		// (sync.Pool empties within two) makes this one look cheap.
		runtime.GC()
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		listTools(t, g, s)
		runtime.ReadMemStats(&after)
		most = max(most, after.TotalAlloc-before.TotalAlloc)
	}
	// The page (here the whole catalog) must be written once; building it
	// in an encoder's growing buffer and copying it out is three times that.
	if int(most) > catalogBytes*3/2 {
		t.Errorf("serving tools/list of a %d-byte catalog allocated up to %d bytes, want at most one copy of the page (%d bytes) and a little", catalogBytes, most, catalogBytes)
	}
}

// BenchmarkToolsListOf4MiBCatalog serves tools/list of one page of 1,000
// tools of about 4 KiB each.
func BenchmarkToolsListOf4MiBCatalog(b *testing.B) {
	g, catalogBytes := catalogOf(b, 1000, 4096)
	s := g.sessions.detachedSession(anonymousPrincipal)
	b.SetBytes(int64(catalogBytes))
	b.ReportAllocs()
	for b.Loop() {
		listTools(b, g, s)
	}
}

func TestCatalogBoundIsTheServersElseTheTopLevelsElseTheDefault(t *testing.T) {
	for _, tc := range []struct {
		name     string
		top, own Config
		items    int
		size     int64
	}{
		{name: "zero everywhere is the default", items: defaultMaxCatalogItems, size: defaultMaxCatalogBytes},
		{name: "the top level's", top: Config{MaxCatalogItems: 5, MaxCatalogBytes: 50}, items: 5, size: 50},
		{name: "the server's over the top level's", top: Config{MaxCatalogItems: 5, MaxCatalogBytes: 50}, own: Config{MaxCatalogItems: 7, MaxCatalogBytes: 70}, items: 7, size: 70},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &ServerConfig{MaxCatalogItems: tc.own.MaxCatalogItems, MaxCatalogBytes: tc.own.MaxCatalogBytes}
			if items, size := tc.top.catalogBound(s); items != tc.items || size != tc.size {
				t.Errorf("catalogBound() = %d items, %d bytes, want %d, %d", items, size, tc.items, tc.size)
			}
		})
	}
}
