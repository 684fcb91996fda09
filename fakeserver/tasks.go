//go:build linux || darwin

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"
)

// Tasks (MCP 2025-11-25). With the tasks capability declared
// (-capabilities ...,tasks), a tools/call of the task tool whose params
// have a "task" member creates a task, answered at once with
// {"task":TASK}; the task completes after the call's "ms" argument
// (default 200) with the text "task done MS", unless tasks/cancel cancels
// it first, and a notifications/tasks/status with the task goes to the
// client at each change of status. Task IDs are "task-1", "task-2", ...
// in the order created, so two servers' IDs collide. Called with
// "elicit": true, the task first moves to input_required and, once the
// client asks for its result (tasks/result), sends it elicitation/create
// with the related-task _meta, as the specification's input_required flow
// has it; its text then ends with "; elicited: RESULT" (or "; elicitation
// failed: WHY"). A modern (2026-07-28) call of the task tool from a client
// that declares the tasks extension (io.modelcontextprotocol/tasks, which
// server/discover declares with tasks) creates a task too, answered as the
// extension's CreateTaskResult (resultType "task", the state at the top,
// ttlMs and pollIntervalMs). Such a task's statuses go, as the extension's
// notifications/tasks (the task's whole state, its result inlined once it
// has completed), only to the open subscriptions/listen streams whose
// taskIds name it, never as notifications/tasks/status. Called with
// "early": true, a 2025-11-25 task sends its first status before the answer
// that creates it, as server-everything does (a modern task's has no
// stream to go to).
// Listed with tasks declared, the task tool has execution.taskSupport
// "optional". tasks/get, tasks/list
// and tasks/cancel answer the task(s); tasks/result waits for the task to
// end and answers its result, with the related-task _meta. A task-augmented
// call of any other tool gets -32601, as the specification says of a tool
// that does not support tasks.

// relatedTaskKey is the _meta key that ties a message to its task.
const relatedTaskKey = "io.modelcontextprotocol/related-task"

// tasksCapability is the tasks member of the server's capabilities.
type tasksCapability struct {
	List     struct{} `json:"list"`
	Cancel   struct{} `json:"cancel"`
	Requests struct {
		Tools struct {
			Call struct{} `json:"call"`
		} `json:"tools"`
	} `json:"requests"`
}

// taskState is a task as the protocol shows it.
type taskState struct {
	TaskID        string `json:"taskId"`
	Status        string `json:"status"`
	StatusMessage string `json:"statusMessage,omitempty"`
	CreatedAt     string `json:"createdAt"`
	LastUpdatedAt string `json:"lastUpdatedAt"`
	TTL           int    `json:"ttl"`
	PollInterval  int    `json:"pollInterval"`
}

// fakeTask is a task and its result, once it has one.
type fakeTask struct {
	state  taskState
	result toolResult
	cancel context.CancelFunc
	done   chan struct{} // closed when the task ends
	// asked is closed by the first tasks/result for the task: an eliciting
	// task waits for it before it asks the client.
	asked     chan struct{}
	askedOnce sync.Once
	// modern says a 2026-07-28 client created it: its statuses go to the
	// listen streams that name it (notifyTask).
	modern bool
}

// taskStore holds the server's tasks. Its zero value is empty and ready.
type taskStore struct {
	mu    sync.Mutex
	last  int
	tasks map[string]*fakeTask
	order []string // IDs, oldest first
}

// taskTool answers a call of the task tool made without a task: the same
// text a task would have, after the same time.
func (s *server) taskTool(c *call, args json.RawMessage) {
	var a struct {
		MS int `json:"ms"`
	}
	if !decodeArgs(c, args, &a) || !nonNegative(c, "ms", a.MS) {
		return
	}
	ms := a.MS
	if ms == 0 {
		ms = 200
	}
	if sleepCtx(c.ctx, ms) {
		replyText(c, fmt.Sprintf("task done %d", ms))
	}
}

// createTask answers a task-augmented tools/call.
func (s *server) createTask(c *call, tc *toolCall) {
	if tc.Name != s.opts.prefix+"task" {
		c.fail(codeMethodNotFound, fmt.Sprintf("tool %q does not support tasks", tc.Name))
		return
	}
	var a struct {
		MS     int  `json:"ms"`
		Elicit bool `json:"elicit"`
		Early  bool `json:"early"`
	}
	if !decodeArgs(c, tc.Arguments, &a) || !nonNegative(c, "ms", a.MS) {
		return
	}
	ms := a.MS
	if ms == 0 {
		ms = 200
	}
	now := time.Now().UTC().Format(time.RFC3339Nano)
	ctx, cancel := context.WithCancel(context.Background())
	t := &fakeTask{cancel: cancel, done: make(chan struct{}), asked: make(chan struct{}), modern: c.modern != nil}
	st := &s.tasks
	st.mu.Lock()
	if st.tasks == nil {
		st.tasks = map[string]*fakeTask{}
	}
	st.last++
	t.state = taskState{TaskID: fmt.Sprintf("task-%d", st.last), Status: "working", CreatedAt: now, LastUpdatedAt: now, TTL: 60000, PollInterval: 50}
	st.tasks[t.state.TaskID] = t
	st.order = append(st.order, t.state.TaskID)
	state := t.state
	st.mu.Unlock()
	if a.Early {
		// As server-everything does: the task's status before the answer
		// that creates it.
		s.tellTask(t, state, toolResult{})
	}
	if c.modern != nil {
		// The tasks extension: the server decides, and the task is the
		// result.
		c.reply(createdTask{ResultType: "task", TaskID: state.TaskID, Status: state.Status, CreatedAt: state.CreatedAt,
			LastUpdatedAt: state.LastUpdatedAt, TTLMs: state.TTL, PollIntervalMs: state.PollInterval})
	} else {
		c.reply(map[string]any{"task": state})
	}
	go s.runTask(ctx, t, ms, a.Elicit)
}

