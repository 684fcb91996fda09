// Command corral is an MCP gateway: it runs the stdio MCP servers listed in a
// JSON config as supervised child processes and serves all their tools to any
// number of MCP clients as one server, over Streamable HTTP or its own stdio.
//
// Usage:
//
//	corral -config FILE [-listen ADDR] [-stdio] [-log-format text|json] [-log-level LEVEL]
//	corral -check -config FILE
//
// SIGHUP reloads the config.
//
// Exit codes: 0 after a clean shutdown (SIGINT, SIGTERM, or the end of stdin
// with -stdio); 1 when corral cannot serve (the listen address is taken);
// 2 for a usage or config error.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"
)

// version is corral's version, reported by -version and in serverInfo.
var version = "0.1.0-dev"

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run is corral's main, with its exit code as result.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("corral", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configPath := fs.String("config", "", "the JSON config `file` (required)")
	listen := fs.String("listen", "", "serve Streamable HTTP on `addr`, overriding the config's listen")
	stdio := fs.Bool("stdio", false, "serve one MCP session on stdin/stdout instead of HTTP")
	showVersion := fs.Bool("version", false, "print the version and exit")
	check := fs.Bool("check", false, "check the config: print it resolved, secrets masked, or every error in it; then exit")
	logFormat := fs.String("log-format", "text", "log `format`: text or json")
	logLevel := fs.String("log-level", "info", "least `level` logged: debug, info, warn or error")
	allowRemote := fs.Bool("allow-remote-without-token", false, "listen on an address other than loopback with no bearer token (warned about at every start)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: corral -config FILE [-listen ADDR] [-stdio]\n       corral -check -config FILE\n\n"+
			"corral runs the MCP servers in FILE and serves their tools as one MCP server,\n"+
			"at http://ADDR/mcp (default 127.0.0.1:8931) or, with -stdio, on stdin/stdout.\n\n")
		fs.PrintDefaults()
		fmt.Fprintf(fs.Output(), "\nExit codes: 0 clean shutdown, 1 cannot serve, 2 usage or config error.\n")
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *showVersion {
		fmt.Fprintln(stdout, "corral", version)
		return 0
	}
	if *configPath == "" || fs.NArg() > 0 {
		fs.Usage()
		return 2
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		fmt.Fprintf(stderr, "corral: -log-level %q: want debug, info, warn or error\n", *logLevel)
		return 2
	}
	opts := &slog.HandlerOptions{Level: level}
	var log *slog.Logger
	switch *logFormat {
	case "text":
		log = slog.New(slog.NewTextHandler(stderr, opts))
	case "json":
		log = slog.New(slog.NewJSONHandler(stderr, opts))
	default:
		fmt.Fprintf(stderr, "corral: -log-format %q: want text or json\n", *logFormat)
		return 2
	}

	cfg, err := LoadConfig(*configPath, os.LookupEnv, func(msg string) { log.Warn(msg) })
	if err != nil {
		fmt.Fprintf(stderr, "corral: %v\n", err)
		return 2
	}
	if *listen != "" {
		cfg.Listen = *listen
	}
	for _, w := range secretWarnings(*configPath, cfg) {
		log.Warn(w)
	}
	if *check {
		fmt.Fprintf(stdout, "%s: ok\n", *configPath)
		stdout.Write(cfg.resolved())
		return 0
	}

	// The first SIGINT or SIGTERM starts a graceful shutdown; a second one
	// skips its waits.
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	drainCtx, skipDrain := context.WithCancel(context.Background())
	defer skipDrain()
	hurry := make(chan struct{})
	go func() {
		select {
		case sig := <-sigs:
			log.Info("shutting down", "signal", sig.String(), "drain", cfg.ShutdownTimeout.D())
			stop()
		case <-ctx.Done():
		}
		select {
		case sig := <-sigs:
			log.Warn("second signal: stopping at once", "signal", sig.String())
			skipDrain()
			close(hurry)
		case <-drainCtx.Done():
		}
	}()

	// Processes left by an earlier corral that was killed with SIGKILL:
	// their marker names an instance that no longer runs. What the sweep
	// cannot prove a leftover it leaves, and says so.
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
	reaper, err := newOrphanReaper(log)
	if err != nil {
		log.Warn("cannot become a child subreaper; descendants that leave their server's process group are found by their marker only", "err", err)
	}
	defer reaper.Close()
	gw := NewGateway(cfg, log, reaper)
	gw.logHealth = *stdio
	var ln net.Listener
	loopback := false
	if !*stdio {
		// Listen before starting any server, so that a taken port fails fast
		// and leaves nothing behind.
		if ln, err = net.Listen("tcp", cfg.Listen); err != nil {
			fmt.Fprintf(stderr, "corral: listen on %s: %v (set -listen or \"listen\" in %s)\n", cfg.Listen, err, *configPath)
			return 1
		}
		if tcp, ok := ln.Addr().(*net.TCPAddr); ok {
			loopback = tcp.IP.IsLoopback()
		}
		if !loopback && cfg.token == "" {
			if !*allowRemote {
				ln.Close()
				fmt.Fprintf(stderr, "corral: refusing to listen on %s, which is not a loopback address, with no bearer token: anyone who can reach it could run your MCP servers' tools; set authTokenFile or authTokenEnv in %s, or pass -allow-remote-without-token\n", ln.Addr(), *configPath)
				return 2
			}
			log.Warn("listening on a non-loopback address with no bearer token: anyone who can reach it can call every tool", "addr", ln.Addr().String())
		}
	}
	gw.Start()
	defer func() {
		gw.Stop(hurry)
		log.Info("stopped")
	}()

	// SIGHUP reloads the config; one with errors changes nothing.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	reloadDone := make(chan struct{})
	defer func() { stop(); <-reloadDone }() // stop ends the reload loop on every return path
	go func() {
		defer close(reloadDone)
		for {
			select {
			case <-hup:
			case <-ctx.Done():
				return
			}
			next, err := LoadConfig(*configPath, os.LookupEnv, func(msg string) { log.Warn(msg) })
			if err != nil {
				log.Error("reload: the config has errors; the running config stays in force", "err", err)
				continue
			}
			if *listen != "" {
				next.Listen = *listen
			}
			r := gw.Reload(next)
			log.Info("reloaded", "added", r.Added, "removed", r.Removed, "changed", r.Changed, "kept", r.Kept)
			for _, s := range r.NeedRestart {
				log.Warn("reload: this setting takes effect only when corral restarts", "setting", s)
			}
		}
	}()

	if *stdio {
		log.Info("serving MCP on stdin/stdout", "servers", len(gw.backendList()))
		serveStdio(ctx, gw, stdin, stdout, int(cfg.MaxLineBytes), cfg.ShutdownTimeout.D(), log)
		stop()
		return 0
	}

	log.Info("serving MCP over Streamable HTTP", "url", "http://"+ln.Addr().String()+mcpPath, "servers", len(gw.backendList()))
	h := newHTTPFrontEnd(gw, loopback, log)
	if err := serveHTTP(ctx, drainCtx, cfg.ShutdownTimeout.D(), ln, h, log); err != nil {
		log.Error("serving HTTP", "err", err)
		return 1
	}
	return 0
}
