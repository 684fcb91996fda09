package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// muxWait bounds each wait of the mux tests, so that a broken mux fails the
// test that found it, saying what it waited for, instead of hanging until
// go test's timeout and losing every other result.
const muxWait = 10 * time.Second

// pipeServer plays the server end of a mux over in-memory pipes.
type pipeServer struct {
	stdin *os.File       // the read end of the server's stdin, for its deadline
	in    *bufio.Reader  // what the mux writes to the server's stdin
	out   *io.PipeWriter // what the mux reads as the server's stdout
}

// newTestMux returns a running mux and the server end of its pipes. The mux
// and its goroutines are stopped when the test ends. The server's stdin is
// an OS pipe, as a child's is, so that callers write to it themselves.
func newTestMux(t *testing.T, maxInFlight, maxLine int) (*mux, *pipeServer) {
	t.Helper()
	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stdoutR, stdoutW := io.Pipe()
	m := newMux("test", maxInFlight, slog.New(slog.DiscardHandler), nil)
	var wg sync.WaitGroup
	wg.Add(2)
	conn := newLineConn(stdoutR, stdinW, maxLine, nil)
	go func() { defer wg.Done(); m.writeLoop(conn) }()
	go func() { defer wg.Done(); m.readLoop(conn) }()
	t.Cleanup(func() {
		m.close(errors.New("test over"))
		stdoutW.Close()
		stdinR.Close()
		loops := make(chan struct{})
		go func() { wg.Wait(); close(loops) }()
		select {
		case <-loops:
		case <-time.After(muxWait):
			t.Errorf("the mux's reading and writing loops still run %s after it was closed and its pipes too", muxWait)
		}
		stdinW.Close()
	})
	return m, &pipeServer{stdin: stdinR, in: bufio.NewReader(stdinR), out: stdoutW}
}

// read returns the next message the mux sent.
func (s *pipeServer) read(t *testing.T) *wireMsg {
	t.Helper()
	s.stdin.SetReadDeadline(time.Now().Add(muxWait))
	line, err := s.in.ReadBytes('\n')
	if err != nil {
		t.Fatalf("reading what the mux sent, for at most %s: %v", muxWait, err)
	}
	var msg wireMsg
	if err := json.Unmarshal(line, &msg); err != nil {
		t.Fatalf("the mux sent a line that is not JSON: %q: %v", line, err)
	}
	return &msg
}

// write writes line as the server's, failing the test if the mux has not
// read it within muxWait (the test's cleanup then unblocks the write).
func (s *pipeServer) write(t *testing.T, line string) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		_, err := io.WriteString(s.out, line+"\n")
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("writing to the mux: %v", err)
		}
	case <-time.After(muxWait):
		t.Fatalf("the mux did not read what the server wrote within %s: %.100s", muxWait, line)
	}
}

type callResult struct {
	msg *wireMsg
	err error
}

// await returns the result of a call started by goCall, failing the test,
// with what, if it does not come within muxWait.
func await(t *testing.T, c <-chan callResult, what string) callResult {
	t.Helper()
	select {
	case r := <-c:
		return r
	case <-time.After(muxWait):
		t.Fatalf("%s: no result within %s", what, muxWait)
		return callResult{}
	}
}

// goCall starts a call and returns where its result will arrive.
func goCall(ctx context.Context, m *mux, method, params string) <-chan callResult {
	c := make(chan callResult, 1)
	go func() {
		msg, err := m.Call(ctx, method, json.RawMessage(params))
		c <- callResult{msg, err}
	}()
	return c
}

