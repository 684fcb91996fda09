package main

// This file holds the parsing and validation of a config file: a parser that
// collects every problem, each reported with the file, the server and the
// field, and what to do; the expansion of ${NAME} references; and the
// helpers that make the messages clear (the JSON kind of a value, a position
// in the file, the nearest known key).

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/url"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// A parser collects the problems found in a config file.
type parser struct {
	getenv func(string) (string, bool)
	errs   []configError

	// path is the config file's path, which relative paths in it start
	// from; origin maps the name of each server entry in VS Code's
	// "servers" map to "servers", for messages (others are in
	// "mcpServers").
	path   string
	origin map[string]string
}

// A configError is one problem found in a config file.
type configError struct {
	server string // the name of the server entry, or "" for a top-level key
	field  string // the key, within the server entry if server is not ""
	msg    string
}

// errorf records a problem with field of server (or with a top-level key if
// server is "").
func (p *parser) errorf(server, field, format string, args ...any) {
	p.errs = append(p.errs, configError{server, field, fmt.Sprintf(format, args...)})
}

// err returns the recorded problems as one error, sorted by server and field.
func (p *parser) err(file string) error {
	slices.SortStableFunc(p.errs, func(a, b configError) int {
		return cmp.Or(cmp.Compare(a.server, b.server), cmp.Compare(a.field, b.field))
	})
	errs := make([]error, len(p.errs))
	for i, e := range p.errs {
		path := e.field
		if e.server != "" {
			path = cmp.Or(p.origin[e.server], "mcpServers") + "." + quoteName(e.server)
			if e.field != "" {
				path += "." + e.field
			}
		}
		errs[i] = fmt.Errorf("%s: %s: %s", file, path, e.msg)
	}
	return errors.Join(errs...)
}

// parseErrors is the error of a config file that does not parse: every
// problem in it, and, for -check's summary line, how many servers it has
// and how many of them have errors.
type parseErrors struct {
	err             error
	servers, failed int
	topLevel        int // problems not in a server entry
}

func (e *parseErrors) Error() string { return e.err.Error() }
func (e *parseErrors) Unwrap() []error {
	if j, ok := e.err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{e.err}
}

// parseErrors returns the recorded problems of the file, which has the
// given number of servers, as a *parseErrors.
func (p *parser) parseErrors(file string, servers int) error {
	failed := map[string]bool{}
	top := 0
	for _, e := range p.errs {
		if e.server == "" {
			top++
		}
		failed[e.server] = true
	}
	delete(failed, "")
	return &parseErrors{err: p.err(file), servers: servers, failed: len(failed), topLevel: top}
}

// summary returns -check's last line for a file that does not parse.
func (e *parseErrors) summary() string {
	line := fmt.Sprintf("%s: %d ok, %s", counted(e.servers, "server", "servers"), e.servers-e.failed, counted(e.failed, "error", "errors"))
	if e.topLevel > 0 {
		line += fmt.Sprintf("; %s outside the servers", counted(e.topLevel, "error", "errors"))
	}
	return line + "; corral would not start"
}

// decode decodes data into the value ptr points to, the field of server (or
// the top-level key if server is "").
func (p *parser) decode(server, field string, data json.RawMessage, ptr any) {
	if shownDefault(field, data) {
		return
	}
	err := json.Unmarshal(data, ptr)
	var te *json.UnmarshalTypeError
	switch {
	case err == nil:
	case errors.As(err, &te):
		p.errorf(server, field, "want %s, got %s", describeType(reflect.TypeOf(ptr).Elem()), te.Value)
	default:
		p.errorf(server, field, "%v", err)
	}
}

// shownDefault reports whether data, the value of field, is how -check
// prints that the setting is off: "off" for idleStop, "none" for limits and
// sandbox. It reads back as the key left out, so that what -check prints is
// a config.
func shownDefault(field string, data json.RawMessage) bool {
	switch string(bytes.TrimSpace(data)) {
	case `"off"`:
		return field == "idleStop"
	case `"none"`:
		return field == "limits" || field == "sandbox"
	}
	return false
}

// unknownFieldError is the error for key, unknown in an object whose keys
// are known: with the nearest of them where key is a likely typo.
func unknownFieldError(key string, known []string) error {
	if near, ok := nearest(key, known); ok {
		return fmt.Errorf("unknown field %q; did you mean %q?", key, near)
	}
	return fmt.Errorf("unknown field %q; known fields are %s", key, quoteList(known))
}

