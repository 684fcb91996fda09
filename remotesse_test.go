package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// startRemoteFake starts fakeserver serving HTTP in mode ("-http" or
// "-sse") at addr, with the extra flags, recording its state in dir, and
// returns the URL it serves at, read from its stdout. It is killed, and
// waited for, when the test ends, if stopFake has not done it before.
func startRemoteFake(t *testing.T, dir, mode, addr string, extra ...string) (string, *exec.Cmd) {
	t.Helper()
	cmd := exec.Command(fakeserverBin, fakeArgs(dir, append([]string{mode, addr}, extra...)...)...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &lockedBuffer{b: &stderr}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopFake(cmd) })
	// The first line is the URL; it comes once the port is bound, or the
	// process ends and the read fails.
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("fakeserver %s %s wrote no URL: %v; its stderr: %s", mode, addr, err, stderr.String())
	}
	return strings.TrimSpace(line), cmd
}

// stopFake kills cmd, if still running, and waits for it. It may be
// called more than once.
func stopFake(cmd *exec.Cmd) {
	if cmd.ProcessState == nil {
		cmd.Process.Kill()
		cmd.Wait()
	}
}

// lockedBuffer is a bytes.Buffer safe for concurrent writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  *bytes.Buffer
}

func (w *lockedBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *lockedBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// backendNamed returns tg's backend called name.
func backendNamed(t *testing.T, tg *testGateway, name string) *backend {
	t.Helper()
	for _, b := range tg.gw.backendList() {
		if b.name == name {
			return b
		}
	}
	t.Fatalf("no backend %q", name)
	return nil
}

func TestSSERemoteServerIsServedLikeAnyOther(t *testing.T) {
	t.Parallel()
	url, _ := startRemoteFake(t, stateDir(t), "-sse", "127.0.0.1:0", "-name", "far")
	tg := startGateway(t, `{"mcpServers":{"far":{"type":"sse","url":"`+url+`","prefix":"far","headers":{"X-Test":"1"}}}}`)
	if h := backendNamed(t, tg, "far").health(); h.State != stateReady {
		t.Fatalf("the SSE server: %+v, want ready", h)
	}
	p := newHTTPPeer(t, tg.url, fullCaps)
	p.answer = func(method string, _ json.RawMessage) (any, *wireError) {
		return map[string]any{"role": "assistant", "content": map[string]string{"type": "text", "text": "over sse"}, "model": "m"}, nil
	}
	if m, _ := p.call("tools/call", `{"name":"far__echo","arguments":{"text":"far away"}}`); text(t, m) != "far away" {
		t.Errorf("echo through the SSE server = %s %+v", m.Result, m.Error)
	}
	// Notifications, and the server's requests, come on its event stream;
	// the client's answer is posted back.
	if _, notes := p.call("tools/call", `{"name":"far__progress","arguments":{"steps":3},"_meta":{"progressToken":"p"}}`); len(notes) != 3 {
		t.Errorf("progress through the SSE server: %d notifications, want 3", len(notes))
	}
	if m, _ := p.call("tools/call", `{"name":"far__sample","arguments":{}}`); text(t, m) != "sampled: over sse" {
		t.Errorf("sampling through the SSE server = %s %+v", m.Result, m.Error)
	}
	if m, _ := p.call("resources/read", `{"uri":"far+fake://far/hello"}`); text(t, m) != "hello from far" {
		t.Errorf("read through the SSE server = %s %+v", m.Result, m.Error)
	}
}

func TestSSEServerThatIsStreamableHTTPSaysWhichTypeItHas(t *testing.T) {
	t.Parallel()
	url, _ := startRemoteFake(t, stateDir(t), "-http", "127.0.0.1:0")
	tg := startGateway(t, `{"restartDelay":"10s","mcpServers":{"wrong":{"type":"sse","url":"`+url+`"}}}`)
	h := backendNamed(t, tg, "wrong").health()
	if h.State == stateReady || !strings.Contains(h.Error, url) || !strings.Contains(h.Error, `its type is "http"`) {
		t.Errorf("a Streamable HTTP server configured as sse: %+v, want not ready, naming its URL and the type to give", h)
	}
}

func TestRemoteServerThatGoesAwayAndComesBackIsReconnected(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"sse", "http"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			dir := stateDir(t)
			remote, cmd := startRemoteFake(t, dir, "-"+mode, "127.0.0.1:0", "-name", "far")
			tg := startGateway(t, `{"restartDelay":"50ms","maxRestartDelay":"500ms","maxRestarts":1000,"mcpServers":{
				"far":{"type":"`+mode+`","url":"`+remote+`"}}}`)
			b := backendNamed(t, tg, "far")
			c := connect(t, tg.url)
			before := toolText(t, c.callTool("1", "whoami", `{}`))

			stopFake(cmd)
			// The same address, as a server restarted in place has; a new
			// process, which knows no session of the old one.
			u, _ := url.Parse(remote)
			startRemoteFake(t, dir, "-"+mode, u.Host, "-name", "far")
			waitReadyAgain(t, b, 60*time.Second)
			after := toolText(t, c.callTool("2", "whoami", `{}`))
			if after == before {
				t.Errorf("whoami after the remote server came back = %s, the process that went away", after)
			}
			if !strings.Contains(after, `"name":"far"`) {
				t.Errorf("whoami after the remote server came back = %s, want the new far", after)
			}
		})
	}
}

