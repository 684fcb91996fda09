package main

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Config is corral's configuration, read from a JSON file. Its zero value, once
// passed through applyDefaults, is a working gateway with no servers.
//
// The file may be the same one a desktop MCP client uses: corral reads the
// "mcpServers" map and its own top-level keys, and ignores (with one warning)
// any other top-level key.
type Config struct {
	// Listen is the TCP address of the Streamable HTTP front end.
	// If empty, "127.0.0.1:8931".
	Listen string `json:"listen"`

	// RequestTimeout bounds every request corral forwards to a server. On expiry
	// the server receives notifications/cancelled and the client an error.
	// If zero, 60s. A server's own requestTimeout overrides it.
	RequestTimeout Duration `json:"requestTimeout"`

	// StartTimeout bounds a server's startup handshake (initialize and the
	// discovery of its catalog). If zero, 30s.
	StartTimeout Duration `json:"startTimeout"`

	// StopGrace is how long a server has to exit after its stdin is closed,
	// before its process group receives SIGTERM. If zero, 2s.
	StopGrace Duration `json:"stopGrace"`

	// KillGrace is how long a server's process group has to exit after SIGTERM,
	// before it receives SIGKILL. If zero, 5s.
	KillGrace Duration `json:"killGrace"`

	// ShutdownTimeout bounds how long in-flight calls may take to finish once
	// corral is asked to stop; calls still running then fail. If zero, 10s.
	ShutdownTimeout Duration `json:"shutdownTimeout"`

	// MaxLineBytes is the longest line corral reads from a server's stdout (or,
	// with -stdio, from its own stdin). A longer line fails the one request it
	// answers. If zero, 32 MiB.
	MaxLineBytes int64 `json:"maxLineBytes"`

	// MaxRequestBytes is the largest HTTP request body corral accepts; a larger
	// one gets 413. If zero, 16 MiB.
	MaxRequestBytes int64 `json:"maxRequestBytes"`

	// MaxInFlight bounds the requests in flight to one server; past it a call
	// fails at once. If zero, 1024. A server's own maxInFlight overrides it.
	MaxInFlight int `json:"maxInFlight"`

	// SessionIdleTimeout ends an HTTP session that has had no request, no
	// call in flight and no open event stream for this long; its client gets
	// 404 and, as the specification requires, opens a new one. If zero, 1h.
	SessionIdleTimeout Duration `json:"sessionIdleTimeout"`

	// MaxSessions bounds the open HTTP sessions; past it, initialize gets
	// 503. If zero, 1000.
	MaxSessions int `json:"maxSessions"`

	// AuthTokenFile names a file holding the bearer token HTTP clients must
	// send (Authorization: Bearer TOKEN); AuthTokenEnv names an environment
	// variable holding it. At most one may be set. If neither, no token is
	// asked for, and corral refuses to listen on an address other than
	// loopback unless started with -allow-remote-without-token.
	AuthTokenFile string `json:"authTokenFile"`
	AuthTokenEnv  string `json:"authTokenEnv"`

	// MaxInFlightPerSession bounds one session's calls in flight; past it a
	// call fails at once. If zero, 256.
	MaxInFlightPerSession int `json:"maxInFlightPerSession"`

	// MaxStreams bounds the open GET event streams; past it a GET gets 503.
	// If zero, 1000.
	MaxStreams int `json:"maxStreams"`

	// MaxHeaderBytes bounds an HTTP request's headers. If zero, 64 KiB.
	MaxHeaderBytes int `json:"maxHeaderBytes"`

	// ReadHeaderTimeout bounds the time to read a request's headers, and
	// ReadTimeout the whole request, body included (slow clients). If zero,
	// 10s and 60s.
	ReadHeaderTimeout Duration `json:"readHeaderTimeout"`
	ReadTimeout       Duration `json:"readTimeout"`

	// MaxNotificationsPerSecond is how many notifications one server may
	// send per second; past it they are dropped, and the log says so once
	// per second. If zero, 200.
	MaxNotificationsPerSecond int `json:"maxNotificationsPerSecond"`

	// MaxCatalogItems and MaxCatalogBytes bound one server's catalog: its
	// tools, prompts, resources and resource templates together, counted
	// as it lists them and in bytes of their JSON. A server whose catalog
	// is over either fails its start, and a list it sends again after a
	// list_changed is refused (the old one is kept). If zero, 10000 items
	// and 16 MiB. A server's own settings override them.
	MaxCatalogItems int   `json:"maxCatalogItems"`
	MaxCatalogBytes int64 `json:"maxCatalogBytes"`
	// MaxServerRequestsPerSession bounds the requests of servers (sampling,
	// elicitation, roots) waiting for one session's answers, and
	// MaxServerRequests those of one server waiting for any client's; past
	// either, the server's request gets an error at once. Each is freed when
	// the client answers, the server cancels it, requestTimeout ends or the
	// session ends. If zero, 64 and 256.
	MaxServerRequestsPerSession int `json:"maxServerRequestsPerSession"`
	MaxServerRequests           int `json:"maxServerRequests"`
	// MaxStderrLinesPerSecond and MaxStderrBytesPerSecond bound how much of
	// one server's stderr corral copies into its own log: on average, with
	// bursts of up to one second's worth. Past either, lines are left out of
	// the log (its last lines are still kept for error messages), and one
	// line a second says how many. If zero, 100 and 65536.
	MaxStderrLinesPerSecond int `json:"maxStderrLinesPerSecond"`
	MaxStderrBytesPerSecond int `json:"maxStderrBytesPerSecond"`

	// AllowedOrigins lists the Origin header values accepted besides those of
	// loopback hosts (http://localhost:*, http://127.0.0.1:*, http://[::1]:*).
	// A request with any other Origin gets 403. If empty, only loopback origins.
	AllowedOrigins []string `json:"allowedOrigins"`

	// Supervision holds the restart and liveness settings for every server;
	// a server entry may override each of them.
	Supervision

	// MCPServers maps a server's name to how to run it.
	MCPServers map[string]*ServerConfig `json:"mcpServers"`

	// file is the path the config was read from, for messages.
	file string

	// token is the bearer token read from AuthTokenFile or AuthTokenEnv.
	token string
}

