package main

// This file holds the life of a server's prerequisite (prereqconfig.go):
// started before each start of its server, waited for until ready, and,
// when corral manages it, watched while the server runs and stopped after
// the server.
//
// A managed prerequisite lives as long as one run of its server: it starts
// before the server's process (or, for a remote server, its session) and
// stops after it, with the stop ladder; when it dies while the server runs,
// the run ends as a crash (backoff, restart count), and the next start
// starts both again. An unmanaged one ("managed": false) is started only
// when its tcp check fails, is waited for like a managed one, and is left
// to run on its own from the moment it is ready: corral never stops,
// signals or sweeps it after that, and it carries no marker.

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"
)

// prereqPoll is how often a prerequisite's tcp check is tried while corral
// waits for it, and prereqDial bounds one try.
const (
	prereqPoll = 50 * time.Millisecond
	prereqDial = time.Second
)

// withPrereq returns connect, the way a run of the backend reaches its
// server, preceded by the start of the server's prerequisite, if it has
// one. The link it makes stops the prerequisite after the server (its
// conn's Close) and, for a managed one, ends the run when the prerequisite
// dies (its watch). It runs, as connect does, with startMu held: the wait
// for the prerequisite ends when stop begins.
func (b *backend) withPrereq(connect func(m *mux) (link, error)) func(m *mux) (link, error) {
	pre := b.cfg.Prerequisite
	if pre == nil {
		return connect
	}
	return func(m *mux) (link, error) {
		r, err := b.startPrereq(pre)
		if err != nil {
			return link{}, err // run logs it, with the plan of retries
		}
		l, err := connect(m)
		if err != nil {
			r.stop(b.hurry)
			return link{}, err
		}
		return r.wrap(l), nil
	}
}

// prereqRun is one start of a prerequisite, for one run of its server. Its
// stop may be called more than once, and concurrently.
type prereqRun struct {
	b   *backend
	pre *Prerequisite
	log *slog.Logger

	proc    *process      // nil when corral did not start it, or gave it up (unmanaged)
	drained chan struct{} // closed when its stdout has been read to its end

	stopOnce sync.Once
}

// startPrereq starts the backend's prerequisite pre, unless its tcp check
// already passes, and waits, at most startTimeout, until it is ready. On
// failure, what it started is stopped.
func (b *backend) startPrereq(pre *Prerequisite) (*prereqRun, error) {
	r := &prereqRun{b: b, pre: pre, log: b.log.With("prerequisite", pre.Command)}
	if addr := pre.Ready.TCP; addr != "" && dialReady(addr, prereqDial) == nil {
		r.log.Info("the prerequisite's address already accepts connections; not starting a second one", "tcp", addr, "managed", pre.managed())
		return r, nil
	}
	p, err := startProcess(b.prereqSpec(pre))
	if err != nil {
		return nil, fmt.Errorf("server %q: cannot start its prerequisite %q: %w", b.name, pre.Command, errors.Unwrap(err))
	}
	r.proc, r.drained = p, make(chan struct{})
	go func() {
		defer close(r.drained)
		drainLines(p.stdout, &p.tail, p.spec.log, nil, p.spec.stderrLines, p.spec.stderrBytes)
	}()
	r.log.Info("prerequisite started", "pid", p.pid, "managed", pre.managed())
	if err := r.waitReady(b.gcfg.StartTimeout.D(), b.stopCh); err != nil {
		r.stop(b.hurry) // unmanaged too: corral leaves it running only once it is ready
		return nil, err
	}
	r.log.Info("prerequisite ready", "pid", p.pid)
	if !pre.managed() {
		r.handOver()
	}
	return r, nil
}

// prereqSpec returns how to run the backend's prerequisite pre: as its
// server would run (the config's stop grace, stderr bounds, environment
// without corral's inherited markers and token variable, relative cwd from
// the config's directory), with pre's own env, and, if managed, the
// server's marker, so that what it leaves behind is swept with the server's.
func (b *backend) prereqSpec(pre *Prerequisite) processSpec {
	dir := pre.Cwd
	if dir != "" && !filepath.IsAbs(dir) && b.gcfg.file != "" {
		dir = filepath.Join(filepath.Dir(b.gcfg.file), dir)
	}
	env := withoutVars(os.Environ(), envInstance, envServer, b.gcfg.AuthTokenEnv)
	for _, k := range slices.Sorted(maps.Keys(pre.Env)) {
		env = append(env, k+"="+pre.Env[k])
	}
	if pre.managed() {
		env = append(env, markerEnv(b.instance, b.name)...)
	}
	return processSpec{
		name:        b.name + " prerequisite",
		role:        "prerequisite",
		command:     pre.Command,
		args:        pre.Args,
		env:         env,
		dir:         dir,
		stopGrace:   b.gcfg.StopGrace.D(),
		killGrace:   b.gcfg.KillGrace.D(),
		pipeDrain:   time.Second,
		log:         b.log.With("prerequisite", pre.Command),
		reaper:      b.reaper,
		detached:    !pre.managed(),
		stderrLines: b.gcfg.MaxStderrLinesPerSecond,
		stderrBytes: b.gcfg.MaxStderrBytesPerSecond,
	}
}

