package main

// This file holds the reader of a remote server's responses: it splits the
// JSON body or the event stream of one response into whole messages, each
// compacted, and delivers them to the connection's ReadMessage.

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
)

// errTooBig reports a message over the connection's maxMessage.
var errTooBig = errors.New("message over the size limit")

// msgReader delivers the messages of one response, each compacted and
// whole once read: JSON-RPC messages, or arrays of them, in a JSON body or
// in the data of server-sent events. It holds at most one message, of at
// most maxLine bytes, and past remoteHeld only with the connection's token
// for large messages. It tells whether one answered the request the
// response is for. It is not safe for concurrent use.
type msgReader struct {
	c        *remoteConn
	reqID    []byte       // the compact ID of the request answered; nil for the GET stream
	onAnswer func([]byte) // if not nil, gets the answer to reqID before it is delivered
	answered bool         // a message answering reqID was delivered
	invalid  bool         // a message that seemed to answer reqID was not valid JSON-RPC, and was dropped

	// onEvent, if not nil, gets each event named (by its event field,
	// which must come before its data) other than "message", with its data
	// whole, of at most sseMaxNamedData bytes, which is not read as
	// messages: the endpoint event of the HTTP+SSE transport of 2024-11-05.
	// An error it returns ends readSSE with it. If nil, the data of every
	// event is read as messages.
	onEvent func(name string, data []byte) error

	// Where the scan is: s follows the JSON, at depth top the members of
	// the message, and keeps the value of its "id".
	s      jsonScanner
	array  bool // inside an array of messages
	inMsg  bool
	method bool // the message has a method: a request or a notification
	answer bool // it has a result or an error

	run  int    // where in the piece being fed the message bytes not yet emitted start, or -1
	buf  []byte // the message's bytes so far, unless it is over maxLine
	size int64  // the message's size so far
	over bool   // the message is over maxLine: its bytes are not kept
	big  bool   // holds the connection's token for a message over remoteHeld
}

// errNotMessage reports JSON that is neither an object nor an array.
var errNotMessage = errors.New("a JSON value that is neither a message nor an array of messages")

// feed scans p, the next bytes of the response's messages.
func (r *msgReader) feed(p []byte) error {
	r.run = -1
	if r.inMsg {
		r.run = 0
	}
	for i := 0; i < len(p); {
		var err error
		if r.s.inStr {
			i, err = r.scanString(p, i)
		} else {
			err = r.scanByte(p, i)
			i++
		}
		if err != nil {
			return err
		}
	}
	return r.flush(p, len(p))
}

// flush emits the message bytes of p kept up to end.
func (r *msgReader) flush(p []byte, end int) error {
	run := r.run
	r.run = -1
	if run >= 0 && end > run {
		return r.emit(p[run:end])
	}
	return nil
}

// keep marks p[i] as a byte of the message, to emit.
func (r *msgReader) keep(i int) {
	if r.run < 0 {
		r.run = i
	}
}

// base returns the depth at which a message starts.
func (r *msgReader) base() int {
	if r.array {
		return 1
	}
	return 0
}

// scanString scans p from i, inside a string, and returns where the scan
// goes on.
func (r *msgReader) scanString(p []byte, i int) (int, error) {
	next, keyEnd, err := r.s.str(p, i)
	if keyEnd {
		switch string(r.s.key) {
		case "method":
			r.method = true
		case "result", "error":
			r.answer = true
		}
	}
	return next, err
}

// scanByte scans p[i], outside a string.
func (r *msgReader) scanByte(p []byte, i int) error {
	switch b := p[i]; {
	case b == ' ' || b == '\t' || b == '\n' || b == '\r':
		r.s.space()
		return r.flush(p, i)
	case !r.inMsg:
		return r.scanBetween(b, i)
	default:
		return r.scanInside(p, i)
	}
}

// scanBetween scans b, at p[i], a byte between messages.
func (r *msgReader) scanBetween(b byte, i int) error {
	switch {
	case b == '{' && r.s.depth == r.base():
		r.start()
		r.keep(i)
		r.s.depth++
	case b == '[' && r.s.depth == 0:
		r.array, r.s.depth = true, 1
	case b == ']' && r.array && r.s.depth == 1:
		r.array, r.s.depth = false, 0
	case b == ',' && r.array && r.s.depth == 1:
	default:
		return errNotMessage
	}
	return nil
}

// scanInside scans p[i], a byte of a message outside its strings.
func (r *msgReader) scanInside(p []byte, i int) error {
	r.keep(i)
	if r.s.out(p, i) {
		if err := r.flush(p, i+1); err != nil {
			return err
		}
		return r.end()
	}
	return nil
}

