//go:build linux || darwin

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
)

// Eras, the values of -era.
const (
	eraLegacy = "legacy" // initialize, then stateful requests (up to 2025-11-25)
	eraModern = "modern" // stateless requests with per-request _meta (2026-07-28)
	eraBoth   = "both"   // each request served in the era its _meta names
)

// modernVersion is the only modern protocol version the server serves.
const modernVersion = "2026-07-28"

// Keys of _meta in modern requests, results and notifications.
const (
	keyProtocolVersion    = "io.modelcontextprotocol/protocolVersion"
	keyClientCapabilities = "io.modelcontextprotocol/clientCapabilities"
	keyLogLevel           = "io.modelcontextprotocol/logLevel"
	keyServerInfo         = "io.modelcontextprotocol/serverInfo"
	keySubscriptionID     = "io.modelcontextprotocol/subscriptionId"
)

// Error codes of the modern protocol.
const (
	codeMissingCapability  = -32021 // MissingRequiredClientCapability
	codeUnsupportedVersion = -32022 // UnsupportedProtocolVersion
)

// removedMethods are the legacy requests that do not exist in the modern
// protocol.
var removedMethods = map[string]bool{
	"initialize":            true,
	"ping":                  true,
	"logging/setLevel":      true,
	"resources/subscribe":   true,
	"resources/unsubscribe": true,
}

// cacheableMethods are the methods whose modern results are cacheable
// results, with ttlMs and cacheScope.
var cacheableMethods = map[string]bool{
	"server/discover":          true,
	"tools/list":               true,
	"prompts/list":             true,
	"resources/list":           true,
	"resources/templates/list": true,
	"resources/read":           true,
}

// modernMeta holds what the server uses of the _meta of a modern request.
type modernMeta struct {
	capabilities map[string]json.RawMessage // the client's, by name
	logLevel     string                     // "" if absent
}

// has reports whether the client declared the capability name.
func (mm *modernMeta) has(name string) bool {
	raw, ok := mm.capabilities[name]
	return ok && string(raw) != "null"
}

// requestMeta returns params._meta, compacted, or nil if params have none.
func requestMeta(params json.RawMessage) json.RawMessage {
	var p struct {
		Meta json.RawMessage `json:"_meta"`
	}
	if decodeParams(params, &p) != nil || string(p.Meta) == "null" {
		return nil
	}
	return compact(p.Meta)
}

// supportedVersions returns the protocol versions the server serves, the
// modern one first.
func (s *server) supportedVersions() []string {
	versions := []string{modernVersion}
	if s.opts.era != eraBoth {
		return versions
	}
	if s.opts.protocolVersion != "" {
		return append(versions, s.opts.protocolVersion)
	}
	for _, v := range slices.Backward(protocolVersions) {
		versions = append(versions, v)
	}
	return versions
}

// classify tells a modern request from a legacy one by its _meta, meta:
// outside the legacy era, a request is modern if meta has a protocol
// version. classify reports whether the request is modern, and returns its
// modern _meta, or an error to answer the request with if that _meta is
// malformed or, in the modern era, missing. It returns neither for a request
// to serve as legacy.
func (s *server) classify(meta json.RawMessage) (modern bool, mm *modernMeta, rerr *rpcError) {
	if s.opts.era == eraLegacy {
		return false, nil, nil
	}
	var fields map[string]json.RawMessage
	if decodeParams(meta, &fields) != nil {
		fields = nil
	}
	rawVersion, ok := fields[keyProtocolVersion]
	if !ok {
		if s.opts.era == eraModern {
			return false, nil, &rpcError{Code: codeInvalidParams,
				Message: "missing _meta: every request must carry _meta with " + keyProtocolVersion +
					" (this server serves only protocol version " + modernVersion + ")",
				Data: map[string]any{"supported": s.supportedVersions()}}
		}
		return false, nil, nil
	}
	invalid := func(key, problem string) *rpcError {
		return &rpcError{Code: codeInvalidParams,
			Message: fmt.Sprintf("invalid _meta for protocol version %s: %s: %s", modernVersion, key, problem),
			Data:    map[string]any{"envelope": map[string]string{"key": key, "problem": problem}}}
	}
	var version string
	if json.Unmarshal(rawVersion, &version) != nil {
		return true, nil, invalid(keyProtocolVersion, "not a string")
	}
	if version != modernVersion {
		return true, nil, &rpcError{Code: codeUnsupportedVersion, Message: "unsupported protocol version",
			Data: map[string]any{"supported": s.supportedVersions(), "requested": version}}
	}
	mm = new(modernMeta)
	rawCaps, ok := fields[keyClientCapabilities]
	if !ok {
		return true, nil, invalid(keyClientCapabilities, "missing")
	}
	if json.Unmarshal(rawCaps, &mm.capabilities) != nil || mm.capabilities == nil {
		return true, nil, invalid(keyClientCapabilities, "not an object")
	}
	if rawLevel, ok := fields[keyLogLevel]; ok {
		if json.Unmarshal(rawLevel, &mm.logLevel) != nil || !slices.Contains(logLevels, mm.logLevel) {
			return true, nil, invalid(keyLogLevel, "not a logging level")
		}
	}
	return true, mm, nil
}

