package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSecretWarnings(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config.json")
	os.WriteFile(path, []byte(`{}`), 0o644)
	c, err := ParseConfig(path, []byte(`{"mcpServers":{"a":{"command":"x","env":{"K":"v"}}}}`), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if w := secretWarnings(path, c); len(w) != 1 || !strings.Contains(w[0], "chmod 600") {
		t.Errorf("secretWarnings on a world-readable file with env = %q, want one warning", w)
	}
	os.Chmod(path, 0o600)
	if w := secretWarnings(path, c); len(w) != 0 {
		t.Errorf("secretWarnings on a private file = %q, want none", w)
	}

	// Values taken from the environment or from files are not in the file:
	// a Kubernetes ConfigMap, mounted readable by all, need not warn.
	os.Chmod(path, 0o644)
	os.WriteFile(filepath.Join(dir, "token"), []byte("t"), 0o600)
	c, err = ParseConfig(path, []byte(`{"mcpServers":{"a":{"command":"x","env":{"K":"${file:token}","V":"${V}"}},
		"b":{"url":"https://x.example/mcp","headers":{"Authorization":"Bearer ${file:token}"}}}}`), envOf(map[string]string{"V": "v"}), nil)
	if err != nil {
		t.Fatal(err)
	}
	if w := secretWarnings(path, c); len(w) != 0 {
		t.Errorf("secretWarnings on a readable file whose values are all references = %q, want none", w)
	}

	// A client's token file readable by others is warned of, by the client.
	os.WriteFile(filepath.Join(dir, "alice.token"), []byte(aliceToken), 0o644)
	c, err = ParseConfig(path, []byte(`{"clients":{"alice":{"tokenFile":"alice.token"}},"mcpServers":{"a":{"command":"x"}}}`), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if w := secretWarnings(path, c); len(w) != 1 || !strings.Contains(w[0], "client alice's token file") {
		t.Errorf("secretWarnings with a client's token file readable by others = %q, want one naming the client", w)
	}
}

func TestCheckMasksSecrets(t *testing.T) {
	env := map[string]string{"SECRET": "s3cr3t-v4lue", "PORT": "8443", "EMPTY": ""}
	for _, tc := range []struct {
		name, server string
		secret       string   // must not be in the output
		want         []string // must be in the output
	}{
		{"a variable in args", `{"command":"x","args":["--token=${SECRET}","--verbose"]}`, "s3cr3t-v4lue", []string{`"--token=****"`, `"--verbose"`}},
		{"a variable in command", `{"command":"/opt/${SECRET}/bin/x"}`, "s3cr3t-v4lue", []string{`"command": "/opt/****/bin/x"`}},
		{"a variable in cwd", `{"command":"x","cwd":"/srv/${SECRET}"}`, "s3cr3t-v4lue", []string{`"cwd": "/srv/****"`}},
		{"the default of an empty variable", `{"command":"x","args":["${EMPTY:-s3cr3t-v4lue}"]}`, "s3cr3t-v4lue", []string{`"****"`}},
		{"a literal env value", `{"command":"x","env":{"T":"s3cr3t-v4lue"}}`, "s3cr3t-v4lue", []string{`"T": "****"`}},
		{"a variable in an env value", `{"command":"x","env":{"T":"${SECRET}"}}`, "s3cr3t-v4lue", []string{`"T": "****"`}},
		{"a variable in a header", `{"url":"https://example.com/mcp","headers":{"Authorization":"Bearer ${SECRET}"}}`, "s3cr3t-v4lue", []string{`"Authorization": "****"`}},
		{"a variable in a URL's path", `{"url":"https://example.com/${SECRET}/mcp"}`, "s3cr3t-v4lue", []string{`"url": "https://example.com/****/mcp"`}},
		{"a variable in a URL's port", `{"url":"https://example.com:${PORT}/mcp"}`, "8443", []string{`"url": "****"`}},
		{"a literal password in a URL", `{"url":"https://me:s3cr3t-v4lue@example.com/mcp"}`, "s3cr3t-v4lue", []string{`"url": "https://me:****@example.com/mcp"`}},
		{"a variable password in a URL", `{"url":"https://me:${SECRET}@example.com/mcp"}`, "s3cr3t-v4lue", []string{`"url": "https://me:****@example.com/mcp"`}},
		{"a token as a URL's user", `{"url":"https://s3cr3t-v4lue@example.com/mcp"}`, "s3cr3t-v4lue", []string{`"url": "https://****@example.com/mcp"`}},
		{"query values in a URL", `{"url":"https://example.com/mcp?key=s3cr3t-v4lue&s3cr3t-v4lue&page=2"}`, "s3cr3t-v4lue", []string{`"url": "https://example.com/mcp?key=****&****&page=****"`}},
		{"a fragment of a URL", `{"url":"https://example.com/mcp#access_token=s3cr3t-v4lue"}`, "s3cr3t-v4lue", []string{`"url": "https://example.com/mcp#****"`}},
		{"a literal $ is no variable", `{"command":"x","args":["$${SECRET}","a$b"]}`, "s3cr3t-v4lue", []string{`"${SECRET}"`, `"a$b"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := ParseConfig("config.json", []byte(`{"mcpServers":{"s":`+tc.server+`}}`), envOf(env), nil)
			if err != nil {
				t.Fatal(err)
			}
			out := string(c.resolved())
			if strings.Contains(out, tc.secret) {
				t.Errorf("-check prints %q:\n%s", tc.secret, out)
			}
			for _, want := range tc.want {
				if !strings.Contains(out, want) {
					t.Errorf("-check output lacks %s:\n%s", want, out)
				}
			}
		})
	}
}
