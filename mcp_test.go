package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// peer is an MCP client for tests, over either front end. It answers the
// requests servers send it through the gateway with answer, and keeps the
// notifications that do not belong to a request it made.
type peer struct {
	t      testing.TB
	name   string // "http" or "stdio"
	answer func(method string, params json.RawMessage) (any, *wireError)

	// notes receives the session's own stream: over HTTP the GET stream,
	// over stdio every notification.
	notes chan *wireMsg

	// HTTP
	url, sid string
	auth     string // the Authorization header it sends, if any

	// stdio
	in      io.Writer
	mu      sync.Mutex
	waiting map[string]chan *wireMsg
	related []*wireMsg // progress and requests since the last call began
}

// fullCaps are the capabilities of a client that offers everything.
const fullCaps = `{"sampling":{},"elicitation":{},"roots":{"listChanged":true}}`

// newHTTPPeer opens a session on the gateway at url, declaring caps, and
// its GET stream.
func newHTTPPeer(t testing.TB, url, caps string) *peer {
	t.Helper()
	return newHTTPPeerWith(t, url, caps, "")
}

// newHTTPPeerWith is newHTTPPeer sending auth as the Authorization header.
func newHTTPPeerWith(t testing.TB, url, caps, auth string) *peer {
	t.Helper()
	p := &peer{t: t, name: "http", url: url, auth: auth, notes: make(chan *wireMsg, 1000)}
	c := &client{t: t, url: url, auth: auth}
	resp, body := c.post(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":` + caps + `,"clientInfo":{"name":"test","version":"1"}}}`)
	if resp.StatusCode != 200 {
		t.Fatalf("initialize: %s %s", resp.Status, body)
	}
	p.sid = resp.Header.Get("Mcp-Session-Id")
	c.sid = p.sid
	c.post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", p.sid)
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	stream, err := http.DefaultClient.Do(req)
	if err != nil || stream.StatusCode != 200 {
		t.Fatalf("GET stream = %v, %v", stream, err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		readEvents(stream.Body, func(m *wireMsg) { p.notes <- m })
	}()
	t.Cleanup(func() { cancel(); stream.Body.Close(); <-done })
	return p
}

// newStdioPeer serves a stdio session of gw to a new peer declaring caps.
func newStdioPeer(t testing.TB, gw *Gateway, caps string) *peer {
	t.Helper()
	return newStdioPeerAs(t, gw, stdioPrincipal, caps, nil)
}

// newStdioPeerAnswering is newStdioPeer of a peer that answers the
// servers' requests with answer from the start, before its handshake ends.
func newStdioPeerAnswering(t testing.TB, gw *Gateway, caps string, answer func(method string, params json.RawMessage) (any, *wireError)) *peer {
	return newStdioPeerAs(t, gw, stdioPrincipal, caps, answer)
}

// newStdioPeerAs is newStdioPeerAnswering whose session is who's (-stdio
// -profile).
func newStdioPeerAs(t testing.TB, gw *Gateway, who principal, caps string, answer func(method string, params json.RawMessage) (any, *wireError)) *peer {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	p := &peer{t: t, name: "stdio", in: inW, notes: make(chan *wireMsg, 1000), waiting: map[string]chan *wireMsg{}, answer: answer}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan struct{})
	go func() {
		defer close(served)
		serveStdio(ctx, gw, who, inR, outW, 1<<20, time.Second, testLogger(t))
		outW.Close()
	}()
	read := make(chan struct{})
	go func() {
		defer close(read)
		r := bufio.NewReader(outR)
		for {
			line, err := r.ReadBytes('\n')
			if err != nil {
				return
			}
			var m wireMsg
			if json.Unmarshal(line, &m) != nil {
				t.Errorf("stdio: not JSON: %q", line)
				continue
			}
			p.dispatch(&m)
		}
	}()
	t.Cleanup(func() {
		cancel()
		inW.Close()
		<-served
		<-read
	})
	if m, _ := p.call("initialize", `{"protocolVersion":"2025-11-25","capabilities":`+caps+`,"clientInfo":{"name":"test","version":"1"}}`); m.Error != nil {
		t.Fatalf("initialize: %+v", m.Error)
	}
	p.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return p
}

// dispatch handles a message read from the stdio front end.
func (p *peer) dispatch(m *wireMsg) {
	switch {
	case m.Method != "" && m.ID != nil:
		p.mu.Lock()
		p.related = append(p.related, m)
		p.mu.Unlock()
		p.send(string(p.answerLine(m)))
	case m.Method == "notifications/progress":
		p.mu.Lock()
		p.related = append(p.related, m)
		p.mu.Unlock()
	case m.Method != "":
		p.notes <- m
	default:
		p.mu.Lock()
		c := p.waiting[string(m.ID)]
		delete(p.waiting, string(m.ID))
		p.mu.Unlock()
		if c == nil {
			p.t.Errorf("stdio: an answer to no request: %+v", m)
			return
		}
		c <- m
	}
}

// answerLine returns the peer's answer to a server's request.
func (p *peer) answerLine(m *wireMsg) []byte {
	var result any = map[string]any{}
	var werr *wireError
	if p.answer != nil {
		result, werr = p.answer(m.Method, m.Params)
	} else {
		werr = &wireError{Code: codeMethodNotFound, Message: "test peer answers nothing"}
	}
	if werr != nil {
		return encodeErrorResponse(m.ID, werr)
	}
	raw, _ := json.Marshal(result)
	var b strings.Builder
	resultReply(m.ID, raw).WriteTo(&b)
	return []byte(b.String())
}

func (p *peer) send(line string) {
	p.t.Helper()
	if p.name == "stdio" {
		if _, err := io.WriteString(p.in, line+"\n"); err != nil {
			p.t.Errorf("stdio write: %v", err)
		}
		return
	}
	c := &client{t: p.t, url: p.url, sid: p.sid, auth: p.auth}
	if resp, body := c.post(line); resp.StatusCode != 202 {
		p.t.Errorf("POST %s = %s %s, want 202", line, resp.Status, body)
	}
}

var peerIDs struct {
	sync.Mutex
	n int
}

// call sends a request and returns its answer and the messages related to
// it that came before the answer: over HTTP those on the request's own
// stream, over stdio the progress notifications and requests read before
// the answer (calls over stdio are made one at a time).
func (p *peer) call(method, params string) (*wireMsg, []*wireMsg) {
	p.t.Helper()
	peerIDs.Lock()
	peerIDs.n++
	id := fmt.Sprintf(`"r%d"`, peerIDs.n)
	peerIDs.Unlock()
	return p.callID(id, method, params)
}

func (p *peer) callID(id, method, params string) (*wireMsg, []*wireMsg) {
	p.t.Helper()
	line := fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":%q,"params":%s}`, id, method, params)
	if p.name == "stdio" {
		c := make(chan *wireMsg, 1)
		p.mu.Lock()
		p.waiting[id] = c
		p.related = nil
		p.mu.Unlock()
		p.send(line)
		select {
		case m := <-c:
			p.mu.Lock()
			defer p.mu.Unlock()
			return m, p.related
		case <-time.After(30 * time.Second):
			p.t.Fatalf("no answer to %s", line)
		}
	}
	req, _ := http.NewRequest("POST", p.url, strings.NewReader(line))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", p.sid)
	if p.auth != "" {
		req.Header.Set("Authorization", p.auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		p.t.Fatalf("POST %s: %v", line, err)
	}
	defer resp.Body.Close()
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		var m wireMsg
		if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
			p.t.Fatalf("%s: %s, not JSON: %v", method, resp.Status, err)
		}
		if string(m.ID) != id {
			p.t.Errorf("%s: answered under id %s, want the id sent, %s", method, m.ID, id)
		}
		return &m, nil
	}
	var answer *wireMsg
	var notes []*wireMsg
	readEvents(resp.Body, func(m *wireMsg) {
		switch {
		case answer != nil:
			p.t.Errorf("%s: a message after the answer: %+v", method, m)
		case m.Method != "" && m.ID != nil:
			p.send(string(p.answerLine(m)))
			notes = append(notes, m)
		case m.Method != "":
			notes = append(notes, m)
		default:
			answer = m
		}
	})
	if answer == nil {
		p.t.Fatalf("%s: the event stream ended without an answer", method)
	}
	if string(answer.ID) != id {
		p.t.Errorf("%s: answered under id %s, want the id sent, %s", method, answer.ID, id)
	}
	return answer, notes
}

