package main

// Tasks (MCP 2025-11-25). A client that augments a tools/call with a task
// gets, at once, a task its server created and runs; it then asks for the
// task's state, result or cancellation with tasks/get, tasks/result and
// tasks/cancel, and lists its tasks with tasks/list. Task IDs are the
// server's, and two servers may use the same ones: corral gives each task
// an ID of its own, as it does requests, remembers which server and which
// session it belongs to, and routes the tasks methods by it. A session sees
// and reaches only its own tasks. A 2026-07-28 client has no session: its
// tasks (the tasks extension, tasksmodern.go) are owned by its principal.

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"
)

// task is one task a client created through corral.
type task struct {
	id   string  // corral's ID, the one the client knows
	key  taskKey // the server's
	b    *backend
	tool string    // the tool the client called, by the name the client used
	run  *mux      // the run of b the task was created in; a later run forgets it
	s    *session  // the legacy session that owns it; nil for a modern task
	who  principal // who created it: the owner of a modern task
	// modern says a 2026-07-28 client created it (tasksmodern.go): who
	// owns it, and legacyServer says its server speaks 2025-11-25 tasks,
	// which corral translates.
	modern, legacyServer bool
	seq                  int64     // the order of creation, for tasks/list
	expires              time.Time // when the server may forget it (its ttl); zero if never
	// watch is, for a modern task, the listen streams that asked for its
	// statuses (tasksmodern.go).
	watch taskWatchers
}

// taskKey names a task as its server knows it: server is the backend's
// markerName, so that the processes of a session-scoped server, which
// number their tasks alike, each have their own.
type taskKey struct {
	server, id string
}

// taskTable is the tasks of every session, by corral's ID and by the
// server's, and what serves the tasks methods over them. A session has at
// most maxTasksPerSession of them, the tasks being created included. Its
// methods are safe for concurrent use.
//
// Lock order: mu is a leaf: no other lock is taken while it is held (the
// calls to servers, through call, are made without it).
type taskTable struct {
	// config, call and group are set by newTaskTable and not changed.
	config func() *Config // the config in force
	// call forwards a request of session s to server b and returns its
	// answer (Gateway.forward).
	call  func(ctx context.Context, s *session, in *inbound, b *backend, params, token json.RawMessage, send func([]byte)) *reply
	group *goroutines // what runs the cancellations of an ended session's tasks
	// seesTool reports whether who may call the tool of server named
	// tool (the name the client used) in the config in force: a task of a
	// tool it may not call does not exist for it. If nil, it may.
	seesTool func(who principal, server, tool string) bool
	// maxHeld bounds the statuses held for tasks not known yet (see
	// hold), and holdFor how long each is held. If zero, defaultMaxHeld
	// and defaultHoldFor.
	maxHeld int
	holdFor time.Duration

	mu       sync.Mutex
	byID     map[string]*task
	byServer map[taskKey]*task
	count    map[any]int // tasks and reservations, by owner (see task.owner)
	seq      int64
	// held are the servers' notifications/tasks/status about tasks not
	// known yet, by the server's key, nheld of them in all; dropped counts
	// those dropped past maxHeld or holdFor, for the log.
	held    map[taskKey][]heldStatus
	nheld   int
	dropped int64
	// relisten are the 2026-07-28 servers whose set of tasks of modern
	// clients changed (a task was made or forgotten), whose own listen
	// request corral sends again, with the tasks' IDs as they are now, once
	// t.mu is let go (see relistenChanged and serverTaskIDs).
	relisten []*backend
}

// heldStatus is a notifications/tasks/status a server sent about a task
// before the answer that creates it, held until until.
type heldStatus struct {
	b      *backend
	params json.RawMessage
	until  time.Time
}

// The bounds of the statuses held for tasks not known yet: a server sends
// one just before its answer (server-everything always does), so a few
// seconds and a few dozen are plenty.
const (
	defaultMaxHeld = 64
	defaultHoldFor = 10 * time.Second
)

// owner is what owns tk, the key of its count: its session, or for a
// modern task its principal.
func (tk *task) owner() any {
	if tk.modern {
		return tk.who
	}
	return tk.s
}

