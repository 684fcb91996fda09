package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// backendState is where a backend is in its life.
type backendState string

const (
	stateStarting backendState = "starting" // process started, handshake under way; calls wait
	stateReady    backendState = "ready"    // serving calls
	stateBackoff  backendState = "backoff"  // exited; waiting to restart; calls wait
	stateFailed   backendState = "failed"   // restarted too often, or could not start at all; calls fail at once
	stateStopped  backendState = "stopped"  // stopped by corral; calls fail at once
)

// backendEvents is what a backend tells the gateway above it, and the one
// thing it asks of it. Gateway implements it. Its methods are called with no
// lock of the backend held.
type backendEvents interface {
	// backendChanged is called whenever the backend's state or lists change.
	backendChanged()
	// backendReady is called, on a goroutine of its own that the run joins,
	// when a run of the server over m became ready.
	backendReady(b *backend, m *mux)
	// serverRequest serves a request of the server to a client, on m's
	// reading goroutine; it must not block.
	serverRequest(b *backend, m *mux, msg *wireMsg)
	// serverLog, resourceUpdated, serverCancelled and taskStatus pass on
	// the server's notifications/message, notifications/resources/updated,
	// notifications/cancelled and notifications/tasks/status (or the tasks
	// extension's notifications/tasks), on m's reading goroutine.
	serverLog(b *backend, params json.RawMessage)
	resourceUpdated(b *backend, params json.RawMessage)
	serverCancelled(m *mux, params json.RawMessage)
	taskStatus(b *backend, params json.RawMessage)
	// subscribedURIs returns the server's own URIs of the resources of
	// server that sessions subscribed to.
	subscribedURIs(server string) []string
	// modernTaskIDs returns the server's own IDs of the tasks 2026-07-28
	// clients made on b, a 2026-07-28 server, in its current run
	// (taskTable.serverTaskIDs).
	modernTaskIDs(b *backend) []string
	// stateChanged is called at each change of the backend's state that
	// is logged, from the state the last logged change left, with its
	// reason; it must not block.
	stateChanged(b *backend, from, to backendState, why string)
}

// backend runs one configured server, restarts it when it exits, and serves
// calls to it. Being the server's MCP client, over each run, is its
// upstream's part (upstream.go). Its methods are safe for concurrent use.
type backend struct {
	name     string
	cfg      *ServerConfig
	gcfg     *Config
	sup      Supervision
	instance string        // corral's marker, put in the server's environment
	reaper   *orphanReaper // nil unless corral is a child subreaper
	cgroups  *cgroupTree   // where the server's processes get a cgroup; nil for none
	lineBufs *sync.Pool    // large stdout buffers, shared (see lineReader); if nil, a run keeps its own
	log      *slog.Logger
	up       *upstream // the server's MCP client; what it learned outlives each run

	// startMu is held from the check that the backend is not stopping until
	// the new process is recorded, so that stop either prevents a start or
	// finds the process to stop: nothing starts after stop begins.
	startMu sync.Mutex

	mu           sync.Mutex
	state        backendState
	changed      chan struct{} // closed and replaced at every change of state
	stopping     bool
	stopWhy      string // what calls cut off by stop are told, after the server's name
	proc         *process
	remote       remoteLink // for a remote server, instead of proc
	mux          *mux
	logLevel     string // the level last asked of the running process
	instructions string // what the server told clients in its handshake
	lastErr      string // why it is not ready, for errors and /healthz
	// unlogged is the state the last change left, when that change was not
	// logged (see leaveReady); the next change is logged as from it.
	unlogged  backendState
	lastExit  string // how its last process ended
	restarts  int    // processes started after the first
	readyAt   time.Time
	retryAt   time.Time     // when a failed backend is tried again
	firstDone chan struct{} // closed when the first start has succeeded or failed
	firstOnce sync.Once

	// quiet is set while the server fails to start again and again for a
	// cause already logged (see run): its starts, its moves between
	// starting and backoff and its stderr are logged at debug level until
	// it becomes ready, the cause changes, or corral gives up on it.
	quiet atomic.Bool

	metrics callMetrics
	scope   *backendScope // nil unless the server's scope is "session" (scope.go)
	lazy    lazyState     // lazy start and idle stop (lazy.go), under mu

	// gw is the gateway above, as far as the backend reaches it.
	gw backendEvents

	stopCh chan struct{} // closed when stop begins: ends a backoff wait
	hurry  chan struct{} // closed to make a stop skip its waits
	// wg joins every goroutine of the backend: its life (run, and through
	// it each run's goroutines) and each logging/setLevel it sends.
	wg sync.WaitGroup
}

