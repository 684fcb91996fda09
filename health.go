package main

import "time"

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
}

// health returns what /healthz reports of the backend now. It is safe for
// concurrent use.
func (b *backend) health() health {
	b.mu.Lock()
	defer b.mu.Unlock()
	h := health{Name: b.name, State: b.state, Tools: len(b.up.items(kindTool)), Restarts: b.restarts, LastExit: b.lastExit}
	h.Prompts, h.Resources, h.Templates = len(b.up.items(kindPrompt)), len(b.up.items(kindResource)), len(b.up.items(kindTemplate))
	if b.proc != nil {
		h.PID = b.proc.pid
		if b.state != stateReady {
			h.Stderr = b.proc.tail.all()
		}
	}
	switch b.state {
	case stateReady:
		h.Uptime = time.Since(b.readyAt).Round(time.Second).String()
		h.InFlight = b.mux.inFlight()
	case stateFailed:
		h.Error = b.lastErr
		h.RetryAt = b.retryAt.UTC().Format(time.RFC3339)
	default:
		h.Error = b.lastErr
	}
	return h
}