func TestMuxReturnsEachAnswerToItsCallerWhenAnsweredInReverseOrder(t *testing.T) {
	const n = 1000
	m, srv := newTestMux(t, n, 1<<20)
	results := make([]<-chan callResult, n)
	for i := range n {
		results[i] = goCall(t.Context(), m, "tools/call", fmt.Sprintf(`{"n":%d}`, i))
	}
	type req struct {
		id string
		n  int
	}
	var reqs []req
	seen := map[string]bool{}
	for range n {
		msg := srv.read(t)
		var p struct{ N int }
		json.Unmarshal(msg.Params, &p)
		if seen[string(msg.ID)] {
			t.Fatalf("the mux sent ID %s twice", msg.ID)
		}
		seen[string(msg.ID)] = true
		reqs = append(reqs, req{string(msg.ID), p.N})
	}
	for i := len(reqs) - 1; i >= 0; i-- {
		srv.write(t, fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"n":%d}}`, reqs[i].id, reqs[i].n))
	}
	for i, c := range results {
		r := <-c
		if r.err != nil {
			t.Fatalf("call %d: %v", i, r.err)
		}
		if want := fmt.Sprintf(`{"n":%d}`, i); string(r.msg.Result) != want {
			t.Fatalf("call %d got result %s, want %s", i, r.msg.Result, want)
		}
	}
}

func TestMuxCancelledCallSendsCancellationAndDropsTheLateAnswer(t *testing.T) {
	m, srv := newTestMux(t, 8, 1<<20)
	ctx, cancel := context.WithCancel(t.Context())
	first := goCall(ctx, m, "tools/call", `{"name":"hang"}`)
	req := srv.read(t)
	cancel()
	if r := await(t, first, "the cancelled call"); !errors.Is(r.err, context.Canceled) {
		t.Fatalf("cancelled call returned %v, %v; want context.Canceled", r.msg, r.err)
	}
	note := srv.read(t)
	var p struct {
		RequestID json.RawMessage `json:"requestId"`
	}
	json.Unmarshal(note.Params, &p)
	if note.Method != "notifications/cancelled" || string(p.RequestID) != string(req.ID) {
		t.Fatalf("after cancelling, the server got %s %s, want notifications/cancelled for request %s", note.Method, note.Params, req.ID)
	}

	// The late answer must not reach the next caller.
	second := goCall(t.Context(), m, "tools/call", `{"name":"echo"}`)
	req2 := srv.read(t)
	srv.write(t, fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":"late"}`, req.ID))
	srv.write(t, fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":"second"}`, req2.ID))
	if r := await(t, second, "the call after the cancelled one"); r.err != nil || string(r.msg.Result) != `"second"` {
		t.Fatalf("second call = %v, %v; want result \"second\"", r.msg, r.err)
	}
}

func TestMuxNeverCancelsInitialize(t *testing.T) {
	m, srv := newTestMux(t, 8, 1<<20)
	ctx, cancel := context.WithCancel(t.Context())
	init := goCall(ctx, m, "initialize", `{}`)
	srv.read(t)
	cancel()
	<-init
	// The next thing the server reads must be the ping, not a cancellation.
	ping := goCall(t.Context(), m, "ping", ``)
	if msg := srv.read(t); msg.Method != "ping" {
		t.Fatalf("after giving up on initialize the mux sent %s, want nothing before the ping", msg.Method)
	}
	m.close(errors.New("done"))
	<-ping
}

func TestMuxFailsEveryPendingCallAtOnceWhenClosed(t *testing.T) {
	m, srv := newTestMux(t, 8, 1<<20)
	var calls []<-chan callResult
	for range 3 {
		calls = append(calls, goCall(t.Context(), m, "tools/call", `{}`))
		srv.read(t)
	}
	exited := unavailable(`server "test" exited (exit status 3)`)
	m.close(exited)
	for i, c := range calls {
		if r := await(t, c, fmt.Sprintf("pending call %d after close", i)); r.err != exited {
			t.Errorf("pending call %d returned %v, want %v", i, r.err, exited)
		}
	}
	if r := await(t, goCall(t.Context(), m, "tools/call", `{}`), "a call after close"); r.err != exited {
		t.Errorf("call after close returned %v, want %v", r.err, exited)
	}
}

func TestMuxRefusesCallsPastItsInFlightLimit(t *testing.T) {
	m, srv := newTestMux(t, 2, 1<<20)
	a := goCall(t.Context(), m, "tools/call", `{}`)
	reqA := srv.read(t)
	b := goCall(t.Context(), m, "tools/call", `{}`)
	srv.read(t)

	_, err := m.Call(t.Context(), "tools/call", nil)
	var we *wireError
	if !errors.As(err, &we) || we.Code != codeUnavailable || !strings.Contains(we.Message, "maxInFlight") {
		t.Fatalf("third call past the limit of 2 returned %v, want a %d error naming maxInFlight", err, codeUnavailable)
	}
	srv.write(t, fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{}}`, reqA.ID))
	if r := <-a; r.err != nil {
		t.Fatal(r.err)
	}
	c := goCall(t.Context(), m, "tools/call", `{}`)
	reqC := srv.read(t)
	srv.write(t, fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{}}`, reqC.ID))
	if r := <-c; r.err != nil {
		t.Fatalf("call after a slot freed up: %v", r.err)
	}
	m.close(errors.New("done"))
	<-b
}

