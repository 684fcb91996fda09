package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// tasksCaps are the capabilities of a 2026-07-28 client that declares the
// tasks extension.
const tasksCaps = `{"extensions":{"io.modelcontextprotocol/tasks":{}}}`

// modernTask is a task as the tasks extension shows it.
type modernTask struct {
	ResultType     string          `json:"resultType"`
	TaskID         string          `json:"taskId"`
	Status         string          `json:"status"`
	StatusMessage  string          `json:"statusMessage"`
	TTLMs          *int            `json:"ttlMs"`
	PollIntervalMs int             `json:"pollIntervalMs"`
	Result         json.RawMessage `json:"result"`
	Error          *wireError      `json:"error"`
}

// taskRequest sends a modern tasks/METHOD about task id, with the Mcp-Name
// header the extension asks for, as a client with caps.
func taskRequest(t *testing.T, url, method, id, caps string) (int, *wireMsg) {
	t.Helper()
	status, m, _ := modernPost(t, url, method, fmt.Sprintf(`{"taskId":%q,%s}`, id, modernMeta(caps)), "Mcp-Name", id)
	return status, m
}

// TestModernClientsCreatePollAndCancelTasksThroughCorral drives the tasks
// extension over HTTP as a 2026-07-28 client, with fakeserver's 2025-11-25
// tasks behind corral: discover offers the extension, a call of the task
// tool answers a CreateTaskResult under corral's own ID, tasks/get shows
// it working and then completed with the result inlined, tasks/cancel
// cancels another, and the bounds and refusals hold.
func TestModernClientsCreatePollAndCancelTasksThroughCorral(t *testing.T) {
	t.Parallel()
	tg := startGateway(t, `{"maxTasksPerSession":2,"mcpServers":{"a":{"command":"FAKE","args":["-state","STATE","-name","a","-capabilities","tools,tasks"]}}}`)
	meta := modernMeta(tasksCaps)

	_, m, _ := modernPost(t, tg.url, "server/discover", `{`+meta+`}`)
	var d struct{ Capabilities map[string]json.RawMessage }
	result(t, m, &d)
	if !strings.Contains(string(d.Capabilities["extensions"]), tasksExtension) || d.Capabilities["tasks"] != nil {
		t.Errorf("server/discover capabilities = %s, want the tasks extension and no legacy tasks", m.Result)
	}

	create := func(ms int) modernTask {
		t.Helper()
		status, m, _ := modernPost(t, tg.url, "tools/call", fmt.Sprintf(`{"name":"task","arguments":{"ms":%d},%s}`, ms, meta))
		var tk modernTask
		result(t, m, &tk)
		if status != 200 || tk.ResultType != "task" || tk.Status != "working" || tk.TaskID == "" || strings.HasPrefix(tk.TaskID, "task-") ||
			tk.TTLMs == nil || *tk.TTLMs != 60000 || tk.PollIntervalMs != 50 {
			t.Fatalf("tools/call of task = %d %s, want a CreateTaskResult under corral's ID with ttlMs and pollIntervalMs", status, m.Result)
		}
		return tk
	}
	quick := create(200)
	slow := create(60000)
	if quick.TaskID == slow.TaskID {
		t.Fatalf("two tasks share the ID %q", quick.TaskID)
	}
	if _, m, _ := modernPost(t, tg.url, "tools/call", `{"name":"task","arguments":{"ms":1},`+meta+`}`); m.Error == nil || !strings.Contains(m.Error.Message, "maxTasksPerSession") {
		t.Errorf("a third task past maxTasksPerSession 2 = %+v %s, want an error naming the setting", m.Error, m.Result)
	}

	var got modernTask
	waitFor(t, 10*time.Second, "the quick task to complete", func() bool {
		status, m := taskRequest(t, tg.url, "tasks/get", quick.TaskID, tasksCaps)
		result(t, m, &got)
		if status != 200 || got.TaskID != quick.TaskID || (got.Status != "working" && got.Status != "completed") {
			t.Fatalf("tasks/get = %d %s, want the task under corral's ID", status, m.Result)
		}
		return got.Status == "completed"
	})
	if !strings.Contains(string(got.Result), `"task done 200"`) || !strings.Contains(string(got.Result), quick.TaskID) {
		t.Errorf("the completed task's result = %s, want the tool's text and corral's ID in its related-task _meta", got.Result)
	}

	status, m := taskRequest(t, tg.url, "tasks/cancel", slow.TaskID, tasksCaps)
	if status != 200 || m.Error != nil || strings.TrimSpace(string(m.Result)) != `{"resultType":"complete"}` {
		t.Errorf("tasks/cancel = %d %s %+v, want an empty acknowledgement", status, m.Result, m.Error)
	}
	_, m = taskRequest(t, tg.url, "tasks/get", slow.TaskID, tasksCaps)
	result(t, m, &got)
	if got.Status != "completed" && got.Status != "cancelled" || got.Status == "completed" && !strings.Contains(string(got.Result), "cancelled") {
		t.Errorf("tasks/get of the cancelled task = %s, want it cancelled", m.Result)
	}
	if status, m := taskRequest(t, tg.url, "tasks/update", slow.TaskID, tasksCaps); status != 200 || m.Error != nil {
		t.Errorf("tasks/update = %d %+v, want an acknowledgement", status, m.Error)
	}

	// Refusals: the extension undeclared, a task ID corral did not give,
	// an Mcp-Name header that is not the task ID.
	if status, m := taskRequest(t, tg.url, "tasks/get", quick.TaskID, `{}`); status != http.StatusBadRequest || m.Error == nil || m.Error.Code != codeMissingCapability || !strings.Contains(string(m.Error.Data), tasksExtension) {
		t.Errorf("tasks/get without the extension = %d %+v, want -32021 naming it", status, m.Error)
	}
	if _, m := taskRequest(t, tg.url, "tasks/get", "task-1", tasksCaps); m.Error == nil || m.Error.Code != codeInvalidParams {
		t.Errorf("tasks/get of the server's own ID = %+v %s, want -32602", m.Error, m.Result)
	}
	if status, m, _ := modernPost(t, tg.url, "tasks/get", fmt.Sprintf(`{"taskId":%q,%s}`, quick.TaskID, meta), "Mcp-Name", "other"); status != http.StatusBadRequest || m.Error == nil || m.Error.Code != codeHeaderMismatch {
		t.Errorf("tasks/get with another Mcp-Name = %d %+v, want 400 with -32020", status, m.Error)
	}
	// A client that does not declare the extension gets the tool's result:
	// the tool's taskSupport is optional.
	_, m, _ = modernPost(t, tg.url, "tools/call", `{"name":"task","arguments":{"ms":1},`+modernMeta(`{}`)+`}`)
	if got := text(t, m); got != "task done 1" {
		t.Errorf("tools/call of task without the extension = %q, want its result", got)
	}
}