// ignoredKeysMessage returns the warning for the ignored top-level keys.
func ignoredKeysMessage(keys []string) string {
	known := slices.Collect(maps.Keys(jsonFields(&Config{})))
	quoted := make([]string, len(keys))
	for i, key := range keys {
		quoted[i] = strconv.Quote(key)
		if near, ok := nearest(key, known); ok {
			quoted[i] += fmt.Sprintf(" (did you mean %q?)", near)
		}
	}
	noun := "keys"
	if len(keys) == 1 {
		noun = "key"
	}
	return fmt.Sprintf("ignoring %s corral does not use: %s", noun, strings.Join(quoted, ", "))
}

// parseServers parses the values of the "mcpServers" key and of VS Code's
// "servers" key (each nil if missing), and checks that they have a server to
// run. A name may be in only one of the two.
func (p *parser) parseServers(mcpServers, vscodeServers json.RawMessage) map[string]*ServerConfig {
	entries, ok1 := p.serverEntries("mcpServers", mcpServers)
	more, ok2 := p.serverEntries("servers", vscodeServers)
	for name, data := range more {
		if _, dup := entries[name]; dup {
			p.errorf("", "servers", "server %q is in both mcpServers and servers; keep one of the two entries", name)
			continue
		}
		entries[name] = data
		if p.origin == nil {
			p.origin = map[string]string{}
		}
		p.origin[name] = "servers"
	}
	servers := make(map[string]*ServerConfig)
	enabled := 0
	for _, name := range slices.Sorted(maps.Keys(entries)) {
		s := p.parseServer(name, entries[name])
		s.vscode = p.origin[name] == "servers"
		servers[name] = s
		if !s.Disabled {
			enabled++
		}
	}

	p.checkPrefixesUnique(servers)

	const example = `{"mcpServers": {"echo": {"command": "..."}}}`
	switch {
	case enabled > 0, !ok1 || !ok2: // a map that is not one was reported
	case len(servers) > 0:
		p.errorf("", "mcpServers", `every server is disabled; enable one by removing "disabled": true, or add one, e.g. %s`, example)
	default:
		p.errorf("", "mcpServers", "no servers configured; add one, e.g. %s", example)
	}
	return servers
}

// checkPrefixesUnique reports each server that has the prefix of a server
// before it by name: a prefix's names belong to its one server, and two
// servers with one prefix would each take names the other lists.
func (p *parser) checkPrefixesUnique(servers map[string]*ServerConfig) {
	owner := map[string]string{}
	for _, name := range slices.Sorted(maps.Keys(servers)) {
		s := servers[name]
		if s.Disabled || s.Prefix == "" {
			continue
		}
		if first, ok := owner[s.Prefix]; ok {
			p.errorf(name, "prefix", "%q is also the prefix of server %q; a prefix's names belong to one server alone: give each server a prefix of its own", s.Prefix, first)
			continue
		}
		owner[s.Prefix] = name
	}
}

// serverEntries returns the entries of data, the value of the top-level key
// (nil if the key is missing), by name, and reports whether data is such a
// map (or missing).
func (p *parser) serverEntries(key string, data json.RawMessage) (map[string]json.RawMessage, bool) {
	entries := map[string]json.RawMessage{}
	if data != nil {
		if err := json.Unmarshal(data, &entries); err != nil {
			p.errorf("", key, "want an object mapping server names to server entries, got %s", jsonKind(data))
			return map[string]json.RawMessage{}, false
		}
	}
	if entries == nil { // null
		entries = map[string]json.RawMessage{}
	}
	return entries, true
}

// foreignServerKeys are keys that other MCP clients put in server entries.
// corral accepts them and ignores them, so that a desktop client's config file
// can be used as is.
// VS Code's "dev" (watch files and restart, attach a debugger) is one: corral
// starts every server at once and logs its stderr anyway.
var foreignServerKeys = []string{"alwaysAllow", "autoApprove", "description", "dev", "timeout"}

// remoteServerTypes are the values of a server entry's "type" key that name a
// remote (HTTP) server.
var remoteServerTypes = []string{"http", "sse", "streamable-http"}

