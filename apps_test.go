package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// appTool is an MCP App's tool as a server lists it, naming its view uri.
func appTool(name, uri string) string {
	return `{"name":"` + name + `","inputSchema":{"type":"object"},"_meta":{"ui":{"resourceUri":"` + uri + `","visibility":["model","app"]}}}`
}

func TestUIResourcesStayUIURIsAndToolsNameThemAsClientsReadThem(t *testing.T) {
	for _, tc := range []struct {
		name     string
		prefix   string
		noPrefix bool
		want     string // the view's URI as clients see it
	}{
		{"a prefix goes inside the ui:// URI", "wx", false, "ui://wx+weather/view.html"},
		{"a collision qualifies inside the ui:// URI by the server's name", "", false, "ui://a+weather/view.html"},
		{`"prefix": false keeps the server's URI and the other server's is qualified`, "", true, "ui://weather/view.html"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := toolsBackend(t, "a", nil, appTool("forecast", "ui://weather/view.html"))
			a.cfg.Prefix, a.cfg.NoPrefix = tc.prefix, tc.noPrefix
			a.up.caps["resources"] = json.RawMessage("{}")
			a.up.lists[kindResource] = []backendItem{{name: "ui://weather/view.html", raw: json.RawMessage(`{"uri":"ui://weather/view.html","name":"view","mimeType":"text/html;profile=mcp-app"}`)}}
			// b offers the same URI, and a tool of the same name.
			b := toolsBackend(t, "b", nil, appTool("forecast", "ui://weather/view.html"))
			b.up.caps["resources"] = json.RawMessage("{}")
			b.up.lists[kindResource] = []backendItem{{name: "ui://weather/view.html", raw: json.RawMessage(`{"uri":"ui://weather/view.html","name":"view"}`)}}
			cat, _ := buildCatalog([]*backend{a, b})
			var aTool *catalogItem
			for i := range cat.lists[kindTool].items {
				if it := &cat.lists[kindTool].items[i]; it.backend == a {
					aTool = it
				}
			}
			if aTool == nil {
				t.Fatal("a's tool is not in the catalog")
			}
			nested, _ := toolUIRefs(aTool.raw)
			if nested != tc.want {
				t.Errorf("a's tool names its view %q, want %q: %s", nested, tc.want, aTool.raw)
			}
			if !strings.Contains(string(aTool.raw), `"visibility":["model","app"]`) {
				t.Errorf("the rest of _meta.ui was lost: %s", aTool.raw)
			}
			if it := cat.lookup(kindResource, tc.want); it == nil || it.backend != a || it.orig != "ui://weather/view.html" {
				t.Errorf("resource %q = %+v, want a's ui://weather/view.html", tc.want, it)
			}
			if rb, orig := cat.resolveURI(nil, []*backend{a, b}, tc.want); rb != a || orig != "ui://weather/view.html" {
				t.Errorf("resolveURI(%q) = %v %q, want a's own URI", tc.want, rb, orig)
			}
			if tc.noPrefix {
				if it := cat.lookup(kindTool, "forecast"); it == nil || it.backend != a {
					t.Errorf(`the tool "forecast" of the server with "prefix": false is not under its own name`)
				}
				if it := cat.lookup(kindTool, "b__forecast"); it == nil || it.backend != b {
					t.Errorf("the other server's forecast is not qualified as b__forecast")
				}
			}
		})
	}
}

func TestAnMCPAppThroughTheGateway(t *testing.T) {
	tg := startGateway(t, `{"mcpServers":{
		"a": {"command":"FAKE","args":["-state","STATE","-name","a","-ui"],"prefix":"gw"},
		"b": {"command":"FAKE","args":["-state","STATE","-name","b"]}}}`)
	p := newHTTPPeer(t, tg.url, `{"extensions":{"io.modelcontextprotocol/ui":{"mimeTypes":["text/html;profile=mcp-app"]}}}`)
	init, _ := p.call("initialize", `{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}`)
	var ir struct {
		Capabilities struct {
			Extensions map[string]json.RawMessage
		}
	}
	result(t, init, &ir)
	if got := string(ir.Capabilities.Extensions["io.modelcontextprotocol/ui"]); !strings.Contains(got, "text/html;profile=mcp-app") {
		t.Errorf("initialize offers extensions %v, want the ui extension of server a", ir.Capabilities.Extensions)
	}
	m, _ := p.call("tools/list", `{}`)
	var tl struct {
		Tools []json.RawMessage
	}
	result(t, m, &tl)
	var view string
	for _, raw := range tl.Tools {
		if n, _ := itemName(kindTool, raw); n == "gw__app" {
			view, _ = toolUIRefs(raw)
		}
	}
	if view != "ui://gw+a/app.html" {
		t.Fatalf("gw__app names its view %q, want ui://gw+a/app.html", view)
	}
	m, _ = p.call("resources/read", `{"uri":"`+view+`"}`)
	var rr struct {
		Contents []struct{ URI, MimeType, Text string }
	}
	result(t, m, &rr)
	if len(rr.Contents) != 1 || rr.Contents[0].URI != view || rr.Contents[0].MimeType != "text/html;profile=mcp-app" || !strings.Contains(rr.Contents[0].Text, "app of a") {
		t.Errorf("resources/read %s = %s, want a's view under the URI read", view, m.Result)
	}
}

func TestTwoServersWithPrefixFalseOfferingOneNameKeepTheFirstAndSaySo(t *testing.T) {
	a := toolsBackend(t, "a", nil, `{"name":"app"}`)
	b := toolsBackend(t, "b", nil, `{"name":"app"}`)
	a.cfg.NoPrefix, b.cfg.NoPrefix = true, true
	cat, collisions := buildCatalog([]*backend{a, b})
	if it := cat.lookup(kindTool, "app"); it == nil || it.backend != a || len(cat.lists[kindTool].items) != 1 {
		t.Errorf("catalog = %+v, want a's app alone", cat.lists[kindTool].items)
	}
	if !strings.Contains(strings.Join(collisions, "\n"), `tool "app" of server "b" is left out: the name is taken`) {
		t.Errorf("collisions = %q, want b's app said left out", collisions)
	}
}

func TestPrefixFalseIsReadAndShownByCheck(t *testing.T) {
	tg := startGateway(t, `{"mcpServers":{"a": {"command":"FAKE","args":["-state","STATE","-name","a"],"prefix":false}}}`)
	s := tg.gw.config().MCPServers["a"]
	if !s.NoPrefix || s.Prefix != "" {
		t.Fatalf(`"prefix": false read as NoPrefix %v, Prefix %q`, s.NoPrefix, s.Prefix)
	}
	if shown := string(tg.gw.config().resolved()); !strings.Contains(shown, `"prefix": false`) {
		t.Errorf("-check does not show \"prefix\": false:\n%s", shown)
	}
}
