package main

import (
	"errors"
	"io"
	"net/http"
	"strconv"
)

// What the HTTP front ends do on every request, kept to what corral needs:
// a request body read into one buffer, and a JSON answer written with its
// length, so that net/http sends headers and body in one write to the
// connection, never chunked.

// exactBodyBytes bounds the buffer allocated for a request body before its
// bytes arrive: a body that declares a length up to it is read into one
// buffer of that length; a larger one, or one of unknown length, into a
// buffer grown as its bytes come, so that a client cannot make corral
// allocate maxRequestBytes by declaring them.
const exactBodyBytes = 64 << 10

// readBounded reads r's body, at most maxBytes of it. A body over maxBytes
// gives an *http.MaxBytesError; one that declares more is refused unread. It
// reads to the end of the body, so that net/http watches the connection for
// the client going away (which cancels r's context) while the request is
// served.
func readBounded(w http.ResponseWriter, r *http.Request, maxBytes int64) ([]byte, error) {
	n := r.ContentLength
	if n > maxBytes {
		return nil, &http.MaxBytesError{Limit: maxBytes}
	}
	if n < 0 || n > exactBodyBytes {
		return io.ReadAll(http.MaxBytesReader(w, r.Body, maxBytes))
	}
	buf := make([]byte, n+1) // one byte more, to see the end where the length says
	got, err := io.ReadFull(r.Body, buf)
	switch {
	case int64(got) == n && (err == io.EOF || err == io.ErrUnexpectedEOF):
		return buf[:n], nil
	case err == nil:
		return nil, errors.New("the body is longer than its Content-Length")
	case err == io.EOF:
		return nil, io.ErrUnexpectedEOF
	}
	return nil, err
}

// jsonContentType is the Content-Type header value of a JSON answer. It is
// never modified: every answer shares it, so that setting it allocates
// nothing (net/http copies the header when it writes it).
var jsonContentType = []string{"application/json"}

// chunkingBuffer is how much of a response net/http holds before it sends
// the headers: a handler that returns having written less gets its
// Content-Length set by net/http, without allocating.
const chunkingBuffer = 2048

// writeAnswer answers with status and a JSON message, with its
// Content-Length: set here for an answer too large for net/http's buffer,
// else by net/http itself. An answer that fits in the connection's buffer
// (4 KiB) leaves with its headers in one write when the handler returns; it
// must not be flushed before. It returns the error of a write that failed.
func writeAnswer(w http.ResponseWriter, status int, a *reply) error {
	h := w.Header()
	h["Content-Type"] = jsonContentType
	if n := a.len(); n >= chunkingBuffer {
		h.Set("Content-Length", strconv.Itoa(n))
	}
	if status != http.StatusOK {
		w.WriteHeader(status)
	}
	_, err := a.WriteTo(w)
	return err
}
