package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// health is what /healthz reports of a backend.
type health struct {
	Name     string       `json:"name"`
	State    backendState `json:"state"`
	PID      int          `json:"pid,omitempty"`
	Uptime   string       `json:"uptime,omitempty"`
	Restarts int          `json:"restarts"`
	Tools    int          `json:"tools"`
	InFlight int          `json:"inFlight"`
	LastExit string       `json:"lastExit,omitempty"`
	Error    string       `json:"error,omitempty"`
	RetryAt  string       `json:"retryAt,omitempty"`
	Stderr   []string     `json:"stderrTail,omitempty"`

	// Prompts, Resources and Templates count the server's prompts,
	// resources and resource templates, as Tools counts its tools.
	Prompts   int `json:"prompts"`
	Resources int `json:"resources"`
	Templates int `json:"resourceTemplates"`

	// Scope is "session" or "client" for a session- or client-scoped
	// server, whose Instances are its processes, one per session or client
	// (scope.go); else both are left out.
	Scope     string `json:"scope,omitempty"`
	Instances *int64 `json:"instances,omitempty"`
}

// reportScope completes h, the health of the catalog backend of a
// session-scoped server whose state is state, with its scope and number of
// processes. Once its probe has listed it, the server is ready: a
// session's call starts a process of its own. The caller holds b.mu.
func (sc *backendScope) reportScope(h *health, state backendState, scope string) {
	n := sc.instances.Load()
	h.Scope, h.Instances = scope, &n
	if state == stateStopped && sc.listed.Load() {
		h.State, h.Error, h.LastExit, h.Stderr = stateReady, "", "", nil
	}
}

// downLine says in one short line why a call cannot reach the server of h,
// which is not ready: its name, its state, the cause (the first clause of
// its error, and its last stderr line, each cut short) and when corral
// tries it again, at the time of now. It is what a client's model reads
// instead of the server's whole error, which the status page, /healthz and
// corral://status show.
func (h health) downLine(now time.Time) string {
	var b strings.Builder
	switch h.State {
	case stateFailed:
		fmt.Fprintf(&b, "server %q has failed", h.Name)
	case stateBackoff:
		fmt.Fprintf(&b, "server %q is down, waiting to restart", h.Name)
	default:
		fmt.Fprintf(&b, "server %q is %s", h.Name, h.State)
	}
	cause, _, _ := strings.Cut(h.Error, "; ")
	cause = strings.Replace(cause, fmt.Sprintf("server %q ", h.Name), "", 1) // named already
	if cause != "" {
		b.WriteString(": " + shortLine(cause, downCauseRunes))
	}
	if n := len(h.Stderr); n > 0 && h.Stderr[n-1] != "" && !strings.Contains(cause, h.Stderr[n-1]) {
		fmt.Fprintf(&b, ", its last stderr line: %s", shortLine(h.Stderr[n-1], downCauseRunes))
	}
	if t, err := time.Parse(time.RFC3339, h.RetryAt); err == nil {
		verb := "tries it again"
		if h.State == stateBackoff {
			verb = "restarts it"
		}
		fmt.Fprintf(&b, "; corral %s at %s", verb, t.UTC().Format("15:04:05 UTC"))
		if d := t.Sub(now).Round(time.Second); d > 0 {
			fmt.Fprintf(&b, " (in %s)", d)
		}
	}
	return b.String()
}

// downCauseRunes bounds each part of a downLine.
const downCauseRunes = 160

// shortLine returns s, valid UTF-8, cut to at most n runes, the last of
// them "…" when it was longer.
func shortLine(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}

// healthLog logs a summary of every backend's state when it has changed in
// what a person needs to know: the status, or which servers are not well
// and how. What is on its way is left out: nothing is logged while a server
// starts (a first start, a restart, a lazy server woken), nor once corral is
// stopping, so a normal start and stop log no "degraded". Its zero value
// logs nothing; its methods are safe for concurrent use.
type healthLog struct {
	log *slog.Logger

	mu   sync.Mutex
	last string // what the last summary said
}

// note logs the summary of backends, if it changed; closed says corral is
// stopping.
func (l *healthLog) note(backends []*backend, closed bool) {
	if closed || l.log == nil {
		return
	}
	status := "ok"
	var all, unwell strings.Builder
	for i, b := range backends {
		h := b.health()
		if h.State == stateStarting {
			return
		}
		if i > 0 {
			all.WriteByte(' ')
		}
		fmt.Fprintf(&all, "%s=%s", h.Name, h.State)
		if h.State != stateReady && h.State != stateIdle {
			status = "degraded"
			fmt.Fprintf(&unwell, "%s=%s ", h.Name, h.State)
		}
	}
	key := status + " " + unwell.String()
	l.mu.Lock()
	changed := key != l.last
	l.last = key
	l.mu.Unlock()
	if !changed {
		return
	}
	level := slog.LevelInfo
	if status != "ok" {
		level = slog.LevelWarn
	}
	l.log.Log(context.Background(), level, "health", "status", status, "servers", all.String())
}
