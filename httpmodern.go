package main

// This file holds what the HTTP front end does for 2026-07-28 clients beyond
// serving their requests (serveModern, in http.go): their notifications,
// and GET and DELETE, which the era removed.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// serveModernMessage serves a notification (or, wrongly, an answer) a
// modern client POSTs, with 202 Accepted as the specification says, or 400
// with the error (see checkModernNotification). It acts on none: in this
// era a request carries what its client offers, roots included, and on
// HTTP closing a request's stream is what cancels it. A
// notifications/cancelled names its request by a JSON-RPC ID alone, which
// another client may use as well (there is no session to tell them apart),
// so acting on it could cancel another client's call; the Go SDK, which
// sends one, also closes the request's stream, and that cancels the call.
func (h *httpFrontEnd) serveModernMessage(w http.ResponseWriter, r *http.Request, msg *wireMsg) {
	if werr := checkModernNotification(r.Header.Get, msg); werr != nil {
		writeJSONError(w, nil, werr)
		return
	}
	h.log.Debug("notification from a modern client accepted; nothing to do (closing a request's stream cancels it)", "method", msg.Method)
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

// checkParamHeaders checks the Mcp-Param headers of r, a modern client's
// request msg, against its arguments, for a tools/call of a tool that
// marks arguments with x-mcp-header in the view of who (see
// checkParamHeaders in paramheaders.go), and returns the error to answer
// with (400, -32020), or nil. Other methods have no parameter headers.
func (h *httpFrontEnd) checkParamHeaders(r *http.Request, who principal, msg *wireMsg) *wireError {
	if msg.Method != "tools/call" {
		return nil
	}
	var p struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	json.Unmarshal(msg.Params, &p)
	hs := h.gw.offer.paramHeaders(r.Context(), h.gw.viewOf(who), p.Name)
	if len(hs) == 0 {
		return nil
	}
	return checkParamHeaders(r.Header, p.Name, hs, p.Arguments)
}
