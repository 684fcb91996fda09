//go:build linux || darwin

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// JSON-RPC error codes.
const (
	codeParseError     = -32700
	codeInvalidRequest = -32600
	codeMethodNotFound = -32601
	codeInvalidParams  = -32602
	codeInternalError  = -32603

	codeResourceNotFound = -32002 // MCP's code for resources/read of an unknown URI
)

// protocolVersions are the MCP versions the server accepts from a client.
var protocolVersions = []string{"2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"}

// latestVersion is the version the server offers when it does not know the
// client's.
const latestVersion = "2025-11-25"

// nullID is the id of a response to a message whose id is unknown.
var nullID = json.RawMessage("null")

// A message is an incoming JSON-RPC message: a request, a notification or a
// response. ID is nil if and only if the message has no "id" member.
type message struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  json.RawMessage `json:"error"`
}

// response is an outgoing JSON-RPC response.
type response struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  any             `json:"result,omitempty"`
	Error   *rpcError       `json:"error,omitempty"`
}

// rpcError is the error member of a response.
type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    any    `json:"data,omitempty"`
}

// notification is an outgoing JSON-RPC notification.
type notification struct {
	JSONRPC string `json:"jsonrpc"`
	Method  string `json:"method"`
	Params  any    `json:"params,omitempty"`
}

// outRequest is an outgoing JSON-RPC request, sent to the client.
type outRequest struct {
	JSONRPC string `json:"jsonrpc"`
	ID      int64  `json:"id"`
	Method  string `json:"method"`
	Params  any    `json:"params,omitempty"`
}

// A call is a request being handled in its own goroutine. Its context is
// cancelled by notifications/cancelled or when handling ends.
type call struct {
	s             *server
	id            json.RawMessage
	ctx           context.Context
	cancel        context.CancelFunc
	progressToken json.RawMessage // params._meta.progressToken of tools/call, or nil
	meta          json.RawMessage // params._meta of tools/call, compacted, or nil

	// Set for modern requests only.
	modern        *modernMeta     // the request's _meta; nil for a legacy request
	cacheable     bool            // whether the result is a cacheable result
	tool          string          // params.name of tools/call
	requestState  string          // params.requestState of tools/call
	inputResponse json.RawMessage // params.inputResponses.in1 of tools/call, or nil
}

// reply answers the call with result, unless it was cancelled. The result
// of a modern request gets the members every modern result has.
func (c *call) reply(result any) {
	if !c.s.finish(c) {
		return
	}
	if c.modern != nil {
		r, err := c.s.modernResult(result, c.cacheable)
		if err != nil {
			c.s.logf("fakeserver: cannot encode result: %v", err)
			c.s.sendError(c.id, codeInternalError, "internal error")
			return
		}
		result = r
	}
	c.s.send(response{JSONRPC: "2.0", ID: c.id, Result: result})
}

// fail answers the call with an error, unless it was cancelled.
func (c *call) fail(code int, msg string) {
	c.failData(code, msg, nil)
}

// failData answers the call with an error with data, unless it was
// cancelled. Nil data is left out.
func (c *call) failData(code int, msg string, data any) {
	if c.s.finish(c) {
		c.s.send(response{JSONRPC: "2.0", ID: c.id, Error: &rpcError{Code: code, Message: msg, Data: data}})
	}
}

// track records that the request with the given id is being handled.
func (s *server) track(id json.RawMessage) *call {
	ctx, cancel := context.WithCancel(context.Background())
	c := &call{s: s, id: id, ctx: ctx, cancel: cancel}
	s.mu.Lock()
	s.inflight[c] = struct{}{}
	s.mu.Unlock()
	return c
}

// finish records that c is being answered. It reports false if c was
// cancelled, in which case c must not be answered.
func (s *server) finish(c *call) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.inflight[c]; !ok {
		return false
	}
	delete(s.inflight, c)
	return true
}

// cancelRequest cancels every request being handled with the given id.
func (s *server) cancelRequest(id json.RawMessage) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.inflight {
		if bytes.Equal(c.id, id) {
			delete(s.inflight, c)
			c.cancel()
		}
	}
}