// newTaskTable returns an empty table whose requests to servers go through
// call, with the timeouts and limits of config, and whose cancellations of
// an ended session's tasks run on group. Only forward, serve, list and
// forgetSession use them: a table whose users call none of those (a test's)
// may be given nil for all three. A task is seen by its session only while
// seesTool says so (see taskTable.seesTool).
func newTaskTable(config func() *Config, call func(ctx context.Context, s *session, in *inbound, b *backend, params, token json.RawMessage, send func([]byte)) *reply, group *goroutines, seesTool func(who principal, server, tool string) bool) *taskTable {
	return &taskTable{config: config, call: call, group: group, seesTool: seesTool,
		byID: map[string]*task{}, byServer: map[taskKey]*task{}, count: map[any]int{}, held: map[taskKey][]heldStatus{}}
}

// reserve makes room for one task of s, or returns the error that refuses
// it: s has max tasks already. Tasks whose ttl has passed are forgotten
// first. The room is taken by add or given back by release.
func (t *taskTable) reserve(s *session, max int, now time.Time) *wireError {
	return t.reserveFor(s, max, now)
}

// reserveFor is reserve for owner, a session or a modern task's principal
// (see task.owner).
func (t *taskTable) reserveFor(owner any, max int, now time.Time) *wireError {
	defer t.relistenChanged() // after the lock is let go
	t.mu.Lock()
	defer t.mu.Unlock()
	for id, tk := range t.byID {
		if tk.owner() == owner && !tk.expires.IsZero() && now.After(tk.expires) {
			t.drop(id)
		}
	}
	if n := t.count[owner]; n >= max {
		if _, modern := owner.(principal); modern {
			return unavailable("this client has %d tasks, the limit (maxTasksPerSession, which bounds a 2026-07-28 client's tasks too); corral forgets a task when its ttl ends or its server restarts", n)
		}
		return unavailable("this session has %d tasks, the limit (maxTasksPerSession); corral forgets a task when its ttl ends or the session ends", n)
	}
	t.count[owner]++
	return nil
}

// replica returns the name of this replica, which begins the IDs of its
// tasks: the config's, or the default for a table without one (a test's).
func (t *taskTable) replica() string {
	if t.config == nil {
		return defaultReplica()
	}
	return t.config().Replica
}

// release gives back a reservation that made no task.
func (t *taskTable) release(s *session) { t.releaseFor(s) }

// releaseFor is release for owner (see reserveFor).
func (t *taskTable) releaseFor(owner any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.count[owner]--; t.count[owner] <= 0 {
		delete(t.count, owner)
	}
}

// add records the task server b created as id for s, of a call of tool, in the room reserve
// made, and returns it with corral's ID. A task the server gives an ID it
// already gave (after a restart corral did not see) replaces the old one.
func (t *taskTable) add(s *session, b *backend, tool, id string, ttl time.Duration, now time.Time) *task {
	return t.insert(&task{s: s, who: s.who}, b, tool, id, ttl, now)
}

// insert records tk, whose owner is set, as the task server b created as
// id (see add).
func (t *taskTable) insert(tk *task, b *backend, tool, id string, ttl time.Duration, now time.Time) *task {
	tk.id, tk.key, tk.b, tk.tool, tk.run = newReplicaID(t.replica()), taskKey{b.markerName(), id}, b, tool, b.currentRun()
	if ttl > 0 {
		tk.expires = now.Add(ttl)
	}
	defer t.relistenChanged() // after the lock is let go
	t.mu.Lock()
	defer t.mu.Unlock()
	if old := t.byServer[tk.key]; old != nil {
		t.drop(old.id)
	}
	t.seq++
	tk.seq = t.seq
	t.byID[tk.id] = tk
	t.byServer[tk.key] = tk
	t.changed(tk)
	return tk
}

// changed notes that tk, being made or forgotten, changes its server's set
// of modern clients' tasks, if it is one of those. t.mu is held.
func (t *taskTable) changed(tk *task) {
	if tk.modern && !tk.legacyServer && tk.b != nil && !slices.Contains(t.relisten, tk.b) {
		t.relisten = append(t.relisten, tk.b)
	}
}

// relistenChanged sends again the listen request of each 2026-07-28 server
// whose set of modern clients' tasks changed, so that it names the tasks
// as they are now (serverTaskIDs). t.mu is not held.
func (t *taskTable) relistenChanged() {
	t.mu.Lock()
	bs := t.relisten
	t.relisten = nil
	t.mu.Unlock()
	for _, b := range bs {
		b.resubscribe()
	}
}

