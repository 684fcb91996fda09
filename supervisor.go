package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"
)

// backendState is where a backend is in its life.
type backendState string

const (
	stateStarting backendState = "starting" // process started, handshake under way
	stateReady    backendState = "ready"    // serving calls
	stateFailed   backendState = "failed"   // could not start, or exited; calls fail at once
	stateStopped  backendState = "stopped"  // stopped by corral
)

// protocolVersions are the MCP versions corral speaks, newest first.
var protocolVersions = []string{"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}

// backendTool is one tool as the server listed it.
type backendTool struct {
	name string          // the server's name for it
	raw  json.RawMessage // the tool object as the server sent it
}

// backend runs one configured server and serves calls to it. Its methods are
// safe for concurrent use.
type backend struct {
	name     string
	cfg      *ServerConfig
	gcfg     *Config
	log      *slog.Logger
	onChange func() // called, with no lock held, when its state or tools change

	mu        sync.Mutex
	state     backendState
	changed   chan struct{} // closed and replaced at every change of state
	stopping  bool
	proc      *process
	mux       *mux
	tools     []backendTool // the last list the server gave; kept after it exits
	lastErr   string
	readyAt   time.Time
	firstDone chan struct{} // closed when the first start has succeeded or failed
	firstOnce sync.Once

	hurry chan struct{} // closed to make a stop skip its waits
	wg    sync.WaitGroup
}

func newBackend(gcfg *Config, cfg *ServerConfig, log *slog.Logger, onChange func()) *backend {
	return &backend{
		name:      cfg.Name(),
		cfg:       cfg,
		gcfg:      gcfg,
		log:       log.With("server", cfg.Name()),
		onChange:  onChange,
		state:     stateStarting,
		changed:   make(chan struct{}),
		firstDone: make(chan struct{}),
		hurry:     make(chan struct{}),
	}
}

// start starts the server in the background and returns at once.
func (b *backend) start() {
	b.wg.Add(1)
	go b.run()
}

// run is the backend's life. It owns every process the backend starts.
func (b *backend) run() {
	defer b.wg.Done()
	err := b.runOnce()
	b.mu.Lock()
	stopping := b.stopping
	b.mu.Unlock()
	if stopping {
		b.setState(stateStopped, "stopped by corral")
		return
	}
	b.log.Error("server is not running; calls to its tools fail until corral is restarted", "err", err)
	b.setState(stateFailed, err.Error())
}

// runOnce starts the process, completes the handshake, serves until the
// process goes away, and returns why it did.
func (b *backend) runOnce() error {
	b.mu.Lock()
	if b.stopping {
		b.mu.Unlock()
		return errors.New("stopped before it started")
	}
	b.mu.Unlock()

	p, err := startProcess(b.processSpec())
	if err != nil {
		return err
	}
	b.log.Info("started", "pid", p.pid, "command", b.cfg.Command)
	refresh := make(chan struct{}, 1)
	m := newMux(b.name, b.gcfg.maxInFlight(b.cfg), b.log, func(msg *wireMsg) { b.onNotify(msg, refresh) })

	b.mu.Lock()
	b.proc, b.mux = p, m
	stopping := b.stopping
	b.mu.Unlock()
	if stopping { // stop ran between the check above and now
		p.Stop(b.hurry)
		return errors.New("stopped while starting")
	}

	var wg sync.WaitGroup
	stdoutDone := make(chan struct{})
	wg.Add(4)
	go func() { defer wg.Done(); m.writeLoop(p.stdin) }()
	go func() {
		defer wg.Done()
		defer close(stdoutDone)
		m.readLoop(p.stdout, int(b.gcfg.MaxLineBytes))
	}()
	go func() { defer wg.Done(); b.watch(p, m, stdoutDone) }()
	go func() { defer wg.Done(); b.refreshLoop(m, refresh) }()

	if err := b.handshake(m); err != nil {
		p.Stop(b.hurry)
		m.close(unavailable("server %q: %v", b.name, err))
		wg.Wait()
		return err
	}
	b.mu.Lock()
	b.readyAt = time.Now()
	b.mu.Unlock()
	b.setState(stateReady, "")

	<-m.done
	p.Stop(b.hurry)
	wg.Wait()
	return m.err
}

// watch closes the mux when the process exits or closes its stdout, with an
// error that says which, so that every pending call fails at once.
func (b *backend) watch(p *process, m *mux, stdoutDone <-chan struct{}) {
	select {
	case <-p.exited:
	case <-stdoutDone:
		// Usually the process is on its way out; wait a moment for its exit
		// status, which says more than the EOF.
		t := time.NewTimer(p.spec.pipeDrain)
		select {
		case <-p.exited:
		case <-t.C:
		}
		t.Stop()
	case <-m.done:
		return
	}
	select {
	case <-p.exited:
		// The last stderr line usually says why; it is read a moment after
		// the exit is seen, unless a descendant holds stderr open.
		t := time.NewTimer(stderrSettle)
		select {
		case <-p.stderrDone:
		case <-t.C:
		}
		t.Stop()
		msg := fmt.Sprintf("server %q exited (%s)", b.name, p.exitDescription())
		if last := p.tail.last(); last != "" {
			msg += "; its last stderr line: " + last
		}
		m.close(unavailable("%s", msg))
	default:
		m.close(unavailable("server %q closed its stdout", b.name))
	}
}

// stderrSettle bounds the wait for a dead server's last stderr lines.
const stderrSettle = 100 * time.Millisecond

// processSpec returns how to run the server's process.
func (b *backend) processSpec() processSpec {
	dir := b.cfg.Cwd
	if dir != "" && !filepath.IsAbs(dir) && b.gcfg.file != "" {
		dir = filepath.Join(filepath.Dir(b.gcfg.file), dir)
	}
	env := os.Environ()
	keys := make([]string, 0, len(b.cfg.Env))
	for k := range b.cfg.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		env = append(env, k+"="+b.cfg.Env[k]) // later entries win
	}
	return processSpec{
		name:      b.name,
		command:   b.cfg.Command,
		args:      b.cfg.Args,
		env:       env,
		dir:       dir,
		stopGrace: b.gcfg.StopGrace.D(),
		killGrace: b.gcfg.KillGrace.D(),
		pipeDrain: time.Second,
		log:       b.log,
	}
}