// newBackend returns the backend of server cfg of config gcfg, not started.
// It reports to events, logs to log, marks its processes with instance,
// tells reaper, if not nil, of them, and puts them in cgroups of cgroups.
func newBackend(events backendEvents, log *slog.Logger, instance string, reaper *orphanReaper, cgroups *cgroupTree, gcfg *Config, cfg *ServerConfig) *backend {
	b := &backend{
		name:      cfg.Name(),
		cfg:       cfg,
		gcfg:      gcfg,
		sup:       gcfg.supervision(cfg),
		instance:  instance,
		reaper:    reaper,
		cgroups:   cgroups,
		log:       log.With("server", cfg.Name()),
		state:     stateStarting,
		changed:   make(chan struct{}),
		firstDone: make(chan struct{}),
		stopCh:    make(chan struct{}),
		gw:        events,
		hurry:     make(chan struct{}),
	}
	b.up = newUpstream(gcfg, cfg, b.log, b.sup.RestartDelay.D(), upstreamHooks{
		listed:     func() { b.saveCatalog(); events.backendChanged() },
		told:       b.setInstructions,
		subscribed: func() []string { return events.subscribedURIs(b.name) },
		tasks:      func() []string { return events.modernTaskIDs(b) },
	})
	b.initLazy()
	return b
}

// start starts the server in the background and returns at once.
func (b *backend) start() {
	b.wg.Add(1)
	go b.run()
}

// run is the backend's life: start, serve, and after every exit wait as the
// restart policy says, until stop. It owns every process the backend starts.
func (b *backend) run() {
	defer b.wg.Done()
	policy := &restartPolicy{s: b.sup, jitter: rand.Float64}
	var why string // of the next start
	// logged is the cause of the failed starts in a row logged last, so
	// that each cause is logged once, with the plan of retries.
	var logged string
	for first := true; ; first = false {
		if !b.nap(&first, &why) {
			return // stopped while idle
		}
		if !first {
			b.setState(stateStarting, why)
		}
		readyFor, err := b.runOnce()
		b.sweep()
		if b.isStopping() {
			b.setState(stateStopped, "stopped by corral")
			return
		} else if b.asleep() {
			continue // stopped for being idle: not a crash
		}
		now := time.Now()
		wait, failing := policy.afterExit(now, readyFor)
		why = stripServer(b.name, err.Error())
		b.mu.Lock()
		b.lastExit = "did not start"
		if b.cfg.URL != "" {
			b.lastExit = why
		} else if b.proc != nil {
			b.lastExit = b.proc.exitDescription()
			if last := b.proc.tail.reason(); last != "" && !strings.Contains(why, last) {
				why += "; its last stderr line: " + last
			}
		}
		b.retryAt = now.Add(wait) // of a restart, or of a retry after failedRetry
		b.mu.Unlock()
		if failing || readyFor > 0 {
			logged = ""
			b.quiet.Store(false)
		}
		if failing {
			msg := fmt.Sprintf("%s; corral gave up after %s, and tries again at %s (failedRetry)",
				why, policy.gaveUp, now.Add(wait).Format(time.TimeOnly))
			b.log.Error("server is failing", "err", msg)
			b.setState(stateFailed, msg)
			why = "trying again after failedRetry"
		} else {
			if readyFor == 0 {
				logged = b.logFailedStart(logged, why, planText(policy.plan(wait), b.sup.FailedRetry.D()))
			}
			b.setState(stateBackoff, fmt.Sprintf("%s; restarting in %s", why, wait.Round(time.Millisecond)))
			why = "restarting after backoff"
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-b.stopCh:
			t.Stop()
			b.setState(stateStopped, "stopped by corral")
			return
		}
		b.mu.Lock()
		b.restarts++
		b.mu.Unlock()
	}
}

