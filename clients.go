package main

// This file holds corral's named clients and the profiles that say what
// each sees: their config, how a client's token is read and checked when
// the config is loaded, and how a profile matches a server's items. The
// gateway makes a view of each profile (principal.go, access) and gives it
// to the principal of every request a client sends.

import (
	"bytes"
	"cmp"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"path/filepath"
	"slices"
	"strings"
)

// ClientConfig is one named client: who holds a token, and what they see.
type ClientConfig struct {
	// TokenFile names a file holding the client's bearer token (relative to
	// the config file's directory); TokenEnv names an environment variable
	// holding it. Exactly one must be set: a token is never written in the
	// config itself. The token must hold at least 128 bits (see tokenBits).
	TokenFile string `json:"tokenFile,omitempty"`
	TokenEnv  string `json:"tokenEnv,omitempty"`
	// Profile names the profile, in "profiles", that says which servers and
	// items the client sees. If empty, the client sees every server.
	Profile string `json:"profile,omitempty"`
	// Env maps a server's name to variables set, for this client's process
	// of the server only, over the server's own env; Headers likewise to
	// headers sent by this client's connection to a remote server. The
	// server must have "scope": "client". Their values are resolved at
	// load as a server's env and headers are (${NAME}, ${file:PATH}).
	Env     map[string]map[string]string `json:"env,omitempty"`
	Headers map[string]map[string]string `json:"headers,omitempty"`

	// literal says one of Env's or Headers' values is written in the
	// config rather than taken from a reference (-check warns of a config
	// file others can read, then).
	literal bool
}

// serverFor returns server s as client name's process of it runs: s
// itself if the client sets nothing for it, else a copy with the client's
// env and headers merged over the server's. cl may be nil.
func (cl *ClientConfig) serverFor(s *ServerConfig) *ServerConfig {
	if cl == nil || len(cl.Env[s.name]) == 0 && len(cl.Headers[s.name]) == 0 {
		return s
	}
	c := *s
	c.Env = merged(s.Env, cl.Env[s.name])
	c.Headers = merged(s.Headers, cl.Headers[s.name])
	return &c
}

// merged returns over's entries over base's, in a new map, or base if over
// is empty.
func merged(base, over map[string]string) map[string]string {
	if len(over) == 0 {
		return base
	}
	out := maps.Clone(base)
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, over)
	return out
}

// ProfileConfig says which servers, and which of their tools, resources and
// prompts, a client sees. Its zero value sees nothing.
type ProfileConfig struct {
	// Servers maps a server's name to what the profile shows of it; "*"
	// stands for every server not named. A server in neither is not seen.
	Servers map[string]*ProfileServer `json:"servers,omitempty"`
	// ReadOnlyTools keeps only the tools whose annotations say
	// readOnlyHint: true. A server's hints are only as trustworthy as the
	// server. If false, tools are not filtered by their hints.
	ReadOnlyTools bool `json:"readOnlyTools,omitempty"`
	// MaxInFlight bounds the requests each client of the profile has in
	// flight, over all its sessions; CallsPerSecond bounds how fast each
	// sends them (a second's worth may come at once); MaxSessions bounds
	// the sessions each has open. 0 is no bound of the profile's own: the
	// gateway's maxSessions and maxInFlightPerSession still hold. A call
	// past a bound gets a -32000 error naming it (clientlimits.go).
	MaxInFlight    int     `json:"maxInFlight,omitempty"`
	CallsPerSecond float64 `json:"callsPerSecond,omitempty"`
	MaxSessions    int     `json:"maxSessions,omitempty"`
	// ToolMode is how the profile's clients list tools, "all" or
	// "search" (Config.ToolMode). If empty, the top level's.
	ToolMode string `json:"toolMode,omitempty"`
}

// ProfileServer is what a profile shows of one server: each filter matches
// the server's own names (a tool's or prompt's name, a resource's URI, a
// resource template's uriTemplate), before any prefix corral adds. A nil
// filter shows every item of its kind.
type ProfileServer struct {
	Tools     *ToolFilter `json:"tools,omitempty"`
	Resources *ToolFilter `json:"resources,omitempty"`
	Prompts   *ToolFilter `json:"prompts,omitempty"`
}