// waitReadyAgain waits, on b's own change signal, until b has been started
// again and is ready.
func waitReadyAgain(t *testing.T, b *backend, within time.Duration) {
	t.Helper()
	timeout := time.After(within)
	for {
		b.mu.Lock()
		state, restarts, changed, why := b.state, b.restarts, b.changed, b.lastErr
		b.mu.Unlock()
		if state == stateReady && restarts > 0 {
			return
		}
		select {
		case <-changed:
		case <-timeout:
			t.Fatalf("server %q is %s after %d restarts (%s), %s on; want it ready again", b.name, state, restarts, why, within)
		}
	}
}

func TestRemoteAnswersWithoutContentTypeAreReadAsJSONAndLoggedOnce(t *testing.T) {
	t.Parallel()
	remote, _ := startRemoteFake(t, stateDir(t), "-http", "127.0.0.1:0", "-no-content-type")
	var logged lockedBuffer
	logged.b = new(bytes.Buffer)
	log := slog.New(slog.NewTextHandler(io.MultiWriter(&logged, testWriter{t}), &slog.HandlerOptions{Level: slog.LevelDebug}))
	c := dialRemote("bare", remote, nil, nil, log.With("server", "bare"))
	m := remoteMux(t, c, nil, nil)
	remoteInit(t, m)
	ctx, cancel := context.WithTimeout(t.Context(), remoteCallTimeout)
	defer cancel()
	for i := range 3 {
		if got := toolText(t, muxCallTool(t, ctx, m, "echo", fmt.Sprintf(`{"text":"bare %d"}`, i))); got != fmt.Sprintf("bare %d", i) {
			t.Errorf("echo %d answered %q", i, got)
		}
	}
	var lines []string
	for line := range strings.SplitSeq(logged.String(), "\n") {
		if strings.Contains(line, "without a Content-Type") {
			lines = append(lines, line)
		}
	}
	if len(lines) != 1 || !strings.Contains(lines[0], "level=DEBUG") || !strings.Contains(lines[0], "server=bare") {
		t.Errorf("debug log lines about the missing Content-Type = %q, want one, naming the server", lines)
	}
}

