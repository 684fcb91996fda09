package main

// This file holds the settings of a server entry that change how its tools
// look to clients: "toolOverrides" (rename, title, description, hide, fixed
// arguments), "pin" (pinned tool definitions) and "prefix": false. What
// the config alone can check is checked here, at load; what needs the
// server's own tools/list is checked when it lists (overrides.go, pins.go).

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// ToolOverride is what a server entry's toolOverrides says of one of the
// server's tools, named by the server's own name. Its zero value changes
// nothing.
type ToolOverride struct {
	// Name, if not empty, is the name clients see instead of the server's
	// (before the server's prefix, which still applies).
	Name string `json:"name,omitempty"`
	// Title and Description, if not nil, replace the tool's own.
	Title       *string `json:"title,omitempty"`
	Description *string `json:"description,omitempty"`
	// Hide leaves the tool out, as the server's tools.deny does.
	Hide bool `json:"hide,omitempty"`
	// FixedArguments are arguments corral sets on every call of the tool;
	// each is removed from the inputSchema clients see.
	FixedArguments map[string]json.RawMessage `json:"fixedArguments,omitempty"`
}

// toolOverrideKeys are the keys of a ToolOverride, for errors.
var toolOverrideKeys = []string{"description", "fixedArguments", "hide", "name", "title"}

// maxToolNameLen is the longest tool name an override may give: the MCP
// specification's bound (2025-11-25, "Tool names").
const maxToolNameLen = 128

// validToolName reports whether name is a tool name as the MCP
// specification recommends: 1 to 128 of A-Z a-z 0-9 _ - and '.'.
func validToolName(name string) bool {
	if name == "" || len(name) > maxToolNameLen {
		return false
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

// The values of a server's "pin".
const (
	pinOff   = ""
	pinWarn  = "warn"
	pinBlock = "block"
)

// decodeToolOverrides decodes data, the value of server s's toolOverrides,
// reporting each problem with the path of the field it is in.
func (p *parser) decodeToolOverrides(s *ServerConfig, data json.RawMessage) {
	var entries map[string]json.RawMessage
	if err := json.Unmarshal(data, &entries); err != nil {
		p.errorf(s.name, "toolOverrides", `want an object mapping a tool's name to its override, such as {"create_issue": {"fixedArguments": {"owner": "acme"}}}, got %s`, jsonKind(data))
		return
	}
	s.ToolOverrides = map[string]*ToolOverride{}
	renamedBy := map[string]string{} // new name -> the tool renamed to it
	for _, tool := range slices.Sorted(maps.Keys(entries)) {
		field := "toolOverrides." + quoteName(tool)
		if tool == "" {
			p.errorf(s.name, "toolOverrides", `a tool name is empty; name the tool as the server lists it (before any prefix)`)
			continue
		}
		var keys map[string]json.RawMessage
		if json.Unmarshal(entries[tool], &keys) != nil || keys == nil {
			p.errorf(s.name, field, `want an object such as {"name": "new_name"}, got %s`, jsonKind(entries[tool]))
			continue
		}
		bad := false
		for _, k := range slices.Sorted(maps.Keys(keys)) {
			if !slices.Contains(toolOverrideKeys, k) {
				p.errorf(s.name, field, "%v", unknownFieldError(k, toolOverrideKeys))
				bad = true
			}
		}
		o := &ToolOverride{}
		for _, k := range []struct {
			key string
			ptr any
		}{{"name", &o.Name}, {"title", &o.Title}, {"description", &o.Description}, {"hide", &o.Hide}, {"fixedArguments", &o.FixedArguments}} {
			if raw, ok := keys[k.key]; ok {
				n := len(p.errs)
				p.decode(s.name, field+"."+k.key, raw, k.ptr)
				bad = bad || len(p.errs) > n
			}
		}
		if _, ok := keys["name"]; ok && !validToolName(o.Name) {
			p.errorf(s.name, field+".name", "invalid tool name %q; use 1 to %d of letters, digits, '_', '-' and '.'", o.Name, maxToolNameLen)
			bad = true
		}
		if o.Name != "" {
			if other, dup := renamedBy[o.Name]; dup {
				p.errorf(s.name, field+".name", "tool %q is renamed to %q too; give each tool a name of its own", other, o.Name)
				bad = true
			}
			renamedBy[o.Name] = tool
		}
		for _, arg := range slices.Sorted(maps.Keys(o.FixedArguments)) {
			if arg == "" {
				p.errorf(s.name, field+".fixedArguments", "an argument's name is empty; name a parameter of the tool's inputSchema")
				bad = true
			}
		}
		if !bad {
			s.ToolOverrides[tool] = o
		}
	}
}

// decodePrefix decodes data, the value of server s's prefix: a string, or
// false for a server whose names are never qualified.
func (p *parser) decodePrefix(s *ServerConfig, data json.RawMessage) {
	switch strings.TrimSpace(string(data)) {
	case "false":
		s.NoPrefix = true
		return
	case "true":
		p.errorf(s.name, "prefix", `true is not a prefix; write a string such as "gh", or false for a server whose names are never qualified`)
		return
	}
	p.decode(s.name, "prefix", data, &s.Prefix)
}

// validatePin reports a "pin" of server s that is none of its values.
func (p *parser) validatePin(s *ServerConfig) {
	switch s.Pin {
	case pinOff, pinWarn, pinBlock:
	default:
		p.errorf(s.name, "pin", `unknown value %q; write "warn" (log a changed tool definition and keep serving it) or "block" (withhold it until an operator accepts it)`, s.Pin)
	}
}

// describeOverride returns what -check prints of override o of tool.
func describeOverride(tool string, o *ToolOverride) string {
	var parts []string
	if o.Hide {
		parts = append(parts, "hidden")
	}
	if o.Name != "" {
		parts = append(parts, fmt.Sprintf("renamed %q", o.Name))
	}
	if o.Title != nil {
		parts = append(parts, "new title")
	}
	if o.Description != nil {
		parts = append(parts, "new description")
	}
	for _, a := range slices.Sorted(maps.Keys(o.FixedArguments)) {
		parts = append(parts, fmt.Sprintf("%s fixed to %s", a, o.FixedArguments[a]))
	}
	return fmt.Sprintf("%q: %s", tool, strings.Join(parts, ", "))
}