// readEvents calls f with each message of a server-sent event stream.
func readEvents(r io.Reader, f func(*wireMsg)) {
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var m wireMsg
		if json.Unmarshal([]byte(data), &m) == nil {
			f(&m)
		}
	}
}

// next returns the next message of the session's own stream.
func (p *peer) next() *wireMsg {
	p.t.Helper()
	select {
	case m := <-p.notes:
		return m
	case <-time.After(30 * time.Second):
		p.t.Fatal("nothing on the session's stream")
		return nil
	}
}

// nextExcept returns the next message of the session's own stream whose
// method is not one of skip.
func (p *peer) nextExcept(skip ...string) *wireMsg {
	p.t.Helper()
	for {
		if m := p.next(); !slices.Contains(skip, m.Method) {
			return m
		}
	}
}

// result decodes a successful answer's result into v.
func result(t testing.TB, m *wireMsg, v any) {
	t.Helper()
	if m.Error != nil {
		t.Fatalf("error answer: %d %s", m.Error.Code, m.Error.Message)
	}
	if err := json.Unmarshal(m.Result, v); err != nil {
		t.Fatalf("result %s: %v", m.Result, err)
	}
}

// listAll lists every item of a list method through every page, and returns
// the values of member key.
func (p *peer) listAll(method, field, key string) []string {
	p.t.Helper()
	var out []string
	params := `{}`
	for range 100 {
		m, _ := p.call(method, params)
		var r map[string]json.RawMessage
		result(p.t, m, &r)
		var items []map[string]any
		json.Unmarshal(r[field], &items)
		for _, it := range items {
			out = append(out, fmt.Sprint(it[key]))
		}
		var next string
		json.Unmarshal(r["nextCursor"], &next)
		if next == "" {
			slices.Sort(out)
			return out
		}
		params = fmt.Sprintf(`{"cursor":%q}`, next)
	}
	p.t.Fatalf("%s never ended", method)
	return nil
}

// both runs f for a peer over HTTP and one over stdio of the same gateway.
func both(t *testing.T, tg *testGateway, caps string, f func(t *testing.T, p *peer)) {
	t.Run("http", func(t *testing.T) { f(t, newHTTPPeer(t, tg.url, caps)) })
	t.Run("stdio", func(t *testing.T) { f(t, newStdioPeer(t, tg.gw, caps)) })
}

// text returns the text of a result's first content item (tool) or of its
// first contents item (resource).
func text(t testing.TB, m *wireMsg) string {
	t.Helper()
	var r struct {
		Content  []struct{ Text string }
		Contents []struct{ Text string }
		Messages []struct {
			Content struct{ Text string }
		}
		IsError bool
	}
	result(t, m, &r)
	switch {
	case len(r.Content) > 0:
		return r.Content[0].Text
	case len(r.Contents) > 0:
		return r.Contents[0].Text
	case len(r.Messages) > 0:
		return r.Messages[0].Content.Text
	}
	t.Fatalf("no text in %s", m.Result)
	return ""
}