// serverTaskIDs returns the server's IDs of the tasks modern clients made
// on b, a 2026-07-28 server, in its current run, oldest first: those whose
// statuses corral's own listen request to b asks for (the extension's
// taskIds). Each principal has at most maxTasksPerSession of them, so the
// list is bounded.
func (t *taskTable) serverTaskIDs(b *backend) []string {
	run := b.currentRun()
	t.mu.Lock()
	var tasks []*task
	for _, tk := range t.byID {
		if tk.modern && !tk.legacyServer && tk.b == b && tk.run == run {
			tasks = append(tasks, tk)
		}
	}
	t.mu.Unlock()
	sort.Slice(tasks, func(i, j int) bool { return tasks[i].seq < tasks[j].seq })
	ids := make([]string, len(tasks))
	for i, tk := range tasks {
		ids[i] = tk.key.id
	}
	return ids
}

// drop forgets the task id and gives back its room. t.mu is held.
func (t *taskTable) drop(id string) {
	tk := t.byID[id]
	if tk == nil {
		return
	}
	delete(t.byID, id)
	delete(t.byServer, tk.key)
	t.changed(tk)
	if t.count[tk.owner()]--; t.count[tk.owner()] <= 0 {
		delete(t.count, tk.owner())
	}
}

// forget forgets the task id.
func (t *taskTable) forget(id string) {
	t.mu.Lock()
	t.drop(id)
	t.mu.Unlock()
	t.relistenChanged()
}

// owned returns s's task id, or nil if s has no such task.
func (t *taskTable) owned(s *session, id string) *task {
	t.mu.Lock()
	tk := t.byID[id]
	t.mu.Unlock()
	if tk != nil && !tk.modern && tk.s == s && t.visible(tk) {
		return tk
	}
	return nil
}

// ownedModern returns who's modern task id, or nil if who has no such task.
func (t *taskTable) ownedModern(who principal, id string) *task {
	t.mu.Lock()
	tk := t.byID[id]
	t.mu.Unlock()
	if tk != nil && tk.modern && tk.who == who && t.visible(tk) {
		return tk
	}
	return nil
}

// visible reports whether tk's session may see it: it may call its tool.
func (t *taskTable) visible(tk *task) bool {
	return t.seesTool == nil || t.seesTool(tk.who, tk.b.name, tk.tool)
}

// ofServer returns the task server calls id, or nil.
func (t *taskTable) ofServer(server, id string) *task {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.byServer[taskKey{server, id}]
}

// sessionTasks returns s's tasks, newest first.
func (t *taskTable) sessionTasks(s *session) []*task {
	t.mu.Lock()
	var out []*task
	for _, tk := range t.byID {
		if tk.s == s {
			out = append(out, tk)
		}
	}
	t.mu.Unlock()
	out = slices.DeleteFunc(out, func(tk *task) bool { return !t.visible(tk) })
	sort.Slice(out, func(i, j int) bool { return out[i].seq > out[j].seq })
	return out
}

// forgetWhere forgets every task for which match reports true, and
// returns them.
func (t *taskTable) forgetWhere(match func(*task) bool) []*task {
	defer t.relistenChanged() // after the lock is let go
	t.mu.Lock()
	defer t.mu.Unlock()
	var gone []*task
	for id, tk := range t.byID {
		if match(tk) {
			t.drop(id)
			gone = append(gone, tk)
		}
	}
	return gone
}

// taskAugmented reports whether a request's params ask for a task. Params
// that do not hold the text "task" are not scanned.
func taskAugmented(params json.RawMessage) bool {
	if !bytes.Contains(params, []byte(`"task"`)) {
		return false
	}
	found := false
	members(params, func(key string, _ []byte) { found = found || key == "task" })
	return found
}

// forward forwards a task-augmented request of a legacy session (through
// t.call), within s's room for tasks, and gives the task the
// server creates an ID of corral's in the answer. A server that ran the
// request without a task (it does not offer tasks) answers as usual.
func (t *taskTable) forward(ctx context.Context, s *session, in *inbound, b *backend, params, token json.RawMessage, send func([]byte)) *reply {
	if werr := t.reserve(s, t.config().MaxTasksPerSession, time.Now()); werr != nil {
		return errorReply(in.msg.ID, werr)
	}
	r := t.call(ctx, s, in, b, params, token, send)
	id, ttl := createdTask(r)
	if id == "" {
		t.release(s)
		return r
	}
	tk := t.add(s, b, calledTool(in.msg.Params), id, ttl, time.Now())
	if s.hasEnded() {
		// The session ended while the call was in flight, and forgot its
		// tasks before this one was added: no one will ask for it.
		t.forget(tk.id)
	}
	for _, params := range t.takeHeld(tk) {
		t.tell(tk, params)
	}
	r.result = clientTaskID(r.result, tk.id)
	return r
}