func TestRemoteAnswerWithoutContentTypeThatIsNotJSONFailsItsCall(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header()["Content-Type"] = nil
		switch {
		case bytes.Contains(body, []byte(`"initialize"`)):
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2025-11-25","capabilities":{}}}`, rawID(body))
		case bytes.Contains(body, []byte(`"tools/call"`)):
			io.WriteString(w, "<html>an error page</html>")
		default:
			w.WriteHeader(http.StatusAccepted)
		}
	}))
	defer srv.Close()
	c := dialRemote("bare", srv.URL, nil, nil, testLogger(t))
	m := remoteMux(t, c, nil, nil)
	remoteInit(t, m)
	ctx, cancel := context.WithTimeout(t.Context(), remoteCallTimeout)
	defer cancel()
	a := muxCallTool(t, ctx, m, "echo", `{}`)
	if a.Error == nil || !strings.Contains(a.Error.Message, "without a Content-Type") || !strings.Contains(a.Error.Message, `"bare"`) {
		t.Errorf("a call answered without Content-Type by HTML = %+v, want an error naming the server and saying why", a.Error)
	}
}

// rawID returns the raw id of the JSON-RPC message body.
func rawID(body []byte) string {
	var m struct{ ID json.RawMessage }
	json.Unmarshal(body, &m)
	return string(m.ID)
}

// linkMux runs a mux on l as a backend does, closing it with l's error when
// l is over. When the test ends, l is closed and every goroutine joined.
func linkMux(t *testing.T, l remoteLink) *mux {
	t.Helper()
	m := newMux("remote", 100, testLogger(t), nil)
	var wg sync.WaitGroup
	wg.Add(3)
	go func() { defer wg.Done(); m.writeLoop(l) }()
	go func() { defer wg.Done(); m.readLoop(l) }()
	go func() {
		defer wg.Done()
		select {
		case <-l.Done():
			m.close(unavailable("%v", l.Err()))
		case <-m.done:
		}
	}()
	t.Cleanup(func() {
		l.Close()
		m.close(unavailable("the test is over"))
		wg.Wait()
	})
	return m
}

// sseServer is a scripted HTTP+SSE server: its stream sends endpoint as
// the endpoint event's data, then each message given to send; POSTs are
// answered by post (202 if nil), whose messages go on the stream.
type sseServer struct {
	*httptest.Server
	endpoint string
	out      chan string
	post     func(w http.ResponseWriter, msg []byte) []string
	opened   chan struct{} // gets a value when the stream opens
}

func newSSEServer(t *testing.T, endpoint string, post func(w http.ResponseWriter, msg []byte) []string) *sseServer {
	s := &sseServer{endpoint: endpoint, out: make(chan string, 100), post: post, opened: make(chan struct{}, 10)}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprintf(w, ": a comment first\n\nevent: endpoint\ndata: %s\n\n", s.endpoint)
			w.(http.Flusher).Flush()
			s.opened <- struct{}{}
			for {
				select {
				case ev := <-s.out:
					if ev == "" {
						return // the server ends the stream
					}
					io.WriteString(w, ev)
					w.(http.Flusher).Flush()
				case <-r.Context().Done():
					return
				}
			}
		}
		body, _ := io.ReadAll(r.Body)
		var msgs []string
		if s.post != nil {
			msgs = s.post(w, body)
		} else {
			w.WriteHeader(http.StatusAccepted)
		}
		for _, msg := range msgs {
			s.out <- "event: message\ndata: " + msg + "\n\n"
		}
	}))
	t.Cleanup(s.Close)
	return s
}

