package conformance

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// The cases here check that a gateway passes MCP through, not only tools:
// progress, a server's requests to its client, resources and prompts, and
// cancellation.

// --- progress ---

// progressParams are the params of notifications/progress.
type progressParams struct {
	ProgressToken json.RawMessage `json:"progressToken"`
	Progress      float64         `json:"progress"`
	Total         float64         `json:"total"`
	Message       string          `json:"message"`
}

func TestProgressReachesOnlyItsCallerWithItsOwnToken(t *testing.T) {
	guarantee(t)
	// The same token in both sessions: only the gateway can tell whose
	// progress is whose. Each session asks for its own number of steps, and
	// the server says it in every notification (total, message), so that a
	// notification names the call it is about.
	const token = `1`
	g := startGateway(t, servers("prog"), options{}, "prog")
	type caller struct {
		name     string
		s        *session
		steps    int
		answer   string
		err      error
		atAnswer int // how many messages the session had received when the answer came
	}
	callers := []*caller{{name: "A", steps: 3}, {name: "B", steps: 5}}
	if adapter.Transport == "stdio" {
		t.Log("the gateway's stdio transport carries one session: one caller only")
		callers = callers[:1]
	}
	for _, c := range callers {
		c.s = g.newSession()
		c.s.listen(t)
	}
	var wg sync.WaitGroup
	for _, c := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			params := map[string]any{"name": toolName(t, "prog", "prog_progress"),
				"arguments": map[string]any{"steps": c.steps, "delay_ms": 100},
				"_meta":     map[string]any{"progressToken": json.RawMessage(token)}}
			var m *message
			m, c.err = c.s.request(ctxFor(t, 60*time.Second), `1`, "tools/call", params)
			c.atAnswer = len(c.s.in.all())
			if c.err == nil {
				c.answer, c.err = m.text()
			}
		}()
	}
	wg.Wait()
	for _, c := range callers {
		if want := fmt.Sprintf("done %d", c.steps); c.err != nil || c.answer != want {
			fatal(t, "session %s's call of progress answered %q, %v; want %q", c.name, c.answer, c.err, want)
		}
	}
	// Progress may come on the session's GET stream, whose order against
	// the answer (on the POST's stream) a client cannot see: wait a little
	// for it there.
	grace := ctxFor(t, 5*time.Second)
	for _, c := range callers {
		msgs, _ := c.s.in.await(grace, func(msgs []received) bool {
			return len(progressOf(msgs)) >= c.steps
		})
		var mine []string
		last := map[string]float64{} // by stream
		for i, r := range msgs {
			if r.Method != "notifications/progress" {
				continue
			}
			var p progressParams
			if err := json.Unmarshal(r.Params, &p); err != nil {
				fail(t, "session %s received notifications/progress with bad params: %s", c.name, truncate(r.data))
				continue
			}
			step := fmt.Sprintf("%g/%g", p.Progress, p.Total)
			switch {
			case int(p.Total) != c.steps || p.Message != fmt.Sprintf("step %g of %d", p.Progress, c.steps):
				fail(t, "session %s received another call's progress (%s): %s", c.name, step, truncate(r.data))
			case !sameID(p.ProgressToken, token):
				fail(t, "session %s received its progress %s with token %s, not its own %s", c.name, step, p.ProgressToken, token)
			case p.Progress <= last[r.stream]:
				fail(t, "session %s received progress %g after %g on the %s stream", c.name, p.Progress, last[r.stream], r.stream)
			case i >= c.atAnswer && r.stream != "GET":
				fail(t, "session %s received progress %s after the answer, on the %s stream", c.name, step, r.stream)
			default:
				mine = append(mine, fmt.Sprintf("%g", p.Progress))
				t.Logf("session %s: progress %s on the %s stream", c.name, step, r.stream)
			}
			if int(p.Total) == c.steps {
				last[r.stream] = p.Progress
			}
		}
		var want []string
		for i := 1; i <= c.steps; i++ {
			want = append(want, fmt.Sprint(i))
		}
		if strings.Join(mine, ",") != strings.Join(want, ",") {
			fail(t, "session %s received its progress %v, want %v, each once, in order%s", c.name, mine, want, tokensSeen(g.stateDir))
		}
	}
}