// start begins a message.
func (r *msgReader) start() {
	r.s.capture, r.s.max, r.s.breaks, r.s.sticky, r.s.top = "id", maxScannedID, true, true, r.base()+1
	r.s.clear()
	r.inMsg, r.method, r.answer, r.size, r.over = true, false, false, 0, false
}

// emit adds bytes of the message. A message over remoteHeld waits for the
// connection's token for large messages; one over maxLine is no longer
// kept, only counted: it fails the request it answers.
func (r *msgReader) emit(b []byte) error {
	r.size += int64(len(b))
	switch {
	case r.size > r.c.maxMessage:
		return errTooBig
	case r.size > int64(r.c.maxLine):
		r.over, r.buf = true, r.buf[:0]
	default:
		if r.size > remoteHeld && !r.big {
			if err := r.c.takeBig(); err != nil {
				return err
			}
			r.big = true
		}
		r.buf = append(r.buf, b...)
	}
	return nil
}

// end ends a message: it is delivered whole, in a slice of its own.
func (r *msgReader) end() error {
	r.inMsg = false
	id, idLong := r.s.val, r.s.long
	ours := r.answer && !r.method && r.reqID != nil && !idLong && bytes.Equal(id, r.reqID)
	defer r.reset()
	switch {
	case r.over:
		// Its request fails; the scan's word for its ID is all there is.
		r.answered = r.answered || ours
		var wireID []byte
		if !idLong && validID(id) {
			wireID = bytes.Clone(id)
		}
		return r.c.deliver(nil, &lineTooLongError{size: r.size, max: r.c.maxLine, id: wireID})
	case ours && !isAnswerTo(r.buf, r.reqID):
		// The mux would skip it as it skips any message it cannot decode,
		// and the caller would wait for an answer that never comes: it is
		// dropped here, and the request failed.
		r.c.log.Warn("dropped an answer that is not valid JSON-RPC", "line", truncate(r.buf, 200))
		r.invalid = true
		return nil
	case ours:
		r.answered = true
		if r.onAnswer != nil {
			r.onAnswer(r.buf)
		}
	}
	return r.c.deliver(bytes.Clone(r.buf), nil)
}

// reset forgets the message's bytes, and gives back the token for large
// messages if it holds it; what a large message grew is not kept for the
// next.
func (r *msgReader) reset() {
	if r.big {
		<-r.c.big
		r.big = false
	}
	r.buf = r.buf[:0]
	if cap(r.buf) > remoteKeptBuf {
		r.buf = nil
	}
}

// isAnswerTo reports whether msg is what the mux takes as the answer to
// the request with compact ID id.
func isAnswerTo(msg, id []byte) bool {
	m, err := decodeServerLine(msg)
	return err == nil && m.Method == "" && (m.Result != nil || m.Error != nil) && bytes.Equal(compactRaw(m.ID), id)
}

// abort drops the message under way, if any, and starts afresh.
func (r *msgReader) abort() {
	r.reset()
	r.s.depth, r.array, r.inMsg, r.s.inStr, r.s.esc = 0, false, false, false, false
}

// endValue is called where the messages must be whole: at the end of a JSON
// body or of an event. It reports a message cut off there, and drops it.
func (r *msgReader) endValue() error {
	cut := r.inMsg
	r.abort()
	if cut {
		return errors.New("a message was cut off")
	}
	return nil
}

// readJSON reads a JSON body of messages.
func (r *msgReader) readJSON(body io.Reader) error {
	buf := make([]byte, remoteReadBuf)
	for {
		n, err := body.Read(buf)
		if n > 0 {
			if ferr := r.feed(buf[:n]); ferr != nil {
				r.abort()
				return ferr
			}
		}
		if err == io.EOF {
			return r.endValue()
		}
		if err != nil {
			r.abort()
			return err
		}
	}
}