// calledTool returns the tool a tools/call's params name, or "" (a
// task-augmented request of another method: only a tool's visibility is
// checked).
func calledTool(params json.RawMessage) string {
	var p struct {
		Name string `json:"name"`
	}
	json.Unmarshal(params, &p)
	return p.Name
}

// createdTask returns the server's ID and the ttl of the task r, the
// answer to a task-augmented request, says the server created; "" if it
// says none (an error, or the result of a server that does not offer
// tasks). The result is not decoded but for those two values.
func createdTask(r *reply) (id string, ttl time.Duration) {
	if r == nil || r.result == nil {
		return "", 0
	}
	rw := rawEditor{data: r.result}
	top := skipSpace(r.result, 0)
	start, end, ok := rw.member(top, "task", "taskId")
	if !ok || json.Unmarshal(r.result[start:end], &id) != nil {
		return "", 0
	}
	var ms int64
	if start, end, ok := rw.member(top, "task", "ttl"); ok && json.Unmarshal(r.result[start:end], &ms) == nil && ms > 0 {
		ttl = time.Duration(ms) * time.Millisecond
	}
	return id, ttl
}

// serve serves tasks/get, tasks/result and tasks/cancel: it forwards
// the request to the server of the session's task it names, with the
// server's ID for it, and answers with corral's. A task the session does
// not own is unknown (-32602), as the specification says of a task that
// does not exist.
func (t *taskTable) serve(ctx context.Context, s *session, in *inbound, send func([]byte)) *reply {
	msg := in.msg
	var p struct {
		TaskID string `json:"taskId"`
		Meta   struct {
			Token json.RawMessage `json:"progressToken"`
		} `json:"_meta"`
	}
	if json.Unmarshal(msg.Params, &p) != nil || p.TaskID == "" {
		return errorReply(msg.ID, &wireError{Code: codeInvalidParams, Message: msg.Method + ": params must hold the taskId"})
	}
	tk := t.owned(s, p.TaskID)
	if tk == nil {
		if mine := t.replica(); elsewhere(p.TaskID, mine) != "" {
			return errorReply(msg.ID, &wireError{Code: codeInvalidParams, Message: fmt.Sprintf("%s: task %q belongs to replica %q, and this is replica %q: tasks are a session's, and the load balancer must send every request of a session to the replica named before the '.' of its Mcp-Session-Id", msg.Method, p.TaskID, replicaOf(p.TaskID), mine)})
		}
	}
	if tk == nil {
		return errorReply(msg.ID, &wireError{Code: codeInvalidParams, Message: fmt.Sprintf("%s: unknown task %q; tasks/list names this session's tasks (corral forgets a task when its server restarts, its ttl ends or its session ends)", msg.Method, p.TaskID)})
	}
	token := p.Meta.Token
	if string(token) == "null" {
		token = nil
	}
	r := t.call(ctx, s, in, tk.b, setMember(msg.Params, "taskId", tk.key.id), token, send)
	if r != nil && r.result != nil {
		r.result = clientTaskID(r.result, tk.id)
	}
	return r
}

// clientTaskID returns result with the task ID in it set to id: in a task
// (a task's state at its top, or the task member of a CreateTaskResult), or
// in the related-task _meta of a task's result. Only those values change:
// the rest is the server's bytes.
func clientTaskID(result json.RawMessage, id string) json.RawMessage {
	rw := rawEditor{data: result}
	top := skipSpace(result, 0)
	for _, path := range [][]string{{"taskId"}, {"task", "taskId"}, {"_meta", metaRelatedTask, "taskId"}} {
		if start, end, ok := rw.member(top, path...); ok {
			rw.replace(start, end, id)
		}
	}
	sort.Slice(rw.edits, func(i, j int) bool { return rw.edits[i].start < rw.edits[j].start })
	return rw.output()
}

