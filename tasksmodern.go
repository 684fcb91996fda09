package main

// Tasks for 2026-07-28 clients: the tasks extension
// (io.modelcontextprotocol/tasks). Task creation is the server's choice:
// a client that declares the extension in its request's capabilities may
// get, to a tools/call, a CreateTaskResult (resultType "task", the task's
// state at its top) instead of the tool's result, and then polls the task
// with tasks/get, answers its input with tasks/update and cancels it with
// tasks/cancel. corral serves it over both kinds of server:
//
//   - a 2026-07-28 server that declares the extension gets the client's
//     requests as they are, with the server's task ID in place of corral's;
//   - a 2025-11-25 server with tasks (a tool whose execution.taskSupport is
//     "optional" or "required") is asked for a task-augmented call, and
//     corral answers the client in the extension's shapes: the task's
//     state with ttlMs and pollIntervalMs, and, once it has ended, the
//     result (tasks/result of the server) inlined in tasks/get's answer.
//
// The guarantees are the legacy tasks': corral's own task IDs (128 random
// bits), a task reached only by the principal that created it (a modern
// client has no session: its principal, the client named by its token or
// the anonymous one, owns it), at most maxTasksPerSession of them per
// principal, and forgotten when their ttl passes or their server restarts.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"
)

// declaresTasks reports whether a modern client's capabilities declare the
// tasks extension.
func declaresTasks(caps capabilities) bool {
	var ext map[string]json.RawMessage
	return json.Unmarshal(caps["extensions"], &ext) == nil && ext[tasksExtension] != nil
}

// offersTasksExtension reports whether a 2026-07-28 server's capabilities
// declare the tasks extension.
func offersTasksExtension(c capabilities) bool { return declaresTasks(c) }

// offersTaskCalls reports whether a 2025-11-25 server's capabilities
// declare task-augmented tools/call.
func offersTaskCalls(c capabilities) bool {
	var t struct {
		Requests struct {
			Tools struct {
				Call json.RawMessage `json:"call"`
			} `json:"tools"`
		} `json:"requests"`
	}
	return json.Unmarshal(c["tasks"], &t) == nil && t.Requests.Tools.Call != nil
}

// toolTaskSupport returns a tool's execution.taskSupport (2025-11-25):
// "required", "optional", or "" (forbidden, or not said).
func toolTaskSupport(tool json.RawMessage) string {
	if !bytes.Contains(tool, []byte("taskSupport")) {
		return ""
	}
	var t struct {
		Execution struct {
			TaskSupport string `json:"taskSupport"`
		} `json:"execution"`
	}
	json.Unmarshal(tool, &t)
	if t.Execution.TaskSupport == "required" || t.Execution.TaskSupport == "optional" {
		return t.Execution.TaskSupport
	}
	return ""
}

// missingTasksCapability is the error the extension answers a client that
// did not declare it with: "the server MUST return an error with the code
// -32021 (Missing Required Client Capability), indicating the required
// extension in the error response".
func missingTasksCapability(what string) *wireError {
	data, _ := json.Marshal(map[string]any{"requiredCapabilities": map[string]any{"extensions": map[string]any{tasksExtension: struct{}{}}}})
	return &wireError{Code: codeMissingCapability, Data: data,
		Message: fmt.Sprintf("%s needs the tasks extension: declare \"extensions\": {%q: {}} in the request's clientCapabilities", what, tasksExtension)}
}

// resultOf returns the result r carries, whole (an era's result may have
// members added in front of the server's, see completeReply), or nil if r
// is nil or an error.
func resultOf(r *reply) json.RawMessage {
	if r == nil || r.result == nil {
		return nil
	}
	var buf bytes.Buffer
	r.WriteTo(&buf)
	var m wireMsg
	if json.Unmarshal(buf.Bytes(), &m) != nil {
		return nil
	}
	return m.Result
}