func TestModernTasksAreReachedOnlyByTheirPrincipal(t *testing.T) {
	tt := newTaskTable(nil, nil, nil, nil)
	b := &backend{name: "a"}
	alice, bob := clientPrincipal("alice"), clientPrincipal("bob")
	if werr := tt.reserveFor(alice, 1, time.Now()); werr != nil {
		t.Fatal(werr)
	}
	tk := tt.insert(&task{who: alice, modern: true}, b, "task", "task-1", 0, time.Now())
	if tt.ownedModern(alice, tk.id) != tk || tt.ownedModern(bob, tk.id) != nil {
		t.Errorf("ownedModern: alice's task is not hers, or is bob's")
	}
	if werr := tt.reserveFor(alice, 1, time.Now()); werr == nil || !strings.Contains(werr.Message, "maxTasksPerSession") {
		t.Errorf("alice's second task of 1 = %v, want the limit", werr)
	}
	if werr := tt.reserveFor(bob, 1, time.Now()); werr != nil {
		t.Errorf("bob's first task = %v, want room: each principal has its own", werr)
	}
	if s := makeSession(nil, alice); tt.owned(s, tk.id) != nil {
		t.Errorf("a legacy session of alice's reaches her modern task")
	}
}

// TestATaskStatusBeforeItsAnswerReachesTheSession: fakeserver's task tool
// called with early sends its first status before the answer that creates
// the task, as server-everything does; the session gets it, under corral's
// ID, instead of corral dropping it as a status of no session's task.
func TestATaskStatusBeforeItsAnswerReachesTheSession(t *testing.T) {
	t.Parallel()
	tg := startGateway(t, `{"mcpServers":{"a":{"command":"FAKE","args":["-state","STATE","-name","a","-capabilities","tools,tasks"]}}}`)
	p := newHTTPPeer(t, tg.url, `{}`)
	m, _ := p.call("tools/call", `{"name":"task","arguments":{"ms":60000,"early":true},"task":{"ttl":60000}}`)
	var r struct{ Task taskState }
	result(t, m, &r)
	note := p.nextExcept(listChanged...)
	if note.Method != "notifications/tasks/status" || !strings.Contains(string(note.Params), `"taskId":"`+r.Task.TaskID+`"`) || !strings.Contains(string(note.Params), `"working"`) {
		t.Errorf("the session got %s %s, want the early working status with corral's ID %q", note.Method, note.Params, r.Task.TaskID)
	}
}

