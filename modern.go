package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
)

// MCP 2026-07-28, the "modern" era: no initialize and no sessions; each
// request names its protocol version and its client's capabilities in
// _meta. corral serves modern and legacy clients at the same endpoint,
// deciding by each request's _meta, and speaks to each server in the era
// the server speaks, found by probing with server/discover at every start.

// claimsModern reports whether a request's params carry the modern era's
// protocol version in _meta, which makes it a modern request.
func claimsModern(params json.RawMessage) bool {
	if !bytes.Contains(params, []byte(metaVersion)) {
		return false
	}
	var p struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	return json.Unmarshal(params, &p) == nil && p.Meta[metaVersion] != nil
}

// metaVersionOf returns the protocol version params name in _meta, or "".
func metaVersionOf(params json.RawMessage) string {
	if !bytes.Contains(params, []byte(metaVersion)) {
		return ""
	}
	var p struct {
		Meta struct {
			Version string `json:"io.modelcontextprotocol/protocolVersion"`
		} `json:"_meta"`
	}
	json.Unmarshal(params, &p)
	return p.Meta.Version
}

// claimsModernMessage reports whether msg, a notification or an answer a
// client sent over HTTP with the MCP-Protocol-Version header header, is of
// the modern era: the header says 2026-07-28, or the params' _meta does. No
// session knows its era, and a modern notification need not carry _meta:
// the official Go SDK's notifications/cancelled holds only requestId and
// reason. A legacy session's message that names another version in _meta
// stays the session's.
func claimsModernMessage(header string, msg *wireMsg) bool {
	return strings.TrimSpace(header) == modernVersion || metaVersionOf(msg.Params) == modernVersion
}

// checkModernNotification returns the error to refuse msg, a modern
// client's notification sent over HTTP (see claimsModernMessage), with, or
// nil. It refuses an answer (a modern client answers a server's input
// requests by sending its request again, never with a JSON-RPC response), a
// version in _meta other than 2026-07-28, and an MCP-Protocol-Version or
// Mcp-Method header (get returns them) that disagrees with the body. The
// specification sets no header a notification must carry, so a missing
// header is no error.
func checkModernNotification(get func(string) string, msg *wireMsg) *wireError {
	if msg.Method == "" {
		return &wireError{Code: codeInvalidRequest, Message: fmt.Sprintf("a %s client sends no JSON-RPC responses: it answers a server's input requests by sending its request again with inputResponses", modernVersion)}
	}
	body, header := metaVersionOf(msg.Params), strings.TrimSpace(get(versionHeader))
	if body != "" && body != modernVersion {
		data, _ := json.Marshal(map[string]any{"supported": allVersions(), "requested": body})
		return &wireError{Code: codeUnsupportedVersion, Message: fmt.Sprintf("unsupported protocol version %q; corral speaks %s", body, strings.Join(allVersions(), ", ")), Data: data}
	}
	if body != "" && header != "" && header != body {
		return &wireError{Code: codeHeaderMismatch, Message: fmt.Sprintf("the MCP-Protocol-Version header is %q, and the body's _meta says %q", header, body)}
	}
	if v := strings.TrimSpace(get("Mcp-Method")); v != "" && v != msg.Method {
		return &wireError{Code: codeHeaderMismatch, Message: fmt.Sprintf("the Mcp-Method header is %q, and the body's method is %q", v, msg.Method)}
	}
	return nil
}

// modernStatus is the HTTP status of a modern answer.
func modernStatus(r *reply) int {
	switch r.code {
	case codeMethodNotFound:
		return http.StatusNotFound
	case codeInvalidParams, codeHeaderMismatch, codeMissingCapability, codeUnsupportedVersion, codeInvalidRequest, codeParseError:
		return http.StatusBadRequest
	}
	return http.StatusOK
}

// modernOf returns msg, a request, in the internal form if its params
// claim the modern era: with the client's capabilities and log level from
// its _meta. It returns nil for a legacy request, or the error to answer a
// malformed modern request with.
func modernOf(msg *wireMsg) (*inbound, *wireError) {
	params := msg.Params
	if !bytes.Contains(params, []byte(metaVersion)) {
		return nil, nil // the common case, decided without decoding
	}
	var p struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	if json.Unmarshal(params, &p) != nil || p.Meta[metaVersion] == nil {
		return nil, nil
	}
	var version string
	json.Unmarshal(p.Meta[metaVersion], &version)
	if version != modernVersion {
		data, _ := json.Marshal(map[string]any{"supported": allVersions(), "requested": version})
		return nil, &wireError{Code: codeUnsupportedVersion, Message: fmt.Sprintf("unsupported protocol version %q; corral speaks %s", version, strings.Join(allVersions(), ", ")), Data: data}
	}
	in := &inbound{msg: msg, era: eraModern, rules: modernEra{}}
	if err := json.Unmarshal(p.Meta[metaCaps], &in.caps); err != nil || in.caps == nil {
		return nil, &wireError{Code: codeInvalidParams, Message: fmt.Sprintf("_meta must hold %q, an object (empty if the client offers nothing)", metaCaps)}
	}
	if raw := p.Meta[metaLogLevel]; raw != nil {
		if json.Unmarshal(raw, &in.logLevel) != nil || !slices.Contains(logLevels, in.logLevel) {
			return nil, &wireError{Code: codeInvalidParams, Message: fmt.Sprintf("_meta %q must be one of %s", metaLogLevel, strings.Join(logLevels, ", "))}
		}
	}
	return in, nil
}

