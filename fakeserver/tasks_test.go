//go:build linux || darwin

package main

import (
	"encoding/json"
	"testing"
)

func TestTasks(t *testing.T) {
	p := start(t, "-capabilities", "tools,tasks")
	init := p.initialize(latestVersion)
	if init.Capabilities.Tasks == nil {
		t.Fatalf("initialize declares no tasks capability: %+v", init.Capabilities)
	}
	var created struct{ Task taskState }
	p.request(1, "tools/call", map[string]any{"name": "task", "arguments": map[string]any{"ms": 50}, "task": map[string]any{}})
	p.expectResult(1, &created)
	if created.Task.TaskID != "task-1" || created.Task.Status != "working" {
		t.Fatalf("task created = %+v, want task-1 working", created.Task)
	}

	// tasks/result waits for the end; the status notification comes too.
	p.request(2, "tasks/result", map[string]any{"taskId": "task-1"})
	var sawStatus, sawResult bool
	for !sawStatus || !sawResult {
		m := p.next()
		switch {
		case m.Method == "notifications/tasks/status":
			var st taskState
			json.Unmarshal(m.Params, &st)
			if st.TaskID != "task-1" || st.Status != "completed" {
				t.Errorf("status notification %s, want task-1 completed", m.Params)
			}
			sawStatus = true
		case string(m.ID) == "2":
			var r struct {
				Content []content
				Meta    map[string]struct{ TaskID string } `json:"_meta"`
			}
			json.Unmarshal(m.Result, &r)
			if len(r.Content) != 1 || r.Content[0].Text != "task done 50" || r.Meta[relatedTaskKey].TaskID != "task-1" {
				t.Errorf("tasks/result = %s, want task done 50 with the related task", m.Result)
			}
			sawResult = true
		default:
			t.Fatalf("unexpected %s", m.Line)
		}
	}
	p.request(3, "tasks/cancel", map[string]any{"taskId": "task-1"})
	p.expectError(3, codeInvalidParams, `task "task-1" has already ended`)

	p.request(4, "tools/call", map[string]any{"name": "task", "arguments": map[string]any{"ms": 60000}, "task": map[string]any{}})
	p.expectResult(4, &created)
	p.request(5, "tasks/cancel", map[string]any{"taskId": "task-2"})
	if m := p.next(); m.Method != "notifications/tasks/status" {
		t.Fatalf("got %s, want the cancelled task's status first", m.Line)
	}
	var got taskState
	p.expectResult(5, &got)
	if got.TaskID != "task-2" || got.Status != "cancelled" {
		t.Errorf("tasks/cancel = %+v", got)
	}
	var list struct{ Tasks []taskState }
	p.request(6, "tasks/list", map[string]any{})
	p.expectResult(6, &list)
	if len(list.Tasks) != 2 || list.Tasks[0].Status != "completed" || list.Tasks[1].Status != "cancelled" {
		t.Errorf("tasks/list = %+v", list.Tasks)
	}
	p.request(7, "tasks/get", map[string]any{"taskId": "task-9"})
	p.expectError(7, codeInvalidParams, `unknown task "task-9"`)
	p.request(8, "tools/call", map[string]any{"name": "echo", "arguments": map[string]any{"text": "x"}, "task": map[string]any{}})
	p.expectError(8, codeMethodNotFound, `tool "echo" does not support tasks`)
}
