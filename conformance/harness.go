package conformance

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"text/template"
	"time"
)

// Adapter says how to run one gateway. README.md documents every field.
type Adapter struct {
	Name           string     `json:"name"`
	About          string     `json:"about"`
	Setup          [][]string `json:"setup"`
	Bin            string     `json:"bin"`
	Install        [][]string `json:"install"`
	Version        []string   `json:"version"`
	MaxServers     int        `json:"maxServers"`
	ConfigTemplate string     `json:"configTemplate"`
	Command        []string   `json:"command"`
	Env            []string   `json:"env"`
	Transport      string     `json:"transport"`
	URL            string     `json:"url"`
	SSEURL         string     `json:"sseURL"`
	ToolName       string     `json:"toolName"`
	PromptName     string     `json:"promptName"`
	ResourceURI    string     `json:"resourceURI"`
	Unsupported    []string   `json:"unsupported"`
	Settings       []string   `json:"settings"`
	Protocols      []string   `json:"protocols"`
	ShutdownBound  string     `json:"shutdownBound"`
	ReadyTimeout   string     `json:"readyTimeout"`

	file     string
	dir      string // where Setup put its files: {{.Dir}}
	bin      string // the gateway's executable, rendered: {{.Bin}}
	version  string
	bound    time.Duration
	readyFor time.Duration
}

// has reports whether the gateway's config template honours a setting.
func (a *Adapter) has(setting string) bool {
	for _, s := range a.Settings {
		if s == setting {
			return true
		}
	}
	return false
}

// supports reports whether the gateway serves an MCP feature the adapter may
// declare it does not: see unsupportedFeatures.
func (a *Adapter) supports(feature string) bool {
	for _, f := range a.Unsupported {
		if f == feature {
			return false
		}
	}
	return true
}

// speaks reports whether the adapter declares the gateway serves clients of
// protocol version v, one of optionalProtocols.
func (a *Adapter) speaks(v string) bool {
	for _, p := range a.Protocols {
		if p == v {
			return true
		}
	}
	return false
}

// optionalProtocols are the protocol versions an adapter may list in
// protocols: versions a gateway need not serve to clients. A case about one
// the adapter does not list is skipped.
var optionalProtocols = []string{"2026-07-28"}

// unsupportedFeatures are the features an adapter may list in unsupported:
// what a gateway may leave out by design. A case about a feature the adapter
// lists is skipped.
var unsupportedFeatures = []string{"resources", "prompts", "tasks"}

// The suite's shared state, set up once by TestMain.
var (
	adapter       *Adapter
	fakeserverBin string
)

func loadAdapter(path string) (*Adapter, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("-adapter: %v", err)
	}
	return parseAdapter(path, data)
}

// parseAdapter reads an adapter; path names it in errors.
func parseAdapter(path string, data []byte) (*Adapter, error) {
	var err error
	var a Adapter
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	a.file = path
	switch a.Transport {
	case "http", "sse", "stdio":
	default:
		return nil, fmt.Errorf("%s: transport %q: want http, sse or stdio", path, a.Transport)
	}
	if len(a.Command) == 0 {
		return nil, fmt.Errorf("%s: command is required", path)
	}
	if a.ToolName == "" {
		a.ToolName = "{{.Tool}}"
	}
	if a.PromptName == "" {
		a.PromptName = "{{.Prompt}}"
	}
	if a.ResourceURI == "" {
		a.ResourceURI = "{{.URI}}"
	}
	for _, f := range a.Unsupported {
		if !contains(unsupportedFeatures, f) {
			return nil, fmt.Errorf("%s: unsupported: %q: want some of %q", path, f, unsupportedFeatures)
		}
	}
	for _, p := range a.Protocols {
		if !contains(optionalProtocols, p) {
			return nil, fmt.Errorf("%s: protocols: %q: want some of %q", path, p, optionalProtocols)
		}
	}
	a.bound = 30 * time.Second
	if a.ShutdownBound != "" {
		if a.bound, err = time.ParseDuration(a.ShutdownBound); err != nil {
			return nil, fmt.Errorf("%s: shutdownBound: %v", path, err)
		}
	}
	a.readyFor = 60 * time.Second
	if a.ReadyTimeout != "" {
		if a.readyFor, err = time.ParseDuration(a.ReadyTimeout); err != nil {
			return nil, fmt.Errorf("%s: readyTimeout: %v", path, err)
		}
	}
	return &a, nil
}

// serverSpec is one fake server a case asks the gateway to run, or, with
// url, one the case runs itself that the gateway reaches by URL (setting
// "remote").
type serverSpec struct {
	Name      string
	flags     []string                        // fakeserver flags beyond the suite's own
	prefix    string                          // the gateway's prefix for the server's names, if any (setting "prefix")
	url       string                          // a remote server's URL; "" for one the gateway runs
	typ       string                          // a remote server's transport: "http" (Streamable HTTP) or "sse" (HTTP+SSE)
	limits    limits                          // the resource limits the gateway is to set (settings "memoryLimit", "pidsLimit")
	noNetwork bool                            // the gateway is to run the server without network (setting "noNetwork")
	scope     string                          // "session": a process of the server per client session (setting "sessionScope"); "client": per named client (setting "clientScope")
	overrides map[string]templateToolOverride // by the server's tool name (setting "toolOverrides")
}

