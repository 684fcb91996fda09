package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// clientDocs returns the JSON documents -client-config printed, its
// comment lines left out.
func clientDocs(t *testing.T, out string) []map[string]map[string]map[string]any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(stripJSONC([]byte(out))))
	var docs []map[string]map[string]map[string]any
	for {
		var doc map[string]map[string]map[string]any
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return docs
		}
		if err != nil {
			t.Fatalf("-client-config printed what is not JSON documents: %v\n%s", err, out)
		}
		docs = append(docs, doc)
	}
}

func TestClientConfigPrintsEachClientsEntry(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "corral.json")
	os.WriteFile(path, []byte(`{"listen":"0.0.0.0:9123","authTokenEnv":"MY_TOKEN","mcpServers":{"a":{"command":"x"}}}`), 0o600)
	t.Setenv("MY_TOKEN", "t0ken")
	exe, _ := os.Executable()
	exe, _ = filepath.EvalSymlinks(exe)
	rel, err := filepath.Rel(mustGetwd(t), path)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		client, key, urlKey string
		typed               bool   // entries have "type"
		token               string // the Authorization header
		path                bool   // the stdio entry gives corral the PATH
	}{
		{"claude-desktop", "mcpServers", "", false, "", true},
		{"claude-code", "mcpServers", "url", true, "Bearer ${MY_TOKEN}", false},
		{"cursor", "mcpServers", "url", false, "Bearer ${env:MY_TOKEN}", false},
		{"vscode", "servers", "url", true, "Bearer ${env:MY_TOKEN}", false},
		{"windsurf", "mcpServers", "serverUrl", false, "Bearer ${env:MY_TOKEN}", false},
	} {
		t.Run(tc.client, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			// A relative -config: the entry names it by its absolute path.
			if code := run([]string{"-client-config", tc.client, "-config", rel}, strings.NewReader(""), &stdout, &stderr); code != 0 {
				t.Fatalf("-client-config %s exited %d: %s", tc.client, code, stderr.String())
			}
			docs := clientDocs(t, stdout.String())
			if want := 1 + btoi(tc.urlKey != ""); len(docs) != want {
				t.Fatalf("-client-config %s printed %d documents, want %d:\n%s", tc.client, len(docs), want, stdout.String())
			}
			stdio := docs[0][tc.key]["corral"]
			if stdio["command"] != exe || !slices.Equal(toStrings(stdio["args"]), []string{"-stdio", "-config", path}) {
				t.Errorf("stdio entry = %v, want command %s and args -stdio -config %s", stdio, exe, path)
			}
			if typ, _ := stdio["type"].(string); (typ == "stdio") != tc.typed {
				t.Errorf("stdio entry's type = %q; want it only for the clients that have one", typ)
			}
			env, _ := stdio["env"].(map[string]any)
			if (env["PATH"] == os.Getenv("PATH")) != tc.path {
				t.Errorf("stdio entry's env = %v; want PATH for Claude Desktop only", env)
			}
			// corral reads the client's file as it is: the entry names corral.
			data, _ := json.Marshal(docs[0])
			c, err := ParseConfig("client.json", data, envOf(nil), nil)
			if err != nil || c.MCPServers["corral"].Command != exe {
				t.Errorf("the stdio entry does not parse as a server running %s: %v", exe, err)
			}
			if tc.urlKey == "" {
				return
			}
			remote := docs[1][tc.key]["corral"]
			if remote[tc.urlKey] != "http://127.0.0.1:9123/mcp" {
				t.Errorf("HTTP entry = %v, want %s: http://127.0.0.1:9123/mcp", remote, tc.urlKey)
			}
			if typ, _ := remote["type"].(string); (typ == "http") != tc.typed {
				t.Errorf("HTTP entry's type = %q", typ)
			}
			if h, _ := remote["headers"].(map[string]any); h["Authorization"] != tc.token {
				t.Errorf("HTTP entry's headers = %v, want Authorization %q", h, tc.token)
			}
			delete(remote, "headers") // its reference is the client's syntax
			data, _ = json.Marshal(docs[1])
			c, err = ParseConfig("client.json", data, envOf(nil), nil)
			if err != nil || c.MCPServers["corral"].URL != "http://127.0.0.1:9123/mcp" {
				t.Errorf("the HTTP entry does not parse as a remote server: %v", err)
			}
			if strings.Contains(stdout.String(), "t0ken") {
				t.Errorf("-client-config printed the token:\n%s", stdout.String())
			}
		})
	}

	var stdout, stderr bytes.Buffer
	if code := run([]string{"-client-config", "zed", "-config", path}, strings.NewReader(""), &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), `-client-config "zed": unknown client; write one of claude-desktop, claude-code, cursor, vscode, windsurf`) {
		t.Errorf("-client-config zed exited %d: %s; want 2 and the clients it knows", code, stderr.String())
	}
}

func TestWindsurfServerUrlIsAURL(t *testing.T) {
	c := mustParse(t, `{"mcpServers":{"w":{"serverUrl":"https://example.com/mcp","headers":{"A":"b"}}}}`, nil)
	if s := c.MCPServers["w"]; s.URL != "https://example.com/mcp" || s.Type != "http" {
		t.Errorf("serverUrl gave url %q, type %q; want a remote server", s.URL, s.Type)
	}
	_, err := ParseConfig("c.json", []byte(`{"mcpServers":{"w":{"serverUrl":"https://a/mcp","url":"https://b/mcp"}}}`), envOf(nil), nil)
	if err == nil || !strings.Contains(err.Error(), `mcpServers.w.serverUrl: the entry has "url" too; keep one of the two`) {
		t.Errorf("serverUrl with url: err = %v", err)
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func toStrings(v any) []string {
	var out []string
	for _, s := range v.([]any) {
		out = append(out, s.(string))
	}
	return out
}

func mustGetwd(t *testing.T) string {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return wd
}
