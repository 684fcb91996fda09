package main

import (
	"context"
	"encoding/json"
	"errors"
)

// subscriptions/listen, the 2026-07-28 era's way to hear of changes: a
// modern client has no session to notify, so it holds one request open
// instead, and the gateway serves it as a session of its own that lives as
// long as the request.

// listen serves subscriptions/listen: the changes of the lists the client
// asks for, and the updates of the resources it names, go on the request's
// stream, each with the request's ID as its subscription ID, until the
// client closes the stream (or cancels the request) or corral shuts down.
// The listening session is who's: it hears only of what who sees.
func (g *Gateway) listen(ctx context.Context, who principal, msg *wireMsg, send func([]byte)) *reply {
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
	g.sessions.add(ls)
	defer g.sessions.endSession(ls)
	var honoured []string
	for _, uri := range n.URIs {
		if _, err := g.subscribe(ctx, ls, setMember(json.RawMessage(`{}`), "uri", uri)); err == nil {
			honoured = append(honoured, uri)
		} else {
			g.log.Debug("subscriptions/listen: a resource cannot be subscribed to", "uri", uri, "err", err)
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
	case <-g.quiet.Done():
	}
	raw, _ := json.Marshal(map[string]any{"resultType": "complete", "_meta": map[string]json.RawMessage{metaSubscriptionID: subID}})
	return resultReply(msg.ID, raw)
}
