package main

// This file holds what corral says of the containment of its servers: once
// as it starts, and for -check.

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// logContainment says, once as corral starts, whether its servers are
// contained, and why not.
func logContainment(log *slog.Logger, t *cgroupTree) {
	if t.on() {
		log.Info("containment: "+t.describe(), "cgroups", strings.Join(t.roots(), ","))
		return
	}
	log.Info("containment is off: servers run without cgroups; their descendants are found by process group and marker only",
		"why", strings.TrimPrefix(t.describe(), "off: "))
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