// forwardModern forwards a modern client's tools/call to server b
// (through t.call), as a task where the server may make one and the
// client declared the tasks extension, and records the task the server
// creates under an ID of corral's (see the top of the file). A call that
// is not a task is forwarded as any other.
func (t *taskTable) forwardModern(ctx context.Context, s *session, in *inbound, b *backend, params, token json.RawMessage, send func([]byte)) *reply {
	declared := declaresTasks(in.caps)
	legacyServer := !b.isModern()
	if legacyServer && !offersTaskCalls(b.capabilities()) || !legacyServer && !declared {
		return t.call(ctx, s, in, b, params, token, send) // the common case: no task can be made
	}
	asTask := declared
	if legacyServer {
		switch toolTaskSupport(b.toolRaw(calledTool(params))) {
		case "required":
			if !declared {
				// "If a server is unable to service a request to a client
				// that does not declare this extension capability without
				// returning CreateTaskResult, the server MUST return an
				// error with the code -32021".
				return errorReply(in.msg.ID, missingTasksCapability(fmt.Sprintf("tool %q runs only as a task: it", calledTool(in.msg.Params))))
			}
		case "optional":
		default:
			asTask = false
		}
		if asTask {
			params = setMember(params, "task", json.RawMessage(`{}`)) // the server's default ttl
		}
	}
	if !asTask {
		return t.call(ctx, s, in, b, params, token, send)
	}
	if werr := t.reserveFor(s.who, t.config().MaxTasksPerSession, time.Now()); werr != nil {
		return errorReply(in.msg.ID, werr)
	}
	r := t.call(ctx, s, in, b, params, token, send)
	res := resultOf(r)
	var fields map[string]json.RawMessage
	json.Unmarshal(res, &fields)
	state := fields // a modern server's task is the result itself
	if legacyServer {
		json.Unmarshal(fields["task"], &state)
	} else if !bytes.Equal(fields["resultType"], []byte(`"task"`)) {
		state = nil
	}
	var id string
	json.Unmarshal(state["taskId"], &id)
	if id == "" {
		t.releaseFor(s.who)
		return r
	}
	ttlMember := "ttlMs"
	if legacyServer {
		ttlMember = "ttl"
	}
	var ms int64
	json.Unmarshal(state[ttlMember], &ms)
	tk := t.insert(&task{who: s.who, modern: true, legacyServer: legacyServer}, b, calledTool(in.msg.Params), id, time.Duration(max(ms, 0))*time.Millisecond, time.Now())
	for _, held := range t.takeHeld(tk) {
		t.tell(tk, held) // no stream asked for it yet: kept as its last (see taskWatchers)
	}
	if !legacyServer {
		return resultReply(in.msg.ID, clientTaskID(res, tk.id))
	}
	out := modernTaskState(state, tk.id)
	out["resultType"] = json.RawMessage(`"task"`)
	raw, _ := json.Marshal(out)
	return resultReply(in.msg.ID, raw)
}

// modernTaskState returns a 2025-11-25 task's state, st, in the tasks
// extension's shape, under corral's ID id: ttl becomes ttlMs ("null for
// unlimited") and pollInterval pollIntervalMs.
func modernTaskState(st map[string]json.RawMessage, id string) map[string]json.RawMessage {
	out := map[string]json.RawMessage{"ttlMs": json.RawMessage("null")}
	for _, k := range []string{"status", "statusMessage", "createdAt", "lastUpdatedAt"} {
		if st[k] != nil {
			out[k] = st[k]
		}
	}
	out["taskId"], _ = json.Marshal(id)
	if st["ttl"] != nil {
		out["ttlMs"] = st["ttl"]
	}
	if st["pollInterval"] != nil {
		out["pollIntervalMs"] = st["pollInterval"]
	}
	return out
}

// serveEither serves a task request (tasks/get, tasks/cancel, ...) in the
// era it came: serveModern's for a 2026-07-28 request, serve's for a
// legacy one.
func (t *taskTable) serveEither(ctx context.Context, s *session, in *inbound, send func([]byte)) *reply {
	if in.era == eraModern {
		return t.serveModern(ctx, s, in, send)
	}
	return t.serve(ctx, s, in, send)
}

