package main

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// envOf returns a getenv function that looks variables up in m.
func envOf(m map[string]string) func(string) (string, bool) {
	return func(name string) (string, bool) {
		v, ok := m[name]
		return v, ok
	}
}

// parse calls ParseConfig on src as if read from "config.json", with the
// environment m, and returns the config, the error and the warnings.
func parse(src string, m map[string]string) (*Config, error, []string) {
	var warnings []string
	c, err := ParseConfig("config.json", []byte(src), envOf(m), func(msg string) {
		warnings = append(warnings, msg)
	})
	return c, err, warnings
}

// mustParse is parse for a config that must be valid and cause no warning.
func mustParse(t *testing.T, src string, m map[string]string) *Config {
	t.Helper()
	c, err, warnings := parse(src, m)
	if err != nil {
		t.Fatalf("ParseConfig(%s) error = %q, want nil", src, err)
	}
	if len(warnings) > 0 {
		t.Fatalf("ParseConfig(%s) warnings = %q, want none", src, warnings)
	}
	return c
}

func TestParseConfigAppliesDefaults(t *testing.T) {
	c := mustParse(t, `{"mcpServers": {"echo": {"command": "echo-server"}}}`, nil)

	got := map[string]any{
		"Listen":          c.Listen,
		"RequestTimeout":  c.RequestTimeout.D(),
		"StartTimeout":    c.StartTimeout.D(),
		"StopGrace":       c.StopGrace.D(),
		"KillGrace":       c.KillGrace.D(),
		"ShutdownTimeout": c.ShutdownTimeout.D(),
		"MaxLineBytes":    c.MaxLineBytes,
		"MaxRequestBytes": c.MaxRequestBytes,
		"MaxInFlight":     c.MaxInFlight,
		"SessionIdle":     c.SessionIdleTimeout.D(),
		"MaxSessions":     c.MaxSessions,

		"MaxServerRequestsPerSession": c.MaxServerRequestsPerSession,
		"MaxServerRequests":           c.MaxServerRequests,
	}
	want := map[string]any{
		"Listen":          "127.0.0.1:8931",
		"RequestTimeout":  60 * time.Second,
		"StartTimeout":    30 * time.Second,
		"StopGrace":       2 * time.Second,
		"KillGrace":       5 * time.Second,
		"ShutdownTimeout": 10 * time.Second,
		"MaxLineBytes":    int64(32 << 20),
		"MaxRequestBytes": int64(16 << 20),
		"MaxInFlight":     1024,
		"SessionIdle":     time.Hour,
		"MaxSessions":     1000,

		"MaxServerRequestsPerSession": 64,
		"MaxServerRequests":           256,
	}
	for field, w := range want {
		if got[field] != w {
			t.Errorf("ParseConfig(minimal).%s = %v, want %v", field, got[field], w)
		}
	}
	if c.file != "config.json" {
		t.Errorf("ParseConfig(minimal).file = %q, want %q", c.file, "config.json")
	}
	servers := c.Servers()
	if len(servers) != 1 || servers[0].Name() != "echo" || servers[0].Command != "echo-server" {
		t.Fatalf("ParseConfig(minimal).Servers() = %+v, want the one server echo running echo-server", servers)
	}
	if got := c.requestTimeout(servers[0]); got != 60*time.Second {
		t.Errorf("requestTimeout(echo) = %v, want the global default 60s", got)
	}
	if got := c.maxInFlight(servers[0]); got != 1024 {
		t.Errorf("maxInFlight(echo) = %d, want the global default 1024", got)
	}
}

func TestParseConfigKeepsExplicitSettings(t *testing.T) {
	c := mustParse(t, `{
		"listen": "[::1]:9000",
		"requestTimeout": "90s",
		"startTimeout": 1.5,
		"stopGrace": "1m",
		"killGrace": 3,
		"shutdownTimeout": "250ms",
		"maxLineBytes": 1024,
		"maxRequestBytes": 2048,
		"maxInFlight": 4,
		"sessionIdleTimeout": "10m",
		"maxSessions": 7,
		"maxInFlightPerSession": 3,
		"maxStreams": 5,
		"maxHeaderBytes": 4096,
		"readHeaderTimeout": "2s",
		"readTimeout": "20s",
		"writeTimeout": "5s",
		"maxUnsentBytesPerSession": 1000,
		"maxUnsentBytes": 3000,
		"maxNotificationsPerSecond": 50,
		"maxCatalogItems": 20,
		"maxCatalogBytes": 4096,
		"maxServerRequestsPerSession": 2,
		"maxServerRequests": 9,
		"maxTasksPerSession": 11,
		"maxStderrLinesPerSecond": 20,
		"maxStderrBytesPerSecond": 8192,
		"replica": "r-1",
		"drainDelay": "7s",
		"heartbeatInterval": "3s",
		"authTokenEnv": "TOKEN",
		"allowedOrigins": ["https://example.com"],
		"mcpServers": {"echo": {"command": "echo-server"}}
	}`, map[string]string{"TOKEN": " tok\n"})
	want := Config{
		Listen:                    "[::1]:9000",
		RequestTimeout:            Duration(90 * time.Second),
		StartTimeout:              Duration(1500 * time.Millisecond),
		StopGrace:                 Duration(time.Minute),
		KillGrace:                 Duration(3 * time.Second),
		ShutdownTimeout:           Duration(250 * time.Millisecond),
		MaxLineBytes:              1024,
		MaxRequestBytes:           2048,
		MaxInFlight:               4,
		SessionIdleTimeout:        Duration(10 * time.Minute),
		MaxSessions:               7,
		Replica:                   "r-1",
		DrainDelay:                Duration(7 * time.Second),
		HeartbeatInterval:         Duration(3 * time.Second),
		MaxInFlightPerSession:     3,
		MaxStreams:                5,
		MaxHeaderBytes:            4096,
		ReadHeaderTimeout:         Duration(2 * time.Second),
		ReadTimeout:               Duration(20 * time.Second),
		WriteTimeout:              Duration(5 * time.Second),
		MaxUnsentBytesPerSession:  1000,
		MaxUnsentBytes:            3000,
		MaxNotificationsPerSecond: 50,
		MaxCatalogItems:           20,
		MaxCatalogBytes:           4096,
		MaxStderrLinesPerSecond:   20,
		MaxStderrBytesPerSecond:   8192,
		AuthTokenEnv:              "TOKEN",
		token:                     "tok",
		AllowedOrigins:            []string{"https://example.com"},

		MaxServerRequestsPerSession: 2,
		MaxServerRequests:           9,
		MaxTasksPerSession:          11,
	}
	got := *c
	got.MCPServers, got.file = nil, ""
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ParseConfig(explicit settings) = %+v, want %+v", got, want)
	}
}