// ServerConfig says how to run one stdio MCP server.
type ServerConfig struct {
	// Command is the program to run, found through PATH when it has no slash.
	// It is run directly, never through a shell. Required, unless URL is set.
	Command string `json:"command,omitempty"`

	// URL, instead of a command, names a remote server reached over
	// Streamable HTTP.
	URL string `json:"url,omitempty"`

	// Headers are sent with every request to a remote server.
	Headers map[string]string `json:"headers,omitempty"`

	// Args are the program's arguments.
	Args []string `json:"args,omitempty"`

	// Env is added to corral's own environment for the server's process.
	Env map[string]string `json:"env,omitempty"`

	// Cwd is the server's working directory. If empty, corral's.
	Cwd string `json:"cwd,omitempty"`

	// Prefix, if set, renames each of the server's tools to Prefix + "__" + name.
	// If empty, tool names pass through unchanged (see the collision rule in
	// the README).
	Prefix string `json:"prefix"`

	// Tools, if set, filters the server's tools by their own names before
	// they are aggregated: a tool not offered cannot be called.
	Tools *ToolFilter `json:"tools"`

	// Disabled servers are not started. Desktop MCP clients use the same key.
	Disabled bool `json:"disabled"`

	// RequestTimeout overrides Config.RequestTimeout for this server.
	RequestTimeout Duration `json:"requestTimeout"`

	// MaxInFlight overrides Config.MaxInFlight for this server.
	MaxInFlight int `json:"maxInFlight"`

	// MaxCatalogItems and MaxCatalogBytes override Config's for this server.
	MaxCatalogItems int   `json:"maxCatalogItems"`
	MaxCatalogBytes int64 `json:"maxCatalogBytes"`

	// Supervision overrides, field by field, the top level's settings for
	// this server.
	Supervision

	// name is the key of this server in mcpServers.
	name string

	// shown maps each field in which a variable was expanded ("command",
	// "args[0]", "url", "cwd"...) to its value as -check prints it, with
	// "****" for each variable's value.
	shown map[string]string
}

// ToolFilter chooses which of a server's tools clients see. A pattern is an
// exact name or a glob in which '*' stands for any run of characters.
type ToolFilter struct {
	// Allow, if not empty, lists the only tools offered.
	Allow []string `json:"allow"`
	// Deny lists tools not offered, even if allowed.
	Deny []string `json:"deny"`
}

// allows reports whether the filter lets the tool called name through. A nil
// filter lets every tool through.
func (f *ToolFilter) allows(name string) bool {
	if f == nil {
		return true
	}
	match := func(patterns []string) bool {
		return slices.ContainsFunc(patterns, func(p string) bool { return globMatch(p, name) })
	}
	return (len(f.Allow) == 0 || match(f.Allow)) && !match(f.Deny)
}

// globMatch reports whether name matches pattern, in which '*' matches any
// run of characters and every other character only itself.
func globMatch(pattern, name string) bool {
	parts := strings.Split(pattern, "*")
	if len(parts) == 1 {
		return pattern == name
	}
	if !strings.HasPrefix(name, parts[0]) {
		return false
	}
	name = name[len(parts[0]):]
	last := parts[len(parts)-1]
	for _, part := range parts[1 : len(parts)-1] {
		i := strings.Index(name, part)
		if i < 0 {
			return false
		}
		name = name[i+len(part):]
	}
	return len(name) >= len(last) && strings.HasSuffix(name, last)
}

