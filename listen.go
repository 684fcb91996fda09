package main

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
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
	// open adds a listening session to the sessions that hear of changes
	// (sessionSet.add), and end ends it (Gateway.endSession).
	open, end func(s *session)
	quiet     <-chan struct{} // closed when corral begins to shut down
}

// newListens returns what serves subscriptions/listen: its sessions
// subscribe through subs, are opened with open and ended with end, and
// their requests are answered when quiet is closed (see the fields of
// listens).
func newListens(log *slog.Logger, subs *subscriptions, open, end func(*session), quiet <-chan struct{}) *listens {
	return &listens{log: log, subs: subs, open: open, end: end, quiet: quiet}
}

// listen serves subscriptions/listen: the changes of the lists the client
// asks for, and the updates of the resources it names, go on the request's
// stream, each with the request's ID as its subscription ID, until the
// client closes the stream (or cancels the request) or corral shuts down.
// The listening session is who's: it hears only of what who sees.
func (l *listens) listen(ctx context.Context, who principal, msg *wireMsg, send func([]byte)) *reply {
	var p struct {
		Notifications *struct {
			Tools     bool     `json:"toolsListChanged"`
			Prompts   bool     `json:"promptsListChanged"`
			Resources bool     `json:"resourcesListChanged"`
			URIs      []string `json:"resourceSubscriptions"`
		} `json:"notifications"`
	}
	if json.Unmarshal(msg.Params, &p) != nil || p.Notifications == nil {
		return errorReply(msg.ID, &wireError{Code: codeInvalidParams, Message: `subscriptions/listen: params must hold "notifications", the notifications wanted`})
	}
	n := p.Notifications
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
	ack := map[string]any{}
	for key, on := range map[string]bool{"toolsListChanged": n.Tools, "promptsListChanged": n.Prompts, "resourcesListChanged": n.Resources} {
		if on {
			ack[key] = true
		}
	}
	if len(honoured) > 0 {
		ack["resourceSubscriptions"] = honoured
	}
	params, _ := json.Marshal(map[string]any{"_meta": map[string]json.RawMessage{metaSubscriptionID: subID}, "notifications": ack})
	line, _ := encodeNotification("notifications/subscriptions/acknowledged", params)
	send(line[:len(line)-1])
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
