package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// linkedURIs returns the URIs of the resource_link and embedded resource
// content blocks of a tool's result, in order.
func linkedURIs(t *testing.T, m *wireMsg) []string {
	t.Helper()
	var r struct {
		Content []struct {
			Type     string
			URI      string
			Resource struct{ URI string }
		}
	}
	result(t, m, &r)
	var uris []string
	for _, c := range r.Content {
		switch c.Type {
		case "resource_link":
			uris = append(uris, c.URI)
		case "resource":
			uris = append(uris, c.Resource.URI)
		}
	}
	return uris
}

func TestURIsInResultsAreTheOnesClientsReadBack(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, config string
		tools        map[string][]string // tool -> the URIs its links must carry
	}{{
		name: "a prefix",
		config: `{"mcpServers":{
			"a": {"command":"FAKE","args":["-state","STATE","-name","a"]},
			"b": {"command":"FAKE","args":["-state","STATE","-name","b"],"prefix":"bp"}}}`,
		tools: map[string][]string{
			"links":     {"fake://a/hello", "fake://a/counter", "fake://a/echo/linked"},
			"bp__links": {"bp+fake://b/hello", "bp+fake://b/counter", "bp+fake://b/echo/linked"},
		},
	}, {
		name: "a collision",
		config: `{"mcpServers":{
			"a": {"command":"FAKE","args":["-state","STATE","-name","x"]},
			"b": {"command":"FAKE","args":["-state","STATE","-name","x"]}}}`,
		tools: map[string][]string{
			"a__links": {"a+fake://x/hello", "a+fake://x/counter", "a+fake://x/echo/linked"},
			"b__links": {"b+fake://x/hello", "b+fake://x/counter", "b+fake://x/echo/linked"},
		},
	}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			tg := startGateway(t, c.config)
			p := newHTTPPeer(t, tg.url, `{}`)
			for tool, want := range c.tools {
				m, _ := p.call("tools/call", fmt.Sprintf(`{"name":%q,"arguments":{}}`, tool))
				got := linkedURIs(t, m)
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("%s: linked URIs (-want +got):\n%s", tool, diff)
				}
				for _, uri := range got {
					m, _ := p.call("resources/read", fmt.Sprintf(`{"uri":%q}`, uri))
					var r struct{ Contents []struct{ URI, Text string } }
					result(t, m, &r)
					if len(r.Contents) != 1 || r.Contents[0].URI != uri {
						t.Errorf("read %s = %s, want contents with the URI read", uri, m.Result)
					}
				}
			}
		})
	}
}

