package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// newPipeMux returns a mux whose server's stdin is an OS pipe, as a
// child's is, the pipe's read end, and the server's stdout to write
// answers to. writeLoop and readLoop run until the test ends.
func newPipeMux(t *testing.T, maxInFlight int) (m *mux, stdin *os.File, stdout *io.PipeWriter) {
	t.Helper()
	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stdoutR, stdoutW := io.Pipe()
	m = newMux("test", maxInFlight, slog.New(slog.DiscardHandler), nil)
	conn := newLineConn(stdoutR, stdinW, 1<<20, nil)
	if !conn.canTry() {
		t.Skip("an OS pipe is not in non-blocking mode here: callers cannot write to it themselves")
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); m.writeLoop(conn) }()
	go func() { defer wg.Done(); m.readLoop(conn) }()
	t.Cleanup(func() {
		m.close(errors.New("test over"))
		stdoutW.Close()
		stdinR.Close() // ends a write blocked on a full pipe
		wg.Wait()
		stdinW.Close()
	})
	return m, stdinR, stdoutW
}

// TestMuxWritesKeepEachMessageWholeAndInOrder has 16 goroutines queue 200
// messages each, some of 40 KB, so that the pipe fills, while the server reads
// slowly: callers write, coalesce, leave the rest to writeLoop when the
// pipe is full, and take over again. Every line arrives whole, once, and
// each goroutine's in the order it queued them.
func TestMuxWritesKeepEachMessageWholeAndInOrder(t *testing.T) {
	m, stdin, _ := newPipeMux(t, 64)
	const writers, each = 16, 200
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				pad := "x"
				if i%8 == w%8 {
					pad = strings.Repeat("x", 40<<10) // a few fill the pipe
				}
				line := fmt.Sprintf(`{"jsonrpc":"2.0","method":"n","params":{"w":%d,"i":%d,"pad":%q}}`+"\n", w, i, pad)
				if err := m.put(t.Context(), []byte(line), true); err != nil {
					t.Errorf("put: %v", err)
					return
				}
			}
		}()
	}
	next := make([]int, writers)
	br := bufio.NewReaderSize(stdin, 1024)
	for range writers * each {
		line, err := br.ReadBytes('\n')
		if err != nil {
			t.Fatalf("reading the server's stdin: %v", err)
		}
		var msg struct {
			Params struct{ W, I int }
		}
		if err := json.Unmarshal(line, &msg); err != nil {
			t.Fatalf("a line on the server's stdin is not a whole message: %.100q: %v", line, err)
		}
		if p := msg.Params; p.I != next[p.W] {
			t.Fatalf("writer %d's message %d arrived when %d was due", p.W, p.I, next[p.W])
		}
		next[msg.Params.W]++
	}
	wg.Wait()
}

// TestMuxServerThatStopsReadingHoldsUpNoCallerPastItsDeadline: a server
// that reads nothing from its stdin (its pipe full) neither blocks a caller
// past its deadline, nor the caller that started the write, nor the mux of
// another server; notifications past the queue's bound are refused, not
// kept.
func TestMuxServerThatStopsReadingHoldsUpNoCallerPastItsDeadline(t *testing.T) {
	stuck, _, _ := newPipeMux(t, 4)
	big := json.RawMessage(`{"pad":"` + strings.Repeat("x", 1<<20) + `"}`) // far more than a pipe holds

	for i := range 3 {
		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		start := time.Now()
		_, err := stuck.Call(ctx, "tools/call", big)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("call %d to a server that reads nothing = %v, want the deadline's error", i, err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("call %d to a server that reads nothing returned after %s, its deadline was 100ms", i, d)
		}
	}

	// The queue fills with notifications that wait for room: each waits
	// until its own context ends.
	for {
		ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
		err := stuck.Notify(ctx, "notifications/x", nil)
		cancel()
		if errors.Is(err, context.DeadlineExceeded) {
			break
		}
		if err != nil {
			t.Fatalf("Notify = %v, want nil or the deadline's error", err)
		}
	}
	if err := stuck.put(t.Context(), []byte("{}\n"), false); err != errOutboxFull {
		t.Fatalf("put without waiting on a full queue = %v, want %v", err, errOutboxFull)
	}

	// Another server's mux works all the while.
	other, stdin, stdout := newPipeMux(t, 4)
	go func() {
		br := bufio.NewReader(stdin)
		for {
			line, err := br.ReadBytes('\n')
			if err != nil {
				return
			}
			var msg wireMsg
			json.Unmarshal(line, &msg)
			io.WriteString(stdout, `{"jsonrpc":"2.0","id":`+string(msg.ID)+`,"result":{"ok":`+strconv.Quote(msg.Method)+"}}\n")
		}
	}()
	a, err := other.Call(t.Context(), "tools/list", nil)
	if err != nil || string(a.Result) != `{"ok":"tools/list"}` {
		t.Fatalf("a call to another server = %v, %v; want its answer", a, err)
	}
}

