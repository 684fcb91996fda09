package main

// This file holds what -check prints: the config as corral runs it, with
// what may be secret masked, and the warnings about secrets that other local
// users can read.

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// secretMask is what -check prints in place of a value that may be secret.
const secretMask = "****"

// resolved returns the config as corral runs it, every default filled in,
// as indented JSON, with what may be secret masked as "****": the values of
// env and headers, the value of every variable expanded in the other fields
// (but ${workspaceFolder} and ${userHome}, shown resolved), and a URL's
// password, query values and fragment (see maskURL). The settings whose
// default is "none" are printed too: idleStop "off", limits and sandbox
// "none".
func (c *Config) resolved() []byte {
	out := shownConfig{Config: c, MCPServers: map[string]shownServer{}}
	top := c.supervision(&ServerConfig{})
	out.Supervision = &top
	out.IdleStop = shownIdleStop(top.IdleStop)
	out.Limits, out.Sandbox = shownOrNone(c.Limits, c.Limits == Limits{}), shownOrNone(c.Sandbox, c.Sandbox == nil)
	admin := c.Admin
	admin.MaxDynamic = admin.maxDynamic()
	out.Admin = &admin
	out.Audit = c.audit()
	out.Tracing = c.Tracing.resolved()
	out.Tracing.Endpoint = maskURL(out.Tracing.Endpoint)
	if h := out.Tracing.Headers; h != nil {
		out.Tracing.Headers = maskedValues(map[string]map[string]string{"": h})[""]
	}
	out.CacheDir, _ = c.catalogCacheDir() // "" when there is none
	for name, s := range c.MCPServers {
		out.MCPServers[name] = c.shownServer(s)
	}
	if len(c.Clients) > 0 {
		out.Clients = map[string]*ClientConfig{}
		for name, cl := range c.Clients {
			if cl == nil {
				continue
			}
			shown := *cl
			shown.Env, shown.Headers = maskedValues(cl.Env), maskedValues(cl.Headers)
			out.Clients[name] = &shown
		}
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false) // a URL's "&" stays readable
	enc.Encode(&out)
	return b.Bytes()
}

// shownConfig is the config as -check prints it (see resolved): each of
// its fields hides the Config field of the same JSON name.
type shownConfig struct {
	*Config
	*Supervision
	IdleStop   string                 `json:"idleStop"`
	Limits     any                    `json:"limits"`
	Sandbox    any                    `json:"sandbox"`
	Admin      *AdminConfig           `json:"admin"`
	Audit      AuditConfig            `json:"audit,omitzero"`
	Tracing    TracingConfig          `json:"tracing,omitzero"`
	CacheDir   string                 `json:"cacheDir"`
	MCPServers map[string]shownServer `json:"mcpServers"`
	// Clients are shown with their env and headers values masked.
	Clients map[string]*ClientConfig `json:"clients,omitempty"`
}

// maskedValues returns a client's env or headers, by server, with each
// value masked.
func maskedValues(byServer map[string]map[string]string) map[string]map[string]string {
	if byServer == nil {
		return nil
	}
	out := map[string]map[string]string{}
	for server, vals := range byServer {
		out[server] = map[string]string{}
		for k := range vals {
			out[server][k] = secretMask
		}
	}
	return out
}

// shownServer is a server entry as -check prints it: each of its fields
// hides the ServerConfig field of the same JSON name, with its default
// written out.
type shownServer struct {
	*ServerConfig
	Type         string `json:"type"`
	Scope        string `json:"scope"`
	MaxInstances int    `json:"maxInstances,omitempty"` // with "scope": "session" or "client" only
	IdleStop     string `json:"idleStop"`
	Limits       any    `json:"limits,omitempty"`
	Sandbox      any    `json:"sandbox,omitempty"`
	Prefix       any    `json:"prefix"` // false for "prefix": false
}

// shownIdleStop returns an idleStop as -check prints it: "off" when zero.
func shownIdleStop(d Duration) string {
	if d == 0 {
		return "off"
	}
	return d.D().String()
}

// shownOrNone returns v, or "none" if none.
func shownOrNone(v any, none bool) any {
	if none {
		return "none"
	}
	return v
}