// handshake initializes the server and lists its tools, within StartTimeout.
func (b *backend) handshake(m *mux) error {
	timeout := b.gcfg.StartTimeout.D()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	params, _ := json.Marshal(map[string]any{
		"protocolVersion": protocolVersions[0],
		"capabilities":    map[string]any{},
		"clientInfo":      map[string]string{"name": "corral", "version": version},
	})
	var init struct {
		ProtocolVersion string `json:"protocolVersion"`
		Capabilities    struct {
			Tools json.RawMessage `json:"tools"`
		} `json:"capabilities"`
		ServerInfo struct {
			Name    string `json:"name"`
			Version string `json:"version"`
		} `json:"serverInfo"`
	}
	if err := callInto(ctx, m, "initialize", params, &init); err != nil {
		return startError("initialize", timeout, err)
	}
	if !supportedVersion(init.ProtocolVersion) {
		return fmt.Errorf("initialize: server answered protocol version %q; corral speaks %s",
			init.ProtocolVersion, strings.Join(protocolVersions, ", "))
	}
	if err := m.Notify(ctx, "notifications/initialized", nil); err != nil {
		return startError("notifications/initialized", timeout, err)
	}
	b.log.Info("initialized", "serverName", init.ServerInfo.Name, "serverVersion", init.ServerInfo.Version, "protocolVersion", init.ProtocolVersion)
	var tools []backendTool
	if init.Capabilities.Tools != nil {
		var err error
		if tools, err = listTools(ctx, m); err != nil {
			return startError("tools/list", timeout, err)
		}
	}
	b.setTools(tools)
	return nil
}

func startError(step string, timeout time.Duration, err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s: no answer within %s (startTimeout)", step, timeout)
	}
	return fmt.Errorf("%s: %w", step, err)
}

// callInto makes a call and decodes its result into v; a JSON-RPC error
// answer is returned as an error.
func callInto(ctx context.Context, m *mux, method string, params json.RawMessage, v any) error {
	a, err := m.Call(ctx, method, params)
	if err != nil {
		return err
	}
	if a.Error != nil {
		return fmt.Errorf("server answered error %d: %s", a.Error.Code, a.Error.Message)
	}
	if err := json.Unmarshal(a.Result, v); err != nil {
		return fmt.Errorf("invalid result: %v", err)
	}
	return nil
}

// maxToolPages bounds the pages of one listing, against a server whose
// cursors never end.
const maxToolPages = 1000

// listTools lists every tool of the server, following nextCursor.
func listTools(ctx context.Context, m *mux) ([]backendTool, error) {
	var tools []backendTool
	seen := map[string]bool{}
	cursor := ""
	for page := 0; ; page++ {
		if page == maxToolPages {
			return nil, fmt.Errorf("more than %d pages", maxToolPages)
		}
		var params json.RawMessage
		if cursor != "" {
			params, _ = json.Marshal(map[string]string{"cursor": cursor})
		}
		var res struct {
			Tools      []json.RawMessage `json:"tools"`
			NextCursor string            `json:"nextCursor"`
		}
		if err := callInto(ctx, m, "tools/list", params, &res); err != nil {
			return nil, err
		}
		for _, raw := range res.Tools {
			var t struct {
				Name string `json:"name"`
			}
			if err := json.Unmarshal(raw, &t); err != nil || t.Name == "" {
				return nil, fmt.Errorf("a tool without a name: %s", truncate(raw, 200))
			}
			if seen[t.Name] {
				continue // listed twice (a server whose pages overlap)
			}
			seen[t.Name] = true
			tools = append(tools, backendTool{name: t.Name, raw: raw})
		}
		if res.NextCursor == "" {
			return tools, nil
		}
		cursor = res.NextCursor
	}
}

