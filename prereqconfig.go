package main

// This file holds a server's prerequisite in the config: its type, and its
// parsing and validation, which report each problem with the server and the
// field (prerequisite.ready.tcp...). prereq.go runs it.

import (
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
)

// Prerequisite is a process a server needs running before it starts, such
// as a local API the server talks to. corral starts it before the server
// and waits until it is ready; see prereq.go for its life.
type Prerequisite struct {
	// Command, Args, Env and Cwd say how to run it, as for a server:
	// Command is required, run directly (never through a shell), found
	// through PATH when it has no slash; Env is added to corral's own
	// environment; a relative Cwd is relative to the config file's
	// directory. If Cwd is empty, corral's.
	Command string            `json:"command"`
	Args    []string          `json:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	Cwd     string            `json:"cwd,omitempty"`

	// Ready says when it is ready. Required.
	Ready PrereqReady `json:"ready"`

	// Managed, if true or missing, makes the prerequisite corral's: it runs
	// in a process group of its own with the same no-orphan guarantees as
	// a server, and stops after its server. If false, corral starts it
	// only when its ready check fails, and leaves it running from the
	// moment it is ready: at the server's stop, at a reload, at corral's
	// exit, even when corral is killed.
	Managed *bool `json:"managed,omitempty"`

	// shown holds, for -check and GET /admin/servers, the fields in which
	// a variable was expanded, as ServerConfig.shown does.
	shown map[string]string
}

// PrereqReady says when a prerequisite is ready: exactly one of TCP and
// Delay is set.
type PrereqReady struct {
	// TCP is a host:port that accepts TCP connections once the
	// prerequisite is ready. It is also how corral sees one already running.
	TCP string `json:"tcp,omitempty"`
	// Delay is how long after its start the prerequisite is taken as ready.
	Delay Duration `json:"delay,omitempty"`
}

// managed reports whether corral owns the prerequisite (Managed, if set).
func (p *Prerequisite) managed() bool { return p.Managed == nil || *p.Managed }

// masked returns the prerequisite as -check prints it: env values, and the
// value of every variable expanded in the other fields, as "****". It is
// nil for a nil p.
func (p *Prerequisite) masked() *Prerequisite {
	if p == nil {
		return nil
	}
	r := *p
	if len(p.Env) > 0 {
		r.Env = map[string]string{}
		for k := range p.Env {
			r.Env[k] = secretMask
		}
	}
	shown := func(field, value string) string {
		if v, ok := p.shown[field]; ok {
			return v
		}
		return value
	}
	r.Command, r.Cwd = shown("command", p.Command), shown("cwd", p.Cwd)
	if len(p.Args) > 0 {
		r.Args = make([]string, len(p.Args))
		for i, a := range p.Args {
			r.Args[i] = shown(fmt.Sprintf("args[%d]", i), a)
		}
	}
	return &r
}

// decodePrereq decodes data, the value of a server's "prerequisite" key,
// into s, and reports wrong types and unknown keys, field by field. The
// rest is checked by checkPrereq, for a server that is not disabled.
func (p *parser) decodePrereq(s *ServerConfig, data json.RawMessage) {
	const example = `{"command": "...", "ready": {"tcp": "127.0.0.1:5432"}}`
	entry := p.decodeObject(s.name, "prerequisite", data, example)
	if entry == nil {
		return
	}
	pre := &Prerequisite{}
	s.Prerequisite = pre
	for _, key := range slices.Sorted(maps.Keys(entry)) {
		field := "prerequisite." + key
		switch key {
		case "command", "cwd":
			ptr := &pre.Command
			if key == "cwd" {
				ptr = &pre.Cwd
			}
			p.decode(s.name, field, entry[key], ptr)
		case "args":
			p.decode(s.name, field, entry[key], &pre.Args)
		case "env":
			p.decode(s.name, field, entry[key], &pre.Env)
			p.refuseNullEnv(s.name, entry[key])
		case "managed":
			var managed bool
			p.decode(s.name, field, entry[key], &managed)
			pre.Managed = &managed
		case "ready":
			p.decodeReady(s.name, &pre.Ready, entry[key])
		default:
			p.unknownKey(s.name, "prerequisite", key, []string{"args", "command", "cwd", "env", "managed", "ready"})
		}
	}
}

// decodeReady decodes data, the value of a prerequisite's "ready" key.
func (p *parser) decodeReady(server string, r *PrereqReady, data json.RawMessage) {
	entry := p.decodeObject(server, "prerequisite.ready", data, `{"tcp": "127.0.0.1:5432"} or {"delay": "2s"}`)
	for _, key := range slices.Sorted(maps.Keys(entry)) {
		switch key {
		case "tcp":
			p.decode(server, "prerequisite.ready.tcp", entry[key], &r.TCP)
		case "delay":
			p.decode(server, "prerequisite.ready.delay", entry[key], &r.Delay)
		default:
			p.unknownKey(server, "prerequisite.ready", key, []string{"delay", "tcp"})
		}
	}
}

// decodeObject returns the members of data, the value of field of server,
// or reports that it is not an object (like example) and returns nil.
func (p *parser) decodeObject(server, field string, data json.RawMessage, example string) map[string]json.RawMessage {
	var entry map[string]json.RawMessage
	if err := json.Unmarshal(data, &entry); err != nil || entry == nil {
		p.errorf(server, field, "want an object such as %s, got %s", example, jsonKind(data))
		return nil
	}
	return entry
}

// unknownKey reports key, in the object at field of server, as unknown,
// with the nearest of known where it is a likely typo.
func (p *parser) unknownKey(server, field, key string, known []string) {
	if near, ok := nearest(key, known); ok {
		p.errorf(server, field, "unknown field %q; did you mean %q?", key, near)
		return
	}
	p.errorf(server, field, "unknown field %q; known fields are %s", key, quoteList(known))
}

// checkPrereq expands the variables of s's prerequisite, if it has one, and
// checks it: a command, an env whose names are names, and exactly one ready
// check, a tcp one if corral does not manage it.
func (p *parser) checkPrereq(s *ServerConfig) {
	pre := s.Prerequisite
	if pre == nil {
		return
	}
	name := s.name
	p.expandPrereq(s, "command", "command", &pre.Command)
	if pre.Command == "" {
		p.errorf(name, "prerequisite.command", `required (the program to run before the server, e.g. "postgres")`)
	}
	for i := range pre.Args {
		field := fmt.Sprintf("args[%d]", i)
		p.expandPrereq(s, field, field, &pre.Args[i])
	}
	for _, key := range slices.Sorted(maps.Keys(pre.Env)) {
		if key == "" || strings.Contains(key, "=") {
			p.errorf(name, "prerequisite.env", "invalid variable name %q; a name must be non-empty and must not contain '='", key)
			continue
		}
		v := pre.Env[key]
		p.expandPrereq(s, "env."+key, "env."+key, &v)
		pre.Env[key] = v
	}
	p.expandPrereq(s, "cwd", "cwd", &pre.Cwd)
	p.checkReady(name, pre)
}

// expandPrereq expands the references in value, the prerequisite's field,
// resolved as in the server's field of the same kind (lookupField: so
// ${file:PATH} only in env values), and records how -check shows it.
func (p *parser) expandPrereq(s *ServerConfig, field, lookupField string, value *string) {
	v, err := expandRefs(*value, p.lookup(lookupField))
	if err != nil {
		p.errorf(s.name, "prerequisite."+field, "%v", err)
		return
	}
	if strings.Contains(*value, "${") {
		pre := s.Prerequisite
		if pre.shown == nil {
			pre.shown = map[string]string{}
		}
		pre.shown[field], _ = expandRefs(*value, p.shownLookup)
	}
	*value = v
}

// checkReady checks the prerequisite's ready check.
func (p *parser) checkReady(name string, pre *Prerequisite) {
	r := pre.Ready
	switch {
	case r.TCP == "" && r.Delay == 0:
		p.errorf(name, "prerequisite.ready", `required: {"tcp": "host:port"} to wait until it accepts connections, or {"delay": "2s"} to wait that long`)
	case r.TCP != "" && r.Delay != 0:
		p.errorf(name, "prerequisite.ready", `set "tcp" or "delay", not both`)
	case r.Delay < 0:
		p.errorf(name, "prerequisite.ready.delay", "must be positive, got %v; use a duration such as \"2s\"", r.Delay.D())
	case r.TCP != "":
		host, port, err := net.SplitHostPort(r.TCP)
		n, perr := strconv.Atoi(port)
		switch {
		case err != nil:
			p.errorf(name, "prerequisite.ready.tcp", "invalid address %q: %v; write host:port, e.g. \"127.0.0.1:5432\"", r.TCP, err)
		case host == "" || perr != nil || n < 1 || n > 65535:
			p.errorf(name, "prerequisite.ready.tcp", "invalid address %q; write a host and a port number, e.g. \"127.0.0.1:5432\"", r.TCP)
		}
	case !pre.managed():
		p.errorf(name, "prerequisite.ready", `an unmanaged prerequisite ("managed": false) needs a "tcp" check: with "delay" alone, corral cannot see it already running, and would start another one at every start of the server`)
	}
}