// Supervision says how corral restarts a server that exits and how it checks
// that a running server is alive. Each zero field takes the value set at the
// top level of the config or, failing that, its default.
type Supervision struct {
	// RestartDelay is the wait before the first restart after an exit. Each
	// further restart doubles it, up to MaxRestartDelay, and every wait adds
	// up to half of itself at random, so that servers that crash together do
	// not restart in lockstep. If zero, 1s.
	RestartDelay Duration `json:"restartDelay"`

	// MaxRestartDelay caps the doubling of RestartDelay. If zero, 30s.
	MaxRestartDelay Duration `json:"maxRestartDelay"`

	// StableAfter is how long a server must stay ready for its restart delay
	// to start again from RestartDelay. If zero, twice MaxRestartDelay.
	StableAfter Duration `json:"stableAfter"`

	// MaxRestarts is how many restarts RestartWindow may hold, and how many
	// restarts in a row may fail to get the server ready, however far apart:
	// one more of either, and the server is failed. If zero, 5.
	MaxRestarts int `json:"maxRestarts"`

	// RestartWindow is the sliding window in which restarts are counted. If
	// zero, 60s.
	RestartWindow Duration `json:"restartWindow"`

	// FailedRetry is how long a failed server waits before corral tries it
	// again; if it becomes ready, it is back in service. If zero, 5m.
	FailedRetry Duration `json:"failedRetry"`

	// PingInterval is how often corral pings a ready server. If zero, 30s.
	PingInterval Duration `json:"pingInterval"`

	// PingTimeout is how long a ping may go unanswered, while the server
	// writes nothing at all, before it counts as missed. If zero, 10s.
	PingTimeout Duration `json:"pingTimeout"`

	// MaxMissedPings is how many pings in a row a server may miss before
	// corral restarts it. If zero, 3.
	MaxMissedPings int `json:"maxMissedPings"`
}

// Duration is a time.Duration that reads from JSON as a Go duration string
// ("1.5s", "2m") or as a number of seconds.
type Duration time.Duration

// Defaults, documented on the fields above and in the README.
const (
	defaultListen          = "127.0.0.1:8931"
	defaultRequestTimeout  = 60 * time.Second
	defaultStartTimeout    = 30 * time.Second
	defaultStopGrace       = 2 * time.Second
	defaultKillGrace       = 5 * time.Second
	defaultShutdownTimeout = 10 * time.Second
	defaultMaxLineBytes    = 32 << 20
	defaultMaxRequestBytes = 16 << 20
	defaultMaxInFlight     = 1024
	defaultSessionIdle     = time.Hour
	defaultMaxSessions     = 1000
	defaultMaxPerSession   = 256
	defaultMaxStreams      = 1000
	defaultMaxHeaderBytes  = 64 << 10
	defaultReadHeader      = 10 * time.Second
	defaultReadTimeout     = 60 * time.Second
	defaultMaxNotifyRate   = 200
	defaultMaxCatalogItems = 10000
	defaultMaxCatalogBytes = 16 << 20
	defaultMaxStderrLines  = 100
	defaultMaxStderrBytes  = 64 << 10
	toolSeparator          = "__"

	defaultRestartDelay    = 1 * time.Second
	defaultMaxRestartDelay = 30 * time.Second
	defaultMaxRestarts     = 5
	defaultRestartWindow   = 60 * time.Second
	defaultFailedRetry     = 5 * time.Minute
	defaultPingInterval    = 30 * time.Second
	defaultPingTimeout     = 10 * time.Second
	defaultMaxMissedPings  = 3
)

// secretMask is what -check prints in place of a value that may be secret.
const secretMask = "****"

// A sampling or elicitation request is answered by a model or a person: a
// server rarely has more than a few waiting at once. These leave room for
// one that fans out, and bound what a flood can make corral hold.
const (
	defaultMaxServerRequestsPerSession = 64
	defaultMaxServerRequests           = 256
)

