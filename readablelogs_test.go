package main

// Tests of the log a person reads: one line for containment, one error per
// cause of failed starts with the plan of retries, the telling line of a
// failed start's stderr, servers' log lines at their own level, and -stdio's
// health and shutdown lines.

import (
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// writeScript writes an executable shell script with body in a temporary
// directory and returns its path.
func writeScript(t *testing.T, body string) string {
	t.Helper()
	if _, err := os.Stat("/bin/sh"); err != nil {
		t.Skip("no /bin/sh to run a fake server's script")
	}
	path := filepath.Join(t.TempDir(), "server.sh")
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestFailedStartsLogOneErrorPerCauseWithTheRetryPlan(t *testing.T) {
	t.Parallel()
	// Two failed starts for one cause, then three for another; the attempt's
	// number differs each time, as a PID or a time would.
	script := writeScript(t, `n=$(cat "$0.count" 2>/dev/null || echo 0); n=$((n+1)); echo $n > "$0.count"
if [ $n -le 2 ]; then echo "fatal: cause A (attempt $n)" >&2; else echo "fatal: cause B (attempt $n)" >&2; fi
exit 1
`)
	_, log, _ := startLoggedGateway(t, `{"restartDelay":"10ms","maxRestarts":4,"mcpServers":{
		"a": {"command":"`+script+`"}}}`)
	log.waitAfter(0, `msg=state server=a .*to=failed`)

	errs, _ := log.linesMatching(0, `level=ERROR msg="server did not start" server=a`)
	if len(errs) != 2 {
		t.Fatalf("logged %d errors for failed starts, want 2 (one per cause):\n%s", len(errs), strings.Join(errs, ""))
	}
	for i, cause := range []string{"cause A", "cause B"} {
		if !strings.Contains(errs[i], cause) {
			t.Errorf("error %d = %s\nwant it to name %s", i, errs[i], cause)
		}
		if !regexp.MustCompile(`retry="in \S+, .*then giving up until failedRetry`).MatchString(errs[i]) {
			t.Errorf("error %d = %s\nwant the plan of retries", i, errs[i])
		}
	}
	if again, _ := log.linesMatching(0, `level=DEBUG msg="server did not start, again for the same cause"`); len(again) != 2 {
		t.Errorf("logged %d failed starts at debug level as the same cause again, want 2 (one of A, one of B):\n%s", len(again), strings.Join(again, ""))
	}
	if info, _ := log.linesMatching(0, `level=INFO msg=state server=a`); len(info) != 1 || !strings.Contains(info[0], "to=failed") {
		t.Errorf("logged these moves of server a at info level:\n%s\nwant only its move to failed: its retries are at debug level", strings.Join(info, ""))
	}
	if started, _ := log.linesMatching(0, `level=INFO msg=started server=a`); len(started) != 1 {
		t.Errorf("logged %d starts of server a at info level, want only the first: the retries are at debug level", len(started))
	}
}

func TestAMissingCommandIsNamedWithTheRetryPlan(t *testing.T) {
	t.Parallel()
	_, log, _ := startLoggedGateway(t, `{"restartDelay":"1s","mcpServers":{
		"a": {"command":"corral-test-no-such-command"}}}`)
	line := log.waitAfter(0, `msg="server did not start"`)
	got := line[len(line)-1]
	for _, want := range []string{
		`command \"corral-test-no-such-command\" not found on PATH`,
		// 1s then doubling, five restarts, by default.
		`retry="in 1.`, `, 2s, 4s, 8s, 16s (each but the first plus up to half again), then giving up until failedRetry (5m0s) has passed"`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("logged %s\nwant it to contain %s", got, want)
		}
	}
}

func TestAFailedStartQuotesNPMsErrorLineNotItsBoilerplate(t *testing.T) {
	t.Parallel()
	// What npx writes when the package is not in the registry (npm 10).
	script := writeScript(t, `cat >&2 <<'EOF'
npm error code E404
npm error 404 Not Found - GET https://registry.npmjs.org/@example%2fnope - Not found
npm error 404
npm error 404  '@example/nope@*' is not in this registry.
npm error 404
npm error 404 Note that you can also install from a
npm error 404 tarball, folder, http url, or git url.
npm error A complete log of this run can be found in: /root/.npm/_logs/2026-11-25T20_00_00_000Z-debug-0.log
EOF
exit 1
`)
	_, log, _ := startLoggedGateway(t, `{"restartDelay":"1m","mcpServers":{"a": {"command":"`+script+`"}}}`)
	lines := log.waitAfter(0, `msg="server did not start"`)
	got := lines[len(lines)-1]
	if want := `its last stderr line: npm error 404 Not Found - GET https://registry.npmjs.org/@example%2fnope - Not found`; !strings.Contains(got, want) {
		t.Errorf("logged %s\nwant it to quote npm's error line: %s", got, want)
	}
	if strings.Contains(got, "A complete log") {
		t.Errorf("logged %s\nwhich quotes npm's boilerplate", got)
	}
	if lines, _ := log.linesMatching(0, `A complete log`); len(lines) != 1 || !strings.Contains(lines[0], "level=DEBUG") {
		t.Errorf("npm's boilerplate is logged as\n%s\nwant once, at debug level", strings.Join(lines, ""))
	}
}

func TestFailureLineSkipsBoilerplate(t *testing.T) {
	for _, tc := range []struct {
		name, stderr, want string
	}{
		{"npm 10, package not in the registry",
			"npm error code E404\nnpm error 404 Not Found - GET https://registry.npmjs.org/x - Not found\nnpm error 404\nnpm error 404  'x@*' is not in this registry.\nnpm error A complete log of this run can be found in: /root/.npm/_logs/a-debug-0.log",
			"npm error 404 Not Found - GET https://registry.npmjs.org/x - Not found"},
		{"npm 6, whose log's path is on a line of its own",
			"npm ERR! code E404\nnpm ERR! 404 Not Found - GET https://registry.npmjs.org/x - Not found\nnpm ERR! 404 \nnpm ERR! A complete log of this run can be found in:\nnpm ERR!     /home/u/.npm/_logs/2025-04-09T10_20_14_685Z-debug-0.log",
			"npm ERR! 404 Not Found - GET https://registry.npmjs.org/x - Not found"},
		{"npm, a file not found",
			"npm error code ENOENT\nnpm error syscall open\nnpm error path /x/package.json\nnpm error errno -2\nnpm error enoent Could not read package.json: Error: ENOENT: no such file or directory, open '/x/package.json'\nnpm error enoent This is related to npm not being able to find a file.\nnpm error enoent\nnpm error A complete log of this run can be found in: /r/.npm/_logs/a-debug-0.log",
			"npm error enoent Could not read package.json: Error: ENOENT: no such file or directory, open '/x/package.json'"},
		{"npm's notice after the error",
			"npm error could not determine executable to run\nnpm error A complete log of this run can be found in: /r/a.log\nnpm notice New major version of npm available! 10.2.4 -> 11.0.0\nnpm notice To update run: npm install -g npm@11.0.0",
			"npm error could not determine executable to run"},
		{"Node.js, an uncaught error",
			"node:internal/modules/cjs/loader:1080\n  throw err;\n  ^\nError: Cannot find module '/x/index.js'\n    at Module._resolveFilename (node:internal/modules/cjs/loader:1077:15)\n    at node:internal/main/run_main_module:23:47 {\n  code: 'MODULE_NOT_FOUND',\n  requireStack: []\n}\nNode.js v18.19.0",
			"Error: Cannot find module '/x/index.js'"},
		{"uv, progress then a Python error",
			"Resolved 20 packages in 1.2s\nInstalled 20 packages in 40ms\n + anyio==4.0.0\nTraceback (most recent call last):\n  File \"/x/server.py\", line 3, in <module>\nModuleNotFoundError: No module named 'mcp'",
			"ModuleNotFoundError: No module named 'mcp'"},
		{"uv, progress then nothing",
			"Resolved 20 packages in 1.2s\nPrepared 3 packages in 500ms\nInstalled 20 packages in 40ms",
			"Installed 20 packages in 40ms"},
		{"pip, its upgrade notice after the error",
			"ERROR: Could not find a version that satisfies the requirement nope (from versions: none)\nERROR: No matching distribution found for nope\n[notice] A new release of pip is available: 23.0 -> 24.0\n[notice] To update, run: pip install --upgrade pip",
			"ERROR: No matching distribution found for nope"},
		{"a plain last line", "starting\nfatal: cannot open database", "fatal: cannot open database"},
		{"nothing", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var lines []string
			if tc.stderr != "" {
				lines = strings.Split(tc.stderr, "\n")
			}
			if got := failureLine(lines); got != tc.want {
				t.Errorf("failureLine = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestStderrLevelOfServersLogLines(t *testing.T) {
	for line, want := range map[string]string{
		`{"level":10,"time":1,"msg":"trace"}`:        "DEBUG",
		`{"level":20,"time":1,"msg":"debug"}`:        "DEBUG",
		`{"level":30,"time":1,"msg":"info"}`:         "INFO",
		`{"level":40,"time":1,"msg":"warn"}`:         "WARN",
		`{"level":50,"time":1,"msg":"error"}`:        "ERROR",
		`{"level":60,"time":1,"msg":"fatal"}`:        "ERROR",
		`{"time":1, "level": 20, "msg":"spaced"}`:    "DEBUG",
		`{"level":"debug","msg":"named"}`:            "DEBUG",
		`{"level": "WARNING","msg":"python"}`:        "WARN",
		`{"severity":"ERROR","message":"cloud"}`:     "ERROR",
		`{"msg":"level is 50","v":30}`:               "INFO",
		`{"level":30,"msg":"set level=debug"}`:       "INFO",
		"npm error code E404":                        "ERROR",
		"npm ERR! 404 Not Found":                     "ERROR",
		"npm warn exec The following package was...": "WARN",
		"npm notice New major version":               "INFO",
	} {
		if got := stderrLevel(line).String(); got != want {
			t.Errorf("stderrLevel(%q) = %s, want %s", line, got, want)
		}
	}
}

func TestServersJSONLogLinesAreLoggedAtTheirLevel(t *testing.T) {
	t.Parallel()
	script := writeScript(t, `echo '{"level":20,"msg":"pino debug"}' >&2
echo '{"level":30,"msg":"pino info"}' >&2
echo '{"level":40,"msg":"pino warn"}' >&2
echo '{"level":50,"msg":"pino error"}' >&2
echo '{"level":"debug","msg":"named debug"}' >&2
exec "$@"
`)
	_, log, _ := startLoggedGateway(t, `{"mcpServers":{"a": {"command":"`+script+`","args":["FAKE","-state","STATE"]}}}`)
	log.waitAfter(0, `named debug`)
	for msg, level := range map[string]string{
		"pino debug": "DEBUG", "pino info": "INFO", "pino warn": "WARN", "pino error": "ERROR", "named debug": "DEBUG",
	} {
		got, _ := log.linesMatching(0, regexp.QuoteMeta(msg))
		if len(got) != 1 || !strings.Contains(got[0], "level="+level+" ") {
			t.Errorf("the server's line %q is logged as\n%s\nwant it once at level %s", msg, strings.Join(got, ""), level)
		}
	}
}

func TestRestartPlanDoublesUpToTheGiveUp(t *testing.T) {
	p := &restartPolicy{s: Supervision{RestartDelay: Duration(time.Second), MaxRestartDelay: Duration(5 * time.Second),
		MaxRestarts: 5, RestartWindow: Duration(time.Minute), StableAfter: Duration(time.Minute)}, jitter: func() float64 { return 0 }}
	now := time.Now()
	wait, failing := p.afterExit(now, 0)
	if failing {
		t.Fatal("afterExit gave up at the first exit")
	}
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second, 5 * time.Second}
	if got := p.plan(wait); !slicesEqual(got, want) {
		t.Errorf("plan after the first exit = %v, want %v", got, want)
	}
	// The plan is what the policy then does, exit after exit.
	for i := 1; ; i++ {
		now = now.Add(time.Second)
		w, failing := p.afterExit(now, 0)
		if failing {
			if i != len(want) {
				t.Errorf("gave up at exit %d, want %d", i+1, len(want)+1)
			}
			break
		}
		if i >= len(want) || w != want[i] {
			t.Fatalf("restart %d waits %s, want the plan's %v", i+1, w, want)
		}
	}
}

func slicesEqual(a, b []time.Duration) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestContainmentIsOneShortLineAtStartAndItsDetailIsAtDebugLevel(t *testing.T) {
	var info, debug lockedBuffer
	cfg, err := ParseConfig("c.json", []byte(`{"mcpServers":{"a":{"command":"x","sandbox":{"network":false}},"b":{"command":"y"}}}`), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	tree := newCgroupTree(newInstanceID())
	logContainment(slog.New(slog.NewTextHandler(&info, nil)), tree, true, cfg)
	logContainment(slog.New(slog.NewTextHandler(&debug, &slog.HandlerOptions{Level: slog.LevelDebug})), tree, true, cfg)
	lines := strings.Split(strings.TrimSpace(info.String()), "\n")
	if len(lines) != 1 {
		t.Fatalf("logged at info level:\n%s\nwant one line", info.String())
	}
	if !regexp.MustCompile(`msg=containment cgroups="?(cgroup v[12]|off).* subreaper=on sandbox="1 server"`).MatchString(lines[0]) {
		t.Errorf("logged %s\nwant the cgroups, subreaper and sandbox in one line", lines[0])
	}
	if tree.on() && len(lines[0]) > 200 {
		t.Errorf("logged %d characters at info level, want a short line: %s", len(lines[0]), lines[0])
	}
	if !strings.Contains(debug.String(), "level=DEBUG msg=\"containment: "+tree.describe()) {
		t.Errorf("logged at debug level:\n%s\nwant the detail: %s", debug.String(), tree.describe())
	}
}

func TestStdioLogsNoDegradedHealthOnANormalStartAndStop(t *testing.T) {
	t.Parallel()
	c := startCorral(t, `{"mcpServers":{
		"a": {"command":"FAKE","args":["-state","STATE","-name","a","-prefix","a_"]},
		"b": {"command":"FAKE","args":["-state","STATE","-name","b","-prefix","b_"]}}}`, "-stdio")
	c.waitLog(`level=INFO msg=health status=ok servers="a=ready b=ready"`)
	c.stdin.Close()
	if code := c.waitExit(20 * time.Second); code != 0 {
		t.Errorf("corral exited with %d after stdin closed, want 0", code)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, line := range c.log {
		if strings.Contains(line, "degraded") {
			t.Errorf("a normal start and stop logged %s", line)
		}
	}
}

func TestStdinClosedThenSIGTERMRunsTheWholeStopLadder(t *testing.T) {
	t.Parallel()
	// The server stays after its stdin closes: its stop needs the ladder's
	// SIGTERM, after stopGrace.
	c := startCorral(t, `{"stopGrace":"1s","mcpServers":{
		"a": {"command":"FAKE","args":["-state","STATE","-name","a","-ignore-stdin-close"]}}}`, "-stdio")
	c.waitLog(`msg=state server=a .*to=ready`)
	c.stdin.Close()
	// The server says its stdin closed once corral's stop ladder has begun.
	c.waitLog(`stdin closed; running on`)
	c.cmd.Process.Signal(syscall.SIGTERM) // as clients do after closing stdin
	c.waitLog(`shutting down already; a further signal stops at once.* signal=terminated`)
	c.waitLog(`did not exit after stdin was closed; sending SIGTERM.* after=1s`)
	if code := c.waitExit(20 * time.Second); code != 0 {
		t.Errorf("corral exited with %d, want 0", code)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, line := range c.log {
		if strings.Contains(line, "second signal") {
			t.Errorf("the SIGTERM after stdin closed is taken as a second signal: %s", line)
		}
	}
}

func TestStdioLogsARestartingServersHealthOnceNotAtEveryRetry(t *testing.T) {
	t.Parallel()
	c := startCorral(t, `{"restartDelay":"10ms","maxRestarts":4,"mcpServers":{
		"a": {"command":"FAKE","args":["-state","STATE","-name","a"]},
		"missing": {"command":"corral-test-no-such-command"}}}`, "-stdio")
	c.waitLog(`level=WARN msg=health status=degraded servers="a=ready missing=failed"`)
	c.stdin.Close()
	if code := c.waitExit(20 * time.Second); code != 0 {
		t.Errorf("corral exited with %d after stdin closed, want 0", code)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var health []string
	for _, line := range c.log {
		if strings.Contains(line, "msg=health") {
			health = append(health, line)
		}
	}
	// Once in backoff (unless it was failed before a was ready), once failed;
	// not once for each of its five starts and moves to backoff.
	if len(health) < 1 || len(health) > 2 {
		t.Errorf("logged the health %d times:\n%s\nwant once or twice", len(health), strings.Join(health, "\n"))
	}
}
