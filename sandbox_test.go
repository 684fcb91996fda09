package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseConfigReadsASandbox(t *testing.T) {
	c := mustParse(t, `{"mcpServers":{"fs":{"command":"x","sandbox":{"network":false,"readOnly":["/"],"writable":["/srv/data"],"noNewPrivileges":true}}}}`, nil)
	no, yes := false, true
	want := &SandboxConfig{Network: &no, ReadOnly: []string{"/"}, Writable: []string{"/srv/data"}, NoNewPrivileges: &yes}
	if diff := cmp.Diff(want, c.MCPServers["fs"].Sandbox); diff != "" {
		t.Errorf("ParseConfig: sandbox (-want +got):\n%s", diff)
	}
	if c := mustParse(t, `{"mcpServers":{"fs":{"command":"x"}}}`, nil); c.MCPServers["fs"].Sandbox != nil {
		t.Errorf("ParseConfig: a server without a sandbox got %+v", c.MCPServers["fs"].Sandbox)
	}
}

func TestParseConfigRefusesABadSandboxWithTheFieldAndTheFix(t *testing.T) {
	for _, tc := range []struct {
		name, server, want string
	}{
		{"a misspelt rule is not silently dropped", `"command":"x","sandbox":{"writeable":["/srv"]}`,
			`mcpServers.fs.sandbox: unknown field "writeable"; did you mean "writable"?`},
		{"a rule of the wrong type", `"command":"x","sandbox":{"network":"off"}`,
			`mcpServers.fs.sandbox: network: want true or false, got string`},
		{"a sandbox that is not an object", `"command":"x","sandbox":true`,
			`mcpServers.fs.sandbox: want an object such as {"network": false}, got bool`},
		{"a relative path", `"command":"x","sandbox":{"writable":["/srv","data"]}`,
			`mcpServers.fs.sandbox.writable[1]: "data" is not an absolute path; write it in full, such as "/srv/data"`},
		{"a remote server", `"url":"https://example.com/mcp","sandbox":{"network":false}`,
			`mcpServers.fs.sandbox: a remote server (with "url") runs elsewhere and has no sandbox; remove it`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err, _ := parse(`{"mcpServers":{"fs":{`+tc.server+`}}}`, nil)
			if err == nil || !strings.Contains(err.Error(), "config.json: "+tc.want) {
				t.Errorf("ParseConfig error = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestSandboxPlanHoldsWhatTheMachineMustEnforce(t *testing.T) {
	no, yes := false, true
	root := sandboxHost{root: true, landlock: 3}
	user := sandboxHost{landlock: 3}
	for _, tc := range []struct {
		name string
		sb   *SandboxConfig
		host sandboxHost
		want *sandboxPlan
	}{
		{"no sandbox, no shim", nil, root, nil},
		{"an empty sandbox, no shim", &SandboxConfig{}, root, nil},
		{"network allowed, no shim", &SandboxConfig{Network: &yes}, root, nil},
		{"no network as root: a network namespace", &SandboxConfig{Network: &no}, root,
			&sandboxPlan{Server: "s", NewNet: true}},
		{"no network as a user: a user namespace too", &SandboxConfig{Network: &no}, user,
			&sandboxPlan{Server: "s", NewNet: true, NewUser: true}},
		{"filesystem rules as root", &SandboxConfig{ReadOnly: []string{"/"}}, root,
			&sandboxPlan{Server: "s", Landlock: 3, ReadOnly: []string{"/"}}},
		{"filesystem rules as a user need no_new_privs", &SandboxConfig{Writable: []string{"/"}}, user,
			&sandboxPlan{Server: "s", Landlock: 3, NoNewPrivs: true, Writable: []string{"/"}}},
		{"no_new_privs alone", &SandboxConfig{NoNewPrivileges: &yes}, root,
			&sandboxPlan{Server: "s", NoNewPrivs: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := newSandboxPlan("s", tc.sb, tc.host)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("newSandboxPlan (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSandboxPlanRefusesWhatCannotBeEnforced(t *testing.T) {
	noLandlock := sandboxHost{root: true, landlockErr: errors.New("this kernel has no Landlock (landlock_create_ruleset: ENOSYS)")}
	for _, tc := range []struct {
		name string
		sb   *SandboxConfig
		host sandboxHost
		want string
	}{
		{"filesystem rules without Landlock", &SandboxConfig{ReadOnly: []string{"/"}}, noLandlock,
			"sandbox.readOnly and sandbox.writable cannot be enforced: this kernel has no Landlock (landlock_create_ruleset: ENOSYS); corral does not run a server without the filesystem rules it asks for"},
		{"a path that is not there", &SandboxConfig{ReadOnly: []string{"/"}, Writable: []string{"/no/such/dir"}}, sandboxHost{root: true, landlock: 1},
			"sandbox.writable[0]: stat /no/such/dir: no such file or directory; create it, or remove it from the list"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := newSandboxPlan("s", tc.sb, tc.host)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("newSandboxPlan = %+v, %v; want the error %q", p, err, tc.want)
			}
		})
	}
}

func TestSandboxReportSaysPerServerWhatIsEnforcedOrRefused(t *testing.T) {
	c := mustParse(t, `{"mcpServers":{
		"net": {"command":"x","sandbox":{"network":false}},
		"fs":  {"command":"x","sandbox":{"readOnly":["/"],"noNewPrivileges":true}},
		"off": {"command":"x","sandbox":{"network":true},"disabled":true},
		"none":{"command":"x"}}}`, nil)
	for _, tc := range []struct {
		name string
		host sandboxHost
		want string
	}{
		{"root with Landlock", sandboxHost{root: true, landlock: 7}, `sandboxes, as enforced on this machine:
  fs: network: not restricted; filesystem: enforced: Landlock ABI 7; no_new_privs: on
  net: network: enforced: a network namespace of its own, only loopback up; filesystem: not restricted; no_new_privs: off
`},
		{"a user without Landlock or namespaces", sandboxHost{landlockErr: errors.New("this kernel has no Landlock (landlock_create_ruleset: ENOSYS)"), netErr: errors.New("no user namespaces")}, `sandboxes, as enforced on this machine:
  fs: network: not restricted; filesystem: REFUSED: this kernel has no Landlock (landlock_create_ruleset: ENOSYS); no_new_privs: on
  fs: will not be started on this machine
  net: network: REFUSED: no user namespaces; filesystem: not restricted; no_new_privs: off
  net: will not be started on this machine
`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, string(sandboxReport(c, tc.host))); diff != "" {
				t.Errorf("sandboxReport (-want +got):\n%s", diff)
			}
		})
	}
	if got := sandboxReport(mustParse(t, `{"mcpServers":{"none":{"command":"x"}}}`, nil), sandboxHost{}); len(got) != 0 {
		t.Errorf("sandboxReport with no sandbox = %q, want nothing", got)
	}
}

func TestTopLevelSandboxIsEveryLocalServersUnlessItOverridesARule(t *testing.T) {
	c := mustParse(t, `{"sandbox":{"network":false,"readOnly":["/"],"noNewPrivileges":true},"mcpServers":{
		"plain":    {"command":"x"},
		"networked":{"command":"x","sandbox":{"network":true,"writable":["/tmp"]}},
		"loose":    {"command":"x","sandbox":{"noNewPrivileges":false,"readOnly":[]}},
		"remote":   {"url":"https://example.com/mcp"}}}`, nil)
	no, yes := false, true
	for name, want := range map[string]*SandboxConfig{
		"plain":     {Network: &no, ReadOnly: []string{"/"}, NoNewPrivileges: &yes},
		"networked": {Network: &yes, ReadOnly: []string{"/"}, Writable: []string{"/tmp"}, NoNewPrivileges: &yes},
		"loose":     {Network: &no, ReadOnly: []string{}, NoNewPrivileges: &no},
		"remote":    nil,
	} {
		if diff := cmp.Diff(want, c.sandbox(c.MCPServers[name])); diff != "" {
			t.Errorf("sandbox of %s (-want +got):\n%s", name, diff)
		}
	}
	if c := mustParse(t, `{"mcpServers":{"plain":{"command":"x"}}}`, nil); c.sandbox(c.MCPServers["plain"]) != nil {
		t.Errorf("sandbox with none anywhere = %+v, want nil", c.sandbox(c.MCPServers["plain"]))
	}
	for _, tc := range []struct{ src, want string }{
		{`{"sandbox":{"writable":["data"]},"mcpServers":{"a":{"command":"x"}}}`,
			`config.json: sandbox.writable[0]: "data" is not an absolute path; write it in full, such as "/srv/data"`},
		{`{"sandbox":{"netwrk":false},"mcpServers":{"a":{"command":"x"}}}`,
			`config.json: sandbox: unknown field "netwrk"; did you mean "network"?`},
	} {
		if _, err, _ := parse(tc.src, nil); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseConfig(%s) error = %v, want %q", tc.src, err, tc.want)
		}
	}
}
