package main

// This file holds what corral says of the containment of its servers: once
// as it starts, and for -check.

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// logContainment says, in one line as corral starts, how its servers are
// contained: in cgroups or not (and why not), whether corral is a child
// subreaper, and how many servers of cfg have a sandbox. Where the cgroups
// are is logged at debug level.
func logContainment(log *slog.Logger, t *cgroupTree, subreaper bool, cfg *Config) {
	attrs := []any{"cgroups", t.summary(), "subreaper", onOff(subreaper), "sandbox", sandboxSummary(cfg)}
	if !t.on() {
		attrs = append(attrs, "why", strings.TrimPrefix(t.describe(), "off: "))
	}
	log.Info("containment", attrs...)
	log.Debug("containment: "+t.describe(), "cgroups", strings.Join(t.roots(), ","))
}

// sandboxSummary says how many servers of cfg, not disabled, have a
// sandbox: "off" for none.
func sandboxSummary(cfg *Config) string {
	n := 0
	for _, s := range cfg.Servers() {
		if cfg.sandbox(s) != nil {
			n++
		}
	}
	switch n {
	case 0:
		return "off"
	case 1:
		return "1 server"
	}
	return fmt.Sprintf("%d servers", n)
}

func onOff(on bool) string {
	if on {
		return "on"
	}
	return "off"
}

// checkContainment writes to stdout, for -check, how corral would contain
// the servers of cfg on this machine, and to stderr an error for each
// server whose limits it could not enforce (such a server would not start).
// It returns the names of those servers.
func checkContainment(file string, cfg *Config, stdout, stderr io.Writer) (failed []string) {
	t := newCgroupTree(newInstanceID())
	fmt.Fprintf(stdout, "containment: %s\n", t.describe())
	for _, s := range cfg.Servers() {
		if err := t.enforceable(cfg.limits(s)); err != nil {
			fmt.Fprintf(stderr, "corral: %s: mcpServers.%s.limits: %v; this server would not start\n", file, quoteName(s.Name()), err)
			failed = append(failed, s.Name())
		}
	}
	return failed
}