// logFailedStart logs a start that failed for the reason why, with retry,
// the plan of the restarts to come, unless the last failed start logged,
// whose cause was logged, failed for the same cause: then only at debug
// level. It returns the cause logged now, and quiets the backend until the
// cause changes (see quiet).
func (b *backend) logFailedStart(logged, why, retry string) string {
	cause := causeOf(why)
	if cause == logged {
		b.log.Debug("server did not start, again for the same cause", "err", why)
		return logged
	}
	b.log.Error("server did not start", "err", why, "retry", retry,
		"then", "the same failure again is logged at debug level")
	b.quiet.Store(true)
	return cause
}

// causeOf returns why, the reason a start failed, with its numbers left
// out: two failures that differ only in a PID, a time or a port have the
// same cause.
func causeOf(why string) string {
	var b strings.Builder
	digits := false
	for _, r := range why {
		if r >= '0' && r <= '9' {
			if !digits {
				b.WriteByte('#')
			}
			digits = true
			continue
		}
		digits = false
		b.WriteRune(r)
	}
	return b.String()
}

// sweep kills what the server's last process left behind outside its
// process group (descendants that called setsid or double-forked), found by
// the marker in their environment, and reaps those re-parented to corral.
func (b *backend) sweep() {
	if killed := sweepMarked(b.instance, b.markerName(), b.reaper); len(killed) > 0 {
		b.log.Warn("killed processes the server left behind outside its process group", "pids", pidList(killed))
	}
}

// stripServer removes the leading `server "name" ` from a message that will
// be quoted after the server's name anyway.
func stripServer(name, msg string) string {
	return strings.TrimPrefix(msg, fmt.Sprintf("server %q ", name))
}

func (b *backend) isStopping() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.stopping
}

// link is how one run reaches its server: the connection the mux runs
// over (its Close stops the server), and watch, which closes the mux with
// why when the server goes away (the process exited, the session expired),
// or returns when the mux closes first; readDone is closed once the mux's
// readLoop has returned.
type link struct {
	conn  msgConn
	watch func(m *mux, readDone <-chan struct{})
}

// runOnce starts the server (a process, or a new session with a remote
// server), completes the handshake, serves until the server goes away, and
// returns how long it was ready and why it ended. Local and remote servers
// differ only in how the link is made: startChild or dial.
func (b *backend) runOnce() (readyFor time.Duration, err error) {
	connect := b.withPrereq(b.startChild)
	if b.cfg.URL != "" {
		connect = b.withPrereq(b.dial)
	}
	b.startMu.Lock()
	if b.isStopping() {
		b.startMu.Unlock()
		return 0, errors.New("stopped before it started")
	}
	var wg sync.WaitGroup
	refresh := make(chan struct{}, 1)
	var relisting sync.Once
	var m *mux
	// The run's refreshLoop starts with the server's first list_changed
	// notification: most servers send none, and a goroutine waiting for
	// one costs a stack each. It is started on m's reading goroutine,
	// which wg counts until m's end, so wg.Wait cannot have returned.
	m = b.newMux(refresh, func() {
		relisting.Do(func() {
			wg.Add(1)
			go func() { defer wg.Done(); b.refreshLoop(m, refresh) }()
		})
	})
	l, err := connect(m)
	b.startMu.Unlock()
	if err != nil {
		return 0, err
	}

	readDone := make(chan struct{})
	wg.Add(3)
	go func() { defer wg.Done(); m.writeLoop(l.conn) }()
	go func() {
		defer wg.Done()
		defer close(readDone)
		m.readLoop(l.conn)
	}()
	go func() { defer wg.Done(); l.watch(m, readDone) }()
	return b.serve(m, &wg, func() { l.conn.Close() })
}

// startChild starts the server's process, for the run whose mux is m, and
// records both. The caller holds startMu.
func (b *backend) startChild(m *mux) (link, error) {
	p, err := startProcess(b.processSpec())
	if err != nil {
		b.mu.Lock()
		b.proc = nil // what health and the next error say is not the last process's
		b.mu.Unlock()
		return link{}, err // run logs it, with the plan of retries
	}
	b.mu.Lock()
	b.proc, b.mux, b.logLevel = p, m, ""
	b.mu.Unlock()
	b.log.Log(context.Background(), b.quietLevel(slog.LevelInfo), "started", "pid", p.pid, "command", b.cfg.Command)
	watch := func(m *mux, readDone <-chan struct{}) { b.watch(p, m, readDone) }
	return link{conn: p.conn(int(b.gcfg.MaxLineBytes), b.hurry, b.lineBufs), watch: watch}, nil
}