// parseServer parses and validates the entry of the server with the given
// name. A disabled server is only checked for types and unknown keys, and its
// variables are not expanded. The result is never nil, even for an entry with
// errors, so that it counts as a configured server.
func (p *parser) parseServer(name string, data json.RawMessage) *ServerConfig {
	s := &ServerConfig{name: name}
	if name == "" {
		p.errorf("", cmp.Or(p.origin[""], "mcpServers")+`.""`, "server name is empty; name it with letters, digits, '_', '.' and '-'")
		return s
	}
	if len(name) > maxNameLen {
		p.errorf("", cmp.Or(p.origin[name], "mcpServers"), "the server name %q... is %d bytes long, over the limit of %d; use a shorter name (it goes into the environment of the server's processes, file names and URLs)", strings.ToValidUTF8(name[:16], ""), len(name), maxNameLen)
		return s
	}
	var entry map[string]json.RawMessage
	if err := json.Unmarshal(data, &entry); err != nil || entry == nil {
		p.errorf(name, "", `want an object such as {"command": "npx"}, got %s`, jsonKind(data))
		return s
	}
	p.decodeServer(s, entry)
	if s.Disabled {
		return s
	}

	if !validName(name) {
		p.errorf(name, "", "invalid server name; use only letters, digits, '_', '.' and '-', since the name appears in tool prefixes and logs")
	}
	if raw, ok := entry["type"]; ok {
		p.checkServerType(s, raw)
	}
	if s.URL != "" {
		p.parseRemote(s, entry)
	} else {
		p.parseLocal(s)
	}
	p.checkPrereq(s)
	p.validateServer(name, s)
	p.validateSandbox(name, s.URL != "", s.Sandbox)
	return s
}

// decodeServer decodes each key of a server's entry into s, and reports the
// keys it does not know, with the nearest known one where it is a likely
// typo. The keys of other MCP clients are ignored, and "type" is left to
// checkServerType.
func (p *parser) decodeServer(s *ServerConfig, entry map[string]json.RawMessage) {
	fields := jsonFields(s)
	known := slices.Sorted(maps.Keys(fields))
	candidates := slices.Concat(known, foreignServerKeys, []string{"type", "serverUrl"})
	delete(fields, "url") // checked below, with "type"
	fields["url"] = &s.URL
	delete(fields, "type") // checkServerType's
	for _, key := range slices.Sorted(maps.Keys(entry)) {
		switch {
		case key == "prerequisite":
			p.decodePrereq(s, entry[key])
		case key == "toolOverrides":
			p.decodeToolOverrides(s, entry[key])
		case key == "prefix":
			p.decodePrefix(s, entry[key])
		case key == "serverUrl": // Windsurf's name for url
			if _, both := entry["url"]; both {
				p.errorf(s.name, "serverUrl", `the entry has "url" too; keep one of the two (serverUrl is Windsurf's name for url)`)
				continue
			}
			p.decode(s.name, key, entry[key], &s.URL)
		case fields[key] != nil:
			p.decode(s.name, key, entry[key], fields[key])
			if key == "env" {
				p.refuseNullEnv(s.name, entry[key])
			}
		case key == "type", slices.Contains(foreignServerKeys, key):
			// Checked below, or ignored.
		default:
			if near, ok := nearest(key, candidates); ok {
				p.errorf(s.name, "", "unknown field %q; did you mean %q?", key, near)
			} else {
				p.errorf(s.name, "", "unknown field %q; known fields are %s", key, quoteList(known))
			}
		}
	}
}

// refuseNullEnv reports each null value of data, a server's env: VS Code
// unsets such a variable, which encoding/json would turn into an empty one.
func (p *parser) refuseNullEnv(server string, data json.RawMessage) {
	var env map[string]json.RawMessage
	json.Unmarshal(data, &env) // a wrong kind was reported by decode
	for _, key := range slices.Sorted(maps.Keys(env)) {
		if string(env[key]) == "null" {
			p.errorf(server, "env."+key, "null (VS Code's way to unset a variable) is not supported; remove the variable, or give it a string value")
		}
	}
}

