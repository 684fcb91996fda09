package main

// This file holds corral's part in a trace: W3C Trace Context read from a
// request (its params._meta.traceparent, as SEP-414 documents, or the HTTP
// traceparent header), a span for each request from the moment its front
// end hands it to the gateway to its answer, and a child span for the call
// to the server, whose context goes to the server in _meta.traceparent (and
// to a remote server in the HTTP header too, see remote.go). Spans are
// sampled by ratio or by their parent, and exported by otlp.go.

import (
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"
)

// traceID and spanID are W3C Trace Context's IDs; all zeros is invalid.
type (
	traceID [16]byte
	spanID  [8]byte
)

// traceContext is a span's context as it travels: the trace, the span that
// is the parent of the receiver's, whether the trace is sampled, and the
// tracestate, which corral passes on as it came.
type traceContext struct {
	trace   traceID
	span    spanID
	sampled bool
	state   string
}

// parseTraceparent parses v, a traceparent value (version-traceid-spanid-
// flags, lowercase hex), and reports whether it is one corral may continue:
// version 00 exactly 55 characters long, a later version at least that long
// (what follows is ignored, as W3C Trace Context asks), never version ff,
// and neither ID all zeros.
func parseTraceparent(v string) (traceContext, bool) {
	var tc traceContext
	if len(v) < 55 || v[2] != '-' || v[35] != '-' || v[52] != '-' {
		return tc, false
	}
	version, ok := hexByte(v[0:2])
	switch {
	case !ok || version == 0xff:
		return tc, false
	case version == 0 && len(v) != 55:
		return tc, false
	case version > 0 && len(v) > 55 && v[55] != '-':
		return tc, false
	}
	flags, ok := hexByte(v[53:55])
	if !ok || !lowerHex(v[3:35]) || !lowerHex(v[36:52]) {
		return tc, false
	}
	hex.Decode(tc.trace[:], []byte(v[3:35]))
	hex.Decode(tc.span[:], []byte(v[36:52]))
	if tc.trace == (traceID{}) || tc.span == (spanID{}) {
		return tc, false
	}
	tc.sampled = flags&1 == 1
	return tc, true
}

// hexByte decodes two lowercase hex digits.
func hexByte(s string) (byte, bool) {
	if !lowerHex(s) {
		return 0, false
	}
	n, _ := strconv.ParseUint(s, 16, 8)
	return byte(n), true
}

// lowerHex reports whether s is lowercase hex digits alone.
func lowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// appendTraceparent appends the traceparent value of span id of trace t.
func appendTraceparent(b []byte, t traceID, id spanID, sampled bool) []byte {
	b = append(b, "00-"...)
	b = hex.AppendEncode(b, t[:])
	b = append(b, '-')
	b = hex.AppendEncode(b, id[:])
	if sampled {
		return append(b, "-01"...)
	}
	return append(b, "-00"...)
}

// requestTraceContext returns the trace context a request carries: its
// params._meta.traceparent (and tracestate), else header, the HTTP
// traceparent header (and state, its tracestate). A value that is not a
// valid traceparent is ignored, and so is the other source's then: the
// request starts a trace of its own.
func requestTraceContext(params json.RawMessage, header, state string) (traceContext, bool) {
	if metaParent, metaState := metaTraceFields(params); metaParent != "" {
		header, state = metaParent, metaState
	}
	if header == "" {
		return traceContext{}, false
	}
	tc, ok := parseTraceparent(header)
	tc.state = state
	return tc, ok
}

// request runs handle, which serves in's request of session s, in the
// request's span: the child of the trace context the request carries, if
// it carries one. A nil *tracer must not be asked.
func (t *tracer) request(s *session, in *inbound, handle func() *reply) *reply {
	msg := in.msg
	parent, ok := requestTraceContext(msg.Params, in.traceHeader, in.traceState)
	in.span = t.startRequest(msg.Method, parent, ok)
	if in.span.recording() {
		in.span.set("mcp.method.name", msg.Method)
		in.span.set("jsonrpc.request.id", string(msg.ID))
		in.span.set("mcp.session.id", s.id)
		in.span.set("corral.client", s.who.name)
		if in.era == eraModern {
			in.span.set("mcp.protocol.version", modernVersion)
		}
	}
	r := handle()
	in.span.finish(replyOutcome(msg.Method, r))
	return r
}

// tracer makes corral's spans and hands the sampled ones to its exporter.
// A nil *tracer traces nothing. Its methods are safe for concurrent use.
type tracer struct {
	all       bool   // every trace corral starts is sampled
	threshold uint64 // else one is when its ID's last 8 bytes are below this
	exp       *spanExporter
}

