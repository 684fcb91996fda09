package main

// This file holds what -client-config prints: the entry an MCP client needs
// to run corral (over stdio) or to reach it (over HTTP), in that client's own
// format, with this binary's and the config's absolute paths.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"slices"
	"strings"
)

// A mcpClient is an MCP client -client-config knows: where its file is,
// the key of its map of servers, and how an entry of it names each
// transport.
type mcpClient struct {
	name, title string
	file        string // where the entry goes
	serversKey  string // "mcpServers", or VS Code's "servers"
	stdioType   bool   // a stdio entry has "type": "stdio"
	urlKey      string // the key of a remote entry's URL; "" if the file has none
	httpType    bool   // a remote entry has "type": "http"
	envRef      string // how a value refers to an environment variable, with %s for its name
	guiPATH     bool   // a desktop app that does not see the shell's PATH
	more        string // another way to add it, with %[1]s corral's path, %[2]s the config's, %[3]s the URL
}

// mcpClients are the clients -client-config knows, by name.
var mcpClients = []mcpClient{
	{name: "claude-desktop", title: "Claude Desktop",
		file:       `claude_desktop_config.json: on macOS ~/Library/Application Support/Claude/, on Windows %APPDATA%\Claude\ (Settings > Developer > Edit Config opens it); restart Claude Desktop after a change. Its file has no remote servers (those are Connectors, in its settings)`,
		serversKey: "mcpServers", guiPATH: true},
	{name: "claude-code", title: "Claude Code",
		file:       ".mcp.json at your project's root (or, for every project, claude mcp add -s user)",
		serversKey: "mcpServers", stdioType: true, urlKey: "url", httpType: true, envRef: "${%s}",
		more: "or run: claude mcp add corral -- %[1]s -stdio -config %[2]s\n// or, over HTTP: claude mcp add --transport http corral %[3]s"},
	{name: "cursor", title: "Cursor",
		file:       "~/.cursor/mcp.json (every project) or .cursor/mcp.json (one project)",
		serversKey: "mcpServers", urlKey: "url", envRef: "${env:%s}"},
	{name: "vscode", title: "VS Code",
		file:       ".vscode/mcp.json (one workspace) or your user mcp.json (command MCP: Open User Configuration)",
		serversKey: "servers", stdioType: true, urlKey: "url", httpType: true, envRef: "${env:%s}"},
	{name: "windsurf", title: "Windsurf",
		file:       "~/.codeium/windsurf/mcp_config.json (MCP toolbar > Configure opens it)",
		serversKey: "mcpServers", urlKey: "serverUrl", envRef: "${env:%s}"},
}

// clientNames returns the names of the clients -client-config knows.
func clientNames() []string {
	var names []string
	for _, c := range mcpClients {
		names = append(names, c.name)
	}
	return names
}

// clientConfig returns what -client-config NAME prints for c, the config
// at configPath (absolute) run by the corral binary at exe (absolute): the
// client's entry for corral over stdio, then, where the client has remote
// servers, over HTTP, each a JSON document to merge into the client's file,
// after a line of comment saying where it goes. PATH is corral's, given to
// a desktop app that would not see it.
func clientConfig(name, exe, configPath string, c *Config, path string) (string, error) {
	i := slices.IndexFunc(mcpClients, func(m mcpClient) bool { return m.name == name })
	if i < 0 {
		return "", fmt.Errorf("-client-config %q: unknown client; write one of %s", name, strings.Join(clientNames(), ", "))
	}
	m := mcpClients[i]
	var b strings.Builder
	fmt.Fprintf(&b, "// %s: merge an entry below into the %q map of %s.\n", m.title, m.serversKey, m.file)

	var stdio entry
	if m.stdioType {
		stdio = append(stdio, field{"type", "stdio"})
	}
	stdio = append(stdio, field{"command", exe}, field{"args", []string{"-stdio", "-config", configPath}})
	if m.guiPATH && path != "" {
		stdio = append(stdio, field{"env", map[string]string{"PATH": path}}) // for the servers corral starts: npx, uvx...
	}
	b.WriteString("// Over stdio: the client starts corral, which starts your servers.\n")
	writeEntry(&b, m.serversKey, stdio)

	url := clientURL(c.Listen)
	if m.urlKey != "" {
		var remote entry
		if m.httpType {
			remote = append(remote, field{"type", "http"})
		}
		remote = append(remote, field{m.urlKey, url})
		if c.AuthTokenFile != "" || c.AuthTokenEnv != "" {
			env := c.AuthTokenEnv
			if env == "" {
				env = "CORRAL_TOKEN"
			}
			remote = append(remote, field{"headers", map[string]string{"Authorization": "Bearer " + fmt.Sprintf(m.envRef, env)}})
		}
		fmt.Fprintf(&b, "// Or over HTTP, to a corral you run yourself (%s -config %s).\n", exe, configPath)
		if _, port, _ := net.SplitHostPort(c.Listen); port == "0" {
			fmt.Fprintf(&b, "// listen %q is any free port, which a client cannot know: give listen a port of its own.\n", c.Listen)
		}
		if c.AuthTokenFile != "" {
			fmt.Fprintf(&b, "// The client reads the bearer token from CORRAL_TOKEN in its environment: set it to the content of %s.\n", c.AuthTokenFile)
		}
		writeEntry(&b, m.serversKey, remote)
	}
	if m.more != "" {
		fmt.Fprintf(&b, "// "+m.more+"\n", exe, configPath, url)
	}
	return b.String(), nil
}

// An entry is a JSON object whose keys keep their order, as a person
// would write them: type, then command or url, then the rest.
type entry []field

// A field is one key of an entry, and its value.
type field struct {
	key   string
	value any
}

// MarshalJSON writes the entry's keys in order.
func (e entry) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, f := range e {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(f.key)
		v, err := json.Marshal(f.value)
		if err != nil {
			return nil, err
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// writeEntry writes {key: {"corral": e}} to b as indented JSON.
func writeEntry(b *strings.Builder, key string, e entry) {
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	enc.Encode(map[string]any{key: map[string]any{"corral": e}})
	b.Write(out.Bytes())
}

// clientURL returns the URL a client on this machine reaches corral at,
// listening on listen: a listener on every address is reached on loopback.
func clientURL(listen string) string {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "http://" + listen + "/mcp"
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port) + "/mcp" // http.go's mcpPath
}
