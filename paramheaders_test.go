package main

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestToolParamHeadersFollowTheRulesOfXMCPHeader(t *testing.T) {
	tool := func(props string) json.RawMessage {
		return json.RawMessage(`{"name":"t","inputSchema":{"type":"object","properties":` + props + `}}`)
	}
	for _, tc := range []struct {
		name    string
		tool    json.RawMessage
		want    []string // header: path, in any order
		wantErr string
	}{
		{"a tool without annotations has none", tool(`{"a":{"type":"string"}}`), nil, ""},
		{"a string, an integer and a nested boolean are accepted", tool(`{"region":{"type":"string","x-mcp-header":"Region"},"n":{"type":"integer","x-mcp-header":"N"},"o":{"type":"object","properties":{"dry":{"type":"boolean","x-mcp-header":"Dry"}}}}`),
			[]string{"Mcp-Param-Region:region", "Mcp-Param-N:n", "Mcp-Param-Dry:o.dry"}, ""},
		{"an annotation inside a default value is data", tool(`{"a":{"type":"object","default":{"x-mcp-header":"X"}}}`), nil, ""},
		{"a property named x-mcp-header is a property", tool(`{"x-mcp-header":{"type":"string"}}`), nil, ""},
		{"an empty name is refused", tool(`{"a":{"type":"string","x-mcp-header":""}}`), nil, "non-empty string"},
		{"a name that is not a token is refused", tool(`{"a":{"type":"string","x-mcp-header":"Re gion"}}`), nil, "not an HTTP field-name token"},
		{"a name with a line feed is refused", tool(`{"a":{"type":"string","x-mcp-header":"A\nB"}}`), nil, "not an HTTP field-name token"},
		{"a number is refused", tool(`{"a":{"type":"number","x-mcp-header":"A"}}`), nil, "number is not allowed"},
		{"an object is refused", tool(`{"a":{"type":"object","x-mcp-header":"A"}}`), nil, "number is not allowed"},
		{"names equal but for case are refused", tool(`{"a":{"type":"string","x-mcp-header":"Zone"},"b":{"type":"string","x-mcp-header":"zone"}}`), nil, "case-insensitively"},
		{"an annotation under items is refused", tool(`{"a":{"type":"array","items":{"type":"string","x-mcp-header":"A"}}}`), nil, "not on a chain"},
		{"an annotation under anyOf is refused", tool(`{"a":{"anyOf":[{"type":"string","x-mcp-header":"A"}]}}`), nil, "not on a chain"},
		{"an annotation in $defs is refused", json.RawMessage(`{"name":"t","inputSchema":{"type":"object","$defs":{"d":{"type":"string","x-mcp-header":"D"}}}}`), nil, "not on a chain"},
		{"an annotation on the schema's root is refused", json.RawMessage(`{"name":"t","inputSchema":{"type":"string","x-mcp-header":"R"}}`), nil, "root"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hs, err := toolParamHeaders(tc.tool)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("toolParamHeaders = %v, %v; want an error with %q", hs, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, h := range hs {
				got = append(got, h.header()+":"+strings.Join(h.path, "."))
			}
			if strings.Join(sortedCopy(got), ",") != strings.Join(sortedCopy(tc.want), ",") {
				t.Errorf("toolParamHeaders = %q, want %q", got, tc.want)
			}
		})
	}
}