func TestResourcesPromptsAndCompletionsPassThroughWithPrefixes(t *testing.T) {
	t.Parallel()
	tg := startGateway(t, `{"mcpServers":{
		"a": {"command":"FAKE","args":["-state","STATE","-name","a"]},
		"b": {"command":"FAKE","args":["-state","STATE","-name","b"],"prefix":"bp"}
	}}`, func(g *Gateway) { g.offer.pageSize = 1 })
	both(t, tg, `{}`, func(t *testing.T, p *peer) {
		init, _ := p.call("initialize", `{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}`)
		var ir struct{ Capabilities map[string]any }
		result(t, init, &ir)
		want := map[string]any{
			"tools":       map[string]any{"listChanged": true},
			"prompts":     map[string]any{"listChanged": true},
			"resources":   map[string]any{"listChanged": true, "subscribe": true},
			"completions": map[string]any{},
			"logging":     map[string]any{},
		}
		if diff := cmp.Diff(want, ir.Capabilities); diff != "" {
			t.Errorf("capabilities (-want +got):\n%s", diff)
		}

		if diff := cmp.Diff([]string{"bp+fake://b/counter", "bp+fake://b/hello", statusURI, "fake://a/counter", "fake://a/hello"},
			p.listAll("resources/list", "resources", "uri")); diff != "" {
			t.Errorf("resources (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]string{"bp+fake://b/echo/{text}", "fake://a/echo/{text}"},
			p.listAll("resources/templates/list", "resourceTemplates", "uriTemplate")); diff != "" {
			t.Errorf("templates (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]string{"bp__greet", "greet"}, p.listAll("prompts/list", "prompts", "name")); diff != "" {
			t.Errorf("prompts (-want +got):\n%s", diff)
		}

		for uri, want := range map[string]string{
			"fake://a/hello":     "hello from a",
			"bp+fake://b/hello":  "hello from b",
			"fake://a/echo/xyz":  "xyz", // through a's template
			"bp+fake://b/echo/q": "q",
		} {
			m, _ := p.call("resources/read", fmt.Sprintf(`{"uri":%q}`, uri))
			if m.Error != nil {
				t.Errorf("read %s: %+v", uri, m.Error)
				continue
			}
			if got := text(t, m); got != want {
				t.Errorf("read %s = %q, want %q", uri, got, want)
			}
		}
		if m, _ := p.call("resources/read", `{"uri":"nowhere://x"}`); m.Error == nil || m.Error.Code != codeResourceNotFound {
			t.Errorf("read of an unknown URI = %+v, want error %d", m, codeResourceNotFound)
		}

		for name, want := range map[string]string{"greet": "Hello, W, from a", "bp__greet": "Hello, W, from b"} {
			m, _ := p.call("prompts/get", fmt.Sprintf(`{"name":%q,"arguments":{"who":"W"}}`, name))
			if got := text(t, m); got != want {
				t.Errorf("prompts/get %s = %q, want %q", name, got, want)
			}
		}
		if m, _ := p.call("prompts/get", `{"name":"nope"}`); m.Error == nil || m.Error.Code != codeInvalidParams {
			t.Errorf("prompts/get of an unknown prompt = %+v, want error %d", m, codeInvalidParams)
		}

		for _, c := range []struct{ ref, value string }{
			{`{"type":"ref/prompt","name":"greet"}`, `{"name":"who","value":"a"}`},
			{`{"type":"ref/prompt","name":"bp__greet"}`, `{"name":"who","value":"c"}`},
			{`{"type":"ref/resource","uri":"bp+fake://b/echo/{text}"}`, `{"name":"text","value":"t"}`},
		} {
			m, _ := p.call("completion/complete", fmt.Sprintf(`{"ref":%s,"argument":%s}`, c.ref, c.value))
			var r struct{ Completion struct{ Values []string } }
			result(t, m, &r)
			var want []string
			switch {
			case strings.Contains(c.value, `"a"`):
				want = []string{"alice"}
			case strings.Contains(c.value, `"c"`):
				want = []string{"carol"}
			default:
				want = []string{"three", "two"}
			}
			if diff := cmp.Diff(want, r.Completion.Values); diff != "" {
				t.Errorf("complete %s (-want +got):\n%s", c.ref, diff)
			}
		}
	})
}

func TestCollidingResourcesAndPromptsAreQualifiedByServer(t *testing.T) {
	t.Parallel()
	// Both servers call themselves x: every URI and the prompt collide.
	tg := startGateway(t, `{"mcpServers":{
		"a": {"command":"FAKE","args":["-state","STATE","-name","x"]},
		"b": {"command":"FAKE","args":["-state","STATE","-name","x","-capabilities","tools,resources,prompts"]}
	}}`)
	p := newHTTPPeer(t, tg.url, `{}`)
	if diff := cmp.Diff([]string{"a+fake://x/counter", "a+fake://x/hello", "b+fake://x/counter", "b+fake://x/hello", statusURI},
		p.listAll("resources/list", "resources", "uri")); diff != "" {
		t.Errorf("resources (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"a__greet", "b__greet"}, p.listAll("prompts/list", "prompts", "name")); diff != "" {
		t.Errorf("prompts (-want +got):\n%s", diff)
	}
	// Each read reaches its own server: the counter of b moves, a's not.
	if m, _ := p.call("tools/call", `{"name":"b__touch","arguments":{}}`); text(t, m) != "counter 1" {
		t.Errorf("b__touch = %s", m.Result)
	}
	for uri, want := range map[string]string{"a+fake://x/counter": "0", "b+fake://x/counter": "1", "b+fake://x/echo/hi": "hi"} {
		if m, _ := p.call("resources/read", fmt.Sprintf(`{"uri":%q}`, uri)); text(t, m) != want {
			t.Errorf("read %s = %s, want %q", uri, m.Result, want)
		}
	}
	// b offers no completions: asking it is an error, not a wrong answer.
	if m, _ := p.call("completion/complete", `{"ref":{"type":"ref/prompt","name":"b__greet"},"argument":{"name":"who","value":""}}`); m.Error == nil || !strings.Contains(m.Error.Message, `"b" does not offer completions`) {
		t.Errorf("completion from a server without completions = %+v", m)
	}
}

func TestProgressReachesOnlyItsCallerInOrderWithItsOwnToken(t *testing.T) {
	t.Parallel()
	tg := startGateway(t, `{"mcpServers":{"a": {"command":"FAKE","args":["-state","STATE","-name","a"]}}}`)
	both(t, tg, `{}`, func(t *testing.T, p *peer) {
		// Two callers use the same token at once; each must see only its own.
		other := newHTTPPeer(t, tg.url, `{}`)
		otherDone := make(chan []*wireMsg, 1)
		go func() {
			_, notes := other.call("tools/call", `{"name":"progress","arguments":{"steps":5,"delay_ms":5},"_meta":{"progressToken":"tok"}}`)
			otherDone <- notes
		}()
		for _, token := range []string{`"tok"`, `7`} {
			m, notes := p.call("tools/call", `{"name":"progress","arguments":{"steps":3,"delay_ms":5},"_meta":{"progressToken":`+token+`}}`)
			if got := text(t, m); got != "done 3" {
				t.Errorf("progress tool answered %q", got)
			}
			var got []string
			for _, n := range notes {
				var pp struct {
					Token    json.RawMessage `json:"progressToken"`
					Progress float64
					Total    float64
				}
				json.Unmarshal(n.Params, &pp)
				got = append(got, fmt.Sprintf("%s %s %v/%v", n.Method, pp.Token, pp.Progress, pp.Total))
			}
			want := []string{
				"notifications/progress " + token + " 1/3",
				"notifications/progress " + token + " 2/3",
				"notifications/progress " + token + " 3/3",
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("messages before the answer, token %s (-want +got):\n%s", token, diff)
			}
		}
		if notes := <-otherDone; len(notes) != 5 {
			t.Errorf("the other caller got %d messages, want its own 5 progress notifications", len(notes))
		}
		// The server saw corral's tokens, never the clients'.
		for _, st := range fakeProcesses(t, tg.dir) {
			for _, e := range fakeEvents(t, tg.dir, st.PID) {
				if e.Tool == "progress" && (string(e.ProgressToken) == `"tok"` || string(e.ProgressToken) == "7" && string(e.ID) != "7") {
					t.Errorf("the server got the client's token: %+v", e)
				}
			}
		}
	})
}

func TestClientCancellationReachesTheServerWithItsOwnID(t *testing.T) {
	t.Parallel()
	tg := startGateway(t, `{"mcpServers":{"a": {"command":"FAKE","args":["-state","STATE","-name","a"]}}}`)
	both(t, tg, `{}`, func(t *testing.T, p *peer) {
		id := `"cancel-` + p.name + `"`
		pid := fakeProcesses(t, tg.dir)[0].PID
		sleeps := func() []json.RawMessage {
			var ids []json.RawMessage
			for _, e := range fakeEvents(t, tg.dir, pid) {
				if e.Tool == "sleep" {
					ids = append(ids, e.ID)
				}
			}
			return ids
		}
		before := len(sleeps())
		call := `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"sleep","arguments":{"ms":60000}}}`
		answered := make(chan *wireMsg, 1)
		if p.name == "stdio" {
			// An answer would reach no request, which the peer reports.
			p.send(call)
		} else {
			go func() {
				m, _ := p.callID(id, "tools/call", `{"name":"sleep","arguments":{"ms":60000}}`)
				answered <- m
			}()
		}
		// Wait until the server has the call, then cancel it.
		var serverID json.RawMessage
		waitFor(t, 10*time.Second, "the server to get the sleep call", func() bool {
			if ids := sleeps(); len(ids) > before {
				serverID = ids[before]
			}
			return serverID != nil
		})
		p.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":` + id + `,"reason":"test"}}`)
		waitFor(t, 10*time.Second, "the server to hear of the cancellation", func() bool {
			for _, e := range fakeEvents(t, tg.dir, pid) {
				if e.Event == "cancelled" && string(e.RequestID) == string(serverID) {
					return true
				}
			}
			return false
		})
		if p.name == "stdio" {
			// A ping after the cancellation is answered, and nothing before it.
			if m, _ := p.call("ping", `{}`); m.Error != nil {
				t.Errorf("ping after the cancellation = %+v", m.Error)
			}
		} else {
			<-answered // an HTTP request must end somehow
		}
	})
}

func TestLogMessagesGoToTheSessionsThatAskedTaggedWithTheServer(t *testing.T) {
	t.Parallel()
	tg := startGateway(t, `{"mcpServers":{"a": {"command":"FAKE","args":["-state","STATE","-name","a"]}}}`)
	warn := newHTTPPeer(t, tg.url, `{}`)
	quiet := newStdioPeer(t, tg.gw, `{}`) // never asks
	if m, _ := warn.call("logging/setLevel", `{"level":"warning"}`); m.Error != nil {
		t.Fatalf("setLevel: %+v", m.Error)
	}
	if m, _ := warn.call("logging/setLevel", `{"level":"loud"}`); m.Error == nil || m.Error.Code != codeInvalidParams {
		t.Errorf("setLevel to an unknown level = %+v, want %d", m, codeInvalidParams)
	}
	pid := fakeProcesses(t, tg.dir)[0].PID
	waitFor(t, 10*time.Second, "the server to be asked for warning", func() bool {
		return slices.ContainsFunc(fakeEvents(t, tg.dir, pid), func(e fakeEvent) bool { return e.Event == "setLevel" && e.Level == "warning" })
	})
	// The server filters info itself now; error reaches the session that asked.
	if m, _ := quiet.call("tools/call", `{"name":"log","arguments":{"level":"info","data":"chatter"}}`); text(t, m) != "filtered" {
		t.Errorf("info log = %s, want filtered by the server", m.Result)
	}
	if m, _ := quiet.call("tools/call", `{"name":"log","arguments":{"level":"error","data":"boom"}}`); text(t, m) != "logged" {
		t.Errorf("error log = %s", m.Result)
	}
	m := warn.nextExcept(listChanged...)
	var lp struct{ Level, Logger, Data string }
	json.Unmarshal(m.Params, &lp)
	if m.Method != "notifications/message" || lp != (struct{ Level, Logger, Data string }{"error", "a/fake", "boom"}) {
		t.Errorf("the session that asked got %s %s, want the error message tagged a/fake", m.Method, m.Params)
	}
	// The quiet session got no log message: the next thing on its stream is
	// the update of a resource it subscribed to, which the server sent after.
	quiet.call("resources/subscribe", `{"uri":"fake://a/counter"}`)
	quiet.call("tools/call", `{"name":"touch","arguments":{}}`)
	if m := quiet.nextExcept(listChanged...); m.Method != "notifications/resources/updated" {
		t.Errorf("a session that never asked for log messages got %s %s", m.Method, m.Params)
	}
}

// listChanged are the notifications a session may get at any time.
var listChanged = []string{"notifications/tools/list_changed", "notifications/prompts/list_changed", "notifications/resources/list_changed"}

func TestServerRequestsReachTheSessionWhoseCallTheServerServes(t *testing.T) {
	t.Parallel()
	tg := startGateway(t, `{"mcpServers":{"a": {"command":"FAKE","args":["-state","STATE","-name","a"]}}}`)
	both(t, tg, fullCaps, func(t *testing.T, p *peer) {
		var asked []string
		p.answer = func(method string, params json.RawMessage) (any, *wireError) {
			asked = append(asked, method)
			switch method {
			case "sampling/createMessage":
				return map[string]any{"role": "assistant", "content": map[string]string{"type": "text", "text": "pong"}, "model": "test"}, nil
			case "elicitation/create":
				return map[string]any{"action": "accept", "content": map[string]string{"name": "ann"}}, nil
			case "roots/list":
				return map[string]any{"roots": []map[string]string{{"uri": "file:///tmp/r", "name": "r"}}}, nil
			}
			return nil, &wireError{Code: codeMethodNotFound, Message: method}
		}
		for _, c := range []struct{ tool, want string }{
			{"sample", "sampled: pong"},
			{"elicit", `elicited: {"action":"accept","content":{"name":"ann"}}`},
			{"roots", `roots: [{"name":"r","uri":"file:///tmp/r"}]`},
		} {
			tool, want := c.tool, c.want
			m, notes := p.call("tools/call", `{"name":"`+tool+`","arguments":{}}`)
			if got := text(t, m); got != want {
				t.Errorf("%s = %q, want %q", tool, got, want)
			}
			if p.name == "http" && len(notes) != 1 {
				t.Errorf("%s: the request's stream carried %d messages, want the server's request", tool, len(notes))
			}
		}
		if diff := cmp.Diff([]string{"sampling/createMessage", "elicitation/create", "roots/list"}, asked); diff != "" {
			t.Errorf("requests the client got (-want +got):\n%s", diff)
		}
	})
}

func TestServerRequestsAreRefusedWhenTheClientCannotBeToldOrDidNotOffer(t *testing.T) {
	t.Parallel()
	tg := startGateway(t, `{"mcpServers":{"a": {"command":"FAKE","args":["-state","STATE","-name","a"]}}}`)
	// A client that offers no sampling: the server gets an error, not the
	// client a request it cannot answer.
	bare := newHTTPPeer(t, tg.url, `{}`)
	bare.answer = func(method string, _ json.RawMessage) (any, *wireError) {
		t.Errorf("a client that did not offer sampling was asked %s", method)
		return nil, &wireError{Code: codeInternalError, Message: "no"}
	}
	m, _ := bare.call("tools/call", `{"name":"sample","arguments":{}}`)
	if got := text(t, m); !strings.Contains(got, "sampling failed: -32601") || !strings.Contains(got, "did not declare the sampling capability") {
		t.Errorf("sample without the capability = %q", got)
	}

	// Two sessions with calls in flight to the server: corral cannot tell
	// whose call the request belongs to.
	busy := newHTTPPeer(t, tg.url, fullCaps)
	sleeping := make(chan struct{})
	go func() {
		defer close(sleeping)
		busy.callID(`"long"`, "tools/call", `{"name":"sleep","arguments":{"ms":60000}}`)
	}()
	pid := fakeProcesses(t, tg.dir)[0].PID
	waitFor(t, 10*time.Second, "the sleep call to reach the server", func() bool {
		return slices.ContainsFunc(fakeEvents(t, tg.dir, pid), func(e fakeEvent) bool { return e.Tool == "sleep" })
	})
	asker := newHTTPPeer(t, tg.url, fullCaps)
	asker.answer = func(method string, _ json.RawMessage) (any, *wireError) {
		t.Errorf("corral guessed: it passed %s on although two sessions had calls in flight", method)
		return nil, &wireError{Code: codeInternalError, Message: "no"}
	}
	m, _ = asker.call("tools/call", `{"name":"sample","arguments":{}}`)
	if got := text(t, m); !strings.Contains(got, "sampling failed: -32603") || !strings.Contains(got, "requests of 2 clients are in flight") {
		t.Errorf("sample while two sessions call = %q", got)
	}
	busy.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"long"}}`)
	<-sleeping
}

func TestSubscriptionsReachOnlySubscribersAndTheServerHearsOnce(t *testing.T) {
	t.Parallel()
	tg := startGateway(t, `{"mcpServers":{"a": {"command":"FAKE","args":["-state","STATE","-name","a"],"prefix":"p"}}}`)
	sub1 := newHTTPPeer(t, tg.url, `{}`)
	sub2 := newStdioPeer(t, tg.gw, `{}`)
	other := newHTTPPeer(t, tg.url, `{}`)
	for _, p := range []*peer{sub1, sub2} {
		if m, _ := p.call("resources/subscribe", `{"uri":"p+fake://a/counter"}`); m.Error != nil {
			t.Fatalf("subscribe: %+v", m.Error)
		}
	}
	if m, _ := other.call("resources/subscribe", `{"uri":"p+fake://a/nothing-here"}`); m.Error != nil {
		t.Logf("subscribing to a URI the server lists not: %+v", m.Error) // the server decides
	}
	other.call("tools/call", `{"name":"p__touch","arguments":{}}`)
	for _, p := range []*peer{sub1, sub2} {
		m := p.nextExcept(listChanged...)
		if m.Method != "notifications/resources/updated" || !strings.Contains(string(m.Params), `"uri":"p+fake://a/counter"`) {
			t.Errorf("%s subscriber got %s %s, want resources/updated with the URI it used", p.name, m.Method, m.Params)
		}
	}
	// The one that did not subscribe got nothing: the next thing on its
	// stream is a log message the server sent after the update.
	other.call("logging/setLevel", `{"level":"debug"}`)
	other.call("tools/call", `{"name":"p__log","arguments":{}}`)
	if m := other.nextExcept(listChanged...); m.Method != "notifications/message" {
		t.Errorf("a session that did not subscribe got %s %s", m.Method, m.Params)
	}
	pid := fakeProcesses(t, tg.dir)[0].PID
	count := func(event string) int {
		n := 0
		for _, e := range fakeEvents(t, tg.dir, pid) {
			if e.Event == event && e.URI == "fake://a/counter" {
				n++
			}
		}
		return n
	}
	if n := count("subscribe"); n != 1 {
		t.Errorf("the server heard %d subscriptions to the counter, want 1", n)
	}
	sub1.call("resources/unsubscribe", `{"uri":"p+fake://a/counter"}`)
	if n := count("unsubscribe"); n != 0 {
		t.Errorf("the server heard of an unsubscription while a subscriber remains")
	}
	sub2.call("resources/unsubscribe", `{"uri":"p+fake://a/counter"}`)
	waitFor(t, 10*time.Second, "the server to hear the last subscriber leave", func() bool { return count("unsubscribe") == 1 })
}

// modernMeta returns the _meta of a modern request from a client with caps.
func modernMeta(caps string) string {
	return `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":` + caps + `,"io.modelcontextprotocol/clientInfo":{"name":"modern-test","version":"1"}}`
}

// modernPost sends a modern request over HTTP, with the headers the
// protocol asks for (changed by override: a name with an empty value is
// left out), and returns the status, the answer and the messages before it.
func modernPost(t *testing.T, url, method, params string, override ...string) (int, *wireMsg, []*wireMsg) {
	t.Helper()
	line := fmt.Sprintf(`{"jsonrpc":"2.0","id":"m1","method":%q,"params":%s}`, method, params)
	req, _ := http.NewRequest("POST", url, strings.NewReader(line))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", method)
	var p struct{ Name, URI string }
	json.Unmarshal([]byte(params), &p)
	if p.Name+p.URI != "" {
		req.Header.Set("Mcp-Name", p.Name+p.URI)
	}
	for i := 0; i+1 < len(override); i += 2 {
		if override[i+1] == "" {
			req.Header.Del(override[i])
		} else {
			req.Header.Set(override[i], override[i+1])
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.Header.Get("Mcp-Session-Id") != "" {
		t.Errorf("%s: a modern request got a session", method)
	}
	var answer *wireMsg
	var notes []*wireMsg
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		readEvents(resp.Body, func(m *wireMsg) {
			if m.Method != "" {
				notes = append(notes, m)
			} else {
				answer = m
			}
		})
	} else {
		answer = new(wireMsg)
		if err := json.NewDecoder(resp.Body).Decode(answer); err != nil {
			t.Fatalf("%s: %s, not JSON: %v", method, resp.Status, err)
		}
	}
	if answer == nil {
		t.Fatalf("%s: no answer", method)
	}
	return resp.StatusCode, answer, notes
}

func TestModernClientsAreServedStatelesslyAtTheSameEndpoint(t *testing.T) {
	t.Parallel()
	tg := startGateway(t, `{"mcpServers":{"a": {"command":"FAKE","args":["-state","STATE","-name","a","-instructions","Use echo."]}}}`)
	meta := modernMeta(`{}`)

	status, m, _ := modernPost(t, tg.url, "server/discover", `{`+meta+`}`)
	var d struct {
		SupportedVersions []string
		Capabilities      map[string]any
		ResultType        string
		TTLMs             *int `json:"ttlMs"`
		Instructions      string
		Meta              struct {
			ServerInfo struct{ Name string } `json:"io.modelcontextprotocol/serverInfo"`
		} `json:"_meta"`
	}
	result(t, m, &d)
	if status != 200 || d.ResultType != "complete" || d.SupportedVersions[0] != "2026-07-28" || d.Capabilities["tools"] == nil ||
		d.TTLMs == nil || *d.TTLMs != 0 || d.Meta.ServerInfo.Name != "corral" || d.Instructions != "Use echo." {
		t.Errorf("server/discover = %d %s, want versions, capabilities, cache fields, corral's identity and the server's instructions", status, m.Result)
	}
	// A forwarded cacheable result gets the cache fields too.
	_, m, _ = modernPost(t, tg.url, "resources/read", `{"uri":"fake://a/hello",`+meta+`}`)
	var rr struct {
		ResultType string
		TTLMs      *int `json:"ttlMs"`
		CacheScope string
	}
	if json.Unmarshal(m.Result, &rr) != nil || rr.ResultType != "complete" || rr.TTLMs == nil || *rr.TTLMs != 0 || rr.CacheScope != "private" {
		t.Errorf("resources/read = %s", m.Result)
	}
	// And so does corral's own resource (the official suite's caching
	// scenario reads the first resource listed: this one).
	_, m, _ = modernPost(t, tg.url, "resources/read", `{"uri":"corral://status",`+meta+`}`)
	rr.TTLMs, rr.CacheScope = nil, ""
	if json.Unmarshal(m.Result, &rr) != nil || rr.ResultType != "complete" || rr.TTLMs == nil || *rr.TTLMs != 0 || rr.CacheScope != "private" {
		t.Errorf("resources/read of corral://status = %s, want ttlMs 0 and cacheScope private", m.Result)
	}

	status, m, _ = modernPost(t, tg.url, "tools/call", `{"name":"echo","arguments":{"text":"hi"},`+meta+`}`)
	var r struct {
		ResultType string
		Content    []struct{ Text string }
	}
	result(t, m, &r)
	if status != 200 || r.ResultType != "complete" || len(r.Content) != 1 || r.Content[0].Text != "hi" {
		t.Errorf("tools/call = %d %s", status, m.Result)
	}
	status, m, _ = modernPost(t, tg.url, "tools/list", `{`+meta+`}`)
	if status != 200 || !strings.Contains(string(m.Result), `"resultType":"complete"`) || !strings.Contains(string(m.Result), `"ttlMs":0`) {
		t.Errorf("tools/list = %d %s", status, m.Result)
	}

	// Progress comes on the request's stream, with the client's token.
	status, m, notes := modernPost(t, tg.url, "tools/call", `{"name":"progress","arguments":{"steps":2},"_meta":{"progressToken":"pt","io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}`)
	if status != 200 || text(t, m) != "done 2" || len(notes) != 2 || !strings.Contains(string(notes[1].Params), `"progressToken":"pt"`) {
		t.Errorf("progress = %d %s, %d notes", status, m.Result, len(notes))
	}

	for _, c := range []struct {
		name, method, params string
		headers              []string
		status, code         int
	}{
		{"a Mcp-Method that disagrees", "tools/list", `{` + meta + `}`, []string{"Mcp-Method", "prompts/list"}, 400, codeHeaderMismatch},
		{"no Mcp-Name", "tools/call", `{"name":"echo",` + meta + `}`, []string{"Mcp-Name", ""}, 400, codeHeaderMismatch},
		{"a base64 Mcp-Name that agrees", "tools/call", `{"name":"echo","arguments":{"text":"b"},` + meta + `}`, []string{"Mcp-Name", "=?base64?ZWNobw==?="}, 200, 0},
		{"an unsupported version", "tools/list", `{"_meta":{"io.modelcontextprotocol/protocolVersion":"2099-01-01","io.modelcontextprotocol/clientCapabilities":{}}}`, []string{"MCP-Protocol-Version", "2099-01-01"}, 400, codeUnsupportedVersion},
		{"no client capabilities", "tools/list", `{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}`, nil, 400, codeInvalidParams},
		{"ping, which the era removed", "ping", `{` + meta + `}`, nil, 404, codeMethodNotFound},
		{"a modern header on a body without _meta", "tools/list", `{}`, nil, 400, codeInvalidParams},
		{"a header version that is not the body's", "tools/list", `{"_meta":{"io.modelcontextprotocol/protocolVersion":"2099-01-01","io.modelcontextprotocol/clientCapabilities":{}}}`, nil, 400, codeHeaderMismatch},
		{"initialize with modern _meta", "initialize", `{` + meta + `}`, nil, 404, codeMethodNotFound},
	} {
		status, m, _ := modernPost(t, tg.url, c.method, c.params, c.headers...)
		code := 0
		if m.Error != nil {
			code = m.Error.Code
		}
		if status != c.status || code != c.code || string(m.ID) != `"m1"` {
			t.Errorf("%s: %d %+v, want %d with code %d and the request's id", c.name, status, m.Error, c.status, c.code)
		}
		if c.code == codeUnsupportedVersion && !strings.Contains(string(m.Error.Data), `"supported":["2026-07-28"`) {
			t.Errorf("%s: data %s, want the supported versions", c.name, m.Error.Data)
		}
	}
	// A legacy session at the same endpoint is unaffected.
	if m, _ := newHTTPPeer(t, tg.url, `{}`).call("tools/call", `{"name":"echo","arguments":{"text":"old"}}`); text(t, m) != "old" {
		t.Errorf("legacy call = %s", m.Result)
	}
}

func TestModernClientAnswersALegacyServersRequestByInputRequired(t *testing.T) {
	t.Parallel()
	tg := startGateway(t, `{"mcpServers":{"a": {"command":"FAKE","args":["-state","STATE","-name","a"]}}}`)
	meta := modernMeta(`{"sampling":{}}`)
	status, m, _ := modernPost(t, tg.url, "tools/call", `{"name":"sample","arguments":{"prompt":"hi"},`+meta+`}`)
	var ir struct {
		ResultType    string
		InputRequests map[string]struct {
			Method string
			Params json.RawMessage
		}
		RequestState string
	}
	result(t, m, &ir)
	if status != 200 || ir.ResultType != "input_required" || len(ir.InputRequests) != 1 || ir.RequestState == "" {
		t.Fatalf("sample = %d %s, want input_required", status, m.Result)
	}
	var key string
	for k, in := range ir.InputRequests {
		key = k
		if in.Method != "sampling/createMessage" || !strings.Contains(string(in.Params), `"text":"hi"`) {
			t.Errorf("input request %s = %s %s", k, in.Method, in.Params)
		}
	}
	retry := fmt.Sprintf(`{"name":"sample","arguments":{"prompt":"hi"},"inputResponses":{%q:{"role":"assistant","content":{"type":"text","text":"pong"},"model":"m"}},"requestState":%q,%s}`, key, ir.RequestState, meta)
	status, m, _ = modernPost(t, tg.url, "tools/call", retry)
	if status != 200 || text(t, m) != "sampled: pong" {
		t.Errorf("retry = %d %s", status, m.Result)
	}
	// The state is spent.
	if status, m, _ = modernPost(t, tg.url, "tools/call", retry); status != 400 || m.Error == nil {
		t.Errorf("a second retry with the same state = %d %+v, want an error", status, m)
	}
	// roots/list has no params; an input request's params are an object.
	_, m, _ = modernPost(t, tg.url, "tools/call", `{"name":"roots","arguments":{},`+modernMeta(`{"roots":{}}`)+`}`)
	if !strings.Contains(string(m.Result), `"params":{}`) {
		t.Errorf("roots from a modern client = %s, want an input request with params {}", m.Result)
	}
	result(t, m, &ir)
	for key := range ir.InputRequests {
		retry := fmt.Sprintf(`{"name":"roots","arguments":{},"inputResponses":{%q:{"roots":[]}},"requestState":%q,%s}`, key, ir.RequestState, modernMeta(`{"roots":{}}`))
		if _, m, _ = modernPost(t, tg.url, "tools/call", retry); text(t, m) != "roots: []" {
			t.Errorf("roots after the answer = %s", m.Result)
		}
	}
	// A client without sampling: the server is refused, and says so.
	_, m, _ = modernPost(t, tg.url, "tools/call", `{"name":"sample","arguments":{},`+modernMeta(`{}`)+`}`)
	if got := text(t, m); !strings.Contains(got, "did not declare the sampling capability") {
		t.Errorf("sample from a client without sampling = %q", got)
	}
}

func TestModernRequestsOverStdio(t *testing.T) {
	t.Parallel()
	tg := startGateway(t, `{"mcpServers":{"a": {"command":"FAKE","args":["-state","STATE","-name","a"]}}}`)
	p := newStdioPeer(t, tg.gw, `{}`)
	meta := modernMeta(`{"elicitation":{}}`)
	if m, _ := p.call("server/discover", `{`+meta+`}`); !strings.Contains(string(m.Result), `"supportedVersions":["2026-07-28"`) {
		t.Errorf("server/discover = %s %+v", m.Result, m.Error)
	}
	m, _ := p.call("tools/call", `{"name":"elicit","arguments":{},`+meta+`}`)
	var ir struct {
		ResultType    string
		InputRequests map[string]json.RawMessage
		RequestState  string
	}
	result(t, m, &ir)
	if ir.ResultType != "input_required" || len(ir.InputRequests) != 1 {
		t.Fatalf("elicit = %s", m.Result)
	}
	for key := range ir.InputRequests {
		m, _ = p.call("tools/call", fmt.Sprintf(`{"name":"elicit","arguments":{},"inputResponses":{%q:{"action":"decline"}},"requestState":%q,%s}`, key, ir.RequestState, meta))
	}
	if got := text(t, m); got != `elicited: {"action":"decline"}` {
		t.Errorf("elicit after the answer = %q", got)
	}
}

func TestModernServersGetMetaAndTheirFeaturesReachClientsOfBothEras(t *testing.T) {
	t.Parallel()
	tg := startGateway(t, `{"mcpServers":{
		"new": {"command":"FAKE","args":["-state","STATE","-name","new","-era","modern"]},
		"old": {"command":"FAKE","args":["-state","STATE","-name","old"],"prefix":"old"}
	}}`)
	for _, b := range tg.gw.backendList() {
		if want := b.name == "new"; b.isModern() != want {
			t.Errorf("server %s: modern = %v, want %v", b.name, !want, want)
		}
	}
	legacy := newHTTPPeer(t, tg.url, fullCaps)
	legacy.answer = func(method string, _ json.RawMessage) (any, *wireError) {
		if method != "sampling/createMessage" {
			return nil, &wireError{Code: codeMethodNotFound, Message: method}
		}
		return map[string]any{"role": "assistant", "content": map[string]string{"type": "text", "text": "from legacy"}, "model": "m"}, nil
	}
	if m, _ := legacy.call("tools/call", `{"name":"echo","arguments":{"text":"x"}}`); text(t, m) != "x" {
		t.Errorf("echo on the modern server = %s", m.Result)
	}
	// The modern server asks for input with input_required; the legacy
	// client is asked with a request, and the server gets the answer.
	m, notes := legacy.call("tools/call", `{"name":"sample","arguments":{"prompt":"q"}}`)
	if got := text(t, m); got != "sampled: from legacy" || len(notes) != 1 || notes[0].Method != "sampling/createMessage" {
		t.Errorf("sample on the modern server from a legacy client = %q, messages %v", got, notes)
	}
	// Progress, and a resource of the modern server.
	if _, notes := legacy.call("tools/call", `{"name":"progress","arguments":{"steps":2},"_meta":{"progressToken":"p"}}`); len(notes) != 2 {
		t.Errorf("progress from the modern server: %d notifications, want 2", len(notes))
	}
	if m, _ := legacy.call("resources/read", `{"uri":"fake://new/hello"}`); text(t, m) != "hello from new" {
		t.Errorf("read from the modern server = %s %+v", m.Result, m.Error)
	}
	// A subscription reaches the modern server through its listen request,
	// and its update comes back.
	if m, _ := legacy.call("resources/subscribe", `{"uri":"fake://new/counter"}`); m.Error != nil {
		t.Fatalf("subscribe: %+v", m.Error)
	}
	pid := 0
	for _, st := range fakeProcesses(t, tg.dir) {
		if st.Name == "new" {
			pid = st.PID
		}
	}
	waitFor(t, 10*time.Second, "the modern server to listen for the counter", func() bool {
		return slices.ContainsFunc(fakeEvents(t, tg.dir, pid), func(e fakeEvent) bool {
			return e.Event == "listen" && slices.Contains(e.URIs, "fake://new/counter")
		})
	})
	legacy.call("tools/call", `{"name":"touch","arguments":{}}`)
	if m := legacy.nextExcept(listChanged...); m.Method != "notifications/resources/updated" || !strings.Contains(string(m.Params), `fake://new/counter`) {
		t.Errorf("after touch the subscriber got %s %s", m.Method, m.Params)
	}

	// A modern client: the server's input_required passes through as it is,
	// and the client's capabilities reach the server in _meta.
	meta := modernMeta(`{"sampling":{}}`)
	status, m, _ := modernPost(t, tg.url, "tools/call", `{"name":"sample","arguments":{},`+meta+`}`)
	var ir struct {
		ResultType   string
		RequestState string
	}
	result(t, m, &ir)
	if status != 200 || ir.ResultType != "input_required" || !strings.HasPrefix(ir.RequestState, "fake-state-") {
		t.Errorf("sample from a modern client = %d %s, want the server's own input_required", status, m.Result)
	}
	retry := fmt.Sprintf(`{"name":"sample","arguments":{},"inputResponses":{"in1":{"role":"assistant","content":{"type":"text","text":"modern"},"model":"m"}},"requestState":%q,%s}`, ir.RequestState, meta)
	if _, m, _ := modernPost(t, tg.url, "tools/call", retry); text(t, m) != "sampled: modern" {
		t.Errorf("retry = %s", m.Result)
	}
	var sawCaps bool
	for _, e := range fakeEvents(t, tg.dir, pid) {
		if e.Tool == "sample" && strings.Contains(string(e.Meta), `"io.modelcontextprotocol/clientCapabilities":{"sampling":{}}`) {
			sawCaps = true
		}
	}
	if !sawCaps {
		t.Errorf("the modern server never saw the client's capabilities in _meta")
	}
}

func TestServersThatDoNotAnswerTheProbeAreInitialized(t *testing.T) {
	t.Parallel()
	// A legacy server that ignores requests before initialize: the probe
	// times out and corral falls back, not keyed to an error code.
	tg := startGateway(t, `{"mcpServers":{"a": {"command":"/bin/sh","args":["-c","exec FAKE -state STATE -name a -ignore-method server/discover"]}}}`)
	p := newHTTPPeer(t, tg.url, `{}`)
	if m, _ := p.call("tools/call", `{"name":"echo","arguments":{"text":"late"}}`); text(t, m) != "late" {
		t.Errorf("echo = %s %+v", m.Result, m.Error)
	}
}

func TestModernListenCarriesListChangesAndSubscribedUpdates(t *testing.T) {
	t.Parallel()
	release := filepath.Join(t.TempDir(), "release")
	tg := startGatewayNoWait(t, `{"mcpServers":{
		"a": {"command":"FAKE","args":["-state","STATE","-name","a"]},
		"late": {"command":"/bin/sh","args":["-c","while [ ! -e `+release+` ]; do sleep 0.01; done; exec FAKE -state STATE -name late -prefix late_"]}
	}}`)
	<-tg.gw.backendList()[0].firstDone
	meta := modernMeta(`{}`)
	body := `{"jsonrpc":"2.0","id":"L","method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true,"resourceSubscriptions":["fake://a/counter"]},` + meta + `}}`
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", tg.url, strings.NewReader(body))
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "subscriptions/listen")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("listen = %v %v", resp, err)
	}
	defer resp.Body.Close()
	msgs := make(chan *wireMsg, 100)
	go readEvents(resp.Body, func(m *wireMsg) { msgs <- m })
	next := func() *wireMsg {
		t.Helper()
		select {
		case m := <-msgs:
			return m
		case <-time.After(30 * time.Second):
			t.Fatal("nothing on the listen stream")
			return nil
		}
	}
	if m := next(); m.Method != "notifications/subscriptions/acknowledged" ||
		!strings.Contains(string(m.Params), `"io.modelcontextprotocol/subscriptionId":"L"`) ||
		!strings.Contains(string(m.Params), `"resourceSubscriptions":["fake://a/counter"]`) {
		t.Fatalf("first message = %s %s, want the acknowledgement of what corral honours", m.Method, m.Params)
	}
	modernPost(t, tg.url, "tools/call", `{"name":"touch","arguments":{},`+meta+`}`)
	if m := next(); m.Method != "notifications/resources/updated" || !strings.Contains(string(m.Params), `"io.modelcontextprotocol/subscriptionId":"L"`) {
		t.Errorf("after touch: %s %s", m.Method, m.Params)
	}
	os.WriteFile(release, nil, 0o600) // the late server's tools join the list
	if m := next(); m.Method != "notifications/tools/list_changed" || !strings.Contains(string(m.Params), `"io.modelcontextprotocol/subscriptionId":"L"`) {
		t.Errorf("after the late server started: %s %s", m.Method, m.Params)
	}
	// Closing the stream ends the subscription: the server hears the last
	// subscriber leave.
	cancel()
	var pid int
	for _, st := range fakeProcesses(t, tg.dir) {
		if st.Name == "a" {
			pid = st.PID
		}
	}
	waitFor(t, 10*time.Second, "the server to hear the subscription end", func() bool {
		return slices.ContainsFunc(fakeEvents(t, tg.dir, pid), func(e fakeEvent) bool { return e.Event == "unsubscribe" })
	})
}

