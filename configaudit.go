package main

// This file holds the settings of the audit trail (audit.go): the top-level
// "audit" object, where the trail goes and how it rotates, and a server's
// own "audit" object, which asks for its calls' arguments and results.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
)

// AuditConfig is where the audit trail goes. Its zero value writes none.
type AuditConfig struct {
	// File is the file the trail is appended to, one JSON line per call; a
	// relative path starts from the config file's directory. "-" is
	// corral's stdout, which -stdio refuses (it is the MCP channel there).
	// If empty, there is no trail.
	File string `json:"file,omitempty"`
	// MaxBytes is the size past which the file is rotated: renamed to
	// FILE.1, FILE.1 to FILE.2 and so on up to FILE.<keep>, the oldest
	// dropped. If zero, 100 MiB.
	MaxBytes int64 `json:"maxBytes,omitempty"`
	// Keep is the number of rotated files kept. If zero, 5.
	Keep int `json:"keep,omitempty"`
}

// ServerAudit is what a server's calls add to the audit trail.
type ServerAudit struct {
	// Arguments, if true, writes each call's arguments and result, masked
	// (see maskSecrets).
	Arguments bool `json:"arguments"`
}

const (
	defaultAuditMaxBytes = 100 << 20
	defaultAuditKeep     = 5
	// minAuditMaxBytes is the smallest maxBytes: a line with its arguments
	// and result may be over 100 KiB (see maxAuditValueBytes).
	minAuditMaxBytes = 4096
	// auditStdout is the file name that means corral's stdout.
	auditStdout = "-"
)

// resolved returns a with its defaults filled in and File made absolute
// against dir, the config file's directory; zero if a writes no trail.
func (a AuditConfig) resolved(dir string) AuditConfig {
	if a.File == "" {
		return AuditConfig{}
	}
	a.MaxBytes = firstSet(a.MaxBytes, defaultAuditMaxBytes)
	a.Keep = firstSet(a.Keep, defaultAuditKeep)
	if a.File != auditStdout && !filepath.IsAbs(a.File) && dir != "" {
		a.File = filepath.Join(dir, a.File)
	}
	return a
}

// audit returns c's audit settings, resolved (see AuditConfig.resolved).
func (c *Config) audit() AuditConfig {
	dir := ""
	if c.file != "" {
		dir = filepath.Dir(c.file)
	}
	return c.Audit.resolved(dir)
}

// auditArguments reports whether the audit trail writes the arguments and
// results of server's calls.
func (c *Config) auditArguments(server string) bool {
	s := c.MCPServers[server]
	return s != nil && s.Audit != nil && s.Audit.Arguments
}

// validateAudit checks the "audit" settings of c: bounds that are not
// negative, and a file corral can append to, opened (and so created) now,
// so that a typo fails at load rather than at the first call.
func (p *parser) validateAudit(c *Config) {
	a := c.Audit
	if a.File == "" {
		if a.MaxBytes != 0 || a.Keep != 0 {
			p.errorf("", "audit.file", `is missing: maxBytes and keep bound a file; add "file": "/var/log/corral/audit.jsonl" (or "-" for stdout), or remove the "audit" object`)
		}
		return
	}
	switch {
	case a.MaxBytes < 0:
		p.errorf("", "audit.maxBytes", "must not be negative, got %d; use a number of bytes, or remove the key for the default (%d)", a.MaxBytes, defaultAuditMaxBytes)
	case a.MaxBytes > 0 && a.MaxBytes < minAuditMaxBytes:
		p.errorf("", "audit.maxBytes", "is %d, under the least, %d: one line with its arguments can be longer; use a larger number, or remove the key for the default (%d)", a.MaxBytes, minAuditMaxBytes, defaultAuditMaxBytes)
	}
	if a.Keep < 0 {
		p.errorf("", "audit.keep", "must not be negative, got %d; use the number of rotated files to keep, or remove the key for the default (%d)", a.Keep, defaultAuditKeep)
	}
	if a.File == auditStdout {
		return // -stdio refuses it (invocation.readConfig): the parser does not know the front end
	}
	path := a.resolved(filepath.Dir(p.path)).File
	if err := checkAuditFile(path); err != nil {
		p.errorf("", "audit.file", "%v", err)
	}
}

// checkAuditFile opens path for appending, creating it if it does not
// exist, and closes it; the error says why it cannot and what to do.
func checkAuditFile(path string) error {
	f, err := openAuditFile(path)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		hint := "make it writable by corral's user, or name another file"
		if errors.Is(err, fs.ErrNotExist) {
			hint = "create the directory " + filepath.Dir(path) + ", or name a file in one that exists"
		}
		return fmt.Errorf("cannot open %s for appending: %v; %s", path, err, hint)
	}
	info, err := f.Stat()
	f.Close()
	if err == nil && info.IsDir() {
		return fmt.Errorf("%s is a directory; name a file in it, such as %s", path, filepath.Join(path, "audit.jsonl"))
	}
	return nil
}

// openAuditFile opens the audit file at path for appending, created
// readable by corral's user alone: the trail names clients and what they
// called.
func openAuditFile(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
}

// UnmarshalJSON decodes the "audit" object, refusing keys it does not know
// and values of the wrong type, with the key in the message.
func (a *AuditConfig) UnmarshalJSON(data []byte) error {
	return decodeStrict(data, `{"file": "/var/log/corral/audit.jsonl"}`, map[string]struct {
		ptr  any
		want string
	}{
		"file":     {&a.File, "a string"},
		"maxBytes": {&a.MaxBytes, "an integer"},
		"keep":     {&a.Keep, "an integer"},
	})
}

// UnmarshalJSON decodes a server's "audit" object, as AuditConfig's does.
func (a *ServerAudit) UnmarshalJSON(data []byte) error {
	return decodeStrict(data, `{"arguments": true}`, map[string]struct {
		ptr  any
		want string
	}{
		"arguments": {&a.Arguments, "true or false"},
	})
}

// decodeStrict decodes data, an object such as example, into the fields
// named by their keys, and fails on an unknown key or a value of the wrong
// type, naming the key.
func decodeStrict(data []byte, example string, fields map[string]struct {
	ptr  any
	want string
}) error {
	var entry map[string]json.RawMessage
	if err := json.Unmarshal(data, &entry); err != nil || entry == nil {
		return fmt.Errorf("want an object such as %s, got %s", example, jsonKind(data))
	}
	known := slices.Sorted(maps.Keys(fields))
	for _, key := range slices.Sorted(maps.Keys(entry)) {
		f, ok := fields[key]
		if !ok {
			if near, ok := nearest(key, known); ok {
				return fmt.Errorf("unknown field %q; did you mean %q?", key, near)
			}
			return fmt.Errorf("unknown field %q; known fields are %s", key, quoteList(known))
		}
		if err := json.Unmarshal(entry[key], f.ptr); err != nil {
			return fmt.Errorf("%s: want %s, got %s", key, f.want, jsonKind(entry[key]))
		}
	}
	return nil
}
