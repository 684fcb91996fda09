package main

// This file holds the resource limits of a server's processes: their config
// type, the parsing of sizes such as "512MiB", and their validation. The
// cgroups that enforce them are in cgroup_linux.go.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Limits bounds the resources of one server's processes, all of them
// together, through the cgroup corral gives the server (see
// docs/operations.md#containment). Each zero field takes the value set at the
// top level of the config or, failing that, means no limit. Limits set where
// corral cannot create cgroups make the server refuse to start: a limit is
// never silently dropped.
type Limits struct {
	// Memory is the most memory the server's processes may use together,
	// swap included, as a size with a unit: "512MiB", "2GiB", "65536KiB",
	// or a number of bytes. Past it the kernel kills one of them, and when
	// that is the server itself it is restarted like any crash. If empty,
	// no limit.
	Memory string `json:"memory,omitempty"`

	// CPU is how many CPUs' worth of time the server's processes may use
	// together, such as 1.5; past it they wait. At least 0.01. If zero, no
	// limit.
	CPU float64 `json:"cpu,omitempty"`

	// Pids is how many processes and threads the server's processes may
	// have together; past it fork and thread creation fail. If zero, no
	// limit.
	Pids int `json:"pids,omitempty"`
}

// limitsFields are the keys of a limits object, for messages.
var limitsFields = []string{"memory", "cpu", "pids"}

// UnmarshalJSON decodes a limits object, refusing keys it does not know, so
// that a misspelt limit is an error rather than no limit.
func (l *Limits) UnmarshalJSON(data []byte) error {
	type plain Limits
	if bytes.Equal(bytes.TrimSpace(data), []byte("null")) {
		return nil
	}
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(data, &keys); err != nil {
		return fmt.Errorf(`want an object such as {"memory": "512MiB", "cpu": 1.5, "pids": 256}, got %s`, jsonKind(data))
	}
	for k := range keys {
		if !slices.Contains(limitsFields, k) {
			return unknownFieldError(k, limitsFields)
		}
	}
	var p plain
	if err := json.Unmarshal(data, &p); err != nil {
		return fmt.Errorf(`want {"memory": a size such as "512MiB", "cpu": a number, "pids": a whole number}: %v`, err)
	}
	*l = Limits(p)
	return nil
}

// IsZero reports whether l sets no limit.
func (l Limits) IsZero() bool { return l == Limits{} }

// memoryBytes returns the memory limit in bytes, or 0 for none. It must only
// be called on limits that passed validateLimits.
func (l Limits) memoryBytes() int64 {
	n, _ := parseSize(l.Memory)
	return n
}

// controllers returns the cgroup controllers limits l needs, memory, pids,
// cpu in that order. Each limit needs the one controller named as its key
// (limits.memory: memory), which set relies on.
func (l Limits) controllers() []string {
	var cs []string
	if l.Memory != "" {
		cs = append(cs, "memory")
	}
	if l.Pids != 0 {
		cs = append(cs, "pids")
	}
	if l.CPU != 0 {
		cs = append(cs, "cpu")
	}
	return cs
}

// set lists the limits l sets, by key, for messages: "limits.memory,
// limits.pids" (in the order of controllers).
func (l Limits) set() string {
	cs := l.controllers()
	for i, c := range cs {
		cs[i] = "limits." + c
	}
	return strings.Join(cs, ", ")
}

// sizeUnits are the units parseSize accepts, and their sizes.
var sizeUnits = []struct {
	name string
	size int64
}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1}}

// parseSize parses a size: a whole number of bytes, or a number followed by
// KiB, MiB, GiB or TiB ("512MiB", "1.5GiB", "64 KiB"). It refuses the
// decimal units (MB, GB) and bare letters (M, G), which mean different sizes
// to different programs.
func parseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	unit := int64(1)
	for _, u := range sizeUnits {
		if rest, ok := strings.CutSuffix(t, u.name); ok {
			t, unit = strings.TrimSpace(rest), u.size
			break
		}
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || t == "" || strings.ContainsAny(t, "eExXpP_") {
		return 0, fmt.Errorf("invalid size %q; write a number with a unit of KiB, MiB or GiB, such as \"512MiB\"", s)
	}
	n := v * float64(unit)
	if n <= 0 || math.IsInf(n, 0) || n >= math.MaxInt64/2 {
		return 0, fmt.Errorf("size %q is out of range; want more than 0 and less than 4 EiB", s)
	}
	return int64(n), nil
}

// formatSize writes n bytes the way messages show a limit: "512 MiB",
// "1.5 GiB", "1000 bytes".
func formatSize(n int64) string {
	for _, u := range sizeUnits[:4] {
		if n >= u.size && n%(u.size/4) == 0 {
			return strconv.FormatFloat(float64(n)/float64(u.size), 'f', -1, 64) + " " + u.name
		}
	}
	return strconv.FormatInt(n, 10) + " bytes"
}

// validateLimits reports the problems of l, the limits of server (or of the
// top level, when server is "").
func (p *parser) validateLimits(server string, l Limits) {
	if l.Memory != "" {
		if n, err := parseSize(l.Memory); err != nil {
			p.errorf(server, "limits.memory", "%v", err)
		} else if n < 1<<20 {
			p.errorf(server, "limits.memory", "%s is less than 1 MiB, too little for any server to start; raise it, or remove the key for no limit", formatSize(n))
		}
	}
	if l.CPU < 0 || l.CPU > 0 && l.CPU < 0.01 || math.IsNaN(l.CPU) {
		p.errorf(server, "limits.cpu", "want a number of CPUs of at least 0.01, such as 1.5, got %v; or remove the key for no limit", l.CPU)
	}
	if l.Pids < 0 {
		p.errorf(server, "limits.pids", "must not be negative, got %d; use a positive number such as 256, or remove the key for no limit", l.Pids)
	}
}

// limits returns the limits of server s: its own where set, else the top
// level's. A remote server has none.
func (c *Config) limits(s *ServerConfig) Limits {
	if s.URL != "" {
		return Limits{}
	}
	return Limits{
		Memory: firstSet(s.Limits.Memory, c.Limits.Memory),
		CPU:    firstSet(s.Limits.CPU, c.Limits.CPU),
		Pids:   firstSet(s.Limits.Pids, c.Limits.Pids),
	}
}