// resolved returns the config as corral runs it, every default filled in,
// as indented JSON, with what may be secret masked as "****": the values of
// env and headers, the value of every variable expanded in the other fields,
// and a URL's password, query values and fragment (see maskURL).
func (c *Config) resolved() []byte {
	out := *c
	out.MCPServers = map[string]*ServerConfig{}
	for name, s := range c.MCPServers {
		r := *s
		r.Supervision = c.supervision(s)
		r.RequestTimeout = Duration(c.requestTimeout(s))
		r.MaxInFlight = c.maxInFlight(s)
		r.MaxCatalogItems, r.MaxCatalogBytes = c.catalogBound(s)
		if len(s.Env) > 0 {
			r.Env = map[string]string{}
			for k := range s.Env {
				r.Env[k] = secretMask
			}
		}
		if len(s.Headers) > 0 {
			r.Headers = map[string]string{}
			for k := range s.Headers {
				r.Headers[k] = secretMask
			}
		}
		shown := func(field, value string) string { return cmp.Or(s.shown[field], value) }
		r.Command, r.Cwd = shown("command", s.Command), shown("cwd", s.Cwd)
		if s.URL != "" {
			r.URL = maskURL(shown("url", s.URL))
		}
		if len(s.Args) > 0 {
			r.Args = make([]string, len(s.Args))
			for i, a := range s.Args {
				r.Args[i] = shown(fmt.Sprintf("args[%d]", i), a)
			}
		}
		out.MCPServers[name] = &r
	}
	out.Supervision = c.supervision(&ServerConfig{})
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false) // a URL's "&" stays readable
	enc.Encode(&out)
	return b.Bytes()
}

// maskURL returns raw, a URL, as -check prints it: the password of its user
// information masked (or the user name, when there is no password: it is then
// usually a token), the value of each query parameter, and the fragment. What
// cannot be parsed as a URL is masked whole.
func maskURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return secretMask
	}
	if u.RawQuery != "" {
		params := strings.Split(u.RawQuery, "&")
		for i, param := range params {
			key, _, ok := strings.Cut(param, "=")
			params[i] = secretMask
			if ok {
				params[i] = key + "=" + secretMask
			}
		}
		u.RawQuery = strings.Join(params, "&")
	}
	if u.Fragment != "" {
		u.Fragment, u.RawFragment = secretMask, ""
	}
	user := u.User
	if user == nil {
		return u.String()
	}
	// Built by hand: url.Userinfo escapes '*', which RFC 3986 allows here.
	info := secretMask
	if _, ok := user.Password(); ok {
		info = strings.ReplaceAll(url.User(user.Username()).String(), "%2A", "*") + ":" + secretMask
	}
	u.User = nil
	return strings.Replace(u.String(), "//", "//"+info+"@", 1)
}

// firstSet returns the first of values that is not the zero value, or the
// zero value.
func firstSet[T comparable](values ...T) T {
	var zero T
	for _, v := range values {
		if v != zero {
			return v
		}
	}
	return zero
}

// supervision returns the settings for server s: its own where set, else the
// top level's, else the defaults.
func (c *Config) supervision(s *ServerConfig) Supervision {
	o, t := s.Supervision, c.Supervision
	r := Supervision{
		RestartDelay:    firstSet(o.RestartDelay, t.RestartDelay, Duration(defaultRestartDelay)),
		MaxRestartDelay: firstSet(o.MaxRestartDelay, t.MaxRestartDelay, Duration(defaultMaxRestartDelay)),
		MaxRestarts:     firstSet(o.MaxRestarts, t.MaxRestarts, defaultMaxRestarts),
		RestartWindow:   firstSet(o.RestartWindow, t.RestartWindow, Duration(defaultRestartWindow)),
		FailedRetry:     firstSet(o.FailedRetry, t.FailedRetry, Duration(defaultFailedRetry)),
		PingInterval:    firstSet(o.PingInterval, t.PingInterval, Duration(defaultPingInterval)),
		PingTimeout:     firstSet(o.PingTimeout, t.PingTimeout, Duration(defaultPingTimeout)),
		MaxMissedPings:  firstSet(o.MaxMissedPings, t.MaxMissedPings, defaultMaxMissedPings),
	}
	r.StableAfter = firstSet(o.StableAfter, t.StableAfter, 2*r.MaxRestartDelay)
	return r
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
		{"pingTimeout", s.PingTimeout},
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

// foreignServerKeys are keys that other MCP clients put in server entries.
// corral accepts them and ignores them, so that a desktop client's config file
// can be used as is.
var foreignServerKeys = []string{"alwaysAllow", "autoApprove", "description", "timeout"}

// remoteServerTypes are the values of a server entry's "type" key that name a
// remote (HTTP) server, which corral cannot run yet.
var remoteServerTypes = []string{"http", "sse", "streamable-http"}

// LoadConfig reads the config file at path and returns it validated, with
// defaults applied. See ParseConfig for getenv and warn.
func LoadConfig(path string, getenv func(string) (string, bool), warn func(msg string)) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, fmt.Errorf("%s: cannot read config: %w", path, err)
	}
	return ParseConfig(path, data, getenv, warn)
}