func TestRemoteServersAreBackendsLikeAnyOther(t *testing.T) {
	t.Parallel()
	// The remote server is another corral, guarded by a token, with
	// fakeserver behind it.
	token := filepath.Join(t.TempDir(), "token")
	os.WriteFile(token, []byte("up-token\n"), 0o600)
	up := startGateway(t, `{"authTokenFile":"`+token+`","mcpServers":{"a": {"command":"FAKE","args":["-state","STATE","-name","a"]}}}`)
	down := startGateway(t, `{"mcpServers":{
		"up": {"url":"`+up.url+`","headers":{"Authorization":"Bearer up-token"},"prefix":"up"},
		"nokey": {"url":"`+up.url+`","maxRestarts":1,"restartDelay":"10s"}
	}}`)
	p := newHTTPPeer(t, down.url, fullCaps)
	p.answer = func(method string, _ json.RawMessage) (any, *wireError) {
		return map[string]any{"role": "assistant", "content": map[string]string{"type": "text", "text": "two hops"}, "model": "m"}, nil
	}
	if m, _ := p.call("tools/call", `{"name":"up__echo","arguments":{"text":"far"}}`); text(t, m) != "far" {
		t.Errorf("echo through the remote server = %s %+v", m.Result, m.Error)
	}
	if _, notes := p.call("tools/call", `{"name":"up__progress","arguments":{"steps":3},"_meta":{"progressToken":"far"}}`); len(notes) != 3 {
		t.Errorf("progress through two gateways: %d notifications, want 3", len(notes))
	}
	if m, _ := p.call("tools/call", `{"name":"up__sample","arguments":{}}`); text(t, m) != "sampled: two hops" {
		t.Errorf("sampling through two gateways = %s", m.Result)
	}
	if m, _ := p.call("resources/read", `{"uri":"up+fake://a/hello"}`); text(t, m) != "hello from a" {
		t.Errorf("read through the remote server = %s %+v", m.Result, m.Error)
	}
	// Without the token the remote server refuses; the error says who and why.
	var h health
	for _, b := range down.gw.backendList() {
		if b.name == "nokey" {
			h = b.health()
		}
	}
	if h.State == stateReady || !strings.Contains(h.Error, "401") || !strings.Contains(h.Error, up.url) {
		t.Errorf("the server without the token: %+v, want not ready, with the 401 and the URL", h)
	}
}