// checkServerType checks raw, the value of a server's "type" key, against
// the server's url: "stdio" without one, a remote type with one.
func (p *parser) checkServerType(s *ServerConfig, raw json.RawMessage) {
	name := s.name
	var typ string
	switch err := json.Unmarshal(raw, &typ); {
	case err != nil:
		p.errorf(name, "type", `want a string such as "stdio", got %s`, jsonKind(raw))
	case typ == "stdio" && s.URL != "":
		p.errorf(name, "type", `"stdio" with a "url"; a remote server's type is "http" (or "sse" for the HTTP+SSE transport of 2024-11-05)`)
	case typ == "sse" && s.URL == "":
		p.errorf(name, "url", `required for type "sse" (the server's event stream, e.g. "https://example.com/sse")`)
	case slices.Contains(remoteServerTypes, typ) && s.URL == "":
		p.errorf(name, "url", `required for type %q (the server's Streamable HTTP endpoint, e.g. "https://example.com/mcp")`, typ)
	case typ != "stdio" && !slices.Contains(remoteServerTypes, typ):
		p.errorf(name, "type", `unknown server type %q; write "stdio", "http" or "sse", or remove the key`, typ)
	case typ == "sse":
		s.Type = "sse"
	case typ != "stdio":
		s.Type = "http"
	}
}

// parseRemote expands and checks the settings of a remote server, one with
// a url: the url, and the headers. A remote server has none of a local
// one's settings.
func (p *parser) parseRemote(s *ServerConfig, entry map[string]json.RawMessage) {
	name := s.name
	if s.Type == "" {
		s.Type = "http" // a url without a type
	}
	p.expand(s, "url", &s.URL)
	u, err := url.Parse(s.URL)
	switch {
	case err != nil:
		p.errorf(name, "url", "not a URL: %v", err)
	case u.Scheme != "http" && u.Scheme != "https" || u.Host == "":
		p.errorf(name, "url", `want an http:// or https:// URL with a host, such as "https://example.com/mcp"`)
	case u.Port() != "" && !validPort(u.Port()):
		p.errorf(name, "url", "the port %s is out of range; a port is a number from 1 to 65535", u.Port())
	}
	for _, key := range []string{"command", "args", "env", "envFile", "cwd", "limits"} {
		if _, ok := entry[key]; ok {
			p.errorf(name, key, `a remote server (with "url") has no %s; remove one of the two`, key)
		}
	}
	for _, key := range slices.Sorted(maps.Keys(s.Headers)) {
		v := s.Headers[key]
		p.expand(s, "headers."+key, &v)
		s.Headers[key] = v
	}
}

// parseLocal expands and checks the settings of a local server, one corral
// runs: its command, args, env and cwd. A local server has no headers.
func (p *parser) parseLocal(s *ServerConfig) {
	name := s.name
	if len(s.Headers) > 0 {
		p.errorf(name, "headers", `only a remote server (with "url") has headers`)
	}
	p.expand(s, "command", &s.Command)
	if s.Command == "" {
		p.errorf(name, "command", `required (the program to run, e.g. "npx")`)
	}
	for i := range s.Args {
		p.expand(s, fmt.Sprintf("args[%d]", i), &s.Args[i])
	}
	for _, key := range slices.Sorted(maps.Keys(s.Env)) {
		if key == "" || strings.Contains(key, "=") {
			p.errorf(name, "env", "invalid variable name %q; a name must be non-empty and must not contain '='", key)
			continue
		}
		v := s.Env[key]
		p.expand(s, "env."+key, &v)
		s.Env[key] = v
	}
	p.loadEnvFile(s)
	p.expand(s, "cwd", &s.Cwd)
}

// validateServer checks the settings every server has, local or remote.
func (p *parser) validateServer(name string, s *ServerConfig) {
	switch {
	case len(s.Prefix) > maxNameLen:
		p.errorf(name, "prefix", "the prefix is %d bytes long, over the limit of %d; use a shorter one", len(s.Prefix), maxNameLen)
	case s.Prefix != "" && !validName(s.Prefix):
		p.errorf(name, "prefix", "invalid prefix %q; use only letters, digits, '_', '.' and '-'", s.Prefix)
	}
	if s.RequestTimeout < 0 {
		p.errorf(name, "requestTimeout", "must not be negative, got %v; use a duration such as \"60s\", or remove the key to use the global requestTimeout", s.RequestTimeout.D())
	}
	p.validateSupervision(name, s.Supervision)
	p.validateLimits(name, s.Limits)
	p.validateScope(name, s)
	p.validateStart(name, s)
	p.validatePin(s)
	if f := s.Tools; f != nil {
		for _, list := range []struct {
			field    string
			patterns []string
		}{{"tools.allow", f.Allow}, {"tools.deny", f.Deny}} {
			for i, pat := range list.patterns {
				if pat == "" {
					p.errorf(name, fmt.Sprintf("%s[%d]", list.field, i), `empty pattern; write a tool name, or a glob such as "read_*"`)
				}
			}
		}
	}
	if s.MaxInFlight < 0 {
		p.errorf(name, "maxInFlight", "must not be negative, got %d; use a positive number, or remove the key to use the global maxInFlight", s.MaxInFlight)
	}
	for _, f := range []struct {
		key string
		n   int64
	}{{"maxCatalogItems", int64(s.MaxCatalogItems)}, {"maxCatalogBytes", s.MaxCatalogBytes}} {
		if f.n < 0 {
			p.errorf(name, f.key, "must not be negative, got %d; use a positive number, or remove the key to use the global %s", f.n, f.key)
		}
	}
}

