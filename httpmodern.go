package main

// This file holds what the HTTP front end does for 2026-07-28 clients beyond
// serving their requests (serveModern, in http.go): their notifications,
// a notifications/cancelled that names a call in flight by its ID alone, and
// GET and DELETE, which the era removed.

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
)

// modernCalls is the modern requests in flight over HTTP, by their raw
// JSON-RPC ID, so that a modern client's notifications/cancelled, which
// names its request by ID alone (it has no session), finds the call. Its
// zero value is empty and ready to use; its methods are safe for
// concurrent use. It holds one entry per modern request being served, so it
// is bounded by what the HTTP server serves at once.
type modernCalls struct {
	mu   sync.Mutex
	byID map[string][]*modernCall
}

// modernCall is one modern request in flight: the host it came from and the
// function that cancels it as closing its stream would.
type modernCall struct {
	from   string
	cancel context.CancelFunc
}

// add records that the modern request id from host from is in flight,
// cancelled by cancel, and returns the function that forgets it, to be
// called once when the request has been served.
func (mc *modernCalls) add(id, from string, cancel context.CancelFunc) (remove func()) {
	c := &modernCall{from: from, cancel: cancel}
	mc.mu.Lock()
	if mc.byID == nil {
		mc.byID = map[string][]*modernCall{}
	}
	mc.byID[id] = append(mc.byID[id], c)
	mc.mu.Unlock()
	return func() {
		mc.mu.Lock()
		defer mc.mu.Unlock()
		calls := mc.byID[id]
		for i, x := range calls {
			if x == c {
				calls = append(calls[:i], calls[i+1:]...)
				break
			}
		}
		if len(calls) == 0 {
			delete(mc.byID, id)
		} else {
			mc.byID[id] = calls
		}
	}
}

// find returns the cancel function of the one modern request in flight
// with ID id from host from, and how many there are: a match only when
// there is exactly one, for two clients on one host may well number their
// requests alike, and cancelling another client's call would be worse than
// cancelling none.
func (mc *modernCalls) find(id, from string) (context.CancelFunc, int) {
	mc.mu.Lock()
	defer mc.mu.Unlock()
	var found context.CancelFunc
	n := 0
	for _, c := range mc.byID[id] {
		if c.from == from {
			found = c.cancel
			n++
		}
	}
	if n != 1 {
		return nil, n
	}
	return found, n
}

// clientHost returns the host of the client that sent r, without its port:
// a client's notification may come on another connection than its request.
func clientHost(r *http.Request) string {
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return host
	}
	return r.RemoteAddr
}

// serveModernMessage serves a notification (or, wrongly, an answer) a
// modern client POSTs, with 202 Accepted as the specification says, or 400
// with the error (see checkModernNotification). A notifications/cancelled
// cancels the modern request it names, when exactly one from the same host
// is in flight (see modernCalls.find), as closing that request's stream
// would: the server hears of it, and the client gets no answer. Other
// notifications are accepted and ignored: in this era a request carries
// what its client offers, roots included.
func (h *httpFrontEnd) serveModernMessage(w http.ResponseWriter, r *http.Request, msg *wireMsg) {
	if werr := checkModernNotification(r.Header.Get, msg); werr != nil {
		writeJSONError(w, nil, werr)
		return
	}
	if heard(msg.Method).op == opCancel {
		var p struct {
			RequestID json.RawMessage `json:"requestId"`
		}
		json.Unmarshal(msg.Params, &p)
		id := strings.TrimSpace(string(p.RequestID))
		switch cancel, n := h.modern.find(id, clientHost(r)); n {
		case 1:
			cancel()
		case 0:
			h.log.Debug("notifications/cancelled from a modern client names no request in flight", "requestId", truncate(p.RequestID, 50))
		default:
			h.log.Info("notifications/cancelled from a modern client names a request ID that several requests from its host have in flight; none is cancelled (closing a request's stream cancels it)",
				"requestId", truncate(p.RequestID, 50), "host", clientHost(r), "count", n)
		}
	} else {
		h.log.Debug("notification from a modern client ignored", "method", msg.Method)
	}
	w.WriteHeader(http.StatusAccepted)
}

// refuseModernGetDelete answers 405 Method Not Allowed to a GET or DELETE
// that carries MCP-Protocol-Version: 2026-07-28, as that version's
// specification asks (the era has no sessions to end and no GET stream),
// and reports whether it did.
func refuseModernGetDelete(w http.ResponseWriter, r *http.Request) bool {
	if r.Method == http.MethodPost || strings.TrimSpace(r.Header.Get(versionHeader)) != modernVersion {
		return false
	}
	w.Header().Set("Allow", http.MethodPost)
	writeHTTPError(w, http.StatusMethodNotAllowed, codeInvalidRequest, fmt.Sprintf(
		"%s is not part of MCP %s, which has no sessions and no GET stream: POST each request; subscriptions/listen streams change notifications", r.Method, modernVersion))
	return true
}