func TestToolFiltersChooseWhatClientsSeeAndCall(t *testing.T) {
	t.Parallel()
	tg := startGateway(t, `{"mcpServers":{
		"a": {"command":"FAKE","args":["-state","STATE","-name","a"],"tools":{"allow":["echo","s*p*"],"deny":["sample"]}},
		"b": {"command":"FAKE","args":["-state","STATE","-name","b"],"prefix":"b","tools":{"deny":["*"]}}
	}}`)
	p := newHTTPPeer(t, tg.url, `{}`)
	// a: echo, and sleep matches s*p*; sample would, but is denied. b: none.
	if diff := cmp.Diff([]string{"echo", "sleep"}, p.listAll("tools/list", "tools", "name")); diff != "" {
		t.Errorf("tools (-want +got):\n%s", diff)
	}
	if m, _ := p.call("tools/call", `{"name":"sample","arguments":{}}`); m.Error == nil || m.Error.Code != codeInvalidParams {
		t.Errorf("calling a denied tool = %+v, want unknown tool", m)
	}
	// Filters are for tools: b's prompts are still there.
	if got := p.listAll("prompts/list", "prompts", "name"); !slices.Contains(got, "b__greet") {
		t.Errorf("prompts = %q, want b's", got)
	}
}

func TestGlobMatch(t *testing.T) {
	for _, c := range []struct {
		pattern, name string
		want          bool
	}{
		{"echo", "echo", true}, {"echo", "echo2", false}, {"*", "", true}, {"read_*", "read_file", true},
		{"read_*", "write_file", false}, {"*_file", "read_file", true}, {"a*b*c", "abc", true},
		{"a*b*c", "axxbyyc", true}, {"a*b*c", "acb", false}, {"a*a", "a", false}, {"**", "x", true},
	} {
		if got := globMatch(c.pattern, c.name); got != c.want {
			t.Errorf("globMatch(%q, %q) = %v, want %v", c.pattern, c.name, got, c.want)
		}
	}
}

func TestModernClientsGetLogMessagesOfTheirRequest(t *testing.T) {
	t.Parallel()
	tg := startGateway(t, `{"mcpServers":{
		"new": {"command":"FAKE","args":["-state","STATE","-name","new","-era","modern"]},
		"old": {"command":"FAKE","args":["-state","STATE","-name","old"],"prefix":"old"}
	}}`)
	for _, tool := range []string{"log", "old__log"} {
		params := `{"name":"` + tool + `","arguments":{"level":"error","data":"boom"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/logLevel":"warning"}}`
		status, m, notes := modernPost(t, tg.url, "tools/call", params)
		if status != 200 || text(t, m) != "logged" || len(notes) != 1 || notes[0].Method != "notifications/message" || !strings.Contains(string(notes[0].Params), `"data":"boom"`) {
			t.Errorf("%s with logLevel: %d %s, notes %v; want the log message on the request's stream", tool, status, m.Result, notes)
		}
	}
}
