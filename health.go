package main

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

	// Scope is "session" for a session-scoped server, whose Instances are
	// its processes, one per session (scope.go); else both are left out.
	Scope     string `json:"scope,omitempty"`
	Instances *int64 `json:"instances,omitempty"`
}

// reportScope completes h, the health of the catalog backend of a
// session-scoped server whose state is state, with its scope and number of
// processes. Once its probe has listed it, the server is ready: a
// session's call starts a process of its own. The caller holds b.mu.
func (sc *backendScope) reportScope(h *health, state backendState) {
	n := sc.instances.Load()
	h.Scope, h.Instances = scopeSession, &n
	if state == stateStopped && sc.listed.Load() {
		h.State, h.Error, h.LastExit, h.Stderr = stateReady, "", "", nil
	}
}
