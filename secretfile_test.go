package main

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// secretDir returns a directory holding the secret files the tests of
// ${file:PATH} read, with config.json as the path of a config beside them.
func secretDir(t *testing.T) (dir, config string) {
	t.Helper()
	dir = t.TempDir()
	for name, content := range map[string]string{
		"token":       "s3cr3t-t0ken\n",
		"crlf":        "s3cr3t-crlf\r\n",
		"bare":        "s3cr3t-bare",
		"lines":       "s3cr3t-line1\ns3cr3t-line2\n",
		"empty":       "",
		"nul":         "a\x00b",
		"sub/nested":  "s3cr3t-nested\n",
		"big":         strings.Repeat("x", maxSecretFileBytes+1),
		"just-enough": strings.Repeat("y", maxSecretFileBytes-1) + "\n",
	} {
		path := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(path), 0o700)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir, filepath.Join(dir, "config.json")
}

func TestFileReferencesReadSecrets(t *testing.T) {
	dir, config := secretDir(t)
	tests := []struct {
		name   string
		server string
		field  func(s *ServerConfig) string
		want   string
	}{
		{"a relative path is relative to the config's directory, its newline trimmed",
			`{"command":"x","env":{"T":"${file:token}"}}`, func(s *ServerConfig) string { return s.Env["T"] }, "s3cr3t-t0ken"},
		{"a path in a subdirectory",
			`{"command":"x","env":{"T":"${file:sub/nested}"}}`, func(s *ServerConfig) string { return s.Env["T"] }, "s3cr3t-nested"},
		{"an absolute path",
			`{"command":"x","env":{"T":"${file:` + dir + `/token}"}}`, func(s *ServerConfig) string { return s.Env["T"] }, "s3cr3t-t0ken"},
		{"a CRLF is trimmed too",
			`{"command":"x","env":{"T":"${file:crlf}"}}`, func(s *ServerConfig) string { return s.Env["T"] }, "s3cr3t-crlf"},
		{"a file without a newline is read whole",
			`{"command":"x","env":{"T":"${file:bare}"}}`, func(s *ServerConfig) string { return s.Env["T"] }, "s3cr3t-bare"},
		{"an env value keeps its inner newlines",
			`{"command":"x","env":{"T":"${file:lines}"}}`, func(s *ServerConfig) string { return s.Env["T"] }, "s3cr3t-line1\ns3cr3t-line2"},
		{"an empty file is an empty value",
			`{"command":"x","env":{"T":"<${file:empty}>"}}`, func(s *ServerConfig) string { return s.Env["T"] }, "<>"},
		{"a file of 64 KiB, its newline included, is read",
			`{"command":"x","env":{"T":"${file:just-enough}"}}`, func(s *ServerConfig) string { return s.Env["T"] }, strings.Repeat("y", maxSecretFileBytes-1)},
		{"a header value mixes text, a variable and a file",
			`{"url":"https://x.example/mcp","headers":{"Authorization":"Bearer ${file:token}","X-Who":"${USER}-${file:bare}"}}`,
			func(s *ServerConfig) string { return s.Headers["Authorization"] + "|" + s.Headers["X-Who"] }, "Bearer s3cr3t-t0ken|me-s3cr3t-bare"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := ParseConfig(config, []byte(`{"servers":{"s":`+tt.server+`}}`), envOf(map[string]string{"USER": "me"}), nil)
			if err != nil {
				t.Fatalf("ParseConfig error = %v", err)
			}
			s := c.MCPServers["s"]
			if got := tt.field(s); got != tt.want {
				t.Errorf("value = %q, want %q", got, tt.want)
			}
			if out := string(c.resolved()); strings.Contains(out, "s3cr3t") || strings.Contains(out, "yyyy") {
				t.Errorf("-check shows a secret file's content:\n%s", out)
			}
		})
	}
}

