// Command corral is an MCP gateway: it runs the stdio MCP servers listed in a
// JSON config as supervised child processes and serves all their tools to any
// number of MCP clients as one server, over Streamable HTTP or its own stdio.
//
// Usage:
//
//	corral -config FILE [-listen ADDR] [-stdio [-status-listen ADDR]] [-log-format text|json] [-log-level LEVEL]
//	corral -check -config FILE
//	corral -client-config CLIENT -config FILE
//
// SIGHUP reloads the config.
//
// Exit codes: 0 after a clean shutdown (SIGINT, SIGTERM, or the end of stdin
// with -stdio); 1 when corral cannot serve (the listen address is taken);
// 2 for a usage or config error.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == shimArg {
		os.Exit(runShim(argOrEmpty(2)))
	}
	stopProfile := startCPUProfile()
	code := run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stopProfile()
	os.Exit(code)
}

// run is corral's main, with its exit code as result.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	inv := &invocation{stdout: stdout, stderr: stderr}
	if code, exit := inv.parseFlags(args); exit {
		return code
	}
	if code, exit := inv.setUpLog(); exit {
		return code
	}
	if code, exit := inv.loadConfig(); exit {
		return code
	}
	return inv.serve(stdin)
}

// invocation is one run of corral: its flags, where it writes, and, once
// they are set up, its log and its config. Its steps run in order, on one
// goroutine.
type invocation struct {
	configPath, listen, logFormat, logLevel string
	statusListen                            string // -status-listen: the status page's address beside -stdio
	stdio, showVersion, check, allowRemote  bool
	clientName                              string // -client-config
	profile                                 string // -profile: with -stdio, the profile served
	acceptPins                              string // -accept-pins: changed tool definitions to accept

	stdout, stderr io.Writer
	log            *slog.Logger
	cfg            *Config

	// remote is the address of corral's listener when it is not a loopback
	// address, and "" otherwise (or with -stdio). It is set before reloads
	// start, and read by them: a reload cannot take the token away from it.
	remote string
}

// parseFlags parses args into inv, and reports whether corral is done
// (usage, -version, or a usage error), with its exit code.
func (inv *invocation) parseFlags(args []string) (code int, exit bool) {
	fs := flag.NewFlagSet("corral", flag.ContinueOnError)
	fs.SetOutput(inv.stderr)
	fs.StringVar(&inv.configPath, "config", "", "the JSON config `file` (required)")
	fs.StringVar(&inv.listen, "listen", "", "serve Streamable HTTP on `addr`, overriding the config's listen")
	fs.BoolVar(&inv.stdio, "stdio", false, "serve one MCP session on stdin/stdout instead of HTTP")
	fs.StringVar(&inv.profile, "profile", "", "with -stdio, serve only what the config's profile `name` shows")
	fs.StringVar(&inv.statusListen, "status-listen", "", "with -stdio, also serve the status page and /healthz at http://`addr`/, a loopback address (127.0.0.1:0 picks a free port; the URL is logged)")
	fs.BoolVar(&inv.showVersion, "version", false, "print the version and exit")
	fs.BoolVar(&inv.check, "check", false, "check the config: print it resolved, secrets masked, or every error in it; then exit")
	fs.StringVar(&inv.logFormat, "log-format", "text", "log `format`: text or json")
	fs.StringVar(&inv.logLevel, "log-level", "info", "least `level` logged: debug, info, warn or error")
	fs.StringVar(&inv.clientName, "client-config", "", "print the entry an MCP `client` needs to use corral with this config ("+strings.Join(clientNames(), ", ")+"), then exit")
	fs.StringVar(&inv.acceptPins, "accept-pins", "", "accept the changed definitions of these tools of servers with \"pin\" set, and pin them: a comma-separated `list` of SERVER (every tool it lists first) or SERVER/TOOL")
	fs.BoolVar(&inv.allowRemote, "allow-remote-without-token", false, "listen on an address other than loopback with no bearer token (warned about at every start and reload)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: corral -config FILE [-listen ADDR] [-stdio]\n       corral -check -config FILE\n       corral -client-config CLIENT -config FILE\n\n"+
			"corral runs the MCP servers in FILE and serves their tools as one MCP server,\n"+
			"at http://ADDR/mcp (default 127.0.0.1:8931) or, with -stdio, on stdin/stdout.\n\n")
		fs.PrintDefaults()
		fmt.Fprintf(fs.Output(), "\nExit codes: 0 clean shutdown, 1 cannot serve, 2 usage or config error.\n")
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0, true
		}
		return 2, true
	}
	if inv.showVersion {
		fmt.Fprintln(inv.stdout, "corral", version)
		return 0, true
	}
	if inv.configPath == "" || fs.NArg() > 0 {
		fs.Usage()
		return 2, true
	}
	if inv.clientName != "" && !slices.Contains(clientNames(), inv.clientName) {
		fmt.Fprintf(inv.stderr, "corral: -client-config %q: unknown client; write one of %s\n", inv.clientName, strings.Join(clientNames(), ", "))
		return 2, true
	}
	if inv.profile != "" && !inv.stdio {
		fmt.Fprintf(inv.stderr, "corral: -profile needs -stdio; over HTTP, a profile is served at %s/NAME, or a client's token names its profile\n", mcpPath)
		return 2, true
	}
	if inv.listen != "" {
		if err := checkListen(inv.listen); err != nil {
			fmt.Fprintf(inv.stderr, "corral: -listen: %v\n", err)
			return 2, true
		}
	}
	if inv.statusListen != "" {
		if !inv.stdio {
			fmt.Fprintf(inv.stderr, "corral: -status-listen is for -stdio; without it, the status page is served at / of the -listen address\n")
			return 2, true
		}
		if err := checkListen(inv.statusListen); err != nil {
			fmt.Fprintf(inv.stderr, "corral: -status-listen: %v\n", err)
			return 2, true
		}
	}
	return 0, false
}

