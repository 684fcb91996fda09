package main

// This file holds corral's configuration: its types, their defaults, and
// loading a config file. configparse.go parses and validates the file;
// configcheck.go prints it for -check.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Config is corral's configuration, read from a JSON file. Its zero value, once
// passed through applyDefaults, is a working gateway with no servers.
//
// The file may be the same one a desktop MCP client uses: corral reads the
// "mcpServers" map (or VS Code's "servers" map, or both) and its own
// top-level keys, and ignores (with one warning) any other top-level key.
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

	// Replica names this corral among the replicas behind one load
	// balancer (replica.go): every session ID, requestState and task ID it
	// issues starts with it, so that a balancer can route on it. Letters,
	// digits, '-' and '_'. If empty, the host name's first label.
	Replica string `json:"replica"`

	// DrainDelay is how long corral keeps serving after SIGTERM before its
	// shutdown begins: /readyz answers 503 and new sessions are refused,
	// while the sessions open and their calls go on (drain.go). If zero,
	// the shutdown begins at once.
	DrainDelay Duration `json:"drainDelay"`

	// HeartbeatInterval is how often a long-lived event stream (/sse, a
	// session's GET stream, a streamed response such as
	// subscriptions/listen's) carries a comment line when it has carried
	// nothing else, so that proxies do not end it as idle. If zero, 15s.
	HeartbeatInterval Duration `json:"heartbeatInterval"`

	// AuthTokenFile names a file holding the bearer token HTTP clients must
	// send (Authorization: Bearer TOKEN); AuthTokenEnv names an environment
	// variable holding it. At most one may be set. If neither, no token is
	// asked for, and corral refuses to listen on an address other than
	// loopback unless started with -allow-remote-without-token.
	AuthTokenFile string `json:"authTokenFile"`
	AuthTokenEnv  string `json:"authTokenEnv"`

	// Clients names the clients that may call corral over HTTP, each with
	// its own bearer token and profile (clients.go). If empty, there is
	// one client, the holder of authTokenFile's token (or anyone, if none),
	// who sees every server.
	Clients map[string]*ClientConfig `json:"clients,omitempty"`

	// Profiles names what a client sees: which servers, and which of their
	// tools, resources and prompts (clients.go). A client names one; with
	// no clients, /mcp/NAME and -stdio -profile NAME serve profile NAME.
	Profiles map[string]*ProfileConfig `json:"profiles,omitempty"`

	// OAuth, if set, makes corral an OAuth 2.1 resource server that
	// accepts an authorization server's access tokens beside the static
	// tokens (oauthconfig.go). If nil, only static tokens are accepted.
	OAuth *OAuthConfig `json:"oauth,omitempty"`

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

	// WriteTimeout bounds the time a client may take to read one answer,
	// or one event of a stream: past it corral closes the connection (with
	// -stdio, it does not apply). If zero, 60s.
	WriteTimeout Duration `json:"writeTimeout"`

	// MaxUnsentBytesPerSession and MaxUnsentBytes bound the bytes of answers
	// that wait to be written to clients (on /mcp and with -stdio; a legacy
	// /sse stream has its own bound): those of one session, and those of all
	// sessions together. Such an answer counts toward its session's
	// maxInFlightPerSession until it is written. Past either bound, a new
	// call gets an error at once, and an answer that comes is replaced by an
	// error naming the setting (an answer alone, or one of at most 4 KiB, is
	// always sent). If zero, 64 MiB and 512 MiB.
	MaxUnsentBytesPerSession int64 `json:"maxUnsentBytesPerSession"`
	MaxUnsentBytes           int64 `json:"maxUnsentBytes"`

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
	// MaxTasksPerSession bounds the tasks (MCP 2025-11-25) one session has
	// created through corral and corral remembers; past it, a task-augmented
	// request gets an error. A task is forgotten when its ttl ends, its
	// server restarts or its session ends. If zero, 100.
	MaxTasksPerSession int `json:"maxTasksPerSession"`
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

	// Limits bounds the resources of every server's processes; a server
	// entry may override each limit. If zero, no limits.
	Limits Limits `json:"limits,omitzero"`
	// Sandbox is the sandbox of every local server; a server entry may
	// override each of its rules. If nil, none.
	Sandbox *SandboxConfig `json:"sandbox,omitempty"`

	// Admin holds the settings of the admin API (admin.go). If zero, it
	// is off.
	Admin AdminConfig `json:"admin"`

	// CacheDir is where the catalogs of lazy servers are kept between runs
	// (catalogcache.go). A relative path starts from the config file's
	// directory. If empty, "corral" in the user's cache directory.
	CacheDir string `json:"cacheDir"`

	// Audit is where the audit trail goes (configaudit.go). If zero, there
	// is none.
	Audit AuditConfig `json:"audit,omitzero"`

	// Tracing is where corral's spans go (configtracing.go). If zero,
	// tracing is off.
	Tracing TracingConfig `json:"tracing,omitzero"`
	// ToolMode is how clients' tools/list shows tools: "all" lists every
	// tool of a client's view; "search" lists find_tools and call_tool
	// instead (search.go). A profile's own toolMode overrides it. If
	// empty, "all".
	ToolMode string `json:"toolMode,omitempty"`

	// MCPServers maps a server's name to how to run it.
	MCPServers map[string]*ServerConfig `json:"mcpServers"`

	// file is the path the config was read from, for messages.
	file string

	// token is the bearer token read from AuthTokenFile or AuthTokenEnv.
	token string

	// clientTokens are the tokens of Clients, read at load.
	clientTokens []clientToken
}