func TestFileReferenceErrors(t *testing.T) {
	dir, config := secretDir(t)
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	unreadable := filepath.Join(dir, "unreadable")
	os.WriteFile(unreadable, []byte("s3cr3t-unreadable"), 0o000)
	tests := []struct {
		name   string
		server string
		want   string // the whole error, without the config's path
	}{
		{"a missing file names the server, the field and the file",
			`{"command":"x","env":{"T":"${file:nope}"}}`,
			`servers.s.env.T: ${file:nope}: ` + dir + `/nope: no such file or directory`},
		{"a directory is no secret file",
			`{"command":"x","env":{"T":"${file:sub}"}}`,
			`servers.s.env.T: ${file:sub}: ` + dir + `/sub is not a regular file; name the file that holds the secret`},
		{"a FIFO is refused, not waited on",
			`{"command":"x","env":{"T":"${file:fifo}"}}`,
			`servers.s.env.T: ${file:fifo}: ` + dir + `/fifo is not a regular file; name the file that holds the secret`},
		{"a file over 64 KiB is refused",
			`{"command":"x","env":{"T":"${file:big}"}}`,
			`servers.s.env.T: ${file:big}: ` + dir + `/big is over 65536 bytes (64 KiB), the most corral reads for a secret`},
		{"a header value of several lines is refused",
			`{"url":"https://x.example/mcp","headers":{"Authorization":"Bearer ${file:lines}"}}`,
			`servers.s.headers.Authorization: ${file:lines}: the file holds a line break or another control character, which a header value cannot (only its trailing line breaks are removed)`},
		{"an env value with a NUL byte is refused",
			`{"command":"x","env":{"T":"${file:nul}"}}`,
			`servers.s.env.T: ${file:nul}: the file holds a NUL byte, which an environment variable cannot`},
		{"a file in args is refused, so that no secret shows in a command line",
			`{"command":"x","args":["--token=${file:token}"]}`,
			`servers.s.args[0]: ${file:token}: a file is read only in env and headers values, so that a secret never shows in a command line, which other local users can read; pass it to the server in env`},
		{"a file in a url is refused",
			`{"url":"https://x.example/mcp?k=${file:token}"}`,
			`servers.s.url: ${file:token}: a file is read only in env and headers values, so that a secret never shows in a command line, which other local users can read; pass it to the server in env`},
		{"a reference in a path is refused",
			`{"command":"x","env":{"T":"${file:${HOME}/x}"}}`,
			`servers.s.env.T: ${file:${HOME}: a path holds no references; write it literally (a relative path is relative to the config file's directory)`},
		{"an empty path is refused",
			`{"command":"x","env":{"T":"${file:}"}}`,
			`servers.s.env.T: ${file:}: no path; write ${file:PATH}`},
	}
	if os.Getuid() != 0 { // root reads any file
		tests = append(tests, struct{ name, server, want string }{"an unreadable file names it, not its content",
			`{"command":"x","env":{"T":"${file:unreadable}"}}`,
			`servers.s.env.T: ${file:unreadable}: ` + unreadable + `: permission denied`})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseConfig(config, []byte(`{"servers":{"s":`+tt.server+`}}`), envOf(map[string]string{"HOME": "/home/me"}), nil)
			if err == nil {
				t.Fatalf("ParseConfig error = nil, want %s", tt.want)
			}
			if got := strings.TrimPrefix(err.Error(), config+": "); got != tt.want {
				t.Errorf("ParseConfig error =\n%s\nwant\n%s", got, tt.want)
			}
			if strings.Contains(err.Error(), "s3cr3t") {
				t.Errorf("the error shows a secret file's content: %v", err)
			}
		})
	}
}

func TestAuthTokenFileIsBounded(t *testing.T) {
	dir, config := secretDir(t)
	_, err := ParseConfig(config, []byte(`{"authTokenFile":"big","mcpServers":{"a":{"command":"x"}}}`), nil, nil)
	want := config + `: authTokenFile: cannot read the token: ` + dir + `/big is over 65536 bytes (64 KiB), the most corral reads for a secret`
	if err == nil || err.Error() != want {
		t.Errorf("ParseConfig(a token file over 64 KiB) error =\n%v\nwant\n%s", err, want)
	}
}

// TestSIGHUPRereadsSecretFiles runs a server whose name comes from a secret
// file through its environment, changes the file, and checks that a reload
// restarts the server with the new value, and that a token file is re-read.
func TestSIGHUPRereadsSecretFiles(t *testing.T) {
	t.Parallel()
	secrets := t.TempDir()
	name, token := filepath.Join(secrets, "name"), filepath.Join(secrets, "token")
	os.WriteFile(name, []byte("first\n"), 0o600)
	os.WriteFile(token, []byte("token-1\n"), 0o600)
	c := startCorral(t, `{"listen":"127.0.0.1:0","authTokenFile":"`+token+`","servers":{"a": {"type":"stdio","command":"/bin/sh",
		"args":["-c","exec FAKE -state STATE -lifetime 2m -prefix a_ -name \"$SECRET_NAME\""],
		"env":{"SECRET_NAME":"${file:`+name+`}"}}}}`)
	c.waitHTTP(1)
	whoami := func(cl *client, id string) string {
		t.Helper()
		return toolText(t, cl.callTool(id, "a_whoami", `{}`))
	}
	if got := whoami(connectWith(t, c.url, "Bearer token-1"), "1"); !strings.Contains(got, `"name":"first"`) {
		t.Fatalf("whoami = %s, want the name from the file", got)
	}

	os.WriteFile(name, []byte("second\n"), 0o600)
	os.WriteFile(token, []byte("token-2\n"), 0o600)
	c.cmd.Process.Signal(syscall.SIGHUP)
	c.waitLog(`msg=reloaded added=\[\] removed=\[\] changed=\[a\] kept=\[\]`)
	cl := connectWith(t, c.url, "Bearer token-2")
	waitFor(t, 10*time.Second, "the server to serve again", func() bool {
		return cl.callTool("2", "a_whoami", `{}`).Error == nil
	})
	if got := whoami(cl, "3"); !strings.Contains(got, `"name":"second"`) {
		t.Errorf("whoami after the reload = %s, want the new name from the file", got)
	}
	req, _ := http.NewRequest("POST", c.url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	req.Header.Set("Authorization", "Bearer token-1")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("the old token after the reload: %v, %v; want 401", resp.Status, err)
	} else {
		resp.Body.Close()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, line := range c.log { // the name is no secret: the server reports it
		if strings.Contains(line, "token-") {
			t.Errorf("corral's log shows the token: %s", line)
		}
	}
}