// setUpLog sets inv.log from -log-format and -log-level, and reports whether
// corral must exit because one of them is wrong, with its exit code.
func (inv *invocation) setUpLog() (code int, exit bool) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(inv.logLevel)); err != nil {
		fmt.Fprintf(inv.stderr, "corral: -log-level %q: want debug, info, warn or error\n", inv.logLevel)
		return 2, true
	}
	opts := &slog.HandlerOptions{Level: level}
	switch inv.logFormat {
	case "text":
		inv.log = slog.New(slog.NewTextHandler(inv.stderr, opts))
	case "json":
		inv.log = slog.New(slog.NewJSONHandler(inv.stderr, opts))
	default:
		fmt.Fprintf(inv.stderr, "corral: -log-format %q: want text or json\n", inv.logFormat)
		return 2, true
	}
	return 0, false
}

// loadConfig sets inv.cfg from the config file, warns of secrets other users
// can read, and reports whether corral is done: the config has errors, or
// -check has printed it. Its exit code comes with it.
func (inv *invocation) loadConfig() (code int, exit bool) {
	cfg, err := inv.readConfig()
	if err != nil {
		fmt.Fprintf(inv.stderr, "corral: %v\n", err)
		if pe := (*parseErrors)(nil); inv.check && errors.As(err, &pe) {
			fmt.Fprintln(inv.stdout, pe.summary())
		}
		return 2, true
	}
	inv.cfg = cfg
	for _, w := range secretWarnings(inv.configPath, cfg) {
		inv.log.Warn(w)
	}
	if inv.clientName != "" {
		return inv.printClientConfig(), true
	}
	if inv.check {
		return inv.checkConfig(), true
	}
	if inv.profile != "" && cfg.Profiles[inv.profile] == nil {
		fmt.Fprintf(inv.stderr, "corral: -profile %q: %s has no such profile; its profiles are %q\n", inv.profile, inv.configPath, profileNames(cfg))
		return 2, true
	}
	for _, a := range strings.Split(inv.acceptPins, ",") {
		server, _, _ := strings.Cut(a, "/")
		if inv.acceptPins == "" {
			break
		}
		if s := cfg.MCPServers[server]; s == nil || s.Pin == pinOff {
			fmt.Fprintf(inv.stderr, "corral: -accept-pins %q: %s has no server %q with \"pin\" set; name a server whose entry sets \"pin\" (SERVER or SERVER/TOOL)\n", a, inv.configPath, server)
			return 2, true
		}
	}
	if name := selfServer(cfg); name != "" {
		fmt.Fprintf(inv.stderr, "corral: %s: mcpServers.%s: this server is corral itself, and this corral already runs as server %q of another corral: running it would start corral inside corral without end; remove %q from %s (it is how an MCP client reaches corral, not a server for corral to run), or give corral a config of its own\n",
			inv.configPath, quoteName(name), name, name, inv.configPath)
		return 2, true
	}
	return 0, false
}