// ServerConfig says how to run one stdio MCP server.
type ServerConfig struct {
	// Command is the program to run, found through PATH when it has no slash.
	// It is run directly, never through a shell. Required, unless URL is set.
	Command string `json:"command,omitempty"`

	// URL, instead of a command, names a remote server reached over
	// Streamable HTTP, or over the HTTP+SSE transport of 2024-11-05 if Type
	// is "sse": then URL is the server's event stream.
	URL string `json:"url,omitempty"`

	// Type is how a remote server is reached: "http" (Streamable HTTP) or
	// "sse" (the HTTP+SSE transport of 2024-11-05). If empty, "http". The
	// parser sets it for every remote server ("streamable-http" is "http"),
	// and leaves it empty for a local one ("stdio").
	Type string `json:"type,omitempty"`

	// Headers are sent with every request to a remote server.
	Headers map[string]string `json:"headers,omitempty"`

	// Args are the program's arguments.
	Args []string `json:"args,omitempty"`

	// Env is added to corral's own environment for the server's process.
	Env map[string]string `json:"env,omitempty"`

	// Cwd is the server's working directory. If empty, corral's.
	Cwd string `json:"cwd,omitempty"`

	// EnvFile names a .env file whose variables are added to the server's
	// environment where Env does not set them (see parseEnvFile): VS Code's
	// envFile. A relative path is relative to the config file's directory.
	EnvFile string `json:"envFile,omitempty"`

	// Prefix, if set, renames each of the server's tools to Prefix + "__" + name.
	// If empty, tool names pass through unchanged (see the collision rule in
	// docs/protocol.md).
	Prefix string `json:"prefix"`

	// NoPrefix, set by "prefix": false, keeps the server's names as the
	// server gives them even when another server offers the same: the
	// other server's item is qualified instead (see buildList). An MCP
	// App calls its server's tools by the server's own names.
	NoPrefix bool `json:"-"`

	// Tools, if set, filters the server's tools by their own names before
	// they are aggregated: a tool not offered cannot be called.
	Tools *ToolFilter `json:"tools"`

	// ToolOverrides change how the server's tools, by their own names, look
	// to clients (configoverrides.go, overrides.go).
	ToolOverrides map[string]*ToolOverride `json:"toolOverrides,omitempty"`

	// Pin, if "warn" or "block", records a digest of each tool's
	// definition at first sight and acts when it changes (pins.go). If
	// empty, off.
	Pin string `json:"pin,omitempty"`

	// Disabled servers are not started. Desktop MCP clients use the same key.
	Disabled bool `json:"disabled"`

	// Start is "eager" (started with corral) or "lazy" (started by the first
	// request that needs it; its catalog comes from the cache meanwhile).
	// If empty, "eager".
	Start string `json:"start,omitempty"`

	// RequestTimeout overrides Config.RequestTimeout for this server.
	RequestTimeout Duration `json:"requestTimeout"`

	// MaxInFlight overrides Config.MaxInFlight for this server.
	MaxInFlight int `json:"maxInFlight"`

	// Scope is "shared" (one process for every session), "session" (a
	// process per client session) or "client" (a process per named client,
	// shared by its sessions; see scope.go). If empty, "shared".
	Scope string `json:"scope,omitempty"`

	// MaxInstances bounds the processes of a session- or client-scoped
	// server. If
	// zero, defaultMaxInstances.
	MaxInstances int `json:"maxInstances,omitempty"`

	// MaxCatalogItems and MaxCatalogBytes override Config's for this server.
	MaxCatalogItems int   `json:"maxCatalogItems"`
	MaxCatalogBytes int64 `json:"maxCatalogBytes"`

	// Supervision overrides, field by field, the top level's settings for
	// this server.
	Supervision

	// Limits overrides, limit by limit, the top level's limits for this
	// server.
	Limits Limits `json:"limits,omitzero"`
	// Sandbox overrides, rule by rule, the top level's sandbox for this
	// server (sandbox.go). If neither is set, the server runs with all of
	// corral's rights.
	Sandbox *SandboxConfig `json:"sandbox,omitempty"`

	// Prerequisite, if set, is a process corral starts, and waits for,
	// before the server (see prereq.go).
	Prerequisite *Prerequisite `json:"prerequisite,omitempty"`

	// Audit, if set, is what the server's calls add to the audit trail
	// (configaudit.go).
	Audit *ServerAudit `json:"audit,omitempty"`

	// name is the key of this server in mcpServers.
	name string

	// vscode is true for an entry of VS Code's "servers" map, for messages.
	vscode bool

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

// UnmarshalJSON decodes a tools object, refusing keys it does not know, so
// that a misspelt "deny" is an error rather than no filter.
func (f *ToolFilter) UnmarshalJSON(data []byte) error {
	type plain ToolFilter
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(data, &keys); err != nil {
		return fmt.Errorf(`want an object such as {"deny": ["delete_*"]}, got %s`, jsonKind(data))
	}
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		if k != "allow" && k != "deny" {
			return unknownFieldError(k, []string{"allow", "deny"})
		}
	}
	var p plain
	if err := json.Unmarshal(data, &p); err != nil {
		return fmt.Errorf(`want {"allow": [tool names or globs], "deny": [tool names or globs]}`)
	}
	*f = ToolFilter(p)
	return nil
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

	// IdleStop stops a server that has had no call in flight and no
	// subscription for this long; the next request starts it again. It is
	// not a crash: no backoff, no restart counted. If zero, never.
	IdleStop Duration `json:"idleStop"`
}