func TestEarlyTaskStatusesAreHeldWithinBounds(t *testing.T) {
	tt := newTaskTable(nil, nil, nil, nil)
	tt.maxHeld = 2
	b := &backend{name: "a", log: slog.New(slog.DiscardHandler)}
	var mu sync.Mutex
	var sent []string
	s := makeSession(func(msg []byte) { mu.Lock(); sent = append(sent, string(msg)); mu.Unlock() }, anonymousPrincipal)
	status := func(id string) json.RawMessage { return json.RawMessage(`{"taskId":"` + id + `","status":"working"}`) }

	tt.hold(b, "stale", status("stale"), time.Now().Add(-time.Minute)) // its hold is over at once
	tt.status(b, status("t1"))                                         // the stale one is dropped: room for it
	tt.status(b, status("t2"))
	tt.status(b, status("t3")) // past maxHeld 2: dropped
	if tt.nheld != 2 || tt.dropped != 2 {
		t.Fatalf("held %d, dropped %d; want 2 held (t1, t2) and 2 dropped (stale, t3)", tt.nheld, tt.dropped)
	}
	tk := tt.add(s, b, "", "t1", 0, time.Now())
	for _, params := range tt.takeHeld(tk) {
		tt.tell(tk, params)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(sent) != 1 || !strings.Contains(sent[0], `"taskId":"`+tk.id+`"`) {
		t.Errorf("the session got %q, want t1's held status under corral's ID %q", sent, tk.id)
	}
	if tt.nheld != 1 || tt.held[taskKey{"a", "t2"}] == nil {
		t.Errorf("after t1 became known, %d held, want t2's alone", tt.nheld)
	}
}

// TestModernTasksOfAModernServerPassUnderCorralsIDs: a 2026-07-28 server
// with the tasks extension (fakeserver -era modern) makes the task itself;
// corral passes its CreateTaskResult and its answers to tasks/get and
// tasks/cancel, with its own ID in place of the server's, and the server
// gets its own ID back.
func TestModernTasksOfAModernServerPassUnderCorralsIDs(t *testing.T) {
	t.Parallel()
	tg := startGateway(t, `{"mcpServers":{"m":{"command":"FAKE","args":["-state","STATE","-name","m","-era","modern","-capabilities","tools,tasks"]}}}`)
	meta := modernMeta(tasksCaps)
	_, m, _ := modernPost(t, tg.url, "server/discover", `{`+meta+`}`)
	if !strings.Contains(string(m.Result), tasksExtension) {
		t.Errorf("server/discover = %s, want the tasks extension its modern server declares", m.Result)
	}
	_, m, _ = modernPost(t, tg.url, "tools/call", `{"name":"task","arguments":{"ms":60000},`+meta+`}`)
	var created modernTask
	result(t, m, &created)
	if created.ResultType != "task" || created.TaskID == "" || strings.HasPrefix(created.TaskID, "task-") || created.TTLMs == nil || *created.TTLMs != 60000 {
		t.Fatalf("tools/call = %s, want the server's CreateTaskResult under corral's ID", m.Result)
	}
	status, m := taskRequest(t, tg.url, "tasks/get", created.TaskID, tasksCaps)
	var got modernTask
	result(t, m, &got)
	if status != 200 || got.TaskID != created.TaskID || got.Status != "working" {
		t.Errorf("tasks/get = %d %s, want the working task under corral's ID", status, m.Result)
	}
	status, m = taskRequest(t, tg.url, "tasks/cancel", created.TaskID, tasksCaps)
	result(t, m, &got)
	if status != 200 || got.TaskID != created.TaskID || got.Status != "cancelled" {
		t.Errorf("tasks/cancel = %d %s, want the server's answer under corral's ID", status, m.Result)
	}
}

// listenTo opens a subscriptions/listen stream, ID "L", asking for the
// statuses of taskIDs, as the client of token (none if empty) with caps,
// and returns its messages; the stream is closed when the test ends.
func listenTo(t *testing.T, url, token, caps string, taskIDs ...string) <-chan *wireMsg {
	t.Helper()
	ids, _ := json.Marshal(taskIDs)
	body := `{"jsonrpc":"2.0","id":"L","method":"subscriptions/listen","params":{"notifications":{"taskIds":` + string(ids) + `},` + modernMeta(caps) + `}}`
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "POST", url, strings.NewReader(body))
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "subscriptions/listen")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	msgs := make(chan *wireMsg, 100)
	go func() {
		defer resp.Body.Close()
		defer close(msgs)
		if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			readEvents(resp.Body, func(m *wireMsg) { msgs <- m })
			return
		}
		m := new(wireMsg)
		json.NewDecoder(resp.Body).Decode(m)
		msgs <- m
	}()
	return msgs
}

