package main

// This file holds the stdio front end: one MCP session served on corral's
// own stdin and stdout (with -stdio). It sits beside http.go, the other front
// end, and like it calls down into the gateway only; the line framing it
// reads with is stdio.go's.

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"time"
)

// stdioFrontEnd is the framing of one session on a pair of streams: a line
// per message each way. Its sessionLoop serves the session. It lives for one
// call of serveStdio; its fields are set before the goroutines it starts
// read them.
type stdioFrontEnd struct {
	frontEnd
	drain time.Duration // how long calls in flight may take once ctx ends
	loop  *sessionLoop

	// lines goes to the writer, which owns out. It is closed once, under
	// linesMu, when no call is left to send on it; notify drops what comes
	// after.
	lines       chan stdioLine
	linesMu     sync.Mutex
	linesClosed bool
}

// stdioLine is one message for the writer: an answer held until it is
// written (see frontEnd.hold), or a message that is not (held is 0).
type stdioLine struct {
	msg  *reply
	held int64
}

// stdinRead is one line read from the client, or the error that ended or cut
// it short.
type stdinRead struct {
	line []byte
	err  error
}

// serveStdio serves one MCP session on in and out (corral's own stdin and
// stdout with -stdio), as who, until in ends or ctx ends. Requests are served
// concurrently; each answer and notification is written as one line. When in
// ends, the client is gone: calls in flight are cancelled. When ctx ends, no
// new message is read and calls in flight have drain to finish. It blocks
// until every call it started has returned and everything written has been
// flushed to out.
func serveStdio(ctx context.Context, gw *Gateway, who principal, in io.Reader, out io.Writer, maxLine int, drain time.Duration, log *slog.Logger) {
	f := &stdioFrontEnd{frontEnd: frontEnd{gw: gw, log: log}, drain: drain, lines: make(chan stdioLine, relatedBuffer)}
	s := gw.sessions.newSession(f.notify, who, "")
	f.loop = newSessionLoop(f.frontEnd, s, "stdio", f, true)
	defer f.loop.cancel()
	writerDone := f.startWriter(out)
	reads := f.startReader(in, maxLine)
	f.serve(ctx, reads)
	f.finish(writerDone)
}

// startWriter starts the one goroutine that writes to out, and returns a
// channel closed when it has written every line and returned; finish joins
// it. Answers wait for it; notifications are dropped when it is behind (see
// notify), like on an HTTP session's stream.
func (f *stdioFrontEnd) startWriter(out io.Writer) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		bw := bufio.NewWriterSize(out, 64<<10)
		for l := range f.lines {
			l.msg.WriteTo(bw)
			bw.WriteByte('\n')
			err := bw.Flush()
			if err != nil {
				f.log.Warn("writing to stdout", "err", err)
			}
			if l.held > 0 {
				f.loop.written(l.held, l.msg.len(), nil) // a failed write is logged above
			}
		}
	}()
	return done
}

// put passes m to the writer (outlet): a client that stops reading corral's
// stdout has its session refuse new calls (see sessionSet.holdAnswer) rather
// than make corral hold their answers without end. It blocks while the
// writer is behind.
func (f *stdioFrontEnd) put(m *reply, held int64) {
	f.lines <- stdioLine{msg: m, held: held}
}

// notify sends a message of the session to the client, or drops it when the
// writer is behind. It is safe for concurrent use, and may be called after
// the session ends: a server's request to the client may be settled by its
// timer then, and what it sends must not reach a closed lines.
func (f *stdioFrontEnd) notify(msg []byte) {
	f.linesMu.Lock()
	defer f.linesMu.Unlock()
	if f.linesClosed {
		return
	}
	select {
	case f.lines <- stdioLine{msg: &reply{head: msg}}:
	default:
	}
}

// startReader starts the goroutine that reads in line by line, and returns
// the channel it sends each line on. It stops after the first error other
// than an over-long line, or once the calls' context ends. It may stay
// blocked in a read of in after serveStdio returns: in is corral's stdin,
// and the process is about to exit, so nothing joins it.
func (f *stdioFrontEnd) startReader(in io.Reader, maxLine int) <-chan stdinRead {
	reads := make(chan stdinRead)
	go func() {
		lr := newLineReader(in, maxLine)
		for {
			line, err := lr.next()
			select {
			case reads <- stdinRead{line, err}:
			case <-f.loop.ctx.Done():
				return
			}
			if err != nil && !isTooLong(err) {
				return
			}
		}
	}()
	return reads
}

// serve handles what the client sends until in ends or ctx ends; then, for
// ctx, it waits for the calls in flight (see drainCalls).
func (f *stdioFrontEnd) serve(ctx context.Context, reads <-chan stdinRead) {
	for {
		select {
		case <-ctx.Done():
			f.drainCalls()
			return
		case r := <-reads:
			if !f.serveLine(r) {
				return
			}
		}
	}
}

// drainCalls lets the calls in flight finish, for at most drain, and then
// cuts off the rest.
func (f *stdioFrontEnd) drainCalls() {
	f.gw.EndStreams()
	idle := f.loop.close()
	t := time.NewTimer(f.drain)
	defer t.Stop()
	select {
	case <-idle:
	case <-t.C:
		f.log.Warn("calls still in flight at the end of shutdownTimeout are cut off")
		f.gw.CutOff()
	}
}

// serveLine handles one read from the client, and reports whether to read
// on: false when in has ended or failed.
func (f *stdioFrontEnd) serveLine(r stdinRead) bool {
	var tooLong *lineTooLongError
	switch {
	case errors.As(r.err, &tooLong):
		f.put(errorReply(tooLong.id, &wireError{Code: codeInvalidRequest, Message: tooLong.Error()}), 0)
		return true
	case r.err == io.EOF:
		f.log.Info("stdin closed: the client has gone")
		return false
	case r.err != nil:
		f.log.Warn("reading stdin", "err", r.err)
		return false
	}
	if len(bytes.TrimSpace(r.line)) == 0 {
		return true
	}
	if isBatch(r.line) {
		if refused := f.loop.serveBatch(r.line); refused != nil {
			f.put(refused, 0)
		}
		return true
	}
	msg, refused := decodeClientMessage(r.line)
	if refused != nil {
		f.put(refused, 0)
		return true
	}
	f.loop.dispatch(msg)
	return true
}

// finish cancels the calls still in flight, ends the session, waits for
// every call, then closes lines and waits for the writer to flush them.
func (f *stdioFrontEnd) finish(writerDone <-chan struct{}) {
	f.loop.cancel()
	f.gw.sessions.endSession(f.loop.s)
	f.loop.end()
	f.linesMu.Lock()
	f.linesClosed = true
	close(f.lines)
	f.linesMu.Unlock()
	<-writerDone
}