// printClientConfig is -client-config: it prints the entry the client
// needs to run corral, this binary, with the config, both by absolute path.
func (inv *invocation) printClientConfig() int {
	exe, err := os.Executable()
	if err == nil {
		exe, err = filepath.EvalSymlinks(exe)
	}
	if err != nil {
		fmt.Fprintf(inv.stderr, "corral: -client-config: cannot tell where this binary is: %v\n", err)
		return 1
	}
	config, err := filepath.Abs(inv.configPath)
	if err != nil {
		fmt.Fprintf(inv.stderr, "corral: -client-config: %v\n", err)
		return 1
	}
	if strings.Contains(exe, string(filepath.Separator)+"go-build") {
		fmt.Fprintf(inv.stderr, "corral: -client-config: this binary, %s, is a temporary build of go run, removed when it exits; build corral (go build -o ~/bin/corral .) and run -client-config with that binary\n", exe)
	}
	out, err := clientConfig(inv.clientName, exe, config, inv.cfg, os.Getenv("PATH"))
	if err != nil {
		fmt.Fprintf(inv.stderr, "corral: %v\n", err)
		return 2
	}
	io.WriteString(inv.stdout, out)
	return 0
}

// checkConfig is -check once the config has parsed: it writes to stderr
// what would keep a server from running, without starting anything (see
// checkRunnable and checkContainment), and to stdout the config resolved,
// what this machine enforces of it, and a summary line. It returns the exit
// code: 2 if any server cannot run.
func (inv *invocation) checkConfig() int {
	cfg := inv.cfg
	failed := map[string]bool{}
	for _, e := range checkRunnable(cfg, inv.stdio) {
		fmt.Fprintf(inv.stderr, "corral: %s\n", cfg.errorLine(e))
		failed[e.server] = true
	}
	var containment bytes.Buffer
	for _, name := range checkContainment(inv.configPath, cfg, &containment, inv.stderr) {
		failed[name] = true
	}
	verdict := "ok"
	if len(failed) > 0 {
		verdict = "cannot run as it is: see the errors"
	}
	fmt.Fprintf(inv.stdout, "%s: %s\n", inv.configPath, verdict)
	inv.stdout.Write(cfg.resolved())
	inv.stdout.Write(sandboxReport(cfg, probeSandboxHost(cfg.asksNetworkSandbox())))
	inv.stdout.Write(cfg.profilesReport(cachedItems(cfg)))
	inv.stdout.Write(overridesReport(cfg, cachedTools(cfg)))
	inv.stdout.Write(pinsReport(cfg))
	inv.stdout.Write(cfg.oauthReport())
	inv.stdout.Write(invalidToolsReport(cfg))
	inv.stdout.Write(toolCostsReport(cachedToolCosts(cfg, cachedTools(cfg))))
	inv.stdout.Write(containment.Bytes())
	fmt.Fprintln(inv.stdout, checkSummary(cfg, failed))
	if len(failed) > 0 {
		return 2
	}
	return 0
}

// selfServer returns the name of the server of cfg that is this very corral
// again, or "": this corral runs as server NAME of another corral (whose
// marker is in its environment, see markerEnv), and cfg's server NAME runs
// corral's own executable. That is a config listing corral itself, as a
// desktop client's file does, used as corral's config: each corral would
// start the next.
func selfServer(cfg *Config) string {
	name, ok := os.LookupEnv(envServer)
	if !ok || os.Getenv(envInstance) == "" {
		return ""
	}
	s := cfg.MCPServers[name]
	if s == nil || s.Disabled || s.URL != "" {
		return ""
	}
	pathList := os.Getenv("PATH")
	if p, ok := s.Env["PATH"]; ok {
		pathList = p
	}
	dir := s.Cwd
	if dir != "" && !filepath.IsAbs(dir) {
		dir = filepath.Join(filepath.Dir(cfg.file), dir)
	}
	self, err1 := os.Executable()
	path, err2 := findProgram(s.Command, pathList, dir) // as the server is started
	if err1 != nil || err2 != nil {
		return ""
	}
	a, err1 := os.Stat(self)
	b, err2 := os.Stat(path)
	if err1 != nil || err2 != nil || !os.SameFile(a, b) {
		return ""
	}
	return name
}