// echoAnswer answers a request by its method's name.
func echoAnswer(w http.ResponseWriter, msg []byte) []string {
	var m struct {
		ID     json.RawMessage
		Method string
	}
	json.Unmarshal(msg, &m)
	w.WriteHeader(http.StatusAccepted)
	if m.ID == nil {
		return nil
	}
	return []string{fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"method":%q}}`, m.ID, m.Method)}
}

func TestSSEConnPostsToTheEndpointRelativeToTheStream(t *testing.T) {
	t.Parallel()
	var posted []string
	var mu sync.Mutex
	srv := newSSEServer(t, "../messages?sessionId=s1", func(w http.ResponseWriter, msg []byte) []string {
		return echoAnswer(w, msg)
	})
	srv.Config.Handler = logPaths(srv.Config.Handler, &mu, &posted)
	c := newSSEConn(dialRemote("old", srv.URL+"/a/sse", map[string]string{"Authorization": "Bearer x"}, nil, testLogger(t)))
	m := linkMux(t, c)
	ctx, cancel := context.WithTimeout(t.Context(), remoteCallTimeout)
	defer cancel()
	a, err := boundedCall(ctx, m, "tools/list", nil)
	if err != nil || !strings.Contains(string(a.Result), "tools/list") {
		t.Fatalf("tools/list = %+v, %v", a, err)
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{"GET /a/sse Bearer x", "POST /messages?sessionId=s1 Bearer x"}
	if strings.Join(posted, "\n") != strings.Join(want, "\n") {
		t.Errorf("requests = %q, want %q", posted, want)
	}
}

// logPaths records the method, path and Authorization of every request to h.
func logPaths(h http.Handler, mu *sync.Mutex, paths *[]string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		*paths = append(*paths, r.Method+" "+r.URL.RequestURI()+" "+r.Header.Get("Authorization"))
		mu.Unlock()
		h.ServeHTTP(w, r)
	})
}

func TestSSEConnRefusesAnEndpointOfAnotherOrigin(t *testing.T) {
	t.Parallel()
	for _, endpoint := range []string{"https://evil.example/messages", "//evil.example/messages", "http://127.0.0.1:1/messages"} {
		srv := newSSEServer(t, endpoint, nil)
		c := newSSEConn(dialRemote("old", srv.URL+"/sse", nil, nil, testLogger(t)))
		m := linkMux(t, c)
		ctx, cancel := context.WithTimeout(t.Context(), remoteCallTimeout)
		a, err := boundedCall(ctx, m, "ping", nil)
		cancel()
		if err == nil {
			t.Errorf("endpoint %s: ping answered %+v, want the connection over", endpoint, a)
			continue
		}
		if e := c.Err(); e == nil || !strings.Contains(e.Error(), "another origin") || !strings.Contains(e.Error(), `server "old"`) {
			t.Errorf("endpoint %s: Err = %v, want it to name the server and refuse another origin", endpoint, e)
		}
	}
}

func TestSSEConnEndsWhenTheStreamEnds(t *testing.T) {
	t.Parallel()
	srv := newSSEServer(t, "/messages", echoAnswer)
	c := newSSEConn(dialRemote("old", srv.URL+"/sse", nil, nil, testLogger(t)))
	m := linkMux(t, c)
	ctx, cancel := context.WithTimeout(t.Context(), remoteCallTimeout)
	defer cancel()
	if _, err := boundedCall(ctx, m, "ping", nil); err != nil {
		t.Fatal(err)
	}
	srv.out <- "" // the server ends the stream
	select {
	case <-c.Done():
	case <-ctx.Done():
		t.Fatal("the connection is not over after the stream ended")
	}
	if err := c.Err(); err == nil || !strings.Contains(err.Error(), "ended its event stream") {
		t.Errorf("Err = %v, want it to say the stream ended", err)
	}
}

func TestSSEConnBoundsEventsAndFailsOnlyTheirRequest(t *testing.T) {
	t.Parallel()
	srv := newSSEServer(t, "/messages", func(w http.ResponseWriter, msg []byte) []string {
		msgs := echoAnswer(w, msg)
		if bytes.Contains(msg, []byte(`"big"`)) {
			msgs[0] = strings.Replace(msgs[0], `"method":"big"`, `"method":"big","pad":"`+strings.Repeat("x", 4096)+`"`, 1)
		}
		return msgs
	})
	c := newSSEConn(dialRemote("old", srv.URL+"/sse", nil, nil, testLogger(t)))
	c.rc.maxLine = 1024
	m := linkMux(t, c)
	ctx, cancel := context.WithTimeout(t.Context(), remoteCallTimeout)
	defer cancel()
	if a, err := boundedCall(ctx, m, "big", nil); err != nil || a.Error == nil || !strings.Contains(a.Error.Message, "1024") {
		t.Errorf("a request answered over maxLine = %+v, %v, want an error naming the limit", a, err)
	}
	if a, err := boundedCall(ctx, m, "small", nil); err != nil || !strings.Contains(string(a.Result), "small") {
		t.Errorf("the request after it = %+v, %v, want its answer", a, err)
	}

	// An endpoint event with more data than any URL has ends the connection.
	huge := newSSEServer(t, strings.Repeat("a", sseMaxNamedData+1), nil)
	hc := newSSEConn(dialRemote("old", huge.URL+"/sse", nil, nil, testLogger(t)))
	defer hc.Close()
	hc.WriteMessage([]byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`))
	<-hc.Done()
	if err := hc.Err(); err == nil || !strings.Contains(err.Error(), "endpoint") || !strings.Contains(err.Error(), "bytes") {
		t.Errorf("Err after an endpoint event of %d bytes = %v, want it to say it is too large", sseMaxNamedData+1, err)
	}
}