// readSSE reads an event stream (text/event-stream): the data of each event
// holds messages. Comments and fields other than data and id are ignored;
// lines end with LF or CRLF. It returns nil at the end of the stream, or once
// the request the response is for has been answered (or answered with what
// is not JSON-RPC): a server should end the stream then, and what it would
// still send is no one's. If lastID is not
// nil, it is set to the ID of each event that has one.
func (r *msgReader) readSSE(body io.Reader, lastID *string) error {
	br := bufio.NewReaderSize(body, remoteReadBuf)
	ev := sseEvent{lineStart: true, lastID: lastID}
	for {
		piece, err := br.ReadSlice('\n')
		whole := err == nil // piece ends a line
		if err == bufio.ErrBufferFull {
			err = nil
		}
		if err != nil && err != io.EOF {
			r.abort()
			return err
		}
		content := piece
		if whole {
			content = trimEOL(piece)
		}
		if ev.lineStart && len(piece) > 0 {
			var done bool
			var ferr error
			if content, done, ferr = r.sseLine(&ev, content, whole); done {
				return ferr
			}
		}
		if ferr := r.sseContent(&ev, content); ferr != nil {
			r.abort()
			return ferr
		}
		ev.lineStart = whole
		if whole {
			ev.field = sseOther
		}
		if err == io.EOF {
			// An event the stream ended inside of is dropped.
			r.abort()
			return nil
		}
	}
}

// The fields of an event readSSE tells apart.
const (
	sseOther = iota
	sseData
	sseID
	sseName      // the event field
	sseNamedData // the data of an event for onEvent
)

// Bounds of the events readSSE passes to onEvent.
const (
	sseMaxName      = 64      // bytes of an event's name kept
	sseMaxNamedData = 8 << 10 // bytes of data
)

// sseEvent is where readSSE is in the event stream.
type sseEvent struct {
	field     int     // of the line being read
	lineStart bool    // the next piece starts a line
	hasData   bool    // the event has a data line
	id        []byte  // the event's ID, if it has one
	lastID    *string // if not nil, set to the ID of each event that has one
	name      []byte  // the event's name, if it has one
	named     []byte  // the data of an event for onEvent
}

// forOnEvent reports whether the data of ev goes to onEvent.
func (r *msgReader) forOnEvent(ev *sseEvent) bool {
	return r.onEvent != nil && len(ev.name) > 0 && string(ev.name) != "message"
}

// sseLine handles the start of a line, content (whole says whether the
// line ends there). It returns what of content is a field's value, and
// whether readSSE is done: the request was answered, or the data could not
// be read (err).
func (r *msgReader) sseLine(ev *sseEvent, content []byte, whole bool) (value []byte, done bool, err error) {
	switch {
	case whole && len(content) == 0:
		// A blank line ends the event.
		if cerr := r.endValue(); cerr != nil {
			r.c.log.Warn("dropped an event whose data ended inside a message", "err", cerr)
		}
		if ev.id != nil && ev.lastID != nil {
			*ev.lastID = string(ev.id)
		}
		var err error
		if ev.hasData && r.forOnEvent(ev) {
			err = r.onEvent(string(ev.name), ev.named)
		}
		ev.hasData, ev.id, ev.name, ev.named = false, nil, nil, ev.named[:0]
		return content, r.answered || r.invalid || err != nil, err
	case content[0] == ':':
		ev.field = sseOther // a comment
		return content, false, nil
	}
	name, value, found := bytes.Cut(content, []byte(":"))
	if !found && !whole {
		name = nil // a name longer than the buffer: no field of ours
	}
	value = bytes.TrimPrefix(value, []byte(" "))
	switch string(name) {
	case "data":
		if r.forOnEvent(ev) {
			if ev.hasData {
				ev.named = append(ev.named, '\n')
			}
			ev.field, ev.hasData = sseNamedData, true
			break
		}
		ev.field = sseData
		if ev.hasData {
			// Data lines are joined by a newline, which is whitespace
			// between JSON tokens.
			if ferr := r.feed([]byte{'\n'}); ferr != nil {
				r.abort()
				return nil, true, ferr
			}
		}
		ev.hasData = true
	case "id":
		ev.field, ev.id = sseID, []byte{}
	case "event":
		ev.field, ev.name = sseName, []byte{}
	default:
		ev.field = sseOther
	}
	return value, false, nil
}

// sseContent takes content, more of the value of the event's field.
func (r *msgReader) sseContent(ev *sseEvent, content []byte) error {
	switch ev.field {
	case sseData:
		return r.feed(content)
	case sseID:
		if len(ev.id)+len(content) <= 1024 && !bytes.ContainsRune(content, 0) {
			ev.id = append(ev.id, content...)
		}
	case sseName:
		ev.name = append(ev.name, content[:min(len(content), sseMaxName-len(ev.name))]...)
	case sseNamedData:
		if len(ev.named)+len(content) > sseMaxNamedData {
			return fmt.Errorf("an event named %q with over %d bytes of data", truncate(ev.name, sseMaxName), sseMaxNamedData)
		}
		ev.named = append(ev.named, content...)
	}
	return nil
}