// Duration is a time.Duration that reads from JSON as a Go duration string
// ("1.5s", "2m") or as a number of seconds.
type Duration time.Duration

// Defaults, documented on the fields above and in docs/config.md.
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
	defaultHeartbeat       = 15 * time.Second
	defaultMaxPerSession   = 256
	defaultMaxStreams      = 1000
	defaultMaxHeaderBytes  = 64 << 10
	defaultReadHeader      = 10 * time.Second
	defaultReadTimeout     = 60 * time.Second
	defaultWriteTimeout    = 60 * time.Second
	defaultMaxUnsentBytes  = 512 << 20
	defaultUnsentSession   = 64 << 20
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

// A sampling or elicitation request is answered by a model or a person: a
// server rarely has more than a few waiting at once. These leave room for
// one that fans out, and bound what a flood can make corral hold.
const (
	defaultMaxServerRequestsPerSession = 64
	defaultMaxServerRequests           = 256
	defaultMaxTasksPerSession          = 100
)

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
		IdleStop:        firstSet(o.IdleStop, t.IdleStop),
	}
	r.StableAfter = firstSet(o.StableAfter, t.StableAfter, 2*r.MaxRestartDelay)
	return r
}

// maxConfigBytes bounds the config file: thousands of servers fit in far
// less.
const maxConfigBytes = 16 << 20