func sortedCopy(s []string) []string {
	out := append([]string(nil), s...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

// paramsTool is the tool fakeserver -param-headers lists as "params".
var paramsTool = json.RawMessage(`{"name":"params","inputSchema":{"type":"object","properties":{` +
	`"region":{"type":"string","x-mcp-header":"Region"},"count":{"type":"integer","x-mcp-header":"Count"},` +
	`"opts":{"type":"object","properties":{"dry":{"type":"boolean","x-mcp-header":"Dry"}}},"query":{"type":"string"}}}}`)

func TestParamHeaderValuesEncodeAsTheSpecificationShows(t *testing.T) {
	hs, err := toolParamHeaders(json.RawMessage(`{"name":"t","inputSchema":{"type":"object","properties":{"v":{"type":"string","x-mcp-header":"V"}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	// The table of "Value Encoding" in the 2026-07-28 Streamable HTTP page.
	for value, want := range map[string]string{
		"us-west1":           "us-west1",
		"Hello, 世界":          "=?base64?SGVsbG8sIOS4lueVjA==?=",
		" padded ":           "=?base64?IHBhZGRlZCA=?=",
		"line1\nline2":       "=?base64?bGluZTEKbGluZTI=?=",
		"=?base64?literal?=": "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?=",
	} {
		args, _ := json.Marshal(map[string]string{"v": value})
		if got := paramHeaderValues(hs, args)["Mcp-Param-V"]; got != want {
			t.Errorf("paramHeaderValues(%q) = %q, want %q", value, got, want)
		}
	}
	hs, _ = toolParamHeaders(paramsTool)
	got := paramHeaderValues(hs, json.RawMessage(`{"region":"eu","count":42,"opts":{"dry":false},"query":"q"}`))
	if got["Mcp-Param-Region"] != "eu" || got["Mcp-Param-Count"] != "42" || got["Mcp-Param-Dry"] != "false" || len(got) != 3 {
		t.Errorf("paramHeaderValues = %v, want Region eu, Count 42, Dry false", got)
	}
	if got := paramHeaderValues(hs, json.RawMessage(`{"region":null}`)); len(got) != 0 {
		t.Errorf("paramHeaderValues of a null and absent arguments = %v, want no header", got)
	}
}

func TestCheckParamHeadersAnswersHeaderMismatch(t *testing.T) {
	hs, err := toolParamHeaders(paramsTool)
	if err != nil {
		t.Fatal(err)
	}
	args := json.RawMessage(`{"region":"us-west1","count":42,"opts":{"dry":true},"query":"select"}`)
	full := []string{"Mcp-Param-Region", "us-west1", "Mcp-Param-Count", "42", "Mcp-Param-Dry", "true"}
	with := func(kv ...string) http.Header {
		h := http.Header{}
		for i := 0; i+1 < len(kv); i += 2 {
			if kv[i+1] == "" {
				h.Del(kv[i])
			} else {
				h.Set(kv[i], kv[i+1])
			}
		}
		return h
	}
	for _, tc := range []struct {
		name    string
		header  http.Header
		args    json.RawMessage
		wantErr string
	}{
		{"headers that match pass", with(full...), args, ""},
		{"a Base64 header that decodes to the value passes", with(append(full, "Mcp-Param-Region", "=?base64?dXMtd2VzdDE=?=")...), args, ""},
		{"an integer compared as a number passes", with(append(full, "Mcp-Param-Count", "42.0")...), args, ""},
		{"a header for a parameter the tool does not annotate is ignored", with(append(full, "Mcp-Param-Query", "other")...), args, ""},
		{"no header for an absent argument passes", with(), json.RawMessage(`{"query":"q"}`), ""},
		{"a header names another value", with(append(full, "Mcp-Param-Region", "eu-west1")...), args, `header is "eu-west1", and the arguments' region is "us-west1"`},
		{"a missing header", with(append(full, "Mcp-Param-Dry", "")...), args, "Mcp-Param-Dry header is missing"},
		{"a header without its argument", with("Mcp-Param-Region", "us-west1"), json.RawMessage(`{}`), "the arguments have no region"},
		{"invalid Base64", with(append(full, "Mcp-Param-Region", "=?base64?!!!?=")...), args, "not valid Base64"},
		{"a byte outside ASCII", with(append(full, "Mcp-Param-Region", "us-wést1")...), args, "holds the byte 0xc3"},
		{"an integer that differs", with(append(full, "Mcp-Param-Count", "43")...), args, "Mcp-Param-Count header is \"43\""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			werr := checkParamHeaders(tc.header, "params", hs, tc.args)
			switch {
			case tc.wantErr == "" && werr != nil:
				t.Errorf("checkParamHeaders = %v, want nil", werr.Message)
			case tc.wantErr != "" && (werr == nil || werr.Code != codeHeaderMismatch || !strings.Contains(werr.Message, tc.wantErr)):
				t.Errorf("checkParamHeaders = %+v, want -32020 with %q", werr, tc.wantErr)
			}
		})
	}
}

// TestModernClientsParamHeadersAreCheckedAndInvalidToolsLeftOut drives a
// gateway over HTTP as a 2026-07-28 client: a call whose Mcp-Param headers
// match reaches the server; a mismatch, a missing header and invalid Base64
// get 400 with -32020 and never reach it; a 1 MB header gets 431 from the
// HTTP server; and the tool whose annotation is invalid is in no list and
// is logged once, naming the server, the tool and the fix.
func TestModernClientsParamHeadersAreCheckedAndInvalidToolsLeftOut(t *testing.T) {
	t.Parallel()
	ll := &logLines{t: t, more: make(chan struct{})}
	tg := startGateway(t, `{"mcpServers":{"a":{"command":"FAKE","args":["-state","STATE","-name","a","-param-headers"]}}}`, func(g *Gateway) {
		g.log = slog.New(slog.NewTextHandler(ll, nil))
	})
	meta := modernMeta(`{}`)
	_, m, _ := modernPost(t, tg.url, "tools/list", `{`+meta+`}`)
	var list struct{ Tools []struct{ Name string } }
	result(t, m, &list)
	var names []string
	for _, tl := range list.Tools {
		names = append(names, tl.Name)
	}
	if !strings.Contains(","+strings.Join(names, ",")+",", ",params,") || strings.Contains(strings.Join(names, ","), "bad_header") {
		t.Errorf("tools/list = %q, want params and not bad_header", names)
	}
	ll.wait(`tool \\"bad_header\\" of server \\"a\\" is left out of tools/list: x-mcp-header \\"Ratio\\" is on property ratio, whose type is not string, integer or boolean .*inputSchema must be fixed`)

	call := `{"name":"params","arguments":{"region":"Hello, 世界","count":7,"query":"q"},` + meta + `}`
	status, m, _ := modernPost(t, tg.url, "tools/call", call, "Mcp-Param-Region", "=?base64?SGVsbG8sIOS4lueVjA==?=", "Mcp-Param-Count", "7")
	if status != 200 || m.Error != nil || !strings.Contains(string(m.Result), `\"count\":7`) {
		t.Errorf("a call whose headers match = %d %s %v, want the server's answer", status, m.Result, m.Error)
	}
	for _, tc := range []struct {
		name string
		hdr  []string
		want string
	}{
		{"a mismatch", []string{"Mcp-Param-Region", "us-west1", "Mcp-Param-Count", "7"}, "Mcp-Param-Region header is \"us-west1\""},
		{"a missing header", []string{"Mcp-Param-Region", "=?base64?SGVsbG8sIOS4lueVjA==?="}, "Mcp-Param-Count header is missing"},
		{"invalid Base64", []string{"Mcp-Param-Region", "=?base64?%%%?=", "Mcp-Param-Count", "7"}, "not valid Base64"},
	} {
		status, m, _ := modernPost(t, tg.url, "tools/call", call, tc.hdr...)
		if status != http.StatusBadRequest || m.Error == nil || m.Error.Code != codeHeaderMismatch || !strings.Contains(m.Error.Message, tc.want) {
			t.Errorf("%s: %d %+v, want 400 with -32020 saying %q", tc.name, status, m.Error, tc.want)
		}
	}
	if _, ids := serverCalls(t, tg.dir, "params"); len(ids) != 1 {
		t.Errorf("the server heard %d calls of params, want 1: the refused ones never reach it", len(ids))
	}

	// A header of 1 MB is over maxHeaderBytes: the HTTP server refuses it
	// before corral reads the body.
	req, _ := http.NewRequest("POST", tg.url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":`+call+`}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Param-Region", strings.Repeat("a", 1<<20))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("a 1 MB Mcp-Param header got %s, want 431", resp.Status)
	}
}

// TestRemoteModernServersGetTheParamHeadersOfAnnotatedArguments checks the
// client side: corral's tools/call to a 2026-07-28 remote server carries
// an Mcp-Param header for each annotated argument it has, encoded.
func TestRemoteModernServersGetTheParamHeadersOfAnnotatedArguments(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var got http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = r.Header.Clone()
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":{"content":[]}}`))
	}))
	defer srv.Close()
	c := dialRemote("test", srv.URL, nil, nil, testLogger(t))
	defer c.Close()
	hs, _ := toolParamHeaders(paramsTool)
	c.paramHeaders = func(tool string) []paramHeader {
		if tool == "params" {
			return hs
		}
		return nil
	}
	line := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"params","arguments":{"region":" padded ","count":-7,"opts":{"dry":true}},` + modernMeta(`{}`) + `}}`
	if err := c.WriteMessage([]byte(line)); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.ReadMessage()
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("no answer")
	}
	mu.Lock()
	defer mu.Unlock()
	for k, want := range map[string]string{"Mcp-Param-Region": "=?base64?IHBhZGRlZCA=?=", "Mcp-Param-Count": "-7", "Mcp-Param-Dry": "true", "Mcp-Name": "params", "Mcp-Method": "tools/call"} {
		if got.Get(k) != want {
			t.Errorf("%s = %q, want %q", k, got.Get(k), want)
		}
	}
}

// TestCheckListsToolsLeftOutForTheirParamHeaders: -check reads the tools
// a server listed when it last ran (its catalog cache) and names each one
// corral leaves out for its x-mcp-header, with the reason and the fix.
func TestCheckListsToolsLeftOutForTheirParamHeaders(t *testing.T) {
	dir := t.TempDir()
	cfg, err := ParseConfig(dir+"/corral.json", []byte(`{"cacheDir": "cache", "mcpServers": {"a": {"command": "x", "start": "lazy"}}}`), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	cacheDir, err := cfg.catalogCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	if got := invalidToolsReport(cfg); len(got) != 0 {
		t.Errorf("invalidToolsReport before the server ran = %q, want nothing", got)
	}
	cc := newCatalogCache(cacheDir, cfg, cfg.MCPServers["a"])
	if err := cc.save(&cachedCatalog{Version: catalogCacheVersion, Server: "a", Capabilities: capabilities{"tools": json.RawMessage(`{}`)},
		Lists: map[string][]json.RawMessage{"tools": {paramsTool, json.RawMessage(`{"name":"bad","inputSchema":{"type":"object","properties":{"r":{"type":"number","x-mcp-header":"R"}}}}`)}}}); err != nil {
		t.Fatal(err)
	}
	got := string(invalidToolsReport(cfg))
	if !strings.Contains(got, `tool "bad" of server "a" is left out of tools/list: x-mcp-header "R" is on property r`) || strings.Contains(got, "params") || strings.Count(got, "\n") != 1 {
		t.Errorf("invalidToolsReport = %q, want one line naming tool bad of server a, why and the fix", got)
	}
}

// BenchmarkCheckParamHeaders measures the check of a modern client's
// tools/call of an annotated tool, whose annotations the catalog read when
// it was built: three headers compared with the arguments.
func BenchmarkCheckParamHeaders(b *testing.B) {
	hs, _ := toolParamHeaders(paramsTool)
	args := json.RawMessage(`{"region":"us-west1","count":42,"opts":{"dry":true},"query":"select"}`)
	h := http.Header{}
	h.Set("Mcp-Param-Region", "us-west1")
	h.Set("Mcp-Param-Count", "42")
	h.Set("Mcp-Param-Dry", "true")
	for b.Loop() {
		if werr := checkParamHeaders(h, "params", hs, args); werr != nil {
			b.Fatal(werr.Message)
		}
	}
}

// BenchmarkToolParamHeaders measures reading a tool's annotations, as a
// catalog build does for every tool: one with none (the common case, not
// decoded) and the annotated one.
func BenchmarkToolParamHeaders(b *testing.B) {
	plain := json.RawMessage(`{"name":"echo","description":"Answers the given text.","inputSchema":{"type":"object","properties":{"text":{"type":"string"}}}}`)
	for _, tc := range []struct {
		name string
		tool json.RawMessage
	}{{"none", plain}, {"annotated", paramsTool}} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				toolParamHeaders(tc.tool)
			}
		})
	}
}
