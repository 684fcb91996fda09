package main

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
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

// runCheck runs corral -check on config, written to dir/name (dir/config.json
// if name is ""), with the extra flags, and returns its exit code, stdout and
// stderr.
func runCheck(t *testing.T, dir, name, config string, flags ...string) (int, string, string) {
	t.Helper()
	path := filepath.Join(dir, cmp.Or(name, "config.json"))
	os.MkdirAll(filepath.Dir(path), 0o755)
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := run(append([]string{"-check", "-config", path}, flags...), strings.NewReader(""), &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// writeProgram writes an executable shell script at path.
func writeProgram(t *testing.T, path string) {
	t.Helper()
	os.MkdirAll(filepath.Dir(path), 0o755)
	if err := os.WriteFile(path, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
}

func TestCheckRefusesWhatCannotRun(t *testing.T) {
	dir := t.TempDir()
	prog := filepath.Join(dir, "bin", "srv")
	writeProgram(t, prog)
	os.WriteFile(filepath.Join(dir, "bin", "plain"), []byte("not a program"), 0o644)
	q := strconv.Quote
	for _, tc := range []struct {
		name, config string
		flags        []string
		want         []string // in stderr; none: -check passes
	}{
		{"a command on no directory of PATH", `{"mcpServers":{"s":{"command":"corral-no-such-program"}}}`, nil,
			[]string{`mcpServers.s.command: cannot run "corral-no-such-program": "corral-no-such-program" is in no directory of PATH (PATH from corral's environment: `, "install it"}},
		{"a misspelt path", `{"mcpServers":{"s":{"command":` + q(filepath.Join(dir, "bin", "svr")) + `}}}`, nil,
			[]string{`mcpServers.s.command: cannot run ` + q(filepath.Join(dir, "bin", "svr")) + `: ` + filepath.Join(dir, "bin", "svr") + ` does not exist; correct the path`}},
		{"a file that is not executable", `{"mcpServers":{"s":{"command":` + q(filepath.Join(dir, "bin", "plain")) + `}}}`, nil,
			[]string{`mcpServers.s.command: `, `is not executable (chmod +x `}},
		{"a relative path from the server's cwd", `{"mcpServers":{"s":{"command":"bin/srv","cwd":` + q(dir) + `}}}`, nil, nil},
		{"a relative path missing from the server's cwd", `{"mcpServers":{"s":{"command":"bin/srv","cwd":"/"}}}`, nil,
			[]string{`mcpServers.s.command: cannot run "bin/srv": /bin/srv does not exist`}},
		{"a command found through the server's own PATH", `{"mcpServers":{"s":{"command":"srv","env":{"PATH":` + q(filepath.Join(dir, "bin")) + `}}}}`, nil, nil},
		{"a command the server's own PATH lacks", `{"mcpServers":{"s":{"command":"sh","env":{"PATH":` + q(filepath.Join(dir, "bin")) + `}}}}`, nil,
			[]string{`mcpServers.s.command: cannot run "sh": "sh" is in no directory of PATH (PATH from the server's env: ` + filepath.Join(dir, "bin") + `); install it, put its directory in the PATH of the server's env`}},
		{"a cwd that does not exist", `{"mcpServers":{"s":{"command":` + q(prog) + `,"cwd":"/corral-no-such-dir"}}}`, nil,
			[]string{`mcpServers.s.cwd: the directory /corral-no-such-dir does not exist; create it, or correct cwd`}},
		{"a relative cwd that does not exist", `{"mcpServers":{"s":{"command":` + q(prog) + `,"cwd":"nope"}}}`, nil,
			[]string{`mcpServers.s.cwd: the directory ` + filepath.Join(dir, "nope") + ` does not exist`}},
		{"a cwd that is a file", `{"mcpServers":{"s":{"command":` + q(prog) + `,"cwd":` + q(prog) + `}}}`, nil,
			[]string{`mcpServers.s.cwd: the directory ` + prog + ` is not a directory`}},
		{"a prerequisite's command", `{"mcpServers":{"s":{"command":` + q(prog) + `,"prerequisite":{"command":"corral-no-such-program","ready":{"tcp":"127.0.0.1:1"}}}}}`, nil,
			[]string{`mcpServers.s.prerequisite.command: cannot run "corral-no-such-program"`}},
		{"a url that is corral's own listen address", `{"listen":"127.0.0.1:8931","mcpServers":{"s":{"url":"http://localhost:8931/mcp"}}}`, nil,
			[]string{`mcpServers.s.url: http://localhost:8931/mcp is corral's own listen address (listen "127.0.0.1:8931")`, "remove this server"}},
		{"a url on corral's port on every address", `{"listen":"0.0.0.0:9000","authTokenEnv":"HOME","mcpServers":{"s":{"url":"http://127.0.0.1:9000/mcp"}}}`, nil,
			[]string{`mcpServers.s.url: http://127.0.0.1:9000/mcp is corral's own listen address`}},
		{"a url on corral's address is another corral's with -stdio", `{"mcpServers":{"s":{"url":"http://127.0.0.1:8931/mcp"}}}`, []string{"-stdio"}, nil},
		{"a url on corral's address, overridden by -listen", `{"mcpServers":{"s":{"url":"http://127.0.0.1:8931/mcp"}}}`, []string{"-listen", "127.0.0.1:8932"}, nil},
		{"a url on another port", `{"mcpServers":{"s":{"url":"http://127.0.0.1:8932/mcp"}}}`, nil, nil},
		{"a url's port out of range", `{"mcpServers":{"s":{"url":"http://127.0.0.1:99999/mcp"}}}`, nil,
			[]string{`mcpServers.s.url: the port 99999 is out of range; a port is a number from 1 to 65535`}},
		{"a listen port out of range", `{"listen":"127.0.0.1:99999","mcpServers":{"s":{"command":` + q(prog) + `}}}`, nil,
			[]string{`listen: invalid address "127.0.0.1:99999": the port must be a number from 0 to 65535`}},
		{"a VS Code entry is named as in its map", `{"servers":{"s":{"type":"stdio","command":"corral-no-such-program"}}}`, nil,
			[]string{`servers.s.command: cannot run "corral-no-such-program"`}},
		{"a disabled server is not checked", `{"mcpServers":{"s":{"command":` + q(prog) + `},"off":{"command":"corral-no-such-program","disabled":true}}}`, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runCheck(t, dir, "", tc.config, tc.flags...)
			if len(tc.want) == 0 {
				if code != 0 || strings.Contains(stderr, "corral:") || !strings.Contains(stdout, ": ok\n") {
					t.Errorf("-check exited %d, want 0 and ok:\n%s\n%s", code, stderr, stdout)
				}
				return
			}
			if code != 2 {
				t.Errorf("-check exited %d, want 2", code)
			}
			for _, want := range tc.want {
				if !strings.Contains(stderr, want) {
					t.Errorf("-check's errors lack %q:\n%s", want, stderr)
				}
			}
			if !strings.Contains(stderr, filepath.Join(dir, "config.json")+": ") {
				t.Errorf("-check's errors do not name the file:\n%s", stderr)
			}
			if strings.Contains(stdout, ": ok\n") {
				t.Errorf("-check says ok:\n%s", stdout)
			}
		})
	}
}

func TestCheckEndsWithASummary(t *testing.T) {
	dir := t.TempDir()
	prog := filepath.Join(dir, "srv")
	writeProgram(t, prog)
	q := strconv.Quote(prog)
	lastLine := func(s string) string {
		lines := strings.Split(strings.TrimSpace(s), "\n")
		return lines[len(lines)-1]
	}
	code, stdout, stderr := runCheck(t, dir, "", `{"mcpServers":{
		"a":{"command":`+q+`}, "b":{"command":`+q+`}, "c":{"command":"uvx-not-installed"}, "d":{"command":`+q+`},
		"e":{"command":`+q+`,"disabled":true}}}`)
	if want := "5 servers: 3 ok, 1 error, 1 disabled"; code != 2 || lastLine(stdout) != want {
		t.Errorf("-check exited %d, last line %q; want 2 and %q\n%s", code, lastLine(stdout), want, stderr)
	}
	code, stdout, _ = runCheck(t, dir, "", `{"mcpServers":{"a":{"command":`+q+`}}}`)
	if want := "1 server: 1 ok, 0 errors"; code != 0 || lastLine(stdout) != want {
		t.Errorf("-check exited %d, last line %q; want 0 and %q", code, lastLine(stdout), want)
	}
	// A file that does not parse ends with a summary too.
	code, stdout, _ = runCheck(t, dir, "", `{"maxRestarts":-1,"mcpServers":{"a":{"comand":"x"},"b":{"command":`+q+`},"c":{"command":`+q+`,"limits":{"memroy":"1GiB"}}}}`)
	if want := "3 servers: 1 ok, 2 errors; 1 error outside the servers; corral would not start"; code != 2 || lastLine(stdout) != want {
		t.Errorf("-check exited %d, last line %q; want 2 and %q", code, lastLine(stdout), want)
	}
}

func TestMisspeltKeysGetDidYouMean(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{`{"mcpServers":{"s":{"comand":"x"}}}`, `mcpServers.s: unknown field "comand"; did you mean "command"?`},
		{`{"mcpServers":{"s":{"command":"x","tools":{"deney":["a"]}}}}`, `mcpServers.s.tools: unknown field "deney"; did you mean "deny"?`},
		{`{"mcpServers":{"s":{"command":"x","limits":{"memroy":"1GiB"}}}}`, `mcpServers.s.limits: unknown field "memroy"; did you mean "memory"?`},
		{`{"mcpServers":{"s":{"command":"x","sandbox":{"netwrok":false}}}}`, `mcpServers.s.sandbox: unknown field "netwrok"; did you mean "network"?`},
		{`{"sandbox":{"readOnli":["/"]},"mcpServers":{"s":{"command":"x"}}}`, `sandbox: unknown field "readOnli"; did you mean "readOnly"?`},
		{`{"admin":{"registraton":true},"mcpServers":{"s":{"command":"x"}}}`, `admin: unknown field "registraton"; did you mean "registration"?`},
		{`{"mcpServers":{"s":{"command":"x","prerequisite":{"comand":"y"}}}}`, `did you mean "command"?`},
		{`{"mcpServers":{"s":{"command":"x","tools":{"zzzzzzz":["a"]}}}}`, `mcpServers.s.tools: unknown field "zzzzzzz"; known fields are "allow", "deny"`},
	} {
		_, err := ParseConfig("config.json", []byte(tc.src), envOf(nil), nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseConfig(%s) error = %v, want it to contain %q", tc.src, err, tc.want)
		}
	}
	// The top level may hold other clients' keys: a near miss is warned of.
	var warned []string
	if _, err := ParseConfig("config.json", []byte(`{"requestTimout":"5s","mcpServers":{"s":{"command":"x"}}}`), envOf(nil), func(m string) { warned = append(warned, m) }); err != nil {
		t.Fatal(err)
	}
	if len(warned) != 1 || !strings.Contains(warned[0], `"requestTimout" (did you mean "requestTimeout"?)`) {
		t.Errorf("warnings = %q, want one with did you mean", warned)
	}
}

func TestCheckPrintsEveryDefault(t *testing.T) {
	root := t.TempDir()
	prog := filepath.Join(root, "srv")
	writeProgram(t, prog)
	q := strconv.Quote(prog)
	code, stdout, stderr := runCheck(t, root, ".vscode/mcp.json", `{"idleStop":"0s","servers":{
		"local":{"type":"stdio","command":`+q+`,"args":["${workspaceFolder}/src","${userHome}/x"],"cwd":"${workspaceFolder}"},
		"each":{"command":`+q+`,"scope":"session","idleStop":"10m"},
		"remote":{"type":"http","url":"https://example.com/mcp"}}}`)
	if code != 0 {
		t.Fatalf("-check exited %d:\n%s", code, stderr)
	}
	var got struct {
		IdleStop, Limits, Sandbox string
		MCPServers                map[string]map[string]any
	}
	if err := json.Unmarshal([]byte(stdout[strings.Index(stdout, "{"):strings.LastIndex(stdout, "}")+1]), &got); err != nil {
		t.Fatalf("-check's config does not parse: %v\n%s", err, stdout)
	}
	if got.IdleStop != "off" || got.Limits != "none" || got.Sandbox != "none" {
		t.Errorf("top level idleStop, limits, sandbox = %q, %q, %q; want off, none, none", got.IdleStop, got.Limits, got.Sandbox)
	}
	home, _ := os.UserHomeDir()
	for name, want := range map[string]map[string]any{
		"local":  {"type": "stdio", "scope": "shared", "idleStop": "off", "limits": "none", "sandbox": "none", "maxInstances": nil, "cwd": root, "args": []any{root + "/src", home + "/x"}},
		"each":   {"type": "stdio", "scope": "session", "idleStop": "10m0s", "maxInstances": float64(defaultMaxInstances)},
		"remote": {"type": "http", "scope": "shared", "idleStop": "off", "limits": nil, "sandbox": nil},
	} {
		for key, w := range want {
			if g := got.MCPServers[name][key]; !reflect.DeepEqual(g, w) {
				t.Errorf("-check prints %s.%s = %#v, want %#v", name, key, g, w)
			}
		}
	}
}

func TestProgramFoundThroughTheServersPATH(t *testing.T) {
	dir := t.TempDir()
	writeProgram(t, filepath.Join(dir, "srv"))
	cmd := programCommand(processSpec{command: "srv", env: []string{"PATH=/nonexistent", "PATH=" + dir}})
	if cmd.Err != nil || cmd.Path != filepath.Join(dir, "srv") || cmd.Args[0] != "srv" {
		t.Errorf("programCommand found %q (args %q, err %v), want %s with argv[0] srv", cmd.Path, cmd.Args, cmd.Err, filepath.Join(dir, "srv"))
	}
	cmd = programCommand(processSpec{command: "sh", env: []string{"PATH=" + dir}})
	if !errors.Is(cmd.Err, exec.ErrNotFound) {
		t.Errorf("programCommand for a program not in the server's PATH: err = %v, want exec.ErrNotFound", cmd.Err)
	}
}

func TestServerStartsThroughItsOwnPATH(t *testing.T) {
	t.Parallel()
	// fakeserver is in no directory of corral's PATH, only of the server's.
	bin := filepath.Dir(fakeserverBin)
	tg := startGateway(t, `{"mcpServers":{
		"own":   {"command":"`+filepath.Base(fakeserverBin)+`","args":["-state","STATE"],"env":{"PATH":"`+bin+`"}},
		"other": {"command":"`+filepath.Base(fakeserverBin)+`","args":["-state","STATE"],"env":{"PATH":"/nonexistent"}}}}`)
	for _, b := range tg.gw.backendList() {
		h := b.health()
		switch b.name {
		case "own":
			if h.State != stateReady {
				t.Errorf("a server found through its env's PATH is %s (%s), want ready", h.State, h.Error)
			}
		case "other":
			if h.State == stateReady || !strings.Contains(h.Error, `not found on PATH (PATH=/nonexistent)`) {
				t.Errorf("a server its env's PATH lacks is %s (%q), want not started: not found", h.State, h.Error)
			}
		}
	}
}
