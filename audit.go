package main

// The audit trail: one JSON line for each client request that reaches a
// server or is refused for the client's view (Gateway.serve calls
// auditTrail.call where the request's outcome is known), and one for each change
// asked of the admin API. Each line is written whole with one write(2) to
// a file opened O_APPEND, so a crash of corral loses at most the line
// being written; nothing is buffered across lines. The file is rotated
// when it would grow past maxBytes, keeping keep old files, so the trail
// takes at most (keep+1) × maxBytes of disk (plus one line). A write that
// fails is counted and logged at most once a minute; it never fails the
// call.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"
)

// auditTrail writes the audit trail. Its methods are safe for concurrent
// use, and a nil *auditTrail writes nothing (a Gateway a test makes by
// hand has none); mu is held while a line is written, so lines never interleave, and
// never while a line is built.
type auditTrail struct {
	log *slog.Logger
	// counted, if not nil, is told the outcome of every call, whether the
	// trail is on or off: the client's counts (clientLimits.called). Set
	// once, before the first call.
	counted func(client, outcome, server string)
	// withArguments reports whether server's calls are written with their
	// arguments and results (Config.auditArguments of the config in
	// force); nil: none are. Set once, before the first call.
	withArguments func(server string) bool
	// on says a trail is configured; read without mu on every call.
	on atomic.Bool
	// stdout is where "-" writes: os.Stdout but in tests.
	stdout io.Writer

	mu       sync.Mutex
	cfg      AuditConfig // resolved; File "" when off
	f        *os.File    // the open file; nil when off, on stdout, or not open
	size     int64       // f's size, as written through it
	closed   bool        // close was called: nothing more is written
	lost     int64       // lines not written since corral started
	lastWarn time.Time   // when a lost line was last logged
}

// auditWarnEvery is the least time between two log lines about lost audit
// lines.
const auditWarnEvery = time.Minute

// maxAuditValueBytes bounds the arguments, and the result, a line holds:
// a larger one is left out, and the line says how large it was.
const maxAuditValueBytes = 64 << 10

func newAuditTrail(log *slog.Logger) *auditTrail {
	return &auditTrail{log: log, stdout: os.Stdout}
}

// configure makes cfg's audit settings the trail's: a changed file is
// closed and the new one opened. A file that cannot be opened is logged,
// and tried again at the next line.
func (t *auditTrail) configure(cfg *Config) {
	a := cfg.audit()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed || a == t.cfg {
		return
	}
	if a.File != t.cfg.File {
		t.closeFile()
	}
	t.cfg = a
	t.on.Store(a.File != "")
	if a.File != "" && a.File != auditStdout && t.f == nil {
		if err := t.openFile(); err != nil {
			t.log.Error("audit: cannot open the audit trail; each call will try again", "file", a.File, "err", err)
		}
	}
}

// close closes the file; nothing is written after it.
func (t *auditTrail) close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closed = true
	t.on.Store(false)
	t.closeFile()
}

// closeFile closes the open file, if any, with mu held.
func (t *auditTrail) closeFile() {
	if t.f != nil {
		t.f.Close()
		t.f = nil
	}
}

// openFile opens t.cfg.File and learns its size, with mu held.
func (t *auditTrail) openFile() error {
	f, err := openAuditFile(t.cfg.File)
	if err != nil {
		return err
	}
	info, err := f.Stat()
	if err != nil {
		f.Close()
		return err
	}
	t.f, t.size = f, info.Size()
	return nil
}