// ParseConfig parses data, the contents of the config file at path, and
// returns it validated, with defaults applied. Path is used only in messages.
//
// References to environment variables in a server's command, args, env values
// and cwd are expanded (see expand) using getenv, which is os.LookupEnv if nil.
// Warn, if not nil, receives non-fatal warnings, such as the list of top-level
// keys corral ignores.
//
// The error, if any, reports every problem found, one per line, each starting
// with path.
func ParseConfig(path string, data []byte, getenv func(string) (string, bool), warn func(msg string)) (*Config, error) {
	if getenv == nil {
		getenv = os.LookupEnv
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			line, col := position(data, se.Offset)
			return nil, fmt.Errorf("%s:%d:%d: invalid JSON: %v", path, line, col, se)
		}
		return nil, fmt.Errorf("%s: want a JSON object at the top level, got %s", path, jsonKind(data))
	}

	p := &parser{getenv: getenv}
	c := &Config{file: path}
	fields := jsonFields(c)
	c.MCPServers = p.parseServers(top["mcpServers"])
	var ignored []string
	for _, key := range slices.Sorted(maps.Keys(top)) {
		switch {
		case key == "mcpServers":
			// Parsed above.
		case fields[key] != nil:
			p.decode("", key, top[key], fields[key])
		default:
			ignored = append(ignored, key)
		}
	}
	p.validate(c)
	c.token = p.readToken(c, path)

	if len(ignored) > 0 && warn != nil {
		warn(path + ": " + ignoredKeysMessage(ignored))
	}
	if len(p.errs) > 0 {
		return nil, p.err(path)
	}
	c.applyDefaults()
	return c, nil
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

// applyDefaults sets each zero field of c that has a default to that default,
// and the name of each server to its key in c.MCPServers.
func (c *Config) applyDefaults() {
	if c.Listen == "" {
		c.Listen = defaultListen
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = Duration(defaultRequestTimeout)
	}
	if c.StartTimeout == 0 {
		c.StartTimeout = Duration(defaultStartTimeout)
	}
	if c.StopGrace == 0 {
		c.StopGrace = Duration(defaultStopGrace)
	}
	if c.KillGrace == 0 {
		c.KillGrace = Duration(defaultKillGrace)
	}
	if c.ShutdownTimeout == 0 {
		c.ShutdownTimeout = Duration(defaultShutdownTimeout)
	}
	if c.MaxLineBytes == 0 {
		c.MaxLineBytes = defaultMaxLineBytes
	}
	if c.MaxRequestBytes == 0 {
		c.MaxRequestBytes = defaultMaxRequestBytes
	}
	if c.MaxInFlight == 0 {
		c.MaxInFlight = defaultMaxInFlight
	}
	if c.SessionIdleTimeout == 0 {
		c.SessionIdleTimeout = Duration(defaultSessionIdle)
	}
	if c.MaxSessions == 0 {
		c.MaxSessions = defaultMaxSessions
	}
	c.MaxInFlightPerSession = firstSet(c.MaxInFlightPerSession, defaultMaxPerSession)
	c.MaxStreams = firstSet(c.MaxStreams, defaultMaxStreams)
	c.MaxHeaderBytes = firstSet(c.MaxHeaderBytes, defaultMaxHeaderBytes)
	c.ReadHeaderTimeout = firstSet(c.ReadHeaderTimeout, Duration(defaultReadHeader))
	c.ReadTimeout = firstSet(c.ReadTimeout, Duration(defaultReadTimeout))
	c.MaxNotificationsPerSecond = firstSet(c.MaxNotificationsPerSecond, defaultMaxNotifyRate)
	c.MaxCatalogItems = firstSet(c.MaxCatalogItems, defaultMaxCatalogItems)
	c.MaxCatalogBytes = firstSet(c.MaxCatalogBytes, defaultMaxCatalogBytes)
	c.MaxServerRequestsPerSession = firstSet(c.MaxServerRequestsPerSession, defaultMaxServerRequestsPerSession)
	c.MaxServerRequests = firstSet(c.MaxServerRequests, defaultMaxServerRequests)
	c.MaxStderrLinesPerSecond = firstSet(c.MaxStderrLinesPerSecond, defaultMaxStderrLines)
	c.MaxStderrBytesPerSecond = firstSet(c.MaxStderrBytesPerSecond, defaultMaxStderrBytes)
	for name, s := range c.MCPServers {
		if s != nil && s.name == "" {
			s.name = name
		}
	}
}

// requestTimeout returns the request timeout for server s: its own if set,
// else the global one.
func (c *Config) requestTimeout(s *ServerConfig) time.Duration {
	if s.RequestTimeout != 0 {
		return s.RequestTimeout.D()
	}
	return c.RequestTimeout.D()
}

