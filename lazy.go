package main

// This file holds a backend's lazy start and idle stop: the idle state, in
// which the server does not run but its catalog is still offered, and the
// moves into and out of it. supervisor.go's run calls sleep and idleLoop;
// call claims the running server through claim and release.

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// stateIdle is the state of a server corral does not run until a request
// needs it: a lazy server not started yet, or one stopped by idleStop. Its
// catalog is still offered; a call starts it and waits.
const stateIdle backendState = "idle"

// minIdleCheck bounds how often an idle check looks again while the server
// is in use, whatever idleStop is.
const minIdleCheck = 50 * time.Millisecond

// lazyState is what a backend keeps for lazy start and idle stop.
// idleStop, wake and cache are set once by initLazy; busy and lastUse are
// atomic: a call claims the server under the backend's mu, and releases it
// without.
//
// Lock order: mu is a leaf, taken under the backend's mu (backend.claim,
// backend.idleWait), so that a call's claim and an idle check agree on
// whether the backend dozes.
type lazyState struct {
	idleStop time.Duration // zero: never
	busy     atomic.Int64  // calls that took the ready mux and have not returned
	lastUse  atomic.Int64  // when a call last began or ended (Unix nanoseconds), with an idleStop
	wake     chan struct{} // one slot: a call's ask for a start
	cache    *catalogCache // the server's cache file; nil unless lazy with a cache directory

	mu     sync.Mutex
	probe  bool // the next run lists the server for the cache, and stops as soon as it is idle
	dozing bool // the backend is idle, or is being stopped for being idle: calls wake it
	woken  bool // a call asked for a start since the backend went idle
}

// askIfDozing reports whether the backend dozes; if it does, it asks for a
// start, once per idle spell. It does not block.
func (l *lazyState) askIfDozing() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.dozing {
		return false
	}
	if !l.woken {
		l.woken = true
		l.wake <- struct{}{} // the slot is empty: one ask per spell
	}
	return true
}

// isDozing reports whether the backend is to stay idle until a call wakes
// it.
func (l *lazyState) isDozing() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.dozing
}

// doze begins an idle spell: calls from now on wake the backend.
func (l *lazyState) doze() {
	l.mu.Lock()
	l.dozing, l.woken = true, false
	l.mu.Unlock()
}

// awake ends an idle spell.
func (l *lazyState) awake() {
	l.mu.Lock()
	l.dozing, l.woken = false, false
	l.mu.Unlock()
}

// takeProbe reports whether this run is a probe, and makes the next one
// not.
func (l *lazyState) takeProbe() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	probe := l.probe
	l.probe = false
	return probe
}

// initLazy sets up the backend's lazy start and idle stop, before it is
// started. A lazy server whose catalog is in the cache begins idle, with
// that catalog; one whose catalog is not is started once to list it (a
// probe), then stopped.
func (b *backend) initLazy() {
	b.lazy.wake = make(chan struct{}, 1)
	b.lazy.idleStop = b.sup.IdleStop.D()
	if !b.cfg.isLazy() {
		return
	}
	b.lazy.probe = true
	dir, err := b.gcfg.catalogCacheDir()
	if err != nil {
		return // the gateway says why, once (warnNoCacheDir)
	}
	b.lazy.cache = newCatalogCache(dir, b.gcfg, b.cfg)
	cc, err := b.lazy.cache.load()
	if err != nil {
		level := slog.LevelInfo
		if errors.Is(err, fs.ErrNotExist) {
			level = slog.LevelDebug
		}
		b.log.Log(context.Background(), level, catalogSource(err)+"; starting the server once to list it", "file", b.lazy.cache.path, "err", err)
		return
	}
	b.up.restore(cc)
	b.instructions = cc.Instructions
	b.state, b.lastErr = stateIdle, "not started yet (start: lazy); the first request that needs it starts it"
	b.lazy.probe, b.lazy.dozing = false, true
	b.log.Debug("catalog read from the cache", "file", b.lazy.cache.path)
}

