package main

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// configLeaves calls f with the path (field indices, through pointers to
// structs) and the dotted name of every field of t that is not itself a
// struct, and whether every field on the way is exported.
func configLeaves(t reflect.Type, path []int, name string, exported bool, f func(path []int, name string, exported bool)) {
	if t.Kind() == reflect.Pointer && t.Elem().Kind() == reflect.Struct {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		f(path, name, exported)
		return
	}
	for i := range t.NumField() {
		fld := t.Field(i)
		configLeaves(fld.Type, append(slices.Clone(path), i), strings.TrimPrefix(name+"."+fld.Name, "."), exported && fld.IsExported(), f)
	}
}

// setLeaf sets the field of v at path to a non-zero value: want if it is not
// nil, else one made by nonZero. It allocates the structs that nil pointers
// on the way point to.
func setLeaf(v reflect.Value, path []int, want any) {
	for _, i := range path {
		if v.Kind() == reflect.Pointer {
			if v.IsNil() {
				v.Set(reflect.New(v.Type().Elem()))
			}
			v = v.Elem()
		}
		v = v.Field(i)
	}
	if want != nil {
		v.Set(reflect.ValueOf(want).Convert(v.Type()))
		return
	}
	v.Set(nonZero(v.Type()))
}

// nonZero returns a value of type t that is not its zero value, nor any
// default corral applies.
func nonZero(t reflect.Type) reflect.Value {
	v := reflect.New(t).Elem()
	if t == reflect.TypeFor[json.RawMessage]() { // a value in toolOverrides' fixedArguments
		v.Set(reflect.ValueOf(json.RawMessage(`7`)))
		return v
	}
	switch t.Kind() {
	case reflect.String:
		v.SetString("changed")
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(7)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(1.5)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Pointer:
		v.Set(reflect.New(t.Elem()))
		v.Elem().Set(nonZero(t.Elem()))
	case reflect.Slice:
		v.Set(reflect.Append(reflect.MakeSlice(t, 0, 1), nonZero(t.Elem())))
	case reflect.Map:
		v.Set(reflect.MakeMap(t))
		v.SetMapIndex(nonZero(t.Key()), nonZero(t.Elem()))
	case reflect.Struct: // an element of a map (clients, profiles): every field set
		for i := range t.NumField() {
			if t.Field(i).IsExported() {
				v.Field(i).Set(nonZero(t.Field(i).Type))
			}
		}
	default:
		panic("nonZero: no value for a " + t.String())
	}
	return v
}

// TestFingerprintCoversEveryServerConfigField changes each field of a
// server's config, nested ones included, and checks that the fingerprint
// changes, so that a reload restarts the server, unless the field is one
// that fingerprint leaves out on purpose. A field added to ServerConfig
// fails here until it restarts the server or is added to the list below.
func TestFingerprintCoversEveryServerConfigField(t *testing.T) {
	noRestart := []string{
		"EnvFile",                            // its variables are in Env
		"Disabled",                           // a disabled server does not run
		"Audit.Arguments",                    // read at each call
		"RequestTimeout",                     // docs/config.md#reload: applies to the servers a reload starts
		"MaxCatalogItems", "MaxCatalogBytes", // the same
		"Prerequisite.shown", "name", "shown", // what -check prints; the key in mcpServers
		"vscode", // which map the entry is in, for messages
	}
	// Values for the fields whose every non-zero value is not a change.
	values := map[string]any{
		"Start": startLazy, // "changed" is eager, as "" is
	}
	cfg := mustParse(t, `{"mcpServers": {"a": {"command": "x"}}}`, nil)
	base := cfg.MCPServers["a"]
	was := fingerprint(cfg, base)
	seen := 0
	configLeaves(reflect.TypeFor[ServerConfig](), nil, "", true, func(path []int, name string, exported bool) {
		seen++
		listed := slices.Contains(noRestart, name)
		if !exported {
			if !listed {
				t.Errorf("ServerConfig.%s is unexported, so fingerprint cannot see it: add it to noRestart if a change of it needs no restart, else make fingerprint count it", name)
			}
			return
		}
		s := *base
		setLeaf(reflect.ValueOf(&s).Elem(), path, values[name])
		changed := fingerprint(cfg, &s) != was
		switch {
		case !changed && !listed:
			t.Errorf("a change of ServerConfig.%s leaves the fingerprint as it was: a reload would keep the old process; make fingerprint count it, or add it to noRestart with the reason", name)
		case changed && listed:
			t.Errorf("a change of ServerConfig.%s changes the fingerprint, but it is in noRestart: remove it from the list, or leave it out of fingerprint", name)
		}
	})
	if seen < 30 {
		t.Errorf("walked %d fields of ServerConfig, want at least 30: the walk is broken", seen)
	}
}

// TestFingerprintCoversTheTopLevelSettingsOfAProcess changes each
// top-level setting and checks that exactly those a server's process
// starts with (and those it inherits) change the fingerprint.
func TestFingerprintCoversTheTopLevelSettingsOfAProcess(t *testing.T) {
	restart := []string{
		"StartTimeout", "StopGrace", "KillGrace", "MaxLineBytes", "MaxInFlight",
		"Limits.Memory", "Limits.CPU", "Limits.Pids",
		"Sandbox.Network", "Sandbox.ReadOnly", "Sandbox.Writable", "Sandbox.NoNewPrivileges",
	}
	for _, f := range reflect.VisibleFields(reflect.TypeFor[Supervision]()) {
		restart = append(restart, "Supervision."+f.Name)
	}
	cfg := mustParse(t, `{"mcpServers": {"a": {"command": "x"}}}`, nil)
	s := cfg.MCPServers["a"]
	was := fingerprint(cfg, s)
	configLeaves(reflect.TypeFor[Config](), nil, "", true, func(path []int, name string, exported bool) {
		if !exported || name == "MCPServers" {
			return
		}
		c := *cfg
		setLeaf(reflect.ValueOf(&c).Elem(), path, nil)
		changed := fingerprint(&c, s) != was
		if want := slices.Contains(restart, name); changed != want {
			t.Errorf("a change of the top-level %s changes the fingerprint: %v, want %v (docs/config.md#reload lists which settings restart every server)", name, changed, want)
		}
	})
}
