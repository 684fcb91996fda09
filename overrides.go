package main

// Tool overrides: a server's tools as its entry's toolOverrides make them
// (configoverrides.go): renamed, with a new title or description, hidden,
// or with arguments corral fixes. They are applied to the server's own
// tools/list each time the catalog is built, and checked against it there:
// a part of an override the list does not fit (a tool the server lacks, a
// rename onto another tool's name, a fixed argument the schema lacks or
// whose type it refuses) is not applied, and said once in the log; the
// rest of the server's tools, and of the override, are.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// overrideProblem is a part of a server's toolOverrides that the server's
// tools/list does not fit: it is not applied.
type overrideProblem struct {
	server, tool string // the server, and the tool by the server's name
	field        string // the field of the server's entry
	msg, fix     string
}

// String returns the problem as one line, for -check and as the key that
// logs it once.
func (p overrideProblem) String() string {
	return fmt.Sprintf("server %q: %s: %s; %s", p.server, p.field, p.msg, p.fix)
}

// overriddenTool is one of a server's tools as its overrides make it.
type overriddenTool struct {
	hidden bool
	name   string                     // the name clients see before any prefix
	raw    json.RawMessage            // the object, named name, as clients see it
	fixed  map[string]json.RawMessage // the arguments corral sets, or nil
}

// overrideTools applies the overrides ovs of server to its tools, items,
// and returns each tool as clients see it, in the order of items, with the
// parts of ovs that items do not fit. A tool without an override is
// returned as the server sent it; with no overrides it returns nil. It
// does not change items.
func overrideTools(server string, ovs map[string]*ToolOverride, items []backendItem) ([]overriddenTool, []overrideProblem) {
	if len(ovs) == 0 {
		return nil, nil // the common case, with nothing to allocate
	}
	out := make([]overriddenTool, len(items))
	for i, it := range items {
		out[i] = overriddenTool{name: it.name, raw: it.raw}
	}
	var problems []overrideProblem
	index := map[string]int{}
	for i, it := range items {
		index[it.name] = i
	}
	for _, tool := range slices.Sorted(maps.Keys(ovs)) {
		if _, ok := index[tool]; !ok {
			problems = append(problems, overrideProblem{server, tool, "toolOverrides." + quoteName(tool),
				fmt.Sprintf("the server lists no tool %q", tool),
				"name the tool as the server's tools/list does (before any prefix), or remove the override"})
		}
	}
	// Renames, but those that would give two tools one name.
	renames := map[string]string{}
	for tool, o := range ovs {
		if i, ok := index[tool]; ok {
			out[i].hidden = o.Hide
			if o.Name != "" && !o.Hide && o.Name != tool {
				renames[tool] = o.Name
			}
		}
	}
	problems = append(problems, dropClashingRenames(server, items, out, renames)...)
	for _, tool := range slices.Sorted(maps.Keys(ovs)) {
		i, ok := index[tool]
		if !ok || out[i].hidden {
			continue
		}
		o := ovs[tool]
		fixed, drop, fixProblems := fixArguments(server, tool, o.FixedArguments, items[i].raw)
		problems = append(problems, fixProblems...)
		name := cmpOr(renames[tool], tool)
		if name == tool && o.Title == nil && o.Description == nil && fixed == nil {
			continue
		}
		out[i] = overriddenTool{name: name, raw: applyOverride(items[i].raw, name, o, drop), fixed: fixed}
	}
	return out, problems
}

// dropClashingRenames removes from renames, a server's tools' new names by
// their own, each rename that would give two of the tools clients see
// (items, but those out hides) one name, and returns a problem for each.
// It removes one at a time, in the order of the tools' names, and looks
// again, so that a rename that clashed only with a dropped one stays.
func dropClashingRenames(server string, items []backendItem, out []overriddenTool, renames map[string]string) []overrideProblem {
	var problems []overrideProblem
	for changed := true; changed; {
		changed = false
		owners := map[string][]string{}
		for i, it := range items {
			if !out[i].hidden {
				name := cmpOr(renames[it.name], it.name)
				owners[name] = append(owners[name], it.name)
			}
		}
		for _, tool := range slices.Sorted(maps.Keys(renames)) {
			to := renames[tool]
			if len(owners[to]) > 1 {
				others := slices.DeleteFunc(slices.Clone(owners[to]), func(s string) bool { return s == tool })
				problems = append(problems, overrideProblem{server, tool, "toolOverrides." + quoteName(tool) + ".name",
					fmt.Sprintf("renaming tool %q to %q would give it the name of the server's tool %q; it keeps its own name", tool, to, strings.Join(others, `", "`)),
					"choose a name no other tool of the server has"})
				delete(renames, tool)
				changed = true
				break
			}
		}
	}
	return problems
}