// warnNoCacheDir logs, once for the config cfg, why lazy servers have no
// catalog cache, if they have none.
func warnNoCacheDir(cfg *Config, log *slog.Logger) {
	for _, s := range cfg.Servers() {
		if s.isLazy() {
			if _, err := cfg.catalogCacheDir(); err != nil {
				log.Warn("lazy servers are started at startup to list them, then stopped", "reason", err.Error())
			}
			return
		}
	}
}

// saveCatalog writes what the server offers to its cache file, if it has
// one. It is called each time the server's lists were listed.
func (b *backend) saveCatalog() {
	c := b.lazy.cache
	if c == nil {
		return
	}
	if err := c.save(b.up.cached(b.instructionsText())); err != nil {
		b.log.Warn("cannot write the catalog cache; the next start of corral lists the server again", "file", c.path, "err", err)
	}
}

// nap keeps the backend idle, if it is to be (asleep), until a call wakes
// it: then it sets *first to false and *why to why it starts, and reports
// true. When stop begins meanwhile, it sets the backend stopped and
// reports false. It blocks.
func (b *backend) nap(first *bool, why *string) bool {
	if !b.asleep() {
		return true
	}
	if !b.sleep() {
		b.setState(stateStopped, "stopped by corral")
		return false
	}
	*first, *why = false, "a request needs it"
	return true
}

// asleep reports whether the backend is to stay idle until a call wakes it.
func (b *backend) asleep() bool { return b.lazy.isDozing() }

// sleep keeps the backend idle until a call wakes it, and reports true, or
// until stop begins, and reports false. It blocks.
func (b *backend) sleep() bool {
	b.setState(stateIdle, b.lastError())
	select {
	case <-b.lazy.wake:
	case <-b.stopCh:
		return false
	}
	b.lazy.awake()
	return true
}

// closed reports whether ch is closed.
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// release ends a use begun by claim. It does not block.
func (b *backend) release() {
	b.used() // first: an idle check that sees no call busy sees this use
	b.lazy.busy.Add(-1)
}

// used notes that a call used the server now, if it has an idleStop.
func (b *backend) used() {
	if b.lazy.idleStop > 0 {
		b.lazy.lastUse.Store(time.Now().UnixNano())
	}
}

// idleLoop stops the run whose mux is m, with stop, once it has had no
// call in flight and no subscription for idleStop (or, for a probe, as
// soon as it has none), and leaves the backend idle. It returns when m
// closes.
func (b *backend) idleLoop(m *mux, stop func()) {
	d, probe := b.lazy.idleStop, b.lazy.takeProbe()
	b.used()
	why := fmt.Sprintf("stopped after %s with nothing in flight (idleStop); the next request starts it", d)
	switch {
	case probe:
		d, why = 0, "listed for the catalog, then stopped (start: lazy); the first request that needs it starts it"
	case d == 0:
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-m.done:
			return
		}
		wait := b.idleWait(m, d)
		if wait == 0 {
			break
		}
		t.Reset(wait)
	}
	b.setState(stateIdle, why)
	m.close(unavailable("server %q was stopped: %s", b.name, why))
	stop()
}

// startWaitError is the error of a call whose deadline passed while it
// waited for the server to start.
type startWaitError struct {
	server string
	state  backendState
	why    string
	err    error // the context's
}

func (e *startWaitError) Error() string {
	return fmt.Sprintf("server %q was not ready by the call's deadline: it is %s (%s); corral goes on starting it, call again", e.server, e.state, e.why)
}

func (e *startWaitError) Unwrap() error { return e.err }

// waitError returns the error of a call that waited for the backend, in
// state, until ctx ended.
func (b *backend) waitError(ctx context.Context, state backendState, why string) error {
	err := ctxErr(ctx)
	if !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	if state == stateIdle {
		state = stateStarting
	}
	return &startWaitError{server: b.name, state: state, why: why, err: err}
}

// timeoutMessage says why a call to server timed out: the server did not
// answer within timeout, or was not ready by then (startWaitError).
func timeoutMessage(err error, server, method string, timeout time.Duration) string {
	if sw := (*startWaitError)(nil); errors.As(err, &sw) {
		return fmt.Sprintf("%s (%s, requestTimeout)", sw.Error(), timeout)
	}
	return fmt.Sprintf("server %q did not answer %s within %s (requestTimeout); corral cancelled the request", server, method, timeout)
}