// dial connects to the remote server (a new session at every run), for the
// run whose mux is m, and records both. The caller holds startMu. The
// connection is over when the session expired, or a ping failed.
func (b *backend) dial(m *mux) (link, error) {
	rc := dialLink(b.cfg, b.gcfg, remoteHTTPClient(), b.log)
	if c, ok := rc.(*remoteConn); ok {
		c.paramHeaders = b.toolParamHeaders // before the first message
	}
	b.mu.Lock()
	b.remote, b.mux, b.logLevel = rc, m, ""
	b.mu.Unlock()
	b.log.Info("connecting", "url", shownURL(b.cfg.URL))
	watch := func(m *mux, _ <-chan struct{}) {
		select {
		case <-rc.Done():
			m.close(unavailable("%v", rc.Err()))
		case <-m.done:
		}
	}
	return link{conn: rc, watch: watch}, nil
}

// newMux returns a mux for a run of the server: its notifications and
// requests go to the backend and the gateway; refresh is poked when a list
// changes.
func (b *backend) newMux(refresh chan<- struct{}, relist func()) *mux {
	var m *mux
	m = newMux(b.name, b.gcfg.maxInFlight(b.cfg), b.log, func(msg *wireMsg) { b.onNotify(msg, refresh, relist) })
	m.onRequest = func(msg *wireMsg) { b.gw.serverRequest(b, m, msg) }
	if n := b.gcfg.MaxNotificationsPerSecond; n > 0 {
		m.notes.limit = n
	}
	return m
}

// serve completes the handshake over m, whose reading and writing wg
// already runs, and serves until m closes; then it stops the server with
// stop, waits for wg, and returns how long the server was ready and why it
// ended.
func (b *backend) serve(m *mux, wg *sync.WaitGroup, stop func()) (readyFor time.Duration, err error) {
	if err := b.handshake(m); err != nil {
		m.close(unavailable("server %q: %v", b.name, err))
		stop()
		wg.Wait()
		return 0, err
	}
	readyAt := time.Now()
	b.mu.Lock()
	b.readyAt = readyAt
	b.mu.Unlock()
	b.quiet.Store(false)
	b.setState(stateReady, "")

	wg.Add(3)
	go func() { defer wg.Done(); b.idleLoop(m, stop) }()
	go func() { defer wg.Done(); b.pingLoop(stop, m) }()
	go func() { defer wg.Done(); b.gw.backendReady(b, m) }()
	if m.modern.Load() {
		wg.Add(1)
		go func() { defer wg.Done(); b.listenLoop(m) }()
	}
	<-m.done
	readyFor = time.Since(readyAt)
	b.leaveReady(m, stripServer(b.name, m.err.Error()))
	stop()
	wg.Wait()
	return readyFor, m.err // set once done is closed
}

// pingLoop pings the server every PingInterval and stops it when it misses
// MaxMissedPings in a row. A ping counts as missed only when it times out
// while the server writes nothing at all: a server busy sending answers is
// alive, even if its pings queue behind them.
func (b *backend) pingLoop(stop func(), m *mux) {
	t := time.NewTicker(b.sup.PingInterval.D())
	defer t.Stop()
	missed := 0
	for {
		select {
		case <-t.C:
		case <-m.done:
			return
		}
		before := m.lastRead.Load()
		ctx, cancel := context.WithTimeout(context.Background(), b.sup.PingTimeout.D())
		err := b.up.ping(ctx, m)
		cancel()
		switch {
		case err == nil, m.lastRead.Load() != before:
			missed = 0
		case errors.Is(err, context.DeadlineExceeded):
			missed++
			b.log.Warn("missed a ping", "inARow", missed, "timeout", b.sup.PingTimeout.D())
			if missed >= b.sup.MaxMissedPings {
				why := fmt.Sprintf("server %q missed %d pings in a row (pingTimeout %s); restarting it", b.name, missed, b.sup.PingTimeout.D())
				b.log.Error(why)
				b.leaveReady(m, stripServer(b.name, why))
				m.close(unavailable("%s", why))
				stop()
				return
			}
		}
	}
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
		b.leaveReady(m, fmt.Sprintf("exited (%s)", p.exitDescription()))
		// The last stderr line usually says why; it is read a moment after
		// the exit is seen, unless a descendant holds stderr open.
		t := time.NewTimer(stderrSettle)
		select {
		case <-p.stderrDone:
		case <-t.C:
		}
		t.Stop()
		msg := fmt.Sprintf("server %q exited (%s)", b.name, p.exitDescription())
		if last := p.tail.reason(); last != "" {
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
	// Neither the markers corral inherited nor the variable holding its
	// bearer token reach a server, unless the server's env names them.
	env := withoutVars(os.Environ(), envInstance, envServer, b.gcfg.AuthTokenEnv)
	keys := make([]string, 0, len(b.cfg.Env))
	for k := range b.cfg.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		env = append(env, k+"="+b.cfg.Env[k]) // later entries win
	}
	// The marker goes last, after the user's env, so that it wins.
	env = append(env, markerEnv(b.instance, b.markerName())...)
	return processSpec{
		name:      b.markerName(), // a session's process has a cgroup of its own
		command:   b.cfg.Command,
		args:      b.cfg.Args,
		env:       env,
		dir:       dir,
		stopGrace: b.gcfg.StopGrace.D(),
		killGrace: b.gcfg.KillGrace.D(),
		pipeDrain: time.Second,
		log:       b.log,
		reaper:    b.reaper,
		cgroups:   b.cgroups,
		limits:    b.gcfg.limits(b.cfg),
		sandbox:   b.gcfg.sandbox(b.cfg),

		stderrLines: b.gcfg.MaxStderrLinesPerSecond,
		stderrBytes: b.gcfg.MaxStderrBytesPerSecond,
		quiet:       &b.quiet,
	}
}