// related returns the task of server b's that the related-task _meta
// of params names (a server's request to a client about a task has it),
// and where its ID is in params; nil if none does.
func (t *taskTable) related(b *backend, params json.RawMessage) (tk *task, start, end int) {
	if !bytes.Contains(params, []byte(metaRelatedTask)) {
		return nil, 0, 0
	}
	rw := rawEditor{data: params}
	start, end, ok := rw.member(skipSpace(params, 0), "_meta", metaRelatedTask, "taskId")
	var id string
	if !ok || json.Unmarshal(params[start:end], &id) != nil {
		return nil, 0, 0
	}
	if tk = t.ofServer(b.markerName(), id); tk == nil || tk.b != b {
		return nil, 0, 0
	}
	return tk, start, end
}

// relatedSession returns the session whose task params, those of a
// request of server b's to a client, are about, or nil.
func (t *taskTable) relatedSession(b *backend, params json.RawMessage) *session {
	if tk, _, _ := t.related(b, params); tk != nil {
		return tk.s
	}
	return nil
}

// clientRelated returns params, those of a request of server b's to a
// client, with the task they are about under corral's ID for it.
func (t *taskTable) clientRelated(b *backend, params json.RawMessage) json.RawMessage {
	tk, start, end := t.related(b, params)
	if tk == nil {
		return params
	}
	rw := rawEditor{data: params}
	rw.replace(start, end, tk.id)
	return rw.output()
}

// list answers tasks/list: the session's tasks, newest first, each as
// its server answers tasks/get for it now, in one page. A task its server
// no longer knows (-32602) is forgotten; one whose server does not answer
// is left out of this page.
func (t *taskTable) list(ctx context.Context, s *session, params json.RawMessage) (any, error) {
	var p struct {
		Cursor *string `json:"cursor"`
	}
	json.Unmarshal(params, &p)
	if p.Cursor != nil {
		return nil, &wireError{Code: codeInvalidParams, Message: "tasks/list: invalid cursor; corral lists a session's tasks in one page, with no nextCursor"}
	}
	mine := t.sessionTasks(s)
	states := make([]json.RawMessage, len(mine))
	var wg sync.WaitGroup
	for i, tk := range mine {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(ctx, t.config().requestTimeout(tk.b.cfg))
			defer cancel()
			a, err := tk.b.call(ctx, "tasks/get", setMember(json.RawMessage(`{}`), "taskId", tk.key.id), nil)
			switch {
			case err != nil:
			case a.Error != nil && a.Error.Code == codeInvalidParams:
				t.forget(tk.id)
			case a.Error == nil:
				states[i] = clientTaskID(a.Result, tk.id)
			}
		}()
	}
	wg.Wait()
	list := []json.RawMessage{}
	for _, st := range states {
		if st != nil {
			list = append(list, st)
		}
	}
	return map[string]any{"tasks": list}, nil
}

// status passes a server's notifications/tasks/status to the session
// whose task it is, with corral's ID for the task. A status of a task
// corral does not know yet is held until the answer that creates it (see
// hold); one of a task no session owns any more is dropped.
func (t *taskTable) status(b *backend, params json.RawMessage) {
	var p struct {
		TaskID string `json:"taskId"`
	}
	json.Unmarshal(params, &p)
	tk := t.ofServer(b.markerName(), p.TaskID)
	if tk == nil {
		t.hold(b, p.TaskID, params, time.Now())
		return
	}
	if tk.b != b || !t.visible(tk) {
		b.log.Debug("task status of a task whose tool its client may no longer call dropped", "task", p.TaskID)
		return
	}
	t.tell(tk, params)
}

// tell passes params, a server's status of tk, to tk's session with
// corral's ID for it; a 2026-07-28 client's task's, to the listen streams
// of its owner that asked for it (tellModern).
func (t *taskTable) tell(tk *task, params json.RawMessage) {
	if tk.modern {
		t.tellModern(tk, params)
		return
	}
	note, _ := encodeNotification("notifications/tasks/status", setMember(params, "taskId", tk.id))
	tk.s.send(note[:len(note)-1])
}

