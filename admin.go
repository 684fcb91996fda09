package main

// This file holds runtime registration: the "admin" settings, the servers
// registered through the admin API (adminhttp.go) and how they join and
// leave the running config. A registered server is a server like any other
// once added: it runs through Gateway.Reload's machinery, so that adding
// and removing one starts and stops it as a reload does, and clients hear
// of its tools by list_changed. Registered servers are kept in memory only:
// they survive a reload (SIGHUP), not a restart of corral.

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"slices"
	"sync"
)

// parseRegistration parses body, a POST to /admin/servers: a server entry,
// as in mcpServers, with its "name". It is validated exactly as the config
// file's entries are, by the same parser (relative paths from the config
// file's directory, variables from corral's environment); the error holds
// every problem, one per line, as the config file's would.
func parseRegistration(cfg *Config, body []byte) (*ServerConfig, error) {
	var entry map[string]json.RawMessage
	if err := json.Unmarshal(body, &entry); err != nil || entry == nil {
		return nil, fmt.Errorf(`want a JSON object: a server entry, as in mcpServers, with its "name", e.g. {"name": "echo", "command": "npx", "args": ["-y", "..."]}`)
	}
	var name string
	if raw, ok := entry["name"]; !ok || json.Unmarshal(raw, &name) != nil || name == "" {
		return nil, errors.New(`"name": required, a string: the server's name, as its key in mcpServers would be`)
	}
	delete(entry, "name")
	data, _ := json.Marshal(entry)
	p := &parser{getenv: os.LookupEnv, path: cfg.file}
	s := p.parseServer(name, data)
	if s.Disabled && len(p.errs) == 0 {
		p.errorf(name, "disabled", "a registered server cannot be disabled; register it when it should run")
	}
	if len(p.errs) > 0 {
		return nil, p.err("POST " + adminServersPath)
	}
	return s, nil
}

// registry holds the servers registered at runtime, by name. Its zero value
// is empty and ready to use; its methods are safe for concurrent use.
//
// Lock order: mu is a leaf. What changes the set is done under the
// gateway's reloadMu, so that the set and the running config agree.
type registry struct {
	mu      sync.Mutex
	servers map[string]*ServerConfig
}

// add registers s, unless cfg, the config in force, or the registry
// already has a server of its name or prefix, or maxDynamic are registered.
func (r *registry) add(cfg *Config, s *ServerConfig) *adminError {
	name := s.Name()
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.servers[name] != nil:
		return &adminError{http.StatusConflict, fmt.Sprintf("server %q is already registered; DELETE %s/%s first to replace it", name, adminServersPath, name)}
	case cfg.MCPServers[name] != nil:
		return &adminError{http.StatusConflict, fmt.Sprintf("server %q is in the config file %s; choose another name", name, cfg.file)}
	case cfg.prefixServer(s.Prefix, name) != "":
		return &adminError{http.StatusConflict, fmt.Sprintf("prefix %q is server %q's; a prefix's names belong to one server alone: choose another prefix", s.Prefix, cfg.prefixServer(s.Prefix, name))}
	case len(r.servers) >= cfg.Admin.maxDynamic():
		return &adminError{http.StatusTooManyRequests, fmt.Sprintf("%d servers are registered, the limit (admin.maxDynamic); DELETE one first, or raise admin.maxDynamic", len(r.servers))}
	}
	if r.servers == nil {
		r.servers = map[string]*ServerConfig{}
	}
	r.servers[name] = s
	return nil
}

// remove forgets the registered server name, unless it is not one: a
// server of cfg's file, or a name it does not know.
func (r *registry) remove(cfg *Config, name string) *adminError {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.servers[name] == nil && cfg.MCPServers[name] != nil:
		return &adminError{http.StatusConflict, fmt.Sprintf("server %q comes from the config file %s, not from the admin API; remove it there and reload (SIGHUP)", name, cfg.file)}
	case r.servers[name] == nil:
		return &adminError{http.StatusNotFound, fmt.Sprintf("no server %q is registered", name)}
	}
	delete(r.servers, name)
	return nil
}

// has reports whether name is a registered server.
func (r *registry) has(name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.servers[name] != nil
}

// merge returns cfg, a config read from the file, with the registered
// servers added, and forgets those it cannot add: all of them when cfg
// turns registration off, and each whose name or prefix is now in the
// file, whose entry wins. Each it forgets is logged as an audit line.
func (r *registry) merge(cfg *Config, log *slog.Logger) *Config {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.servers) == 0 {
		return cfg
	}
	out := *cfg
	out.MCPServers = maps.Clone(cfg.MCPServers)
	for _, name := range slices.Sorted(maps.Keys(r.servers)) {
		switch {
		case !cfg.Admin.Registration:
			log.Warn("audit", "action", "unregister", "by", "reload", "server", name,
				"why", "the config no longer sets admin.registration: the servers registered at runtime are removed")
		case cfg.MCPServers[name] != nil:
			log.Warn("audit", "action", "unregister", "by", "reload", "server", name,
				"why", "the config file now has a server of this name: the file's entry replaces the registered one")
		case cfg.prefixServer(r.servers[name].Prefix, name) != "":
			log.Warn("audit", "action", "unregister", "by", "reload", "server", name,
				"why", fmt.Sprintf("the config file's server %q now has this server's prefix %q, and a prefix belongs to one server alone", cfg.prefixServer(r.servers[name].Prefix, name), r.servers[name].Prefix))
		default:
			out.MCPServers[name] = r.servers[name]
			continue
		}
		delete(r.servers, name)
	}
	return &out
}

