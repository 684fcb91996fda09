package main

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseSizeTakesBinaryUnitsOnly(t *testing.T) {
	tests := []struct {
		in      string
		want    int64
		wantErr string
	}{
		{"512MiB", 512 << 20, ""},
		{"1.5GiB", 3 << 29, ""},
		{"64 KiB", 64 << 10, ""},
		{"1048576", 1 << 20, ""},
		{"2TiB", 2 << 40, ""},
		{"512MB", 0, `invalid size "512MB"; write a number with a unit of KiB, MiB or GiB, such as "512MiB"`},
		{"1G", 0, `invalid size "1G"`},
		{"MiB", 0, `invalid size "MiB"`},
		{"1e9", 0, `invalid size "1e9"`},
		{"0MiB", 0, `size "0MiB" is out of range`},
		{"-5MiB", 0, `size "-5MiB" is out of range`},
	}
	for _, tt := range tests {
		got, err := parseSize(tt.in)
		switch {
		case tt.wantErr == "" && (err != nil || got != tt.want):
			t.Errorf("parseSize(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
		case tt.wantErr != "" && (err == nil || !strings.HasPrefix(err.Error(), tt.wantErr)):
			t.Errorf("parseSize(%q) error = %v, want %q", tt.in, err, tt.wantErr)
		}
	}
	for n, want := range map[int64]string{512 << 20: "512 MiB", 3 << 29: "1.5 GiB", 64 << 10: "64 KiB", 1000: "1000 bytes"} {
		if got := formatSize(n); got != want {
			t.Errorf("formatSize(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestLimitsAreCheckedAndAServersOwnOverrideTheTopLevels(t *testing.T) {
	c := mustParse(t, `{"limits": {"memory": "1GiB", "pids": 100}, "mcpServers": {
		"a": {"command": "x", "limits": {"memory": "512MiB", "cpu": 1.5}},
		"b": {"command": "x"}}}`, nil)
	if diff := cmp.Diff(Limits{Memory: "512MiB", CPU: 1.5, Pids: 100}, c.limits(c.MCPServers["a"])); diff != "" {
		t.Errorf("limits of a (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(Limits{Memory: "1GiB", Pids: 100}, c.limits(c.MCPServers["b"])); diff != "" {
		t.Errorf("limits of b (-want +got):\n%s", diff)
	}
	if got := c.limits(c.MCPServers["a"]).memoryBytes(); got != 512<<20 {
		t.Errorf("memoryBytes = %d, want %d", got, 512<<20)
	}

	tests := []struct{ name, src, want string }{
		{"a size without a binary unit", `{"mcpServers": {"a": {"command": "x", "limits": {"memory": "512MB"}}}}`,
			`config.json: mcpServers.a.limits.memory: invalid size "512MB"; write a number with a unit of KiB, MiB or GiB, such as "512MiB"`},
		{"too little memory to start", `{"limits": {"memory": "100KiB"}, "mcpServers": {"a": {"command": "x"}}}`,
			`config.json: limits.memory: 100 KiB is less than 1 MiB, too little for any server to start; raise it, or remove the key for no limit`},
		{"a negative cpu", `{"mcpServers": {"a": {"command": "x", "limits": {"cpu": -1}}}}`,
			`config.json: mcpServers.a.limits.cpu: want a number of CPUs of at least 0.01, such as 1.5, got -1; or remove the key for no limit`},
		{"a negative pids", `{"mcpServers": {"a": {"command": "x", "limits": {"pids": -3}}}}`,
			`config.json: mcpServers.a.limits.pids: must not be negative, got -3; use a positive number such as 256, or remove the key for no limit`},
		{"a misspelt limit", `{"mcpServers": {"a": {"command": "x", "limits": {"memroy": "1GiB"}}}}`,
			`config.json: mcpServers.a.limits: unknown field "memroy"; did you mean "memory"?`},
		{"limits of the wrong type", `{"mcpServers": {"a": {"command": "x", "limits": "1GiB"}}}`,
			`config.json: mcpServers.a.limits: want an object such as {"memory": "512MiB", "cpu": 1.5, "pids": 256}, got string`},
		{"limits on a remote server", `{"mcpServers": {"a": {"url": "https://example.com/mcp", "limits": {"pids": 5}}}}`,
			`config.json: mcpServers.a.limits: a remote server (with "url") has no limits; remove one of the two`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err, _ := parse(tt.src, nil)
			if err == nil || err.Error() != tt.want {
				t.Errorf("ParseConfig(%s) error =\n%v\nwant\n%s", tt.src, err, tt.want)
			}
		})
	}
}

func TestAChangeOfLimitsRestartsTheServerAtReload(t *testing.T) {
	before := mustParse(t, `{"mcpServers": {"a": {"command": "x"}}}`, nil)
	own := mustParse(t, `{"mcpServers": {"a": {"command": "x", "limits": {"pids": 10}}}}`, nil)
	top := mustParse(t, `{"limits": {"memory": "1GiB"}, "mcpServers": {"a": {"command": "x"}}}`, nil)
	for name, after := range map[string]*Config{"its own limits": own, "the top level's limits": top} {
		if fingerprint(before, before.MCPServers["a"]) == fingerprint(after, after.MCPServers["a"]) {
			t.Errorf("a change of %s leaves the server's fingerprint as it was: a reload would not apply it", name)
		}
	}
}