// TestMuxCallerWritesItsOwnRequest: with room in the pipe, a caller
// writes its request itself. No writeLoop runs here, so a request left to
// it would never reach the server.
func TestMuxCallerWritesItsOwnRequest(t *testing.T) {
	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdinW.Close()
	defer stdinR.Close()
	stdoutR, stdoutW := io.Pipe()
	conn := newLineConn(stdoutR, stdinW, 1<<20, nil)
	if !conn.canTry() {
		t.Skip("an OS pipe is not in non-blocking mode here: callers cannot write to it themselves")
	}
	m := newMux("test", 4, slog.New(slog.DiscardHandler), nil)
	m.out.conn, m.out.fast = conn, true // what writeLoop does first
	read := make(chan struct{})
	go func() { defer close(read); m.readLoop(conn) }()
	defer func() { stdoutW.Close(); <-read }()
	go func() {
		br := bufio.NewReader(stdinR)
		for {
			line, err := br.ReadBytes('\n')
			if err != nil {
				return
			}
			var msg wireMsg
			json.Unmarshal(line, &msg)
			io.WriteString(stdoutW, `{"jsonrpc":"2.0","id":`+string(msg.ID)+`,"result":{}}`+"\n")
		}
	}()
	for i := range 100 {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		_, err := m.Call(ctx, "ping", nil)
		cancel()
		if err != nil {
			t.Fatalf("call %d with no writeLoop running: %v, want its answer", i, err)
		}
	}
}

// halfWriter is a lineWriter whose stream takes half of the first write
// at once, while, at that very moment, another message is queued.
type halfWriter struct {
	m       *mux
	mu      sync.Mutex
	got     []byte
	tries   int
	written chan struct{} // gets a value after each WriteLines
}

func (w *halfWriter) canTry() bool { return true }

func (w *halfWriter) TryWriteLines(p []byte) (int, error) {
	w.mu.Lock()
	w.tries++
	first := w.tries == 1
	w.mu.Unlock()
	if !first {
		return w.take(p), nil
	}
	if err := w.m.put(context.Background(), []byte("second\n"), false); err != nil {
		return 0, err
	}
	return w.take(p[:len(p)/2]), nil
}

func (w *halfWriter) WriteLines(p []byte) error {
	w.take(p)
	w.written <- struct{}{}
	return nil
}

func (w *halfWriter) take(p []byte) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.got = append(w.got, p...)
	return len(p)
}

func (w *halfWriter) ReadMessage() ([]byte, error) { select {} }
func (w *halfWriter) WriteMessage([]byte) error    { return nil }
func (w *halfWriter) Close() error                 { return nil }

// TestMuxRestOfAPartialWriteGoesFirst: when the pipe takes only part of
// a write, its rest is written before what was queued meanwhile, by
// writeLoop.
func TestMuxRestOfAPartialWriteGoesFirst(t *testing.T) {
	m := newMux("test", 4, slog.New(slog.DiscardHandler), nil)
	w := &halfWriter{m: m, written: make(chan struct{}, 10)}
	m.out.conn, m.out.fast = w, true
	done := make(chan struct{})
	go func() { defer close(done); m.writeLoop(w) }()
	defer func() { m.close(errors.New("test over")); <-done }()
	if err := m.put(t.Context(), []byte("first line\n"), true); err != nil {
		t.Fatal(err)
	}
	<-w.written
	w.mu.Lock()
	got := string(w.got)
	w.mu.Unlock()
	if got != "first line\nsecond\n" {
		t.Errorf("the stream got %q, want %q", got, "first line\nsecond\n")
	}
}