func TestParseConfigDesktopClientFile(t *testing.T) {
	src := `{
		"globalShortcut": "Ctrl+Space",
		"theme": "dark",
		"mcpServers": {
			"github": {
				"type": "stdio",
				"command": "npx",
				"args": ["-y", "@modelcontextprotocol/server-github"],
				"env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "${GITHUB_TOKEN}"},
				"autoApprove": ["search_repositories"],
				"alwaysAllow": [],
				"timeout": 60,
				"description": "GitHub tools"
			},
			"old": {"command": "old-server", "disabled": true}
		}
	}`
	c, err, warnings := parse(src, map[string]string{"GITHUB_TOKEN": "ghp_secret"})
	if err != nil {
		t.Fatalf("ParseConfig(desktop file) error = %q, want nil", err)
	}
	want := []string{`config.json: ignoring keys corral does not use: "globalShortcut", "theme"`}
	if !reflect.DeepEqual(warnings, want) {
		t.Errorf("ParseConfig(desktop file) warnings = %q, want exactly %q", warnings, want)
	}
	gh := c.MCPServers["github"]
	if got := gh.Env["GITHUB_PERSONAL_ACCESS_TOKEN"]; got != "ghp_secret" {
		t.Errorf("github env GITHUB_PERSONAL_ACCESS_TOKEN = %q, want %q", got, "ghp_secret")
	}
	if got := len(c.Servers()); got != 1 {
		t.Errorf("len(Servers()) = %d, want 1 (old is disabled)", got)
	}
}

func TestParseConfigWarnings(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want []string
	}{
		{
			name: "a file with only corral's keys causes no warning",
			src:  `{"listen": "127.0.0.1:1", "mcpServers": {"a": {"command": "x"}}}`,
			want: nil,
		},
		{
			name: "a single ignored key is named in the singular",
			src:  `{"theme": "dark", "mcpServers": {"a": {"command": "x"}}}`,
			want: []string{`config.json: ignoring key corral does not use: "theme"`},
		},
		{
			name: "a misspelt top-level key gets a suggestion in the warning",
			src:  `{"requestTimout": "5s", "mcpServers": {"a": {"command": "x"}}}`,
			want: []string{`config.json: ignoring key corral does not use: "requestTimout" (did you mean "requestTimeout"?)`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err, warnings := parse(tt.src, nil)
			if err != nil {
				t.Fatalf("ParseConfig(%s) error = %q, want nil", tt.src, err)
			}
			if !reflect.DeepEqual(warnings, tt.want) {
				t.Errorf("ParseConfig(%s) warnings = %q, want %q", tt.src, warnings, tt.want)
			}
		})
	}
}

