package main

import (
	"encoding/json"
	"fmt"
)

// The eras at the edge. A client speaks one of two eras: legacy (MCP
// 2024-11-05 to 2025-11-25, where a session begins with initialize) or
// 2026-07-28 (modern.go: no session; each request carries its version and
// its client's capabilities in _meta). Where a message enters, its front
// end turns it into an inbound with inboundOf, and so decodes its era once;
// the gateway then serves every inbound with the same steps, and asks the
// inbound only what its era decides: which methods it is served (the
// table's eras, protocol.go), what a result says as it leaves for the
// client, and whose capabilities go with it to a server.

// inbound is one message from a client in corral's one internal form: the
// message and the era it came in. It is made once, where the message
// enters, and not changed after.
type inbound struct {
	msg *wireMsg
	era era // eraLegacy or eraModern, never both
	// caps and logLevel are what a modern request says of its client. A
	// legacy client said them once, at initialize: they are its session's.
	caps     capabilities
	logLevel string
}

// inboundOf returns msg in the internal form, with the era its params
// claim, or the error to answer a malformed modern request with. Only a
// request has an era of its own: a notification or an answer belongs to its
// session, which is legacy.
func inboundOf(msg *wireMsg) (*inbound, *wireError) {
	if msg.Method == "" || msg.ID == nil {
		return legacyInbound(msg), nil
	}
	in, werr := modernOf(msg)
	if werr != nil {
		return nil, werr
	}
	if in == nil {
		return legacyInbound(msg), nil
	}
	return in, nil
}

// legacyInbound returns msg, a message of a legacy session, in the internal
// form.
func legacyInbound(msg *wireMsg) *inbound { return &inbound{msg: msg, era: eraLegacy} }

// client returns the capabilities of the request's client and the least
// severe log level it wants, to go with the request to a server: the
// request's own in the modern era, else those s, its session, learned.
func (in *inbound) client(s *session) (capabilities, string) {
	if in.era == eraModern {
		return in.caps, in.logLevel
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.clientCaps, s.logLevel
}

// result returns the answer that carries result, shaped for the request's
// era as it leaves for the client: a legacy result goes as it is; a modern
// one gains what the era requires of every result (see completeReply).
// cacheable is the method's, from the table. The result is not copied.
func (in *inbound) result(result json.RawMessage, cacheable bool) *reply {
	if in.era == eraModern {
		return completeReply(in.msg.ID, result, cacheable)
	}
	return resultReply(in.msg.ID, result)
}

// ownMeta returns the _meta of a result corral makes itself for the request,
// or nil: the modern era names the server in every result.
func (in *inbound) ownMeta() json.RawMessage {
	if in.era != eraModern {
		return nil
	}
	meta, _ := json.Marshal(serverInfoMeta())
	return meta
}

// notServed returns the error that answers a request whose method corral
// does not serve in the request's era.
func (in *inbound) notServed() *wireError {
	if in.era == eraModern {
		return &wireError{Code: codeMethodNotFound, Message: fmt.Sprintf("method %q is not served to %s clients by corral", in.msg.Method, modernVersion)}
	}
	return &wireError{Code: codeMethodNotFound, Message: fmt.Sprintf("method %q is not supported by corral", in.msg.Method)}
}

// silencedByCancel reports whether a client that cancelled the request wants
// no answer to it whatever corral did with it. A legacy client wants none
// to a forwarded request only (see Gateway.serve); a modern one, to any.
func (in *inbound) silencedByCancel() bool { return in.era == eraModern }