// fixArguments checks args, the fixedArguments of server's tool whose
// definition is raw, against the tool's inputSchema, and returns those it
// accepts (nil if none), their names in order (the parameters to drop
// from the schema clients see), and a problem for each it refuses: a
// parameter the schema lacks, or a value its type, enum or const refuses.
func fixArguments(server, tool string, args map[string]json.RawMessage, raw json.RawMessage) (fixed map[string]json.RawMessage, drop []string, problems []overrideProblem) {
	if len(args) == 0 {
		return nil, nil, nil
	}
	props := schemaParams(raw)
	for _, arg := range slices.Sorted(maps.Keys(args)) {
		field := "toolOverrides." + quoteName(tool) + ".fixedArguments." + quoteName(arg)
		v := args[arg]
		prop, ok := props[arg]
		if !ok {
			problems = append(problems, overrideProblem{server, tool, field,
				fmt.Sprintf("the inputSchema of tool %q has no parameter %q; the argument is not fixed", tool, arg),
				"name a parameter of the tool's inputSchema, or remove the argument"})
			continue
		}
		if why := schemaRefuses(prop, v); why != "" {
			problems = append(problems, overrideProblem{server, tool, field,
				fmt.Sprintf("%s is %s; the argument is not fixed", v, why),
				"give a value the parameter's schema accepts"})
			continue
		}
		if fixed == nil {
			fixed = map[string]json.RawMessage{}
		}
		fixed[arg] = v
		drop = append(drop, arg)
	}
	return fixed, drop, problems
}

// overriddenList is a server's tools list as its overrides make it.
type overriddenList struct {
	items    []backendItem // the server's list they were applied to
	out      []overriddenTool
	problems []overrideProblem
}

// overrideList returns the tools of b as its overrides make them: those of
// old, a catalog built before, when b's list is the very one they were
// applied to then (a list is replaced whole when the server lists again),
// else applied anew.
func overrideList(old *catalog, b *backend) *overriddenList {
	items := b.items(kindTool)
	if old != nil {
		if o := old.overridden[b]; o != nil && len(o.items) == len(items) && (len(items) == 0 || &o.items[0] == &items[0]) {
			return o
		}
	}
	out, problems := overrideTools(b.name, b.cfg.ToolOverrides, items)
	return &overriddenList{items: items, out: out, problems: problems}
}

// cmpOr returns a if it is not empty, else b.
func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// schemaParams returns the properties of a tool's inputSchema, by name.
func schemaParams(tool json.RawMessage) map[string]json.RawMessage {
	var t struct {
		InputSchema struct {
			Properties map[string]json.RawMessage `json:"properties"`
		} `json:"inputSchema"`
	}
	json.Unmarshal(tool, &t)
	return t.InputSchema.Properties
}

// schemaRefuses returns why the schema prop, a property of an inputSchema,
// does not accept v, as "a string, not a number", or "" if it accepts it
// as far as its "type", "enum" and "const" say.
func schemaRefuses(prop, v json.RawMessage) string {
	var s struct {
		Type  json.RawMessage   `json:"type"`
		Enum  []json.RawMessage `json:"enum"`
		Const json.RawMessage   `json:"const"`
	}
	if json.Unmarshal(prop, &s) != nil {
		return ""
	}
	got := jsonType(v)
	var types []string
	var one string
	if json.Unmarshal(s.Type, &one) == nil {
		types = []string{one}
	} else {
		json.Unmarshal(s.Type, &types)
	}
	if len(types) > 0 && !slices.ContainsFunc(types, func(t string) bool { return t == got || t == "number" && got == "integer" }) {
		return fmt.Sprintf("%s, and the schema wants %s", article(got), strings.Join(types, " or "))
	}
	if len(s.Enum) > 0 && !slices.ContainsFunc(s.Enum, func(e json.RawMessage) bool { return equalJSON(e, v) }) {
		return "not one of the schema's enum values"
	}
	if len(s.Const) > 0 && !equalJSON(s.Const, v) {
		return "not the schema's const value"
	}
	return ""
}

// article returns a JSON type's name with its article: "an object".
func article(t string) string {
	if t == "object" || t == "array" || t == "integer" {
		return "an " + t
	}
	return "a " + t
}

// jsonType returns the JSON Schema type of v: "integer" for a number
// without a fraction.
func jsonType(v json.RawMessage) string {
	v = bytes.TrimSpace(v)
	if len(v) == 0 {
		return "null"
	}
	switch v[0] {
	case '"':
		return "string"
	case '{':
		return "object"
	case '[':
		return "array"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	}
	var f float64
	if json.Unmarshal(v, &f) == nil && f == float64(int64(f)) {
		return "integer"
	}
	return "number"
}