func TestURIRewriterChangesOnlyTheURIs(t *testing.T) {
	rename := func(uri string) string {
		if rest, ok := strings.CutPrefix(uri, "fake://"); ok {
			return "p+fake://" + rest + "?a&b"
		}
		return uri
	}
	for _, c := range []struct{ name, in, want string }{{
		name: "resources/read contents",
		in:   `{ "contents" : [ {"text":"x", "uri" : "fake://a/1"},{"uri":"other://z"} ] ,"_meta":{"uri":"fake://no"}}`,
		want: `{ "contents" : [ {"text":"x", "uri" : "p+fake://a/1?a&b"},{"uri":"other://z"} ] ,"_meta":{"uri":"fake://no"}}`,
	}, {
		name: "a tool's links and embedded resources",
		in:   `{"content":[{"type":"text","text":"\"uri\":\"fake://t\""},{"type":"resource_link","uri":"fake:\/\/l","name":"n"},{"type":"resource","resource":{"uri":"fake://e","text":"t"}}],"structuredContent":{"uri":"fake://s"},"isError":false}`,
		want: `{"content":[{"type":"text","text":"\"uri\":\"fake://t\""},{"type":"resource_link","uri":"p+fake://l?a&b","name":"n"},{"type":"resource","resource":{"uri":"p+fake://e?a&b","text":"t"}}],"structuredContent":{"uri":"fake://s"},"isError":false}`,
	}, {
		name: "a prompt's messages",
		in:   `{"description":"d","messages":[{"role":"user","content":{"type":"resource","resource":{"uri":"fake://m","text":"t"}}},{"role":"user","content":{"type":"resource_link","uri":"fake://k"}}]}`,
		want: `{"description":"d","messages":[{"role":"user","content":{"type":"resource","resource":{"uri":"p+fake://m?a&b","text":"t"}}},{"role":"user","content":{"type":"resource_link","uri":"p+fake://k?a&b"}}]}`,
	}, {
		name: "nothing to rename",
		in:   `{"content":[{"type":"resource_link","uri":"other://l"}]}`,
		want: `{"content":[{"type":"resource_link","uri":"other://l"}]}`,
	}, {
		name: "not an object",
		in:   `["uri"]`,
		want: `["uri"]`,
	}, {
		name: "cut short",
		in:   `{"content":[{"type":"resource_link","uri":"fake://l"`,
		want: `{"content":[{"type":"resource_link","uri":"p+fake://l?a&b"`,
	}} {
		t.Run(c.name, func(t *testing.T) {
			rw := uriRewriter{rawEditor{data: []byte(c.in)}, rename}
			rw.result()
			if got := string(rw.output()); got != c.want {
				t.Errorf("rewrite(%s)\n = %s\nwant %s", c.in, got, c.want)
			}
			if json.Valid([]byte(c.in)) && !json.Valid(rw.output()) {
				t.Errorf("rewrite(%s) is not valid JSON", c.in)
			}
		})
	}
}

// BenchmarkClientURIs measures what renaming URIs costs a result: none for
// one without URIs, and for a tool's links to a prefixed server's resources.
//
//	go test -run '^$' -bench ClientURIs -benchmem .
func BenchmarkClientURIs(b *testing.B) {
	tg := startGateway(b, `{"mcpServers":{
		"a": {"command":"FAKE","args":["-state","STATE","-name","a"]},
		"b": {"command":"FAKE","args":["-state","STATE","-name","b"],"prefix":"bp"}}}`)
	var srv *backend
	for _, be := range tg.gw.backendList() {
		if be.name == "b" {
			srv = be
		}
	}
	for _, c := range []struct{ name, result string }{
		{"text", `{"content":[{"type":"text","text":"hello"}]}`},
		{"links", `{"content":[{"type":"resource_link","uri":"fake://b/hello","name":"hello","mimeType":"text/plain"},{"type":"resource","resource":{"uri":"fake://b/counter","mimeType":"text/plain","text":"0"}},{"type":"resource_link","uri":"fake://b/echo/linked","name":"linked"}]}`},
	} {
		b.Run(c.name, func(b *testing.B) {
			result := json.RawMessage(c.result)
			for b.Loop() {
				clientURIs(tg.gw.currentCatalog, tg.gw.backendList, srv, result)
			}
		})
	}
}

// FuzzURIRewriter checks that renaming URIs never fails on any input, and
// keeps valid JSON valid.
func FuzzURIRewriter(f *testing.F) {
	for _, seed := range []string{
		`{"contents":[{"uri":"fake://a"}]}`,
		`{"content":[{"type":"resource","resource":{"uri":"fake://e"}},{"type":"resource_link","uri":"fake://l"}]}`,
		`{"messages":[{"content":{"uri":"fake://m"}}]}`,
		`{"`, `{"content":[{"uri":"fake`, `{"content":{"uri":1}}`, `[]`, ``,
		`{"task":{"taskId":"t"},"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"t"}}}`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, in string) {
		rw := uriRewriter{rawEditor{data: []byte(in)}, func(uri string) string { return "p+" + uri }}
		rw.result()
		out := rw.output()
		ids := clientTaskID([]byte(in), "C")
		if json.Valid([]byte(in)) && (!json.Valid(out) || !json.Valid(ids)) {
			t.Errorf("valid %s became %s / %s", in, out, ids)
		}
	})
}
