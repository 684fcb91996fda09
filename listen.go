package main

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"sync"
)

// subscriptions/listen, the 2026-07-28 era's way to hear of changes: a
// modern client has no session to notify, so it holds one request open
// instead, and the gateway serves it as a session of its own that lives as
// long as the request.

// listens serves subscriptions/listen requests. Its fields are set by
// newListens and never changed; what a request holds is its listening
// session's, so listens has no lock of its own. Its methods are safe for
// concurrent use.
//
// Lock order: it holds no lock while it calls its fields.
type listens struct {
	log  *slog.Logger
	subs *subscriptions // what a listening session subscribes to resources through
	// tasks are the modern clients' tasks, whose statuses a listen request
	// may ask for (the tasks extension's taskIds).
	tasks *taskTable
	// open adds a listening session to the sessions that hear of changes
	// (sessionSet.add), and end ends it (Gateway.endSession).
	open, end func(s *session)
	quiet     <-chan struct{} // closed when corral begins to shut down
}

// newListens returns what serves subscriptions/listen: its sessions
// subscribe through subs and hear of the tasks of tasks, are opened with
// open and ended with end, and their requests are answered when quiet is
// closed (see the fields of listens).
func newListens(log *slog.Logger, subs *subscriptions, tasks *taskTable, open, end func(*session), quiet <-chan struct{}) *listens {
	return &listens{log: log, subs: subs, tasks: tasks, open: open, end: end, quiet: quiet}
}

// listen serves subscriptions/listen: the changes of the lists the client
// asks for, and the updates of the resources it names, go on the request's
// stream, each with the request's ID as its subscription ID, until the
// client closes the stream (or cancels the request) or corral shuts down.
// The listening session is who's: it hears only of what who sees. The
// statuses of the tasks it names in taskIds (the tasks extension, which
// caps, the client's capabilities, must declare) go on it as
// notifications/tasks, of those tasks who created only (see
// taskWatchers).
func (l *listens) listen(ctx context.Context, who principal, caps capabilities, msg *wireMsg, send func([]byte)) *reply {
	var p struct {
		Notifications *struct {
			Tools     bool     `json:"toolsListChanged"`
			Prompts   bool     `json:"promptsListChanged"`
			Resources bool     `json:"resourcesListChanged"`
			URIs      []string `json:"resourceSubscriptions"`
			TaskIDs   []string `json:"taskIds"`
		} `json:"notifications"`
	}
	if json.Unmarshal(msg.Params, &p) != nil || p.Notifications == nil {
		return errorReply(msg.ID, &wireError{Code: codeInvalidParams, Message: `subscriptions/listen: params must hold "notifications", the notifications wanted`})
	}
	n := p.Notifications
	if len(n.TaskIDs) > 0 && !declaresTasks(caps) {
		// "Servers MUST return this error for non-declaring clients
		// requesting task notifications on subscriptions/listen."
		return errorReply(msg.ID, missingTasksCapability("subscriptions/listen's taskIds"))
	}
	var tasks []*task
	for _, id := range n.TaskIDs {
		if tk := l.tasks.ownedModern(who, id); tk != nil && !slices.Contains(tasks, tk) {
			tasks = append(tasks, tk)
		}
	}
	want := map[string]bool{
		kinds[kindTool].changed:           n.Tools,
		kinds[kindPrompt].changed:         n.Prompts,
		kinds[kindResource].changed:       n.Resources,
		"notifications/resources/updated": true,
	}
	subID := msg.ID
	notify := func(note []byte) {
		var m struct {
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		}
		if json.Unmarshal(note, &m) != nil || !want[m.Method] {
			return
		}
		line, _ := encodeNotification(m.Method, setMeta(m.Params, metaSubscriptionID, subID))
		send(line[:len(line)-1])
	}
	ls := listeningSession(notify, who)
	l.open(ls)
	defer l.end(ls)
	var honoured []string
	for _, uri := range n.URIs {
		if _, err := l.subs.subscribe(ctx, ls, setMember(json.RawMessage(`{}`), "uri", uri)); err == nil {
			honoured = append(honoured, uri)
		} else {
			l.log.Debug("subscriptions/listen: a resource cannot be subscribed to", "uri", uri, "err", err)
		}
	}
	// The tasks are watched from before the acknowledgement, so that no
	// status that comes in between is lost, but what they hear is sent
	// only after it (see heldUntilAck).
	held := &heldUntilAck{send: send}
	for _, tk := range tasks {
		defer tk.watch.add(func(status json.RawMessage) {
			line, _ := encodeNotification("notifications/tasks", setMeta(status, metaSubscriptionID, subID))
			held.put(line[:len(line)-1])
		})()
	}
	params, _ := json.Marshal(map[string]any{"_meta": map[string]json.RawMessage{metaSubscriptionID: subID}, "notifications": listenAck(n.Tools, n.Prompts, n.Resources, honoured, tasks)})
	line, _ := encodeNotification("notifications/subscriptions/acknowledged", params)
	held.ack(line[:len(line)-1])
	select {
	case <-ctx.Done():
		if !errors.Is(context.Cause(ctx), errShuttingDown) {
			return nil // the client ended it
		}
	case <-l.quiet:
	}
	raw, _ := json.Marshal(map[string]any{"resultType": "complete", "_meta": map[string]json.RawMessage{metaSubscriptionID: subID}})
	return resultReply(msg.ID, raw)
}

// listenAck returns the notifications a listen request is acknowledged
// for: the list changes it asked for, the resources it could subscribe to
// (honoured), and its tasks. "In its acknowledgement notification, the
// server includes the list of task IDs it has agreed to send task status
// notifications for": a task of another principal's, or one corral does
// not know, is not among tasks.
func listenAck(tools, prompts, resources bool, honoured []string, tasks []*task) map[string]any {
	ack := map[string]any{}
	for key, on := range map[string]bool{"toolsListChanged": tools, "promptsListChanged": prompts, "resourcesListChanged": resources} {
		if on {
			ack[key] = true
		}
	}
	if len(honoured) > 0 {
		ack["resourceSubscriptions"] = honoured
	}
	var taskIDs []string
	for _, tk := range tasks {
		taskIDs = append(taskIDs, tk.id)
	}
	if len(taskIDs) > 0 {
		ack["taskIds"] = taskIDs
	}
	return ack
}

// heldUntilAck sends a listen stream's task statuses only once the stream
// is acknowledged: "The server MUST NOT send any notification on the
// subscription before acknowledging it." A status told before is held,
// then sent right after the acknowledgement. (mu is the stream's own; the
// task watchers call put with their own lock held, and nothing here takes
// that lock while holding mu.)
type heldUntilAck struct {
	send  func([]byte)
	mu    sync.Mutex
	acked bool
	early [][]byte
}

// put sends line, or holds it until ack.
func (h *heldUntilAck) put(line []byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.acked {
		h.early = append(h.early, line)
		return
	}
	h.send(line)
}

// ack sends the acknowledgement line, then what was held.
func (h *heldUntilAck) ack(line []byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.send(line)
	for _, l := range h.early {
		h.send(l)
	}
	h.acked, h.early = true, nil
}