// equalJSON reports whether a and b are the same JSON value.
func equalJSON(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	ja, _ := json.Marshal(x)
	jb, _ := json.Marshal(y)
	return bytes.Equal(ja, jb)
}

// applyOverride returns raw, a tool's object, named name, with o's title
// and description, and without the parameters drop in its inputSchema's
// properties and required list.
func applyOverride(raw json.RawMessage, name string, o *ToolOverride, drop []string) json.RawMessage {
	var fields map[string]json.RawMessage
	if json.Unmarshal(raw, &fields) != nil {
		return raw // listItems checked it is an object
	}
	fields["name"], _ = json.Marshal(name)
	if o.Title != nil {
		fields["title"], _ = json.Marshal(*o.Title)
	}
	if o.Description != nil {
		fields["description"], _ = json.Marshal(*o.Description)
	}
	if len(drop) > 0 {
		var schema map[string]json.RawMessage
		json.Unmarshal(fields["inputSchema"], &schema)
		var props map[string]json.RawMessage
		json.Unmarshal(schema["properties"], &props)
		for _, d := range drop {
			delete(props, d)
		}
		schema["properties"], _ = json.Marshal(props)
		if r, ok := schema["required"]; ok {
			var required []string
			json.Unmarshal(r, &required)
			required = slices.DeleteFunc(required, func(s string) bool { return slices.Contains(drop, s) })
			schema["required"], _ = json.Marshal(required)
			if len(required) == 0 {
				delete(schema, "required")
			}
		}
		fields["inputSchema"], _ = json.Marshal(schema)
	}
	out, _ := json.Marshal(fields)
	return out
}

// withFixedArguments returns params, those of a tools/call of the tool
// clients call tool, with the arguments fixed set in its arguments, or an
// error if the client sent one of them: corral, not the client, decides
// them.
func withFixedArguments(params json.RawMessage, tool string, fixed map[string]json.RawMessage) (json.RawMessage, *wireError) {
	var fields map[string]json.RawMessage
	if json.Unmarshal(params, &fields) != nil || fields == nil {
		return nil, &wireError{Code: codeInvalidParams, Message: "tools/call: params must be an object"}
	}
	var args map[string]json.RawMessage
	if a := bytes.TrimSpace(fields["arguments"]); len(a) > 0 && string(a) != "null" {
		if json.Unmarshal(a, &args) != nil {
			return nil, &wireError{Code: codeInvalidParams, Message: fmt.Sprintf("tools/call: the arguments of tool %q must be an object", tool)}
		}
	}
	if args == nil {
		args = map[string]json.RawMessage{}
	}
	for _, k := range slices.Sorted(maps.Keys(fixed)) {
		if _, sent := args[k]; sent {
			return nil, &wireError{Code: codeInvalidParams, Message: fmt.Sprintf("tools/call: argument %q of tool %q is fixed by the gateway's config and is not in the tool's inputSchema; call the tool without it", k, tool)}
		}
		args[k] = fixed[k]
	}
	fields["arguments"], _ = json.Marshal(args)
	out, _ := json.Marshal(fields)
	return out, nil
}

// overridesReport returns what -check prints of cfg's toolOverrides: each
// server's overrides and, where tools returns the tools the server listed
// when it last ran (a lazy server's catalog cache), each part of them that
// does not fit its list. A server whose tools are not known yet is said
// to be checked when it lists them.
func overridesReport(cfg *Config, tools func(server string) ([]backendItem, bool)) []byte {
	var b strings.Builder
	for _, name := range slices.Sorted(maps.Keys(cfg.MCPServers)) {
		s := cfg.MCPServers[name]
		if s == nil || s.Disabled || len(s.ToolOverrides) == 0 {
			continue
		}
		fmt.Fprintf(&b, "server %s: toolOverrides:\n", quoteName(name))
		for _, tool := range slices.Sorted(maps.Keys(s.ToolOverrides)) {
			fmt.Fprintf(&b, "  %s\n", describeOverride(tool, s.ToolOverrides[tool]))
		}
		items, known := tools(name)
		if !known {
			fmt.Fprintf(&b, "  checked against the server's tools/list when it lists its tools (its catalog is not known yet)\n")
			continue
		}
		_, problems := overrideTools(name, s.ToolOverrides, items)
		for _, p := range problems {
			fmt.Fprintf(&b, "  not applied: %s: %s; %s\n", p.field, p.msg, p.fix)
		}
		if len(problems) == 0 {
			fmt.Fprintf(&b, "  every override fits the %d tools the server listed when it last ran\n", len(items))
		}
	}
	return []byte(b.String())
}