func TestParseConfigErrors(t *testing.T) {
	// server wraps a server entry into a config with a valid server "ok", so
	// that the only error is the one in the entry.
	server := func(name, entry string) string {
		return `{"mcpServers": {"ok": {"command": "x"}, "` + name + `": ` + entry + `}}`
	}
	// top wraps top-level settings into a config with a valid server.
	top := func(settings string) string {
		return `{` + settings + `, "mcpServers": {"ok": {"command": "x"}}}`
	}
	tests := []struct {
		name string
		src  string
		env  map[string]string
		want string // the whole message
	}{
		{
			name: "a JSON syntax error gives the line and column",
			src:  "{\n  \"mcpServers\": {\n    \"github\": {\"command\": \"x\" \"args\": []}\n  }\n}",
			want: `config.json:3:31: invalid JSON: invalid character '"' after object key:value pair`,
		},
		{
			name: "a syntax error on the first line counts columns in characters",
			src:  `{"é": 1 "x"}`,
			want: `config.json:1:9: invalid JSON: invalid character '"' after object key:value pair`,
		},
		{
			name: "an empty file is a syntax error",
			src:  ``,
			want: `config.json:1:1: invalid JSON: unexpected end of JSON input`,
		},
		{
			name: "a top level that is not an object is an error",
			src:  `["echo"]`,
			want: `config.json: want a JSON object at the top level, got array`,
		},
		{
			name: "args that are not an array of strings are a type error",
			src:  server("github", `{"command": "npx", "args": 5}`),
			want: `config.json: mcpServers.github.args: want an array of strings, got number`,
		},
		{
			name: "an env that is not an object of strings is a type error",
			src:  server("github", `{"command": "npx", "env": {"TOKEN": 1}}`),
			want: `config.json: mcpServers.github.env: want an object with string values, got number`,
		},
		{
			name: "a disabled that is not a boolean is a type error",
			src:  server("github", `{"command": "npx", "disabled": "yes"}`),
			want: `config.json: mcpServers.github.disabled: want true or false, got string`,
		},
		{
			name: "a fractional maxInFlight is a type error",
			src:  server("github", `{"command": "npx", "maxInFlight": 1.5}`),
			want: `config.json: mcpServers.github.maxInFlight: want an integer, got number 1.5`,
		},
		{
			name: "a top-level type error names the key",
			src:  top(`"listen": 8931`),
			want: `config.json: listen: want a string, got number`,
		},
		{
			name: "mcpServers that is not an object is an error",
			src:  `{"mcpServers": ["echo"]}`,
			want: `config.json: mcpServers: want an object mapping server names to server entries, got array`,
		},
		{
			name: "a server entry that is not an object is an error",
			src:  server("github", `"npx"`),
			want: `config.json: mcpServers.github: want an object such as {"command": "npx"}, got string`,
		},
		{
			name: "a misspelt server field gets a suggestion",
			src:  server("github", `{"comand": "npx"}`),
			want: "config.json: mcpServers.github: unknown field \"comand\"; did you mean \"command\"?\n" +
				`config.json: mcpServers.github.command: required (the program to run, e.g. "npx")`,
		},
		{
			name: "an unknown server field far from any known one lists the known fields",
			src:  server("github", `{"command": "npx", "frobnicate": true}`),
			want: `config.json: mcpServers.github: unknown field "frobnicate"; known fields are "args", "audit", "command", "cwd", "disabled", "env", "envFile", "failedRetry", "headers", "idleStop", "limits", "maxCatalogBytes", "maxCatalogItems", "maxInFlight", "maxInstances", "maxMissedPings", "maxRestartDelay", "maxRestarts", "pin", "pingInterval", "pingTimeout", "prefix", "prerequisite", "requestTimeout", "restartDelay", "restartWindow", "sandbox", "scope", "stableAfter", "start", "toolOverrides", "tools", "type", "url"`,
		},
		{
			name: "a missing command is an error",
			src:  server("github", `{"args": ["x"]}`),
			want: `config.json: mcpServers.github.command: required (the program to run, e.g. "npx")`,
		},
		{
			name: "an empty command is an error",
			src:  server("github", `{"command": ""}`),
			want: `config.json: mcpServers.github.command: required (the program to run, e.g. "npx")`,
		},
		{
			name: "a command that expands to nothing is an error",
			src:  server("github", `{"command": "${CMD}"}`),
			env:  map[string]string{"CMD": ""},
			want: `config.json: mcpServers.github.command: required (the program to run, e.g. "npx")`,
		},
		{
			name: "an unset variable in env names the variable and the way out",
			src:  server("github", `{"command": "npx", "env": {"TOKEN": "${GITHUB_TOKEN}"}}`),
			want: `config.json: mcpServers.github.env.TOKEN: ${GITHUB_TOKEN} is not set; export it, or write ${GITHUB_TOKEN:-default}`,
		},
		{
			name: "an unset variable in args names the argument",
			src:  server("github", `{"command": "npx", "args": ["-y", "--dir=${DIR}"]}`),
			want: `config.json: mcpServers.github.args[1]: ${DIR} is not set; export it, or write ${DIR:-default}`,
		},
		{
			name: "an unterminated reference in cwd is an error",
			src:  server("github", `{"command": "npx", "cwd": "${HOME/src"}`),
			want: `config.json: mcpServers.github.cwd: unterminated "${HOME/src"; close it with "}", or write "$$" for a literal "$"`,
		},
		{
			name: "a bad variable name in command is an error",
			src:  server("github", `{"command": "${1PATH}"}`),
			want: `config.json: mcpServers.github.command: invalid variable name "1PATH" in ${1PATH}; a name is letters, digits and '_', not starting with a digit (write "$$" for a literal "$")`,
		},
		{
			name: "a missing mcpServers is an error",
			src:  `{"listen": "127.0.0.1:1"}`,
			want: `config.json: mcpServers: no servers configured; add one, e.g. {"mcpServers": {"echo": {"command": "..."}}}`,
		},
		{
			name: "an empty mcpServers is an error",
			src:  `{"mcpServers": {}}`,
			want: `config.json: mcpServers: no servers configured; add one, e.g. {"mcpServers": {"echo": {"command": "..."}}}`,
		},
		{
			name: "a null mcpServers is an error",
			src:  `{"mcpServers": null}`,
			want: `config.json: mcpServers: no servers configured; add one, e.g. {"mcpServers": {"echo": {"command": "..."}}}`,
		},
		{
			name: "servers that are all disabled are an error",
			src:  `{"mcpServers": {"a": {"command": "x", "disabled": true}}}`,
			want: `config.json: mcpServers: every server is disabled; enable one by removing "disabled": true, or add one, e.g. {"mcpServers": {"echo": {"command": "..."}}}`,
		},
		{
			name: "an sse server needs a url",
			src:  server("remote", `{"type": "sse", "command": "x"}`),
			want: `config.json: mcpServers.remote.url: required for type "sse" (the server's event stream, e.g. "https://example.com/sse")`,
		},
		{
			name: "an sse server's type must be a string",
			src:  server("remote", `{"type": ["sse"], "url": "https://example.com/sse"}`),
			want: `config.json: mcpServers.remote.type: want a string such as "stdio", got array`,
		},
		{
			name: "an http server needs a url",
			src:  server("remote", `{"type": "http", "command": "x"}`),
			want: `config.json: mcpServers.remote.url: required for type "http" (the server's Streamable HTTP endpoint, e.g. "https://example.com/mcp")`,
		},
		{
			name: "a url and a command are an error",
			src:  server("remote", `{"url": "https://example.com/mcp", "command": "x", "env": {"A": "b"}}`),
			want: "config.json: mcpServers.remote.command: a remote server (with \"url\") has no command; remove one of the two\n" +
				`config.json: mcpServers.remote.env: a remote server (with "url") has no env; remove one of the two`,
		},
		{
			name: "a url must be http or https",
			src:  server("remote", `{"url": "ftp://example.com/mcp"}`),
			want: `config.json: mcpServers.remote.url: want an http:// or https:// URL with a host, such as "https://example.com/mcp"`,
		},
		{
			name: "headers belong to remote servers",
			src:  server("local", `{"command": "x", "headers": {"A": "b"}}`),
			want: `config.json: mcpServers.local.headers: only a remote server (with "url") has headers`,
		},
		{
			name: "an empty tool pattern is an error",
			src:  server("a", `{"command": "x", "tools": {"deny": ["ok", ""]}}`),
			want: `config.json: mcpServers.a.tools.deny[1]: empty pattern; write a tool name, or a glob such as "read_*"`,
		},
		{
			name: "an unknown type is an error",
			src:  server("ws", `{"type": "websocket", "command": "x"}`),
			want: `config.json: mcpServers.ws.type: unknown server type "websocket"; write "stdio", "http" or "sse", or remove the key`,
		},
		{
			name: "a negative top-level duration is an error",
			src:  top(`"requestTimeout": "-5s"`),
			want: `config.json: requestTimeout: must not be negative, got -5s; use a duration such as "1m0s", or remove the key for the default (1m0s)`,
		},
		{
			name: "a negative number of seconds is an error",
			src:  top(`"killGrace": -1`),
			want: `config.json: killGrace: must not be negative, got -1s; use a duration such as "5s", or remove the key for the default (5s)`,
		},
		{
			name: "an unparsable duration is an error",
			src:  top(`"startTimeout": "soon"`),
			want: `config.json: startTimeout: invalid duration "soon"; write a Go duration like "90s" or "1m30s", or a number of seconds`,
		},
		{
			name: "a duration that is neither string nor number is an error",
			src:  top(`"stopGrace": true`),
			want: `config.json: stopGrace: want a duration like "90s" or a number of seconds, got bool`,
		},
		{
			name: "a negative server requestTimeout is an error",
			src:  server("slow", `{"command": "x", "requestTimeout": "-1m"}`),
			want: `config.json: mcpServers.slow.requestTimeout: must not be negative, got -1m0s; use a duration such as "60s", or remove the key to use the global requestTimeout`,
		},
		{
			name: "a negative server maxInFlight is an error",
			src:  server("busy", `{"command": "x", "maxInFlight": -2}`),
			want: `config.json: mcpServers.busy.maxInFlight: must not be negative, got -2; use a positive number, or remove the key to use the global maxInFlight`,
		},
		{
			name: "a negative server maxCatalogBytes is an error",
			src:  server("big", `{"command": "x", "maxCatalogBytes": -1}`),
			want: `config.json: mcpServers.big.maxCatalogBytes: must not be negative, got -1; use a positive number, or remove the key to use the global maxCatalogBytes`,
		},
		{
			name: "a negative maxCatalogItems is an error",
			src:  top(`"maxCatalogItems": -1`),
			want: `config.json: maxCatalogItems: must not be negative, got -1; use a positive number, or remove the key for the default (10000)`,
		},
		{
			name: "a negative maxLineBytes is an error",
			src:  top(`"maxLineBytes": -1`),
			want: `config.json: maxLineBytes: must not be negative, got -1; use a positive number, or remove the key for the default (33554432)`,
		},
		{
			name: "a negative maxRequestBytes is an error",
			src:  top(`"maxRequestBytes": -1`),
			want: `config.json: maxRequestBytes: must not be negative, got -1; use a positive number, or remove the key for the default (16777216)`,
		},
		{
			name: "a negative global maxInFlight is an error",
			src:  top(`"maxInFlight": -1`),
			want: `config.json: maxInFlight: must not be negative, got -1; use a positive number, or remove the key for the default (1024)`,
		},
		{
			name: "a negative maxServerRequestsPerSession is an error",
			src:  top(`"maxServerRequestsPerSession": -1`),
			want: `config.json: maxServerRequestsPerSession: must not be negative, got -1; use a positive number, or remove the key for the default (64)`,
		},
		{
			name: "a negative maxServerRequests is an error",
			src:  top(`"maxServerRequests": -3`),
			want: `config.json: maxServerRequests: must not be negative, got -3; use a positive number, or remove the key for the default (256)`,
		},
		{
			name: "a negative maxStderrBytesPerSecond is an error",
			src:  top(`"maxStderrBytesPerSecond": -1`),
			want: `config.json: maxStderrBytesPerSecond: must not be negative, got -1; use a positive number, or remove the key for the default (65536)`,
		},
		{
			name: "a listen address without a port is an error",
			src:  top(`"listen": "localhost"`),
			want: `config.json: listen: invalid address "localhost": missing port in address; write host:port, e.g. "127.0.0.1:8931"`,
		},
		{
			name: "a server name with a space is an error",
			src:  server("my server", `{"command": "x"}`),
			want: `config.json: mcpServers."my server": invalid server name; use only letters, digits, '_', '.' and '-', since the name appears in tool prefixes and logs`,
		},
		{
			name: "a server name with a slash is an error",
			src:  server("a/b", `{"command": "x"}`),
			want: `config.json: mcpServers."a/b": invalid server name; use only letters, digits, '_', '.' and '-', since the name appears in tool prefixes and logs`,
		},
		{
			name: "an empty server name is an error",
			src:  server("", `{"command": "x"}`),
			want: `config.json: mcpServers."": server name is empty; name it with letters, digits, '_', '.' and '-'`,
		},
		{
			name: "a prefix with a space is an error",
			src:  server("github", `{"command": "x", "prefix": "git hub"}`),
			want: `config.json: mcpServers.github.prefix: invalid prefix "git hub"; use only letters, digits, '_', '.' and '-'`,
		},
		{
			name: "a listen port over 65535 is an error",
			src:  top(`"listen": "127.0.0.1:99999"`),
			want: `config.json: listen: invalid address "127.0.0.1:99999": the port must be a number from 0 to 65535, e.g. "127.0.0.1:8931"`,
		},
		{
			name: "a server name of 65 bytes is an error",
			src:  server(strings.Repeat("n", 65), `{"command": "x"}`),
			want: `config.json: mcpServers: the server name "nnnnnnnnnnnnnnnn"... is 65 bytes long, over the limit of 64; use a shorter name (it goes into the environment of the server's processes, file names and URLs)`,
		},
		{
			name: "a server name of a million bytes is an error that does not repeat it",
			src:  server(strings.Repeat("n", 1_000_000), `{"command": "x"}`),
			want: `config.json: mcpServers: the server name "nnnnnnnnnnnnnnnn"... is 1000000 bytes long, over the limit of 64; use a shorter name (it goes into the environment of the server's processes, file names and URLs)`,
		},
		{
			name: "a prefix of 65 bytes is an error",
			src:  server("github", `{"command": "x", "prefix": "`+strings.Repeat("p", 65)+`"}`),
			want: `config.json: mcpServers.github.prefix: the prefix is 65 bytes long, over the limit of 64; use a shorter one`,
		},
		{
			name: "two servers with one prefix are an error naming both",
			src:  `{"mcpServers": {"zzz": {"command": "x", "prefix": "gh"}, "aaa": {"command": "y", "prefix": "gh"}, "off": {"command": "z", "prefix": "gh", "disabled": true}}}`,
			want: `config.json: mcpServers.zzz.prefix: "gh" is also the prefix of server "aaa"; a prefix's names belong to one server alone: give each server a prefix of its own`,
		},
		{
			name: "an env key with '=' is an error",
			src:  server("github", `{"command": "x", "env": {"A=B": "1"}}`),
			want: `config.json: mcpServers.github.env: invalid variable name "A=B"; a name must be non-empty and must not contain '='`,
		},
		{
			name: "an empty env key is an error",
			src:  server("github", `{"command": "x", "env": {"": "1"}}`),
			want: `config.json: mcpServers.github.env: invalid variable name ""; a name must be non-empty and must not contain '='`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err, _ := parse(tt.src, tt.env)
			if err == nil {
				t.Fatalf("ParseConfig(%s) error = nil, want %q", tt.src, tt.want)
			}
			if err.Error() != tt.want {
				t.Errorf("ParseConfig(%s) error =\n%s\nwant\n%s", tt.src, err, tt.want)
			}
			if c != nil {
				t.Errorf("ParseConfig(%s) config = %+v, want nil with an error", tt.src, c)
			}
		})
	}
}