// send writes v to stdout as one line of JSON.
func (s *server) send(v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil { // Encode ends the line
		s.logf("fakeserver: cannot encode message: %v", err)
		return
	}
	s.writeStdout(buf.Bytes())
}

// sendError writes an error response to stdout.
func (s *server) sendError(id json.RawMessage, code int, msg string) {
	s.send(response{JSONRPC: "2.0", ID: id, Error: &rpcError{Code: code, Message: msg}})
}

// serve reads and handles messages from stdin until end of file.
func (s *server) serve() {
	r := bufio.NewReaderSize(s.stdin, 64<<10)
	for {
		line, err := r.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			s.handleLine(line)
		}
		if err == nil {
			continue
		}
		if err != io.EOF {
			s.logf("fakeserver: reading stdin: %v", err)
		}
		if s.opts.ignoreStdinClose {
			// A server that runs on after its stdin ends must not die of
			// SIGPIPE writing this line to a gateway that is gone: the
			// cases that use it check that the gateway ends it.
			signal.Ignore(syscall.SIGPIPE)
			s.logf("fakeserver: stdin closed; running on")
			select {} // until a signal or the lifetime ends the process
		}
		s.exit(0, "stdin closed")
	}
}

// handleLine handles one line read from stdin.
func (s *server) handleLine(line []byte) {
	if !json.Valid(line) {
		s.sendError(nullID, codeParseError, "parse error")
		return
	}
	var m message
	if err := json.Unmarshal(line, &m); err != nil {
		s.sendError(nullID, codeInvalidRequest, "invalid request")
		return
	}
	switch {
	case m.Result != nil || m.Error != nil:
		s.answered(m)
	case m.ID == nil:
		s.notified(m)
	case m.Method == "":
		s.sendError(compact(m.ID), codeInvalidRequest, "invalid request")
	default:
		s.request(compact(m.ID), m)
	}
}

// notified handles a notification.
func (s *server) notified(m message) {
	switch m.Method {
	case "notifications/cancelled":
		s.cancelled(m.Params)
	case "notifications/roots/list_changed":
		s.record(event{Event: "notification", Method: m.Method})
	case "notifications/initialized":
		if s.opts.rootsAtStart {
			go s.askRoots("roots-at-start")
		}
	}
}

// cancelled handles notifications/cancelled.
func (s *server) cancelled(params json.RawMessage) {
	var p struct {
		RequestID json.RawMessage `json:"requestId"`
		Reason    string          `json:"reason"`
	}
	decodeParams(params, &p) // keep what could be decoded
	id := compact(p.RequestID)
	s.record(event{Event: "cancelled", RequestID: id, Reason: p.Reason})
	if id != nil {
		s.cancelRequest(id)
	}
}

// toolCall holds the params of tools/call.
type toolCall struct {
	Name           string          `json:"name"`
	Arguments      json.RawMessage `json:"arguments"`
	Meta           json.RawMessage `json:"_meta"`
	InputResponses json.RawMessage `json:"inputResponses"` // modern only
	RequestState   string          `json:"requestState"`   // modern only
	Task           json.RawMessage `json:"task"`           // a task-augmented call's task
}

// progressToken returns params._meta.progressToken, compacted, or nil if it
// is absent or null.
func (tc *toolCall) progressToken() json.RawMessage {
	var meta struct {
		ProgressToken json.RawMessage `json:"progressToken"`
	}
	if decodeParams(tc.Meta, &meta) != nil || string(meta.ProgressToken) == "null" {
		return nil
	}
	return compact(meta.ProgressToken)
}