// maxInFlight returns the bound on requests in flight to server s: its own if
// set, else the global one.
func (c *Config) maxInFlight(s *ServerConfig) int {
	if s.MaxInFlight != 0 {
		return s.MaxInFlight
	}
	return c.MaxInFlight
}

// catalogBound returns the bounds on server s's catalog, in items and in
// bytes: its own where set, else the top level's, else the defaults.
func (c *Config) catalogBound(s *ServerConfig) (items int, size int64) {
	return firstSet(s.MaxCatalogItems, c.MaxCatalogItems, defaultMaxCatalogItems),
		firstSet(s.MaxCatalogBytes, c.MaxCatalogBytes, defaultMaxCatalogBytes)
}

// Servers returns the servers that are not disabled, sorted by name.
func (c *Config) Servers() []*ServerConfig {
	var servers []*ServerConfig
	for _, name := range slices.Sorted(maps.Keys(c.MCPServers)) {
		if s := c.MCPServers[name]; s != nil && !s.Disabled {
			servers = append(servers, s)
		}
	}
	return servers
}

// Name returns the server's key in mcpServers.
func (s *ServerConfig) Name() string {
	return s.name
}

// D returns d as a time.Duration.
func (d Duration) D() time.Duration {
	return time.Duration(d)
}

// MarshalJSON encodes d as a Go duration string, such as "1m30s".
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(d.D().String())
}

// UnmarshalJSON decodes a Go duration string, such as "90s" or "1m30s", or a
// number of seconds, which may be fractional. A null leaves d unchanged.
func (d *Duration) UnmarshalJSON(data []byte) error {
	switch kind := jsonKind(data); kind {
	case "null":
		return nil
	case "string":
		var s string
		if err := json.Unmarshal(data, &s); err != nil {
			return err
		}
		v, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("invalid duration %q; write a Go duration like \"90s\" or \"1m30s\", or a number of seconds", s)
		}
		*d = Duration(v)
		return nil
	case "number":
		secs, err := strconv.ParseFloat(string(data), 64)
		ns := math.Round(secs * float64(time.Second))
		if err != nil || ns >= math.MaxInt64 || ns <= math.MinInt64 {
			return fmt.Errorf("duration of %s seconds is out of range", data)
		}
		*d = Duration(ns)
		return nil
	default:
		return fmt.Errorf("want a duration like \"90s\" or a number of seconds, got %s", kind)
	}
}

// A parser collects the problems found in a config file.
type parser struct {
	getenv func(string) (string, bool)
	errs   []configError
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
			path = "mcpServers." + quoteName(e.server)
			if e.field != "" {
				path += "." + e.field
			}
		}
		errs[i] = fmt.Errorf("%s: %s: %s", file, path, e.msg)
	}
	return errors.Join(errs...)
}