// handshake completes the MCP handshake over m, the mux of a run, within
// StartTimeout: the upstream's part (upstream.handshake).
func (b *backend) handshake(m *mux) error { return b.up.handshake(m) }

// instructionsText returns what the server told clients in its handshake.
func (b *backend) instructionsText() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.instructions
}

// lastError returns why the backend is in its state, if it is not ready.
func (b *backend) lastError() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.lastErr
}

// claim returns what a call needs of the backend's state. While the
// backend is ready the call counts as using the server until release, so
// that an idle stop cannot take the server from under it. An idle backend
// reads as stateIdle, and is asked to start (only the first ask of an idle
// spell is sent); a ready one whose run is over reads as stateBackoff, as
// leaveReady is on its way. It does not block.
func (b *backend) claim() (state backendState, m *mux, changed chan struct{}, lastErr string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	state, m, changed, lastErr = b.state, b.mux, b.changed, b.lastErr
	switch {
	case b.lazy.askIfDozing():
		state = stateIdle
	case state == stateReady && closed(m.done):
		state = stateBackoff
	case state == stateReady:
		b.lazy.busy.Add(1)
		b.used()
	}
	return state, m, changed, lastErr
}

// idleWait returns how long the run whose mux is m must stay up before it
// has been idle for d, or zero if it has: then the backend is dozing, and
// calls from now on wake it rather than use m.
func (b *backend) idleWait(m *mux, d time.Duration) time.Duration {
	subscribed := len(b.gw.subscribedURIs(b.name)) > 0 // no gateway lock under b.mu
	b.mu.Lock()
	defer b.mu.Unlock()
	if subscribed || b.state != stateReady || b.mux != m || b.lazy.busy.Load() > 0 || m.inFlight() > 0 {
		return max(d, minIdleCheck)
	}
	if left := d - time.Since(time.Unix(0, b.lazy.lastUse.Load())); left > 0 {
		return left
	}
	b.lazy.doze()
	return 0
}

// catchUp brings run m, now ready, up to date with what clients asked of
// the server before it: the log level, and their subscriptions to its
// resources, whose URIs subscribed returns (not called for a 2026-07-28
// server, whose listen request carries them). It blocks until the server
// has answered each subscription or requestTimeout has passed.
func (b *backend) catchUp(m *mux, level string, subscribed func() []string) {
	b.setLogLevel(level)
	if m.modern.Load() {
		return // its listen request carries the subscriptions
	}
	for _, uri := range subscribed() {
		ctx, cancel := context.WithTimeout(context.Background(), b.gcfg.requestTimeout(b.cfg))
		if err := callInto(ctx, m, "resources/subscribe", setMember(json.RawMessage("{}"), "uri", uri), &struct{}{}); err != nil {
			b.log.Warn("subscribing again after a restart failed", "uri", uri, "err", err)
		}
		cancel()
	}
}