// templateToolOverride is what a case asks the gateway to change of one
// of a server's tools (setting "toolOverrides"): its JSON is corral's
// toolOverrides entry; another adapter's template writes its own form.
type templateToolOverride struct {
	Name           string         `json:"name,omitempty"`           // the name clients see, before any prefix
	Description    string         `json:"description,omitempty"`    // a new description
	Hide           bool           `json:"hide,omitempty"`           // not listed, not callable
	FixedArguments map[string]any `json:"fixedArguments,omitempty"` // set by the gateway, not in the schema clients see
}

// clientSpec is a named client a case asks the gateway to know (setting
// "clients"): the suite makes its bearer token and writes it to a file.
type clientSpec struct {
	name    string
	profile string                       // the profile it sees (setting "profiles"); "" for everything
	env     map[string]map[string]string // server -> variable -> value for its process of a "client"-scoped server (setting "clientScope")
}

// profileSpec is a profile (setting "profiles"): the servers it shows, each
// with the tools it shows of it (as the server names them; none: all).
type profileSpec struct {
	name    string
	servers []templateProfileServer
	search  bool // its clients list tools in search mode (setting "searchMode")
}

// templateClient is a named client as config templates see it.
type templateClient struct {
	Name      string
	Token     string // its bearer token
	TokenFile string // a file holding Token (absolute)
	Profile   string // its profile's name, or ""
	// Env maps a server's name to variables for the client's own process
	// of that server; nil for none.
	Env map[string]map[string]string
}

// templateProfile is a profile as config templates see it.
type templateProfile struct {
	Name    string
	Servers []templateProfileServer
	Search  bool // its clients list find_tools and call_tool instead of every tool (setting "searchMode")
}

// templateProfileServer is a server a profile shows, and which of its tools
// (as the server names them); Tools empty shows them all.
type templateProfileServer struct {
	Name  string
	Tools []string
}

// templateServer is a server as config templates see it.
type templateServer struct {
	Name        string
	Command     string
	Args        []string
	CommandLine string // Command and Args quoted for a POSIX shell
	Prefix      string // the prefix the gateway is to give its names; "" for none
	URL         string // a remote server's URL (setting "remote"); then Command and Args are empty
	Type        string // a remote server's transport: "http" or "sse"
	NoNetwork   bool   // the gateway is to run the server without network

	// The server's limits, when the case sets them: MemoryLimit as
	// "64MiB" and MemoryLimitBytes; PidsLimit, processes and threads.
	MemoryLimit      string
	MemoryLimitBytes int64
	PidsLimit        int
	Scope            string // "session" for a process of the server per client session; "" for the gateway's default
	// ToolOverrides change the server's tools as clients see them, by the
	// server's tool names (setting "toolOverrides"); nil for none.
	ToolOverrides map[string]templateToolOverride
}

// templateData is what adapter templates see.
type templateData struct {
	Dir, ConfigPath, StateDir, URL    string
	Source                            string // the corral module's source directory (where go.mod is), if the suite runs from source
	Bin                               string // the gateway's executable: the adapter's bin, or the one the user named
	CaseDir                           string // a directory of the case's own, for the gateway's files
	Port                              int
	Servers                           []templateServer
	Timeout, StopGrace                string // Go durations; empty unless the case sets them
	RestartDelay, ShutdownTimeout     string
	TimeoutMS, StopGraceMS            int64
	RestartDelayMS, ShutdownTimeoutMS int64
	StartTimeout, WriteTimeout        string
	StartTimeoutMS, WriteTimeoutMS    int64
	Server, Tool                      string            // for toolName
	Prefix                            string            // for toolName: the server's prefix, if any
	Prompt, URI                       string            // for promptName and resourceURI
	Clients                           []templateClient  // named clients (setting "clients")
	Profiles                          []templateProfile // profiles (setting "profiles")
	AuditFile                         string            // where the audit trail goes (setting "audit"); "" for none
	TraceEndpoint                     string            // where spans go, as OTLP/HTTP JSON (setting "tracing"); "" for none
	OAuthIssuer, OAuthResource        string            // the authorization server whose tokens to accept, and the gateway's resource URI (setting "oauth"); "" for none
}

// options are the gateway settings a case needs. A zero field is left to the
// gateway's default; a case that needs a setting the adapter does not list
// skips.
type options struct {
	timeout, stopGrace, restartDelay, shutdownTimeout time.Duration
	startTimeout, writeTimeout                        time.Duration
	clients                                           []clientSpec  // setting "clients"
	profiles                                          []profileSpec // setting "profiles"
	audit                                             bool          // setting "audit"
	traceEndpoint                                     string        // setting "tracing": the OTLP/HTTP traces URL spans go to
	oauthIssuer                                       string        // setting "oauth": the issuer whose access tokens the gateway accepts
}

// renderErr executes one of the adapter's templates.
func renderErr(name, text string, data templateData) (string, error) {
	tmpl, err := template.New(name).Funcs(template.FuncMap{
		"json": func(v any) (string, error) { b, err := json.Marshal(v); return string(b), err },
	}).Parse(text)
	if err != nil {
		return "", fmt.Errorf("adapter %s: %s: %v", adapter.file, name, err)
	}
	var b strings.Builder
	if err := tmpl.Execute(&b, data); err != nil {
		return "", fmt.Errorf("adapter %s: %s: %v", adapter.file, name, err)
	}
	return b.String(), nil
}