// waitReady blocks until the prerequisite is ready: its tcp address accepts
// a connection, or its delay has passed. It fails when the prerequisite
// exits first, when timeout passes first, or when stop is closed.
func (r *prereqRun) waitReady(timeout time.Duration, stop <-chan struct{}) error {
	name, cmd := r.b.name, r.pre.Command
	end := time.Now().Add(timeout)
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	var tick <-chan time.Time
	if d := r.pre.Ready.Delay.D(); d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		tick = t.C
	} else {
		t := time.NewTicker(prereqPoll)
		defer t.Stop()
		tick = t.C
	}
	var lastErr error
	for {
		if r.pre.Ready.TCP != "" {
			if lastErr = dialReady(r.pre.Ready.TCP, max(min(prereqDial, time.Until(end)), time.Millisecond)); lastErr == nil {
				return nil
			}
		}
		select {
		case <-tick:
			if r.pre.Ready.TCP == "" {
				return nil // the delay has passed
			}
		case <-r.proc.exited:
			msg := fmt.Sprintf("server %q: its prerequisite %q exited (%s) before it was ready", name, cmd, r.proc.exitDescription())
			if last := r.lastLine(); last != "" {
				msg += "; its last output line: " + last
			}
			return errors.New(msg)
		case <-stop:
			return fmt.Errorf("server %q: stopped while waiting for its prerequisite %q", name, cmd)
		case <-deadline.C:
			if r.pre.Ready.TCP != "" {
				return fmt.Errorf("server %q: its prerequisite %q did not accept connections at %s (ready.tcp) within %s (startTimeout); the last try: %v",
					name, cmd, r.pre.Ready.TCP, timeout, lastErr)
			}
			return fmt.Errorf("server %q: waiting %s (ready.delay) for its prerequisite %q would take longer than startTimeout (%s); shorten the delay or raise startTimeout",
				name, r.pre.Ready.Delay.D(), cmd, timeout)
		}
	}
}

// lastLine returns the last line the prerequisite wrote, on stdout or
// stderr, after a moment for it to arrive.
func (r *prereqRun) lastLine() string {
	t := time.NewTimer(stderrSettle)
	defer t.Stop()
	select {
	case <-r.proc.stderrDone:
	case <-t.C:
	}
	return r.proc.tail.last()
}

// handOver gives up a ready unmanaged prerequisite: corral closes its ends
// of the pipes, which carry nothing (its stdio is /dev/null), and forgets
// it. The goroutine of startProcess that waits for it to exit stays until it
// does, even after the gateway has stopped: a leak that cannot be avoided
// without leaving a zombie to corral. There is at most one such goroutine
// for each such process, and no more processes than starts of the server
// that found none already running.
func (r *prereqRun) handOver() {
	p := r.proc
	p.stdin.Close()
	p.closePipes()
	<-r.drained
	r.proc = nil
	r.log.Info("the prerequisite is left to run on its own (managed: false); corral will not stop it", "pid", p.pid)
}

// stop stops the prerequisite with the stop ladder, if corral started it
// and manages it, and blocks until it is gone. Closing hurry skips the
// ladder's waits.
func (r *prereqRun) stop(hurry <-chan struct{}) {
	if r.proc == nil {
		return
	}
	r.stopOnce.Do(func() {
		r.proc.Stop(hurry)
		<-r.drained
		r.log.Info("prerequisite stopped", "pid", r.proc.pid, "exit", r.proc.exitDescription())
	})
}

// wrap returns l, the link of a run of the server, with the prerequisite
// stopped after the server and, for one corral manages, watched.
func (r *prereqRun) wrap(l link) link {
	if r.proc == nil {
		return l
	}
	watch := l.watch
	l.conn = prereqConn{msgConn: l.conn, r: r}
	l.watch = func(m *mux, readDone <-chan struct{}) {
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.watch(m)
		}()
		watch(m, readDone) // returns once m is closed
		wg.Wait()
	}
	return l
}

// watch ends the run whose mux is m, as a crash, when the prerequisite
// exits while the server runs; it returns when either ends.
func (r *prereqRun) watch(m *mux) {
	select {
	case <-r.proc.exited:
	case <-m.done:
		return
	}
	select {
	case <-m.done:
		return // the run was over first: the prerequisite is being stopped after it
	default:
	}
	why := fmt.Sprintf("its prerequisite %q exited (%s) while the server ran; restarting both", r.pre.Command, r.proc.exitDescription())
	r.log.Error(why)
	r.b.leaveReady(m, why)
	m.close(unavailable("server %q: %s", r.b.name, why))
}

// prereqConn is a run's connection to its server, whose Close also stops
// the prerequisite, after the server.
type prereqConn struct {
	msgConn
	r *prereqRun
}

func (c prereqConn) Close() error {
	err := c.msgConn.Close()
	c.r.stop(c.r.b.hurry)
	return err
}

// dialReady reports whether addr accepts a TCP connection within timeout:
// nil if it does. The connection is closed at once.
func dialReady(addr string, timeout time.Duration) error {
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return err
	}
	c.Close()
	return nil
}
