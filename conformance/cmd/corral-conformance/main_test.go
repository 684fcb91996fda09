package main

import (
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corral-mcp/corral/conformance"
)

// TestCommandListsCasesAndRefusesBadFlags: -list prints every case once
// with its guarantee on its own line; a -run that matches nothing, an
// adapter that does not exist and a missing -adapter exit 2 with a message
// saying what to give. (Runs against gateways: .ci/junit/run.)
func TestCommandListsCasesAndRefusesBadFlags(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "corral-conformance")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "-list").Output()
	if err != nil {
		t.Fatalf("-list: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	cases := conformance.Cases()
	if len(lines) != len(cases) {
		t.Errorf("-list printed %d lines, want one per case, %d", len(lines), len(cases))
	}
	for i, c := range cases {
		if i < len(lines) && lines[i] != c.Name+": "+c.Guarantee {
			t.Errorf("-list line %d = %q, want %q", i+1, lines[i], c.Name+": "+c.Guarantee)
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-list", "-run", "NoSuchCase"}, `-run "NoSuchCase" matches no case`},
		{[]string{"-adapter", "no-such-gateway"}, "no adapter of that name is shipped (those are corral, mcp-hub, mcp-proxy, supergateway)"},
		{[]string{"-adapter", "./missing.json"}, "-adapter: open ./missing.json: no such file"},
		{nil, "-adapter is required"},
	} {
		out, err := exec.Command(bin, tc.args...).CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 {
			t.Errorf("corral-conformance %q: %v, want exit status 2", tc.args, err)
		}
		if !strings.Contains(string(out), tc.want) {
			t.Errorf("corral-conformance %q said %q, want %q", tc.args, out, tc.want)
		}
	}
}