// readConfig reads the config file, with -listen in force over its listen.
// It is safe for concurrent use once setUpLog has run.
func (inv *invocation) readConfig() (*Config, error) {
	cfg, err := LoadConfig(inv.configPath, os.LookupEnv, func(msg string) { inv.log.Warn(msg) })
	if err != nil {
		return nil, err
	}
	if inv.listen != "" {
		cfg.Listen = inv.listen
	}
	if inv.stdio && cfg.Audit.File == auditStdout {
		return nil, fmt.Errorf(`%s: audit.file: "-" writes the audit trail to stdout, which -stdio uses as the MCP channel; name a file, such as "/var/log/corral/audit.jsonl", or serve over HTTP`, inv.configPath)
	}
	return cfg, nil
}

// serve runs the gateway with its front end until the client or a signal
// ends it, and returns corral's exit code. When it returns, every server has
// been stopped and every goroutine it started has returned, but for the
// stdio front end's reader of stdin (see serveStdio).
func (inv *invocation) serve(stdin io.Reader) int {
	cfg, log := inv.cfg, inv.log
	sh := watchSignals(log, cfg.ShutdownTimeout.D())
	defer sh.close()
	sweepLeftovers(log)
	sweepLeftoverCgroups(log, os.Getenv(envInstance))
	reaper, err := newOrphanReaper(log)
	if err != nil {
		log.Warn("cannot become a child subreaper; descendants that leave their server's process group are found by their marker only", "err", err)
	}
	defer reaper.Close()
	gw := NewGateway(cfg, log, reaper)
	if inv.acceptPins != "" {
		gw.pins.acceptChanges(strings.Split(inv.acceptPins, ","))
	}
	gw.logHealth = inv.stdio
	// One client, which servers that ask for roots at their start wait for.
	gw.serverRequests.holdForClient = inv.stdio
	var ln net.Listener
	loopback := false
	if inv.statusListen != "" {
		// Before any server starts, as the HTTP listener below.
		var code int
		if ln, code = inv.openStatusListener(); ln == nil {
			return code
		}
		defer ln.Close() // if corral returns before serving it
	}
	if !inv.stdio {
		// Listen before starting any server, so that a taken port fails fast
		// and leaves nothing behind.
		var code int
		if ln, loopback, code = inv.openListener(); ln == nil {
			return code
		}
		if !loopback {
			inv.remote = shownAddr(cfg.Listen, ln.Addr())
		}
	}
	gw.Start()
	defer func() {
		gw.Stop(sh.hurry)
		log.Info("stopped")
	}()
	reloadsDone := inv.reloadOnHUP(sh.ctx, gw)
	defer func() { sh.stop(); <-reloadsDone }() // stop ends the reload loop on every return path

	if inv.stdio {
		if ln != nil {
			stop := serveStatusOnly(ln, gw, cfg, log)
			defer stop()
		}
		log.Info("serving MCP on stdin/stdout", "servers", len(gw.backendList()))
		who := stdioPrincipal
		if inv.profile != "" {
			who = profilePrincipal(who, inv.profile)
		}
		serveStdio(sh.ctx, gw, who, stdin, inv.stdout, int(cfg.MaxLineBytes), cfg.ShutdownTimeout.D(), log)
		sh.stop()
		return 0
	}
	log.Info("serving MCP over Streamable HTTP", "url", "http://"+ln.Addr().String()+mcpPath, "servers", len(gw.backendList()))
	h := newHTTPFrontEnd(gw, loopback, log)
	if err := serveHTTP(sh.ctx, sh.drainCtx, cfg.ShutdownTimeout.D(), ln, h, log); err != nil {
		log.Error("serving HTTP", "err", err)
		return 1
	}
	return 0
}

// shutdown is how signals end a run. The first SIGINT or SIGTERM ends ctx:
// a graceful shutdown starts. A second one also ends drainCtx and closes
// hurry: the shutdown skips its waits. A run that ends with no signal (with
// -stdio, the end of stdin) counts as the first: only the second signal
// after it hurries.
type shutdown struct {
	ctx       context.Context
	stop      context.CancelFunc
	drainCtx  context.Context
	skipDrain context.CancelFunc
	hurry     chan struct{}

	sigs chan os.Signal
	done chan struct{} // closed when the watching goroutine returns
}

