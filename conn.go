package main

// This file holds the seam between the mux and the transports under it: a
// connection that carries whole JSON-RPC messages, one at a time, whatever
// the framing underneath (newline-delimited pipes, or Streamable HTTP).

import "fmt"

// msgConn is one connection to a server, message by message. The mux runs
// over any msgConn: a child's pipes (lineConn, stdio.go) or a remote server
// (remoteConn, remote.go).
type msgConn interface {
	// ReadMessage blocks until the server's next message and returns it,
	// one JSON-RPC message (or what the server sent as one), without line
	// ending, in a slice that is the caller's. It is called by one goroutine
	// at a time. A *lineTooLongError is about one message, over the size
	// limit, which was dropped: it fails the one request it answers and the
	// connection stays usable. Any other error (io.EOF at the end) means
	// the connection is over: no message follows.
	ReadMessage() ([]byte, error)

	// WriteMessage sends msg, one JSON-RPC message without line ending, to
	// the server. It is called by one goroutine at a time, and may return
	// before the server has the message. The connection may keep msg: the
	// caller must not change it afterwards. An error means the server
	// cannot be written to any more.
	WriteMessage(msg []byte) error

	// Close ends the connection and stops what it started, in the way its
	// transport asks, and blocks until that is done. It may be called more
	// than once, and concurrently with the other methods, which then fail.
	Close() error
}

// remoteLink is a msgConn to a remote server, which may end on its own
// (the server ended the session, or its event stream): Done is closed then,
// and Err says why. Both a remoteConn (Streamable HTTP) and an sseConn (the
// HTTP+SSE transport of 2024-11-05) are.
type remoteLink interface {
	msgConn
	Done() <-chan struct{}
	Err() error
}

// lineTooLongError reports a message (a line, on a child's stdout) over the
// connection's maximum, maxLineBytes. It has been read and thrown away; id
// holds the raw JSON of its top-level "id" member, if one
// was found in it, so that the one request it answers can be failed.
type lineTooLongError struct {
	size int64
	max  int
	id   []byte
}

func (e *lineTooLongError) Error() string {
	return fmt.Sprintf("a message over the %d-byte line limit (maxLineBytes): %d bytes read and dropped", e.max, e.size)
}