func TestSSEConnFailsARefusedPostAndGoesOn(t *testing.T) {
	t.Parallel()
	srv := newSSEServer(t, "/messages", func(w http.ResponseWriter, msg []byte) []string {
		if bytes.Contains(msg, []byte(`"refused"`)) {
			http.Error(w, "no such thing", http.StatusBadRequest)
			return nil
		}
		return echoAnswer(w, msg)
	})
	c := newSSEConn(dialRemote("old", srv.URL+"/sse", nil, nil, testLogger(t)))
	m := linkMux(t, c)
	ctx, cancel := context.WithTimeout(t.Context(), remoteCallTimeout)
	defer cancel()
	a, err := boundedCall(ctx, m, "refused", nil)
	if err != nil || a.Error == nil || !strings.Contains(a.Error.Message, "400") || !strings.Contains(a.Error.Message, "no such thing") {
		t.Errorf("a refused POST = %+v, %v, want an error with the status and the body", a, err)
	}
	if a, err := boundedCall(ctx, m, "next", nil); err != nil || !strings.Contains(string(a.Result), "next") {
		t.Errorf("the request after it = %+v, %v, want its answer", a, err)
	}
}

func TestSSEConnWithoutAnEndpointEventEndsClearly(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	defer srv.Close()
	c := newSSEConn(dialRemote("quiet", srv.URL+"/sse", nil, nil, testLogger(t)))
	c.endpointWait = 100 * time.Millisecond
	defer c.Close()
	if err := c.WriteMessage([]byte(`{"jsonrpc":"2.0","id":1,"method":"ping"}`)); err == nil || !strings.Contains(err.Error(), "no endpoint") {
		t.Errorf("WriteMessage with no endpoint event = %v, want an error saying so", err)
	}
}

// Not parallel: it counts every goroutine of remote.go and remotesse.go in
// the process.
func TestSSEConnCloseAbortsTheStreamAndThePostAndLeavesNoGoroutine(t *testing.T) {
	posted := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "event: endpoint\ndata: /messages\n\n")
			w.(http.Flusher).Flush()
		} else {
			io.ReadAll(r.Body) // so that the server sees the client go
			close(posted)
		}
		<-r.Context().Done() // neither the stream nor the POST ends on its own
	}))
	defer srv.Close()
	c := newSSEConn(dialRemote("old", srv.URL+"/sse", nil, nil, testLogger(t)))
	written := make(chan error, 1)
	go func() { written <- c.WriteMessage([]byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)) }()
	within(t, posted, "the server to receive the POST")
	if err := c.Close(); err != nil {
		t.Errorf("Close = %v", err)
	}
	within(t, written, "WriteMessage to return after Close")
	if err := c.WriteMessage([]byte(`{"jsonrpc":"2.0","method":"ping","id":1}`)); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("WriteMessage after Close = %v, want the connection's error", err)
	}
	if _, err := c.ReadMessage(); err != io.EOF {
		t.Errorf("ReadMessage after Close = %v, want io.EOF", err)
	}
	left := remoteGoroutines()
	buf := make([]byte, 1<<20)
	for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
		if strings.Contains(g, "main.(*sseConn)") {
			left = append(left, g)
		}
	}
	if len(left) > 0 {
		t.Errorf("%d goroutines of the connection are left after Close:\n%s", len(left), strings.Join(left, "\n\n"))
	}
}