// setInstructions keeps what the server told clients in its handshake, for
// the gateway (Gateway.instructions).
func (b *backend) setInstructions(text string) {
	b.mu.Lock()
	b.instructions = text
	b.mu.Unlock()
}

// onNotify handles a notification from the server: a list change goes to
// the upstream, which lists again (refresh wakes its refreshLoop, which
// relist starts if it has not yet); what clients hear of goes to the
// gateway.
func (b *backend) onNotify(msg *wireMsg, refresh chan<- struct{}, relist func()) {
	switch msg.Method {
	case "notifications/message":
		b.gw.serverLog(b, msg.Params)
	case "notifications/resources/updated":
		b.gw.resourceUpdated(b, msg.Params)
	case "notifications/tasks/status", "notifications/tasks":
		// The tasks extension's notifications/tasks come on corral's own
		// listen request, whose subscription ID they carry: not the
		// client's, which the stream that passes them on sets.
		b.gw.taskStatus(b, msg.Params)
	case "notifications/cancelled":
		b.mu.Lock()
		m := b.mux
		b.mu.Unlock()
		if m != nil {
			b.gw.serverCancelled(m, msg.Params)
		}
	default:
		if !b.up.listChanged(msg.Method, refresh) {
			b.log.Debug("notification from server not passed on", "method", msg.Method)
			return
		}
		relist()
	}
}

// refreshLoop lists again over m the lists the server says changed, until
// m closes: the upstream's part (upstream.refreshLoop).
func (b *backend) refreshLoop(m *mux, refresh <-chan struct{}) { b.up.refreshLoop(m, refresh) }

// listenLoop keeps a modern server's listen request open over m until m
// closes: the upstream's part (upstream.listenLoop).
func (b *backend) listenLoop(m *mux) { b.up.listenLoop(m) }

// items returns the server's last list of kind k.
func (b *backend) items(k kind) []backendItem { return b.up.items(k) }

// toolParamHeaders returns the x-mcp-header annotations of the server's
// tool it calls tool, as it last listed it, or nil. It is safe for
// concurrent use.
func (b *backend) toolParamHeaders(tool string) []paramHeader {
	hs, _ := toolParamHeaders(b.toolRaw(tool))
	return hs
}

// listTTL returns the smallest ttlMs of the server's last list of kind k
// (0 from a legacy server). It is safe for concurrent use.
func (b *backend) listTTL(k kind) int64 { return b.up.listTTL(k) }

// toolRaw returns the server's tool it calls tool, as it last listed it,
// or nil.
func (b *backend) toolRaw(tool string) json.RawMessage {
	for _, it := range b.items(kindTool) {
		if it.name == tool {
			return it.raw
		}
	}
	return nil
}

// capabilities returns what the server declared in its last handshake.
func (b *backend) capabilities() capabilities { return b.up.capabilities() }

// leaveReady takes the backend out of ready as soon as the run whose mux is
// m is seen to be over, for the reason why: calls made from then on wait for
// the restart (or fail at once, if corral is stopping the server) instead of
// reaching a server that is gone, while what is left of it is stopped. It
// does nothing unless the backend is ready with m.
func (b *backend) leaveReady(m *mux, why string) {
	b.mu.Lock()
	ours, stopping := b.state == stateReady && b.mux == m, b.stopping
	b.mu.Unlock()
	switch {
	case !ours:
	case stopping:
		b.setState(stateStopped, "stopped by corral")
	default:
		// Not logged: run logs the move to backoff once it knows the
		// restart's delay and the last stderr line.
		b.changeState(stateBackoff, why, false)
	}
}

// setState moves the backend to state s for the reason why, logs the
// transition, wakes whoever waits for a change, and tells the gateway.
func (b *backend) setState(s backendState, why string) { b.changeState(s, why, true) }