// An adminError is a refusal of the admin API, with its HTTP status.
type adminError struct {
	status int
	msg    string
}

func (e *adminError) Error() string { return e.msg }

// registrar serves the admin API's changes to the running config: it holds
// the registry, and takes what it needs of the gateway as function values,
// set by newRegistrar and never changed. Its methods are safe for
// concurrent use.
//
// Lock order: it has no lock of its own. register and unregister check and
// change the registry inside reconfigure's edit, so under the gateway's
// reloadMu, which reconfigure holds; registry.mu is a leaf.
type registrar struct {
	config func() *Config // the config in force
	// reconfigure reloads the config edit makes of the one in force, as
	// Gateway.reconfigure does: edit runs under reloadMu.
	reconfigure func(edit func(cfg *Config) (*Config, error)) error
	backendList func() []*backend // the backends in force, sorted by name

	registered registry
}

// newRegistrar returns a registrar with no server registered, of a gateway
// whose config in force config returns, reloaded by reconfigure, and whose
// backends in force backendList returns.
func newRegistrar(config func() *Config, reconfigure func(func(*Config) (*Config, error)) error, backendList func() []*backend) *registrar {
	return &registrar{config: config, reconfigure: reconfigure, backendList: backendList}
}

// register adds s, a server parsed by parseRegistration, to the running
// config and starts it, as a reload that adds it would, and returns its
// backend. It refuses a name or a prefix already in use, and a server past
// maxDynamic.
// It does not wait for the server to be ready.
func (a *registrar) register(s *ServerConfig) (*backend, error) {
	name := s.Name()
	err := a.reconfigure(func(cfg *Config) (*Config, error) {
		if err := a.registered.add(cfg, s); err != nil {
			return nil, err
		}
		next := *cfg
		next.MCPServers = maps.Clone(cfg.MCPServers)
		next.MCPServers[name] = s
		return &next, nil
	})
	if errors.Is(err, errGatewayClosed) {
		return nil, &adminError{http.StatusServiceUnavailable, "corral is shutting down"}
	}
	if err != nil {
		return nil, err
	}
	for _, b := range a.backendList() {
		if b.name == name {
			return b, nil
		}
	}
	return nil, fmt.Errorf("server %q was registered but has no backend", name) // a broken invariant, reported
}

// unregister removes the registered server name from the running config
// and stops it with the stop ladder, as a reload that removes it would. It
// blocks until the server is stopped. It refuses a server of the config
// file, and a name it does not know.
func (a *registrar) unregister(name string) error {
	err := a.reconfigure(func(cfg *Config) (*Config, error) {
		if err := a.registered.remove(cfg, name); err != nil {
			return nil, err
		}
		next := *cfg
		next.MCPServers = maps.Clone(cfg.MCPServers)
		delete(next.MCPServers, name)
		return &next, nil
	})
	if errors.Is(err, errGatewayClosed) {
		return &adminError{http.StatusServiceUnavailable, "corral is shutting down"}
	}
	return err
}

// merge returns cfg, a config read from the file, with the registered
// servers added; see registry.merge. Reload calls it under reloadMu.
func (a *registrar) merge(cfg *Config, log *slog.Logger) *Config {
	return a.registered.merge(cfg, log)
}

// adminServer is a server as the admin API shows it.
type adminServer struct {
	Name   string          `json:"name"`
	Source string          `json:"source"` // "file" or "registered"
	State  backendState    `json:"state"`  // "disabled" for a disabled server of the file
	Error  string          `json:"error,omitempty"`
	Entry  json.RawMessage `json:"entry"` // as -check prints it, secrets masked
}

// servers returns every server of the running config, sorted by name,
// with where it comes from, its state and its entry as -check prints it.
func (a *registrar) servers() []adminServer {
	var resolved struct {
		MCPServers map[string]json.RawMessage `json:"mcpServers"`
	}
	cfg := a.config()
	json.Unmarshal(cfg.resolved(), &resolved)
	states := map[string]health{}
	for _, b := range a.backendList() {
		states[b.name] = b.health()
	}
	var out []adminServer
	for _, name := range slices.Sorted(maps.Keys(resolved.MCPServers)) {
		as := adminServer{Name: name, Source: "file", State: "disabled", Entry: resolved.MCPServers[name]}
		if a.registered.has(name) {
			as.Source = "registered"
		}
		if h, ok := states[name]; ok {
			as.State, as.Error = h.State, h.Error
		}
		out = append(out, as)
	}
	return out
}

// adminServersPath is the admin API's collection of servers; a server is
// at adminServersPath + "/" + its name.
const adminServersPath = "/admin/servers"