// modernRequest handles the modern request m whose _meta is mm. tc holds
// the params of tools/call, or is nil.
func (s *server) modernRequest(id json.RawMessage, m message, tc *toolCall, mm *modernMeta) {
	switch {
	case removedMethods[m.Method]:
		s.sendError(id, codeMethodNotFound, "method not found: "+m.Method)
		return
	case m.Method == "subscriptions/listen":
		s.listen(id, m.Params, mm)
		return
	case m.Method == "tools/call":
		s.countCall()
	}
	c := s.track(id)
	c.modern = mm
	c.cacheable = cacheableMethods[m.Method]
	if tc != nil {
		c.progressToken = tc.progressToken()
		c.meta = compact(tc.Meta)
		c.tool = tc.Name
		c.requestState = tc.RequestState
		var responses map[string]json.RawMessage
		if decodeParams(tc.InputResponses, &responses) == nil {
			if in := responses[inputKey]; len(in) > 0 && string(in) != "null" {
				c.inputResponse = in
			}
		}
	}
	go s.handle(c, m, tc)
}

// modernResult returns result, a value that encodes as a JSON object, with
// the members every modern result has: resultType (unless result is an
// InputRequiredResult, which has its own), ttlMs and cacheScope if cacheable,
// and _meta naming the server.
func (s *server) modernResult(result any, cacheable bool) (json.RawMessage, error) {
	body, err := encodeJSON(result)
	if err != nil {
		return nil, err
	}
	body = bytes.TrimSpace(body)
	if len(body) < 2 || body[0] != '{' || body[len(body)-1] != '}' {
		return nil, fmt.Errorf("result %s is not an object", body)
	}
	serverInfo, err := encodeJSON(map[string]any{keyServerInfo: map[string]string{"name": s.opts.name, "version": "1.0.0"}})
	if err != nil {
		return nil, err
	}
	var members []string
	_, task := result.(createdTask)
	if _, ok := result.(inputRequiredResult); !ok && !task {
		members = append(members, `"resultType":"complete"`)
		if cacheable {
			members = append(members, fmt.Sprintf(`"ttlMs":%d`, s.opts.ttlMS), fmt.Sprintf(`"cacheScope":%q`, s.opts.cacheScope))
		}
	}
	members = append(members, `"_meta":`+string(bytes.TrimSpace(serverInfo)))

	var buf bytes.Buffer
	buf.Write(body[:len(body)-1])
	sep := len(bytes.TrimSpace(body[1:len(body)-1])) > 0
	for _, m := range members {
		if sep {
			buf.WriteByte(',')
		}
		buf.WriteString(m)
		sep = true
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

// encodeJSON encodes v without escaping HTML characters. The result ends
// with a newline.
func encodeJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// discoverResult is the result of server/discover, before modernResult adds
// resultType, ttlMs, cacheScope and _meta.
type discoverResult struct {
	SupportedVersions []string     `json:"supportedVersions"`
	Capabilities      capabilities `json:"capabilities"`
}

// discover answers server/discover.
func (s *server) discover(c *call) {
	caps := s.capabilities()
	if caps.Tasks != nil {
		if caps.Extensions == nil {
			caps.Extensions = map[string]any{}
		}
		caps.Extensions[tasksExtension] = struct{}{}
	}
	c.reply(discoverResult{SupportedVersions: s.supportedVersions(), Capabilities: caps})
}

// tasksExtension names the 2026-07-28 tasks extension.
const tasksExtension = "io.modelcontextprotocol/tasks"

// declaresTasks reports whether a modern client declared the tasks
// extension in its request's capabilities.
func (mm *modernMeta) declaresTasks() bool {
	var ext map[string]json.RawMessage
	return json.Unmarshal(mm.capabilities["extensions"], &ext) == nil && ext[tasksExtension] != nil
}

// createdTask is the CreateTaskResult of the 2026-07-28 tasks extension:
// the task's state at the top, with resultType "task" of its own.
type createdTask struct {
	ResultType     string `json:"resultType"`
	TaskID         string `json:"taskId"`
	Status         string `json:"status"`
	CreatedAt      string `json:"createdAt"`
	LastUpdatedAt  string `json:"lastUpdatedAt"`
	TTLMs          int    `json:"ttlMs"`
	PollIntervalMs int    `json:"pollIntervalMs"`
}

// inputKey is the key of the server's only input request in an
// InputRequiredResult.
const inputKey = "in1"

// inputRequest is an item of the inputRequests of an InputRequiredResult.
type inputRequest struct {
	Method string `json:"method"`
	Params any    `json:"params,omitempty"`
}

// inputRequiredResult is the result of a modern request that needs the
// client's input.
type inputRequiredResult struct {
	ResultType    string                  `json:"resultType"`
	InputRequests map[string]inputRequest `json:"inputRequests"`
	RequestState  string                  `json:"requestState"`
}

// obtain obtains, on behalf of c, the result of a request of the given
// method and params to the client, which needs the client capability of the
// given name. A legacy c sends the request (see ask). A modern c whose params
// carry the answer to an input request the server issued for c's tool gets
// that answer. Any other modern c is answered, with an InputRequiredResult
// or, if the client lacks the capability, an error. obtain returns the
// result, or a failure; it reports false if c must not be answered further.
func (s *server) obtain(c *call, capability, method string, params any) (result json.RawMessage, failure string, ok bool) {
	if c.modern == nil {
		return s.ask(c, method, params)
	}
	if !c.modern.has(capability) {
		c.failData(codeMissingCapability, "missing required client capability: "+capability,
			map[string]any{"requiredCapabilities": map[string]struct{}{capability: {}}})
		return nil, "", false
	}
	s.mu.Lock()
	tool, issued := s.states[c.requestState]
	s.mu.Unlock()
	if c.inputResponse != nil && issued && tool == c.tool {
		return c.inputResponse, "", true
	}
	s.mu.Lock()
	s.lastState++
	state := "fake-state-" + strconv.Itoa(s.lastState)
	s.states[state] = c.tool
	s.mu.Unlock()
	s.record(event{Event: "input-required", Method: method, ID: c.id, Tool: c.tool, RequestState: state})
	c.reply(inputRequiredResult{
		ResultType:    "input_required",
		InputRequests: map[string]inputRequest{inputKey: {Method: method, Params: params}},
		RequestState:  state,
	})
	return nil, "", false
}

// listenFilter is the notifications member of the params of
// subscriptions/listen, and of notifications/subscriptions/acknowledged.
type listenFilter struct {
	ToolsListChanged      bool     `json:"toolsListChanged,omitempty"`
	PromptsListChanged    bool     `json:"promptsListChanged,omitempty"`
	ResourcesListChanged  bool     `json:"resourcesListChanged,omitempty"`
	ResourceSubscriptions []string `json:"resourceSubscriptions,omitempty"`
	TaskIDs               []string `json:"taskIds,omitempty"` // of the tasks extension
}

// A listener is an open subscriptions/listen stream.
type listener struct {
	c      *call        // the listen request
	filter listenFilter // the notifications honoured
}

// wants reports whether l gets the change notification method about uri.
func (l *listener) wants(method, uri string) bool {
	switch method {
	case "notifications/tools/list_changed":
		return l.filter.ToolsListChanged
	case "notifications/prompts/list_changed":
		return l.filter.PromptsListChanged
	case "notifications/resources/list_changed":
		return l.filter.ResourcesListChanged
	case "notifications/resources/updated":
		return slices.Contains(l.filter.ResourceSubscriptions, uri)
	}
	return false
}

// listen handles subscriptions/listen, in the reading goroutine so that
// the stream is open before the next request is read. It acknowledges the
// subscriptions the server's capabilities allow; the request is answered
// only if its params are bad.
func (s *server) listen(id, params json.RawMessage, mm *modernMeta) {
	var p struct {
		Notifications *listenFilter `json:"notifications"`
	}
	if err := decodeParams(params, &p); err != nil {
		s.sendError(id, codeInvalidParams, "invalid params: "+err.Error())
		return
	}
	if p.Notifications == nil {
		s.sendError(id, codeInvalidParams, "invalid params: notifications is required")
		return
	}
	var asked struct {
		Notifications json.RawMessage `json:"notifications"`
	}
	decodeParams(params, &asked) // cannot fail: params decoded above
	if len(p.Notifications.TaskIDs) > 0 && !mm.declaresTasks() {
		// "If a client requests task status notifications but does not
		// declare the io.modelcontextprotocol/tasks extension capability,
		// the server MUST return a JSON-RPC error".
		s.send(response{JSONRPC: "2.0", ID: id, Error: &rpcError{Code: codeMissingCapability, Message: "missing required client capability: " + tasksExtension,
			Data: map[string]any{"requiredCapabilities": map[string]any{"extensions": map[string]struct{}{tasksExtension: {}}}}}})
		return
	}
	uris := p.Notifications.ResourceSubscriptions
	s.record(event{Event: "listen", ID: id, Notifications: compact(asked.Notifications), URIs: uris})

	declared := s.opts.capabilities
	l := &listener{filter: listenFilter{
		ToolsListChanged:     p.Notifications.ToolsListChanged && declared["tools"],
		PromptsListChanged:   p.Notifications.PromptsListChanged && declared["prompts"],
		ResourcesListChanged: p.Notifications.ResourcesListChanged && declared["resources"],
	}}
	if declared["resources"] {
		l.filter.ResourceSubscriptions = uris
	}
	// The acknowledgement lists the task IDs agreed to: the modern tasks
	// the server knows.
	s.tasks.mu.Lock()
	for _, id := range p.Notifications.TaskIDs {
		if t := s.tasks.tasks[id]; t != nil && t.modern && !slices.Contains(l.filter.TaskIDs, id) {
			l.filter.TaskIDs = append(l.filter.TaskIDs, id)
		}
	}
	s.tasks.mu.Unlock()
	l.c = s.track(id)
	l.c.modern = mm

	// Register and acknowledge at once, so that the acknowledgement comes
	// before any notification on the stream.
	s.mu.Lock()
	s.listeners = append(s.listeners, l)
	s.send(notification{JSONRPC: "2.0", Method: "notifications/subscriptions/acknowledged", Params: map[string]any{
		"_meta":         subscriptionMeta(id),
		"notifications": l.filter,
	}})
	s.mu.Unlock()

	go func() {
		<-l.c.ctx.Done() // cancelled by notifications/cancelled only
		s.mu.Lock()
		s.listeners = slices.DeleteFunc(s.listeners, func(x *listener) bool { return x == l })
		s.mu.Unlock()
		s.record(event{Event: "listen-cancelled", ID: id})
	}()
}

// subscriptionMeta returns the _meta of a notification on the listen stream
// of the request with the given id.
func subscriptionMeta(id json.RawMessage) map[string]json.RawMessage {
	return map[string]json.RawMessage{keySubscriptionID: id}
}

// notifyListeners sends the change notification method, about uri if it is
// not "", to every open listen stream that asked for it, in the order the
// streams were opened.
func (s *server) notifyListeners(method, uri string) {
	s.mu.Lock()
	var targets []*listener
	for _, l := range s.listeners {
		if _, open := s.inflight[l.c]; open && l.wants(method, uri) {
			targets = append(targets, l)
		}
	}
	s.mu.Unlock()
	for _, l := range targets {
		params := map[string]any{"_meta": subscriptionMeta(l.c.id)}
		if uri != "" {
			params["uri"] = uri
		}
		s.send(notification{JSONRPC: "2.0", Method: method, Params: params})
	}
}

// notifyTask sends notifications/tasks with the task's detailed state to
// every open listen stream whose taskIds name the task id, in the order the
// streams were opened.
func (s *server) notifyTask(id string, detailed map[string]any) {
	s.mu.Lock()
	var targets []*listener
	for _, l := range s.listeners {
		if _, open := s.inflight[l.c]; open && slices.Contains(l.filter.TaskIDs, id) {
			targets = append(targets, l)
		}
	}
	s.mu.Unlock()
	for _, l := range targets {
		params := map[string]any{"_meta": subscriptionMeta(l.c.id)}
		for k, v := range detailed {
			params[k] = v
		}
		s.send(notification{JSONRPC: "2.0", Method: "notifications/tasks", Params: params})
	}
}