// shownServer returns server s as -check prints it, resolved and masked.
func (c *Config) shownServer(s *ServerConfig) shownServer {
	r := *s
	r.Supervision = c.supervision(s)
	r.RequestTimeout = Duration(c.requestTimeout(s))
	r.MaxInFlight = c.maxInFlight(s)
	r.MaxCatalogItems, r.MaxCatalogBytes = c.catalogBound(s)
	r.Start = cmp.Or(s.Start, startEager)
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
	r.Prerequisite = s.Prerequisite.masked()
	shown := func(field, value string) string { return cmp.Or(s.shown[field], value) }
	r.Command, r.Cwd = shown("command", s.Command), shown("cwd", s.Cwd)
	r.EnvFile = shown("envFile", s.EnvFile)
	if s.URL != "" {
		r.URL = maskURL(shown("url", s.URL))
	}
	if len(s.Args) > 0 {
		r.Args = make([]string, len(s.Args))
		for i, a := range s.Args {
			r.Args[i] = shown(fmt.Sprintf("args[%d]", i), a)
		}
	}
	out := shownServer{ServerConfig: &r, Type: cmp.Or(s.Type, "stdio"), Scope: cmp.Or(s.Scope, scopeShared), IdleStop: shownIdleStop(r.IdleStop), Prefix: s.Prefix}
	if s.NoPrefix {
		out.Prefix = false
	}
	if s.scoped() {
		out.MaxInstances = cmp.Or(s.MaxInstances, defaultMaxInstances)
	}
	limits, sandbox := c.limits(s), c.sandbox(s)
	out.Limits, out.Sandbox = shownOrNone(limits, limits == Limits{}), shownOrNone(sandbox, sandbox == nil)
	if s.URL != "" { // a remote server has neither
		out.Limits, out.Sandbox = nil, nil
	}
	return out
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

// secretWarnings returns warnings about secrets other local users can read:
// a config file that holds env or headers values (often tokens) written in
// it, rather than taken from the environment or a file by a reference, or a
// token file, either readable by group or others.
func secretWarnings(path string, c *Config) []string {
	var out []string
	readable := func(f string) bool {
		st, err := os.Stat(f)
		return err == nil && st.Mode().Perm()&0o044 != 0
	}
	hasEnv := false
	for _, s := range c.MCPServers {
		for k := range s.Env {
			_, ref := s.shown["env."+k]
			hasEnv = hasEnv || !ref
		}
		for k := range s.Headers {
			_, ref := s.shown["headers."+k]
			hasEnv = hasEnv || !ref
		}
	}
	for _, cl := range c.Clients {
		hasEnv = hasEnv || cl != nil && cl.literal
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
	for _, name := range slices.Sorted(maps.Keys(c.Clients)) {
		f := ""
		if cl := c.Clients[name]; cl != nil {
			f = cl.TokenFile
		}
		if f == "" {
			continue
		}
		if !filepath.IsAbs(f) {
			f = filepath.Join(filepath.Dir(path), f)
		}
		if readable(f) {
			out = append(out, fmt.Sprintf("client %s's token file %s is readable by other users; chmod 600 %s", quoteName(name), f, f))
		}
	}
	return out
}

// findProgram returns the file that runs for command, a server's or a
// prerequisite's program, as corral starts it: a command with a slash is a
// path, relative to dir (the process's working directory) when it is
// relative; one without is looked for in each directory of pathList, the
// PATH of the process's environment (its env's PATH when it sets one, else
// corral's), as a desktop client looks for it. Relative directories of PATH
// are skipped, as Go's exec refuses what it finds through them.
func findProgram(command, pathList, dir string) (string, error) {
	if strings.Contains(command, "/") {
		path := command
		if !filepath.IsAbs(path) && dir != "" {
			path = filepath.Join(dir, path)
		}
		return path, isProgram(path)
	}
	for _, d := range filepath.SplitList(pathList) {
		if !filepath.IsAbs(d) {
			continue
		}
		if path := filepath.Join(d, command); isProgram(path) == nil {
			return path, nil
		}
	}
	return "", fmt.Errorf("%q is in no directory of PATH", command)
}

// isProgram returns why path cannot be run as a program, or nil.
func isProgram(path string) error {
	st, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%s does not exist", path)
	case err != nil:
		return err
	case st.IsDir():
		return fmt.Errorf("%s is a directory", path)
	case st.Mode().Perm()&0o111 == 0:
		return fmt.Errorf("%s is not executable (chmod +x %s)", path, path)
	}
	return nil
}

// checkRunnable returns what -check finds, without starting anything, that
// would keep a server of c from running: a program that cannot be found (in
// the PATH its process would have, from the cwd it would have), a cwd that
// is not a directory, and, unless corral serves on stdio, a url that is
// corral's own listen address. Disabled servers are not checked.
func checkRunnable(c *Config, stdio bool) []configError {
	var errs []configError
	for _, name := range slices.Sorted(maps.Keys(c.MCPServers)) {
		s := c.MCPServers[name]
		if s == nil || s.Disabled {
			continue
		}
		if s.URL != "" {
			if u, err := url.Parse(s.URL); err == nil && !stdio && isOwnAddress(u, c.Listen) {
				errs = append(errs, configError{name, "url", fmt.Sprintf("%s is corral's own listen address (listen %q): corral would wait for itself, and the server would stay \"starting\"; remove this server (a client's entry for corral is not a server for corral to run), or point url at the server you mean", maskURL(cmp.Or(s.shown["url"], s.URL)), c.Listen)})
			}
			continue
		}
		errs = append(errs, c.checkProcess(name, "", s.Command, s.Env, s.Cwd)...)
		if pre := s.Prerequisite; pre != nil {
			errs = append(errs, c.checkProcess(name, "prerequisite.", pre.Command, pre.Env, pre.Cwd)...)
		}
	}
	return errs
}

// checkProcess checks that the process of server name (or its prerequisite,
// with field "prerequisite.") could start: its cwd is a directory, and its
// command is found.
func (c *Config) checkProcess(name, field, command string, env map[string]string, cwd string) []configError {
	dir := cwd
	if dir != "" && !filepath.IsAbs(dir) && c.file != "" {
		dir = filepath.Join(filepath.Dir(c.file), dir)
	}
	if dir != "" {
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			why := "does not exist"
			if err == nil {
				why = "is not a directory"
			} else if !errors.Is(err, fs.ErrNotExist) {
				why = err.Error()
			}
			return []configError{{name, field + "cwd", fmt.Sprintf("the directory %s %s; create it, or correct cwd (a relative cwd starts from the config file's directory)", dir, why)}}
		}
	}
	pathList, from := os.Getenv("PATH"), "corral's environment"
	if p, ok := env["PATH"]; ok {
		pathList, from = p, "the server's env"
	}
	if _, err := findProgram(command, pathList, dir); err != nil {
		fix := "correct the path"
		if !strings.Contains(command, "/") {
			err = fmt.Errorf("%w (PATH from %s: %s)", err, from, pathList)
			fix = "install it, put its directory in PATH (corral's, or PATH in the server's env), or write its absolute path"
			if _, ok := env["PATH"]; ok {
				fix = "install it, put its directory in the PATH of the server's env, or write its absolute path"
			}
		}
		return []configError{{name, field + "command", fmt.Sprintf("cannot run %q: %v; %s", command, err, fix)}}
	}
	return nil
}

