package main

// This file holds a server's sandbox: its setting in the config, and the
// plan corral makes of it on this machine, which the containment shim
// (shim.go) applies to itself before it executes the server. How the plan is
// enforced is in sandbox_linux.go; elsewhere a sandboxed server is refused.

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// SandboxConfig is a server's "sandbox": what the server may reach. Each rule
// is off until it is set: a server with no sandbox, or with "sandbox": {},
// runs with all of corral's rights. A rule that cannot be enforced on this
// machine is never dropped: the server is refused instead.
type SandboxConfig struct {
	// Network, if false, gives the server a network namespace of its own in
	// which only its own loopback interface is up: it reaches nothing over
	// the network, not even corral's 127.0.0.1. If unset or true, the server
	// shares corral's network.
	Network *bool `json:"network,omitempty"`

	// ReadOnly and Writable, if either is not empty, are the only paths the server
	// may reach in the filesystem, each with everything beneath it: it may
	// read and execute under ReadOnly, and also write, create, remove and
	// rename under Writable. Anything else it may not open at all. Enforced
	// with Landlock; a kernel without it refuses the server. If both are
	// empty, the filesystem is not restricted.
	ReadOnly []string `json:"readOnly,omitempty"`
	Writable []string `json:"writable,omitempty"`

	// NoNewPrivileges, if true, sets no_new_privs: nothing the server
	// executes gains privileges (set-user-ID and set-group-ID bits and file
	// capabilities are ignored). Where corral is not root, filesystem rules
	// need it and set it anyway. If unset or false, not set.
	NoNewPrivileges *bool `json:"noNewPrivileges,omitempty"`
}

// sandboxKeys are the keys of a sandbox object, for messages.
var sandboxKeys = []string{"network", "noNewPrivileges", "readOnly", "writable"}

// UnmarshalJSON decodes a sandbox object strictly: a key it does not know is
// an error, not a rule silently left out.
func (s *SandboxConfig) UnmarshalJSON(data []byte) error {
	type plain SandboxConfig
	var v plain
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	err := dec.Decode(&v)
	var te *json.UnmarshalTypeError
	switch {
	case err == nil:
		*s = SandboxConfig(v)
		return nil
	case errors.As(err, &te) && te.Field != "":
		return fmt.Errorf("%s: want %s, got %s", te.Field, describeType(te.Type), te.Value)
	case errors.As(err, &te):
		return fmt.Errorf(`want an object such as {"network": false}, got %s`, te.Value)
	}
	if key, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		if k, err := strconv.Unquote(key); err == nil {
			return unknownFieldError(k, sandboxKeys)
		}
		return fmt.Errorf("unknown field %s; known fields are %s", key, quoteList(sandboxKeys))
	}
	return err
}

// noNetwork reports whether s takes the network away.
func (s *SandboxConfig) noNetwork() bool {
	return s.Network != nil && !*s.Network
}

// filesystem reports whether s restricts the filesystem.
func (s *SandboxConfig) filesystem() bool {
	return len(s.ReadOnly) > 0 || len(s.Writable) > 0
}

// validateSandbox checks sb, the sandbox of server (or the top level's,
// if server is ""), if any: a remote server has none, and each path is
// absolute.
func (p *parser) validateSandbox(server string, remote bool, sb *SandboxConfig) {
	if sb == nil {
		return
	}
	if remote {
		p.errorf(server, "sandbox", `a remote server (with "url") runs elsewhere and has no sandbox; remove it`)
		return
	}
	for _, list := range []struct {
		key   string
		paths []string
	}{{"readOnly", sb.ReadOnly}, {"writable", sb.Writable}} {
		for i, path := range list.paths {
			if !filepath.IsAbs(path) {
				p.errorf(server, fmt.Sprintf("sandbox.%s[%d]", list.key, i), "%q is not an absolute path; write it in full, such as %q", path, "/srv/data")
			}
		}
	}
}

// sandbox returns the sandbox of server s: each rule its own where set,
// else the top level's. It returns nil for a remote server, and where
// neither sets a sandbox.
func (c *Config) sandbox(s *ServerConfig) *SandboxConfig {
	if s.URL != "" || c.Sandbox == nil && s.Sandbox == nil {
		return nil
	}
	r := &SandboxConfig{}
	if c.Sandbox != nil {
		*r = *c.Sandbox
	}
	if o := s.Sandbox; o != nil {
		r.Network = cmp.Or(o.Network, r.Network)
		r.NoNewPrivileges = cmp.Or(o.NoNewPrivileges, r.NoNewPrivileges)
		if o.ReadOnly != nil {
			r.ReadOnly = o.ReadOnly
		}
		if o.Writable != nil {
			r.Writable = o.Writable
		}
	}
	return r
}