// modernEra is the 2026-07-28 era's eraRules. It holds nothing: what a
// modern request says of its client is in the inbound.
type modernEra struct{}

// result returns the answer with what every modern result needs (see
// completeReply).
func (modernEra) result(id, result json.RawMessage, cacheable bool) *reply {
	return completeReply(id, result, cacheable)
}

// ownMeta names corral as the server: every modern result does.
func (modernEra) ownMeta() json.RawMessage {
	meta, _ := json.Marshal(serverInfoMeta())
	return meta
}

func (modernEra) notServed(method string) *wireError {
	return &wireError{Code: codeMethodNotFound, Message: fmt.Sprintf("method %q is not served to %s clients by corral", method, modernVersion)}
}

// silencedByCancel is true: a modern client that cancelled a request, by
// closing its stream or with notifications/cancelled, wants no answer.
func (modernEra) silencedByCancel() bool { return true }

// forward forwards a modern client's request with the capabilities and log
// level its _meta names; see forwardModern.
func (modernEra) forward(ctx context.Context, fw *forwarder, f *forwarding) *reply {
	f.rel.modern, f.rel.caps, f.rel.logLevel = true, f.in.caps, f.in.logLevel
	return forwardModern(ctx, fw, f)
}

// completeReply answers a modern request with result, adding what every
// modern result needs if the server did not set it: resultType
// ("complete"), and for a cacheable result (lists, resources/read,
// server/discover) ttlMs and cacheScope. The result is not copied.
func completeReply(id, result json.RawMessage, cacheable bool) *reply {
	r := resultReply(id, result)
	i := skipSpace(result, 0)
	if i >= len(result) || result[i] != '{' {
		return r
	}
	has := map[string]bool{}
	members(result, func(key string, _ []byte) {
		if key == "resultType" || key == "ttlMs" || key == "cacheScope" {
			has[key] = true
		}
	})
	var add []string
	if !has["resultType"] {
		add = append(add, `"resultType":"complete"`)
	}
	if cacheable && !has["ttlMs"] {
		add = append(add, `"ttlMs":0`)
	}
	if cacheable && !has["cacheScope"] {
		add = append(add, `"cacheScope":"private"`)
	}
	if len(add) == 0 {
		return r
	}
	members := strings.Join(add, ",")
	if j := skipSpace(result, i+1); j < len(result) && result[j] == '}' {
		r.result = json.RawMessage("{" + members + "}")
		return r
	}
	r.head = append(r.head, "{"+members+","...)
	r.result = result[i+1:]
	return r
}

// inputRequired is the result of a modern request that needs the client's
// input first: the client answers each input request and sends the request
// again with the answers and the state.
type inputRequired struct {
	ResultType    string                     `json:"resultType"`
	InputRequests map[string]json.RawMessage `json:"inputRequests,omitempty"`
	RequestState  string                     `json:"requestState,omitempty"`
}

// asInputRequired returns the result as an input_required result, or nil.
func asInputRequired(result json.RawMessage) *inputRequired {
	if !bytes.Contains(result, []byte(`"input_required"`)) {
		return nil
	}
	var ir inputRequired
	if json.Unmarshal(result, &ir) != nil || ir.ResultType != "input_required" {
		return nil
	}
	return &ir
}

// maxInputRounds bounds the rounds of input one request may ask for.
const maxInputRounds = 10

// statePrefix starts the requestState of an exchange, followed by an ID
// that names the replica (newReplicaID): "corral-NAME.HEX".
const statePrefix = "corral-"

// unknownState returns the error message for a requestState of corral's
// that replica mine does not hold: another replica issued it (the
// balancer must route on it), or it expired.
func unknownState(state, mine string) string {
	if owner := elsewhere(strings.TrimPrefix(state, statePrefix), mine); owner != "" {
		return fmt.Sprintf("requestState belongs to replica %q, and this is replica %q: the load balancer must send a request whose params.requestState starts with %q to that replica (see docs/operations.md); or send the request again without it", owner, mine, statePrefix+owner+".")
	}
	return "requestState is unknown or expired; send the request again without it"
}