// isOwnAddress reports whether u reaches listen, corral's own listen
// address, as far as can be told without a lookup: the same port, and the
// same host, or a loopback host ("localhost" included) when corral listens
// on loopback or on every address.
func isOwnAddress(u *url.URL, listen string) bool {
	lhost, lport, err := net.SplitHostPort(listen)
	if err != nil || lport == "0" {
		return false
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	if port != lport {
		return false
	}
	host := u.Hostname()
	if strings.EqualFold(host, lhost) {
		return true
	}
	loopback := func(h string) bool {
		ip := net.ParseIP(h)
		return strings.EqualFold(h, "localhost") || ip != nil && ip.IsLoopback()
	}
	lip := net.ParseIP(lhost)
	return loopback(host) && (lhost == "" || loopback(lhost) || lip != nil && lip.IsUnspecified())
}

// checkSummary returns -check's last line: how many servers the config
// has, how many of them are fine and how many have errors (those in
// failed), and how many are disabled.
func checkSummary(c *Config, failed map[string]bool) string {
	enabled, disabled, bad := 0, 0, 0
	for name, s := range c.MCPServers {
		switch {
		case s.Disabled:
			disabled++
		case failed[name]:
			enabled++
			bad++
		default:
			enabled++
		}
	}
	line := fmt.Sprintf("%s: %d ok, %s", counted(enabled+disabled, "server", "servers"), enabled-bad, counted(bad, "error", "errors"))
	if disabled > 0 {
		line += fmt.Sprintf(", %d disabled", disabled)
	}
	return line
}

// counted returns n with the noun for n.
func counted(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// errorLine returns e, an error in c, as -check prints it: the file, the
// server and field (in "servers" for an entry of VS Code's map), and the
// message.
func (c *Config) errorLine(e configError) string {
	path := e.field
	if e.server != "" {
		path = "mcpServers." + quoteName(e.server)
		if s := c.MCPServers[e.server]; s != nil && s.vscode {
			path = "servers." + quoteName(e.server)
		}
		if e.field != "" {
			path += "." + e.field
		}
	}
	return fmt.Sprintf("%s: %s: %s", c.file, path, e.msg)
}