// validateSupervision reports negative settings of server (or the top level,
// when server is "").
func (p *parser) validateSupervision(server string, s Supervision) {
	for _, f := range []struct {
		key string
		d   Duration
	}{
		{"restartDelay", s.RestartDelay}, {"maxRestartDelay", s.MaxRestartDelay},
		{"stableAfter", s.StableAfter}, {"restartWindow", s.RestartWindow},
		{"failedRetry", s.FailedRetry}, {"pingInterval", s.PingInterval},
		{"pingTimeout", s.PingTimeout}, {"idleStop", s.IdleStop},
	} {
		if f.d < 0 {
			p.errorf(server, f.key, "must not be negative, got %v; use a duration such as \"30s\", or remove the key for the default", f.d.D())
		}
	}
	for _, f := range []struct {
		key string
		n   int
	}{{"maxRestarts", s.MaxRestarts}, {"maxMissedPings", s.MaxMissedPings}} {
		if f.n < 0 {
			p.errorf(server, f.key, "must not be negative, got %d; use a positive number, or remove the key for the default", f.n)
		}
	}
}

// validate checks the top-level settings of c.
func (p *parser) validate(c *Config) {
	if c.Listen != "" {
		if err := checkListen(c.Listen); err != nil {
			p.errorf("", "listen", "%v", err)
		}
	}
	durations := []struct {
		key string
		d   Duration
		def time.Duration
	}{
		{"requestTimeout", c.RequestTimeout, defaultRequestTimeout},
		{"startTimeout", c.StartTimeout, defaultStartTimeout},
		{"stopGrace", c.StopGrace, defaultStopGrace},
		{"killGrace", c.KillGrace, defaultKillGrace},
		{"shutdownTimeout", c.ShutdownTimeout, defaultShutdownTimeout},
		{"sessionIdleTimeout", c.SessionIdleTimeout, defaultSessionIdle},
		{"readHeaderTimeout", c.ReadHeaderTimeout, defaultReadHeader},
		{"readTimeout", c.ReadTimeout, defaultReadTimeout},
		{"writeTimeout", c.WriteTimeout, defaultWriteTimeout},
		{"drainDelay", c.DrainDelay, 0},
		{"heartbeatInterval", c.HeartbeatInterval, defaultHeartbeat},
	}
	for _, f := range durations {
		if f.d < 0 {
			p.errorf("", f.key, "must not be negative, got %v; use a duration such as %q, or remove the key for the default (%v)", f.d.D(), f.def.String(), f.def)
		}
	}
	limits := []struct {
		key string
		n   int64
		def int64
	}{
		{"maxLineBytes", c.MaxLineBytes, defaultMaxLineBytes},
		{"maxRequestBytes", c.MaxRequestBytes, defaultMaxRequestBytes},
		{"maxInFlight", int64(c.MaxInFlight), defaultMaxInFlight},
		{"maxSessions", int64(c.MaxSessions), defaultMaxSessions},
		{"maxInFlightPerSession", int64(c.MaxInFlightPerSession), defaultMaxPerSession},
		{"maxStreams", int64(c.MaxStreams), defaultMaxStreams},
		{"maxUnsentBytesPerSession", c.MaxUnsentBytesPerSession, defaultUnsentSession},
		{"maxUnsentBytes", c.MaxUnsentBytes, defaultMaxUnsentBytes},
		{"maxHeaderBytes", int64(c.MaxHeaderBytes), defaultMaxHeaderBytes},
		{"maxNotificationsPerSecond", int64(c.MaxNotificationsPerSecond), defaultMaxNotifyRate},
		{"maxCatalogItems", int64(c.MaxCatalogItems), defaultMaxCatalogItems},
		{"maxCatalogBytes", c.MaxCatalogBytes, defaultMaxCatalogBytes},
		{"maxServerRequestsPerSession", int64(c.MaxServerRequestsPerSession), defaultMaxServerRequestsPerSession},
		{"maxServerRequests", int64(c.MaxServerRequests), defaultMaxServerRequests},
		{"maxTasksPerSession", int64(c.MaxTasksPerSession), defaultMaxTasksPerSession},
		{"maxStderrLinesPerSecond", int64(c.MaxStderrLinesPerSecond), defaultMaxStderrLines},
		{"maxStderrBytesPerSecond", int64(c.MaxStderrBytesPerSecond), defaultMaxStderrBytes},
	}
	if c.Replica != "" {
		if err := checkReplicaName(c.Replica); err != nil {
			p.errorf("", "replica", "%v", err)
		}
	}
	p.validateSupervision("", c.Supervision)
	p.validateLimits("", c.Limits)
	p.validateSandbox("", false, c.Sandbox)
	for _, f := range limits {
		if f.n < 0 {
			p.errorf("", f.key, "must not be negative, got %d; use a positive number, or remove the key for the default (%d)", f.n, f.def)
		}
	}
}