// changeState is setState, which logs the change only if log is set; an
// unlogged change is logged with the next one, as its from.
func (b *backend) changeState(s backendState, why string, log bool) {
	b.mu.Lock()
	prev, prevWhy := b.state, b.lastErr
	if b.unlogged != "" {
		prev, prevWhy = b.unlogged, ""
	}
	b.unlogged = ""
	if !log {
		b.unlogged = prev
	}
	b.state = s
	if s != stateReady {
		b.lastErr = why
	}
	close(b.changed)
	b.changed = make(chan struct{})
	pid := 0
	if b.proc != nil && s != stateStarting { // a start's process is not there yet
		pid = b.proc.pid
	}
	b.mu.Unlock()
	if log && (prev != s || why != prevWhy) {
		level := slog.LevelInfo
		if s == stateStarting || s == stateBackoff {
			level = b.quietLevel(level)
		}
		b.log.Log(context.Background(), level, "state", "from", prev, "to", s, "reason", why, "pid", pid)
		b.gw.stateChanged(b, prev, s, why)
	}
	// The catalog is rebuilt before the first start is declared done, so
	// that whoever waited for it sees this backend's tools.
	b.gw.backendChanged()
	if s != stateStarting {
		b.firstOnce.Do(func() { close(b.firstDone) })
	}
}

// quietLevel returns level, or debug while the backend is quiet.
func (b *backend) quietLevel(level slog.Level) slog.Level {
	if b.quiet.Load() {
		return slog.LevelDebug
	}
	return level
}

// call sends a request to the server and waits for its answer. While the
// server is idle (call starts it), starting or waiting to restart, call
// waits for it, until ctx ends; when it is failed or stopped, call fails at
// once with an error that says why. c, if not nil, is the client request
// the call is made for (mux.CallFor).
func (b *backend) call(ctx context.Context, method string, params json.RawMessage, c caller) (*wireMsg, error) {
	var waited time.Time // when the call began to wait for the server to start, if it did
	for {
		state, m, changed, lastErr := b.claim() // ready: in use until release; idle: woken
		switch state {
		case stateReady:
			if wn, ok := c.(waitNoter); ok && !waited.IsZero() {
				wn.noteWait("restart_wait", waited)
			}
			a, err := m.CallFor(ctx, method, params, c)
			b.release()
			return a, b.stopCause(m, err)
		case stateIdle, stateStarting, stateBackoff:
			if wn, ok := c.(waitNoter); ok && waited.IsZero() && wn.noteWaits() {
				waited = time.Now()
			}
			select {
			case <-changed:
			case <-ctx.Done():
				return nil, b.waitError(ctx, state, lastErr)
			}
		case stateFailed:
			return nil, unavailable("%s", b.health().downLine(time.Now()))
		default:
			return nil, unavailable("server %q is %s: %s", b.name, state, lastErr)
		}
	}
}

// callInto makes a call for corral itself; an answer that is an error is
// returned as the error, for the client.
func (b *backend) callInto(ctx context.Context, method string, params json.RawMessage) error {
	a, err := b.call(ctx, method, params, nil)
	if err != nil {
		return err
	}
	if a.Error != nil {
		return a.Error
	}
	return nil
}

// currentRun returns the mux of the server's current run, the one a call made now
// goes to once the server is ready; nil before the first start.
func (b *backend) currentRun() *mux {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.mux
}

// setLogLevel asks the server, if it is ready and takes logging/setLevel,
// for messages at level and above, unless it was asked for that level
// already. It does not block: the request is sent on a goroutine that wg
// joins, and that ends with the run at the latest.
func (b *backend) setLogLevel(level string) {
	b.mu.Lock()
	// Lock order: b.mu, then the upstream's (takesLogLevel).
	m, ok := b.mux, level != "" && b.state == stateReady && b.logLevel != level && b.up.takesLogLevel(b.mux)
	if ok {
		b.logLevel = level
		// Ready means run has not returned, so wg is not at zero here.
		b.wg.Add(1)
	}
	b.mu.Unlock()
	if !ok {
		return
	}
	go func() {
		defer b.wg.Done()
		b.up.setLevel(m, level)
	}()
}

// isModern reports whether the running server speaks the modern era.
func (b *backend) isModern() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.mux != nil && b.mux.modern.Load()
}

// unsubscribe tells the server no session wants updates of uri any more.
func (b *backend) unsubscribe(ctx context.Context, uri string) {
	if b.isModern() {
		b.resubscribe()
		return
	}
	ctx, cancel := context.WithTimeout(ctx, b.gcfg.requestTimeout(b.cfg))
	defer cancel()
	b.callInto(ctx, "resources/unsubscribe", setMember(json.RawMessage("{}"), "uri", uri))
}

// resubscribe sends a modern server's listen request again, with the
// subscriptions as they are now.
func (b *backend) resubscribe() { b.up.resubscribe() }