// rotate renames the file to FILE.1, each FILE.N to FILE.N+1 up to keep
// (the oldest is replaced), and opens a new one, with mu held.
func (t *auditTrail) rotate() error {
	t.closeFile()
	path, keep := t.cfg.File, t.cfg.Keep
	for i := keep - 1; i >= 1; i-- {
		err := os.Rename(path+"."+strconv.Itoa(i), path+"."+strconv.Itoa(i+1))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	if err := os.Rename(path, path+".1"); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return t.openFile()
}

// write writes line, which ends in a newline, with one write call, after
// rotating the file if line would take it past maxBytes. A failure is
// counted and logged at most once every auditWarnEvery.
func (t *auditTrail) write(line []byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed || t.cfg.File == "" {
		return
	}
	var err error
	switch {
	case t.cfg.File == auditStdout:
		_, err = t.stdout.Write(line)
	default:
		if t.f == nil {
			err = t.openFile()
		}
		if err == nil && t.size > 0 && t.size+int64(len(line)) > t.cfg.MaxBytes {
			err = t.rotate()
		}
		if err == nil {
			var n int
			n, err = t.f.Write(line)
			t.size += int64(n)
		}
	}
	if err == nil {
		return
	}
	t.lost++
	if now := time.Now(); now.Sub(t.lastWarn) >= auditWarnEvery {
		t.lastWarn = now
		t.log.Error("audit: cannot write the audit trail; calls go on without it", "file", t.cfg.File, "err", err,
			"lostLines", t.lost, "fix", "free disk space or make the file writable; corral says so again at most once a minute")
	}
}

// lostLines returns the lines not written since corral started.
func (t *auditTrail) lostLines() int64 {
	if t == nil {
		return 0
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.lost
}

// clock returns the time a call starts, for its audit line; zero when
// there is no trail, and then auditTrail.call writes nothing for the call.
func (t *auditTrail) clock() time.Time {
	if t == nil || !t.on.Load() {
		return time.Time{}
	}
	return time.Now()
}

// auditBufs holds the buffers lines are built in.
var auditBufs = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// The outcomes of an audit line.
const (
	auditOK        = "ok"         // a result
	auditToolError = "tool_error" // a tools/call result with isError true
	auditError     = "error"      // a JSON-RPC error, with its code
	auditTimeout   = "timeout"    // no answer within requestTimeout
	auditCancelled = "cancelled"  // the client cancelled it or went away
	auditRefused   = "refused"    // outside the client's view: answered as unknown
)

// call counts the outcome of request in of session s for its client (see
// counted), and writes its audit line, if the trail was on when it started
// (start is not zero; see auditTrail.clock). routed is the server the
// request went to, nil if none; werr the error that answered it before it
// reached one; r the answer, nil if the client cancelled the request and
// gets none.
func (t *auditTrail) call(ctx context.Context, start time.Time, s *session, in *inbound, routed *backend, werr *wireError, r *reply) {
	if t == nil {
		return
	}
	msg := in.msg
	server := ""
	if routed != nil {
		server = routed.name
	}
	outcome, code, bytesOut := auditCancelled, 0, 0
	switch {
	case werr != nil:
		outcome, code = auditError, werr.Code
		if werr.refusedBy != "" {
			outcome, server = auditRefused, werr.refusedBy
		}
	case r == nil:
	case r.code == codeTimeout:
		outcome, code, bytesOut = auditTimeout, r.code, r.len()
	case r.code != 0 && ctx.Err() != nil && errors.Is(context.Cause(ctx), context.Canceled):
		outcome, code, bytesOut = auditCancelled, r.code, r.len() // the client went away
	case r.code != 0:
		outcome, code, bytesOut = auditError, r.code, r.len()
	default:
		outcome, bytesOut = auditOK, r.len()
		if msg.Method == "tools/call" && resultIsError(r.result) {
			outcome = auditToolError
		}
	}
	if t.counted != nil {
		t.counted(s.who.name, outcome, server)
	}
	if start.IsZero() {
		return
	}
	d := time.Since(start)
	if werr != nil {
		bytesOut = len(encodeErrorResponse(msg.ID, werr))
	}
	bp := auditBufs.Get().(*[]byte)
	b := appendAuditHead(*bp, start, s.who.name)
	b = appendAuditString(b, "session", s.id)
	b = appendAuditString(b, "server", server)
	b = appendAuditString(b, "method", msg.Method)
	b = appendAuditString(b, "name", auditItem(msg))
	if in.serverName != "" {
		b = appendAuditString(b, "serverName", in.serverName)
	}
	b = append(b, `,"durationMs":`...)
	b = strconv.AppendFloat(b, float64(d.Microseconds())/1000, 'f', 3, 64)
	b = appendAuditString(b, "outcome", outcome)
	if code != 0 {
		b = append(b, `,"code":`...)
		b = strconv.AppendInt(b, int64(code), 10)
	}
	b = append(b, `,"bytesIn":`...)
	b = strconv.AppendInt(b, int64(len(msg.Params)), 10)
	b = append(b, `,"bytesOut":`...)
	b = strconv.AppendInt(b, int64(bytesOut), 10)
	if server != "" && outcome != auditRefused && t.withArguments != nil && t.withArguments(server) {
		b = appendAuditValue(b, "arguments", auditArguments(msg))
		if r != nil && r.code == 0 {
			b = appendAuditValue(b, "result", wholeResult(r.result))
		}
	}
	b = append(b, "}\n"...)
	t.write(b)
	*bp = b[:0]
	auditBufs.Put(bp)
}

// auditAdmin writes the audit line of a change asked of the admin API:
// who asked (client, from remote), the action and the server it names,
// with what shows its command or url (never a secret), and why it was
// refused, if it was.
func (t *auditTrail) auditAdmin(client, remote, action, server, what, why string) {
	if t == nil || !t.on.Load() {
		return
	}
	outcome := auditOK
	if why != "" {
		outcome = auditRefused
	}
	b := appendAuditHead(nil, time.Now(), client)
	b = appendAuditString(b, "remote", remote)
	b = appendAuditString(b, "action", strings.TrimSuffix(action, " refused")) // the outcome says so
	b = appendAuditString(b, "server", server)
	if what != "" {
		b = appendAuditString(b, "detail", what)
	}
	b = appendAuditString(b, "outcome", outcome)
	if why != "" {
		b = appendAuditString(b, "reason", why)
	}
	t.write(append(b, "}\n"...))
}

// appendAuditHead appends the start of a line: its time, in UTC to the
// millisecond, and the client.
func appendAuditHead(b []byte, at time.Time, client string) []byte {
	b = append(b, `{"time":"`...)
	b = at.UTC().AppendFormat(b, "2006-01-02T15:04:05.000Z07:00")
	b = append(b, '"')
	return appendAuditString(b, "client", client)
}

// appendAuditString appends ,"key":value, value as a JSON string.
func appendAuditString(b []byte, key, value string) []byte {
	b = append(b, ',', '"')
	b = append(b, key...)
	b = append(b, '"', ':')
	return appendJSONString(b, value)
}

// appendAuditValue appends ,"key":value, value raw JSON; a value over
// maxAuditValueBytes is left out and key+"Bytes" says its size.
func appendAuditValue(b []byte, key string, value []byte) []byte {
	if value == nil {
		return b
	}
	if len(value) > maxAuditValueBytes {
		b = append(b, ',', '"')
		b = append(b, key...)
		b = append(b, `Omitted":"`...)
		b = strconv.AppendInt(b, int64(len(value)), 10)
		return append(b, ` bytes, over the 65536 an audit line holds"`...)
	}
	b = append(b, ',', '"')
	b = append(b, key...)
	b = append(b, '"', ':')
	return append(b, maskSecrets(value)...)
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a JSON string; invalid UTF-8 becomes
// U+FFFD, as encoding/json writes it.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				b = append(b, `\ufffd`...)
			} else {
				b = append(b, s[i:i+size]...)
			}
			i += size
			continue
		}
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c < 0x20:
			b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		default:
			b = append(b, c)
		}
		i++
	}
	return append(b, '"')
}