// forwardModern forwards a modern client's request, with what fw gives of
// the gateway. A legacy server's
// requests of the client while it serves the call become input_required
// results; the call itself goes on, under a context of its own, until the
// client sends the request again with the answers (or requestTimeout ends).
func forwardModern(ctx context.Context, fw *forwarder, f *forwarding) *reply {
	in, b, params, rel, timeout := f.in, f.b, f.params, f.rel, f.timeout
	msg := in.msg
	var p struct {
		State     string                     `json:"requestState"`
		Responses map[string]json.RawMessage `json:"inputResponses"`
	}
	json.Unmarshal(params, &p)
	start := time.Now()
	var ex *exchange
	if strings.HasPrefix(p.State, statePrefix) {
		if ex = fw.requests.takeParked(p.State); ex == nil {
			return errorReply(msg.ID, &wireError{Code: codeInvalidParams, Message: unknownState(p.State, fw.config().Replica)})
		}
		ex.rel.setSend(rel.sendFn)
		for key, o := range ex.pending {
			if r, ok := p.Responses[key]; ok {
				o.m.answer(o.id, resultReply(o.id, r))
			} else {
				o.m.answer(o.id, errorReply(o.id, &wireError{Code: codeInternalError, Message: "the client did not answer"}))
			}
		}
		clear(ex.pending)
	} else {
		ex = &exchange{rel: rel, done: make(chan struct{}), pending: map[string]*outbound{}}
		rel.inputs = make(chan *outbound, fw.config().MaxServerRequestsPerSession)
		callCtx, cancel := context.WithTimeout(context.Background(), timeout)
		stop := context.AfterFunc(fw.cut, cancel)
		ex.cancel = func() { stop(); cancel() }
		fw.owned.goOrRun(func() {
			defer close(ex.done)
			ex.answer, ex.err = b.call(callCtx, msg.Method, params, rel)
		})
	}
	select {
	case <-ex.done:
		ex.cancel()
		return fw.answerReply(ctx, in, b, ex.answer, ex.err, timeout, start)
	case o := <-ex.rel.inputs:
		ex.n++
		key := fmt.Sprintf("input-%d", ex.n)
		ex.pending[key] = o
		state := statePrefix + newReplicaID(fw.config().Replica)
		// Forget an exchange the client never comes back to.
		fw.requests.park(state, ex, timeout)
		params := o.params
		if len(params) == 0 || string(params) == "null" {
			params = json.RawMessage(`{}`) // an input request's params are an object
		}
		in, _ := json.Marshal(map[string]any{"method": o.method, "params": params})
		raw, _ := json.Marshal(inputRequired{ResultType: "input_required", InputRequests: map[string]json.RawMessage{key: in}, RequestState: state})
		return resultReply(msg.ID, raw)
	case <-ctx.Done():
		// Closing the stream cancels a modern request, and so does its
		// client's notifications/cancelled: the client wants no answer, but
		// the call is counted (answerReply) like any other. Shutdown
		// cancels it too, and gets an answer.
		ex.cancel()
		<-ex.done
		r := fw.answerReply(ctx, in, b, nil, context.Canceled, timeout, start)
		if errors.Is(context.Cause(ctx), errShuttingDown) {
			return r
		}
		return nil
	}
}

// decodeHeaderValue decodes a header value that may be base64 encoded as
// "=?base64?...?=", as modern clients send values that are not plain ASCII.
func decodeHeaderValue(v string) (string, bool) {
	v = strings.TrimSpace(v)
	if inner, ok := strings.CutPrefix(v, "=?base64?"); ok {
		if inner, ok = strings.CutSuffix(inner, "?="); ok {
			b, err := base64.StdEncoding.DecodeString(inner)
			return string(b), err == nil
		}
	}
	return v, true
}

// checkModernHeaders checks the headers a modern HTTP request must carry
// against its body, and returns the error to answer with, if any.
func checkModernHeaders(get func(string) string, msg *wireMsg) *wireError {
	mismatch := func(format string, args ...any) *wireError {
		return &wireError{Code: codeHeaderMismatch, Message: fmt.Sprintf(format, args...)}
	}
	var env struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	json.Unmarshal(msg.Params, &env)
	var body string
	json.Unmarshal(env.Meta[metaVersion], &body)
	if v := strings.TrimSpace(get(versionHeader)); v != body {
		return mismatch("the MCP-Protocol-Version header is %q, and the body's _meta says %q", v, body)
	}
	if v := strings.TrimSpace(get("Mcp-Method")); v != msg.Method {
		return mismatch("the Mcp-Method header is %q, and the body's method is %q", v, msg.Method)
	}
	info := methods[msg.Method]
	if !info.mcpName {
		return nil
	}
	member := info.member
	var p map[string]json.RawMessage
	json.Unmarshal(msg.Params, &p)
	var want string
	json.Unmarshal(p[member], &want)
	got, ok := decodeHeaderValue(get("Mcp-Name"))
	if !ok || got != want {
		return mismatch("the Mcp-Name header is %q, and the body's params.%s is %q", got, member, want)
	}
	return nil
}