// serveModern serves a modern client's tasks/get, tasks/update or
// tasks/cancel: on the server of the client's task its taskId names, with
// the server's ID. A task another principal created, or one corral has
// forgotten, is unknown (-32602: "Invalid or nonexistent taskId: -32602
// (Invalid params)").
func (t *taskTable) serveModern(ctx context.Context, s *session, in *inbound, send func([]byte)) *reply {
	msg := in.msg
	if !declaresTasks(in.caps) {
		// "Servers MUST return this error for non-declaring clients
		// issuing tasks/get, tasks/update, and tasks/cancel requests."
		return errorReply(msg.ID, missingTasksCapability(msg.Method))
	}
	var p struct {
		TaskID string `json:"taskId"`
	}
	if json.Unmarshal(msg.Params, &p) != nil || p.TaskID == "" {
		return errorReply(msg.ID, &wireError{Code: codeInvalidParams, Message: msg.Method + ": params must hold the taskId"})
	}
	tk := t.ownedModern(s.who, p.TaskID)
	if tk == nil {
		return errorReply(msg.ID, &wireError{Code: codeInvalidParams, Message: fmt.Sprintf("%s: unknown task %q; corral forgets a task when its server restarts or its ttl ends, and a task is reached only by the client that created it", msg.Method, p.TaskID)})
	}
	if !tk.legacyServer {
		r := t.call(ctx, s, in, tk.b, setMember(msg.Params, "taskId", tk.key.id), nil, send)
		if res := resultOf(r); res != nil {
			return in.rules.result(msg.ID, clientTaskID(res, tk.id), cacheHints{})
		}
		return r
	}
	ctx, cancel := context.WithTimeout(ctx, t.config().requestTimeout(tk.b.cfg))
	defer cancel()
	var result json.RawMessage
	var werr *wireError
	switch msg.Method {
	case "tasks/get":
		result, werr = t.legacyState(ctx, tk)
	case "tasks/cancel":
		_, werr = t.legacyCall(ctx, tk, "tasks/cancel")
		result = json.RawMessage(`{}`) // "the server MUST acknowledge the request with an empty result"
	default:
		// tasks/update: corral shows no inputRequests of a 2025-11-25
		// server's task (see legacyState), and "A server SHOULD ignore any
		// inputResponses responses mapped to a key that is not currently
		// outstanding for the task".
		result = json.RawMessage(`{}`)
	}
	if werr != nil {
		return errorReply(msg.ID, werr)
	}
	return in.rules.result(msg.ID, result, cacheHints{})
}

// legacyCall calls method of tk's 2025-11-25 server with tk's server ID,
// and returns its result or the error to answer with. A task the server no
// longer knows (-32602) is forgotten.
func (t *taskTable) legacyCall(ctx context.Context, tk *task, method string) (json.RawMessage, *wireError) {
	a, err := tk.b.call(ctx, method, setMember(json.RawMessage(`{}`), "taskId", tk.key.id), nil)
	switch {
	case err != nil:
		return nil, asWireError(err)
	case a.Error != nil:
		if a.Error.Code == codeInvalidParams {
			t.forget(tk.id)
		}
		return nil, a.Error
	}
	return a.Result, nil
}

// legacyState answers tasks/get of a modern client's task on a 2025-11-25
// server: the server's tasks/get in the extension's shape (see
// modernTaskState) and, once the task has ended, its tasks/result inlined:
// "If the request completed with a result (even if isError: true for tool
// results), the task uses completed status and the result field MUST
// contain that result"; "If the underlying request resulted in a JSON-RPC
// error, the task uses failed status and the error field MUST contain that
// JSON-RPC error." A task that waits for input (input_required, which a
// 2025-11-25 server asks for only while its client waits on tasks/result)
// is shown as working, with a statusMessage that says why: corral does not
// pass such a server's input requests to a 2026-07-28 client.
func (t *taskTable) legacyState(ctx context.Context, tk *task) (json.RawMessage, *wireError) {
	raw, werr := t.legacyCall(ctx, tk, "tasks/get")
	if werr != nil {
		return nil, werr
	}
	var st map[string]json.RawMessage
	json.Unmarshal(raw, &st)
	out := modernTaskState(st, tk.id)
	var status string
	json.Unmarshal(st["status"], &status)
	switch status {
	case "completed", "failed":
		a, err := tk.b.call(ctx, "tasks/result", setMember(json.RawMessage(`{}`), "taskId", tk.key.id), nil)
		switch {
		case err != nil:
			return nil, asWireError(err)
		case a.Error != nil:
			out["status"] = json.RawMessage(`"failed"`)
			out["error"], _ = json.Marshal(a.Error)
		default:
			out["status"] = json.RawMessage(`"completed"`)
			out["result"] = clientTaskID(a.Result, tk.id)
		}
	case "input_required":
		hideInput(out, tk)
	}
	res, _ := json.Marshal(out)
	return res, nil
}