func TestMuxSkipsLinesThatAreNotJSONRPC(t *testing.T) {
	m, srv := newTestMux(t, 8, 1<<20)
	c := goCall(t.Context(), m, "tools/call", `{}`)
	req := srv.read(t)
	srv.write(t, "npm WARN this is not json")
	srv.write(t, `{"jsonrpc":"2.0"}`)
	srv.write(t, "")
	srv.write(t, fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"ok":true}}`, req.ID))
	if r := <-c; r.err != nil || string(r.msg.Result) != `{"ok":true}` {
		t.Fatalf("call after garbage lines = %v, %v; want its answer", r.msg, r.err)
	}
}

func TestMuxFailsTheRequestThatABrokenAnswerAnswers(t *testing.T) {
	m, srv := newTestMux(t, 8, 1<<20)
	broken := goCall(t.Context(), m, "tools/call", `{}`)
	reqBroken := srv.read(t)
	fine := goCall(t.Context(), m, "tools/call", `{}`)
	reqFine := srv.read(t)
	// Invalid JSON with the ID of a pending request: that request fails at
	// once, not at its deadline. A broken request of the server's own that
	// happens to carry the same ID is no answer, and fails nothing.
	srv.write(t, fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"roots/list",`, reqFine.ID))
	srv.write(t, fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"ok":tru}}`, reqBroken.ID))
	select {
	case r := <-broken:
		if r.err != nil || r.msg.Error == nil || !strings.Contains(r.msg.Error.Message, "not valid JSON-RPC") {
			t.Fatalf("call answered with broken JSON = %+v, %v; want an error saying so", r.msg, r.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the call answered with broken JSON still waits: it was not failed")
	}
	srv.write(t, fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{}}`, reqFine.ID))
	if r := <-fine; r.err != nil || r.msg.Error != nil {
		t.Fatalf("the other call = %+v, %v; want its answer", r.msg, r.err)
	}
}

func TestMuxFailsOnlyTheRequestThatATooLongLineAnswers(t *testing.T) {
	big := strings.Repeat("x", 4096)
	for _, tc := range []struct {
		name   string
		answer string // %s is the ID
	}{
		{"id before the result", `{"jsonrpc":"2.0","id":%s,"result":{"text":"` + big + `"}}`},
		{"id after the result", `{"jsonrpc":"2.0","result":{"text":"` + big + `","id":999},"id":%s}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, srv := newTestMux(t, 8, 1024)
			a := goCall(t.Context(), m, "tools/call", `{}`)
			reqA := srv.read(t)
			b := goCall(t.Context(), m, "tools/call", `{}`)
			reqB := srv.read(t)
			srv.write(t, fmt.Sprintf(tc.answer, reqA.ID))
			srv.write(t, fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{}}`, reqB.ID))
			ra := await(t, a, "the call answered by a line over the limit")
			if ra.err != nil || ra.msg.Error == nil || !strings.Contains(ra.msg.Error.Message, "maxLineBytes") {
				t.Errorf("call answered by a line over the limit = %+v, %v; want an error answer naming maxLineBytes", ra.msg, ra.err)
			}
			if rb := await(t, b, "the other call"); rb.err != nil || string(rb.msg.Result) != `{}` {
				t.Errorf("the other call = %v, %v; want its answer", rb.msg, rb.err)
			}
		})
	}
}

func TestMuxAnswersPingFromTheServer(t *testing.T) {
	_, srv := newTestMux(t, 8, 1<<20)
	srv.write(t, `{"jsonrpc":"2.0","id":"p1","method":"ping"}`)
	if got := srv.read(t); string(got.ID) != `"p1"` || string(got.Result) != `{}` {
		t.Fatalf("answer to the server's ping = %+v, want id \"p1\" and result {}", got)
	}
	srv.write(t, `{"jsonrpc":"2.0","id":7,"method":"sampling/createMessage","params":{}}`)
	if got := srv.read(t); string(got.ID) != `7` || got.Error == nil || got.Error.Code != codeMethodNotFound {
		t.Fatalf("answer to the server's sampling request = %+v, want a %d error", got, codeMethodNotFound)
	}
}

func TestMuxSendsParamsWithNewlinesOnOneLine(t *testing.T) {
	m, srv := newTestMux(t, 8, 1<<20)
	c := goCall(t.Context(), m, "tools/call", "{\n  \"name\": \"echo\",\n  \"arguments\": {\"text\": \"a\\nb\"}\n}")
	req := srv.read(t) // read fails the test if the request spans lines
	if want := `{"name":"echo","arguments":{"text":"a\nb"}}`; !sameJSON(req.Params, []byte(want)) {
		t.Fatalf("params sent = %s, want %s", req.Params, want)
	}
	m.close(errors.New("done"))
	<-c
}