// nextOn returns the next message of msgs, failing the test if none comes.
func nextOn(t *testing.T, msgs <-chan *wireMsg, what string) *wireMsg {
	t.Helper()
	select {
	case m, ok := <-msgs:
		if !ok {
			t.Fatalf("%s: the listen stream ended", what)
		}
		return m
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: nothing on the listen stream", what)
	}
	return nil
}

// TestModernTaskStatusesGoToTheOwnersListenStreams: a 2026-07-28 client
// that names its task in a subscriptions/listen's taskIds hears its
// statuses as notifications/tasks under corral's ID: first the one
// fakeserver sent before the answer that created the task (held, then
// kept as the task's last), then its completion with the result inlined,
// as tasks/get shows it. Another principal naming the task is not
// acknowledged for it and hears nothing of it (only of its own task), and
// a client that does not declare the extension gets -32021.
func TestModernTaskStatusesGoToTheOwnersListenStreams(t *testing.T) {
	t.Parallel()
	tg := startGateway(t, `{"clients":{"alice":{"tokenFile":`+tokenFile(t, aliceToken)+`},"bob":{"tokenFile":`+tokenFile(t, bobToken)+`}},
		"mcpServers":{"a":{"command":"FAKE","args":["-state","STATE","-name","a","-capabilities","tools,tasks"]}}}`)
	create := func(token string) string {
		t.Helper()
		_, m, _ := modernPost(t, tg.url, "tools/call", `{"name":"task","arguments":{"ms":5000,"early":true},`+modernMeta(tasksCaps)+`}`, "Authorization", "Bearer "+token)
		var tk modernTask
		result(t, m, &tk)
		if tk.ResultType != "task" || tk.TaskID == "" {
			t.Fatalf("tools/call of task = %s %+v, want a task", m.Result, m.Error)
		}
		return tk.TaskID
	}
	mine, theirs := create(aliceToken), create(bobToken)
	alice := listenTo(t, tg.url, aliceToken, tasksCaps, mine)
	bob := listenTo(t, tg.url, bobToken, tasksCaps, mine, theirs)

	ack := nextOn(t, alice, "alice's acknowledgement")
	if ack.Method != "notifications/subscriptions/acknowledged" || !strings.Contains(string(ack.Params), `"taskIds":["`+mine+`"]`) {
		t.Fatalf("alice's first message = %s %s, want the acknowledgement of her task", ack.Method, ack.Params)
	}
	var st struct {
		modernTask
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	m := nextOn(t, alice, "the early status")
	json.Unmarshal(m.Params, &st)
	if m.Method != "notifications/tasks" || st.TaskID != mine || st.Status != "working" || st.TTLMs == nil || string(st.Meta[metaSubscriptionID]) != `"L"` {
		t.Errorf("alice's second message = %s %s, want the early working status under corral's ID %q with the subscription ID", m.Method, m.Params, mine)
	}
	m = nextOn(t, alice, "the completion")
	st = struct {
		modernTask
		Meta map[string]json.RawMessage `json:"_meta"`
	}{}
	json.Unmarshal(m.Params, &st)
	if m.Method != "notifications/tasks" || st.TaskID != mine || st.Status != "completed" || !strings.Contains(string(st.Result), `"task done 5000"`) {
		t.Errorf("alice's third message = %s %s, want the completed task with its result inlined", m.Method, m.Params)
	}

	ack = nextOn(t, bob, "bob's acknowledgement")
	if ack.Method != "notifications/subscriptions/acknowledged" || !strings.Contains(string(ack.Params), `"taskIds":["`+theirs+`"]`) {
		t.Fatalf("bob's first message = %s %s, want the acknowledgement of his task alone", ack.Method, ack.Params)
	}
	// Alice's task was created first and ends first: had her statuses
	// reached bob, they would come before his task's end.
	for done := false; !done; {
		m := nextOn(t, bob, "bob's task's statuses")
		if strings.Contains(string(m.Params), mine) {
			t.Fatalf("bob heard of alice's task: %s %s", m.Method, m.Params)
		}
		done = strings.Contains(string(m.Params), `"completed"`)
	}

	refused := nextOn(t, listenTo(t, tg.url, aliceToken, `{}`, mine), "the refusal")
	if refused.Error == nil || refused.Error.Code != codeMissingCapability || !strings.Contains(string(refused.Error.Data), tasksExtension) {
		t.Errorf("listen for taskIds without the extension = %s %+v, want -32021 naming it", refused.Result, refused.Error)
	}
}

// TestModernServersTaskStatusesGoToTheOwnersListenStreams: corral's own
// subscriptions/listen to a 2026-07-28 server (fakeserver -era modern,
// which sends a task's statuses only on listen streams whose taskIds name
// it, and refuses taskIds from a request that does not declare the tasks
// extension) names the server's IDs of the tasks modern clients made
// there, sent again as each is made; the server's notifications/tasks then
// reach the owner's listen stream under corral's ID and the stream's own
// subscription ID, and never another principal's stream.
func TestModernServersTaskStatusesGoToTheOwnersListenStreams(t *testing.T) {
	t.Parallel()
	tg := startGateway(t, `{"clients":{"alice":{"tokenFile":`+tokenFile(t, aliceToken)+`},"bob":{"tokenFile":`+tokenFile(t, bobToken)+`}},
		"mcpServers":{"m":{"command":"FAKE","args":["-state","STATE","-name","m","-era","modern","-capabilities","tools,tasks"]}}}`)
	create := func(token string) string {
		t.Helper()
		_, m, _ := modernPost(t, tg.url, "tools/call", `{"name":"task","arguments":{"ms":60000},`+modernMeta(tasksCaps)+`}`, "Authorization", "Bearer "+token)
		var tk modernTask
		result(t, m, &tk)
		if tk.ResultType != "task" || tk.TaskID == "" {
			t.Fatalf("tools/call of task = %s %+v, want a task", m.Result, m.Error)
		}
		return tk.TaskID
	}
	mine, theirs := create(aliceToken), create(bobToken)
	pid := fakeProcesses(t, tg.dir)[0].PID
	waitFor(t, 30*time.Second, "corral's listen to name both tasks by the server's IDs", func() bool {
		return slices.ContainsFunc(fakeEvents(t, tg.dir, pid), func(e fakeEvent) bool {
			return e.Event == "listen" && strings.Contains(string(e.Notifications), `"taskIds":["task-1","task-2"]`)
		})
	})
	alice := listenTo(t, tg.url, aliceToken, tasksCaps, mine)
	bob := listenTo(t, tg.url, bobToken, tasksCaps, mine, theirs)
	if ack := nextOn(t, alice, "alice's acknowledgement"); ack.Method != "notifications/subscriptions/acknowledged" || !strings.Contains(string(ack.Params), `"taskIds":["`+mine+`"]`) {
		t.Fatalf("alice's first message = %s %s, want the acknowledgement of her task", ack.Method, ack.Params)
	}
	if ack := nextOn(t, bob, "bob's acknowledgement"); ack.Method != "notifications/subscriptions/acknowledged" || !strings.Contains(string(ack.Params), `"taskIds":["`+theirs+`"]`) {
		t.Fatalf("bob's first message = %s %s, want the acknowledgement of his task alone", ack.Method, ack.Params)
	}
	cancel := func(token, id string) {
		t.Helper()
		status, m, _ := modernPost(t, tg.url, "tasks/cancel", fmt.Sprintf(`{"taskId":%q,%s}`, id, modernMeta(tasksCaps)), "Mcp-Name", id, "Authorization", "Bearer "+token)
		if status != 200 || m.Error != nil {
			t.Fatalf("tasks/cancel of %s = %d %+v", id, status, m.Error)
		}
	}
	type status struct {
		modernTask
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	cancel(aliceToken, mine)
	m := nextOn(t, alice, "the server's status of alice's task")
	var st status
	json.Unmarshal(m.Params, &st)
	if m.Method != "notifications/tasks" || st.TaskID != mine || st.Status != "cancelled" || st.TTLMs == nil || *st.TTLMs != 60000 || string(st.Meta[metaSubscriptionID]) != `"L"` {
		t.Errorf("alice's status = %s %s, want the server's cancelled task under corral's ID %q with her stream's subscription ID", m.Method, m.Params, mine)
	}
	// Alice's status has reached her stream: had it reached bob's too, it
	// would come there before his own task's.
	cancel(bobToken, theirs)
	m = nextOn(t, bob, "the server's status of bob's task")
	st = status{}
	json.Unmarshal(m.Params, &st)
	if m.Method != "notifications/tasks" || st.TaskID != theirs || st.Status != "cancelled" {
		t.Errorf("bob's status = %s %s, want his own cancelled task alone (never alice's %q)", m.Method, m.Params, mine)
	}
}

// TestServerTaskIDsNameTheModernTasksOfAModernServer: corral's own listen
// to a 2026-07-28 server names the server's IDs of the tasks modern clients
// made there, oldest first, and not those of another server, of a
// 2025-11-25 server (which sends notifications/tasks/status unasked) or of
// legacy sessions; making or forgetting one sends the listen again.
func TestServerTaskIDsNameTheModernTasksOfAModernServer(t *testing.T) {
	tt := newTaskTable(nil, nil, nil, nil)
	relistened := 0
	m := &backend{name: "m", up: &upstream{relisten: func() { relistened++ }}}
	other := &backend{name: "other"}
	alice := clientPrincipal("alice")
	now := time.Now()
	first := tt.insert(&task{who: alice, modern: true}, m, "task", "task-1", 0, now)
	tt.insert(&task{who: alice, modern: true}, m, "task", "task-2", 0, now)
	tt.insert(&task{who: alice, modern: true, legacyServer: true}, m, "task", "task-3", 0, now)
	tt.insert(&task{who: alice, modern: true}, other, "task", "task-4", 0, now)
	tt.add(makeSession(nil, alice), m, "task", "task-5", 0, now)
	if got := tt.serverTaskIDs(m); !slices.Equal(got, []string{"task-1", "task-2"}) {
		t.Errorf("serverTaskIDs = %q, want the modern tasks of m, oldest first", got)
	}
	if relistened != 2 {
		t.Errorf("m's listen was sent again %d times for its 2 modern tasks, want 2", relistened)
	}
	tt.forget(first.id)
	if got := tt.serverTaskIDs(m); !slices.Equal(got, []string{"task-2"}) || relistened != 3 {
		t.Errorf("after forgetting task-1: serverTaskIDs = %q and %d listens, want [task-2] and a listen more", got, relistened)
	}
}

// TestTaskWatchersReplayTheLastStatusOnce: a stream that asks for a task
// hears its last status first, then each new one, until it stops; a
// status dropped with no stream (nil) is not replayed.
func TestTaskWatchersReplayTheLastStatusOnce(t *testing.T) {
	var w taskWatchers
	w.publish(json.RawMessage(`1`)) // no stream: kept as the last
	var got []string
	stop := w.add(func(p json.RawMessage) { got = append(got, string(p)) })
	w.publish(json.RawMessage(`2`))
	stop()
	w.publish(json.RawMessage(`3`))
	if strings.Join(got, ",") != "1,2" || w.watched() {
		t.Errorf("the stream heard %v (watched after stop: %v), want 1 (the last) then 2, and nothing after it stopped", got, w.watched())
	}
	w.publish(nil)
	got = nil
	defer w.add(func(p json.RawMessage) { got = append(got, string(p)) })()
	if len(got) != 0 {
		t.Errorf("a stream after the last was dropped heard %v, want nothing", got)
	}
}