// TestMuxReusedCallNeverGetsAnEarlierAnswer: calls are cancelled while
// their answers arrive, and the next call, which may reuse the cancelled
// one's pendingCall, gets its own answer, never the late one.
func TestMuxReusedCallNeverGetsAnEarlierAnswer(t *testing.T) {
	m, stdin, stdout := newPipeMux(t, 4)
	go func() {
		br := bufio.NewReader(stdin)
		for {
			line, err := br.ReadBytes('\n')
			if err != nil {
				return
			}
			var msg wireMsg
			if json.Unmarshal(line, &msg) != nil || msg.ID == nil {
				continue // a cancellation
			}
			io.WriteString(stdout, `{"jsonrpc":"2.0","id":`+string(msg.ID)+`,"result":`+string(msg.Params)+"}\n")
		}
	}()
	for i := range 300 {
		ctx, cancel := context.WithCancel(t.Context())
		late := make(chan struct{})
		go func() { defer close(late); m.Call(ctx, "tools/call", json.RawMessage(`{"n":-1}`)) }()
		if i%3 != 0 {
			runtime.Gosched()
		}
		cancel()
		<-late
		a, err := m.Call(t.Context(), "tools/call", json.RawMessage(`{"n":`+strconv.Itoa(i)+`}`))
		if err != nil {
			t.Fatal(err)
		}
		if want := `{"n":` + strconv.Itoa(i) + `}`; string(a.Result) != want {
			t.Fatalf("call %d got the answer %s, want %s", i, a.Result, want)
		}
	}
}

func TestSentIDReadsWhatParseIntReads(t *testing.T) {
	for _, raw := range []string{"1", "0", "-0", "007", "-12", "9223372036854775807", "9223372036854775808",
		"-9223372036854775807", "99999999999999999999", "", "-", "1.0", "1e3", `"1"`, "+1", " 1", "12a"} {
		got, ok := sentID([]byte(raw))
		want, err := strconv.ParseInt(raw, 10, 64)
		if raw == "+1" { // never in JSON: sentID need not read it
			want, err = 0, errors.New("not JSON")
		}
		if ok != (err == nil) || ok && got != want {
			t.Errorf("sentID(%q) = %d, %v; strconv.ParseInt says %d, %v", raw, got, ok, want, err)
		}
	}
}

func TestResultReplyWithALongIDIsWhole(t *testing.T) {
	for _, id := range []string{`1`, `"` + strings.Repeat("i", 100) + `"`} {
		var b strings.Builder
		r := resultReply(json.RawMessage(id), json.RawMessage(`{"x":1}`))
		r.WriteTo(&b)
		if want := `{"jsonrpc":"2.0","id":` + id + `,"result":{"x":1}}`; b.String() != want || r.len() != len(want) {
			t.Errorf("resultReply(%s) wrote %s (len %d), want %s", id, b.String(), r.len(), want)
		}
	}
}

// TestMuxCallToAServerWhoseStdinIsClosedFails: a caller's write to a pipe
// nobody reads any more (the server exited) fails the mux with the write's
// error, EPIPE, not the process with SIGPIPE. No writeLoop runs: the caller
// writes.
func TestMuxCallToAServerWhoseStdinIsClosedFails(t *testing.T) {
	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdinW.Close()
	stdinR.Close()
	conn := newLineConn(strings.NewReader(""), stdinW, 1<<20, nil)
	if !conn.canTry() {
		t.Skip("an OS pipe is not in non-blocking mode here: callers cannot write to it themselves")
	}
	m := newMux("test", 4, slog.New(slog.DiscardHandler), nil)
	m.out.conn, m.out.fast = conn, true // what writeLoop does first
	_, err = m.Call(t.Context(), "ping", nil)
	if err == nil || !strings.Contains(err.Error(), "stopped reading its stdin") || !strings.Contains(err.Error(), "broken pipe") {
		t.Fatalf("a call to a server whose stdin is closed = %v, want the mux closed for a broken pipe", err)
	}
}