// rules returns what the profile shows of server, or nil if it does not
// show the server at all.
func (p *ProfileConfig) rules(server string) *ProfileServer {
	if r, ok := p.Servers[server]; ok {
		return orWhole(r)
	}
	if r, ok := p.Servers["*"]; ok {
		return orWhole(r)
	}
	return nil
}

// orWhole returns r, or an empty ProfileServer for a server named with
// null: it is shown whole.
func orWhole(r *ProfileServer) *ProfileServer {
	if r == nil {
		return &ProfileServer{}
	}
	return r
}

// showsServer reports whether the profile shows any of server's items.
func (p *ProfileConfig) showsServer(server string) bool {
	return p.rules(server) != nil
}

// shows reports whether the profile shows the item of server named name by
// the server, of the list whose items field names ("tools", "prompts",
// "resources" or "resourceTemplates"); readOnly is whether a tool's
// annotations say readOnlyHint: true, asked only of tools. It is safe for
// concurrent use.
func (p *ProfileConfig) shows(field, server, name string, readOnly func() bool) bool {
	r := p.rules(server)
	if r == nil {
		return false
	}
	switch field {
	case "tools":
		return r.Tools.allows(name) && (!p.ReadOnlyTools || readOnly())
	case "prompts":
		return r.Prompts.allows(name)
	default:
		return r.Resources.allows(name)
	}
}

// clientToken is a named client's token, as read when the config was
// loaded.
type clientToken struct {
	client string
	token  []byte
}

// clientOf returns the named client whose token got is, or "" if none is.
// It compares got with every client's token, in constant time for each,
// and does not stop at the first match: how long it takes tells nothing of
// which token, if any, matched.
func clientOf(tokens []clientToken, got string) string {
	who := ""
	g := []byte(got)
	for _, t := range tokens {
		if subtle.ConstantTimeCompare(g, t.token) == 1 {
			who = t.client
		}
	}
	return who
}

// minTokenBits is the least entropy a client's token must hold, by
// tokenBits.
const minTokenBits = 128

// tokenBits estimates the entropy of token, in bits, by its length and
// the smallest alphabet it is written in: decimal digits (3.3 bits a
// character), hexadecimal digits (4), the characters of base64 and
// base64url (6), or any other (6.6, printable ASCII). A token of fewer than
// 8 different characters ("0000...", "abab...") counts as 0: no random
// token of the lengths asked for has so few. So 32 hexadecimal digits or
// 22 base64 characters are the least that pass.
func tokenBits(token string) float64 {
	distinct := map[rune]bool{}
	for _, r := range token {
		distinct[r] = true
	}
	if len(distinct) < 8 {
		return 0
	}
	in := func(set string) bool {
		return strings.Trim(token, set) == ""
	}
	const digits = "0123456789"
	size := 95.0
	switch {
	case in(digits):
		size = 10
	case in(digits+"abcdef") || in(digits+"ABCDEF"):
		size = 16
	case in(digits + "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ+/=-_"):
		size = 64
	}
	return float64(len(token)) * math.Log2(size)
}