// newTracer returns the tracer of cfg, whose exporter runs until close, or
// nil if cfg turns tracing off.
func newTracer(cfg TracingConfig, log *slog.Logger) *tracer {
	cfg = cfg.resolved()
	if !cfg.on() {
		return nil
	}
	t := &tracer{exp: newSpanExporter(cfg, log)}
	switch r := *cfg.SampleRatio; {
	case r >= 1:
		t.all = true
	case r > 0:
		t.threshold = uint64(r * (1 << 64))
	}
	return t
}

// close exports the spans still queued, within a bound, and stops the
// exporter. It may be called more than once.
func (t *tracer) close() {
	if t != nil {
		t.exp.close()
	}
}

// spanCounts returns the exporter's counts (spanExporter.counts).
func (t *tracer) spanCounts() (exported, queueFull, exportFailed int64) {
	return t.exp.counts()
}

// span kinds, as OTLP numbers them.
const (
	spanServer = 2 // corral serving a client's request
	spanClient = 3 // corral calling a server
)

// span is one operation of corral's in a trace. Only a sampled span
// records anything; an unsampled one still has IDs, so that its context
// goes on to the server with the sampled flag off. A span is ended once,
// by its owner; note and set may be called concurrently until then.
type span struct {
	t       *tracer
	trace   traceID
	id      spanID
	parent  spanID // zero for the root of a trace
	sampled bool
	state   string // the tracestate, as it came

	kind  uint8
	start time.Time

	mu     sync.Mutex
	name   string
	end    time.Time
	attrs  []spanAttr
	events []spanEvent
	failed string // the status message of a span that failed; "" is OK
	ended  bool
}

// spanAttr is an attribute: a string, or an integer when str is "".
type spanAttr struct {
	key string
	str string
	num int64
	isN bool
}

// spanEvent is something that happened during a span, at a time.
type spanEvent struct {
	at    time.Time
	name  string
	attrs []spanAttr
}

// startRequest starts the span of a request, named name, that carried
// parent (if ok): its child, sampled as the parent was; or else the root of
// a new trace, sampled by ratio.
func (t *tracer) startRequest(name string, parent traceContext, ok bool) *span {
	sp := &span{t: t, kind: spanServer, start: time.Now(), name: name, id: newSpanID()}
	if ok {
		sp.trace, sp.parent, sp.sampled, sp.state = parent.trace, parent.span, parent.sampled, parent.state
	} else {
		binary.BigEndian.PutUint64(sp.trace[:8], rand.Uint64())
		binary.BigEndian.PutUint64(sp.trace[8:], rand.Uint64()|1) // never all zeros
		sp.sampled = t.all || binary.BigEndian.Uint64(sp.trace[8:]) < t.threshold
	}
	if sp.sampled {
		sp.attrs = make([]spanAttr, 0, 8) // what a forwarded request records, in one allocation
	}
	return sp
}

// newSpanID returns a random span ID that is not all zeros.
func newSpanID() spanID {
	var id spanID
	binary.BigEndian.PutUint64(id[:], rand.Uint64()|1)
	return id
}

// child starts a span of sp's for a call to a server, named name.
func (sp *span) child(name string) *span {
	c := &span{t: sp.t, kind: spanClient, start: time.Now(), name: name, id: newSpanID(),
		trace: sp.trace, parent: sp.id, sampled: sp.sampled, state: sp.state}
	if c.sampled {
		c.attrs = make([]spanAttr, 0, 4)
	}
	return c
}

// traceparent returns the traceparent value that makes the receiver's
// spans children of sp, as JSON string.
func (sp *span) traceparentJSON() json.RawMessage {
	b := make([]byte, 0, 57)
	b = append(b, '"')
	b = appendTraceparent(b, sp.trace, sp.id, sp.sampled)
	return append(b, '"')
}

// forCall names a request's span for the call it forwards to server, and
// records the server and the item called, if the span records.
func (sp *span) forCall(msg *wireMsg, server string) {
	if !sp.recording() {
		return
	}
	item := auditItem(msg)
	sp.rename(msg.Method + " " + item)
	sp.set("corral.server", server)
	sp.set("gen_ai.tool.name", item)
}

// rename names the span anew, once what it is about is known.
func (sp *span) rename(name string) {
	if sp == nil || !sp.sampled {
		return
	}
	sp.mu.Lock()
	sp.name = name
	sp.mu.Unlock()
}

// set records attribute key with a string value; an empty value is not
// recorded.
func (sp *span) set(key, value string) {
	if sp == nil || !sp.sampled || value == "" {
		return
	}
	sp.mu.Lock()
	if !sp.ended {
		sp.attrs = append(sp.attrs, spanAttr{key: key, str: value})
	}
	sp.mu.Unlock()
}