func TestParseConfigReportsAllErrors(t *testing.T) {
	src := `{
		"listen": "nope",
		"maxInFlight": -1,
		"mcpServers": {
			"zeta": {"comand": "x"},
			"alpha": {"command": "x", "env": {"T": "${UNSET}"}, "prefix": "a b"},
			"mid": {"command": "x", "args": [1]}
		}
	}`
	_, err, _ := parse(src, nil)
	if err == nil {
		t.Fatalf("ParseConfig(%s) error = nil, want several", src)
	}
	want := []string{
		`config.json: listen: `,
		`config.json: maxInFlight: `,
		`config.json: mcpServers.alpha.env.T: `,
		`config.json: mcpServers.alpha.prefix: `,
		`config.json: mcpServers.mid.args: `,
		`config.json: mcpServers.zeta: unknown field "comand"`,
		`config.json: mcpServers.zeta.command: required`,
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != len(want) {
		t.Fatalf("ParseConfig(%s) error has %d lines, want %d:\n%s", src, len(lines), len(want), err)
	}
	for i, line := range lines {
		if !strings.HasPrefix(line, want[i]) {
			t.Errorf("ParseConfig(...) error line %d = %q, want it to start with %q", i+1, line, want[i])
		}
	}
	joined, ok := err.(interface{ Unwrap() []error })
	if !ok || len(joined.Unwrap()) != len(want) {
		t.Errorf("ParseConfig(...) error = %#v, want %d joined errors", err, len(want))
	}
}

func TestParseConfigRemoteServerTypes(t *testing.T) {
	c := mustParse(t, `{"mcpServers": {
		"local": {"type": "stdio", "command": "x"},
		"plain": {"url": "https://example.com/mcp"},
		"http": {"type": "http", "url": "https://example.com/mcp"},
		"streamable": {"type": "streamable-http", "url": "https://example.com/mcp"},
		"sse": {"type": "sse", "url": "https://example.com/sse", "headers": {"Authorization": "Bearer t"}}
	}}`, nil)
	want := map[string]string{"local": "", "plain": "http", "http": "http", "streamable": "http", "sse": "sse"}
	for name, typ := range want {
		if got := c.MCPServers[name].Type; got != typ {
			t.Errorf("server %s: Type = %q, want %q", name, got, typ)
		}
	}
	if got := c.MCPServers["sse"].Headers["Authorization"]; got != "Bearer t" {
		t.Errorf("sse server's Authorization header = %q, want it kept as for http", got)
	}
}

func TestParseConfigDisabledServersAreNotValidated(t *testing.T) {
	src := `{"mcpServers": {
		"on": {"command": "x"},
		"off": {"type": "sse", "url": "https://example.com", "env": {"T": "${UNSET}"}, "disabled": true}
	}}`
	c := mustParse(t, src, nil)
	if got := c.MCPServers["off"].Env["T"]; got != "${UNSET}" {
		t.Errorf("disabled server env T = %q, want it unexpanded", got)
	}

	// A misspelt key is still caught, even in a disabled server.
	_, err, _ := parse(`{"mcpServers": {"on": {"command": "x"}, "off": {"disabled": true, "arg": []}}}`, nil)
	want := `config.json: mcpServers.off: unknown field "arg"; did you mean "args"?`
	if err == nil || err.Error() != want {
		t.Errorf("ParseConfig(disabled server with a typo) error = %v, want %q", err, want)
	}
}

func TestParseConfigExpandsVariables(t *testing.T) {
	env := map[string]string{
		"BIN":   "/usr/bin/srv",
		"TOKEN": "secret",
		"DIR":   "/srv",
		"EMPTY": "",
		"TRICK": "${TOKEN}",
	}
	tests := []struct {
		name  string
		value string
		want  string
	}{
		{"a set variable is replaced", "${TOKEN}", "secret"},
		{"a variable inside text is replaced", "--token=${TOKEN}!", "--token=secret!"},
		{"several variables are replaced", "${DIR}:${TOKEN}", "/srv:secret"},
		{"the default is used for an unset variable", "${NOPE:-fallback}", "fallback"},
		{"the default is used for an empty variable", "${EMPTY:-fallback}", "fallback"},
		{"the default is not used for a set variable", "${TOKEN:-fallback}", "secret"},
		{"an empty default is allowed", "a${NOPE:-}b", "ab"},
		{"a set but empty variable without default is empty", "a${EMPTY}b", "ab"},
		{"$$ is a literal dollar", "cost: $$5", "cost: $5"},
		{"$${X} is a literal ${X}", "$${TOKEN}", "${TOKEN}"},
		{"a lone dollar stays as it is", "a$b $ c$", "a$b $ c$"},
		{"a value from the environment is not expanded again", "${TRICK}", "${TOKEN}"},
		{"text without a dollar is unchanged", "plain", "plain"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := expand(tt.value, envOf(env))
			if err != nil || got != tt.want {
				t.Errorf("expand(%q) = %q, %v, want %q, nil", tt.value, got, err, tt.want)
			}
		})
	}

	t.Run("command, args, env values and cwd are all expanded", func(t *testing.T) {
		src := `{"mcpServers": {"s": {
			"command": "${BIN}",
			"args": ["--token", "${TOKEN}"],
			"env": {"T": "${TOKEN}"},
			"cwd": "${DIR}/work",
			"prefix": "p"
		}}}`
		s := mustParse(t, src, env).MCPServers["s"]
		want := ServerConfig{
			Command: "/usr/bin/srv",
			Args:    []string{"--token", "secret"},
			Env:     map[string]string{"T": "secret"},
			Cwd:     "/srv/work",
			Prefix:  "p",
			name:    "s",
			// What -check prints: nothing of the variables' values.
			shown: map[string]string{"command": "****", "args[1]": "****", "env.T": "****", "cwd": "****/work"},
		}
		if !reflect.DeepEqual(*s, want) {
			t.Errorf("ParseConfig(...).MCPServers[s] = %+v, want %+v", *s, want)
		}
	})

	t.Run("a nil getenv reads the process environment", func(t *testing.T) {
		t.Setenv("CORRAL_TEST_CMD", "from-env")
		c, err := ParseConfig("config.json", []byte(`{"mcpServers": {"s": {"command": "${CORRAL_TEST_CMD}"}}}`), nil, nil)
		if err != nil {
			t.Fatalf("ParseConfig(...) error = %q, want nil", err)
		}
		if got := c.MCPServers["s"].Command; got != "from-env" {
			t.Errorf("ParseConfig(...) command = %q, want %q", got, "from-env")
		}
	})
}

