package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// taskState is a task as clients see it.
type taskState struct {
	TaskID string
	Status string
}

// createTask calls tool as a task and returns the task the answer names.
func createTask(t *testing.T, p *peer, tool string, ms int) taskState {
	t.Helper()
	m, _ := p.call("tools/call", fmt.Sprintf(`{"name":%q,"arguments":{"ms":%d},"task":{"ttl":60000}}`, tool, ms))
	var r struct{ Task taskState }
	result(t, m, &r)
	if r.Task.TaskID == "" || r.Task.Status != "working" {
		t.Fatalf("%s as a task = %s, want a working task", tool, m.Result)
	}
	return r.Task
}

func TestTasksReachTheirServerUnderGatewayIDsAndOnlyTheirSession(t *testing.T) {
	t.Parallel()
	// Both servers number their tasks task-1, task-2...: their IDs collide.
	tg := startGateway(t, `{"maxTasksPerSession":2,"mcpServers":{
		"a": {"command":"FAKE","args":["-state","STATE","-name","a","-capabilities","tools,tasks"]},
		"b": {"command":"FAKE","args":["-state","STATE","-name","b","-capabilities","tools,resources,tasks"]}
	}}`)
	p := newHTTPPeer(t, tg.url, `{}`)
	other := newHTTPPeer(t, tg.url, `{}`)

	init, _ := p.call("initialize", `{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}`)
	var ir struct{ Capabilities map[string]any }
	result(t, init, &ir)
	want := map[string]any{"list": map[string]any{}, "cancel": map[string]any{}, "requests": map[string]any{"tools": map[string]any{"call": map[string]any{}}}}
	if diff := cmp.Diff(want, ir.Capabilities["tasks"]); diff != "" {
		t.Errorf("tasks capability (-want +got):\n%s", diff)
	}

	quick := createTask(t, p, "a__task", 300)
	slow := createTask(t, p, "b__task", 60000)
	if quick.TaskID == slow.TaskID || strings.HasPrefix(quick.TaskID, "task-") {
		t.Fatalf("task IDs %q and %q: want corral's own, distinct", quick.TaskID, slow.TaskID)
	}
	if m, _ := p.call("tools/call", `{"name":"a__task","arguments":{},"task":{}}`); m.Error == nil || !strings.Contains(m.Error.Message, "maxTasksPerSession") {
		t.Errorf("a third task past maxTasksPerSession 2 = %+v %s, want an error naming the setting", m.Error, m.Result)
	}

	// tasks/result waits for the task, and answers its server's result.
	m, _ := p.call("tasks/result", fmt.Sprintf(`{"taskId":%q}`, quick.TaskID))
	if got := text(t, m); got != "task done 300" {
		t.Errorf("tasks/result = %q, want the result of a's task", got)
	}
	if !strings.Contains(string(m.Result), `"taskId":"`+quick.TaskID+`"`) {
		t.Errorf("tasks/result = %s, want its related-task _meta with corral's ID %q", m.Result, quick.TaskID)
	}
	// The server's status notification reaches the session, with its ID.
	note := p.nextExcept(listChanged...)
	if note.Method != "notifications/tasks/status" || !strings.Contains(string(note.Params), `"taskId":"`+quick.TaskID+`"`) || !strings.Contains(string(note.Params), `"completed"`) {
		t.Errorf("after the task ended the session got %s %s, want its tasks/status with ID %q", note.Method, note.Params, quick.TaskID)
	}
	// b's task-1 is another task: still working.
	m, _ = p.call("tasks/get", fmt.Sprintf(`{"taskId":%q}`, slow.TaskID))
	var got taskState
	result(t, m, &got)
	if got != (taskState{slow.TaskID, "working"}) {
		t.Errorf("tasks/get of b's task = %s", m.Result)
	}

	// Another session neither sees nor reaches them.
	for _, method := range []string{"tasks/get", "tasks/result", "tasks/cancel"} {
		if m, _ := other.call(method, fmt.Sprintf(`{"taskId":%q}`, slow.TaskID)); m.Error == nil || m.Error.Code != codeInvalidParams {
			t.Errorf("%s of another session's task = %+v %s, want error %d", method, m.Error, m.Result, codeInvalidParams)
		}
	}
	m, _ = other.call("tasks/list", `{}`)
	var list struct{ Tasks []taskState }
	result(t, m, &list)
	if len(list.Tasks) != 0 {
		t.Errorf("another session's tasks/list = %s, want no tasks", m.Result)
	}
	m, _ = p.call("tasks/list", `{}`)
	result(t, m, &list)
	if diff := cmp.Diff([]taskState{{slow.TaskID, "working"}, {quick.TaskID, "completed"}}, list.Tasks); diff != "" {
		t.Errorf("tasks/list, newest first (-want +got):\n%s", diff)
	}

	m, _ = p.call("tasks/cancel", fmt.Sprintf(`{"taskId":%q}`, slow.TaskID))
	result(t, m, &got)
	if got != (taskState{slow.TaskID, "cancelled"}) {
		t.Errorf("tasks/cancel = %s", m.Result)
	}

	// A server that starts again has lost its tasks: so has corral.
	p.call("tools/call", `{"name":"a__crash","arguments":{}}`)
	waitFor(t, 30*time.Second, "a's task to be forgotten with its server", func() bool {
		m, _ := p.call("tasks/get", fmt.Sprintf(`{"taskId":%q}`, quick.TaskID))
		return m.Error != nil && strings.Contains(m.Error.Message, "unknown task")
	})
	if m, _ := p.call("tasks/get", fmt.Sprintf(`{"taskId":%q}`, slow.TaskID)); m.Error != nil {
		t.Errorf("b's task after a restarted: %+v", m.Error)
	}
}