// LoadConfig reads the config file at path, which must be a regular file
// (see readRegular) of at most maxConfigBytes, and returns it validated,
// with defaults applied. See ParseConfig for getenv and warn.
func LoadConfig(path string, getenv func(string) (string, bool), warn func(msg string)) (*Config, error) {
	data, err := readRegular(path, maxConfigBytes)
	switch {
	case errors.Is(err, errNotRegular):
		return nil, fmt.Errorf("%s: cannot read config: %w; corral reads its config again on every reload, so name a file", path, err)
	case errors.Is(err, errTooLarge):
		return nil, fmt.Errorf("%s: cannot read config: over %d bytes (16 MiB), the most corral reads for a config", path, maxConfigBytes)
	case err != nil:
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, fmt.Errorf("%s: cannot read config: %w", path, err)
	}
	return ParseConfig(path, data, getenv, warn)
}

// ParseConfig parses data, the contents of the config file at path, and
// returns it validated, with defaults applied. Path is used in messages, and
// relative paths in the file (authTokenFile, ${file:PATH}) start from its
// directory. Data may hold comments and trailing commas (see stripJSONC).
//
// References to environment variables in a server's command, args, env and
// headers values, cwd and url are expanded (see expand) using getenv, which is
// os.LookupEnv if nil; ${file:PATH} in env and headers values is replaced by
// the file's content (see readSecretFile).
// Warn, if not nil, receives non-fatal warnings, such as the list of top-level
// keys corral ignores.
//
// The error, if any, reports every problem found, one per line, each starting
// with path.
func ParseConfig(path string, data []byte, getenv func(string) (string, bool), warn func(msg string)) (*Config, error) {
	if getenv == nil {
		getenv = os.LookupEnv
	}
	data = stripJSONC(data) // VS Code's files may hold comments and trailing commas
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			line, col := position(data, se.Offset)
			return nil, fmt.Errorf("%s:%d:%d: invalid JSON: %v", path, line, col, se)
		}
		return nil, fmt.Errorf("%s: want a JSON object at the top level, got %s", path, jsonKind(data))
	}

	p := &parser{getenv: getenv, path: path}
	c := &Config{file: path}
	fields := jsonFields(c)
	c.MCPServers = p.parseServers(top["mcpServers"], top["servers"])
	var ignored []string
	for _, key := range slices.Sorted(maps.Keys(top)) {
		switch {
		case key == "mcpServers", key == "servers":
			// Parsed above.
		case key == "inputs":
			// VS Code's prompts for ${input:ID}; each use of one is an error.
		case fields[key] != nil:
			p.decode("", key, top[key], fields[key])
		default:
			ignored = append(ignored, key)
		}
	}
	p.validate(c)
	p.validateAdmin(c)
	p.validateAudit(c)
	p.validateTracing(c)
	c.token = p.readToken(c, path)
	p.validateClients(c, top["clients"], top["profiles"])
	p.validateOAuth(c, top["oauth"])

	if len(ignored) > 0 && warn != nil {
		warn(path + ": " + ignoredKeysMessage(ignored))
	}
	if len(p.errs) > 0 {
		return nil, p.parseErrors(path, len(c.MCPServers))
	}
	c.applyDefaults()
	return c, nil
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
	c.HeartbeatInterval = firstSet(c.HeartbeatInterval, Duration(defaultHeartbeat))
	if c.Replica == "" {
		c.Replica = defaultReplica()
	}
	c.MaxInFlightPerSession = firstSet(c.MaxInFlightPerSession, defaultMaxPerSession)
	c.MaxStreams = firstSet(c.MaxStreams, defaultMaxStreams)
	c.MaxHeaderBytes = firstSet(c.MaxHeaderBytes, defaultMaxHeaderBytes)
	c.ReadHeaderTimeout = firstSet(c.ReadHeaderTimeout, Duration(defaultReadHeader))
	c.ReadTimeout = firstSet(c.ReadTimeout, Duration(defaultReadTimeout))
	c.WriteTimeout = firstSet(c.WriteTimeout, Duration(defaultWriteTimeout))
	c.MaxUnsentBytesPerSession = firstSet(c.MaxUnsentBytesPerSession, defaultUnsentSession)
	c.MaxUnsentBytes = firstSet(c.MaxUnsentBytes, defaultMaxUnsentBytes)
	c.MaxNotificationsPerSecond = firstSet(c.MaxNotificationsPerSecond, defaultMaxNotifyRate)
	c.MaxCatalogItems = firstSet(c.MaxCatalogItems, defaultMaxCatalogItems)
	c.MaxCatalogBytes = firstSet(c.MaxCatalogBytes, defaultMaxCatalogBytes)
	c.MaxServerRequestsPerSession = firstSet(c.MaxServerRequestsPerSession, defaultMaxServerRequestsPerSession)
	c.MaxTasksPerSession = firstSet(c.MaxTasksPerSession, defaultMaxTasksPerSession)
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