// checkListen checks addr, a listen address: host:port, with a port from 0
// to 65535 (0: any free port).
func checkListen(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		var ae *net.AddrError
		if errors.As(err, &ae) {
			err = errors.New(ae.Err)
		}
		return fmt.Errorf("invalid address %q: %v; write host:port, e.g. %q", addr, err, defaultListen)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return fmt.Errorf("invalid address %q: the port must be a number from 0 to 65535, e.g. %q", addr, defaultListen)
	}
	return nil
}

// validPort reports whether port, digits, is a port a URL can name: 1 to
// 65535.
func validPort(port string) bool {
	n, err := strconv.ParseUint(port, 10, 16)
	return err == nil && n > 0
}

// readToken reads the bearer token named by authTokenFile (relative to the
// config file's directory) or authTokenEnv. A token never comes from the
// command line, where other users could read it.
func (p *parser) readToken(c *Config, path string) string {
	switch {
	case c.AuthTokenFile != "" && c.AuthTokenEnv != "":
		p.errorf("", "authTokenFile", "set authTokenFile or authTokenEnv, not both")
	case c.AuthTokenFile != "":
		data, err := readSecretFile(filepath.Dir(path), c.AuthTokenFile)
		if err != nil {
			p.errorf("", "authTokenFile", "cannot read the token: %v", err)
			return ""
		}
		if token := strings.TrimSpace(data); token != "" {
			return token
		}
		f := c.AuthTokenFile
		if !filepath.IsAbs(f) {
			f = filepath.Join(filepath.Dir(path), f)
		}
		p.errorf("", "authTokenFile", "%s is empty; put the token in it", f)
	case c.AuthTokenEnv != "":
		if token, ok := p.getenv(c.AuthTokenEnv); ok && strings.TrimSpace(token) != "" {
			return strings.TrimSpace(token)
		}
		p.errorf("", "authTokenEnv", "the environment variable %s is not set or empty; export the token in it", c.AuthTokenEnv)
	}
	return ""
}

// maxNameLen bounds a server's name and its prefix, in bytes: a name goes
// into the marker variable of each of its processes, into file names (its
// cached catalog, its cgroup) and into URLs (the admin API), each of which has
// bounds of its own.
const maxNameLen = 64

// validName reports whether name, a server name or tool prefix, is non-empty
// and made only of letters, digits, '_', '.' and '-'.
func validName(name string) bool {
	if name == "" {
		return false
	}
	for _, r := range name {
		if !(r == '_' || r == '.' || r == '-' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9') {
			return false
		}
	}
	return true
}

// quoteName returns name as it appears in messages: quoted if it is not a
// valid server name.
func quoteName(name string) string {
	if validName(name) {
		return name
	}
	return strconv.Quote(name)
}

// quoteList returns the quoted words, separated by commas.
func quoteList(words []string) string {
	quoted := make([]string, len(words))
	for i, w := range words {
		quoted[i] = strconv.Quote(w)
	}
	return strings.Join(quoted, ", ")
}