func TestTasksOfAnEndedSessionAreForgottenAndCancelled(t *testing.T) {
	t.Parallel()
	tg := startGateway(t, `{"mcpServers":{"a": {"command":"FAKE","args":["-state","STATE","-capabilities","tools,tasks"]}}}`)
	gone, stays := newHTTPPeer(t, tg.url, `{}`), newHTTPPeer(t, tg.url, `{}`)
	createTask(t, gone, "task", 60000)
	kept := createTask(t, stays, "task", 60000)
	req, _ := http.NewRequest("DELETE", tg.url, nil)
	req.Header.Set("Mcp-Session-Id", gone.sid)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	pid := fakeProcesses(t, tg.dir)[0].PID
	waitFor(t, 10*time.Second, "the server to be asked to cancel the ended session's task", func() bool {
		for _, e := range fakeEvents(t, tg.dir, pid) {
			if e.Event == "request" && e.Method == "tasks/cancel" {
				return true
			}
		}
		return false
	})
	m, _ := stays.call("tasks/list", `{}`)
	var list struct{ Tasks []taskState }
	result(t, m, &list)
	if diff := cmp.Diff([]taskState{{kept.TaskID, "working"}}, list.Tasks); diff != "" {
		t.Errorf("the other session's tasks (-want +got):\n%s", diff)
	}
	tg.gw.tasks.mu.Lock()
	n, sessions := len(tg.gw.tasks.byID), len(tg.gw.tasks.count)
	tg.gw.tasks.mu.Unlock()
	if n != 1 || sessions != 1 {
		t.Errorf("corral knows %d tasks of %d sessions after one of two sessions ended, want the other's 1", n, sessions)
	}
}

func TestClientTaskIDChangesOnlyTheTaskIDs(t *testing.T) {
	for _, c := range []struct{ name, in, want string }{{
		name: "a task's state",
		in:   `{"taskId" : "task-1","status":"working","statusMessage":"<&>"}`,
		want: `{"taskId" : "C","status":"working","statusMessage":"<&>"}`,
	}, {
		name: "a CreateTaskResult",
		in:   `{"task":{"taskId":"task-1","ttl":null},"_meta":{"io.modelcontextprotocol/model-immediate-response":"x"}}`,
		want: `{"task":{"taskId":"C","ttl":null},"_meta":{"io.modelcontextprotocol/model-immediate-response":"x"}}`,
	}, {
		name: "a task's result",
		in:   `{"content":[{"type":"text","text":"\"taskId\":\"task-1\""}],"structuredContent":{"taskId":"task-1"},"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"task-1"}}}`,
		want: `{"content":[{"type":"text","text":"\"taskId\":\"task-1\""}],"structuredContent":{"taskId":"task-1"},"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"C"}}}`,
	}} {
		t.Run(c.name, func(t *testing.T) {
			if got := string(clientTaskID([]byte(c.in), "C")); got != c.want {
				t.Errorf("clientTaskID(%s)\n = %s\nwant %s", c.in, got, c.want)
			}
		})
	}
}

