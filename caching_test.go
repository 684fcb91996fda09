package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestCompleteReplyCarriesTheCachingHintsItIsGiven(t *testing.T) {
	body := func(r *reply) string {
		var b bytes.Buffer
		r.WriteTo(&b)
		var m wireMsg
		if err := json.Unmarshal(b.Bytes(), &m); err != nil {
			t.Fatalf("%s: %v", b.Bytes(), err)
		}
		return string(m.Result)
	}
	for _, tc := range []struct {
		name   string
		result string
		cache  cacheHints
		want   []string // substrings
		not    []string
	}{
		{"a merged list gets its ttlMs and private", `{"tools":[]}`, cacheHints{cacheable: true, ttlMs: 5000},
			[]string{`"resultType":"complete"`, `"ttlMs":5000`, `"cacheScope":"private"`}, nil},
		{"a server's hints are kept", `{"contents":[],"ttlMs":60000,"cacheScope":"public"}`, cacheHints{cacheable: true},
			[]string{`"ttlMs":60000`, `"cacheScope":"public"`}, nil},
		{"public becomes private where callers differ", `{"contents":[],"ttlMs":60000,"cacheScope":"public"}`, cacheHints{cacheable: true, private: true},
			[]string{`"ttlMs":60000`, `"cacheScope":"private"`}, []string{"public"}},
		{"a retry with request state gets ttlMs 0", `{"contents":[],"ttlMs":60000,"cacheScope":"private"}`, cacheHints{cacheable: true, noStore: true},
			[]string{`"ttlMs":0`}, []string{"60000"}},
		{"a retry with request state and no ttlMs gets 0", `{"contents":[]}`, cacheHints{cacheable: true, ttlMs: 9, noStore: true},
			[]string{`"ttlMs":0`}, []string{`"ttlMs":9`}},
		{"input_required carries no hints", `{"resultType":"input_required","inputRequests":{}}`, cacheHints{cacheable: true, ttlMs: 5000},
			nil, []string{"ttlMs", "cacheScope", "complete"}},
		{"a result that is not cacheable carries none", `{"content":[]}`, cacheHints{},
			[]string{`"resultType":"complete"`}, []string{"ttlMs", "cacheScope"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := body(completeReply(json.RawMessage(`1`), json.RawMessage(tc.result), tc.cache))
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("completeReply(%s, %+v) = %s, want %s in it", tc.result, tc.cache, got, w)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(got, n) {
					t.Errorf("completeReply(%s, %+v) = %s, want no %s in it", tc.result, tc.cache, got, n)
				}
			}
		})
	}
}

// TestModernListsCarryTheSmallestTTLOfTheirServers: corral's merged lists
// carry the smallest ttlMs of the servers merged, and are private; a
// legacy server, whose lists carry none, makes it 0.
func TestModernListsCarryTheSmallestTTLOfTheirServers(t *testing.T) {
	t.Parallel()
	cache := func(url string) (ttl int, scope string) {
		t.Helper()
		_, m, _ := modernPost(t, url, "tools/list", `{`+modernMeta(`{}`)+`}`)
		var r struct {
			TTLMs      int    `json:"ttlMs"`
			CacheScope string `json:"cacheScope"`
		}
		result(t, m, &r)
		return r.TTLMs, r.CacheScope
	}
	modern := `"a":{"command":"FAKE","args":["-state","STATE","-name","a","-era","modern","-ttl-ms","30000"],"prefix":"a"},
		"b":{"command":"FAKE","args":["-state","STATE","-name","b","-era","modern","-ttl-ms","5000"],"prefix":"b"}`
	tg := startGateway(t, `{"mcpServers":{`+modern+`}}`)
	if ttl, scope := cache(tg.url); ttl != 5000 || scope != "private" {
		t.Errorf("tools/list of two modern servers = ttlMs %d, %q; want 5000 (the smaller), private", ttl, scope)
	}
	tg = startGateway(t, `{"mcpServers":{`+modern+`,"c":{"command":"FAKE","args":["-state","STATE","-name","c"],"prefix":"c"}}}`)
	if ttl, _ := cache(tg.url); ttl != 0 {
		t.Errorf("tools/list with a legacy server = ttlMs %d, want 0", ttl)
	}
}

// TestAServersPublicResultIsPrivateWhereCallersDiffer: a modern server's
// cacheScope "public" passes as it is when every caller sees the same,
// and becomes "private" once profiles make callers differ.
func TestAServersPublicResultIsPrivateWhereCallersDiffer(t *testing.T) {
	t.Parallel()
	server := `"a":{"command":"FAKE","args":["-state","STATE","-name","a","-era","modern","-ttl-ms","60000","-cache-scope","public"]}`
	read := func(url string) (scope string, ttl int) {
		t.Helper()
		_, m, _ := modernPost(t, url, "resources/read", `{"uri":"fake://a/hello",`+modernMeta(`{}`)+`}`)
		var r struct {
			TTLMs      int    `json:"ttlMs"`
			CacheScope string `json:"cacheScope"`
		}
		result(t, m, &r)
		return r.CacheScope, r.TTLMs
	}
	tg := startGateway(t, `{"mcpServers":{`+server+`}}`)
	if scope, ttl := read(tg.url); scope != "public" || ttl != 60000 {
		t.Errorf("resources/read with one view for all = %q %d, want the server's public and 60000", scope, ttl)
	}
	tg = startGateway(t, `{"profiles":{"p":{"servers":{"a":{}}}},"mcpServers":{`+server+`}}`)
	if scope, ttl := read(tg.url); scope != "private" || ttl != 60000 {
		t.Errorf("resources/read with profiles = %q %d, want private and the server's 60000", scope, ttl)
	}
}
