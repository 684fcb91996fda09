package main

// This file holds what -check prints: the config as corral runs it, with
// what may be secret masked, and the warnings about secrets that other local
// users can read.

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
)

// secretMask is what -check prints in place of a value that may be secret.
const secretMask = "****"

// resolved returns the config as corral runs it, every default filled in,
// as indented JSON, with what may be secret masked as "****": the values of
// env and headers, the value of every variable expanded in the other fields,
// and a URL's password, query values and fragment (see maskURL).
func (c *Config) resolved() []byte {
	out := *c
	out.MCPServers = map[string]*ServerConfig{}
	for name, s := range c.MCPServers {
		r := *s
		r.Supervision = c.supervision(s)
		r.RequestTimeout = Duration(c.requestTimeout(s))
		r.MaxInFlight = c.maxInFlight(s)
		r.MaxCatalogItems, r.MaxCatalogBytes = c.catalogBound(s)
		r.Limits = c.limits(s)
		r.Start = cmp.Or(s.Start, startEager)
		r.Sandbox = c.sandbox(s)
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
		out.MCPServers[name] = &r
	}
	out.Supervision = c.supervision(&ServerConfig{})
	out.Admin.MaxDynamic = c.Admin.maxDynamic()
	out.Audit = c.audit()
	out.CacheDir, _ = c.catalogCacheDir() // "" when there is none
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false) // a URL's "&" stays readable
	enc.Encode(&out)
	return b.Bytes()
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
	return out
}