// runTask completes t after ms, unless ctx ends first; with elicit, it
// asks the client first (see the top of the file).
func (s *server) runTask(ctx context.Context, t *fakeTask, ms int, elicit bool) {
	text := fmt.Sprintf("task done %d", ms)
	if elicit {
		s.taskStatus(t, "input_required")
		select {
		case <-t.asked:
		case <-ctx.Done():
			return
		}
		params := map[string]any{
			"message":         "which?",
			"requestedSchema": map[string]any{"type": "object", "properties": map[string]any{"name": map[string]string{"type": "string"}}},
			"_meta":           map[string]any{relatedTaskKey: map[string]string{"taskId": t.state.TaskID}},
		}
		result, failure, ok := s.ask(&call{s: s, ctx: ctx}, "elicitation/create", params)
		switch {
		case !ok:
			return
		case failure != "":
			text += "; elicitation failed: " + failure
		default:
			text += "; elicited: " + string(compact(result))
		}
		s.taskStatus(t, "working")
	}
	if !sleepCtx(ctx, ms) {
		return // cancelled: cancelTask ended it
	}
	s.endTask(t, "completed", toolResult{Content: []content{{Type: "text", Text: text}}})
}

// taskStatus moves t, while it has not ended, to status, a status that is
// not an end, and tells the client.
func (s *server) taskStatus(t *fakeTask, status string) {
	st := &s.tasks
	st.mu.Lock()
	if t.state.Status != "working" && t.state.Status != "input_required" {
		st.mu.Unlock()
		return
	}
	t.state.Status = status
	t.state.LastUpdatedAt = time.Now().UTC().Format(time.RFC3339Nano)
	state := t.state
	st.mu.Unlock()
	s.tellTask(t, state, toolResult{})
}

// endTask moves t to status, with result, unless it has ended already, and
// tells the client.
func (s *server) endTask(t *fakeTask, status string, result toolResult) bool {
	st := &s.tasks
	st.mu.Lock()
	if t.state.Status != "working" && t.state.Status != "input_required" {
		st.mu.Unlock()
		return false
	}
	t.state.Status = status
	t.state.LastUpdatedAt = time.Now().UTC().Format(time.RFC3339Nano)
	t.result = result
	state := t.state
	close(t.done)
	st.mu.Unlock()
	t.cancel()
	s.tellTask(t, state, result)
	return true
}

// tellTask tells the client of t's new state, with result if it has
// completed: a 2025-11-25 task's as notifications/tasks/status, a modern
// task's as notifications/tasks on the listen streams that name it.
func (s *server) tellTask(t *fakeTask, state taskState, result toolResult) {
	if !t.modern {
		s.send(notification{JSONRPC: "2.0", Method: "notifications/tasks/status", Params: state})
		return
	}
	detailed := map[string]any{"taskId": state.TaskID, "status": state.Status, "createdAt": state.CreatedAt,
		"lastUpdatedAt": state.LastUpdatedAt, "ttlMs": state.TTL, "pollIntervalMs": state.PollInterval}
	if state.StatusMessage != "" {
		detailed["statusMessage"] = state.StatusMessage
	}
	if state.Status == "completed" {
		detailed["result"] = map[string]any{"content": result.Content, "isError": result.IsError}
	}
	s.notifyTask(state.TaskID, detailed)
}

// taskRequest answers tasks/get, tasks/result, tasks/list and tasks/cancel.
func (s *server) taskRequest(c *call, method string, params json.RawMessage) {
	st := &s.tasks
	if method == "tasks/list" {
		st.mu.Lock()
		all := []taskState{}
		for _, id := range st.order {
			all = append(all, st.tasks[id].state)
		}
		st.mu.Unlock()
		c.reply(map[string]any{"tasks": all})
		return
	}
	var p struct {
		TaskID string `json:"taskId"`
	}
	decodeParams(params, &p)
	st.mu.Lock()
	t := st.tasks[p.TaskID]
	st.mu.Unlock()
	if t == nil {
		c.fail(codeInvalidParams, fmt.Sprintf("unknown task %q", p.TaskID))
		return
	}
	switch method {
	case "tasks/get":
		c.reply(s.taskSnapshot(t))
	case "tasks/cancel":
		if !s.endTask(t, "cancelled", toolResult{Content: []content{{Type: "text", Text: "cancelled"}}, IsError: true}) {
			c.fail(codeInvalidParams, fmt.Sprintf("task %q has already ended", p.TaskID))
			return
		}
		c.reply(s.taskSnapshot(t))
	case "tasks/result":
		t.askedOnce.Do(func() { close(t.asked) })
		select {
		case <-t.done:
		case <-c.ctx.Done():
			return // cancelled: no answer
		}
		snap := s.taskSnapshot(t)
		st.mu.Lock()
		r := t.result
		st.mu.Unlock()
		c.reply(map[string]any{"content": r.Content, "isError": r.IsError,
			"_meta": map[string]any{relatedTaskKey: map[string]string{"taskId": snap.TaskID}}})
	}
}

// taskSnapshot returns t's state.
func (s *server) taskSnapshot(t *fakeTask) taskState {
	s.tasks.mu.Lock()
	defer s.tasks.mu.Unlock()
	return t.state
}