// onNotify handles a notification from the server.
func (b *backend) onNotify(msg *wireMsg, refresh chan<- struct{}) {
	switch msg.Method {
	case "notifications/tools/list_changed":
		select {
		case refresh <- struct{}{}:
		default: // a refresh is already due
		}
	case "notifications/message":
		b.log.Info("log message from server", "params", truncate(msg.Params, 1000))
	default:
		b.log.Debug("notification from server not passed on", "method", msg.Method)
	}
}

// refreshLoop lists the server's tools again each time it says they changed,
// until the mux closes.
func (b *backend) refreshLoop(m *mux, refresh <-chan struct{}) {
	for {
		select {
		case <-refresh:
		case <-m.done:
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), b.gcfg.StartTimeout.D())
		tools, err := listTools(ctx, m)
		cancel()
		if err != nil {
			b.log.Warn("listing tools again after list_changed failed; keeping the old list", "err", err)
			continue
		}
		b.setTools(tools)
		b.onChange()
	}
}

func (b *backend) setTools(tools []backendTool) {
	b.mu.Lock()
	b.tools = tools
	b.mu.Unlock()
}

// setState moves the backend to state s, wakes whoever waits for a change,
// and tells the gateway.
func (b *backend) setState(s backendState, why string) {
	b.mu.Lock()
	prev := b.state
	b.state = s
	if why != "" {
		b.lastErr = why
	}
	close(b.changed)
	b.changed = make(chan struct{})
	b.mu.Unlock()
	if prev != s {
		b.log.Info("state", "from", prev, "to", s)
	}
	// The catalog is rebuilt before the first start is declared done, so
	// that whoever waited for it sees this backend's tools.
	b.onChange()
	if s != stateStarting {
		b.firstOnce.Do(func() { close(b.firstDone) })
	}
}

// call sends a request to the server and waits for its answer. While the
// server is starting, call waits for it, until ctx ends; when it is not
// running, call fails at once with an error that says why.
func (b *backend) call(ctx context.Context, method string, params json.RawMessage) (*wireMsg, error) {
	for {
		b.mu.Lock()
		state, m, changed, lastErr := b.state, b.mux, b.changed, b.lastErr
		b.mu.Unlock()
		switch state {
		case stateReady:
			return m.Call(ctx, method, params)
		case stateStarting:
			select {
			case <-changed:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		default:
			return nil, unavailable("server %q is %s: %s", b.name, state, strings.TrimPrefix(lastErr, fmt.Sprintf("server %q ", b.name)))
		}
	}
}

// snapshot returns the backend's tools and state.
func (b *backend) snapshot() (tools []backendTool, state backendState) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.tools, b.state
}

// stop stops the server with the stop ladder and blocks until its process and
// every goroutine of the backend are gone. Closing hurry skips the waiting.
// stop may be called more than once.
func (b *backend) stop(hurry <-chan struct{}) {
	b.mu.Lock()
	b.stopping = true
	p := b.proc
	b.mu.Unlock()
	if p != nil {
		done := make(chan struct{})
		go func() {
			select {
			case <-hurry:
				b.hurryOnce()
			case <-done:
			}
		}()
		p.Stop(b.hurry)
		close(done)
	}
	b.wg.Wait()
}

func (b *backend) hurryOnce() {
	b.mu.Lock()
	defer b.mu.Unlock()
	select {
	case <-b.hurry:
	default:
		close(b.hurry)
	}
}

// health is what /healthz reports of a backend.
type health struct {
	Name     string       `json:"name"`
	State    backendState `json:"state"`
	PID      int          `json:"pid,omitempty"`
	Uptime   string       `json:"uptime,omitempty"`
	Tools    int          `json:"tools"`
	InFlight int          `json:"inFlight"`
	Error    string       `json:"error,omitempty"`
	Stderr   []string     `json:"stderrTail,omitempty"`
}

func (b *backend) health() health {
	b.mu.Lock()
	defer b.mu.Unlock()
	h := health{Name: b.name, State: b.state, Tools: len(b.tools)}
	if b.proc != nil {
		h.PID = b.proc.pid
		if b.state != stateReady {
			h.Stderr = b.proc.tail.all()
		}
	}
	if b.state == stateReady {
		h.Uptime = time.Since(b.readyAt).Round(time.Second).String()
		h.InFlight = b.mux.inFlight()
	} else {
		h.Error = b.lastErr
	}
	return h
}