func TestExpandErrors(t *testing.T) {
	tests := []struct {
		name  string
		value string
		want  string
	}{
		{"an unset variable is an error", "${NOPE}", "${NOPE} is not set; export it, or write ${NOPE:-default}"},
		{"an unterminated reference is an error", "a${NOPE", `unterminated "${NOPE"`},
		{"a name starting with a digit is an error", "${1X}", `invalid variable name "1X" in ${1X}`},
		{"a name with a dash is an error", "${A-B}", `invalid variable name "A-B" in ${A-B}`},
		{"an empty name is an error", "${}", `invalid variable name "" in ${}`},
		{"an empty name with a default is an error", "${:-x}", `invalid variable name "" in ${:-x}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := expand(tt.value, envOf(nil))
			if err == nil {
				t.Fatalf("expand(%q) = %q, nil, want error containing %q", tt.value, got, tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("expand(%q) error = %q, want it to contain %q", tt.value, err, tt.want)
			}
		})
	}
}

func TestDurationJSON(t *testing.T) {
	tests := []struct {
		name string
		json string
		want time.Duration
	}{
		{"a Go duration string is parsed", `"90s"`, 90 * time.Second},
		{"a compound duration string is parsed", `"1m30s"`, 90 * time.Second},
		{"a number is seconds", `45`, 45 * time.Second},
		{"a fractional number is fractional seconds", `0.25`, 250 * time.Millisecond},
		{"a negative string is parsed (and rejected later by validation)", `"-2s"`, -2 * time.Second},
		{"a negative number is parsed", `-3`, -3 * time.Second},
		{"null leaves the duration as it was", `null`, 7 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := Duration(7 * time.Second)
			if err := json.Unmarshal([]byte(tt.json), &d); err != nil {
				t.Fatalf("json.Unmarshal(%s, &Duration) error = %q, want nil", tt.json, err)
			}
			if d.D() != tt.want {
				t.Errorf("json.Unmarshal(%s, &Duration) = %v, want %v", tt.json, d.D(), tt.want)
			}
		})
	}

	bad := []struct {
		name string
		json string
		want string
	}{
		{"an unparsable string is an error", `"ten seconds"`, `invalid duration "ten seconds"`},
		{"a string without a unit is an error", `"10"`, `invalid duration "10"`},
		{"a boolean is an error", `false`, `got bool`},
		{"an array is an error", `[1]`, `got array`},
		{"a huge number is an error", `1e300`, `out of range`},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			var d Duration
			err := json.Unmarshal([]byte(tt.json), &d)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("json.Unmarshal(%s, &Duration) error = %v, want it to contain %q", tt.json, err, tt.want)
			}
		})
	}

	t.Run("a duration is written as a string", func(t *testing.T) {
		got, err := json.Marshal(Duration(90 * time.Second))
		if err != nil || string(got) != `"1m30s"` {
			t.Errorf("json.Marshal(Duration(90s)) = %s, %v, want %q, nil", got, err, `"1m30s"`)
		}
	})
}

func TestConfigServers(t *testing.T) {
	src := `{"mcpServers": {
		"zeta": {"command": "z"},
		"alpha": {"command": "a"},
		"off": {"command": "o", "disabled": true},
		"mid": {"command": "m", "disabled": false}
	}}`
	c := mustParse(t, src, nil)
	var names []string
	for _, s := range c.Servers() {
		names = append(names, s.Name())
	}
	want := []string{"alpha", "mid", "zeta"}
	if !reflect.DeepEqual(names, want) {
		t.Errorf("Servers() names = %q, want %q (sorted, without the disabled one)", names, want)
	}
}

func TestConfigPerServerOverrides(t *testing.T) {
	src := `{
		"requestTimeout": "20s",
		"maxInFlight": 8,
		"mcpServers": {
			"plain": {"command": "p"},
			"slow": {"command": "s", "requestTimeout": "5m", "maxInFlight": 1}
		}
	}`
	c := mustParse(t, src, nil)
	tests := []struct {
		server      string
		wantTimeout time.Duration
		wantMax     int
	}{
		{"plain", 20 * time.Second, 8},
		{"slow", 5 * time.Minute, 1},
	}
	for _, tt := range tests {
		s := c.MCPServers[tt.server]
		if got := c.requestTimeout(s); got != tt.wantTimeout {
			t.Errorf("requestTimeout(%s) = %v, want %v", tt.server, got, tt.wantTimeout)
		}
		if got := c.maxInFlight(s); got != tt.wantMax {
			t.Errorf("maxInFlight(%s) = %d, want %d", tt.server, got, tt.wantMax)
		}
	}
}

func TestApplyDefaultsNamesServers(t *testing.T) {
	c := &Config{MCPServers: map[string]*ServerConfig{"echo": {Command: "e"}}}
	c.applyDefaults()
	if got := c.MCPServers["echo"].Name(); got != "echo" {
		t.Errorf("after applyDefaults, Name() = %q, want %q", got, "echo")
	}
	if c.Listen != defaultListen || c.MaxInFlight != defaultMaxInFlight {
		t.Errorf("after applyDefaults, Listen, MaxInFlight = %q, %d, want %q, %d", c.Listen, c.MaxInFlight, defaultListen, defaultMaxInFlight)
	}
}

func TestNearest(t *testing.T) {
	candidates := []string{"command", "args", "env", "cwd", "requestTimeout"}
	tests := []struct {
		word   string
		want   string
		wantOK bool
	}{
		{"comand", "command", true},
		{"Command", "command", true},
		{"arg", "args", true},
		{"requestTimout", "requestTimeout", true},
		{"frobnicate", "", false},
		{"foo", "", false},
	}
	for _, tt := range tests {
		got, ok := nearest(tt.word, candidates)
		if ok != tt.wantOK || ok && got != tt.want {
			t.Errorf("nearest(%q) = %q, %v, want %q, %v", tt.word, got, ok, tt.want, tt.wantOK)
		}
	}
}

func TestLoadConfig(t *testing.T) {
	t.Run("a file on disk is read and parsed", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "corral.json")
		if err := os.WriteFile(path, []byte(`{"mcpServers": {"echo": {"command": "${BIN}"}}}`), 0o600); err != nil {
			t.Fatal(err)
		}
		c, err := LoadConfig(path, envOf(map[string]string{"BIN": "echo-server"}), nil)
		if err != nil {
			t.Fatalf("LoadConfig(%q) error = %q, want nil", path, err)
		}
		if c.file != path || c.MCPServers["echo"].Command != "echo-server" {
			t.Errorf("LoadConfig(%q) = file %q, command %q, want file %q, command %q",
				path, c.file, c.MCPServers["echo"].Command, path, "echo-server")
		}
	})

	t.Run("an error in a file on disk names the file", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "corral.json")
		if err := os.WriteFile(path, []byte(`{"mcpServers": {}}`), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := LoadConfig(path, envOf(nil), nil)
		want := path + ": mcpServers: no servers configured"
		if err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("LoadConfig(%q) error = %v, want it to start with %q", path, err, want)
		}
	})

	t.Run("a missing file is an error naming the path", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "missing.json")
		_, err := LoadConfig(path, envOf(nil), nil)
		if err == nil {
			t.Fatalf("LoadConfig(%q) error = nil, want an error", path)
		}
		if !strings.HasPrefix(err.Error(), path+": ") {
			t.Errorf("LoadConfig(%q) error = %q, want it to start with %q", path, err, path+": ")
		}
		if !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("LoadConfig(%q) error = %q, want one that is fs.ErrNotExist", path, err)
		}
	})
}

func TestAuthTokenSources(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "token"), []byte("from-file\n"), 0o600)
	os.WriteFile(filepath.Join(dir, "empty"), nil, 0o600)
	for _, tc := range []struct {
		name, src, wantToken, wantErr string
	}{
		{"a file beside the config", `{"authTokenFile":"token","mcpServers":{"a":{"command":"x"}}}`, "from-file", ""},
		{"an environment variable", `{"authTokenEnv":"TOK","mcpServers":{"a":{"command":"x"}}}`, "from-env", ""},
		{"both", `{"authTokenFile":"token","authTokenEnv":"TOK","mcpServers":{"a":{"command":"x"}}}`, "", "not both"},
		{"an empty file", `{"authTokenFile":"empty","mcpServers":{"a":{"command":"x"}}}`, "", "is empty"},
		{"a missing file", `{"authTokenFile":"nope","mcpServers":{"a":{"command":"x"}}}`, "", "authTokenFile: cannot read the token"},
		{"an unset variable", `{"authTokenEnv":"UNSET","mcpServers":{"a":{"command":"x"}}}`, "", "UNSET is not set or empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			getenv := func(k string) (string, bool) {
				if k == "TOK" {
					return "from-env", true
				}
				return "", false
			}
			c, err := ParseConfig(filepath.Join(dir, "config.json"), []byte(tc.src), getenv, nil)
			switch {
			case tc.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("ParseConfig error = %v, want it to contain %q", err, tc.wantErr)
				}
			case err != nil:
				t.Errorf("ParseConfig error = %v", err)
			case c.token != tc.wantToken:
				t.Errorf("token = %q, want %q", c.token, tc.wantToken)
			}
			if err == nil && strings.Contains(string(c.resolved()), tc.wantToken) {
				t.Errorf("-check output shows the token:\n%s", c.resolved())
			}
		})
	}
}