// prefixServer returns the name of the server of c, other than except and
// not disabled, whose prefix is prefix; "" if there is none, or if prefix is
// "".
func (c *Config) prefixServer(prefix, except string) string {
	for _, s := range c.Servers() {
		if prefix != "" && s.Prefix == prefix && s.Name() != except {
			return s.Name()
		}
	}
	return ""
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

// AdminConfig holds the settings of the admin API. Its zero value turns it
// off.
type AdminConfig struct {
	// Registration, if true, serves /admin/servers: servers may be
	// registered and removed at runtime. It needs a bearer token.
	Registration bool `json:"registration"`

	// MaxDynamic bounds the servers registered at runtime at one time. If
	// zero, 10.
	MaxDynamic int `json:"maxDynamic"`
}

const defaultMaxDynamic = 10

// maxDynamic returns MaxDynamic, or its default.
func (a AdminConfig) maxDynamic() int { return firstSet(a.MaxDynamic, defaultMaxDynamic) }

// UnmarshalJSON decodes the "admin" object, refusing keys it does not know
// and values of the wrong type, with the key in the message.
func (a *AdminConfig) UnmarshalJSON(data []byte) error {
	var entry map[string]json.RawMessage
	if err := json.Unmarshal(data, &entry); err != nil || entry == nil {
		return fmt.Errorf(`want an object such as {"registration": true, "maxDynamic": 10}, got %s`, jsonKind(data))
	}
	known := []string{"maxDynamic", "registration"}
	for _, key := range slices.Sorted(maps.Keys(entry)) {
		var err error
		switch key {
		case "registration":
			if err = json.Unmarshal(entry[key], &a.Registration); err != nil {
				err = fmt.Errorf("registration: want true or false, got %s", jsonKind(entry[key]))
			}
		case "maxDynamic":
			if err = json.Unmarshal(entry[key], &a.MaxDynamic); err != nil {
				err = fmt.Errorf("maxDynamic: want an integer, got %s", jsonKind(entry[key]))
			}
		default:
			err = unknownFieldError(key, known)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// The server scopes.
const (
	scopeShared  = "shared"  // one process for every session (the default)
	scopeSession = "session" // one process per session
	scopeClient  = "client"  // one process per named client
)

// defaultMaxInstances bounds the processes of one session-scoped server
// when its config does not: a process per session, and sixteen sessions
// of one server are many for one machine (each Node server holds 50-150 MB).
const defaultMaxInstances = 16

// sessionScoped reports whether the server runs a process per session.
func (s *ServerConfig) sessionScoped() bool { return s.Scope == scopeSession }

// clientScoped reports whether the server runs a process per named client.
func (s *ServerConfig) clientScoped() bool { return s.Scope == scopeClient }

// scoped reports whether the server runs a process per session or per
// client: a pool of processes (scope.go) rather than one.
func (s *ServerConfig) scoped() bool { return s.sessionScoped() || s.clientScoped() }

// maxInstances returns the bound on the server's processes: its
// maxInstances, or defaultMaxInstances if zero.
func (s *ServerConfig) maxInstances() int {
	if s.MaxInstances > 0 {
		return s.MaxInstances
	}
	return defaultMaxInstances
}
