package main

// This file holds what corral tells MCP clients of its own servers, so that
// a user who sees corral only through a client (-stdio, in a desktop app
// that buries corral's stderr in a log file) can see that a server is
// broken: a log message (notifications/message, logger "corral") when a
// server fails to start, crashes, is given up on and comes back, and the
// resource corral://status, the status page's snapshot as JSON.
//
// Who hears the log messages: a legacy session (one that sent initialize)
// that asked, with logging/setLevel, for their level or a less severe one,
// or that never asked: the specification lets a server choose what to send
// then, and a desktop client rarely asks. A 2026-07-28 client asks per
// request, and hears none of them. A session whose view sees no item of a
// server hears nothing of it, and corral://status shows it only the
// servers it sees items of.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
)

const (
	// ownLogger is the logger of corral's own log messages.
	ownLogger = "corral"
	// statusURI is corral's own resource: the status page as JSON.
	statusURI = "corral://status"
)

// statusItem is corral://status as resources/list lists it.
var statusItem = json.RawMessage(`{"uri":"` + statusURI + `","name":"corral-status","title":"corral: the state of its servers",` +
	`"description":"Each server corral runs: its state, why it is not ready, its last stderr lines, when corral tries it again, its recent calls. The status page, as JSON.",` +
	`"mimeType":"application/json"}`)

// serverNotices tells the sessions when a shared server goes down or comes
// back. Its fields but down are set by newServerNotices and never changed;
// its methods are safe for concurrent use.
//
// Lock order: mu is a leaf, never held while a session is sent a message.
type serverNotices struct {
	sessions *sessionSet
	status   func() gatewayStatus            // the status page's snapshot (statusReader.status)
	visible  func(v *view) func(string) bool // which servers view v sees items of

	mu   sync.Mutex
	down map[string]bool // the servers whose going down the sessions were told of, by name
}

// newServerNotices returns the notices of sessions, which read the
// snapshot from status and what a view sees from visible.
func newServerNotices(sessions *sessionSet, status func() gatewayStatus, visible func(v *view) func(string) bool) *serverNotices {
	return &serverNotices{sessions: sessions, status: status, visible: visible, down: map[string]bool{}}
}

// stateChanged tells the sessions of server b's change of state from from
// to to, for the reason why, when it is one a user must hear of: a failed
// start or a crash (warning), being given up on (error), and being ready
// again after one of those (notice). It does not block.
func (n *serverNotices) stateChanged(b *backend, from, to backendState, why string) {
	var level, text string
	switch to {
	case stateBackoff:
		level, text = "warning", fmt.Sprintf("server %q failed to start: %s", b.name, why)
		if from == stateReady {
			level, text = "warning", fmt.Sprintf("server %q crashed: %s", b.name, why)
		}
	case stateFailed:
		level, text = "error", fmt.Sprintf("server %q is failing, and its tools are unavailable: %s", b.name, why)
	case stateReady:
		n.mu.Lock()
		was := n.down[b.name]
		delete(n.down, b.name)
		n.mu.Unlock()
		if !was {
			return
		}
		level, text = "notice", fmt.Sprintf("server %q is back: ready, with %d tools", b.name, len(b.items(kindTool)))
	default: // starting, stopped by corral, idle: nothing is wrong
		if to != stateStarting {
			n.mu.Lock()
			delete(n.down, b.name)
			n.mu.Unlock()
		}
		return
	}
	n.mu.Lock()
	n.down[b.name] = true
	n.mu.Unlock()
	n.tell(nil, b.name, level, text+"; see the resource "+statusURI)
}

// tellDown tells session s, whose client has just finished its handshake,
// of each server that is down now: one that failed before the client
// came hears of it too.
func (n *serverNotices) tellDown(s *session) {
	now := n.status()
	for _, st := range now.Servers {
		level := ""
		switch st.State {
		case stateBackoff:
			level = "warning"
		case stateFailed:
			level = "error"
		default:
			continue
		}
		n.mu.Lock()
		n.down[st.Name] = true
		n.mu.Unlock()
		n.tell(s, st.Name, level, st.health.downLine(now.Time)+"; see the resource "+statusURI)
	}
}

// tell sends corral's log message text, of level, about server to the
// sessions that hear it (see the file's comment): to s alone if s is not
// nil.
func (n *serverNotices) tell(s *session, server, level, text string) {
	i := slices.Index(logLevels, level)
	params, _ := json.Marshal(struct {
		Level  string `json:"level"`
		Logger string `json:"logger"`
		Data   string `json:"data"`
	}{level, ownLogger, text})
	note, _ := encodeNotification("notifications/message", params)
	note = note[:len(note)-1]
	to := n.sessions.hearingCorral(i)
	for _, t := range to {
		if (s == nil || t == s) && n.visible(n.sessions.viewOf(t.who))(server) {
			t.send(note)
		}
	}
}

// statusFor returns corral://status as view v sees it: the status page's
// snapshot, with the servers v sees items of.
func (n *serverNotices) statusFor(v *view) gatewayStatus {
	st := n.status()
	sees := n.visible(v)
	st.Servers = slices.DeleteFunc(st.Servers, func(s serverStatus) bool { return !sees(s.Name) })
	return st
}

// readStatus answers resources/read of corral://status for view v.
func (n *serverNotices) readStatus(v *view) json.RawMessage {
	text, _ := json.MarshalIndent(n.statusFor(v), "", "  ")
	res, _ := json.Marshal(map[string]any{"contents": []map[string]string{
		{"uri": statusURI, "mimeType": "application/json", "text": string(text)},
	}})
	return res
}

// namesStatusURI reports whether params, those of a resources/read or
// resources/subscribe, name corral://status.
func namesStatusURI(params json.RawMessage) bool {
	if !bytes.Contains(params, []byte(statusURI)) {
		return false
	}
	var p struct {
		URI string `json:"uri"`
	}
	return json.Unmarshal(params, &p) == nil && p.URI == statusURI
}

// withStatusItem returns page, a page of resources/list answering params,
// with corral://status first in it when it is the first page.
func withStatusItem(page, params json.RawMessage) json.RawMessage {
	var p struct {
		Cursor string `json:"cursor"`
	}
	json.Unmarshal(params, &p)
	const head = `{"resources":[`
	if p.Cursor != "" || !bytes.HasPrefix(page, []byte(head)) {
		return page
	}
	out := make([]byte, 0, len(page)+len(statusItem)+1)
	out = append(out, head...)
	out = append(out, statusItem...)
	if rest := page[len(head):]; len(rest) > 0 && rest[0] != ']' {
		out = append(out, ',')
	}
	return append(out, page[len(head):]...)
}

// visibleServers returns which servers view v sees items of in cat: every
// server for a nil view.
func visibleServers(cat *catalog, v *view) func(string) bool {
	if v == nil {
		return func(string) bool { return true }
	}
	seen := map[string]bool{}
	for _, l := range cat.listsFor(v) {
		for _, it := range l.items {
			seen[it.backend.name] = true
		}
	}
	return func(name string) bool { return seen[name] }
}