// watchSignals starts watching for SIGINT and SIGTERM, until close. Drain,
// the shutdown timeout, is only logged.
func watchSignals(log *slog.Logger, drain time.Duration) *shutdown {
	sh := &shutdown{sigs: make(chan os.Signal, 2), hurry: make(chan struct{}), done: make(chan struct{})}
	signal.Notify(sh.sigs, syscall.SIGINT, syscall.SIGTERM)
	sh.ctx, sh.stop = context.WithCancel(context.Background())
	sh.drainCtx, sh.skipDrain = context.WithCancel(context.Background())
	go func() {
		defer close(sh.done)
		select {
		case sig := <-sh.sigs:
			log.Info("shutting down", "signal", sig.String(), "drain", drain)
			sh.stop()
		case <-sh.ctx.Done():
			// The run ended with no signal: with -stdio, the client closed
			// stdin, which is its first request to stop. A signal after it
			// (clients send SIGTERM once stdin is closed) asks for the same
			// shutdown, not a hurried one; only a signal after that does.
			select {
			case sig := <-sh.sigs:
				log.Info("shutting down already; a further signal stops at once", "signal", sig.String())
			case <-sh.drainCtx.Done():
				return
			}
		}
		select {
		case sig := <-sh.sigs:
			log.Warn("second signal: stopping at once", "signal", sig.String())
			sh.skipDrain()
			close(sh.hurry)
		case <-sh.drainCtx.Done():
		}
	}()
	return sh
}

// close ends both contexts, waits for the watching goroutine to return, and
// then stops the signals going to it. Until then, a third signal is caught
// and ignored, rather than killing corral in the middle of its shutdown.
func (sh *shutdown) close() {
	sh.skipDrain()
	sh.stop()
	<-sh.done
	signal.Stop(sh.sigs)
}

// sweepLeftovers kills the processes left by an earlier corral that was
// killed with SIGKILL: their marker names an instance that no longer runs.
// What the sweep cannot prove a leftover it leaves, and says so.
func sweepLeftovers(log *slog.Logger) {
	left, err := killLeftovers(os.Getenv(envInstance))
	if err != nil {
		log.Warn("not sweeping processes left by earlier corrals", "err", err)
	}
	for _, l := range left {
		if l.killed {
			log.Warn("killed a process left by a corral that is no longer running", "pid", l.pid, "server", l.server, "instance", l.instance, "cmdline", l.cmdline)
		} else {
			log.Warn("left a process marked by another corral: it is not proven a leftover", "pid", l.pid, "why", l.why, "server", l.server, "instance", l.instance, "cmdline", l.cmdline)
		}
	}
}

// openListener listens on the config's address, and reports whether it is a
// loopback address. It refuses an address other than loopback with no bearer
// token, unless -allow-remote-without-token. When it cannot listen, or
// refuses, it returns a nil listener and corral's exit code.
func (inv *invocation) openListener() (ln net.Listener, loopback bool, code int) {
	addr := inv.cfg.Listen
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintf(inv.stderr, "corral: listen on %s: %v (set -listen or \"listen\" in %s)\n", addr, err, inv.configPath)
		return nil, false, 1
	}
	if tcp, ok := ln.Addr().(*net.TCPAddr); ok {
		loopback = tcp.IP.IsLoopback()
	}
	addr = shownAddr(addr, ln.Addr())
	if o := inv.cfg.OAuth; !loopback && o != nil && !o.TLSTerminated {
		ln.Close() // -listen may take a loopback config's listen beyond it
		fmt.Fprintf(inv.stderr, "corral: refusing to listen on %s, which is not a loopback address, with OAuth over plain HTTP: bearer tokens would cross the network readable; put a TLS-terminating proxy in front of corral and set oauth.tlsTerminated in %s, or listen on 127.0.0.1\n", addr, inv.configPath)
		return nil, false, 2
	}
	if !loopback && !inv.cfg.asksForToken() {
		if !inv.allowRemote {
			ln.Close()
			fmt.Fprintf(inv.stderr, "corral: refusing to listen on %s, which is not a loopback address, with no bearer token: %s\n", addr, inv.remoteHint())
			return nil, false, 2
		}
		inv.log.Warn("listening on a non-loopback address with no bearer token: anyone who can reach it can call every tool", "addr", addr)
	}
	return ln, loopback, 0
}