// tokensSeen says what progress tokens the server received, for failure
// messages: a gateway may not pass the token on at all.
func tokensSeen(dir string) string {
	var tokens []string
	for _, e := range allEvents(dir) {
		if e.Event == "request" && e.Tool == "prog_progress" {
			tok := string(e.ProgressToken)
			if tok == "" {
				tok = "none"
			}
			tokens = append(tokens, tok)
		}
	}
	return fmt.Sprintf(" (the server's requests carried progress tokens %v)", tokens)
}

func progressOf(msgs []received) []received {
	var out []received
	for _, r := range msgs {
		if r.Method == "notifications/progress" {
			out = append(out, r)
		}
	}
	return out
}

// --- requests of the server to its client ---

func TestSamplingRequestReachesTheCallingSessionAndItsAnswerTheServer(t *testing.T) {
	guarantee(t)
	const prompt, sampled = "conformance prompt", "conformance sample"
	g := startGateway(t, servers("asker"), options{}, "asker")
	caps := map[string]any{"sampling": map[string]any{}}
	caller := g.newSessionWith(caps)
	caller.listen(t)
	// A bystander that could answer too, but calls nothing: the request is
	// not its to see.
	var bystander *session
	if adapter.Transport != "stdio" {
		bystander = g.newSessionWith(caps)
		bystander.listen(t)
	}

	callCtx := ctxFor(t, 60*time.Second)
	ctx, callEnded := context.WithCancel(callCtx)
	var answer *message
	var callErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer callEnded()
		answer, callErr = caller.call(callCtx, `"sample"`, "asker", "sample", map[string]any{"prompt": prompt})
	}()
	isSampling := func(r received) bool { return r.Method == "sampling/createMessage" && len(r.ID) > 0 }
	msgs, ok := caller.in.await(ctx, func(msgs []received) bool {
		for _, r := range msgs {
			if isSampling(r) {
				return true
			}
		}
		return false
	})
	if !ok {
		<-done
		text, err := answer.textOr(callErr)
		what := fmt.Sprintf("%q, %v", text, err)
		fatal(t, "the calling session never received sampling/createMessage; the call answered %s", what)
	}
	var req received
	for _, r := range msgs {
		if isSampling(r) {
			req = r
			break
		}
	}
	t.Logf("sampling/createMessage came on the %s stream: %s", req.stream, truncate(req.data))
	var p struct {
		Messages []struct {
			Role    string `json:"role"`
			Content struct{ Type, Text string }
		} `json:"messages"`
	}
	if json.Unmarshal(req.Params, &p) != nil || len(p.Messages) != 1 || p.Messages[0].Content.Text != prompt || p.Messages[0].Role != "user" {
		fail(t, "sampling/createMessage reached the client as %s, want the server's request for %q", truncate(req.data), prompt)
	}
	reply := fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"role":"assistant","content":{"type":"text","text":%q},"model":"conformance","stopReason":"endTurn"}}`, req.ID, sampled)
	if err := caller.send([]byte(reply)); err != nil {
		fail(t, "answering sampling/createMessage: %v", err)
	}
	<-done
	text, err := answer.textOr(callErr)
	if want := "sampled: " + sampled; err != nil || text != want {
		fail(t, "after the client answered the sampling request, the call answered %q, %v; want %q", text, err, want)
	}
	if bystander != nil {
		for _, r := range bystander.in.all() {
			if r.Method == "sampling/createMessage" {
				fail(t, "a session that called nothing received the other session's sampling request on its %s stream", r.stream)
			}
		}
	}
	if n := len(samplingOf(caller.in.all())); n != 1 {
		fail(t, "the calling session received %d sampling requests for one sample call", n)
	}
}

func samplingOf(msgs []received) []received {
	var out []received
	for _, r := range msgs {
		if r.Method == "sampling/createMessage" {
			out = append(out, r)
		}
	}
	return out
}

// textOr is text for a message that may be missing because of err.
func (m *message) textOr(err error) (string, error) {
	if err != nil {
		return "", err
	}
	if m == nil {
		return "", fmt.Errorf("no answer")
	}
	return m.text()
}

// --- resources and prompts ---

func TestResourcesAndPromptsPassThrough(t *testing.T) {
	guarantee(t)
	res, prompts := adapter.supports("resources"), adapter.supports("prompts")
	if !res && !prompts {
		skip(t, "the adapter says the gateway serves neither resources nor prompts")
	}
	g := startGateway(t, servers("rp"), options{}, "rp")
	s := g.newSession()
	if res {
		checkResources(t, s, "rp")
	} else {
		t.Log("the adapter says the gateway serves no resources: prompts only")
	}
	if prompts {
		checkPrompts(t, s, "rp")
	} else {
		t.Log("the adapter says the gateway serves no prompts: resources only")
	}
}

// listAll lists every item of a list method through every page, as raw
// objects.
func listAll(t *testing.T, s *session, method, field string) ([]json.RawMessage, error) {
	var items []json.RawMessage
	params := map[string]any{}
	for range 100 {
		m, err := s.request(ctxFor(t, 30*time.Second), `"list"`, method, params)
		if err != nil {
			return nil, err
		}
		if m.Error != nil {
			return nil, fmt.Errorf("error %d: %s", m.Error.Code, m.Error.Message)
		}
		var r map[string]json.RawMessage
		var page []json.RawMessage
		if err := json.Unmarshal(m.Result, &r); err != nil || json.Unmarshal(r[field], &page) != nil {
			return nil, fmt.Errorf("result without %s: %s", field, truncate(m.Result))
		}
		items = append(items, page...)
		var next string
		json.Unmarshal(r["nextCursor"], &next)
		if next == "" {
			return items, nil
		}
		params = map[string]any{"cursor": next}
	}
	return nil, fmt.Errorf("the list never ended")
}

func checkResources(t *testing.T, s *session, server string) {
	items, err := listAll(t, s, "resources/list", "resources")
	if err != nil {
		fail(t, "resources/list: %v", err)
		return
	}
	hello := resourceURI(t, server, "fake://"+server+"/hello")
	counter := resourceURI(t, server, "fake://"+server+"/counter")
	found := map[string]bool{}
	var listed []string
	for _, raw := range items {
		var r struct{ URI, Name, MimeType string }
		json.Unmarshal(raw, &r)
		listed = append(listed, r.URI)
		switch r.URI {
		case hello:
			found[hello] = true
			if r.Name != "hello" || r.MimeType != "text/plain" {
				fail(t, "resources/list lists %s as %s, want the server's name hello and mimeType text/plain", hello, raw)
			}
		case counter:
			found[counter] = true
		}
	}
	for _, uri := range []string{hello, counter} {
		if !found[uri] {
			fail(t, "resources/list lacks %s (listed: %q)", uri, listed)
		}
	}

	m, err := s.request(ctxFor(t, 30*time.Second), `"read"`, "resources/read", map[string]any{"uri": hello})
	if err == nil && m.Error != nil {
		err = fmt.Errorf("error %d: %s", m.Error.Code, m.Error.Message)
	}
	if err != nil {
		fail(t, "resources/read %s: %v", hello, err)
		return
	}
	var r struct {
		Contents []struct{ URI, MimeType, Text string } `json:"contents"`
	}
	json.Unmarshal(m.Result, &r)
	want := "hello from " + server
	switch {
	case len(r.Contents) != 1 || r.Contents[0].Text != want || r.Contents[0].MimeType != "text/plain":
		fail(t, "resources/read %s answered %s, want one text/plain content %q", hello, truncate(m.Result), want)
	case r.Contents[0].URI != hello && r.Contents[0].URI != "fake://"+server+"/hello":
		// The URI the client asked for, or the server's own for it.
		fail(t, "resources/read %s answered contents of %s", hello, r.Contents[0].URI)
	}
}

func checkPrompts(t *testing.T, s *session, server string) {
	items, err := listAll(t, s, "prompts/list", "prompts")
	if err != nil {
		fail(t, "prompts/list: %v", err)
		return
	}
	greet := promptName(t, server, "greet")
	var listed []string
	found := false
	for _, raw := range items {
		var p struct {
			Name        string `json:"name"`
			Description string `json:"description"`
			Arguments   []struct {
				Name     string `json:"name"`
				Required bool   `json:"required"`
			} `json:"arguments"`
		}
		json.Unmarshal(raw, &p)
		listed = append(listed, p.Name)
		if p.Name != greet {
			continue
		}
		found = true
		if p.Description != "Greets someone." || len(p.Arguments) != 1 || p.Arguments[0].Name != "who" || !p.Arguments[0].Required {
			fail(t, "prompts/list lists %s as %s, want the server's description and its one required argument who", greet, raw)
		}
	}
	if !found {
		fail(t, "prompts/list lacks %s (listed: %q)", greet, listed)
		return
	}

	m, err := s.request(ctxFor(t, 30*time.Second), `"get"`, "prompts/get", map[string]any{"name": greet, "arguments": map[string]string{"who": "Ada"}})
	if err == nil && m.Error != nil {
		err = fmt.Errorf("error %d: %s", m.Error.Code, m.Error.Message)
	}
	if err != nil {
		fail(t, "prompts/get %s: %v", greet, err)
		return
	}
	var r struct {
		Description string `json:"description"`
		Messages    []struct {
			Role    string `json:"role"`
			Content struct{ Type, Text string }
		} `json:"messages"`
	}
	json.Unmarshal(m.Result, &r)
	want := "Hello, Ada, from " + server
	if r.Description != "greeting" || len(r.Messages) != 1 || r.Messages[0].Role != "user" ||
		r.Messages[0].Content.Type != "text" || r.Messages[0].Content.Text != want {
		fail(t, "prompts/get %s answered %s, want the server's greeting %q", greet, truncate(m.Result), want)
	}
}

// --- cancellation ---

func TestCancellationReachesTheServer(t *testing.T) {
	guarantee(t)
	g := startGateway(t, servers("cx"), options{}, "cx")
	// Two calls in flight, from two sessions with the same ID where the
	// transport has sessions; the client cancels one of them.
	a := g.newSession()
	b := a
	otherID := `2`
	if adapter.Transport != "stdio" {
		b, otherID = g.newSession(), `1`
	}
	// Both calls end when the test does, at the latest.
	sleepCtx, hangCtx := ctxFor(t, 60*time.Second), ctxFor(t, 60*time.Second)
	hangDone := make(chan struct{})
	go a.call(sleepCtx, `1`, "cx", "sleep", map[string]any{"ms": 600000})
	go func() {
		defer close(hangDone)
		b.call(hangCtx, otherID, "cx", "hang", map[string]any{})
	}()
	// A request as the server saw it: the process (a gateway may run one
	// per session) and the ID it had there.
	type serverRequest struct {
		pid int
		id  json.RawMessage
	}
	var sleepReq, hangReq *serverRequest
	deadline := time.Now().Add(10 * time.Second)
	for sleepReq == nil || hangReq == nil {
		for _, p := range serverStarts(g.stateDir, "cx") {
			for _, e := range events(g.stateDir, p.PID) {
				switch {
				case e.Event == "request" && e.Tool == "cx_sleep":
					sleepReq = &serverRequest{p.PID, e.ID}
				case e.Event == "request" && e.Tool == "cx_hang":
					hangReq = &serverRequest{p.PID, e.ID}
				}
			}
		}
		if time.Now().After(deadline) {
			fatal(t, "the calls of sleep and hang did not both reach the server within 10s")
		}
		time.Sleep(20 * time.Millisecond) // the server's records give no signal
	}
	if err := a.send([]byte(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1,"reason":"conformance: the client cancelled"}}`)); err != nil {
		fail(t, "sending notifications/cancelled: %v", err)
	}
	cancelled := func(r *serverRequest) bool {
		for _, e := range events(g.stateDir, r.pid) {
			if e.Event == "cancelled" && string(e.RequestID) == string(r.id) {
				return true
			}
		}
		return false
	}
	const within = 10 * time.Second
	for deadline := time.Now().Add(within); !cancelled(sleepReq); {
		if time.Now().After(deadline) {
			var got []string
			for _, e := range events(g.stateDir, sleepReq.pid) {
				if e.Event == "cancelled" {
					got = append(got, string(e.RequestID))
				}
			}
			fatal(t, "the server never received notifications/cancelled for its request %s (the cancelled call) within %s; it received cancellations for %q", sleepReq.id, within, got)
		}
		time.Sleep(20 * time.Millisecond) // the server's records give no signal
	}
	if cancelled(hangReq) {
		fail(t, "the server received notifications/cancelled for its request %s too, a call no client cancelled", hangReq.id)
	}
	select {
	case <-hangDone:
		fail(t, "the call no client cancelled ended when the other was cancelled")
	default:
	}
	if text, err := callText(t, a, "cx", "echo", map[string]any{"text": "after"}); err != nil || text != "after" {
		fail(t, "after the cancellation the gateway answered %q, %v", text, err)
	}
}