// sandboxPlan is what corral computes from a server's sandbox on this
// machine, and passes to the shim: the namespaces the shim is started in
// (procAttr) and what it applies to itself (applySandbox).
type sandboxPlan struct {
	Server     string   `json:"server"`               // the server's name, for messages
	NewNet     bool     `json:"newNet,omitempty"`     // a network namespace of its own, loopback up
	NewUser    bool     `json:"newUser,omitempty"`    // a user namespace too, mapping only corral's user: corral is not root
	NoNewPrivs bool     `json:"noNewPrivs,omitempty"` // prctl(PR_SET_NO_NEW_PRIVS)
	Landlock   int      `json:"landlock,omitempty"`   // the Landlock ABI to build the rules for; 0 for no filesystem rules
	ReadOnly   []string `json:"readOnly,omitempty"`
	Writable   []string `json:"writable,omitempty"`
}

// sandboxHost is what this machine offers a sandbox, as probed by
// probeSandboxHost.
type sandboxHost struct {
	root        bool  // corral runs as root: no user namespace is needed
	landlock    int   // the Landlock ABI version; 0 for none
	landlockErr error // why there is none
	netErr      error // why no network namespace can be made, if probed and so
}

// newSandboxPlan returns the plan for server's sandbox sb on host, or nil if
// sb asks for nothing. It refuses, saying why, a rule host cannot enforce,
// and a path that does not exist; the caller names the server.
func newSandboxPlan(server string, sb *SandboxConfig, host sandboxHost) (*sandboxPlan, error) {
	if sb == nil {
		return nil, nil
	}
	p := &sandboxPlan{Server: server, NewNet: sb.noNetwork(), NoNewPrivs: sb.NoNewPrivileges != nil && *sb.NoNewPrivileges}
	p.NewUser = p.NewNet && !host.root
	if sb.filesystem() {
		if host.landlock == 0 {
			return nil, fmt.Errorf("sandbox.readOnly and sandbox.writable cannot be enforced: %v; corral does not run a server without the filesystem rules it asks for: use a kernel with Landlock (Linux 5.13 or later, with landlock in its lsm= list), or remove both rules", host.landlockErr)
		}
		p.Landlock = host.landlock
		p.NoNewPrivs = p.NoNewPrivs || !host.root // without CAP_SYS_ADMIN, Landlock needs it
		p.ReadOnly, p.Writable = sb.ReadOnly, sb.Writable
		for _, list := range []struct {
			key   string
			paths []string
		}{{"readOnly", sb.ReadOnly}, {"writable", sb.Writable}} {
			for i, path := range list.paths {
				if _, err := os.Stat(path); err != nil {
					return nil, fmt.Errorf("sandbox.%s[%d]: %w; create it, or remove it from the list", list.key, i, err)
				}
			}
		}
	}
	if !p.NewNet && !p.NoNewPrivs && p.Landlock == 0 {
		return nil, nil
	}
	return p, nil
}

// sandboxReport returns what -check prints of the sandboxes in c: for each
// server with one, what host enforces of each rule, or why the server will
// be refused. It returns nothing if no server has a sandbox.
func sandboxReport(c *Config, host sandboxHost) []byte {
	var b bytes.Buffer
	for _, name := range slices.Sorted(maps.Keys(c.MCPServers)) {
		s := c.MCPServers[name]
		if s == nil || s.Disabled || c.sandbox(s) == nil {
			continue
		}
		if b.Len() == 0 {
			b.WriteString("sandboxes, as enforced on this machine:\n")
		}
		sb := c.sandbox(s)
		network := "not restricted"
		if sb.noNetwork() {
			network = "enforced: a network namespace of its own, only loopback up"
			if !host.root {
				network += " (in a user namespace of its own: corral is not root)"
			}
			if host.netErr != nil {
				network = fmt.Sprintf("REFUSED: %v", host.netErr)
			}
		}
		fs := "not restricted"
		if sb.filesystem() {
			fs = fmt.Sprintf("enforced: Landlock ABI %d", host.landlock)
			if host.landlock == 0 {
				fs = fmt.Sprintf("REFUSED: %v", host.landlockErr)
			}
		}
		nnp := "off"
		if sb.NoNewPrivileges != nil && *sb.NoNewPrivileges || sb.filesystem() && !host.root {
			nnp = "on"
		}
		fmt.Fprintf(&b, "  %s: network: %s; filesystem: %s; no_new_privs: %s\n", name, network, fs, nnp)
		if host.netErr != nil && network != "not restricted" || host.landlock == 0 && sb.filesystem() {
			fmt.Fprintf(&b, "  %s: will not be started on this machine\n", name)
		}
	}
	return b.Bytes()
}

// asksNetworkSandbox reports whether a server of c, not disabled, has a
// sandbox without network.
func (c *Config) asksNetworkSandbox() bool {
	for _, s := range c.MCPServers {
		if s != nil && !s.Disabled && c.sandbox(s) != nil && c.sandbox(s).noNetwork() {
			return true
		}
	}
	return false
}
