package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// exampleNotConfigs are the files of examples/ that are no config corral
// reads, with what they are.
var exampleNotConfigs = map[string]string{
	"corral.service":   "a systemd unit, whose config is /etc/corral/config.json",
	"Dockerfile":       "builds the image kubernetes.yaml runs",
	"haproxy.cfg":      "HAProxy in front of three replicas, run by .ci/replicas/run",
	"team-alice.token": "an EXAMPLE token, alice's in team.json",
	"team-bob.token":   "an EXAMPLE token, bob's in team.json",
	"team-audit.jsonl": "the audit trail team.json appends to (-check creates it; not in git)",
}

// exampleNeeds returns the environment variables an example says, in its
// "needs:" comment lines, it needs: "// needs: env A, env B" ("#" in YAML).
// Anything else it might need is a failure: the test could not provide it.
func exampleNeeds(t *testing.T, data []byte) []string {
	t.Helper()
	var vars []string
	for _, m := range regexp.MustCompile(`(?m)^\s*(?://|#)\s*needs:(.*)$`).FindAllSubmatch(data, -1) {
		for _, need := range strings.Split(string(m[1]), ",") {
			name, ok := strings.CutPrefix(strings.TrimSpace(need), "env ")
			if !ok {
				t.Fatalf("a need of %q that this test cannot provide: write needs as \"env NAME\"", need)
			}
			vars = append(vars, strings.TrimSpace(name))
		}
	}
	return vars
}

// kubernetesConfig returns the config.json of the ConfigMap in data, a
// Kubernetes manifest, unindented.
func kubernetesConfig(t *testing.T, data []byte) []byte {
	t.Helper()
	_, rest, ok := bytes.Cut(data, []byte("config.json: |\n"))
	if !ok {
		t.Fatal("no config.json in the manifest's ConfigMap")
	}
	var out []byte
	indent := ""
	for _, line := range strings.Split(string(rest), "\n") {
		if indent == "" {
			indent = line[:len(line)-len(strings.TrimLeft(line, " "))]
		}
		if !strings.HasPrefix(line, indent) {
			break
		}
		out = append(out, strings.TrimPrefix(line, indent)+"\n"...)
	}
	return out
}

// TestEveryExampleChecks runs corral -check over every example, with only
// PATH, HOME and what the example's "needs:" comment names in the
// environment: each runs as shipped on a machine with Go and Node, or says
// what it needs. Without what it names, -check must fail: the comment is
// true.
func TestEveryExampleChecks(t *testing.T) {
	t.Parallel()
	entries, err := os.ReadDir("examples")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		name := e.Name()
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if what, ok := exampleNotConfigs[name]; ok {
				t.Logf("not a config: %s", what)
				return
			}
			data, err := os.ReadFile(filepath.Join("examples", name))
			if err != nil {
				t.Fatal(err)
			}
			path, _ := filepath.Abs(filepath.Join("examples", name))
			switch filepath.Ext(name) {
			case ".json":
			case ".yaml":
				path = filepath.Join(t.TempDir(), "config.json")
				os.WriteFile(path, kubernetesConfig(t, data), 0o600)
			default:
				t.Fatalf("examples/%s is no config -check can read; list it in exampleNotConfigs with what it is", name)
			}
			if bytes.Contains(data, []byte(`"npx"`)) {
				if _, err := exec.LookPath("npx"); err != nil {
					t.Skip("it runs npx, and this machine has no Node")
				}
			}
			needs := exampleNeeds(t, data)
			check := func(env []string) (string, error) {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				cmd := exec.CommandContext(ctx, corralBin, "-check", "-config", path)
				cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}, env...)
				out, err := cmd.CombinedOutput()
				return string(out), err
			}
			var env []string
			for _, v := range needs {
				env = append(env, v+"=example-value")
			}
			out, err := check(env)
			if err != nil {
				t.Fatalf("corral -check -config examples/%s with %q: %v\n%s", name, env, err, out)
			}
			if !regexp.MustCompile(`(?m)^\d+ servers?: \d+ ok, 0 errors`).MatchString(out) {
				t.Errorf("-check of examples/%s ends without a summary of no errors:\n%s", name, out)
			}
			for _, v := range needs {
				if out, err := check(nil); err == nil || !strings.Contains(out, v) {
					t.Errorf("examples/%s says it needs %s, but -check without it: %v\n%s", name, v, err, out)
				}
			}
		})
	}
}