// auditItem returns what a request names: a tool's or prompt's name, a
// resource's URI, a completion's ref, or a task's ID.
func auditItem(msg *wireMsg) string {
	var p routing
	if !scanRouting(msg.Params, &p) {
		whole := new(routing)
		json.Unmarshal(msg.Params, whole)
		p = *whole
	}
	switch methods[msg.Method].op {
	case opTask:
		var t struct {
			TaskID string `json:"taskId"`
		}
		json.Unmarshal(msg.Params, &t)
		return t.TaskID
	}
	switch methods[msg.Method].member {
	case routeName:
		return p.Name
	case routeURI:
		return p.URI
	}
	if p.Ref.URI != "" {
		return p.Ref.URI
	}
	return p.Ref.Name
}

// auditArguments returns the arguments of a request, raw: the
// "arguments" of tools/call and prompts/get, the "argument" of
// completion/complete; nil if none.
func auditArguments(msg *wireMsg) []byte {
	var args []byte
	members(msg.Params, func(key string, value []byte) {
		if key == "arguments" || key == "argument" {
			args = value
		}
	})
	return args
}

// wholeResult returns result as an object: a modern answer's result may
// hold only its members, its "{" being in the reply's head (see
// completeReply).
func wholeResult(result []byte) []byte {
	i := skipSpace(result, 0)
	if i < len(result) && result[i] != '{' && result[i] != '[' {
		return append([]byte{'{'}, result...)
	}
	return result
}