// snapshot returns the backend's state.
func (b *backend) snapshot() backendState {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.state
}

// stop stops the backend: no process starts after stop begins, a backoff wait
// ends, and the running process (if any) is stopped with the ladder. It
// blocks until every process and goroutine of the backend is gone. Closing
// hurry skips the ladder's waits. Calls in flight that the server does not
// answer before it goes fail with why, which follows the server's name (such
// as "was removed by a reload"), rather than with how the process ended. stop
// may be called more than once; only the first why counts.
func (b *backend) stop(hurry <-chan struct{}, why string) {
	b.mu.Lock()
	already := b.stopping
	b.stopping = true
	if !already {
		b.stopWhy = why
	}
	b.mu.Unlock()
	if !already {
		close(b.stopCh)
	}
	b.startMu.Lock() // a start under way has recorded its process
	b.mu.Lock()
	p, rc := b.proc, b.remote
	b.mu.Unlock()
	b.startMu.Unlock()
	if rc != nil {
		rc.Close()
	}

	// A second signal (hurry) skips the ladder's waits; its watcher ends,
	// and is joined, when the stop is over.
	var watcher sync.WaitGroup
	done := make(chan struct{})
	watcher.Add(1)
	go func() {
		defer watcher.Done()
		select {
		case <-hurry:
			b.hurryOnce()
		case <-done:
		}
	}()
	if p != nil {
		p.Stop(b.hurry)
	}
	b.wg.Wait()
	close(done)
	watcher.Wait()
}

// stopCause returns err, the error of a call over m, unless it is the end of
// m because stop stopped the server: then, the reason stop was given.
func (b *backend) stopCause(m *mux, err error) error {
	select {
	case <-m.done:
	default:
		return err
	}
	b.mu.Lock()
	stopping, why := b.stopping, b.stopWhy
	b.mu.Unlock()
	if !stopping || why == "" || err != m.err { // m.err is set once done is closed
		return err
	}
	return unavailable("server %q %s", b.name, why)
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

// backendScope is what a backend of a session-scoped server holds beyond a
// shared server's. It is data only: the backend reads marker, and the
// gateway the rest.
type backendScope struct {
	// On a session's backend:
	marker  string   // the server's name in its processes' marker: name#N
	catalog *backend // the server's catalog backend, whose metrics count this one's calls

	// On the catalog backend:
	instances atomic.Int64 // the server's processes for sessions not yet stopped
	listed    atomic.Bool  // the probe listed the server and was stopped
}

// markerName returns the server name in the marker of b's processes (see
// markerEnv): its own for a session's backend, else the server's.
func (b *backend) markerName() string {
	if b.scope != nil && b.scope.marker != "" {
		return b.scope.marker
	}
	return b.name
}

// health returns what /healthz reports of the backend now. It is safe for
// concurrent use.
func (b *backend) health() health {
	b.mu.Lock()
	defer b.mu.Unlock()
	h := health{Name: b.name, State: b.state, Tools: len(b.up.items(kindTool)), Restarts: b.restarts, LastExit: b.lastExit}
	h.Prompts, h.Resources, h.Templates = len(b.up.items(kindPrompt)), len(b.up.items(kindResource)), len(b.up.items(kindTemplate))
	if b.proc != nil && b.state != stateIdle { // an idle server's last process is gone
		if !closed(b.proc.exited) { // else it is the PID of a process gone, perhaps reused
			h.PID = b.proc.pid
		}
		if b.state != stateReady {
			h.Stderr = b.proc.tail.all()
		}
	}
	switch b.state {
	case stateReady:
		h.Uptime = time.Since(b.readyAt).Round(time.Second).String()
		h.InFlight = b.mux.inFlight()
	case stateIdle: // well, not an error: a request starts it
	case stateFailed, stateBackoff:
		h.Error = b.lastErr
		// In backoff, until run has set when the restart comes, retryAt is
		// a past one's.
		if b.state == stateFailed || b.retryAt.After(time.Now()) {
			h.RetryAt = b.retryAt.UTC().Format(time.RFC3339)
		}
	default:
		h.Error = b.lastErr
	}
	if b.scope != nil && b.scope.catalog == nil {
		b.scope.reportScope(&h, b.state, b.cfg.Scope)
	}
	return h
}
