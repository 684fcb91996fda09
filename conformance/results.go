package conformance

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// URIs and task IDs that a gateway renames must be renamed wherever a
// client meets them: in results, not only in lists.

func TestURIsInResultsReadBack(t *testing.T) {
	guarantee(t)
	if !adapter.supports("resources") {
		skip(t, "the adapter says the gateway serves no resources")
	}
	if !adapter.has("prefix") {
		skip(t, "the adapter has no prefix setting: the case needs a server whose URIs the gateway renames")
	}
	specs := []serverSpec{{Name: "plain"}, {Name: "px", prefix: "pp"}}
	g := startGateway(t, specs, options{}, "plain", "px")
	s := g.newSession()
	for _, server := range []string{"plain", "px"} {
		tool := g.toolName(server, server+"_links")
		m, err := s.request(ctxFor(t, 30*time.Second), `"links"`, "tools/call", map[string]any{"name": tool, "arguments": map[string]any{}})
		if err != nil {
			fatal(t, "calling %s: %v", tool, err)
		}
		var r struct {
			Content []struct {
				Type     string
				URI      string
				Resource struct{ URI string }
			}
		}
		if m.Error != nil || json.Unmarshal(m.Result, &r) != nil {
			fatal(t, "%s answered %+v %s, want a result with resource links", tool, m.Error, truncate(m.Result))
		}
		var uris []string
		for _, c := range r.Content {
			if c.Type == "resource_link" {
				uris = append(uris, c.URI)
			} else if c.Type == "resource" {
				uris = append(uris, c.Resource.URI)
			}
		}
		if len(uris) != 3 {
			fail(t, "%s answered %s, want 3 resource URIs (two links and an embedded resource)", tool, truncate(m.Result))
		}
		for _, uri := range uris {
			m, err := s.request(ctxFor(t, 30*time.Second), `"read"`, "resources/read", map[string]any{"uri": uri})
			if err != nil {
				fatal(t, "resources/read %s: %v", uri, err)
			}
			var rr struct{ Contents []struct{ URI string } }
			switch {
			case m.Error != nil:
				fail(t, "%s gave the URI %q, and reading it back gives error %d: %s", tool, uri, m.Error.Code, m.Error.Message)
			case json.Unmarshal(m.Result, &rr) != nil || len(rr.Contents) != 1 || rr.Contents[0].URI != uri:
				fail(t, "resources/read %s = %s, want its contents under the URI read", uri, truncate(m.Result))
			}
		}
	}
}

func TestTasksReachTheirServerAndOnlyTheirSession(t *testing.T) {
	guarantee(t)
	if !adapter.supports("tasks") {
		skip(t, "the adapter says the gateway serves no tasks")
	}
	// Each server numbers its tasks task-1, task-2...: their IDs collide.
	flags := []string{"-capabilities", "tools,tasks"}
	g := startGateway(t, []serverSpec{{Name: "ta", flags: flags}, {Name: "tb", flags: flags}}, options{}, "ta", "tb")
	s, other := g.newSession(), g.newSession()
	create := func(server string, ms int) string {
		tool := g.toolName(server, server+"_task")
		m, err := s.request(ctxFor(t, 30*time.Second), `"create"`, "tools/call", map[string]any{"name": tool, "arguments": map[string]any{"ms": ms}, "task": map[string]any{"ttl": 60000}})
		if err != nil {
			fatal(t, "calling %s as a task: %v", tool, err)
		}
		var r struct {
			Task struct{ TaskID, Status string }
		}
		if m.Error != nil || json.Unmarshal(m.Result, &r) != nil || r.Task.TaskID == "" {
			fatal(t, "%s called as a task answered %+v %s, want a task", tool, m.Error, truncate(m.Result))
		}
		return r.Task.TaskID
	}
	quick, slow := create("ta", 100), create("tb", 60000)
	if quick == slow {
		fatal(t, "both servers' tasks have the ID %q: the client cannot tell them apart", quick)
	}
	ask := func(s *session, method, id string) (*message, taskStatus) {
		m, err := s.request(ctxFor(t, 30*time.Second), `"task"`, method, map[string]any{"taskId": id})
		if err != nil {
			fatal(t, "%s %s: %v", method, id, err)
		}
		var st taskStatus
		json.Unmarshal(m.Result, &st)
		return m, st
	}
	if m, _ := ask(s, "tasks/result", quick); !strings.Contains(string(m.Result), "task done 100") {
		fail(t, "tasks/result of ta's task = %+v %s, want ta's result (task done 100)", m.Error, truncate(m.Result))
	}
	if m, st := ask(s, "tasks/get", slow); st != (taskStatus{slow, "working"}) {
		fail(t, "tasks/get of tb's task = %+v %s, want it working under its ID", m.Error, truncate(m.Result))
	}
	for _, method := range []string{"tasks/get", "tasks/cancel"} {
		if m, _ := ask(other, method, slow); m.Error == nil {
			fail(t, "another session's %s of the task answered %s, want an error", method, truncate(m.Result))
		}
	}
	if m, st := ask(s, "tasks/cancel", slow); st != (taskStatus{slow, "cancelled"}) {
		fail(t, "tasks/cancel of tb's task = %+v %s, want it cancelled", m.Error, truncate(m.Result))
	}
	for server, want := range map[string][]string{"ta": {"tasks/result"}, "tb": {"tasks/get", "tasks/cancel"}} {
		var got []string
		for _, st := range serverStarts(g.stateDir, server) {
			for _, e := range events(g.stateDir, st.PID) {
				if e.Event == "request" && strings.HasPrefix(e.Method, "tasks/") {
					got = append(got, e.Method)
				}
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			fail(t, "server %s received %q, want %q", server, got, want)
		}
	}
}

// taskStatus is what the suite reads of a task.
type taskStatus struct {
	TaskID string `json:"taskId"`
	Status string `json:"status"`
}
