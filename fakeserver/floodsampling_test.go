//go:build linux || darwin

package main

import (
	"encoding/json"
	"testing"
)

func TestFloodSamplingSendsEveryRequestAtOnceAndTalliesTheAnswers(t *testing.T) {
	p := start(t)
	p.initializeWith("2025-06-18", map[string]any{"sampling": map[string]any{}})

	// Every request is sent before any is answered; the tally counts
	// results and errors, and names the first error.
	p.callTool(1, "flood_sampling", map[string]any{"count": 3, "bytes": 4})
	var ids []json.RawMessage
	for range 3 {
		m := p.expectServerRequest("sampling/createMessage")
		ids = append(ids, m.ID)
	}
	p.respondError(ids[1], -32000, "too many")
	p.respond(ids[0], map[string]any{"content": map[string]any{"type": "text", "text": "a"}})
	p.respond(ids[2], map[string]any{"content": map[string]any{"type": "text", "text": "c"}})
	if got, want := p.expectText(1), "answered 3 of 3: 2 results, 1 errors; first error: -32000 too many"; got != want {
		t.Errorf("flood_sampling = %q, want %q", got, want)
	}

	// answers: the tool answers once that many have come.
	p.callTool(2, "flood_sampling", map[string]any{"count": 2, "answers": 1})
	m := p.expectServerRequest("sampling/createMessage")
	p.expectServerRequest("sampling/createMessage")
	p.respondError(m.ID, 1, "no")
	if got, want := p.expectText(2), "answered 1 of 2: 0 results, 1 errors; first error: 1 no"; got != want {
		t.Errorf("flood_sampling with answers 1 = %q, want %q", got, want)
	}

	// cancel: each request is followed by its cancellation.
	p.callTool(3, "flood_sampling", map[string]any{"count": 2, "cancel": true})
	a := p.expectServerRequest("sampling/createMessage")
	b := p.expectServerRequest("sampling/createMessage")
	for _, id := range []json.RawMessage{a.ID, b.ID} {
		n := p.expectNotification("notifications/cancelled")
		var params struct {
			RequestID json.RawMessage `json:"requestId"`
		}
		json.Unmarshal(n.Params, &params)
		if string(params.RequestID) != string(id) {
			t.Errorf("cancelled %s, want %s", params.RequestID, id)
		}
	}
	if got, want := p.expectText(3), "sent 2, cancelled 2"; got != want {
		t.Errorf("flood_sampling with cancel = %q, want %q", got, want)
	}
}
