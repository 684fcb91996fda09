//go:build linux || darwin

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// floodSampling sends count sampling/createMessage requests to the client in
// one write, without waiting between them, and answers a tally of the
// client's answers (see the package doc).
func (s *server) floodSampling(c *call, args json.RawMessage) {
	var a struct {
		Count   int  `json:"count"`
		Answers *int `json:"answers"`
		Bytes   int  `json:"bytes"`
		Cancel  bool `json:"cancel"`
	}
	if !decodeArgs(c, args, &a) || !nonNegative(c, "count", a.Count) || !nonNegative(c, "bytes", a.Bytes) {
		return
	}
	if c.modern != nil {
		c.fail(codeInvalidParams, "flood_sampling serves legacy requests only")
		return
	}
	want := a.Count
	if a.Answers != nil {
		want = min(max(*a.Answers, 0), a.Count)
	}
	prompt, _ := json.Marshal(strings.Repeat("x", a.Bytes))
	answers := make(chan message, a.Count) // each ID gets at most one: never blocks
	ids := make([]int64, a.Count)
	var buf bytes.Buffer
	s.mu.Lock()
	for i := range ids {
		s.lastID++
		ids[i] = s.lastID
		s.pending[ids[i]] = answers
		fmt.Fprintf(&buf, `{"jsonrpc":"2.0","id":%d,"method":"sampling/createMessage","params":{"messages":[{"role":"user","content":{"type":"text","text":%s}}],"maxTokens":1}}`+"\n", ids[i], prompt)
	}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		for _, id := range ids {
			delete(s.pending, id)
		}
		s.mu.Unlock()
	}()
	s.record(event{Event: "flood-sampling", Tool: c.tool, ID: json.RawMessage(strconv.Itoa(a.Count))})
	s.writeStdout(buf.Bytes())
	if a.Cancel {
		buf.Reset()
		for _, id := range ids {
			fmt.Fprintf(&buf, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":%d,"reason":"flood_sampling cancels its requests"}}`+"\n", id)
		}
		s.writeStdout(buf.Bytes())
		replyText(c, fmt.Sprintf("sent %d, cancelled %d", a.Count, a.Count))
		return
	}
	results, errs, first := 0, 0, ""
	t := time.NewTimer(clientTimeout)
	defer t.Stop()
	for results+errs < want {
		select {
		case m := <-answers:
			if m.Error == nil {
				results++
				continue
			}
			if errs++; first == "" {
				var e rpcError
				json.Unmarshal(m.Error, &e) // keep what could be decoded
				first = fmt.Sprintf("%d %s", e.Code, e.Message)
			}
		case <-t.C:
			want = 0 // answer what came
		case <-c.ctx.Done():
			return
		}
	}
	text := fmt.Sprintf("answered %d of %d: %d results, %d errors", results+errs, a.Count, results, errs)
	if first != "" {
		text += "; first error: " + first
	}
	replyText(c, text)
}