// request handles a request. Handling is done in a new goroutine, except
// for initialize, subscriptions/listen, errors in _meta and the decision to
// crash.
func (s *server) request(id json.RawMessage, m message) {
	var tc *toolCall
	e := event{Event: "request", Method: m.Method, ID: id}
	switch m.Method {
	case "tools/call":
		tc = new(toolCall)
		if err := decodeParams(m.Params, tc); err != nil {
			tc = nil
		} else {
			e.Tool = tc.Name
			e.ProgressToken = tc.progressToken()
		}
	case "initialize":
		var p struct {
			Capabilities json.RawMessage `json:"capabilities"`
		}
		decodeParams(m.Params, &p) // keep what could be decoded
		e.Capabilities = compact(p.Capabilities)
		if s.conformance != nil {
			s.conformance.setClientCapabilities(p.Capabilities)
		}
	}
	var mm *modernMeta
	var metaErr *rpcError
	if s.opts.era != eraLegacy {
		e.Meta = requestMeta(m.Params)
		var modern bool
		modern, mm, metaErr = s.classify(e.Meta)
		e.Era = eraLegacy
		if modern {
			e.Era = eraModern
		}
	}
	s.record(e)
	if m.Method != "" && m.Method == s.opts.ignoreMethod {
		return // recorded, never answered
	}

	switch {
	case metaErr != nil:
		s.send(response{JSONRPC: "2.0", ID: id, Error: metaErr})
		return
	case mm != nil:
		s.modernRequest(id, m, tc, mm)
		return
	}
	switch m.Method {
	case "initialize":
		s.initialize(id, m.Params)
		return
	case "tools/call":
		s.countCall()
	}
	c := s.track(id)
	c.progressToken = e.ProgressToken
	if tc != nil {
		c.meta = compact(tc.Meta)
	}
	go s.handle(c, m, tc)
}

// countCall counts a tools/call about to be handled, and ends the process
// if -crash-after says so.
func (s *server) countCall() {
	s.calls++
	if s.calls == s.opts.crashAfter {
		s.logf("fakeserver: crashing at tools/call number %d", s.calls)
		s.exit(5, "crash-after")
	}
}

// methodCapabilities maps methods to the capability they belong to.
var methodCapabilities = map[string]string{
	"tools/list":               "tools",
	"tools/call":               "tools",
	"resources/list":           "resources",
	"resources/templates/list": "resources",
	"resources/read":           "resources",
	"resources/subscribe":      "resources",
	"resources/unsubscribe":    "resources",
	"prompts/list":             "prompts",
	"prompts/get":              "prompts",
	"completion/complete":      "completions",
	"logging/setLevel":         "logging",
	"tasks/get":                "tasks",
	"tasks/result":             "tasks",
	"tasks/list":               "tasks",
	"tasks/cancel":             "tasks",
}

// handle handles a request other than initialize and subscriptions/listen. tc holds the params of
// tools/call, or is nil if they could not be decoded.
func (s *server) handle(c *call, m message, tc *toolCall) {
	defer c.cancel()
	if name, ok := methodCapabilities[m.Method]; ok && (!s.opts.capabilities[name] || s.opts.unlisted[name] && strings.HasSuffix(m.Method, "/list")) {
		c.fail(codeMethodNotFound, "method not found: "+m.Method)
		return
	}
	if s.conformance != nil && s.conformanceHandle(c, m, tc) {
		return
	}
	switch m.Method {
	case "ping":
		c.reply(struct{}{})
	case "server/discover":
		if c.modern == nil {
			c.fail(codeMethodNotFound, "method not found: "+m.Method)
			return
		}
		s.discover(c)
	case "tools/list":
		s.listTools(c, m.Params)
	case "resources/list":
		s.listResources(c, m.Params)
	case "resources/templates/list":
		s.listResourceTemplates(c, m.Params)
	case "resources/read":
		s.readResource(c, m.Params)
	case "resources/subscribe", "resources/unsubscribe":
		s.subscribe(c, m.Method, m.Params)
	case "prompts/list":
		s.listPrompts(c, m.Params)
	case "prompts/get":
		s.getPrompt(c, m.Params)
	case "completion/complete":
		s.complete(c, m.Params)
	case "logging/setLevel":
		s.setLevel(c, m.Params)
	case "tasks/get", "tasks/result", "tasks/list", "tasks/cancel":
		s.taskRequest(c, m.Method, m.Params)
	case "tools/call":
		if tc == nil {
			c.fail(codeInvalidParams, "invalid params")
			return
		}
		if tc.Task != nil && s.opts.capabilities["tasks"] || c.modern != nil && c.modern.declaresTasks() && s.opts.capabilities["tasks"] && tc.Name == s.opts.prefix+"task" {
			s.createTask(c, tc)
			return
		}
		t := s.byName[tc.Name]
		if t == nil {
			c.fail(codeInvalidParams, fmt.Sprintf("unknown tool %q", tc.Name))
			return
		}
		t.run(c, tc.Arguments)
	default:
		c.fail(codeMethodNotFound, "method not found: "+m.Method)
	}
}