func TestServersRequestsAboutATaskNameItByCorralsID(t *testing.T) {
	tt := newTaskTable(nil, nil, nil, nil)
	a, other := &backend{name: "a"}, &backend{name: "b"}
	s := makeSession(nil, anonymousPrincipal)
	tt.reserve(s, 1, time.Now())
	tk := tt.add(s, a, "", "task-1", 0, time.Now())
	in := `{"message":"which?","_meta":{"io.modelcontextprotocol/related-task":{"taskId":"task-1"},"k":1}}`
	want := strings.Replace(in, "task-1", tk.id, 1)
	if got := string(tt.clientRelated(a, json.RawMessage(in))); got != want {
		t.Errorf("clientRelated(a, %s)\n = %s\nwant %s", in, got, want)
	}
	if got := string(tt.clientRelated(other, json.RawMessage(in))); got != in {
		t.Errorf("clientRelated(b, %s) = %s, want it unchanged: b has no such task", in, got)
	}
}

func TestATasksRequestForInputReachesItsSessionAmongOthers(t *testing.T) {
	t.Parallel()
	tg := startGateway(t, `{"mcpServers":{"a": {"command":"FAKE","args":["-state","STATE","-capabilities","tools,tasks"]}}}`)
	owner, busy := newHTTPPeer(t, tg.url, fullCaps), newHTTPPeer(t, tg.url, fullCaps)
	owner.answer = func(method string, _ json.RawMessage) (any, *wireError) {
		return map[string]any{"action": "accept", "content": map[string]string{"name": "ann"}}, nil
	}
	var mu sync.Mutex
	var wrong []string // what the other session was asked
	busy.answer = func(method string, params json.RawMessage) (any, *wireError) {
		mu.Lock()
		defer mu.Unlock()
		wrong = append(wrong, method+" "+string(params))
		return nil, &wireError{Code: codeInternalError, Message: "not mine"}
	}
	// The other session has a call in flight to the server all along.
	release := t.TempDir() + "/release"
	busyDone := make(chan *wireMsg, 1)
	go func() {
		m, _ := busy.call("tools/call", fmt.Sprintf(`{"name":"wait","arguments":{"file":%q}}`, release))
		busyDone <- m
	}()
	pid := fakeProcesses(t, tg.dir)[0].PID
	waitFor(t, 10*time.Second, "the other session's call to reach the server", func() bool {
		for _, e := range fakeEvents(t, tg.dir, pid) {
			if e.Tool == "wait" {
				return true
			}
		}
		return false
	})

	m, _ := owner.call("tools/call", `{"name":"task","arguments":{"ms":10,"elicit":true},"task":{}}`)
	var r struct{ Task taskState }
	result(t, m, &r)
	m, _ = owner.call("tasks/result", fmt.Sprintf(`{"taskId":%q}`, r.Task.TaskID))
	if got, want := text(t, m), `task done 10; elicited: {"action":"accept","content":{"name":"ann"}}`; got != want {
		t.Errorf("the task's result = %q, want %q: its question reached its own session", got, want)
	}
	if err := os.WriteFile(release, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if m := <-busyDone; text(t, m) != "released" {
		t.Errorf("the other session's call = %s", m.Result)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(wrong) > 0 {
		t.Errorf("the other session was asked %q", wrong)
	}
}

func TestTaskTableMakesRoomAsTasksExpire(t *testing.T) {
	tt := newTaskTable(nil, nil, nil, nil)
	b := &backend{name: "a"}
	s := makeSession(nil, anonymousPrincipal)
	now := time.Now()
	if werr := tt.reserve(s, 2, now); werr != nil {
		t.Fatal(werr)
	}
	tt.add(s, b, "", "short", time.Second, now)
	if werr := tt.reserve(s, 2, now); werr != nil {
		t.Fatal(werr)
	}
	tt.add(s, b, "", "forever", 0, now)
	if werr := tt.reserve(s, 2, now); werr == nil || !strings.Contains(werr.Message, "maxTasksPerSession") {
		t.Fatalf("a third task of 2 = %v, want an error naming maxTasksPerSession", werr)
	}
	if werr := tt.reserve(s, 2, now.Add(2*time.Second)); werr != nil {
		t.Fatalf("once a task's ttl has passed, reserve = %v, want room", werr)
	}
	if tt.ofServer("a", "short") != nil || tt.ofServer("a", "forever") == nil {
		t.Errorf("the expired task is still known, or the other one is not")
	}
	tt.release(s)
	if n := tt.count[s]; n != 1 {
		t.Errorf("after a reservation was released, %d tasks counted, want 1", n)
	}
}
