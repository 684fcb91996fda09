package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"regexp"
	"strings"
	"testing"
	"time"
)

// dialUnread opens a raw connection to the front end at url with a receive
// buffer of 4 KiB, POSTs body in session sid, and reads the status line of
// the answer, and no more: the answer is then being written, to a client
// that has stopped reading. The connection is closed when the test ends.
func dialUnread(t *testing.T, url, sid, body string) net.Conn {
	t.Helper()
	addr := strings.TrimPrefix(strings.TrimSuffix(url, mcpPath), "http://")
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	conn.(*net.TCPConn).SetReadBuffer(4096)
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nAccept: application/json\r\nMcp-Session-Id: %s\r\nContent-Length: %d\r\n\r\n%s",
		mcpPath, sid, len(body), body)
	conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	line, err := bufio.NewReaderSize(conn, 16).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "HTTP/1.1 200") {
		t.Fatalf("the answer to %s began %q, %v; want HTTP/1.1 200", body, line, err)
	}
	return conn
}

// A client that stops reading its answers holds them for at most
// writeTimeout: then its connection is closed, the log names its session,
// and the answer's bytes are released. Meanwhile they count against
// maxUnsentBytesPerSession: the session's new calls are refused with an
// error naming it.
func TestClientThatStopsReadingIsCutOffAndReleasesItsAnswers(t *testing.T) {
	t.Parallel()
	const writeTimeout = time.Second
	f := startSSEFront(t, `{"writeTimeout":"1s","maxUnsentBytesPerSession":1048576,
		"mcpServers":{"a": {"command":"FAKE","args":["-state","STATE"]}}}`, 0)
	url := f.base + mcpPath
	c := connect(t, url)
	// 8 MiB: more than the kernel's socket buffers take on loopback.
	dialUnread(t, url, c.sid, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"big","arguments":{"bytes":8388608}}}`)
	started := time.Now()

	refused := c.callTool("2", "echo", `{"text":"while unread"}`)
	if refused.Error == nil || !strings.Contains(refused.Error.Message, "maxUnsentBytesPerSession") {
		t.Errorf("a call while 8 MiB of the session's answers wait to be read answered %s %+v, want an error naming maxUnsentBytesPerSession", refused.Result, refused.Error)
	}

	line := f.log.wait(`did not read its answer within writeTimeout`)
	if !strings.Contains(line, "session="+c.sid) {
		t.Errorf("the log line %q does not name the session %s", line, c.sid)
	}
	if took := time.Since(started); took > writeTimeout+5*time.Second {
		t.Errorf("the unread answer was cut off after %v, want about writeTimeout (%v)", took, writeTimeout)
	}
	// The answer's bytes are released (before the log says so): the
	// session calls again.
	if count, bytes := f.h.sessionUnsent(c.sid); count != 0 || bytes != 0 {
		t.Errorf("after the cut the session holds %d answers of %d bytes, want none", count, bytes)
	}
	if got := toolText(t, c.callTool("3", "echo", `{"text":"after"}`)); got != "after" {
		t.Errorf("a call after the cut answered %q, want %q", got, "after")
	}
}

// An answer that would take the answers waiting to be read past a bound is
// replaced by an error naming it; an answer alone, or a small one (an
// error), is always held.
func TestHoldAnswerBounds(t *testing.T) {
	tests := []struct {
		name                string
		perSession, overall int64
		first, second       int
		wantRefused         string
	}{
		{name: "two answers within both bounds are both held", perSession: 20000, overall: 30000, first: 6000, second: 6000},
		{name: "an answer alone over the session's bound is held", perSession: 5000, overall: 30000, first: 6000},
		{name: "a second answer past the session's bound is dropped", perSession: 10000, overall: 30000, first: 6000, second: 6000, wantRefused: "maxUnsentBytesPerSession"},
		{name: "a second answer past the overall bound is dropped", perSession: 30000, overall: 10000, first: 6000, second: 6000, wantRefused: "maxUnsentBytes"},
		{name: "a small answer past the bounds is held", perSession: 5000, overall: 5000, first: 6000, second: smallAnswer},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := &Config{MaxUnsentBytesPerSession: tt.perSession, MaxUnsentBytes: tt.overall}
			g := newSessionSet(func() *Config { return cfg }, context.Background(), sessionHooks{})
			s := makeSession(nil, anonymousPrincipal)
			answer := func(n int) *reply { return &reply{head: []byte(strings.Repeat("x", n))} }
			_, n1, refused := g.holdAnswer(s, []byte("1"), answer(tt.first))
			if refused != "" {
				t.Fatalf("holdAnswer(first, %d bytes) refused by %s, want held", tt.first, refused)
			}
			if tt.second > 0 {
				held, n2, refused := g.holdAnswer(s, []byte("2"), answer(tt.second))
				if refused != tt.wantRefused {
					t.Errorf("holdAnswer(second) refused by %q, want %q", refused, tt.wantRefused)
				}
				if refused != "" && !regexp.MustCompile(`"id":2,"error".*`+tt.wantRefused).Match(held.head) {
					t.Errorf("holdAnswer(second) held %s, want an error for id 2 naming %s", held.head, tt.wantRefused)
				}
				g.releaseAnswer(s, n2)
			}
			if count, bytes := s.unsent(); count != 1 || bytes != n1 || g.unsent.load() != n1 {
				t.Errorf("after releasing the second: session holds %d answers of %d bytes, all %d bytes; want 1 of %d", count, bytes, g.unsent.load(), n1)
			}
			g.releaseAnswer(s, n1)
			if count, bytes := s.unsent(); count != 0 || bytes != 0 || g.unsent.load() != 0 {
				t.Errorf("after releasing both: session holds %d answers of %d bytes, all %d bytes; want none", count, bytes, g.unsent.load())
			}
		})
	}
}

// With -stdio, an answer the client has not read yet counts against
// maxUnsentBytesPerSession too: while a large one waits, a new call gets an
// error naming it.
func TestStdioClientThatStopsReadingHasNewCallsRefused(t *testing.T) {
	t.Parallel()
	tg := startGateway(t, `{"maxUnsentBytesPerSession":1048576,"mcpServers":{"a": {"command":"FAKE","args":["-state","STATE"]}}}`)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	served := make(chan struct{})
	go func() {
		defer close(served)
		serveStdio(t.Context(), tg.gw, stdioPrincipal, inR, outW, 64<<20, time.Second, testLogger(t))
	}()
	t.Cleanup(func() {
		inW.Close() // the client is gone: serveStdio ends its session
		go io.Copy(io.Discard, outR)
		<-served
	})
	io.WriteString(inW, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"big","arguments":{"bytes":8388608}}}`+"\n")
	// Nothing is read from the output: the 8 MiB answer waits.
	waitFor(t, 30*time.Second, "the answer to be held", func() bool { return tg.gw.sessions.unsent.load() >= 8<<20 })
	io.WriteString(inW, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"while unread"}}}`+"\n")
	br := bufio.NewReaderSize(outR, 1<<20)
	for range 2 {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		var m wireMsg
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("an answer is not JSON: %v", err)
		}
		if string(m.ID) == "2" && (m.Error == nil || !strings.Contains(m.Error.Message, "maxUnsentBytesPerSession")) {
			t.Errorf("a call while an 8 MiB answer waited to be read answered %s %+v, want an error naming maxUnsentBytesPerSession", m.Result, m.Error)
		}
	}
}