// hold keeps params, server b's status of its task id, which corral does
// not know: a server may send it before the answer that creates the task
// (server-everything always does), and takeHeld gives it to the task once
// that answer is in. At most maxHeld statuses wait, each for holdFor at
// most; past either bound a status is dropped, and the log says so with
// the count dropped so far.
func (t *taskTable) hold(b *backend, id string, params json.RawMessage, now time.Time) {
	max, holdFor := cmp.Or(t.maxHeld, defaultMaxHeld), cmp.Or(t.holdFor, defaultHoldFor)
	t.mu.Lock()
	expired := t.expireHeld(now)
	full := t.nheld >= max
	if full {
		t.dropped++
	} else {
		key := taskKey{b.markerName(), id}
		t.held[key] = append(t.held[key], heldStatus{b: b, params: params, until: now.Add(holdFor)})
		t.nheld++
	}
	dropped := t.dropped
	t.mu.Unlock()
	if expired > 0 {
		b.log.Debug("task statuses held for tasks that never became known dropped after their hold", "count", expired, "dropped", dropped)
	}
	if full {
		b.log.Warn("task status of a task not known dropped: statuses of tasks not known yet are held until the answer that creates the task, at most this many at once", "task", id, "held", max, "dropped", dropped)
		return
	}
	b.log.Debug("task status of a task not known yet held until the answer that creates it", "task", id)
}

// expireHeld drops the held statuses whose time is over at now, counts
// them in dropped, and returns how many. t.mu is held.
func (t *taskTable) expireHeld(now time.Time) int {
	n := 0
	for key, hs := range t.held {
		kept := slices.DeleteFunc(hs, func(h heldStatus) bool { return now.After(h.until) })
		n += len(hs) - len(kept)
		if len(kept) == 0 {
			delete(t.held, key)
		} else {
			t.held[key] = kept
		}
	}
	t.nheld -= n
	t.dropped += int64(n)
	return n
}

// takeHeld returns the statuses held for tk, its server's, oldest first,
// and forgets them.
func (t *taskTable) takeHeld(tk *task) []json.RawMessage {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.expireHeld(time.Now())
	hs := t.held[tk.key]
	delete(t.held, tk.key)
	t.nheld -= len(hs)
	var out []json.RawMessage
	for _, h := range hs {
		if h.b == tk.b {
			out = append(out, h.params)
		}
	}
	return out
}

// forgetServer forgets the tasks of server b created before its run m:
// it has started again, and its tasks went with the process that ran them.
// A task created in run m itself, which a call may have made before this
// is called, is kept.
func (t *taskTable) forgetServer(b *backend, m *mux) {
	t.forgetWhere(func(tk *task) bool { return tk.key.server == b.name && tk.run != m })
}

// forgetSession forgets the tasks of session s, which ended, and asks
// their servers to cancel them, where they offer tasks/cancel: no one can
// ask for them any more. (One that has ended already stays as it is.) The
// servers hear of it on goroutines of t.group (the gateway's, which Stop
// joins), so it does not block, unless the group has stopped.
func (t *taskTable) forgetSession(s *session) {
	for _, tk := range t.forgetWhere(func(tk *task) bool { return tk.s == s }) {
		if !offersTaskCancel(tk.b.capabilities()) {
			continue
		}
		t.group.goOrRun(func() {
			ctx, cancel := context.WithTimeout(context.Background(), t.config().requestTimeout(tk.b.cfg))
			defer cancel()
			if err := tk.b.callInto(ctx, "tasks/cancel", setMember(json.RawMessage(`{}`), "taskId", tk.key.id)); err != nil {
				tk.b.log.Debug("cancelling the task of an ended session", "task", tk.key.id, "err", err)
			}
		})
	}
}

// offersTaskCancel reports whether a server's capabilities declare
// tasks.cancel.
func offersTaskCancel(c capabilities) bool {
	var t struct {
		Cancel json.RawMessage `json:"cancel"`
	}
	return json.Unmarshal(c["tasks"], &t) == nil && t.Cancel != nil
}

// mergeTasks adds a server's tasks capability, declared, to caps, what
// corral declares to clients: tasks/list always (corral answers it), and
// tasks/cancel and task-augmented tools/call when any server offers them.
func mergeTasks(caps map[string]any, declared json.RawMessage) {
	t, _ := caps["tasks"].(map[string]any)
	if t == nil {
		t = map[string]any{"list": struct{}{}}
		caps["tasks"] = t
	}
	var c struct {
		Cancel   json.RawMessage `json:"cancel"`
		Requests struct {
			Tools struct {
				Call json.RawMessage `json:"call"`
			} `json:"tools"`
		} `json:"requests"`
	}
	json.Unmarshal(declared, &c)
	if c.Cancel != nil {
		t["cancel"] = struct{}{}
	}
	if c.Requests.Tools.Call != nil {
		t["requests"] = map[string]any{"tools": map[string]any{"call": struct{}{}}}
	}
}
