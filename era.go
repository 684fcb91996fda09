package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// The eras at the edge. A client speaks one of two eras: legacy (MCP
// 2024-11-05 to 2025-11-25, where a session begins with initialize) or
// 2026-07-28 (modern.go: no session; each request carries its version and
// its client's capabilities in _meta). Where a message enters, its front
// end turns it into an inbound (router.go) with inboundOf, and so decodes
// its era once; the gateway then serves every inbound with the same steps
// and asks the era, through eraRules, only what differs: legacyEra here,
// modernEra in modern.go.

// inboundOf returns msg in the internal form, with the era its params
// claim, or the error to answer a malformed modern request with. Only a
// request has an era of its own: a notification or an answer belongs to its
// session, which is legacy. (Over HTTP, a modern client's notification has
// no session: the front end serves it, see serveModernMessage.)
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
func legacyInbound(msg *wireMsg) *inbound {
	return &inbound{msg: msg, era: eraLegacy, rules: legacyEra{}}
}

// legacyEra is the legacy era's eraRules. It holds nothing: a legacy
// client said what it offers once, at initialize, and its session keeps it.
type legacyEra struct{}

// result returns result as it is: a legacy result has nothing to add.
func (legacyEra) result(id, result json.RawMessage, _ cacheHints) *reply {
	return resultReply(id, result)
}

// ownMeta returns nil: a legacy result corral makes has no _meta.
func (legacyEra) ownMeta() json.RawMessage { return nil }

func (legacyEra) notServed(method string) *wireError {
	return &wireError{Code: codeMethodNotFound, Message: fmt.Sprintf("method %q is not supported by corral", method)}
}

// silencedByCancel is false: a legacy client that cancelled a request
// wants no answer to it only if corral forwarded it.
func (legacyEra) silencedByCancel() bool { return false }

// forward forwards a legacy client's request, with the capabilities and log
// level of its session, under requestTimeout. A modern server's requests
// for the client's input become requests to the client's session (see
// serverRequests.askClient). Ending ctx cancels the call, and the server's
// requests of the client still unanswered. It blocks until the call ends.
func (legacyEra) forward(ctx context.Context, fw *forwarder, f *forwarding) *reply {
	in, b, rel := f.in, f.b, f.rel
	rel.caps, rel.logLevel = rel.s.client()
	ctx, dl := armDeadline(ctx, in.cancel, f.timeout)
	defer dl.stop()
	defer func() {
		if ctx.Err() != nil {
			fw.requests.cancelAsked(rel) // before cancel, which would make every call look cancelled
		}
	}()
	start := time.Now()
	method := in.msg.Method
	answer, err := b.call(ctx, method, f.params, rel)
	// A modern server may ask for the client's input first; a legacy client
	// is asked with requests of its own era. Only a modern server's result
	// can be such a request, so a legacy server's answer is not scanned.
	for round := 0; err == nil && answer.Error == nil && b.isModern(); round++ {
		ir := asInputRequired(answer.Result)
		if ir == nil {
			break
		}
		if round == maxInputRounds {
			err = fmt.Errorf("server %q asked for input more than %d times in one request", b.name, maxInputRounds)
			break
		}
		var retry json.RawMessage
		if retry, err = fw.requests.askClient(ctx, rel, f.params, ir.InputRequests, ir.RequestState); err == nil {
			answer, err = b.call(ctx, method, retry, rel)
		}
	}
	return fw.answerReply(ctx, in, b, answer, err, f.timeout, start)
}