// ended reports whether a task's status is one it ends in.
func ended(status string) bool {
	return status == "completed" || status == "failed" || status == "cancelled"
}

// hideInput shows out, the state of tk that waits for input on its
// 2025-11-25 server, as working, with a statusMessage that says why (see
// legacyState).
func hideInput(out map[string]json.RawMessage, tk *task) {
	out["status"] = json.RawMessage(`"working"`)
	out["statusMessage"], _ = json.Marshal(fmt.Sprintf("server %q waits for input, which corral passes only to 2025-11-25 clients (tasks/result); the task will not go on", tk.b.name))
}

// taskWatchers are the subscriptions/listen streams that asked for a
// modern task's statuses (notifications/tasks), each by a number of its
// own, and the task's last status, which a stream that asks later hears
// first: a status a server sent before any stream could name the task (it
// came with, or before, the answer that created it) is not lost. Its
// methods are safe for concurrent use.
//
// Lock order: mu is held while the streams' sends are called, which do not
// block (session.send's) and take no lock of corral's.
type taskWatchers struct {
	mu   sync.Mutex
	n    int
	fns  map[int]func(params json.RawMessage)
	last json.RawMessage
}

// add makes send hear the task's statuses from now on, the last one first
// if there is one, until stop is called.
func (w *taskWatchers) add(send func(params json.RawMessage)) (stop func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fns == nil {
		w.fns = map[int]func(json.RawMessage){}
	}
	w.n++
	n := w.n
	w.fns[n] = send
	if w.last != nil {
		send(w.last)
	}
	return func() {
		w.mu.Lock()
		delete(w.fns, n)
		w.mu.Unlock()
	}
}

// publish makes params the task's last status and sends it to every
// stream that asked for it; with params nil, it only forgets the last.
func (w *taskWatchers) publish(params json.RawMessage) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.last = params
	if params == nil {
		return
	}
	for _, send := range w.fns {
		send(params)
	}
}

// watched reports whether a stream asks for the task's statuses.
func (w *taskWatchers) watched() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.fns) > 0
}

// tellModern passes params, a server's status of tk, a modern client's
// task, to the listen streams of tk's owner that asked for it, as the
// extension's notifications/tasks: "Each notification carries a complete
// DetailedTask for the current status, identical to what tasks/get would
// have returned at that moment", under corral's ID. A 2026-07-28 server's
// status (its notifications/tasks, which come on corral's own listen
// request to it: see upstream.listenLoop) is passed as it is, but for the
// ID and the subscription ID, which the client's stream sets; one that says
// the task ended is not kept as its last if no stream asks for it, as for
// a 2025-11-25 server's. A 2025-11-25 server's is
// translated as tasks/get's answer is (see legacyState), and when it says
// the task ended, with its result or error inlined, which takes a call to
// the server: made on a goroutine of t.group, and only if a stream asks
// for it (otherwise the task's last status is forgotten: a stream that
// asks later hears nothing of it, and the client polls tasks/get).
func (t *taskTable) tellModern(tk *task, params json.RawMessage) {
	if !tk.legacyServer {
		var st struct {
			Status string `json:"status"`
		}
		json.Unmarshal(params, &st)
		if ended(st.Status) && !tk.watch.watched() {
			tk.watch.publish(nil)
			return
		}
		tk.watch.publish(clientTaskID(params, tk.id))
		return
	}
	var st map[string]json.RawMessage
	if json.Unmarshal(params, &st) != nil {
		return
	}
	var status string
	json.Unmarshal(st["status"], &status)
	switch status {
	case "completed", "failed":
		if !tk.watch.watched() {
			tk.watch.publish(nil)
			return
		}
		t.group.goOrRun(func() {
			ctx, cancel := context.WithTimeout(context.Background(), t.config().requestTimeout(tk.b.cfg))
			defer cancel()
			res, werr := t.legacyState(ctx, tk)
			if werr != nil {
				tk.b.log.Debug("task status of a 2026-07-28 client's task not passed on: its result could not be had", "task", tk.key.id, "err", werr.Message)
				return
			}
			tk.watch.publish(res)
		})
		return
	case "input_required":
		out := modernTaskState(st, tk.id)
		hideInput(out, tk)
		params, _ = json.Marshal(out)
	default:
		params, _ = json.Marshal(modernTaskState(st, tk.id))
	}
	tk.watch.publish(params)
}
