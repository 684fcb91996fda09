package main

import (
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// startLoggedGateway starts a gateway for configJSON (see writeConfig), with
// no front end, whose log the test reads, and waits for every backend's
// first start. Everything stops when the test ends.
func startLoggedGateway(t *testing.T, configJSON string) (*Gateway, *logLines, string) {
	t.Helper()
	dir := stateDir(t)
	cfg, err := LoadConfig(writeConfig(t, configJSON, dir), func(string) (string, bool) { return "", false }, func(string) {})
	if err != nil {
		t.Fatal(err)
	}
	ll := &logLines{t: t, more: make(chan struct{})}
	gw := NewGateway(cfg, slog.New(slog.NewTextHandler(ll, &slog.HandlerOptions{Level: slog.LevelDebug})), nil)
	gw.Start()
	t.Cleanup(func() {
		gw.Stop(nil)
		requireGone(t, dir)
	})
	for _, b := range gw.backends {
		<-b.firstDone
	}
	return gw, ll, dir
}

// linesMatching returns the lines of l logged so far, from the one at index
// from on, that match re, and the index after the last line logged.
func (l *logLines) linesMatching(from int, re string) (got []string, end int) {
	rx := regexp.MustCompile(re)
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range l.lines[from:] {
		if rx.MatchString(line) {
			got = append(got, line)
		}
	}
	return got, len(l.lines)
}

// waitAfter waits, at most 30s, for a line that matches re, logged at
// index from or later, and returns the lines logged from there to it.
func (l *logLines) waitAfter(from int, re string) []string {
	l.t.Helper()
	rx := regexp.MustCompile(re)
	timeout := time.After(30 * time.Second)
	for {
		l.mu.Lock()
		lines, more := slices.Clone(l.lines[from:]), l.more
		l.mu.Unlock()
		if i := slices.IndexFunc(lines, rx.MatchString); i >= 0 {
			return lines[:i+1]
		}
		select {
		case <-more:
		case <-timeout:
			l.t.Fatalf("no log line matching %q within 30s", re)
		}
	}
}

func TestEachNameCollisionIsLoggedOnce(t *testing.T) {
	t.Parallel()
	// a and b offer the same tools; each server that becomes ready, and
	// the reload below, rebuild the catalog with the collisions still there.
	gw, log, dir := startLoggedGateway(t, `{"mcpServers":{
		"a": {"command":"FAKE","args":["-state","STATE","-name","a"]},
		"b": {"command":"FAKE","args":["-state","STATE","-name","b"]}
	}}`)
	next := strings.NewReplacer("FAKE", fakeserverBin, "STATE", dir).Replace(`{"mcpServers":{
		"a": {"command":"FAKE","args":["-state","STATE","-name","a"]},
		"b": {"command":"FAKE","args":["-state","STATE","-name","b"]},
		"c": {"command":"FAKE","args":["-state","STATE","-name","c","-prefix","c_"]}
	}}`)
	cfg, err := ParseConfig("next.json", []byte(next), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	gw.Reload(cfg)
	log.waitAfter(0, `msg=state server=c .*to=ready`)

	lines, _ := log.linesMatching(0, `name collision`)
	if len(lines) == 0 {
		t.Fatal("no name collision logged; the servers' tools should collide")
	}
	seen := map[string]int{}
	for _, line := range lines {
		seen[regexp.MustCompile(`^time=\S+ `).ReplaceAllString(line, "")]++
	}
	for line, n := range seen {
		if n > 1 {
			t.Errorf("logged %d times, want once: %s", n, line)
		}
	}
}

func TestACrashLogsBackoffOnceAndTheRestartNamesTheNewProcess(t *testing.T) {
	t.Parallel()
	_, log, dir := startLoggedGateway(t, `{"restartDelay":"10ms","mcpServers":{
		"a": {"command":"FAKE","args":["-state","STATE","-name","a"]}
	}}`)
	old := serversNamed(t, dir, "a")[0].PID
	_, from := log.linesMatching(0, "")
	syscall.Kill(old, syscall.SIGKILL)
	lines := log.waitAfter(from, `msg=state .*to=ready`)

	after := strings.Join(lines, "")
	states := regexp.MustCompile(`msg=state .*`).FindAllString(after, -1)
	if n := len(regexp.MustCompile(`to=backoff`).FindAllString(after, -1)); n != 1 {
		t.Errorf("the crash logged %d lines for the move to backoff, want 1:\n%s", n, strings.Join(states, "\n"))
	}
	var pid int
	if _, err := fmt.Sscanf(regexp.MustCompile(`msg=started server=a pid=[0-9]+`).FindString(after), "msg=started server=a pid=%d", &pid); err != nil {
		t.Fatalf("no start logged after the crash: %v\n%s", err, after)
	}
	for _, s := range states {
		if strings.Contains(s, "to=starting") && strings.Contains(s, fmt.Sprintf("pid=%d", old)) {
			t.Errorf("the restart after the crash of process %d is logged as\n%s\nwhich names the dead process", old, s)
		}
		if strings.Contains(s, "to=ready") && !strings.Contains(s, fmt.Sprintf("pid=%d", pid)) {
			t.Errorf("the restart of process %d is logged as\n%s\nwant pid=%d", pid, s, pid)
		}
	}
}