// initializeResult is the result of initialize.
type initializeResult struct {
	ProtocolVersion string       `json:"protocolVersion"`
	Capabilities    capabilities `json:"capabilities"`
	ServerInfo      struct {
		Name    string `json:"name"`
		Version string `json:"version"`
	} `json:"serverInfo"`
	Instructions string `json:"instructions,omitempty"`
}

// initialize answers initialize, unless told to crash or hang instead.
func (s *server) initialize(id, params json.RawMessage) {
	if s.opts.crashInInitialize {
		s.logf("fakeserver: crashing in initialize")
		s.exit(4, "crash-in-initialize")
	}
	if s.opts.hangInitialize {
		s.logf("fakeserver: not answering initialize")
		return
	}
	var p struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	decodeParams(params, &p) // a bad version is as good as none
	var r initializeResult
	switch {
	case s.opts.protocolVersion != "":
		r.ProtocolVersion = s.opts.protocolVersion
	case slices.Contains(protocolVersions, p.ProtocolVersion):
		r.ProtocolVersion = p.ProtocolVersion
	default:
		r.ProtocolVersion = latestVersion
	}
	r.Capabilities = s.capabilities()
	r.ServerInfo.Name = s.opts.name
	r.ServerInfo.Version = "1.0.0"
	r.Instructions = s.opts.instructions
	s.send(response{JSONRPC: "2.0", ID: id, Result: r})
}

// toolDescriptor describes a tool in the result of tools/list.
type toolDescriptor struct {
	Name        string         `json:"name"`
	Description string         `json:"description"`
	InputSchema any            `json:"inputSchema"`           // an inputSchema, or a tool's own schema
	Annotations *annotations   `json:"annotations,omitempty"` // -read-only
	Execution   *execution     `json:"execution,omitempty"`   // the task tool, with tasks declared
	Meta        map[string]any `json:"_meta,omitempty"`       // -ui's app tool
}

// execution says how a tool may be called (MCP 2025-11-25).
type execution struct {
	TaskSupport string `json:"taskSupport"`
}

// annotations are a tool's hints.
type annotations struct {
	ReadOnlyHint bool `json:"readOnlyHint"`
}

type inputSchema struct {
	Type       string              `json:"type"`
	Properties map[string]property `json:"properties"`
}

// listResult is the result of tools/list.
type listResult struct {
	Tools      []toolDescriptor `json:"tools"`
	NextCursor string           `json:"nextCursor,omitempty"`
}

// listTools answers tools/list.
func (s *server) listTools(c *call, params json.RawMessage) {
	n := len(s.tools) + s.opts.hugeCatalog*padToolsPerMiB
	start, end, ok := s.page(c, params, n)
	if !ok {
		return
	}
	r := listResult{Tools: []toolDescriptor{}, NextCursor: nextCursor(end, n)}
	real := len(s.tools)
	for _, t := range s.tools[min(start, real):min(end, real)] {
		d := toolDescriptor{
			Name:        t.name,
			Description: t.description,
			InputSchema: inputSchema{Type: "object", Properties: t.props},
		}
		if t.schema != nil {
			d.InputSchema = t.schema
		}
		if t.name == s.opts.prefix+"task" && s.opts.capabilities["tasks"] {
			d.Execution = &execution{TaskSupport: "optional"}
		}
		if s.opts.readOnly[strings.TrimPrefix(t.name, s.opts.prefix)] {
			d.Annotations = &annotations{ReadOnlyHint: true}
		}
		if name, text, _ := strings.Cut(s.opts.describe, "="); name != "" && s.opts.prefix+name == t.name {
			d.Description = text
		}
		if s.opts.ui && t.name == s.opts.prefix+"app" {
			d.Meta = map[string]any{"ui": map[string]any{"resourceUri": s.appURI()}}
		}
		r.Tools = append(r.Tools, d)
	}
	for i := max(start, real); i < end; i++ {
		r.Tools = append(r.Tools, padTool(i-real)) // -huge-catalog
	}
	c.reply(r)
}