func render(t *testing.T, name, text string, data templateData) string {
	t.Helper()
	s, err := renderErr(name, text, data)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// renderPlain is render for setup, where there is no test yet; an error
// leaves the word as it is, and the command fails on it visibly.
func renderPlain(text string, data templateData) string {
	s, err := renderErr("setup", text, data)
	if err != nil {
		return text
	}
	return s
}

// toolName is the name the gateway gives tool of server.
func toolName(t *testing.T, server, tool string) string {
	return render(t, "toolName", adapter.ToolName, templateData{Server: server, Tool: tool})
}

// toolName is the name the gateway gives tool of server, one of g's,
// with its prefix if it has one.
func (g *gateway) toolName(server, tool string) string {
	d := templateData{Server: server, Tool: tool}
	for _, s := range g.servers {
		if s.Name == server {
			d.Prefix = s.prefix
		}
	}
	return render(g.t, "toolName", adapter.ToolName, d)
}

// promptName is the name the gateway gives prompt of server.
func promptName(t *testing.T, server, prompt string) string {
	return render(t, "promptName", adapter.PromptName, templateData{Server: server, Prompt: prompt})
}

// resourceURI is the URI the gateway gives resource uri of server.
func resourceURI(t *testing.T, server, uri string) string {
	return render(t, "resourceURI", adapter.ResourceURI, templateData{Server: server, URI: uri})
}

// shellQuote quotes words for a POSIX shell.
func shellQuote(words []string) string {
	var q []string
	for _, w := range words {
		q = append(q, "'"+strings.ReplaceAll(w, "'", `'\''`)+"'")
	}
	return strings.Join(q, " ")
}

// gateway is the gateway under test, running.
type gateway struct {
	t        *testing.T
	cmd      *exec.Cmd
	stateDir string
	url      string
	sseURL   string // the legacy SSE front end's stream, if the adapter declares one
	servers  []serverSpec
	tokens   map[string]string // named clients' bearer tokens (setting "clients")
	token    string            // the token sessions send unless told another: the first client's
	audit    string            // the audit trail's file (setting "audit")
	stdin    io.WriteCloser    // with the stdio transport
	stdio    *dispatcher       // answers read from the gateway's stdout

	logMu sync.Mutex
	log   bytes.Buffer

	exited  chan struct{}
	waitErr error
}

// freePort returns a TCP port that was free a moment ago.
func freePort(t testing.TB) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// startGateway renders the adapter's config for servers, starts the gateway,
// and waits until every server in ready lists its tools. When the test ends
// the gateway is killed if still running, and every process of its servers
// is killed whatever the case found.
func startGateway(t *testing.T, servers []serverSpec, opts options, ready ...string) *gateway {
	t.Helper()
	g := launchGateway(t, servers, opts)
	g.waitReady(ready)
	return g
}

// launchGateway is startGateway without the wait: the gateway has been
// started, and may yet refuse its config and exit.
func launchGateway(t *testing.T, servers []serverSpec, opts options) *gateway {
	t.Helper()
	if adapter.MaxServers > 0 && len(servers) > adapter.MaxServers {
		skip(t, "the gateway runs at most %d server(s); this case needs %d", adapter.MaxServers, len(servers))
	}
	for _, s := range []struct {
		name string
		d    time.Duration
	}{{"timeout", opts.timeout}, {"stopGrace", opts.stopGrace}, {"restartDelay", opts.restartDelay}, {"shutdownTimeout", opts.shutdownTimeout},
		{"startTimeout", opts.startTimeout}, {"writeTimeout", opts.writeTimeout}} {
		if s.d != 0 && !adapter.has(s.name) {
			skip(t, "the adapter has no %s setting", s.name)
		}
	}
	for _, s := range servers {
		if s.prefix != "" && !adapter.has("prefix") {
			skip(t, "the adapter has no prefix setting")
		}
		if s.url != "" && !adapter.has("remote") {
			skip(t, "the adapter has no remote setting (a server named by URL)")
		}
		s.limits.check(t)
		if s.scope == "session" && !adapter.has("sessionScope") {
			skip(t, "the adapter has no sessionScope setting (a process of a server per client session)")
		}
		if s.scope == "client" && !adapter.has("clientScope") {
			skip(t, "the adapter has no clientScope setting (a process of a server per named client, with the client's own env)")
		}
		if len(s.overrides) > 0 && !adapter.has("toolOverrides") {
			skip(t, "the adapter has no toolOverrides setting (a tool renamed, hidden or with fixed arguments)")
		}
		if s.noNetwork && !adapter.has("noNetwork") {
			skip(t, "the adapter has no noNetwork setting")
		}
	}
	if len(opts.clients) > 0 && !adapter.has("clients") {
		skip(t, "the adapter has no clients setting (named clients, each with its own bearer token)")
	}
	if len(opts.clients) > 0 && adapter.Transport != "http" {
		skip(t, "the suite sends named clients' bearer tokens over Streamable HTTP only; the gateway's transport is %s", adapter.Transport)
	}
	if len(opts.profiles) > 0 && !adapter.has("profiles") {
		skip(t, "the adapter has no profiles setting (what each named client sees)")
	}
	for _, p := range opts.profiles {
		if p.search && !adapter.has("searchMode") {
			skip(t, "the adapter has no searchMode setting (a profile whose clients list find_tools(query, limit) and call_tool(name, arguments) instead of every tool)")
		}
	}
	if opts.audit && !adapter.has("audit") {
		skip(t, "the adapter has no audit setting (a JSON line per call)")
	}
	if opts.traceEndpoint != "" && !adapter.has("tracing") {
		skip(t, "the adapter has no tracing setting (spans exported as OTLP/HTTP JSON to .TraceEndpoint)")
	}
	if opts.oauthIssuer != "" && !adapter.has("oauth") {
		skip(t, "the adapter has no oauth setting (an OAuth 2.1 resource server accepting an issuer's access tokens)")
	}
	requireLinux(t)
	g := &gateway{t: t, stateDir: t.TempDir(), servers: servers, exited: make(chan struct{}), tokens: map[string]string{}}
	t.Cleanup(func() { killMarked(g.stateDir) })

	port := freePort(t)
	caseDir := t.TempDir()
	data := templateData{Dir: adapter.dir, Source: sourceDir, Bin: adapter.bin, CaseDir: caseDir, ConfigPath: filepath.Join(caseDir, "config.json"), StateDir: g.stateDir, Port: port}
	for _, s := range servers {
		if s.url != "" {
			data.Servers = append(data.Servers, templateServer{Name: s.Name, URL: s.url, Type: s.typ, Prefix: s.prefix})
			continue
		}
		args := append([]string{"-state", g.stateDir, "-name", s.Name, "-prefix", s.Name + "_", "-lifetime", "10m"}, s.flags...)
		data.Servers = append(data.Servers, templateServer{Name: s.Name, Command: fakeserverBin, Args: args,
			CommandLine: shellQuote(append([]string{fakeserverBin}, args...)), Prefix: s.prefix, NoNetwork: s.noNetwork,
			MemoryLimit: s.limits.memoryText(), MemoryLimitBytes: s.limits.memory, PidsLimit: s.limits.pids, Scope: s.scope, ToolOverrides: s.overrides})
	}
	for _, c := range opts.clients {
		token := hex.EncodeToString(randomBytes(t, 32))
		file := filepath.Join(caseDir, c.name+".token")
		if err := os.WriteFile(file, []byte(token+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		g.tokens[c.name] = token
		if g.token == "" {
			g.token = token
		}
		data.Clients = append(data.Clients, templateClient{Name: c.name, Token: token, TokenFile: file, Profile: c.profile, Env: c.env})
	}
	for _, p := range opts.profiles {
		data.Profiles = append(data.Profiles, templateProfile{Name: p.name, Servers: p.servers, Search: p.search})
	}
	if opts.audit {
		g.audit = filepath.Join(caseDir, "audit.jsonl")
		data.AuditFile = g.audit
	}
	data.TraceEndpoint = opts.traceEndpoint
	if opts.oauthIssuer != "" {
		data.OAuthIssuer, data.OAuthResource = opts.oauthIssuer, render(t, "url", adapter.URL, data)
	}
	set := func(d time.Duration, s *string, ms *int64) {
		if d != 0 {
			*s, *ms = d.String(), d.Milliseconds()
		}
	}
	set(opts.timeout, &data.Timeout, &data.TimeoutMS)
	set(opts.stopGrace, &data.StopGrace, &data.StopGraceMS)
	set(opts.restartDelay, &data.RestartDelay, &data.RestartDelayMS)
	set(opts.shutdownTimeout, &data.ShutdownTimeout, &data.ShutdownTimeoutMS)
	set(opts.startTimeout, &data.StartTimeout, &data.StartTimeoutMS)
	set(opts.writeTimeout, &data.WriteTimeout, &data.WriteTimeoutMS)
	if adapter.ConfigTemplate != "" {
		os.WriteFile(data.ConfigPath, []byte(render(t, "configTemplate", adapter.ConfigTemplate, data)), 0o600)
	}
	g.url = render(t, "url", adapter.URL, data)
	g.sseURL = render(t, "sseURL", adapter.SSEURL, data)
	var argv []string
	for i, a := range adapter.Command {
		// A word that renders empty is left out: how a template says
		// "no such flag unless the case sets it".
		if w := render(t, fmt.Sprintf("command[%d]", i), a, data); w != "" {
			argv = append(argv, w)
		}
	}
	g.cmd = exec.Command(argv[0], argv[1:]...)
	g.cmd.Env = append(os.Environ(), adapter.Env...)
	// A descendant the gateway leaks may hold its stderr open forever; Wait
	// must not wait for it.
	g.cmd.WaitDelay = 2 * time.Second
	g.cmd.Stderr = &lockedWriter{mu: &g.logMu, w: &g.log}
	var stdout io.Reader
	if adapter.Transport == "stdio" {
		g.stdin, _ = g.cmd.StdinPipe()
		stdout, _ = g.cmd.StdoutPipe()
		g.stdio = &dispatcher{stream: "stdout"}
	} else {
		g.cmd.Stdout = g.cmd.Stderr
	}
	if err := g.cmd.Start(); err != nil {
		fatal(t, "starting the gateway: %v", err)
	}
	if stdout != nil {
		go func() {
			br := bufio.NewReaderSize(stdout, 1<<20)
			for {
				line, err := br.ReadBytes('\n')
				if len(line) > 0 {
					g.stdio.deliver(bytes.TrimSpace(line))
				}
				if err != nil {
					g.stdio.fail(fmt.Errorf("the gateway's stdout ended: %v", err))
					return
				}
			}
		}()
	}
	go func() {
		g.waitErr = g.cmd.Wait()
		close(g.exited)
	}()
	t.Cleanup(func() {
		// SIGTERM first, as in service: a gateway killed with SIGKILL
		// leaves what it cannot clean up (its cgroups) to its next start.
		g.signal(syscall.SIGTERM)
		g.waitExit(2 * time.Second)
		g.cmd.Process.Kill()
		<-g.exited
		if t.Failed() {
			t.Logf("the gateway's output:\n%s", g.output())
		}
	})
	return g
}

// output returns what the gateway wrote to stderr (and stdout, but with the
// stdio transport).
func (g *gateway) output() string {
	g.logMu.Lock()
	defer g.logMu.Unlock()
	return g.log.String()
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (w *lockedWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.Write(b)
}

// waitReady waits until the gateway lists the tools of every server named in
// ready (by their "whoami" tool), polling, since gateways announce readiness
// in ways of their own.
func (g *gateway) waitReady(ready []string) {
	g.t.Helper()
	deadline := time.Now().Add(adapter.readyFor)
	var last string
	for time.Now().Before(deadline) {
		select {
		case <-g.exited:
			fatal(g.t, "the gateway exited before it was ready (%v)", g.waitErr)
		default:
		}
		if s, err := g.trySession(); err == nil {
			names, err := s.toolNames()
			s.close()
			if err == nil {
				missing := ""
				for _, server := range ready {
					if !contains(names, g.toolName(server, server+"_whoami")) {
						missing = server
					}
				}
				if missing == "" {
					return
				}
				last = fmt.Sprintf("server %s's tools are not listed yet", missing)
			} else {
				last = err.Error()
			}
		} else {
			last = err.Error()
		}
		if adapter.Transport == "stdio" {
			break // one session only: trySession already waited
		}
		time.Sleep(100 * time.Millisecond) // the gateway gives no signal to wait on
	}
	fatal(g.t, "the gateway was not ready within %s: %s", adapter.readyFor, last)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// signal sends sig to the gateway process.
func (g *gateway) signal(sig syscall.Signal) { g.cmd.Process.Signal(sig) }

// waitExit waits up to d for the gateway to exit, and reports whether it did.
func (g *gateway) waitExit(d time.Duration) bool {
	select {
	case <-g.exited:
		return true
	case <-time.After(d):
		return false
	}
}

// --- the MCP client ---

// session is one MCP session with the gateway.
type session struct {
	g    *gateway
	conn conn
	in   *inbox // what the session receives besides the answers it waits for
}

// conn carries JSON-RPC messages to the gateway and back.
type conn interface {
	// roundTrip sends a request whose raw ID is id and returns the raw
	// answer with that ID.
	roundTrip(ctx context.Context, msg []byte, id string) ([]byte, error)
	notify(msg []byte) error
	close()
}

// message is a JSON-RPC message as the suite reads it.
type message struct {
	ID     json.RawMessage `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
	Method string `json:"method"`
}

// newSession opens a session and initializes it, failing the test on error.
func (g *gateway) newSession() *session {
	g.t.Helper()
	return g.newSessionWith(map[string]any{})
}

// newSessionWith is newSession for a client that declares capabilities.
func (g *gateway) newSessionWith(capabilities map[string]any) *session {
	g.t.Helper()
	s, err := g.trySessionWith(capabilities)
	if err != nil {
		fatal(g.t, "opening a session: %v", err)
	}
	g.t.Cleanup(s.close)
	return s
}

// trySession opens a session and initializes it.
func (g *gateway) trySession() (*session, error) { return g.trySessionWith(map[string]any{}) }

// trySessionWith is trySession for a client that declares capabilities.
func (g *gateway) trySessionWith(capabilities map[string]any) (*session, error) {
	return g.trySessionAs(g.token, capabilities)
}

// newSessionAs opens a session as the named client (setting "clients"),
// with its bearer token, failing the test on error.
func (g *gateway) newSessionAs(client string) *session {
	g.t.Helper()
	token, ok := g.tokens[client]
	if !ok {
		g.t.Fatalf("the case names a client it did not configure: %q", client)
	}
	s, err := g.trySessionAs(token, map[string]any{})
	if err != nil {
		fatal(g.t, "opening a session as client %s: %v", client, err)
	}
	g.t.Cleanup(s.close)
	return s
}

// trySessionAs is trySessionWith for a session that sends a bearer token
// ("" for none).
func (g *gateway) trySessionAs(token string, capabilities map[string]any) (*session, error) {
	in := newInbox()
	var c conn
	var err error
	switch adapter.Transport {
	case "http":
		c = &httpConn{url: g.url, other: in.add, token: token}
	case "sse":
		var sc *sseConn
		if sc, err = dialSSE(g.url, in.add); err == nil {
			c = sc
		}
	case "stdio":
		g.stdio.setOther(in.add) // one session: the latest gets everything
		c = &stdioConn{w: g.stdin, d: g.stdio}
	}
	if err != nil {
		return nil, err
	}
	s := &session{g: g, conn: c, in: in}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := s.request(ctx, `0`, "initialize", map[string]any{"protocolVersion": "2025-06-18", "capabilities": capabilities,
		"clientInfo": map[string]string{"name": "corral-conformance", "version": "1"}}); err != nil {
		c.close()
		return nil, fmt.Errorf("initialize: %w", err)
	}
	if err := c.notify([]byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)); err != nil {
		c.close()
		return nil, err
	}
	return s, nil
}

func (s *session) close() { s.conn.close() }

// request sends a request with the raw ID id and returns its answer. An
// answer that is a JSON-RPC error is returned as a message.
func (s *session) request(ctx context.Context, id, method string, params any) (*message, error) {
	raw, err := s.rawRequest(ctx, id, method, params)
	if err != nil {
		return nil, err
	}
	var m message
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("answer is not JSON: %q", truncate(raw))
	}
	return &m, nil
}

// rawRequest is request returning the answer's bytes as received.
func (s *session) rawRequest(ctx context.Context, id, method string, params any) ([]byte, error) {
	p, err := json.Marshal(params)
	if err != nil {
		return nil, err
	}
	msg := fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":%q,"params":%s}`, id, method, p)
	return s.conn.roundTrip(ctx, []byte(msg), id)
}

// call calls a tool of server by the gateway's name for it.
func (s *session) call(ctx context.Context, id, server, tool string, args any) (*message, error) {
	return s.request(ctx, id, "tools/call", map[string]any{"name": toolName(s.g.t, server, server+"_"+tool), "arguments": args})
}

// text returns the text of a tool result, or describes why there is none.
func (m *message) text() (string, error) {
	if m.Error != nil {
		return "", fmt.Errorf("error %d: %s", m.Error.Code, m.Error.Message)
	}
	var r struct {
		Content []struct{ Text string } `json:"content"`
		IsError bool                    `json:"isError"`
	}
	if err := json.Unmarshal(m.Result, &r); err != nil || len(r.Content) == 0 {
		return "", fmt.Errorf("result without text: %s", truncate(m.Result))
	}
	if r.IsError {
		return "", fmt.Errorf("tool error: %s", r.Content[0].Text)
	}
	return r.Content[0].Text, nil
}

// toolNames lists every tool through every page.
func (s *session) toolNames() ([]string, error) {
	var names []string
	params := map[string]any{}
	for range 1000 {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		m, err := s.request(ctx, `"list"`, "tools/list", params)
		cancel()
		if err != nil {
			return nil, err
		}
		if m.Error != nil {
			return nil, fmt.Errorf("tools/list: error %d: %s", m.Error.Code, m.Error.Message)
		}
		var r struct {
			Tools      []struct{ Name string } `json:"tools"`
			NextCursor string                  `json:"nextCursor"`
		}
		if err := json.Unmarshal(m.Result, &r); err != nil {
			return nil, fmt.Errorf("tools/list: %v", err)
		}
		for _, t := range r.Tools {
			names = append(names, t.Name)
		}
		if r.NextCursor == "" {
			return names, nil
		}
		params = map[string]any{"cursor": r.NextCursor}
	}
	return nil, fmt.Errorf("tools/list never ended")
}

func truncate(b []byte) string {
	if len(b) > 300 {
		return string(b[:300]) + "..."
	}
	return string(b)
}

// shortClient is for requests that must answer at once (notifications,
// DELETE, opening an SSE stream): a gateway that hangs on them fails the
// case instead of hanging the suite.
var shortClient = &http.Client{Timeout: 15 * time.Second}

// httpConn speaks Streamable HTTP.
type httpConn struct {
	url   string
	sid   string
	token string // the bearer token it sends, if any
	mu    sync.Mutex
	other func(stream string, data []byte) // messages on a POST's stream but the answer
}

// post sends body and returns the response. The caller closes its body.
func (c *httpConn) post(ctx context.Context, body []byte, headers ...string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, "POST", c.url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	c.mu.Lock()
	if c.sid != "" {
		req.Header.Set("Mcp-Session-Id", c.sid)
	}
	c.mu.Unlock()
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	return http.DefaultClient.Do(req)
}

func (c *httpConn) roundTrip(ctx context.Context, msg []byte, id string) ([]byte, error) {
	resp, err := c.post(ctx, msg)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if sid := resp.Header.Get("Mcp-Session-Id"); sid != "" {
		c.mu.Lock()
		c.sid = sid
		c.mu.Unlock()
	}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		return readSSEAnswer(resp.Body, id, c.other)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != 200 {
		return nil, fmt.Errorf("HTTP %s: %s", resp.Status, truncate(body))
	}
	body = bytes.TrimSpace(body)
	// An answer under another ID would answer another request (the streams'
	// answers are matched by ID; this one must be checked).
	var m message
	if json.Unmarshal(body, &m) == nil && !sameID(m.ID, id) {
		return nil, fmt.Errorf("answered under id %s, not the id sent, %s: %s", m.ID, id, truncate(body))
	}
	return body, nil
}

func (c *httpConn) notify(msg []byte) error {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	resp, err := c.post(ctx, msg)
	if err != nil {
		return err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return nil
}

func (c *httpConn) close() {
	c.mu.Lock()
	sid := c.sid
	c.mu.Unlock()
	if sid == "" {
		return
	}
	req, _ := http.NewRequest("DELETE", c.url, nil)
	req.Header.Set("Mcp-Session-Id", sid)
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if resp, err := shortClient.Do(req); err == nil {
		resp.Body.Close()
	}
}

// sseEvents reads server-sent events from r, calling f with each event's
// name and data until f returns false or r ends.
func sseEvents(r io.Reader, f func(event, data string) bool) error {
	br := bufio.NewReaderSize(r, 1<<20)
	event, data := "", ""
	for {
		line, err := br.ReadString('\n')
		line = strings.TrimRight(line, "\r\n")
		switch {
		case line == "" && err == nil:
			if data != "" && !f(event, strings.TrimSuffix(data, "\n")) {
				return nil
			}
			event, data = "", ""
		case strings.HasPrefix(line, "event:"):
			event = strings.TrimSpace(line[len("event:"):])
		case strings.HasPrefix(line, "data:"):
			data += strings.TrimPrefix(line[len("data:"):], " ") + "\n"
		}
		if err != nil {
			return err
		}
	}
}

// readSSEAnswer reads an SSE response until the message with raw ID id.
// Every other message on it goes to other, if not nil, in order, before the
// answer is returned.
func readSSEAnswer(r io.Reader, id string, other func(stream string, data []byte)) ([]byte, error) {
	var answer []byte
	err := sseEvents(r, func(_, data string) bool {
		var m message
		if json.Unmarshal([]byte(data), &m) == nil && m.Method == "" && sameID(m.ID, id) {
			answer = []byte(data)
			return false
		}
		if other != nil {
			other("POST", []byte(data))
		}
		return true
	})
	if answer != nil {
		return answer, nil
	}
	if err == nil || err == io.EOF {
		err = fmt.Errorf("the event stream ended without an answer to %s", id)
	}
	return nil, err
}

// sameID reports whether a received raw ID is the one sent, as JSON values.
func sameID(got json.RawMessage, sent string) bool {
	var a, b any
	return json.Unmarshal(got, &a) == nil && json.Unmarshal([]byte(sent), &b) == nil && fmt.Sprint(a) == fmt.Sprint(b) &&
		(len(got) > 0 && len(sent) > 0 && (got[0] == '"') == (sent[0] == '"'))
}

// dispatcher matches answers read from a stream to the requests waiting.
// Other messages (notifications, the server's requests) go to other, if set,
// in the order read.
type dispatcher struct {
	mu      sync.Mutex
	waiting map[string]chan []byte
	err     error
	stream  string // the stream's name, for other
	other   func(stream string, data []byte)
}

func (d *dispatcher) setOther(f func(stream string, data []byte)) {
	d.mu.Lock()
	d.other = f
	d.mu.Unlock()
}

func (d *dispatcher) wait(id string) chan []byte {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.waiting == nil {
		d.waiting = map[string]chan []byte{}
	}
	c := make(chan []byte, 1)
	d.waiting[canonicalID(id)] = c
	return c
}

func (d *dispatcher) deliver(data []byte) {
	var m message
	if json.Unmarshal(data, &m) != nil {
		return
	}
	if m.Method != "" {
		d.mu.Lock()
		other, stream := d.other, d.stream
		d.mu.Unlock()
		if other != nil {
			other(stream, data)
		}
		return
	}
	if m.ID == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	key := canonicalID(string(m.ID))
	if c, ok := d.waiting[key]; ok {
		c <- data
		delete(d.waiting, key)
	}
}

// fail ends every wait with err.
func (d *dispatcher) fail(err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.err = err
	for id, c := range d.waiting {
		close(c)
		delete(d.waiting, id)
	}
}

func (d *dispatcher) await(ctx context.Context, c chan []byte) ([]byte, error) {
	select {
	case b, ok := <-c:
		if !ok {
			d.mu.Lock()
			defer d.mu.Unlock()
			return nil, d.err
		}
		return b, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func canonicalID(raw string) string {
	var v any
	if json.Unmarshal([]byte(raw), &v) != nil {
		return raw
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// sseConn speaks the legacy HTTP+SSE transport (2024-11-05).
type sseConn struct {
	endpoint string
	body     io.Closer
	cancel   context.CancelFunc
	d        dispatcher
}

func dialSSE(url string, other func(stream string, data []byte)) (*sseConn, error) {
	// The stream lives as long as the connection; close cancels it.
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	req.Header.Set("Accept", "text/event-stream")
	headers := time.AfterFunc(15*time.Second, cancel) // a gateway that never answers
	resp, err := http.DefaultClient.Do(req)
	headers.Stop()
	if err != nil {
		cancel()
		return nil, err
	}
	if resp.StatusCode != 200 {
		resp.Body.Close()
		cancel()
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	c := &sseConn{body: resp.Body, cancel: cancel, d: dispatcher{stream: "SSE", other: other}}
	endpoint := make(chan string, 1)
	go func() {
		err := sseEvents(resp.Body, func(event, data string) bool {
			if event == "endpoint" {
				endpoint <- data
				return true
			}
			c.d.deliver([]byte(data))
			return true
		})
		c.d.fail(fmt.Errorf("the event stream ended: %v", err))
	}()
	select {
	case e := <-endpoint:
		u, err := resp.Request.URL.Parse(e)
		if err != nil {
			c.close()
			return nil, err
		}
		c.endpoint = u.String()
		return c, nil
	case <-time.After(15 * time.Second):
		c.close()
		return nil, fmt.Errorf("no endpoint event from %s", url)
	}
}

func (c *sseConn) roundTrip(ctx context.Context, msg []byte, id string) ([]byte, error) {
	wait := c.d.wait(id)
	if err := c.notify(msg); err != nil {
		return nil, err
	}
	return c.d.await(ctx, wait)
}

func (c *sseConn) notify(msg []byte) error {
	resp, err := shortClient.Post(c.endpoint, "application/json", bytes.NewReader(msg))
	if err != nil {
		return err
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("POST: %s: %s", resp.Status, truncate(body))
	}
	return nil
}

func (c *sseConn) close() { c.cancel(); c.body.Close() }

// stdioConn speaks MCP over the gateway's own stdin and stdout.
type stdioConn struct {
	mu sync.Mutex
	w  io.Writer
	d  *dispatcher
}

func (c *stdioConn) roundTrip(ctx context.Context, msg []byte, id string) ([]byte, error) {
	wait := c.d.wait(id)
	if err := c.notify(msg); err != nil {
		return nil, err
	}
	return c.d.await(ctx, wait)
}

func (c *stdioConn) notify(msg []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, err := c.w.Write(append(append([]byte(nil), msg...), '\n'))
	return err
}

func (c *stdioConn) close() {}

// --- what a session receives besides its answers ---

// received is a notification or a request of the server's that a session
// received, with the stream it came on: "POST" (the event stream of the
// response to one of the session's requests), "GET" (the session's own
// stream of Streamable HTTP), "SSE" (the one stream of the SSE transport) or
// "stdout" (the gateway's, with the stdio transport).
type received struct {
	stream string
	data   []byte
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

// inbox collects, in the order they arrive, the messages a session receives
// that are not the answers it waits for.
type inbox struct {
	mu   sync.Mutex
	msgs []received
	more chan struct{} // closed at each arrival, then replaced
}

func newInbox() *inbox { return &inbox{more: make(chan struct{})} }

func (b *inbox) add(stream string, data []byte) {
	r := received{stream: stream, data: append([]byte(nil), data...)}
	if json.Unmarshal(data, &r) != nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.msgs = append(b.msgs, r)
	close(b.more)
	b.more = make(chan struct{})
}

// all returns what has arrived so far.
func (b *inbox) all() []received {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]received(nil), b.msgs...)
}

// await waits until cond holds for what has arrived, or ctx ends, and
// returns what has arrived and whether cond holds.
func (b *inbox) await(ctx context.Context, cond func([]received) bool) ([]received, bool) {
	for {
		b.mu.Lock()
		msgs, more := append([]received(nil), b.msgs...), b.more
		b.mu.Unlock()
		if cond(msgs) {
			return msgs, true
		}
		select {
		case <-more:
		case <-ctx.Done():
			return msgs, false
		}
	}
}

// listen opens the session's own event stream (the GET stream of
// Streamable HTTP), whose messages go to the session's inbox until the test
// ends. A gateway need not offer one (it may answer 405); then listen says
// so in the log and returns. With the other transports every message comes
// on the session's one stream already.
func (s *session) listen(t *testing.T) {
	c, ok := s.conn.(*httpConn)
	if !ok {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", c.url, nil)
	req.Header.Set("Accept", "text/event-stream")
	c.mu.Lock()
	req.Header.Set("Mcp-Session-Id", c.sid)
	c.mu.Unlock()
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	headers := time.AfterFunc(15*time.Second, cancel) // a gateway that never answers
	resp, err := http.DefaultClient.Do(req)
	headers.Stop()
	if err != nil {
		cancel()
		t.Logf("the session's GET stream: %v", err)
		return
	}
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 300))
		resp.Body.Close()
		cancel()
		t.Logf("the gateway offers no GET stream: %s %s", resp.Status, body)
		return
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		sseEvents(resp.Body, func(_, data string) bool {
			s.in.add("GET", []byte(data))
			return true
		})
	}()
	t.Cleanup(func() {
		cancel()
		resp.Body.Close()
		<-done
	})
}

// send sends the session a message that is not a request (a notification,
// or an answer to a request of the server's), and fails if the gateway
// refuses it.
func (s *session) send(msg []byte) error {
	c, ok := s.conn.(*httpConn)
	if !ok {
		return s.conn.notify(msg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	resp, err := c.post(ctx, msg)
	if err != nil {
		return err
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("HTTP %s: %s", resp.Status, truncate(body))
	}
	return nil
}

// randomBytes returns n random bytes, for the tokens the suite makes.
func randomBytes(t *testing.T, n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}