func TestIDScannerFindsTheTopLevelID(t *testing.T) {
	for _, tc := range []struct {
		line, want string
	}{
		{`{"jsonrpc":"2.0","id":42,"result":{}}`, `42`},
		{`{"result":{"id":1,"x":[{"id":2}]},"id":-7}`, `-7`},
		{`{"id" : "a\"b,}" ,"result":1}`, `"a\"b,}"`},
		{`{"result":"the key \"id\": 5 in a string","id":9}`, `9`},
		{`{"method":"x"}`, ``},
		{`{"result":{"id":1}}`, ``},
		{`{"data":"id","id":3}`, `3`},
		// What is not a string or an integer cannot be echoed: an array or
		// object is cut at its first comma.
		{`{"id":[1,"error"],"method":"x"}`, ``},
		{`{"id":{"a":1,"b":2},"method":"x"}`, ``},
		{`{"id":1.5,"method":"x"}`, ``},
		{`{"id":1e999,"method":"x"}`, ``},
		{`{"id":true,"method":"x"}`, ``},
		{`{"id":null,"method":"x"}`, ``},
	} {
		t.Run(tc.line, func(t *testing.T) {
			// Feed it a byte at a time: pieces may split anywhere.
			var s idScanner
			for i := range len(tc.line) {
				s.feed([]byte{tc.line[i]})
			}
			if got := string(s.id()); got != tc.want {
				t.Errorf("idScanner on %s = %q, want %q", tc.line, got, tc.want)
			}
		})
	}
}

func TestLineReaderHonoursItsMaximum(t *testing.T) {
	long := strings.Repeat("y", 100<<10) // longer than the reader's buffer
	input := "short\r\n" + long + "\n" + `{"id":5,"x":"` + long + `"}` + "\nlast"
	lr := newLineReader(strings.NewReader(input), len(long))
	var got []string
	for {
		line, err := lr.next()
		var tooLong *lineTooLongError
		if errors.As(err, &tooLong) {
			got = append(got, "too long, id "+string(tooLong.id))
			continue
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%d bytes", len(line)))
	}
	want := []string{"5 bytes", fmt.Sprintf("%d bytes", len(long)), "too long, id 5", "4 bytes"}
	if strings.Join(got, "; ") != strings.Join(want, "; ") {
		t.Errorf("lines read = %q, want %q", got, want)
	}
}

func TestDecodeServerLineAgreesWithEncodingJSON(t *testing.T) {
	for _, line := range []string{
		`{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"a \"quoted\" }, ] text"}]}}`,
		` { "result" : [1, {"id": 9}, "x"] , "id" : "s\"7" , "jsonrpc" : "2.0" } `,
		`{"jsonrpc":"2.0","id":-3,"error":{"code":-32601,"message":"no","data":{"k":[true,null]}}}`,
		`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":0.5}}`,
		`{"jsonrpc":"2.0","id":1,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":1,"result":0}`,
		`{"jsonrpc":"2.0","id":1,"result":"\\\\"}`,
		`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse"}}`,
	} {
		t.Run(line, func(t *testing.T) {
			got, err := decodeServerLine([]byte(line))
			if err != nil {
				t.Fatal(err)
			}
			var want wireMsg
			if err := json.Unmarshal([]byte(line), &want); err != nil {
				t.Fatal(err)
			}
			if string(want.ID) == "null" {
				want.ID = nil
			}
			compact := func(b []byte) string {
				if b == nil {
					return "<nil>"
				}
				var buf bytes.Buffer
				json.Compact(&buf, b)
				return buf.String()
			}
			if compact(got.ID) != compact(want.ID) || got.Method != want.Method || compact(got.Params) != compact(want.Params) ||
				compact(got.Result) != compact(want.Result) || (got.Error == nil) != (want.Error == nil) ||
				(got.Error != nil && (got.Error.Code != want.Error.Code || got.Error.Message != want.Error.Message)) {
				t.Errorf("decodeServerLine = %+v, encoding/json = %+v", got, want)
			}
		})
	}
	for _, bad := range []string{`not json`, `{"id":1,`, `[1,2]`} {
		if msg, err := decodeServerLine([]byte(bad)); err == nil && msg.ID != nil {
			t.Errorf("decodeServerLine(%q) = %+v, want an error or nothing routable", bad, msg)
		}
	}
}
