package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// copyFile copies the file src to dst, creating dst's directory.
func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestDesktopClientFilesLoadAsTheyAre(t *testing.T) {
	env := map[string]string{"HOME": "/home/me", "GITHUB_TOKEN": "ghp_x", "LINEAR_API_KEY": "lin_x", "PERPLEXITY_API_KEY": "pplx"}
	type server struct{ Command, URL, FirstArg, LastArg string }
	for _, tc := range []struct {
		name, file string
		setUp      func(t *testing.T, path string) // beside the copy of the file, if not nil
		edit       func(src string) string         // applied to the copy, if not nil
		want       map[string]server               // every enabled server
		env        map[string]map[string]string    // of some servers
		warnings   []string
	}{
		{
			name: "Cursor's mcp.json, with ${env:NAME}, ${userHome} and a remote server without type",
			file: "testdata/clients/cursor-mcp.json",
			want: map[string]server{
				"filesystem": {Command: "npx", FirstArg: "-y", LastArg: "/home/me/projects"},
				"github":     {Command: "docker", FirstArg: "run", LastArg: "ghcr.io/github/github-mcp-server"},
				"linear":     {URL: "https://mcp.linear.app/mcp"},
			},
		},
		{
			name: "Claude Desktop's claude_desktop_config.json, with a disabled server and a key of its own",
			file: "testdata/clients/claude_desktop_config.json",
			want: map[string]server{
				"filesystem": {Command: "npx", FirstArg: "-y", LastArg: "/Users/me/Downloads"},
				"memory":     {Command: "npx", FirstArg: "-y", LastArg: "@modelcontextprotocol/server-memory"},
			},
			warnings: []string{`ignoring key corral does not use: "globalShortcut"`},
		},
		{
			name: "VS Code's .vscode/mcp.json, once its ${input:...} is an ${env:...}",
			file: "testdata/clients/vscode/.vscode/mcp.json",
			edit: func(src string) string {
				return strings.Replace(src, "${input:perplexity-key}", "${env:PERPLEXITY_API_KEY}", 1)
			},
			setUp: func(t *testing.T, path string) {
				copyFile(t, "testdata/clients/vscode/.env", filepath.Join(filepath.Dir(path), "..", ".env"))
			},
			want: map[string]server{
				"perplexity":      {Command: "npx", FirstArg: "-y", LastArg: "server-perplexity-ask"},
				"fetch":           {Command: "uvx", FirstArg: "mcp-server-fetch", LastArg: "mcp-server-fetch"},
				"workspace-files": {Command: "npx", FirstArg: "-y", LastArg: "WORKSPACE"},
				"github":          {URL: "https://api.githubcopilot.com/mcp/"},
			},
			env: map[string]map[string]string{
				"perplexity": {"PERPLEXITY_API_KEY": "pplx"},
				"fetch":      {"FETCH_USER_AGENT": "corral-test/1.0", "FETCH_TIMEOUT": "30"},
			},
		},
		{
			name: "the VS Code example",
			file: "examples/vscode-mcp.json",
			want: map[string]server{
				"memory": {Command: "npx", FirstArg: "-y", LastArg: "@modelcontextprotocol/server-memory"},
				"github": {URL: "https://api.githubcopilot.com/mcp/"},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A copy, in a directory of the same name, so that relative paths
			// and the .vscode directory are as they were.
			root := t.TempDir()
			path := filepath.Join(root, tc.file)
			copyFile(t, tc.file, path)
			if tc.edit != nil {
				data, _ := os.ReadFile(path)
				os.WriteFile(path, []byte(tc.edit(string(data))), 0o600)
			}
			if tc.setUp != nil {
				tc.setUp(t, path)
			}
			var warnings []string
			c, err := LoadConfig(path, envOf(env), func(msg string) { warnings = append(warnings, strings.TrimPrefix(msg, path+": ")) })
			if err != nil {
				t.Fatalf("LoadConfig(%s) error:\n%v", tc.file, err)
			}
			if diff := cmp.Diff(tc.warnings, warnings); diff != "" {
				t.Errorf("LoadConfig(%s) warnings (-want +got):\n%s", tc.file, diff)
			}
			got := map[string]server{}
			for _, s := range c.Servers() {
				g := server{Command: s.Command, URL: s.URL}
				if len(s.Args) > 0 {
					g.FirstArg, g.LastArg = s.Args[0], s.Args[len(s.Args)-1]
				}
				got[s.Name()] = g
			}
			ws := filepath.Join(root, "testdata/clients/vscode")
			for name, s := range tc.want {
				if s.LastArg == "WORKSPACE" {
					s.LastArg = ws
					tc.want[name] = s
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("LoadConfig(%s) servers (-want +got):\n%s", tc.file, diff)
			}
			for name, want := range tc.env {
				if diff := cmp.Diff(want, c.MCPServers[name].Env); diff != "" {
					t.Errorf("LoadConfig(%s) env of %s (-want +got):\n%s", tc.file, name, diff)
				}
			}
		})
	}
}

func TestVSCodeInputIsAClearError(t *testing.T) {
	path := filepath.Join(t.TempDir(), ".vscode", "mcp.json")
	copyFile(t, "testdata/clients/vscode/.vscode/mcp.json", path)
	copyFile(t, "testdata/clients/vscode/.env", filepath.Join(filepath.Dir(path), "..", ".env"))
	_, err := LoadConfig(path, envOf(nil), nil)
	want := path + `: servers.perplexity.env.PERPLEXITY_API_KEY: ${input:perplexity-key}: VS Code prompts the user for an input, which corral cannot do; put the value in an environment variable and write ${env:NAME}, or in a file and write ${file:PATH}`
	if err == nil || err.Error() != want {
		t.Errorf("LoadConfig(a VS Code file with an input) error =\n%v\nwant exactly\n%s", err, want)
	}
}

func TestVSCodeServersMap(t *testing.T) {
	env := map[string]string{"TOKEN": "t0k", "HOME": "/home/me"}
	tests := []struct {
		name    string
		src     string
		servers []string // enabled, when no error is wanted
		wantErr []string // each line of the error, without the file's name
	}{
		{
			name:    "a servers map alone is read",
			src:     `{"servers": {"a": {"type": "stdio", "command": "x"}}}`,
			servers: []string{"a"},
		},
		{
			name:    "servers and mcpServers are read together",
			src:     `{"mcpServers": {"a": {"command": "x"}}, "servers": {"b": {"type": "stdio", "command": "y"}}}`,
			servers: []string{"a", "b"},
		},
		{
			name:    "a null mcpServers beside a servers map is no map",
			src:     `{"mcpServers": null, "servers": {"a": {"command": "x"}}}`,
			servers: []string{"a"},
		},
		{
			name:    "inputs are accepted without a warning",
			src:     `{"inputs": [{"type": "promptString", "id": "k", "password": true}], "servers": {"a": {"command": "x"}}}`,
			servers: []string{"a"},
		},
		{
			name:    "dev is accepted and ignored",
			src:     `{"servers": {"a": {"command": "x", "dev": {"watch": "src/**/*.ts"}}}}`,
			servers: []string{"a"},
		},
		{
			name:    "comments and trailing commas are read as VS Code reads them",
			src:     "{\n // a comment\n \"servers\": {\"a\": {\"command\": \"x\", /* another */ \"args\": [\"//not a comment\",],},},\n}",
			servers: []string{"a"},
		},
		{
			name:    "the servers of a map are all disabled",
			src:     `{"servers": {"a": {"command": "x", "disabled": true}}}`,
			wantErr: []string{`mcpServers: every server is disabled; enable one by removing "disabled": true, or add one, e.g. {"mcpServers": {"echo": {"command": "..."}}}`},
		},
		{
			name:    "a name in both maps is an error naming it",
			src:     `{"mcpServers": {"a": {"command": "x"}}, "servers": {"a": {"command": "y"}}}`,
			wantErr: []string{`servers: server "a" is in both mcpServers and servers; keep one of the two entries`},
		},
		{
			name:    "an error in a servers entry names the servers map",
			src:     `{"servers": {"a": {"type": "stdio", "args": []}}}`,
			wantErr: []string{`servers.a.command: required (the program to run, e.g. "npx")`},
		},
		{
			name:    "a servers map that is not an object is an error",
			src:     `{"mcpServers": {"a": {"command": "x"}}, "servers": []}`,
			wantErr: []string{`servers: want an object mapping server names to server entries, got array`},
		},
		{
			name:    "a missing envFile names the server, the field and the file",
			src:     `{"servers": {"a": {"command": "x", "envFile": "/nonexistent/.env"}}}`,
			wantErr: []string{`servers.a.envFile: /nonexistent/.env: no such file or directory`},
		},
		{
			name:    "a remote server has no envFile",
			src:     `{"servers": {"a": {"type": "http", "url": "https://x.example/mcp", "envFile": ".env"}}}`,
			wantErr: []string{`servers.a.envFile: a remote server (with "url") has no envFile; remove one of the two`},
		},
		{
			name:    "an input in a header names the server and the header",
			src:     `{"servers": {"a": {"type": "http", "url": "https://x.example/mcp", "headers": {"Authorization": "Bearer ${input:tok}"}}}}`,
			wantErr: []string{`servers.a.headers.Authorization: ${input:tok}: VS Code prompts the user for an input, which corral cannot do; put the value in an environment variable and write ${env:NAME}, or in a file and write ${file:PATH}`},
		},
		{
			name:    "an input in args names the argument",
			src:     `{"mcpServers": {"a": {"command": "x", "args": ["--key", "${input:k}"]}}}`,
			wantErr: []string{`mcpServers.a.args[1]: ${input:k}: VS Code prompts the user for an input, which corral cannot do; put the value in an environment variable and write ${env:NAME}, or in a file and write ${file:PATH}`},
		},
		{
			name:    "workspaceFolder outside a .vscode directory is an error saying why",
			src:     `{"servers": {"a": {"command": "x", "cwd": "${workspaceFolder}"}}}`,
			wantErr: []string{`servers.a.cwd: ${workspaceFolder} is VS Code's workspace folder, which corral knows only when the config file is in a .vscode or .cursor directory (it is then the folder holding that directory); write the path instead`},
		},
		{
			name:    "another VS Code variable is an error saying so",
			src:     `{"servers": {"a": {"command": "x", "args": ["${workspaceFolderBasename}"]}}}`,
			wantErr: []string{`servers.a.args[0]: ${workspaceFolderBasename} is a VS Code variable, which corral does not resolve; write its value instead`},
		},
		{
			name:    "a VS Code command reference is an error saying so",
			src:     `{"servers": {"a": {"command": "x", "args": ["${command:pickFile}"]}}}`,
			wantErr: []string{`servers.a.args[0]: ${command:pickFile}: corral does not resolve ${command:...} (VS Code's kinds other than env and input need VS Code); write the value, or use ${NAME}, ${env:NAME} or ${file:PATH}`},
		},
		{
			name:    "a null env value, which VS Code unsets, is an error",
			src:     `{"servers": {"a": {"command": "x", "env": {"A": "1", "B": null}}}}`,
			wantErr: []string{`servers.a.env.B: null (VS Code's way to unset a variable) is not supported; remove the variable, or give it a string value`},
		},
		{
			name:    "a number env value is an error",
			src:     `{"servers": {"a": {"command": "x", "env": {"PORT": 8080}}}}`,
			wantErr: []string{`servers.a.env: want an object with string values, got number`},
		},
		{
			name:    "an unset ${env:NAME} is an error",
			src:     `{"servers": {"a": {"command": "x", "env": {"K": "${env:NOPE}"}}}}`,
			wantErr: []string{`servers.a.env.K: ${env:NOPE} is not set; export it, or write ${NOPE:-default}`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err, warnings := parse(tt.src, env)
			if len(warnings) > 0 {
				t.Errorf("warnings = %q, want none", warnings)
			}
			if tt.wantErr != nil {
				var got []string
				if err != nil {
					got = strings.Split(strings.ReplaceAll(err.Error(), "config.json: ", ""), "\n")
				}
				if diff := cmp.Diff(tt.wantErr, got); diff != "" {
					t.Errorf("ParseConfig(%s) error (-want +got):\n%s", tt.src, diff)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseConfig(%s) error = %v", tt.src, err)
			}
			var names []string
			for _, s := range c.Servers() {
				names = append(names, s.Name())
			}
			if !slices.Equal(names, tt.servers) {
				t.Errorf("ParseConfig(%s) servers = %q, want %q", tt.src, names, tt.servers)
			}
		})
	}
}

func TestVSCodeVariables(t *testing.T) {
	env := map[string]string{"TOKEN": "t0k", "HOME": "/home/me"}
	src := `{"servers": {"a": {"command": "x", "args": ["${workspaceFolder}/src", "${userHome}/.cache", "${env:TOKEN}", "${env:NOPE:-dflt}"], "cwd": "${workspaceFolder}"}}}`
	dir := t.TempDir()
	c, err := ParseConfig(filepath.Join(dir, ".vscode", "mcp.json"), []byte(src), envOf(env), nil)
	if err != nil {
		t.Fatal(err)
	}
	s := c.MCPServers["a"]
	want := []string{dir + "/src", "/home/me/.cache", "t0k", "dflt"}
	if diff := cmp.Diff(want, s.Args); diff != "" {
		t.Errorf("args (-want +got):\n%s", diff)
	}
	if s.Cwd != dir {
		t.Errorf("cwd = %q, want the folder holding .vscode, %q", s.Cwd, dir)
	}
	if out := string(c.resolved()); strings.Contains(out, "t0k") {
		t.Errorf("-check shows an ${env:...} value:\n%s", out)
	}
	c, err = ParseConfig(filepath.Join(dir, ".cursor", "mcp.json"), []byte(src), envOf(env), nil)
	if err != nil || c.MCPServers["a"].Cwd != dir {
		t.Errorf("in .cursor/mcp.json: cwd = %v, %v; want the folder holding .cursor, %q", c, err, dir)
	}
}

func TestStripJSONCKeepsPositions(t *testing.T) {
	for _, tc := range []struct{ name, src, want string }{
		{"a line comment", "{\"a\": 1 // one\n}", "{\"a\": 1       \n}"},
		{"a block comment over lines", "{/* a\nb */\"a\": 1}", "{    \n    \"a\": 1}"},
		{"a trailing comma in an object", `{"a": 1,}`, `{"a": 1 }`},
		{"a trailing comma before a comment", "[1, // x\n]", "[1      \n]"},
		{"slashes and commas in strings", `{"a": "//,}", "b": "/*\"*/"}`, `{"a": "//,}", "b": "/*\"*/"}`},
		{"an unterminated block comment is left", `{"a": 1 /* x`, `{"a": 1 /* x`},
		{"plain JSON is unchanged", `{"a": [1, 2], "b": {}}`, `{"a": [1, 2], "b": {}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := string(stripJSONC([]byte(tc.src))); got != tc.want {
				t.Errorf("stripJSONC(%q) = %q, want %q", tc.src, got, tc.want)
			}
		})
	}
	t.Run("a syntax error after a comment keeps its line and column", func(t *testing.T) {
		_, err, _ := parse("{\n  // c\n  \"mcpServers\": {\"a\" 1}\n}", nil)
		want := `config.json:3:22: invalid JSON: invalid character '1' after object key`
		if err == nil || err.Error() != want {
			t.Errorf("ParseConfig error = %v, want %s", err, want)
		}
	})
}

func TestServersMapRunsAServer(t *testing.T) {
	t.Parallel()
	tg := startGateway(t, `{"inputs": [], "servers": {"v": {"type": "stdio", "command": "FAKE", "args": ["-state", "STATE", "-name", "v", "-prefix", "v_"], "dev": {"watch": "*.go"}}}}`)
	c := connect(t, tg.url)
	if got := toolText(t, c.callTool("1", "v_echo", `{"text":"from a VS Code file"}`)); got != "from a VS Code file" {
		t.Errorf("v_echo answered %q", got)
	}
}

func TestEnvFile(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, ".env"), []byte("# a comment\nA=from-file\nB=s3cr3t-b\nexport C='quoted # not a comment'\n"), 0o600)
	os.WriteFile(filepath.Join(dir, "nul.env"), []byte("N=a\x00b\n"), 0o600)
	path := filepath.Join(dir, ".vscode", "mcp.json")
	src := `{"servers": {"a": {"command": "x", "env": {"A": "from-env"}, "envFile": "${workspaceFolder}/.env"}}}`
	c, err := ParseConfig(path, []byte(src), envOf(nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"A": "from-env", "B": "s3cr3t-b", "C": "quoted # not a comment"}
	if diff := cmp.Diff(want, c.MCPServers["a"].Env); diff != "" {
		t.Errorf("env, env winning over envFile (-want +got):\n%s", diff)
	}
	// ${workspaceFolder} is no secret: -check shows it resolved.
	if out := string(c.resolved()); strings.Contains(out, "s3cr3t") || !strings.Contains(out, `"envFile": "`+dir+`/.env"`) {
		t.Errorf("-check shows an envFile value, or not the envFile path resolved:\n%s", out)
	}
	_, err = ParseConfig(path, []byte(`{"servers": {"a": {"command": "x", "envFile": "../nul.env"}}}`), envOf(nil), nil)
	if want := path + `: servers.a.envFile: the variable "N" holds a NUL byte, which an environment variable cannot`; err == nil || err.Error() != want {
		t.Errorf("an envFile with a NUL byte: error = %v, want %s", err, want)
	}
}

func TestParseEnvFile(t *testing.T) {
	src := strings.Join([]string{
		"# comment",
		"",
		"  PLAIN=value  ",
		"export EXPORTED=yes",
		"COLON: sep",
		"EQ_IN_VALUE=a=b",
		"COMMENTED=value # trailing comment",
		`DOUBLE="line1\nline2 # kept"`,
		`SINGLE='no \n escape'`,
		"BACKTICK=`tick`",
		`ESCAPED_QUOTE="a\"b#c"`,
		"NO_SEPARATOR",
		"=no key",
		"EMPTY=",
		"LATER=first",
		"LATER=second",
		"CRLF=x\r",
	}, "\n")
	want := map[string]string{
		"PLAIN": "value", "EXPORTED": "yes", "COLON": "sep", "EQ_IN_VALUE": "a=b", "COMMENTED": "value",
		"DOUBLE": "line1\nline2 # kept", "SINGLE": `no \n escape`, "BACKTICK": "tick", "ESCAPED_QUOTE": `a\"b#c`,
		"EMPTY": "", "LATER": "second", "CRLF": "x",
	}
	if diff := cmp.Diff(want, parseEnvFile(src)); diff != "" {
		t.Errorf("parseEnvFile (-want +got):\n%s", diff)
	}
}