// resultIsError reports whether a tools/call result, whole or only its
// members (see wholeResult), says "isError": true at its top.
func resultIsError(result []byte) bool {
	if !bytes.Contains(result, []byte(`"isError"`)) {
		return false
	}
	found := false
	rawMembers(wholeResult(result), func(key, value []byte) {
		found = found || string(key) == "isError" && string(value) == "true"
	})
	return found
}

// secretKeyWords are what a member's name holds, in any case, for its value
// to be masked in an audit line: the names that secrets go by.
var secretKeyWords = []string{"token", "key", "secret", "password", "passwd", "authorization", "cookie", "credential", "session"}

// maskSecrets returns value, raw JSON, with what may be secret masked as
// -check masks a config's (secretMask): the value of every member, at any
// depth, whose name holds one of secretKeyWords, and the password, query
// values and fragment of every string that is a URL (maskURL). What cannot
// be decoded is masked whole.
func maskSecrets(value []byte) []byte {
	dec := json.NewDecoder(bytes.NewReader(value))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return []byte(`"` + secretMask + `"`)
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	enc.Encode(maskValue(v))
	return bytes.TrimSuffix(out.Bytes(), []byte("\n"))
}

// maskValue is maskSecrets of a decoded value.
func maskValue(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if secretKeyName(k) {
				v[k] = secretMask
			} else {
				v[k] = maskValue(e)
			}
		}
	case []any:
		for i, e := range v {
			v[i] = maskValue(e)
		}
	case string:
		if looksLikeURL(v) {
			return maskURL(v)
		}
	}
	return v
}

// looksLikeURL reports whether s is taken for a URL, whose secrets
// maskURL masks: it holds "://" and no white space (text that mentions a
// URL is left as it is).
func looksLikeURL(s string) bool {
	return strings.Contains(s, "://") && !strings.ContainsAny(s, " \t\r\n")
}

// secretKeyName reports whether a member named k may hold a secret.
func secretKeyName(k string) bool {
	k = strings.ToLower(k)
	for _, w := range secretKeyWords {
		if strings.Contains(k, w) {
			return true
		}
	}
	return false
}

// String says where the trail goes, for logs.
func (t *auditTrail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.cfg.File == "" {
		return "off"
	}
	return fmt.Sprintf("%s (rotated at %d bytes, %d kept)", t.cfg.File, t.cfg.MaxBytes, t.cfg.Keep)
}