// openStatusListener listens on -status-listen, which must be a loopback
// address: the status page shows the servers' stderr. When it cannot listen,
// or refuses, it returns a nil listener and corral's exit code.
func (inv *invocation) openStatusListener() (net.Listener, int) {
	ln, err := net.Listen("tcp", inv.statusListen)
	if err != nil {
		fmt.Fprintf(inv.stderr, "corral: -status-listen %s: %v\n", inv.statusListen, err)
		return nil, 1
	}
	if tcp, ok := ln.Addr().(*net.TCPAddr); !ok || !tcp.IP.IsLoopback() {
		ln.Close()
		fmt.Fprintf(inv.stderr, "corral: -status-listen %s: not a loopback address; the status page shows the servers' stderr, so corral serves it on a loopback address only, such as 127.0.0.1:0\n", inv.statusListen)
		return nil, 2
	}
	return ln, 0
}

// serveStatusOnly serves the status page and /healthz of gw on ln (see
// statusOnly) until the returned stop is called, which closes ln, ends the
// requests being served and returns once the server has returned. It logs
// the page's URL.
func serveStatusOnly(ln net.Listener, gw *Gateway, cfg *Config, log *slog.Logger) (stop func()) {
	srv := &http.Server{Handler: newStatusOnly(gw, log), ReadHeaderTimeout: cfg.ReadHeaderTimeout.D(),
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.Serve(ln)
	}()
	log.Info("serving the status page", "url", "http://"+ln.Addr().String()+"/")
	return func() {
		srv.Close()
		<-done
	}
}

// shownAddr returns the address a listener on addr, as configured, listens
// on, for messages: addr's host as written (a listener on 0.0.0.0 reports
// [::]) with the port it was given (addr's may be 0).
func shownAddr(addr string, bound net.Addr) string {
	host, _, err1 := net.SplitHostPort(addr)
	_, port, err2 := net.SplitHostPort(bound.String())
	if err1 != nil || err2 != nil {
		return bound.String()
	}
	return net.JoinHostPort(host, port)
}

// remoteHint says why a listener beyond loopback needs a bearer token, and
// the ways to give it one or to do without.
func (inv *invocation) remoteHint() string {
	return fmt.Sprintf("anyone who can reach it could run your MCP servers' tools; set authTokenFile or authTokenEnv in %s, or pass -allow-remote-without-token", inv.configPath)
}

// reloadOnHUP starts the goroutine that reloads the config on each SIGHUP
// until ctx ends, and returns a channel closed when it has returned. A
// config with errors changes nothing.
func (inv *invocation) reloadOnHUP(ctx context.Context, gw *Gateway) <-chan struct{} {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer signal.Stop(hup)
		for {
			select {
			case <-hup:
			case <-ctx.Done():
				return
			}
			inv.reload(gw)
		}
	}()
	return done
}

// reload reads the config file again and applies it to gw, or logs why it
// cannot. As at the start, it refuses a config with no bearer token while
// corral listens beyond loopback, unless -allow-remote-without-token.
func (inv *invocation) reload(gw *Gateway) {
	next, err := inv.readConfig()
	if err != nil {
		inv.log.Error("reload: the config has errors; the running config stays in force", "err", err)
		return
	}
	if o := next.OAuth; inv.remote != "" && o != nil && !o.TLSTerminated {
		inv.log.Error("reload: refused: the config has OAuth over plain HTTP, and corral listens on an address other than loopback; the running config stays in force", "addr", inv.remote, "fix", "put a TLS-terminating proxy in front of corral and set oauth.tlsTerminated")
		return
	}
	if inv.remote != "" && !next.asksForToken() {
		if !inv.allowRemote {
			inv.log.Error("reload: refused: the config has no bearer token, and corral listens on an address other than loopback; the running config stays in force", "addr", inv.remote, "fix", inv.remoteHint())
			return
		}
		inv.log.Warn("reload: no bearer token while listening on a non-loopback address: anyone who can reach it can call every tool", "addr", inv.remote)
	}
	r := gw.Reload(next)
	inv.log.Info("reloaded", "added", r.Added, "removed", r.Removed, "changed", r.Changed, "kept", r.Kept)
	for _, s := range r.NeedRestart {
		inv.log.Warn("reload: this setting takes effect only when corral restarts", "setting", s)
	}
}