// page returns the bounds of the page of a list of n items that the params
// of a list request ask for. If the params are bad, it answers c with an
// error and reports false.
func (s *server) page(c *call, params json.RawMessage, n int) (start, end int, ok bool) {
	var p struct {
		Cursor string `json:"cursor"`
	}
	if err := decodeParams(params, &p); err != nil {
		c.fail(codeInvalidParams, "invalid params: "+err.Error())
		return 0, 0, false
	}
	if p.Cursor != "" {
		if start, ok = decodeCursor(p.Cursor, n); !ok {
			c.fail(codeInvalidParams, "invalid cursor")
			return 0, 0, false
		}
	}
	end = n
	if size := s.opts.pageSize; size > 0 && end-start > size {
		end = start + size
	}
	return start, end, true
}

// nextCursor returns the cursor of the page after the one ending at end in
// a list of n items, or "" if there is none.
func nextCursor(end, n int) string {
	if end < n {
		return encodeCursor(end)
	}
	return ""
}

// clientTimeout bounds the wait for the client's answer to a request.
const clientTimeout = 30 * time.Second

// ask sends a request to the client on behalf of c and waits, for at most
// clientTimeout, for the answer. It returns the result, or a failure: "CODE
// MESSAGE" for an error response, or a description of the timeout. It
// reports false if c is cancelled meanwhile, in which case c must not be
// answered.
func (s *server) ask(c *call, method string, params any) (result json.RawMessage, failure string, ok bool) {
	ch := make(chan message, 1)
	s.mu.Lock()
	s.lastID++
	id := s.lastID
	s.pending[id] = ch
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.pending, id)
		s.mu.Unlock()
	}()

	s.record(event{Event: "server-request", Method: method, ID: json.RawMessage(strconv.FormatInt(id, 10))})
	s.send(outRequest{JSONRPC: "2.0", ID: id, Method: method, Params: params})
	t := time.NewTimer(clientTimeout)
	defer t.Stop()
	select {
	case m := <-ch:
		if m.Error != nil {
			var e rpcError
			json.Unmarshal(m.Error, &e) // keep what could be decoded
			return nil, fmt.Sprintf("%d %s", e.Code, e.Message), true
		}
		return m.Result, "", true
	case <-t.C:
		return nil, fmt.Sprintf("no answer after %v", clientTimeout), true
	case <-c.ctx.Done():
		return nil, "", false
	}
}

// answered hands the response m to the request of the server's it answers,
// if that request is still waiting. Other responses are ignored.
func (s *server) answered(m message) {
	id, err := strconv.ParseInt(string(compact(m.ID)), 10, 64)
	if err != nil {
		return
	}
	s.mu.Lock()
	ch := s.pending[id]
	delete(s.pending, id)
	s.mu.Unlock()
	if ch != nil {
		ch <- m // never blocks: ch has room for one and gets only one
	}
}

const cursorPrefix = "offset:"

// encodeCursor returns the cursor of the page starting at item offset.
func encodeCursor(offset int) string {
	return base64.RawURLEncoding.EncodeToString([]byte(cursorPrefix + strconv.Itoa(offset)))
}

// decodeCursor returns the offset a cursor made by encodeCursor stands for,
// with n items. It reports false if the cursor could not have been made.
func decodeCursor(cursor string, n int) (int, bool) {
	b, err := base64.RawURLEncoding.DecodeString(cursor)
	if err != nil {
		return 0, false
	}
	digits, ok := strings.CutPrefix(string(b), cursorPrefix)
	if !ok {
		return 0, false
	}
	offset, err := strconv.Atoi(digits)
	if err != nil || strconv.Itoa(offset) != digits || offset <= 0 || offset >= n {
		return 0, false
	}
	return offset, true
}

// decodeParams decodes the params (or arguments) raw into v. Absent or null
// params leave v unchanged.
func decodeParams(raw json.RawMessage, v any) error {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	return json.Unmarshal(raw, v)
}

// compact returns raw without insignificant space, or nil if raw is empty.
func compact(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return nil
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return raw
	}
	return buf.Bytes()
}