// decode decodes data into the value ptr points to, the field of server (or
// the top-level key if server is "").
func (p *parser) decode(server, field string, data json.RawMessage, ptr any) {
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

// parseServers parses data, the value of the "mcpServers" key or nil if the
// key is missing, and checks that it has a server to run.
func (p *parser) parseServers(data json.RawMessage) map[string]*ServerConfig {
	var entries map[string]json.RawMessage
	if data != nil {
		if err := json.Unmarshal(data, &entries); err != nil {
			p.errorf("", "mcpServers", "want an object mapping server names to server entries, got %s", jsonKind(data))
			return nil
		}
	}
	servers := make(map[string]*ServerConfig)
	enabled := 0
	for _, name := range slices.Sorted(maps.Keys(entries)) {
		s := p.parseServer(name, entries[name])
		servers[name] = s
		if !s.Disabled {
			enabled++
		}
	}

	const example = `{"mcpServers": {"echo": {"command": "..."}}}`
	switch {
	case enabled > 0:
	case len(servers) > 0:
		p.errorf("", "mcpServers", `every server is disabled; enable one by removing "disabled": true, or add one, e.g. %s`, example)
	default:
		p.errorf("", "mcpServers", "no servers configured; add one, e.g. %s", example)
	}
	return servers
}

// parseServer parses and validates the entry of the server with the given
// name. A disabled server is only checked for types and unknown keys, and its
// variables are not expanded. The result is never nil, even for an entry with
// errors, so that it counts as a configured server.
func (p *parser) parseServer(name string, data json.RawMessage) *ServerConfig {
	s := &ServerConfig{name: name}
	if name == "" {
		p.errorf("", `mcpServers.""`, "server name is empty; name it with letters, digits, '_', '.' and '-'")
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
	p.validateServer(name, s)
	return s
}

// decodeServer decodes each key of a server's entry into s, and reports the
// keys it does not know, with the nearest known one where it is a likely
// typo. The keys of other MCP clients are ignored, and "type" is left to
// checkServerType.
func (p *parser) decodeServer(s *ServerConfig, entry map[string]json.RawMessage) {
	fields := jsonFields(s)
	known := slices.Sorted(maps.Keys(fields))
	candidates := slices.Concat(known, foreignServerKeys, []string{"type"})
	delete(fields, "url") // checked below, with "type"
	fields["url"] = &s.URL
	for _, key := range slices.Sorted(maps.Keys(entry)) {
		switch {
		case fields[key] != nil:
			p.decode(s.name, key, entry[key], fields[key])
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

// checkServerType checks raw, the value of a server's "type" key, against
// the server's url: "stdio" without one, a remote type with one.
func (p *parser) checkServerType(s *ServerConfig, raw json.RawMessage) {
	name := s.name
	var typ string
	switch err := json.Unmarshal(raw, &typ); {
	case err != nil:
		p.errorf(name, "type", `want a string such as "stdio", got %s`, jsonKind(raw))
	case typ == "sse":
		p.errorf(name, "type", `"sse": the old HTTP+SSE transport is not supported; give the server's Streamable HTTP endpoint as "url" with "type": "http"`)
	case typ == "stdio" && s.URL != "":
		p.errorf(name, "type", `"stdio" with a "url"; a remote server's type is "http"`)
	case slices.Contains(remoteServerTypes, typ) && s.URL == "":
		p.errorf(name, "url", `required for type %q (the server's Streamable HTTP endpoint, e.g. "https://example.com/mcp")`, typ)
	case typ != "stdio" && !slices.Contains(remoteServerTypes, typ):
		p.errorf(name, "type", `unknown server type %q; write "stdio" or "http", or remove the key`, typ)
	}
}

// parseRemote expands and checks the settings of a remote server, one with
// a url: the url, and the headers. A remote server has none of a local
// one's settings.
func (p *parser) parseRemote(s *ServerConfig, entry map[string]json.RawMessage) {
	name := s.name
	p.expand(s, "url", &s.URL)
	u, err := url.Parse(s.URL)
	switch {
	case err != nil:
		p.errorf(name, "url", "not a URL: %v", err)
	case u.Scheme != "http" && u.Scheme != "https" || u.Host == "":
		p.errorf(name, "url", `want an http:// or https:// URL with a host, such as "https://example.com/mcp"`)
	}
	for _, key := range []string{"command", "args", "env", "cwd"} {
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
	p.expand(s, "cwd", &s.Cwd)
}

// validateServer checks the settings every server has, local or remote.
func (p *parser) validateServer(name string, s *ServerConfig) {
	if s.Prefix != "" && !validName(s.Prefix) {
		p.errorf(name, "prefix", "invalid prefix %q; use only letters, digits, '_', '.' and '-'", s.Prefix)
	}
	if s.RequestTimeout < 0 {
		p.errorf(name, "requestTimeout", "must not be negative, got %v; use a duration such as \"60s\", or remove the key to use the global requestTimeout", s.RequestTimeout.D())
	}
	p.validateSupervision(name, s.Supervision)
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

// secretWarnings returns warnings about secrets other local users can read:
// a config file that holds env values (often tokens) or a token file, either
// readable by group or others.
func secretWarnings(path string, c *Config) []string {
	var out []string
	readable := func(f string) bool {
		st, err := os.Stat(f)
		return err == nil && st.Mode().Perm()&0o044 != 0
	}
	hasEnv := false
	for _, s := range c.MCPServers {
		hasEnv = hasEnv || len(s.Env) > 0 || len(s.Headers) > 0
	}
	if hasEnv && readable(path) {
		out = append(out, fmt.Sprintf("%s holds env or header values, which are often secrets, and other users can read it; chmod 600 %s", path, path))
	}
	if f := c.AuthTokenFile; f != "" {
		if !filepath.IsAbs(f) {
			f = filepath.Join(filepath.Dir(path), f)
		}
		if readable(f) {
			out = append(out, fmt.Sprintf("the bearer token file %s is readable by other users; chmod 600 %s", f, f))
		}
	}
	return out
}

// readToken reads the bearer token named by authTokenFile (relative to the
// config file's directory) or authTokenEnv. A token never comes from the
// command line, where other users could read it.
func (p *parser) readToken(c *Config, path string) string {
	switch {
	case c.AuthTokenFile != "" && c.AuthTokenEnv != "":
		p.errorf("", "authTokenFile", "set authTokenFile or authTokenEnv, not both")
	case c.AuthTokenFile != "":
		f := c.AuthTokenFile
		if !filepath.IsAbs(f) {
			f = filepath.Join(filepath.Dir(path), f)
		}
		data, err := os.ReadFile(f)
		if err != nil {
			p.errorf("", "authTokenFile", "cannot read the token: %v", err)
			return ""
		}
		if token := strings.TrimSpace(string(data)); token != "" {
			return token
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

// expand expands the variables in *value, the field of server s, in place,
// and records in s.shown how -check prints the field: with "****" for each
// variable's value, whatever it is, since it may be a secret.
func (p *parser) expand(s *ServerConfig, field string, value *string) {
	v, err := expand(*value, p.getenv)
	if err != nil {
		p.errorf(s.name, field, "%v", err)
		return
	}
	if strings.Contains(*value, "${") {
		if s.shown == nil {
			s.shown = map[string]string{}
		}
		s.shown[field], _ = expand(*value, func(string) (string, bool) { return secretMask, true })
	}
	*value = v
}

// validate checks the top-level settings of c.
func (p *parser) validate(c *Config) {
	if c.Listen != "" {
		if _, _, err := net.SplitHostPort(c.Listen); err != nil {
			var ae *net.AddrError
			if errors.As(err, &ae) {
				err = errors.New(ae.Err)
			}
			p.errorf("", "listen", "invalid address %q: %v; write host:port, e.g. %q", c.Listen, err, defaultListen)
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
		{"maxHeaderBytes", int64(c.MaxHeaderBytes), defaultMaxHeaderBytes},
		{"maxNotificationsPerSecond", int64(c.MaxNotificationsPerSecond), defaultMaxNotifyRate},
		{"maxCatalogItems", int64(c.MaxCatalogItems), defaultMaxCatalogItems},
		{"maxCatalogBytes", c.MaxCatalogBytes, defaultMaxCatalogBytes},
		{"maxServerRequestsPerSession", int64(c.MaxServerRequestsPerSession), defaultMaxServerRequestsPerSession},
		{"maxServerRequests", int64(c.MaxServerRequests), defaultMaxServerRequests},
		{"maxStderrLinesPerSecond", int64(c.MaxStderrLinesPerSecond), defaultMaxStderrLines},
		{"maxStderrBytesPerSecond", int64(c.MaxStderrBytesPerSecond), defaultMaxStderrBytes},
	}
	p.validateSupervision("", c.Supervision)
	for _, f := range limits {
		if f.n < 0 {
			p.errorf("", f.key, "must not be negative, got %d; use a positive number, or remove the key for the default (%d)", f.n, f.def)
		}
	}
}

// expand returns s with each ${NAME} replaced by the value of the environment
// variable NAME, looked up with getenv, and each ${NAME:-default} replaced by
// that value or, if the variable is unset or empty, by default, taken
// literally. "$$" stands for a literal "$", and a "$" followed by anything else
// than "{" or "$" is kept as is. A value from the environment is not expanded
// again.
//
// It is an error for NAME to be unset (without a default), for it not to be a
// valid name (a letter or '_', then letters, digits and '_'), or for "${" to
// have no closing "}".
func expand(s string, getenv func(string) (string, bool)) (string, error) {
	if !strings.Contains(s, "$") {
		return s, nil
	}
	var b strings.Builder
	for {
		i := strings.IndexByte(s, '$')
		if i < 0 {
			b.WriteString(s)
			return b.String(), nil
		}
		b.WriteString(s[:i])
		s = s[i:]
		switch {
		case strings.HasPrefix(s, "$$"):
			b.WriteByte('$')
			s = s[2:]
		case strings.HasPrefix(s, "${"):
			end := strings.IndexByte(s, '}')
			if end < 0 {
				return "", fmt.Errorf("unterminated %q; close it with \"}\", or write \"$$\" for a literal \"$\"", s)
			}
			ref := s[:end+1]
			name, def, hasDefault := strings.Cut(s[2:end], ":-")
			if !validVarName(name) {
				return "", fmt.Errorf("invalid variable name %q in %s; a name is letters, digits and '_', not starting with a digit (write \"$$\" for a literal \"$\")", name, ref)
			}
			v, ok := getenv(name)
			switch {
			case hasDefault && v == "":
				v = def
			case !ok:
				return "", fmt.Errorf("%s is not set; export it, or write ${%s:-default}", ref, name)
			}
			b.WriteString(v)
			s = s[end+1:]
		default:
			b.WriteByte('$')
			s = s[1:]
		}
	}
}

// validVarName reports whether name is a valid environment variable name in
// a ${NAME} reference.
func validVarName(name string) bool {
	if name == "" || '0' <= name[0] && name[0] <= '9' {
		return false
	}
	for _, r := range name {
		if !(r == '_' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9') {
			return false
		}
	}
	return true
}

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
