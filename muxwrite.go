package main

// This file holds the mux's way to the server: the messages for it, kept
// in order and bounded, and who writes them. A caller writes its message
// itself when the connection takes it at once (a child's stdin pipe with
// room in it), with whatever other messages queued up meanwhile, in one
// write; only when the connection would block does writeLoop, the mux's
// writing goroutine, take over. So a call costs no hand-over between
// goroutines, and a server that stops reading its stdin holds up no
// caller: its messages wait in the bounded queue, and writeLoop alone waits
// for the server.

import (
	"bytes"
	"context"
	"errors"
	"sync"
)

// outbox holds the messages for the server that are not written yet. The
// mux's methods put messages in; at most one goroutine at a time writes
// them out (see busy). Its zero value is not usable: see newMux.
type outbox struct {
	max  int           // the most messages buf may hold
	kick chan struct{} // tells writeLoop there is work for it; capacity 1

	mu   sync.Mutex
	conn lineWriter // the connection's line writer, if it has one; set by writeLoop
	fast bool       // conn takes writes without waiting (see lineWriter.TryWriteLines)
	buf  []byte     // messages waiting, each ending in a newline, oldest first
	n    int        // how many messages buf holds (the rest of one counts as one)
	// busy is set while a goroutine writes out what buf holds: a caller
	// (fast) or writeLoop, which keeps it until buf is empty. Whoever
	// finds it set leaves its message in buf for that writer.
	busy  bool
	spare []byte        // a buffer written out before, for the next round
	room  chan struct{} // closed when buf has room again; made by a waiter
}

// maxSpareBytes is the largest buffer kept for reuse once written out.
const maxSpareBytes = 64 << 10

// maxWriteRounds is how many writes a caller makes for others' messages
// that queued up while it wrote, before it leaves the rest to writeLoop:
// a caller is not held up for long by traffic that is not its own.
const maxWriteRounds = 4

// errOutboxFull is what put returns, without waiting, when the queue is full.
var errOutboxFull = errors.New("queue for the server's stdin is full")

// lineWriter is implemented by a connection whose messages are lines on a
// byte stream (lineConn): the mux then writes the lines as they are, many
// in one write.
type lineWriter interface {
	// WriteLines writes p, whole lines each ending in a newline, and
	// blocks until it is written or the stream fails.
	WriteLines(p []byte) error
	// TryWriteLines writes as much of p as the stream takes at once,
	// without waiting, and returns how many bytes it wrote. Only a
	// connection whose canTry reports true may be asked.
	TryWriteLines(p []byte) (int, error)
	// canTry reports whether TryWriteLines works on the connection.
	canTry() bool
}

// put queues line, a message ending in a newline, for the server, and
// writes it out at once if no one else is writing and the connection takes
// it. When the queue is full it waits for room if wait is set (until ctx
// ends or the mux closes), else it fails with errOutboxFull. It fails with
// the mux's error once the mux has closed. put keeps a copy of line: the
// caller may reuse it once put returns.
func (m *mux) put(ctx context.Context, line []byte, wait bool) error {
	select {
	case <-m.done:
		return m.err
	default:
	}
	o := &m.out
	o.mu.Lock()
	for o.n >= o.max {
		if !wait {
			o.mu.Unlock()
			return errOutboxFull
		}
		if o.room == nil {
			o.room = make(chan struct{})
		}
		room := o.room
		o.mu.Unlock()
		select {
		case <-room:
		case <-m.done:
			return m.err
		case <-ctx.Done():
			return ctxErr(ctx)
		}
		o.mu.Lock()
	}
	o.buf = append(o.buf, line...)
	o.n++
	switch {
	case o.busy:
		o.mu.Unlock() // the writer at work writes it
	case o.fast:
		o.busy = true
		m.writeNow() // unlocks o.mu
	default:
		o.busy = true
		o.mu.Unlock()
		o.poke()
	}
	return nil
}

// writeNow writes out what the queue holds, without waiting for the
// server, in at most maxWriteRounds writes; what the connection does not
// take at once is left to writeLoop, which then holds busy. It is called
// with o.mu held and busy set by the caller, and returns with o.mu
// unlocked.
func (m *mux) writeNow() {
	o := &m.out
	for round := 1; ; round++ {
		b := o.take()
		o.mu.Unlock()
		n, err := o.conn.TryWriteLines(b)
		if err != nil {
			// busy stays set: nothing is written after a failed write.
			m.close(m.stdinFailed(err))
			return
		}
		o.mu.Lock()
		if n < len(b) {
			// The pipe is full: the rest goes first, written by writeLoop.
			rest := make([]byte, 0, len(b)-n+len(o.buf))
			o.buf = append(append(rest, b[n:]...), o.buf...)
			o.n++
			o.mu.Unlock()
			o.poke()
			return
		}
		if cap(b) <= maxSpareBytes {
			o.spare = b[:0]
		}
		if len(o.buf) == 0 {
			o.busy = false
			o.mu.Unlock()
			return
		}
		if round == maxWriteRounds {
			o.mu.Unlock()
			o.poke()
			return
		}
	}
}

// take empties the queue and returns what it held, and wakes those waiting
// for room. It is called with o.mu held.
func (o *outbox) take() []byte {
	b := o.buf
	o.buf, o.spare, o.n = o.spare, nil, 0
	if o.room != nil {
		close(o.room)
		o.room = nil
	}
	return b
}

// poke tells writeLoop to write out the queue; busy is its from then on.
func (o *outbox) poke() {
	select {
	case o.kick <- struct{}{}:
	default: // already told
	}
}

// writeLoop writes out the queue whenever a caller leaves it to it (the
// connection would have blocked the caller, or cannot be written to
// without blocking at all), until the mux closes or a write fails, which
// closes the mux. The owner runs it on the connection for the mux's life.
func (m *mux) writeLoop(c msgConn) {
	o := &m.out
	lw, _ := c.(lineWriter)
	o.mu.Lock()
	o.conn = lw
	o.fast = lw != nil && lw.canTry()
	o.mu.Unlock()
	for {
		select {
		case <-o.kick:
		case <-m.done:
			return
		}
		if err := m.drain(c, lw); err != nil {
			m.close(m.stdinFailed(err))
			return
		}
	}
}

// drain writes out the queue until it is empty, waiting for the server as
// long as it takes, then lets go of busy. After a failed write it keeps
// busy: nothing is written after it.
func (m *mux) drain(c msgConn, lw lineWriter) error {
	o := &m.out
	o.mu.Lock()
	for len(o.buf) > 0 {
		b := o.take()
		o.mu.Unlock()
		if lw != nil {
			if err := lw.WriteLines(b); err != nil {
				return err
			}
		} else {
			// The connection may keep each message: b is not reused.
			for line := range bytes.SplitSeq(bytes.TrimSuffix(b, []byte{'\n'}), []byte{'\n'}) {
				if err := c.WriteMessage(line); err != nil {
					return err
				}
			}
		}
		o.mu.Lock()
	}
	o.busy = false
	o.mu.Unlock()
	return nil
}

// stdinFailed is why the mux closes when a write to the server fails.
func (m *mux) stdinFailed(err error) error {
	return unavailable("server %q stopped reading its stdin: %v", m.name, err)
}
