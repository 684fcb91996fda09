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

// lazyState is what a backend keeps for lazy start and idle stop. Its
// fields are guarded by the backend's mu, but idleStop, wake and cache,
// which initLazy sets once, and busy and lastUse, which are atomic: a call
// claims the server under mu, and releases it without.
type lazyState struct {
	idleStop time.Duration // zero: never
	probe    bool          // the next run lists the server for the cache, and stops as soon as it is idle
	dozing   bool          // the backend is idle, or is being stopped for being idle: calls wake it
	woken    bool          // a call asked for a start since the backend went idle
	busy     atomic.Int64  // calls that took the ready mux and have not returned
	lastUse  atomic.Int64  // when a call last began or ended (Unix nanoseconds), with an idleStop
	wake     chan struct{} // one slot: a call's ask for a start
	cache    *catalogCache // the server's cache file; nil unless lazy with a cache directory
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
	b.mu.Lock()
	instructions := b.instructions
	b.mu.Unlock()
	if err := c.save(b.up.cached(instructions)); err != nil {
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
func (b *backend) asleep() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.lazy.dozing
}

// sleep keeps the backend idle until a call wakes it, and reports true, or
// until stop begins, and reports false. It blocks.
func (b *backend) sleep() bool {
	b.mu.Lock()
	why := b.lastErr
	b.mu.Unlock()
	b.setState(stateIdle, why)
	select {
	case <-b.lazy.wake:
	case <-b.stopCh:
		return false
	}
	b.mu.Lock()
	b.lazy.dozing, b.lazy.woken = false, false
	b.mu.Unlock()
	return true
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
	case b.lazy.dozing:
		state = stateIdle
		if !b.lazy.woken {
			b.lazy.woken = true
			b.lazy.wake <- struct{}{} // the slot is empty: one ask per spell
		}
	case state == stateReady && closed(m.done):
		state = stateBackoff
	case state == stateReady:
		b.lazy.busy.Add(1)
		b.used()
	}
	return state, m, changed, lastErr
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
	b.mu.Lock()
	d, probe := b.lazy.idleStop, b.lazy.probe
	b.lazy.probe = false
	b.mu.Unlock()
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
	b.lazy.dozing, b.lazy.woken = true, false
	return 0
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