// setInt records attribute key with an integer value.
func (sp *span) setInt(key string, n int64) {
	if sp == nil || !sp.sampled {
		return
	}
	sp.mu.Lock()
	if !sp.ended {
		sp.attrs = append(sp.attrs, spanAttr{key: key, num: n, isN: true})
	}
	sp.mu.Unlock()
}

// recording reports whether the span records anything: it is sampled.
// Callers that would compute an attribute's value ask it first.
func (sp *span) recording() bool { return sp != nil && sp.sampled }

// noteWaits reports whether the span records the waits of its call (see
// waitNoter): only a sampled span does.
func (sp *span) noteWaits() bool { return sp != nil && sp.sampled }

// noteWait records a wait of the span's call that began at since and ends
// now: an event named what, with the wait in microseconds, and the same as
// the attribute corral.<what>_us.
func (sp *span) noteWait(what string, since time.Time) {
	if !sp.noteWaits() {
		return
	}
	now := time.Now()
	us := now.Sub(since).Microseconds()
	sp.mu.Lock()
	if !sp.ended {
		sp.events = append(sp.events, spanEvent{at: now, name: "corral." + what, attrs: []spanAttr{{key: "corral.wait_us", num: us, isN: true}}})
		sp.attrs = append(sp.attrs, spanAttr{key: "corral." + what + "_us", num: us, isN: true})
	}
	sp.mu.Unlock()
}

// finish ends the span with outcome, one of the audit trail's ("ok",
// "error", "timeout", ...), as corral.outcome; any but "ok" and
// "tool_error" (the tool's own failure, which corral served well) sets the
// span's status to error, with failed as its message. A sampled span goes
// to the exporter. Only the first call has an effect.
func (sp *span) finish(outcome, failed string) {
	if sp == nil || !sp.sampled {
		return
	}
	sp.mu.Lock()
	if sp.ended {
		sp.mu.Unlock()
		return
	}
	sp.ended = true
	sp.end = time.Now()
	sp.attrs = append(sp.attrs, spanAttr{key: "corral.outcome", str: outcome})
	if outcome != auditOK && outcome != auditToolError {
		sp.failed = firstSet(failed, outcome)
	}
	sp.mu.Unlock()
	sp.t.exp.add(sp)
}

// replyOutcome returns the outcome of a request answered with r (nil if
// the client cancelled it and wants no answer), in the audit trail's words,
// and the error's message when it failed.
func replyOutcome(method string, r *reply) (outcome, failed string) {
	switch {
	case r == nil:
		return auditCancelled, ""
	case r.code == codeTimeout:
		return auditTimeout, "code " + strconv.Itoa(r.code)
	case r.code != 0:
		return auditError, "code " + strconv.Itoa(r.code)
	case method == "tools/call" && resultIsError(r.result):
		return auditToolError, ""
	}
	return auditOK, ""
}

// appendOTLP appends sp, an ended span, as an OTLP Span in JSON (see
// otlp.go).
func (sp *span) appendOTLP(b []byte) []byte {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	b = append(b, `{"traceId":"`...)
	b = hex.AppendEncode(b, sp.trace[:])
	b = append(b, `","spanId":"`...)
	b = hex.AppendEncode(b, sp.id[:])
	b = append(b, '"')
	if sp.parent != (spanID{}) {
		b = append(b, `,"parentSpanId":"`...)
		b = hex.AppendEncode(b, sp.parent[:])
		b = append(b, '"')
	}
	if sp.state != "" {
		b = append(b, `,"traceState":`...)
		b = appendJSONString(b, sp.state)
	}
	b = append(b, `,"flags":1,"name":`...) // sampled
	b = appendJSONString(b, sp.name)
	b = append(b, `,"kind":`...)
	b = strconv.AppendInt(b, int64(sp.kind), 10)
	b = appendUnixNano(b, "startTimeUnixNano", sp.start)
	b = appendUnixNano(b, "endTimeUnixNano", sp.end)
	b = append(b, `,"attributes":[`...)
	for i, a := range sp.attrs {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendOTLPAttr(b, a)
	}
	b = append(b, ']')
	if len(sp.events) > 0 {
		b = append(b, `,"events":[`...)
		for i, ev := range sp.events {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, '{')
			b = appendEvent(b, ev)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	b = append(b, `,"status":{`...)
	if sp.failed != "" {
		b = append(b, `"code":2,"message":`...)
		b = appendJSONString(b, sp.failed)
	} else {
		b = append(b, `"code":1`...)
	}
	return append(b, "}}"...)
}
