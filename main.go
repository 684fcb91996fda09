// Command corral is an MCP gateway: it runs the stdio MCP servers listed in a
// JSON config as supervised child processes and serves all their tools to any
// number of MCP clients as one server, over Streamable HTTP or its own stdio.
//
// Usage:
//
//	corral -config FILE [-listen ADDR] [-stdio]
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
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: corral -config FILE [-listen ADDR] [-stdio]\n\n"+
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
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))

	cfg, err := LoadConfig(*configPath, os.LookupEnv, func(msg string) { log.Warn(msg) })
	if err != nil {
		fmt.Fprintf(stderr, "corral: %v\n", err)
		return 2
	}
	if *listen != "" {
		cfg.Listen = *listen
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
	// their marker names an instance that no longer runs.
	for _, l := range killLeftovers() {
		log.Warn("killed a process left by a corral that is no longer running", "pid", l.pid, "server", l.server, "instance", l.instance, "cmdline", l.cmdline)
	}
	reaper, err := newOrphanReaper(log)
	if err != nil {
		log.Warn("cannot become a child subreaper; descendants that leave their server's process group are found by their marker only", "err", err)
	}
	defer reaper.Close()
	gw := NewGateway(cfg, log, reaper)
	gw.logHealth = *stdio
	var ln net.Listener
	if !*stdio {
		// Listen before starting any server, so that a taken port fails fast
		// and leaves nothing behind.
		if ln, err = net.Listen("tcp", cfg.Listen); err != nil {
			fmt.Fprintf(stderr, "corral: listen on %s: %v (set -listen or \"listen\" in %s)\n", cfg.Listen, err, *configPath)
			return 1
		}
	}
	gw.Start()
	defer func() {
		gw.Stop(hurry)
		log.Info("stopped")
	}()

	if *stdio {
		log.Info("serving MCP on stdin/stdout", "servers", len(gw.backends))
		serveStdio(ctx, gw, stdin, stdout, int(cfg.MaxLineBytes), cfg.ShutdownTimeout.D(), log)
		stop()
		return 0
	}
	loopback := false
	if tcp, ok := ln.Addr().(*net.TCPAddr); ok {
		loopback = tcp.IP.IsLoopback()
	}
	log.Info("serving MCP over Streamable HTTP", "url", "http://"+ln.Addr().String()+mcpPath, "servers", len(gw.backends))
	h := newHTTPFrontEnd(gw, cfg, loopback, log)
	if err := serveHTTP(ctx, drainCtx, cfg.ShutdownTimeout.D(), ln, h, log); err != nil {
		log.Error("serving HTTP", "err", err)
		return 1
	}
	return 0
}