// validateClients checks c's clients and profiles, and reads each client's
// token into c.clientTokens. Every error names the client or profile and
// its field. clients and profiles are the raw values of the top-level keys
// (nil if missing), in which a field corral does not know is an error: a
// misspelt "tools" would show every tool. It runs after the servers are
// parsed and the bearer token of authTokenFile is read, which no client's
// token may equal.
func (p *parser) validateClients(c *Config, clients, profiles json.RawMessage) {
	p.refuseUnknownFields("clients", clients, func() any { return new(ClientConfig) },
		"a client's fields are tokenFile, tokenEnv, profile, env and headers")
	p.refuseUnknownFields("profiles", profiles, func() any { return new(ProfileConfig) },
		`a profile's fields are servers, readOnlyTools, maxInFlight, callsPerSecond, maxSessions and toolMode; each server's, tools, resources and prompts; each of those, allow and deny`)
	if len(c.Clients) == 0 {
		for _, name := range slices.Sorted(maps.Keys(c.MCPServers)) {
			if s := c.MCPServers[name]; s != nil && s.clientScoped() {
				p.errorf(name, "scope", `"client" runs a process per named client, and "clients" names none, so no caller could reach the server; add "clients", or write "session" (a process per session)`)
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(c.Profiles)) {
		p.checkProfile(c, name)
	}
	p.checkToolMode("toolMode", c.ToolMode)
	seen := map[string]string{} // token -> the client (or authTokenFile) that holds it
	if c.token != "" {
		seen[c.token] = "authTokenFile/authTokenEnv"
	}
	for _, name := range slices.Sorted(maps.Keys(c.Clients)) {
		p.checkClient(c, name, seen)
	}
}

// checkProfile checks the profile of c named name: its bounds, its
// toolMode, the servers it names, and their filters' patterns.
func (p *parser) checkProfile(c *Config, name string) {
	prof := c.Profiles[name]
	field := "profiles." + quoteName(name)
	if prof == nil {
		p.errorf("", field, "want an object with \"servers\", the servers the profile shows")
		return
	}
	if prof.MaxInFlight < 0 {
		p.errorf("", field+".maxInFlight", "is %d; want a number of calls, at least 1, or 0 (or none) for no bound", prof.MaxInFlight)
	}
	if prof.MaxSessions < 0 {
		p.errorf("", field+".maxSessions", "is %d; want a number of sessions, at least 1, or 0 (or none) for no bound", prof.MaxSessions)
	}
	if prof.CallsPerSecond < 0 || math.IsNaN(prof.CallsPerSecond) {
		p.errorf("", field+".callsPerSecond", "is %g; want a rate above 0 (0.5 is a call every two seconds), or 0 (or none) for no bound", prof.CallsPerSecond)
	}
	p.checkToolMode(field+".toolMode", prof.ToolMode)
	for _, server := range slices.Sorted(maps.Keys(prof.Servers)) {
		if server != "*" && c.MCPServers[server] == nil {
			p.errorf("", field+".servers."+quoteName(server), "no server is named %q in mcpServers; name one of those, or \"*\" for every server", server)
		}
		r := prof.Servers[server]
		if r == nil {
			continue
		}
		for _, f := range []struct {
			key    string
			filter *ToolFilter
		}{{"tools", r.Tools}, {"resources", r.Resources}, {"prompts", r.Prompts}} {
			if f.filter != nil && (slices.Contains(f.filter.Allow, "") || slices.Contains(f.filter.Deny, "")) {
				p.errorf("", field+".servers."+quoteName(server)+"."+f.key, "a pattern is empty; write a name, or a glob with '*'")
			}
		}
	}
}

// checkClient checks the client of c named name: its profile and its
// values for servers (clientServerValues), and reads its token, which
// must be strong (tokenBits) and no other's: seen holds the tokens read
// so far, each with who holds it, and checkClient adds the client's. A
// token that passes is appended to c.clientTokens.
func (p *parser) checkClient(c *Config, name string, seen map[string]string) {
	cl := c.Clients[name]
	field := "clients." + quoteName(name)
	if cl == nil {
		p.errorf("", field, "want an object with \"tokenFile\" or \"tokenEnv\", and \"profile\"")
		return
	}
	if cl.Profile != "" && c.Profiles[cl.Profile] == nil {
		p.errorf("", field+".profile", "no profile is named %q in \"profiles\"; add it, or name one of %q", cl.Profile, slices.Sorted(maps.Keys(c.Profiles)))
	}
	p.clientServerValues(c, name, cl)
	if cl.TokenFile == "" && cl.TokenEnv == "" && slices.Contains(c.OAuth.oauthClientNames(), name) {
		return // an OAuth caller's client: its token is the authorization server's (oauth.map)
	}
	token, tokenField := p.readClientToken(name, cl)
	if token == "" {
		return
	}
	if bits := tokenBits(token); bits < minTokenBits {
		p.errorf("", field+"."+tokenField, "the token is too weak: about %.0f bits, fewer than %d; use 32 random hexadecimal digits or more (openssl rand -hex 32)", bits, minTokenBits)
		return
	}
	if other, dup := seen[token]; dup {
		p.errorf("", field+"."+tokenField, "the token is also %s's; give each client its own token", other)
		return
	}
	seen[token] = "client " + quoteName(name)
	c.clientTokens = append(c.clientTokens, clientToken{client: name, token: []byte(token)})
}

// The values of toolMode.
const (
	toolModeAll    = "all"
	toolModeSearch = "search"
)

// checkToolMode checks the toolMode at field: "", "all" or "search".
func (p *parser) checkToolMode(field, mode string) {
	if mode != "" && mode != toolModeAll && mode != toolModeSearch {
		p.errorf("", field, `is %q; want "all" (tools/list lists every tool) or "search" (it lists find_tools and call_tool)`, mode)
	}
}

// clientServerValues checks and resolves client name's env and headers:
// each names a server with "scope": "client" (env a local one, headers a
// remote one), and its values' references are resolved in place as a
// server's are.
func (p *parser) clientServerValues(c *Config, name string, cl *ClientConfig) {
	for _, f := range []struct {
		key    string
		values map[string]map[string]string
		remote bool
	}{{"env", cl.Env, false}, {"headers", cl.Headers, true}} {
		for _, server := range slices.Sorted(maps.Keys(f.values)) {
			field := "clients." + quoteName(name) + "." + f.key + "." + quoteName(server)
			s := c.MCPServers[server]
			switch {
			case s == nil:
				p.errorf("", field, "no server is named %q in mcpServers; name one of those", server)
				continue
			case !s.clientScoped():
				p.errorf("", field, `server %q is not "scope": "client", so its one process is shared and cannot take one client's %s; add "scope": "client" to the server, or set the value in the server's own %s`, server, f.key, f.key)
				continue
			case f.remote && s.URL == "":
				p.errorf("", field, `server %q is local (with "command"): a client's values for it go in "env"`, server)
				continue
			case !f.remote && s.URL != "":
				p.errorf("", field, `server %q is remote (with "url"): a client's values for it go in "headers"`, server)
				continue
			}
			vals := f.values[server]
			for _, key := range slices.Sorted(maps.Keys(vals)) {
				if key == "" || !f.remote && strings.Contains(key, "=") {
					p.errorf("", field, "invalid name %q; a name must be non-empty and an env name must not contain '='", key)
					continue
				}
				cl.literal = cl.literal || !strings.Contains(vals[key], "${")
				v, err := expandRefs(vals[key], p.lookup(f.key+"."+key))
				if err != nil {
					p.errorf("", field+"."+quoteName(key), "%v", err)
					continue
				}
				vals[key] = v
			}
		}
	}
}

// refuseUnknownFields records an error for each entry of data, the map of
// the top-level key that decodes into what fresh returns, that holds a
// field corral does not know; fields says which there are.
func (p *parser) refuseUnknownFields(key string, data json.RawMessage, fresh func() any, fields string) {
	var entries map[string]json.RawMessage
	if json.Unmarshal(data, &entries) != nil {
		return // decode reported it
	}
	for _, name := range slices.Sorted(maps.Keys(entries)) {
		dec := json.NewDecoder(bytes.NewReader(entries[name]))
		dec.DisallowUnknownFields()
		err := dec.Decode(fresh())
		if err != nil && strings.Contains(err.Error(), "unknown field") {
			p.errorf("", key+"."+quoteName(name), "%s; %s", strings.TrimPrefix(err.Error(), "json: "), fields)
		}
	}
}

// readClientToken reads client name's token from its tokenFile (relative
// to the config file's directory) or its tokenEnv, and returns it with the
// field it came from; "" after recording the error if it cannot.
func (p *parser) readClientToken(name string, cl *ClientConfig) (token, field string) {
	prefix := "clients." + quoteName(name) + "."
	switch {
	case cl.TokenFile != "" && cl.TokenEnv != "":
		p.errorf("", prefix+"tokenFile", "set tokenFile or tokenEnv, not both")
	case cl.TokenFile != "":
		data, err := readSecretFile(filepath.Dir(p.path), cl.TokenFile)
		if err != nil {
			p.errorf("", prefix+"tokenFile", "cannot read the token: %v", err)
			return "", ""
		}
		if token := strings.TrimSpace(data); token != "" {
			return token, "tokenFile"
		}
		p.errorf("", prefix+"tokenFile", "%s is empty; put the client's token in it", cl.TokenFile)
	case cl.TokenEnv != "":
		if token, ok := p.getenv(cl.TokenEnv); ok && strings.TrimSpace(token) != "" {
			return strings.TrimSpace(token), "tokenEnv"
		}
		p.errorf("", prefix+"tokenEnv", "the environment variable %s is not set or empty; export the client's token in it", cl.TokenEnv)
	default:
		p.errorf("", prefix+"tokenFile", "the client has no token; set tokenFile (a file holding it) or tokenEnv (a variable holding it), or name the client in oauth.map for OAuth callers")
	}
	return "", ""
}

// asksForToken reports whether HTTP clients must send a bearer token:
// authTokenFile's, a named client's, or an authorization server's (oauth).
func (c *Config) asksForToken() bool {
	return c.token != "" || len(c.clientTokens) > 0 || c.OAuth != nil
}

// profilesReport returns what -check prints of c's clients and profiles,
// or nothing if it has neither: each client with its profile, and each
// profile resolved: the servers it shows, what it shows of each, and each
// pattern that matches none of the server's items (usually a typo).
// items returns the names server listed of a kind (by the field of its
// list: "tools", "prompts", "resources", "resourceTemplates") when it
// last ran, and whether they are known; a pattern is checked only against
// items known.
func (c *Config) profilesReport(items func(server, field string) ([]string, bool)) []byte {
	if len(c.Clients) == 0 && len(c.Profiles) == 0 {
		return nil
	}
	var b strings.Builder
	for _, name := range slices.Sorted(maps.Keys(c.Clients)) {
		cl := c.Clients[name]
		switch {
		case cl == nil:
		case cl.Profile == "":
			fmt.Fprintf(&b, "client %s: every server\n", quoteName(name))
		default:
			fmt.Fprintf(&b, "client %s: profile %s\n", quoteName(name), quoteName(cl.Profile))
		}
	}
	servers := slices.Sorted(maps.Keys(c.MCPServers))
	for _, name := range slices.Sorted(maps.Keys(c.Profiles)) {
		p := c.Profiles[name]
		if p == nil {
			continue
		}
		where := ""
		if len(c.Clients) == 0 {
			where = fmt.Sprintf(" (served at /mcp/%s and by -stdio -profile %s)", name, name)
		}
		fmt.Fprintf(&b, "profile %s%s:\n", quoteName(name), where)
		if p.ReadOnlyTools {
			fmt.Fprintf(&b, "  only tools whose annotations say readOnlyHint: true\n")
		}
		if cmp.Or(p.ToolMode, c.ToolMode) == toolModeSearch {
			fmt.Fprintf(&b, "  tools listed in search mode: find_tools and call_tool\n")
		}
		shown := 0
		var warnings []string
		for _, server := range servers {
			r := p.rules(server)
			if r == nil {
				continue
			}
			shown++
			rules, w := serverRulesReport(server, r, items)
			warnings = append(warnings, w...)
			if len(rules) == 0 {
				rules = []string{"everything"}
			}
			fmt.Fprintf(&b, "  server %s: %s\n", quoteName(server), strings.Join(rules, ", "))
		}
		if shown == 0 {
			fmt.Fprintf(&b, "  no server: its clients see nothing\n")
		}
		for _, w := range warnings {
			b.WriteString(w)
		}
	}
	return []byte(b.String())
}

// serverRulesReport returns what -check prints of profile rules r for
// server (see profilesReport): each rule, and a warning for each pattern
// that matches none of the items the server listed when it last ran.
func serverRulesReport(server string, r *ProfileServer, items func(server, field string) ([]string, bool)) (rules, warnings []string) {
	for _, f := range []struct {
		key    string
		fields []string
		filter *ToolFilter
	}{{"tools", []string{"tools"}, r.Tools}, {"prompts", []string{"prompts"}, r.Prompts}, {"resources", []string{"resources", "resourceTemplates"}, r.Resources}} {
		if f.filter == nil {
			continue
		}
		if len(f.filter.Allow) > 0 {
			rules = append(rules, fmt.Sprintf("%s.allow %q", f.key, f.filter.Allow))
		}
		if len(f.filter.Deny) > 0 {
			rules = append(rules, fmt.Sprintf("%s.deny %q", f.key, f.filter.Deny))
		}
		var names []string
		known := false
		for _, field := range f.fields {
			n, ok := items(server, field)
			names, known = append(names, n...), known || ok
		}
		if !known {
			continue
		}
		for _, pattern := range slices.Concat(f.filter.Allow, f.filter.Deny) {
			if !slices.ContainsFunc(names, func(n string) bool { return globMatch(pattern, n) }) {
				warnings = append(warnings, fmt.Sprintf("  warning: server %s: %s pattern %q matches none of the %d %s it listed when it last ran (a typo?)\n", quoteName(server), f.key, pattern, len(names), f.key))
			}
		}
	}
	return rules, warnings
}