// jsonFields returns a pointer to each field of the struct v points to, keyed
// by the field's name in JSON.
func jsonFields(v any) map[string]any {
	rv := reflect.ValueOf(v).Elem()
	fields := make(map[string]any)
	for i := range rv.NumField() {
		f := rv.Type().Field(i)
		key, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case f.Anonymous && key == "":
			// An embedded struct's fields are keys of their own, as in
			// encoding/json.
			for k, ptr := range jsonFields(rv.Field(i).Addr().Interface()) {
				fields[k] = ptr
			}
		case key != "" && key != "-":
			fields[key] = rv.Field(i).Addr().Interface()
		}
	}
	return fields
}

// describeType describes how a value of Go type t is written in JSON.
func describeType(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int64:
		return "an integer"
	case reflect.Slice:
		return "an array of " + strings.TrimPrefix(describeType(t.Elem()), "a ") + "s"
	case reflect.Map:
		return "an object with " + strings.TrimPrefix(describeType(t.Elem()), "a ") + " values"
	}
	return t.String()
}

// jsonKind returns the kind of the JSON value data: "object", "array",
// "string", "number", "bool", or "null" (or "nothing" if data is empty).
func jsonKind(data []byte) string {
	data = bytes.TrimLeft(data, " \t\r\n")
	if len(data) == 0 {
		return "nothing"
	}
	switch data[0] {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "bool"
	case 'n':
		return "null"
	}
	return "number"
}

// position returns the 1-based line and column of the byte at which a JSON
// syntax error was found, given the error's Offset.
func position(data []byte, offset int64) (line, col int) {
	i := int(min(max(offset-1, 0), int64(len(data))))
	before := data[:i]
	start := bytes.LastIndexByte(before, '\n') + 1
	return bytes.Count(before, []byte("\n")) + 1, utf8.RuneCount(before[start:]) + 1
}

// nearest returns the candidate closest to word in edit distance, if it is
// close enough to be a likely typo.
func nearest(word string, candidates []string) (string, bool) {
	best, bestDist := "", -1
	for _, c := range candidates {
		if d := levenshtein(word, c); bestDist < 0 || d < bestDist {
			best, bestDist = c, d
		}
	}
	return best, bestDist >= 0 && bestDist <= 3 && 2*bestDist < len(word)
}

// levenshtein returns the edit distance between a and b: the fewest single
// byte insertions, deletions and substitutions that turn a into b.
func levenshtein(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// validateAdmin checks the "admin" settings of c: registration runs
// commands, so it is allowed only behind a bearer token.
func (p *parser) validateAdmin(c *Config) {
	if c.Admin.MaxDynamic < 0 {
		p.errorf("", "admin.maxDynamic", "must not be negative, got %d; use a positive number, or remove the key for the default (%d)", c.Admin.MaxDynamic, defaultMaxDynamic)
	}
	if c.Admin.Registration && c.AuthTokenFile == "" && c.AuthTokenEnv == "" {
		p.errorf("", "admin.registration", "needs a bearer token: whoever may register a server runs a command as corral's user; set authTokenFile or authTokenEnv, or remove admin.registration")
	}
}

// validateScope checks the server's scope and maxInstances.
func (p *parser) validateScope(name string, s *ServerConfig) {
	switch s.Scope {
	case "", scopeShared, scopeSession, scopeClient:
	default:
		p.errorf(name, "scope", `unknown scope %q; write "shared" (one process for every client, the default), "session" (a process per client session) or "client" (a process per named client)`, s.Scope)
	}
	if s.sessionScoped() && s.URL != "" {
		p.errorf(name, "scope", `"session" needs a "command": a remote server ("url") keeps its sessions itself; remove "scope"`)
	}
	if s.scoped() && s.Prerequisite != nil {
		// A managed prerequisite lives as long as one run of its server, so
		// the first session's process to stop would stop the prerequisite
		// every other session's process uses.
		p.errorf(name, "prerequisite", `cannot go with "scope": %q: each %s's process would start and stop it under the others; run it as a server's prerequisite with the default scope, or start it yourself`, s.Scope, s.Scope)
	}
	switch {
	case s.MaxInstances < 0:
		p.errorf(name, "maxInstances", "must not be negative, got %d; use a positive number, or remove the key for %d", s.MaxInstances, defaultMaxInstances)
	case s.MaxInstances > 0 && !s.scoped():
		p.errorf(name, "maxInstances", `bounds the processes of a server with "scope": "session" or "client", and this server's scope is shared; add "scope", or remove the key`)
	}
}
