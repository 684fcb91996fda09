//go:build linux

package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// binary is the fakeserver executable built by TestMain.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "fakeserver-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "fakeserver")
	if out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building fakeserver: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// timeout bounds every wait in these tests. It is an upper bound only, so
// generous: a 4 MiB echo under -race on a shared 2-core machine at a load
// average of 20 took more than 10 s.
const timeout = 30 * time.Second

// msg is a line the server wrote to stdout.
type msg struct {
	Line   string          `json:"-"`
	JSON   bool            `json:"-"` // whether Line is a JSON object
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
}

// proc is a running fakeserver.
type proc struct {
	t        *testing.T
	cmd      *exec.Cmd
	stdin    io.WriteCloser
	stateDir string
	msgs     chan msg      // closed at end of file on stdout
	stop     chan struct{} // closed when the test is over
	stderr   syncBuffer

	waitOnce sync.Once
	waitErr  error
}

// syncBuffer is a bytes.Buffer safe for concurrent use.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// start starts a fakeserver with the given flags, a state directory and a
// 120s lifetime (long enough for a loaded machine). Every process recorded in the state directory is killed
// when the test ends.
func start(t *testing.T, args ...string) *proc {
	t.Helper()
	p := &proc{
		t:        t,
		stateDir: t.TempDir(),
		msgs:     make(chan msg),
		stop:     make(chan struct{}),
	}
	args = append([]string{"-state", p.stateDir, "-lifetime", "120s"}, args...)
	p.cmd = exec.Command(binary, args...)
	p.cmd.Stderr = &p.stderr
	p.cmd.WaitDelay = timeout
	var err error
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	p.cmd.Stdout = w
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	go p.read(r)
	t.Cleanup(p.cleanup)
	return p
}

// read sends the lines of r to p.msgs until end of file or the end of the
// test.
func (p *proc) read(r *os.File) {
	defer r.Close()
	defer close(p.msgs)
	br := bufio.NewReader(r)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			m := msg{Line: string(line)}
			m.JSON = json.Unmarshal(line, &m) == nil
			select {
			case p.msgs <- m:
			case <-p.stop:
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// cleanup kills every process of the test and waits for the server.
func (p *proc) cleanup() {
	close(p.stop)
	for _, st := range readStates(p.t, p.stateDir) {
		if isFakeserver(st.PID) {
			syscall.Kill(st.PID, syscall.SIGKILL)
		}
	}
	p.cmd.Process.Kill()
	p.wait()
}

// isFakeserver reports whether pid is a live process running the binary.
func isFakeserver(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return false
	}
	arg0, _, _ := strings.Cut(string(b), "\x00")
	return arg0 == binary
}

// wait waits for the server to exit and returns its exit code.
func (p *proc) wait() int {
	p.waitOnce.Do(func() { p.waitErr = p.cmd.Wait() })
	var ee *exec.ExitError
	if p.waitErr != nil && !errors.As(p.waitErr, &ee) {
		p.t.Errorf("waiting for fakeserver: %v", p.waitErr)
	}
	return p.cmd.ProcessState.ExitCode()
}

// send writes v to the server's stdin as one line of JSON.
func (p *proc) send(v any) {
	p.t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		p.t.Fatal(err)
	}
	p.sendLine(string(b))
}

// sendLine writes line and a newline to the server's stdin.
func (p *proc) sendLine(line string) {
	p.t.Helper()
	if _, err := io.WriteString(p.stdin, line+"\n"); err != nil {
		p.t.Fatalf("writing to fakeserver: %v", err)
	}
}

// request sends a request.
func (p *proc) request(id any, method string, params any) {
	p.t.Helper()
	p.send(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

// callTool sends a tools/call request.
func (p *proc) callTool(id any, name string, args map[string]any) {
	p.t.Helper()
	p.request(id, "tools/call", map[string]any{"name": name, "arguments": args})
}

// next returns the next line written by the server. It fails the test if
// there is none.
func (p *proc) next() msg {
	p.t.Helper()
	select {
	case m, ok := <-p.msgs:
		if !ok {
			p.t.Fatalf("fakeserver closed stdout; stderr:\n%s", p.stderr.String())
		}
		return m
	case <-time.After(timeout):
		p.t.Fatalf("no message from fakeserver after %v", timeout)
	}
	panic("unreachable")
}

// expect returns the next line written by the server, failing the test if
// it is not a response to the request with the given id.
func (p *proc) expect(id any) msg {
	p.t.Helper()
	m := p.next()
	want, _ := json.Marshal(id)
	if !m.JSON || m.Method != "" || string(m.ID) != string(want) {
		p.t.Fatalf("got %q, want response to id %s", m.Line, want)
	}
	return m
}

// expectText returns the text of the tool result answering id.
func (p *proc) expectText(id any) string {
	p.t.Helper()
	text, isError := p.expectToolResult(id)
	if isError {
		p.t.Fatalf("id %v: error result %q", id, text)
	}
	return text
}

// expectToolResult returns the text of the tool result answering id, and
// whether it is flagged as an error.
func (p *proc) expectToolResult(id any) (text string, isError bool) {
	p.t.Helper()
	var r struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
		IsError bool `json:"isError"`
	}
	m := p.expectResult(id, &r)
	if len(r.Content) != 1 || r.Content[0].Type != "text" {
		p.t.Fatalf("id %v: unexpected result %s", id, m.Result)
	}
	return r.Content[0].Text, r.IsError
}

// expectResult decodes into v the result of the response answering id,
// which must not be an error, and returns the response.
func (p *proc) expectResult(id any, v any) msg {
	p.t.Helper()
	m := p.expect(id)
	if m.Error != nil {
		p.t.Fatalf("id %v: error %d %s", id, m.Error.Code, m.Error.Message)
	}
	if err := json.Unmarshal(m.Result, v); err != nil {
		p.t.Fatalf("id %v: %v in %s", id, err, m.Result)
	}
	return m
}

// expectError checks that the next line is an error answering id.
func (p *proc) expectError(id any, code int, message string) {
	p.t.Helper()
	m := p.expect(id)
	if m.Error == nil || m.Error.Code != code || m.Error.Message != message {
		p.t.Fatalf("got %q, want error %d %q", m.Line, code, message)
	}
}

// initialize performs the initialize handshake and returns the result.
func (p *proc) initialize(version string) initializeResult {
	p.t.Helper()
	return p.initializeWith(version, map[string]any{})
}

// initializeWith performs the initialize handshake, offering the given
// client capabilities, and returns the result.
func (p *proc) initializeWith(version string, caps map[string]any) initializeResult {
	p.t.Helper()
	p.request(0, "initialize", map[string]any{
		"protocolVersion": version,
		"capabilities":    caps,
		"clientInfo":      map[string]any{"name": "test", "version": "0"},
	})
	m := p.expect(0)
	var r initializeResult
	if err := json.Unmarshal(m.Result, &r); err != nil {
		p.t.Fatalf("initialize: %v in %q", err, m.Line)
	}
	p.send(map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"})
	return r
}

// drain reads the server's stdout to end of file and returns what it read.
func (p *proc) drain() []msg {
	p.t.Helper()
	var all []msg
	for {
		select {
		case m, ok := <-p.msgs:
			if !ok {
				return all
			}
			all = append(all, m)
		case <-time.After(timeout):
			p.t.Fatalf("fakeserver did not close stdout after %v", timeout)
		}
	}
}

// readStates reads the state files of dir.
func readStates(t *testing.T, dir string) []state {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	var states []state
	for _, name := range names {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		var st state
		if err := json.Unmarshal(b, &st); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		states = append(states, st)
	}
	return states
}

// readEvents reads the events of process pid in dir.
func readEvents(t *testing.T, dir string, pid int) []event {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, strconv.Itoa(pid)+".events"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var events []event
	for line := range strings.Lines(string(b)) {
		var e event
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("bad event %q: %v", line, err)
		}
		if _, err := time.Parse(time.RFC3339Nano, e.Time); err != nil {
			t.Fatalf("bad event time: %v", err)
		}
		events = append(events, e)
	}
	return events
}

// poll calls cond every 10ms until it reports true, and fails the test if
// that takes longer than timeout.
func poll(t *testing.T, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		<-tick.C
	}
}

// findEvent returns the first event of pid for which match reports true.
func (p *proc) findEvent(pid int, match func(e event) bool) (event, bool) {
	for _, e := range readEvents(p.t, p.stateDir, pid) {
		if match(e) {
			return e, true
		}
	}
	return event{}, false
}

// waitEvent waits until pid has recorded an event for which match reports
// true, and returns it.
func (p *proc) waitEvent(pid int, what string, match func(e event) bool) event {
	p.t.Helper()
	var e event
	poll(p.t, what, func() bool {
		var ok bool
		e, ok = p.findEvent(pid, match)
		return ok
	})
	return e
}

func isExit(e event) bool { return e.Event == "exit" }

func TestInitialize(t *testing.T) {
	tests := []struct {
		flags []string
		ask   string
		want  string
	}{
		{nil, "2024-11-05", "2024-11-05"},
		{nil, "2025-06-18", "2025-06-18"},
		{nil, "2025-11-25", "2025-11-25"},
		{nil, "1999-01-01", "2025-11-25"},
		{nil, "", "2025-11-25"},
		{[]string{"-protocol-version", "2024-11-05"}, "2025-06-18", "2024-11-05"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s%q", strings.Join(tt.flags, " "), tt.ask), func(t *testing.T) {
			p := start(t, append([]string{"-name", "alpha"}, tt.flags...)...)
			r := p.initialize(tt.ask)
			if r.ProtocolVersion != tt.want {
				t.Errorf("protocolVersion = %q, want %q", r.ProtocolVersion, tt.want)
			}
			if r.Capabilities.Tools == nil || !r.Capabilities.Tools.ListChanged ||
				r.ServerInfo.Name != "alpha" || r.ServerInfo.Version != "1.0.0" {
				t.Errorf("unexpected result %+v", r)
			}
			p.request(1, "ping", nil)
			if m := p.expect(1); string(m.Result) != "{}" {
				t.Errorf("ping result = %s, want {}", m.Result)
			}
			text := p.expectTextOf(2, "whoami", nil)
			if want := fmt.Sprintf(`{"name":"alpha","pid":%d}`, p.cmd.Process.Pid); !sameJSON([]byte(text), want) {
				t.Errorf("whoami = %s, want %s", text, want)
			}

			states := readStates(t, p.stateDir)
			if len(states) != 1 {
				t.Fatalf("got %d state files, want 1", len(states))
			}
			st := states[0]
			if st.PID != p.cmd.Process.Pid || st.PPID != os.Getpid() || st.Role != "server" || st.Name != "alpha" || st.SID == nil {
				t.Errorf("unexpected state %+v", st)
			}
			if e, ok := p.findEvent(st.PID, func(e event) bool { return e.Event == "request" }); !ok ||
				e.Method != "initialize" || string(e.ID) != "0" {
				t.Errorf("first request event = %+v, want initialize with id 0", e)
			}
		})
	}
}

// expectTextOf calls a tool and returns the text of its answer.
func (p *proc) expectTextOf(id any, name string, args map[string]any) string {
	p.t.Helper()
	p.callTool(id, name, args)
	return p.expectText(id)
}

func TestToolsListPagination(t *testing.T) {
	args := []string{"-page-size", "2", "-extra-tools", "5", "-prefix", "x_"}
	p := start(t, args...)
	p.initialize("2025-11-25")
	seen := map[string]int{}
	var order []string
	var cursor string
	pages := 0
	for id := 1; ; id++ {
		params := map[string]any{}
		if cursor != "" {
			params["cursor"] = cursor
		}
		p.request(id, "tools/list", params)
		m := p.expect(id)
		var r struct {
			Tools []struct {
				Name        string         `json:"name"`
				Description string         `json:"description"`
				InputSchema map[string]any `json:"inputSchema"`
			} `json:"tools"`
			NextCursor string `json:"nextCursor"`
		}
		if err := json.Unmarshal(m.Result, &r); err != nil {
			t.Fatal(err)
		}
		pages++
		if len(r.Tools) == 0 || len(r.Tools) > 2 {
			t.Fatalf("page %d has %d tools", pages, len(r.Tools))
		}
		for _, tool := range r.Tools {
			seen[tool.Name]++
			order = append(order, tool.Name)
			if tool.Description == "" || tool.InputSchema["type"] != "object" || tool.InputSchema["properties"] == nil {
				t.Errorf("bad tool %+v", tool)
			}
		}
		if r.NextCursor == "" {
			break
		}
		cursor = r.NextCursor
	}
	// The server's own table, built from the same flags, says what it
	// offers: a tool added to it needs no change here.
	want := toolTable(t, args...)
	if len(want) < 5+2 || !slices.Contains(want, "x_echo") || !slices.Contains(want, "x_tool_004") {
		t.Fatalf("the server's tool table is %q, want its tools and 5 extra ones, prefixed", want)
	}
	if wantPages := (len(want) + 1) / 2; len(seen) != len(want) || pages != wantPages {
		t.Errorf("got %d tools in %d pages, want %d in %d: %v", len(seen), pages, len(want), wantPages, seen)
	}
	for _, name := range want {
		if seen[name] != 1 {
			t.Errorf("tool %s seen %d times, want 1", name, seen[name])
		}
	}
	if got, want := strings.Join(order, " "), strings.Join(want, " "); got != want {
		t.Errorf("tools listed in order\n%s\nwant\n%s", got, want)
	}

	for i, bad := range []any{"nonsense", encodeCursor(0), encodeCursor(len(want)), encodeCursor(len(want) + 76)} {
		p.request(100+i, "tools/list", map[string]any{"cursor": bad})
		p.expectError(100+i, -32602, "invalid cursor")
	}
	if got := p.expectTextOf(200, "x_tool_003", nil); !strings.Contains(got, `"pid"`) {
		t.Errorf("x_tool_003 = %s, want whoami's answer", got)
	}
}

// toolTable returns the names of the tools a server started with args
// offers, in its order, from the table the server itself builds.
func toolTable(t *testing.T, args ...string) []string {
	t.Helper()
	opts, err := parseFlags(args, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range newServer(opts, nil, nil, nil).tools {
		names = append(names, tool.name)
	}
	return names
}

func TestErrors(t *testing.T) {
	p := start(t)
	p.initialize("2025-11-25")
	p.sendLine("this is not json")
	p.expectError(nil, -32700, "parse error")
	p.request(1, "nope/nothing", nil)
	p.expectError(1, -32601, "method not found: nope/nothing")
	p.callTool(2, "nope", nil)
	p.expectError(2, -32602, `unknown tool "nope"`)
	p.callTool(3, "big", map[string]any{"bytes": "many"})
	if m := p.expect(3); m.Error == nil || m.Error.Code != -32602 {
		t.Errorf("got %q, want error -32602", m.Line)
	}
	// Responses and unknown notifications are ignored.
	p.send(map[string]any{"jsonrpc": "2.0", "id": 99, "result": map[string]any{}})
	p.send(map[string]any{"jsonrpc": "2.0", "method": "notifications/whatever"})
	p.request("s", "ping", nil)
	p.expect("s")
}

func TestOutOfOrder(t *testing.T) {
	p := start(t)
	p.initialize("2025-11-25")
	p.callTool(1, "echo", map[string]any{"text": "slow", "delay_ms": 1000})
	p.callTool(2, "echo", map[string]any{"text": "fast"})
	if got := p.expectText(2); got != "fast" {
		t.Errorf("echo = %q, want fast", got)
	}
	if got := p.expectText(1); got != "slow" {
		t.Errorf("echo = %q, want slow", got)
	}
}

func TestLargeMessages(t *testing.T) {
	p := start(t)
	p.initialize("2025-11-25")
	const n = 1 << 20
	text := p.expectTextOf(1, "big", map[string]any{"bytes": n})
	if len(text) != n {
		t.Fatalf("big answered %d bytes, want %d", len(text), n)
	}
	for i := range n {
		if text[i] != 'a'+byte(i%26) {
			t.Fatalf("byte %d is %q", i, text[i])
		}
	}
	// A request far larger than bufio.Scanner's default limit.
	long := strings.Repeat("<é&>", n) // not escaped on the way back
	if got := p.expectTextOf(2, "echo", map[string]any{"text": long}); got != long {
		t.Errorf("echo of %d bytes answered %d bytes", len(long), len(got))
	}
}

func TestCancel(t *testing.T) {
	p := start(t)
	p.initialize("2025-11-25")
	pid := p.cmd.Process.Pid
	cancel := func(id int) {
		p.send(map[string]any{"jsonrpc": "2.0", "method": "notifications/cancelled",
			"params": map[string]any{"requestId": id, "reason": "test"}})
	}

	p.callTool(7, "hang", nil)
	cancel(7)
	p.request(8, "ping", nil)
	p.expect(8)
	e := p.waitEvent(pid, "cancelled event", func(e event) bool { return e.Event == "cancelled" })
	if string(e.RequestID) != "7" || e.Reason != "test" {
		t.Errorf("cancelled event = %+v", e)
	}

	// Had sleep not been cancelled, it would answer before echo.
	p.callTool(9, "sleep", map[string]any{"ms": 200})
	cancel(9)
	p.callTool(10, "echo", map[string]any{"text": "after", "delay_ms": 800})
	p.expect(10)

	p.stdin.Close()
	for _, m := range p.drain() {
		t.Errorf("unexpected message %q", m.Line)
	}
	if code := p.wait(); code != 0 {
		t.Errorf("exit code %d, want 0", code)
	}
	if e, ok := p.findEvent(pid, isExit); !ok || *e.Code != 0 || e.Reason != "stdin closed" {
		t.Errorf("exit event = %+v, want code 0 for stdin closed", e)
	}
}

func TestCrash(t *testing.T) {
	p := start(t)
	p.initialize("2025-11-25")
	p.callTool(1, "crash", map[string]any{"code": 7})
	for _, m := range p.drain() {
		t.Errorf("unexpected message %q", m.Line)
	}
	if code := p.wait(); code != 7 {
		t.Errorf("exit code %d, want 7", code)
	}
	if !strings.Contains(p.stderr.String(), "crashing with code 7\n") {
		t.Errorf("stderr = %q", p.stderr.String())
	}
	if e, ok := p.findEvent(p.cmd.Process.Pid, isExit); !ok || *e.Code != 7 || e.Reason != "crash tool" {
		t.Errorf("exit event = %+v, want code 7 for crash tool", e)
	}
}

func TestCrashAfter(t *testing.T) {
	p := start(t, "-crash-after", "2")
	p.initialize("2025-11-25")
	p.expectTextOf(1, "whoami", nil)
	p.callTool(2, "echo", map[string]any{"text": "x"})
	if msgs := p.drain(); len(msgs) != 0 {
		t.Errorf("unexpected messages %v", msgs)
	}
	if code := p.wait(); code != 5 {
		t.Errorf("exit code %d, want 5", code)
	}
}

func TestOutputTools(t *testing.T) {
	p := start(t)
	p.initialize("2025-11-25")
	p.callTool(1, "garbage", map[string]any{"lines": 3})
	for i := range 3 {
		if m := p.next(); m.Line != fmt.Sprintf("this is not json %d\n", i) {
			t.Errorf("line %d = %q", i, m.Line)
		}
	}
	if got := p.expectText(1); got != "done" {
		t.Errorf("garbage = %q", got)
	}
	p.callTool(2, "list_changed", nil)
	if m := p.next(); m.Method != "notifications/tools/list_changed" || m.ID != nil {
		t.Errorf("got %q, want list_changed notification", m.Line)
	}
	if got := p.expectText(2); got != "sent" {
		t.Errorf("list_changed = %q", got)
	}
	if got := p.expectTextOf(3, "stderr", map[string]any{"bytes": 250}); got != "done" {
		t.Errorf("stderr = %q", got)
	}
	p.stdin.Close()
	p.drain()
	p.wait()
	out := p.stderr.String()
	if len(out) != 250 {
		t.Errorf("stderr has %d bytes, want 250: %q", len(out), out)
	}
	for line := range strings.Lines(out) {
		if len(line) > 100 || !strings.HasSuffix(line, "\n") {
			t.Errorf("bad stderr line %q", line)
		}
	}
}

func TestGrandchildSetsid(t *testing.T) {
	p := start(t, "-grandchild", "setsid")
	p.initialize("2025-11-25")
	server := p.cmd.Process.Pid
	var srv, sleeper *state
	states := readStates(t, p.stateDir)
	for i, st := range states {
		switch st.Role {
		case "server":
			srv = &states[i]
		case "sleeper":
			sleeper = &states[i]
		}
	}
	if len(states) != 2 || srv == nil || sleeper == nil {
		t.Fatalf("states = %+v, want a server and a sleeper", states)
	}
	if sleeper.PPID != server || *sleeper.SID != sleeper.PID || *sleeper.SID == *srv.SID || sleeper.PGID == srv.PGID {
		t.Errorf("sleeper %+v is not a session leader child of server %+v", sleeper, srv)
	}
	if !strings.Contains(strings.Join(sleeper.Args, " "), "-lifetime 2m0s") {
		t.Errorf("sleeper args %q lack -lifetime 2m0s", sleeper.Args)
	}
	if err := syscall.Kill(sleeper.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	poll(t, "sleeper to be gone", func() bool {
		return syscall.Kill(sleeper.PID, 0) == syscall.ESRCH
	})
	p.request(1, "ping", nil)
	p.expect(1)
}

func TestGrandchildDaemon(t *testing.T) {
	p := start(t, "-grandchild", "daemon", "-grandchild-ignores-sigterm")
	p.initialize("2025-11-25")
	roles := map[string]state{}
	for _, st := range readStates(t, p.stateDir) {
		roles[st.Role] = st
	}
	srv, daemonizer, sleeper := roles["server"], roles["daemonizer"], roles["sleeper"]
	if len(roles) != 3 || daemonizer.PPID != srv.PID || sleeper.PPID == srv.PID || *sleeper.SID != sleeper.PID {
		t.Fatalf("unexpected states %+v", roles)
	}
	e := p.waitEvent(daemonizer.PID, "daemonizer to exit", isExit)
	if *e.Code != 0 || e.Reason != "daemonized" {
		t.Errorf("daemonizer exit event = %+v", e)
	}
	if err := syscall.Kill(sleeper.PID, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	p.waitEvent(sleeper.PID, "sleeper to record SIGTERM", func(e event) bool { return e.Signal == "terminated" })
	if _, ok := p.findEvent(sleeper.PID, isExit); ok || syscall.Kill(sleeper.PID, 0) != nil {
		t.Errorf("sleeper ended on SIGTERM despite -grandchild-ignores-sigterm")
	}
}

func TestSigterm(t *testing.T) {
	p := start(t)
	p.initialize("2025-11-25")
	p.cmd.Process.Signal(syscall.SIGTERM)
	p.drain()
	if code := p.wait(); code != 0 {
		t.Errorf("exit code %d, want 0", code)
	}
	events := readEvents(t, p.stateDir, p.cmd.Process.Pid)
	if n := len(events); n < 2 || events[n-2].Signal != "terminated" || events[n-1].Reason != "signal terminated" {
		t.Errorf("events = %+v, want a signal then an exit", events)
	}
}

func TestIgnoreSigterm(t *testing.T) {
	p := start(t, "-ignore-sigterm")
	p.initialize("2025-11-25")
	p.cmd.Process.Signal(syscall.SIGTERM)
	p.waitEvent(p.cmd.Process.Pid, "signal event", func(e event) bool { return e.Signal == "terminated" })
	p.request(1, "ping", nil)
	p.expect(1)
	if _, ok := p.findEvent(p.cmd.Process.Pid, isExit); ok {
		t.Error("exit event recorded despite -ignore-sigterm")
	}
}

func TestCrashAtStart(t *testing.T) {
	p := start(t, "-crash-at-start")
	p.drain()
	if code := p.wait(); code != 3 {
		t.Errorf("exit code %d, want 3", code)
	}
	if got := p.stderr.String(); got != "fatal: crash at start\n" {
		t.Errorf("stderr = %q", got)
	}
}

// expectNotification returns the next line written by the server, failing
// the test unless it is a notification of the given method.
func (p *proc) expectNotification(method string) msg {
	p.t.Helper()
	m := p.next()
	if !m.JSON || m.Method != method || m.ID != nil {
		p.t.Fatalf("got %q, want notification %s", m.Line, method)
	}
	return m
}

// expectServerRequest returns the next line written by the server, failing
// the test unless it is a request of the given method.
func (p *proc) expectServerRequest(method string) msg {
	p.t.Helper()
	m := p.next()
	if !m.JSON || m.Method != method || m.ID == nil {
		p.t.Fatalf("got %q, want request %s", m.Line, method)
	}
	return m
}

// respond answers the server's request id with result.
func (p *proc) respond(id json.RawMessage, result any) {
	p.t.Helper()
	p.send(map[string]any{"jsonrpc": "2.0", "id": id, "result": result})
}

// respondError answers the server's request id with an error.
func (p *proc) respondError(id json.RawMessage, code int, message string) {
	p.t.Helper()
	p.send(map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{"code": code, "message": message}})
}

// sameJSON reports whether got and want are the same JSON value, whatever
// the order of object members.
func sameJSON(got []byte, want string) bool {
	var g, w any
	if json.Unmarshal(got, &g) != nil || json.Unmarshal([]byte(want), &w) != nil {
		return false
	}
	return reflect.DeepEqual(g, w)
}

// mustJSON encodes v.
func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// checkJSON fails the test unless got and want are the same JSON value.
func checkJSON(t *testing.T, what string, got []byte, want string) {
	t.Helper()
	if !sameJSON(got, want) {
		t.Errorf("%s = %s, want %s", what, got, want)
	}
}

// initializeRaw performs the initialize handshake, offering the given
// client capabilities, and returns the server's capabilities as sent.
func (p *proc) initializeRaw(caps string) json.RawMessage {
	p.t.Helper()
	p.sendLine(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25",` +
		`"capabilities":` + caps + `,"clientInfo":{"name":"test","version":"0"}}}`)
	var r struct {
		Capabilities json.RawMessage `json:"capabilities"`
	}
	p.expectResult(0, &r)
	p.send(map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"})
	return r.Capabilities
}

func TestCapabilities(t *testing.T) {
	t.Run("all", func(t *testing.T) {
		p := start(t)
		caps := p.initializeRaw(`{"roots": {"listChanged": true}, "sampling": {}}`)
		checkJSON(t, "capabilities", caps, `{"tools":{"listChanged":true},"resources":{"subscribe":true,"listChanged":true},`+
			`"prompts":{"listChanged":true},"completions":{},"logging":{}}`)
		e, ok := p.findEvent(p.cmd.Process.Pid, func(e event) bool { return e.Method == "initialize" })
		if !ok || !sameJSON(e.Capabilities, `{"roots":{"listChanged":true},"sampling":{}}`) {
			t.Errorf("initialize event = %+v, want the client's capabilities", e)
		}
	})
	t.Run("some", func(t *testing.T) {
		p := start(t, "-capabilities", "tools,logging")
		checkJSON(t, "capabilities", p.initializeRaw(`{}`), `{"tools":{"listChanged":true},"logging":{}}`)
		for i, method := range []string{"resources/list", "resources/templates/list", "resources/read",
			"resources/subscribe", "resources/unsubscribe", "prompts/list", "prompts/get", "completion/complete"} {
			p.request(i+1, method, map[string]any{})
			p.expectError(i+1, -32601, "method not found: "+method)
		}
		p.request(20, "logging/setLevel", map[string]any{"level": "debug"})
		p.expect(20)
		p.request(21, "tools/list", nil)
		p.expect(21)
	})
	t.Run("unlisted", func(t *testing.T) {
		p := start(t, "-unlisted", "resources,prompts")
		checkJSON(t, "capabilities", p.initializeRaw(`{}`), `{"tools":{"listChanged":true},"resources":{"subscribe":true,"listChanged":true},`+
			`"prompts":{"listChanged":true},"completions":{},"logging":{}}`)
		for i, method := range []string{"resources/list", "resources/templates/list", "prompts/list"} {
			p.request(i+1, method, map[string]any{})
			p.expectError(i+1, -32601, "method not found: "+method)
		}
		p.request(10, "tools/list", nil)
		p.expect(10)
		p.request(11, "prompts/get", map[string]any{"name": "greet"})
		p.expect(11)
	})
	t.Run("none", func(t *testing.T) {
		p := start(t, "-capabilities", "")
		checkJSON(t, "capabilities", p.initializeRaw(`{}`), `{}`)
		p.request(1, "tools/list", nil)
		p.expectError(1, -32601, "method not found: tools/list")
		p.callTool(2, "whoami", nil)
		p.expectError(2, -32601, "method not found: tools/call")
		p.request(3, "logging/setLevel", map[string]any{"level": "debug"})
		p.expectError(3, -32601, "method not found: logging/setLevel")
		p.request(4, "ping", nil)
		p.expect(4)
	})
}

func TestCapabilitiesFlag(t *testing.T) {
	o, err := parseFlags([]string{"-capabilities", " prompts, resources,"}, io.Discard)
	if err != nil || !reflect.DeepEqual(o.capabilities, map[string]bool{"prompts": true, "resources": true}) {
		t.Errorf("parseFlags = %+v, %v", o, err)
	}
	if _, err := parseFlags([]string{"-capabilities", "tools,sampling"}, io.Discard); err == nil {
		t.Error("parseFlags accepted capability sampling")
	}
	if _, err := parseFlags([]string{"-unlisted", "sampling"}, io.Discard); err == nil {
		t.Error("parseFlags accepted -unlisted sampling")
	}
}

// readResource returns the text of the resource at uri.
func (p *proc) readResource(id any, uri string) string {
	p.t.Helper()
	p.request(id, "resources/read", map[string]any{"uri": uri})
	var r struct {
		Contents []resourceContents `json:"contents"`
	}
	m := p.expectResult(id, &r)
	if len(r.Contents) != 1 || r.Contents[0].URI != uri || r.Contents[0].MimeType != "text/plain" {
		p.t.Fatalf("read %s: unexpected result %s", uri, m.Result)
	}
	return r.Contents[0].Text
}

func TestResources(t *testing.T) {
	p := start(t, "-name", "res", "-page-size", "1")
	p.initialize("2025-11-25")
	pid := p.cmd.Process.Pid

	var r struct {
		Resources  json.RawMessage `json:"resources"`
		NextCursor string          `json:"nextCursor"`
	}
	p.request(1, "resources/list", nil)
	p.expectResult(1, &r)
	checkJSON(t, "first page", r.Resources, `[{"uri":"fake://res/hello","name":"hello","mimeType":"text/plain"}]`)
	p.request(2, "resources/list", map[string]any{"cursor": r.NextCursor})
	r.NextCursor = ""
	p.expectResult(2, &r)
	checkJSON(t, "second page", r.Resources, `[{"uri":"fake://res/counter","name":"counter"}]`)
	if r.NextCursor != "" {
		t.Errorf("last page has cursor %q", r.NextCursor)
	}
	p.request(3, "resources/list", map[string]any{"cursor": encodeCursor(2)})
	p.expectError(3, -32602, "invalid cursor")
	p.request(4, "resources/templates/list", nil)
	if m := p.expect(4); !sameJSON(m.Result, `{"resourceTemplates":[{"uriTemplate":"fake://res/echo/{text}","name":"echo"}]}`) {
		t.Errorf("resources/templates/list = %s", m.Line)
	}

	for i, tt := range []struct{ uri, want string }{
		{"fake://res/hello", "hello from res"},
		{"fake://res/counter", "0"},
		{"fake://res/echo/a%20b%2Fc+d", "a b/c+d"},
	} {
		if got := p.readResource(10+i, tt.uri); got != tt.want {
			t.Errorf("read %s = %q, want %q", tt.uri, got, tt.want)
		}
	}
	p.request(20, "resources/read", map[string]any{"uri": "fake://res/nope"})
	p.expectError(20, -32002, "resource not found: fake://res/nope")

	counter := "fake://res/counter"
	p.request(30, "resources/subscribe", map[string]any{"uri": counter})
	if m := p.expect(30); string(m.Result) != "{}" {
		t.Errorf("subscribe answered %q", m.Line)
	}
	p.callTool(31, "touch", nil)
	m := p.expectNotification("notifications/resources/updated")
	checkJSON(t, "updated params", m.Params, `{"uri":"fake://res/counter"}`)
	if got := p.expectText(31); got != "counter 1" {
		t.Errorf("touch = %q, want counter 1", got)
	}
	p.request(32, "resources/unsubscribe", map[string]any{"uri": counter})
	if m := p.expect(32); string(m.Result) != "{}" {
		t.Errorf("unsubscribe answered %q", m.Line)
	}
	if got := p.expectTextOf(33, "touch", nil); got != "counter 2" { // and no notification first
		t.Errorf("touch = %q, want counter 2", got)
	}
	if got := p.readResource(34, counter); got != "2" {
		t.Errorf("counter = %q, want 2", got)
	}
	for _, name := range []string{"subscribe", "unsubscribe"} {
		if e, ok := p.findEvent(pid, func(e event) bool { return e.Event == name }); !ok || e.URI != counter {
			t.Errorf("%s event = %+v, want uri %s", name, e, counter)
		}
	}

	for i, tt := range []struct{ tool, method string }{
		{"resources_changed", "notifications/resources/list_changed"},
		{"prompts_changed", "notifications/prompts/list_changed"},
	} {
		p.callTool(40+i, tt.tool, nil)
		p.expectNotification(tt.method)
		if got := p.expectText(40 + i); got != "sent" {
			t.Errorf("%s = %q, want sent", tt.tool, got)
		}
	}
}

func TestPrompts(t *testing.T) {
	p := start(t, "-name", "pr", "-page-size", "1")
	p.initialize("2025-11-25")
	p.request(1, "prompts/list", nil)
	if m := p.expect(1); !sameJSON(m.Result,
		`{"prompts":[{"name":"greet","description":"Greets someone.","arguments":[{"name":"who","required":true}]}]}`) {
		t.Errorf("prompts/list = %s", m.Line)
	}
	p.request(2, "prompts/get", map[string]any{"name": "greet", "arguments": map[string]any{"who": "Wendy"}})
	if m := p.expect(2); !sameJSON(m.Result,
		`{"description":"greeting","messages":[{"role":"user","content":{"type":"text","text":"Hello, Wendy, from pr"}}]}`) {
		t.Errorf("prompts/get = %s", m.Line)
	}
	p.request(3, "prompts/get", map[string]any{"name": "nope"})
	p.expectError(3, -32602, `unknown prompt "nope"`)
	p.request(4, "prompts/get", map[string]any{"name": "greet"})
	p.expectError(4, -32602, `missing argument "who"`)
	p.request(5, "prompts/list", map[string]any{"cursor": encodeCursor(1)})
	p.expectError(5, -32602, "invalid cursor")
}

func TestCompletion(t *testing.T) {
	p := start(t, "-name", "co")
	p.initialize("2025-11-25")
	greet := map[string]any{"type": "ref/prompt", "name": "greet"}
	echo := map[string]any{"type": "ref/resource", "uri": "fake://co/echo/{text}"}
	for i, tt := range []struct {
		ref       map[string]any
		arg, want string
	}{
		{greet, "who", `["alice","bob","carol"]`},
		{greet, "who:b", `["bob"]`},
		{greet, "who:z", `[]`},
		{echo, "text:t", `["three","two"]`},
		{echo, "text:", `["one","three","two"]`},
	} {
		name, value, _ := strings.Cut(tt.arg, ":")
		p.request(i, "completion/complete", map[string]any{"ref": tt.ref, "argument": map[string]any{"name": name, "value": value}})
		var r struct {
			Completion struct {
				Values  json.RawMessage `json:"values"`
				Total   int             `json:"total"`
				HasMore *bool           `json:"hasMore"`
			} `json:"completion"`
		}
		m := p.expectResult(i, &r)
		var values []string
		json.Unmarshal(r.Completion.Values, &values)
		if string(r.Completion.Values) != tt.want || r.Completion.Total != len(values) ||
			r.Completion.HasMore == nil || *r.Completion.HasMore {
			t.Errorf("completing %v %s = %s, want values %s", tt.ref, tt.arg, m.Result, tt.want)
		}
	}
	for i, params := range []map[string]any{
		{"ref": map[string]any{"type": "ref/prompt", "name": "nope"}, "argument": map[string]any{"name": "who", "value": ""}},
		{"ref": greet, "argument": map[string]any{"name": "whom", "value": ""}},
		{"ref": map[string]any{"type": "ref/resource", "uri": "fake://co/hello"}, "argument": map[string]any{"name": "text", "value": ""}},
		{"ref": map[string]any{"type": "ref/other", "name": "greet"}, "argument": map[string]any{"name": "who", "value": ""}},
	} {
		p.request(10+i, "completion/complete", params)
		if m := p.expect(10 + i); m.Error == nil || m.Error.Code != -32602 {
			t.Errorf("completing %v: got %q, want error -32602", params, m.Line)
		}
	}
}

func TestProgress(t *testing.T) {
	p := start(t)
	p.initialize("2025-11-25")
	pid := p.cmd.Process.Pid
	for _, tt := range []struct {
		id    int
		token any
		args  map[string]any
		steps int
	}{
		{1, "tok-1", map[string]any{"steps": 2}, 2},
		{2, 42, map[string]any{"delay_ms": 10}, 3},
	} {
		p.request(tt.id, "tools/call", map[string]any{"name": "progress", "arguments": tt.args,
			"_meta": map[string]any{"progressToken": tt.token}})
		token, _ := json.Marshal(tt.token)
		for i := 1; i <= tt.steps; i++ {
			m := p.expectNotification("notifications/progress")
			want := fmt.Sprintf(`{"progressToken":%s,"progress":%d,"total":%d,"message":"step %d of %d"}`, token, i, tt.steps, i, tt.steps)
			if !sameJSON(m.Params, want) {
				t.Errorf("progress params = %s, want %s", m.Params, want)
			}
		}
		if got, want := p.expectText(tt.id), fmt.Sprintf("done %d", tt.steps); got != want {
			t.Errorf("progress = %q, want %q", got, want)
		}
		e, _ := p.findEvent(pid, func(e event) bool { return e.Event == "request" && string(e.ID) == strconv.Itoa(tt.id) })
		if string(e.ProgressToken) != string(token) {
			t.Errorf("request event %+v, want progressToken %s", e, token)
		}
	}
	// Without a token, no notifications.
	if got := p.expectTextOf(3, "progress", map[string]any{"steps": 2}); got != "done 2" {
		t.Errorf("progress = %q, want done 2", got)
	}
	if e, _ := p.findEvent(pid, func(e event) bool { return string(e.ID) == "3" }); e.ProgressToken != nil {
		t.Errorf("request event %+v has a progressToken", e)
	}
}

func TestLogging(t *testing.T) {
	p := start(t)
	p.initialize("2025-11-25")
	logged := func(id int, args map[string]any, want string) {
		t.Helper()
		p.callTool(id, "log", args)
		m := p.expectNotification("notifications/message")
		if !sameJSON(m.Params, want) {
			t.Errorf("message params = %s, want %s", m.Params, want)
		}
		if got := p.expectText(id); got != "logged" {
			t.Errorf("log = %q, want logged", got)
		}
	}
	logged(1, nil, `{"level":"info","logger":"fake","data":"hello"}`)
	logged(2, map[string]any{"level": "debug"}, `{"level":"debug","logger":"fake","data":"hello"}`)

	p.request(3, "logging/setLevel", map[string]any{"level": "warning"})
	if m := p.expect(3); string(m.Result) != "{}" {
		t.Errorf("setLevel answered %q", m.Line)
	}
	if e, ok := p.findEvent(p.cmd.Process.Pid, func(e event) bool { return e.Event == "setLevel" }); !ok || e.Level != "warning" {
		t.Errorf("setLevel event = %+v", e)
	}
	if got := p.expectTextOf(4, "log", map[string]any{"level": "notice"}); got != "filtered" {
		t.Errorf("log = %q, want filtered", got)
	}
	logged(5, map[string]any{"level": "warning", "data": "careful"}, `{"level":"warning","logger":"fake","data":"careful"}`)
	logged(6, map[string]any{"level": "emergency"}, `{"level":"emergency","logger":"fake","data":"hello"}`)

	p.request(7, "logging/setLevel", map[string]any{"level": "loud"})
	p.expectError(7, -32602, `invalid level "loud"`)
	p.callTool(8, "log", map[string]any{"level": "loud"})
	if m := p.expect(8); m.Error == nil || m.Error.Code != -32602 {
		t.Errorf("got %q, want error -32602", m.Line)
	}
}

func TestClientRequests(t *testing.T) {
	p := start(t)
	p.initialize("2025-11-25")
	pid := p.cmd.Process.Pid

	p.callTool(1, "sample", map[string]any{"prompt": "tell me"})
	m := p.expectServerRequest("sampling/createMessage")
	if string(m.ID) != "1" || !sameJSON(m.Params, `{"messages":[{"role":"user","content":{"type":"text","text":"tell me"}}],"maxTokens":100}`) {
		t.Errorf("got %q", m.Line)
	}
	p.respond(m.ID, map[string]any{"role": "assistant", "content": map[string]any{"type": "text", "text": "sure"}, "model": "m"})
	if got := p.expectText(1); got != "sampled: sure" {
		t.Errorf("sample = %q", got)
	}

	p.callTool(2, "sample", nil)
	m = p.expectServerRequest("sampling/createMessage")
	if string(m.ID) != "2" || !strings.Contains(string(m.Params), `"text":"hi"`) {
		t.Errorf("got %q", m.Line)
	}
	p.respondError(m.ID, -1, "user rejected")
	if text, isError := p.expectToolResult(2); text != "sampling failed: -1 user rejected" || !isError {
		t.Errorf("sample = %q, isError %v", text, isError)
	}

	p.callTool(3, "elicit", nil)
	m = p.expectServerRequest("elicitation/create")
	checkJSON(t, "elicitation params", m.Params,
		`{"message":"name?","requestedSchema":{"type":"object","properties":{"name":{"type":"string"}}}}`)
	p.respond(m.ID, map[string]any{"action": "accept", "content": map[string]any{"name": "Ann"}})
	if got := p.expectText(3); got != `elicited: {"action":"accept","content":{"name":"Ann"}}` {
		t.Errorf("elicit = %q", got)
	}
	p.callTool(4, "elicit", map[string]any{"message": "age?"})
	m = p.expectServerRequest("elicitation/create")
	if !strings.Contains(string(m.Params), `"message":"age?"`) {
		t.Errorf("got %q", m.Line)
	}
	p.respondError(m.ID, -32601, "method not found")
	if text, isError := p.expectToolResult(4); text != "elicitation failed: -32601 method not found" || !isError {
		t.Errorf("elicit = %q, isError %v", text, isError)
	}

	p.callTool(5, "roots", nil)
	m = p.expectServerRequest("roots/list")
	if m.Params != nil {
		t.Errorf("roots/list has params: %q", m.Line)
	}
	p.respond(m.ID, json.RawMessage(`{"roots": [{"uri": "file:///tmp", "name": "tmp"}]}`))
	if got := p.expectText(5); got != `roots: [{"uri":"file:///tmp","name":"tmp"}]` {
		t.Errorf("roots = %q", got)
	}
	p.callTool(6, "roots", nil)
	p.respondError(p.expectServerRequest("roots/list").ID, 7, "no")
	if text, isError := p.expectToolResult(6); text != "roots failed: 7 no" || !isError {
		t.Errorf("roots = %q, isError %v", text, isError)
	}

	var sent []string
	for _, e := range readEvents(t, p.stateDir, pid) {
		if e.Event == "server-request" {
			sent = append(sent, e.Method+" "+string(e.ID))
		}
	}
	want := []string{"sampling/createMessage 1", "sampling/createMessage 2", "elicitation/create 3",
		"elicitation/create 4", "roots/list 5", "roots/list 6"}
	if !reflect.DeepEqual(sent, want) {
		t.Errorf("server-request events = %q, want %q", sent, want)
	}

	// Answers are routed by id, whatever their order.
	p.callTool(7, "sample", map[string]any{"prompt": "seven"})
	p.callTool(8, "sample", map[string]any{"prompt": "eight"})
	ids := map[string]json.RawMessage{}
	for range 2 {
		m := p.expectServerRequest("sampling/createMessage")
		for _, prompt := range []string{"seven", "eight"} {
			if strings.Contains(string(m.Params), `"`+prompt+`"`) {
				ids[prompt] = m.ID
			}
		}
	}
	for _, prompt := range []string{"eight", "seven"} {
		p.respond(ids[prompt], map[string]any{"content": map[string]any{"type": "text", "text": prompt + "!"}})
		id := map[string]int{"seven": 7, "eight": 8}[prompt]
		if got := p.expectText(id); got != "sampled: "+prompt+"!" {
			t.Errorf("sample %s = %q", prompt, got)
		}
	}

	// A cancelled call is not answered, even once the client answers.
	p.callTool(9, "roots", nil)
	m = p.expectServerRequest("roots/list")
	p.send(map[string]any{"jsonrpc": "2.0", "method": "notifications/cancelled", "params": map[string]any{"requestId": 9}})
	p.request(10, "ping", nil)
	p.expect(10)
	p.respond(m.ID, map[string]any{"roots": []any{}})
	// Stray answers are ignored.
	p.respond(json.RawMessage(`999`), map[string]any{})
	p.respond(json.RawMessage(`"1"`), map[string]any{})
	p.send(map[string]any{"jsonrpc": "2.0", "method": "notifications/roots/list_changed"})
	p.request(11, "ping", nil)
	p.expect(11)
	if _, ok := p.findEvent(pid, func(e event) bool {
		return e.Event == "notification" && e.Method == "notifications/roots/list_changed"
	}); !ok {
		t.Error("no event for notifications/roots/list_changed")
	}
}

// Keys of modern _meta, spelled out rather than taken from the server.
const (
	mVersion  = "io.modelcontextprotocol/protocolVersion"
	mCaps     = "io.modelcontextprotocol/clientCapabilities"
	mInfo     = "io.modelcontextprotocol/clientInfo"
	mLogLevel = "io.modelcontextprotocol/logLevel"
)

// serverInfoMeta is the _meta member of modern results of a server named
// fake.
const serverInfoMeta = `"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"fake","version":"1.0.0"}}`

// newMeta returns the _meta of a modern request declaring the given client
// capabilities.
func newMeta(caps map[string]any) map[string]any {
	if caps == nil {
		caps = map[string]any{}
	}
	return map[string]any{
		mVersion: "2026-07-28",
		mCaps:    caps,
		mInfo:    map[string]any{"name": "test", "version": "0"},
	}
}

// modern sends a request whose params are params plus _meta meta.
func (p *proc) modern(id any, method string, params map[string]any, meta map[string]any) {
	p.t.Helper()
	all := map[string]any{"_meta": meta}
	for k, v := range params {
		all[k] = v
	}
	p.request(id, method, all)
}

// modernTool sends a modern tools/call whose params have the members of
// extra besides name, arguments and _meta.
func (p *proc) modernTool(id any, name string, args, meta, extra map[string]any) {
	p.t.Helper()
	params := map[string]any{"name": name, "arguments": args}
	for k, v := range extra {
		params[k] = v
	}
	p.modern(id, "tools/call", params, meta)
}

// expectRaw returns the result of the response answering id, as sent,
// failing the test if it is an error.
func (p *proc) expectRaw(id any) string {
	p.t.Helper()
	m := p.expect(id)
	if m.Error != nil {
		p.t.Fatalf("id %v: error %d %s %s", id, m.Error.Code, m.Error.Message, m.Error.Data)
	}
	return string(m.Result)
}

// expectErrorData checks that the next line is an error answering id with
// the given code, a message starting with prefix, and data the same JSON
// value as data ("" for none).
func (p *proc) expectErrorData(id any, code int, prefix, data string) {
	p.t.Helper()
	m := p.expect(id)
	if m.Error == nil || m.Error.Code != code || !strings.HasPrefix(m.Error.Message, prefix) ||
		(data == "") != (m.Error.Data == nil) || data != "" && !sameJSON(m.Error.Data, data) {
		p.t.Fatalf("got %q, want error %d %q... with data %s", m.Line, code, prefix, data)
	}
}

// requestEvent returns the request event of the request with the given id.
func (p *proc) requestEvent(id string) event {
	p.t.Helper()
	e, ok := p.findEvent(p.cmd.Process.Pid, func(e event) bool { return e.Event == "request" && string(e.ID) == id })
	if !ok {
		p.t.Fatalf("no request event for id %s", id)
	}
	return e
}

func TestEraFlag(t *testing.T) {
	if o, err := parseFlags(nil, io.Discard); err != nil || o.era != "legacy" {
		t.Errorf("default era: %+v, %v", o, err)
	}
	for _, era := range []string{"legacy", "modern", "both"} {
		if o, err := parseFlags([]string{"-era", era}, io.Discard); err != nil || o.era != era {
			t.Errorf("-era %s: %+v, %v", era, o, err)
		}
	}
	if _, err := parseFlags([]string{"-era", "new"}, io.Discard); err == nil {
		t.Error("parseFlags accepted -era new")
	}
}

func TestLegacyEraIgnoresMeta(t *testing.T) {
	p := start(t)
	p.initialize("2025-11-25")
	p.modern(1, "server/discover", nil, newMeta(nil))
	p.expectError(1, -32601, "method not found: server/discover")
	p.modern(2, "subscriptions/listen", map[string]any{"notifications": map[string]any{"toolsListChanged": true}}, newMeta(nil))
	p.expectError(2, -32601, "method not found: subscriptions/listen")
	p.modern(3, "ping", nil, map[string]any{mVersion: "1900-01-01"})
	if got := p.expectRaw(3); got != "{}" {
		t.Errorf("ping = %s, want {}", got)
	}
	p.modern(4, "tools/list", nil, newMeta(nil))
	if got := p.expectRaw(4); strings.Contains(got, "resultType") || strings.Contains(got, "ttlMs") {
		t.Errorf("legacy tools/list = %s", got)
	}
	if e := p.requestEvent("4"); e.Meta != nil || e.Era != "" {
		t.Errorf("legacy request event %+v has meta or era", e)
	}
}

func TestModernDiscover(t *testing.T) {
	for _, tt := range []struct {
		flags    []string
		versions string
		caps     string
	}{
		{[]string{"-era", "modern"}, `["2026-07-28"]`,
			`{"tools":{"listChanged":true},"resources":{"subscribe":true,"listChanged":true},"prompts":{"listChanged":true},"completions":{},"logging":{}}`},
		{[]string{"-era", "both", "-capabilities", "tools,logging"}, `["2026-07-28","2025-11-25","2025-06-18","2025-03-26","2024-11-05"]`,
			`{"tools":{"listChanged":true},"logging":{}}`},
		{[]string{"-era", "both", "-protocol-version", "2024-11-05", "-capabilities", ""}, `["2026-07-28","2024-11-05"]`, `{}`},
	} {
		t.Run(strings.Join(tt.flags, " "), func(t *testing.T) {
			p := start(t, tt.flags...)
			meta := newMeta(map[string]any{"sampling": map[string]any{}})
			meta[mLogLevel] = "debug"
			meta["progressToken"] = "tok"
			p.modern("d", "server/discover", nil, meta)
			got := p.expectRaw("d")
			want := `{"supportedVersions":` + tt.versions + `,"capabilities":` + tt.caps +
				`,"resultType":"complete","ttlMs":0,"cacheScope":"private",` + serverInfoMeta + `}`
			if !sameJSON([]byte(got), want) {
				t.Errorf("server/discover = %s\nwant %s", got, want)
			}
			e := p.requestEvent(`"d"`)
			sent, _ := json.Marshal(meta)
			if e.Method != "server/discover" || e.Era != "modern" || !sameJSON(e.Meta, string(sent)) {
				t.Errorf("request event %+v, want meta %s", e, sent)
			}
		})
	}
}

func TestModernEnvelope(t *testing.T) {
	p := start(t, "-era", "modern")
	supported := `{"supported":["2026-07-28"]}`
	p.request(1, "tools/list", nil)
	p.expectErrorData(1, -32602, "missing _meta", supported)
	p.request(2, "initialize", map[string]any{"protocolVersion": "2025-11-25", "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "test", "version": "0"}})
	p.expectErrorData(2, -32602, "missing _meta", supported)
	p.request(3, "ping", map[string]any{"_meta": map[string]any{"progressToken": 1}})
	p.expectErrorData(3, -32602, "missing _meta", supported)
	if e := p.requestEvent("3"); e.Era != "legacy" || !sameJSON(e.Meta, `{"progressToken":1}`) {
		t.Errorf("request event %+v", e)
	}

	meta := newMeta(nil)
	meta[mVersion] = "1900-01-01"
	p.modern(4, "tools/list", nil, meta)
	p.expectErrorData(4, -32022, "unsupported protocol version", `{"supported":["2026-07-28"],"requested":"1900-01-01"}`)
	meta[mVersion] = "2025-11-25"
	p.modern(5, "tools/call", map[string]any{"name": "echo", "arguments": map[string]any{"text": "x"}}, meta)
	p.expectErrorData(5, -32022, "unsupported protocol version", `{"supported":["2026-07-28"],"requested":"2025-11-25"}`)

	for i, tt := range []struct {
		key   string
		value any
		data  string
	}{
		{mCaps, nil, `{"envelope":{"key":"` + mCaps + `","problem":"missing"}}`},
		{mCaps, "all", `{"envelope":{"key":"` + mCaps + `","problem":"not an object"}}`},
		{mVersion, 20260728, `{"envelope":{"key":"` + mVersion + `","problem":"not a string"}}`},
		{mLogLevel, "loud", `{"envelope":{"key":"` + mLogLevel + `","problem":"not a logging level"}}`},
	} {
		meta := newMeta(nil)
		if tt.value == nil {
			delete(meta, tt.key)
		} else {
			meta[tt.key] = tt.value
		}
		p.modern(10+i, "tools/list", nil, meta)
		p.expectErrorData(10+i, -32602, "invalid _meta for protocol version 2026-07-28: "+tt.key, tt.data)
	}
	// clientInfo is optional.
	meta = newMeta(nil)
	delete(meta, mInfo)
	p.modern(20, "tools/call", map[string]any{"name": "echo", "arguments": map[string]any{"text": "x"}}, meta)
	if got, want := p.expectRaw(20), `{"content":[{"type":"text","text":"x"}],"resultType":"complete",`+serverInfoMeta+`}`; !sameJSON([]byte(got), want) {
		t.Errorf("echo = %s, want %s", got, want)
	}

	for i, method := range []string{"initialize", "ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe", "nope/nothing"} {
		p.modern(30+i, method, map[string]any{"uri": "fake://fake/counter", "level": "debug"}, newMeta(nil))
		p.expectErrorData(30+i, -32601, "method not found: "+method, "")
	}
	for i, tt := range []struct{ id, era string }{{"1", "legacy"}, {"4", "modern"}, {"10", "modern"}, {"30", "modern"}} {
		if e := p.requestEvent(tt.id); e.Era != tt.era {
			t.Errorf("%d: request event %+v, want era %s", i, e, tt.era)
		}
	}
}

func TestModernResults(t *testing.T) {
	p := start(t, "-era", "modern", "-page-size", "1")
	meta := newMeta(nil)
	cacheable := `"resultType":"complete","ttlMs":0,"cacheScope":"private",` + serverInfoMeta + `}`
	complete := `"resultType":"complete",` + serverInfoMeta + `}`

	p.modern(1, "resources/list", nil, meta)
	got := p.expectRaw(1)
	var r struct {
		NextCursor string `json:"nextCursor"`
	}
	json.Unmarshal([]byte(got), &r)
	if want := `{"resources":[{"uri":"fake://fake/hello","name":"hello","mimeType":"text/plain"}],"nextCursor":"` +
		r.NextCursor + `",` + cacheable; r.NextCursor == "" || !sameJSON([]byte(got), want) {
		t.Errorf("resources/list = %s\nwant %s", got, want)
	}
	for i, tt := range []struct {
		method string
		params map[string]any
		want   string
	}{
		{"resources/list", map[string]any{"cursor": r.NextCursor}, `{"resources":[{"uri":"fake://fake/counter","name":"counter"}],` + cacheable},
		{"resources/templates/list", nil, `{"resourceTemplates":[{"uriTemplate":"fake://fake/echo/{text}","name":"echo"}],` + cacheable},
		{"resources/read", map[string]any{"uri": "fake://fake/hello"},
			`{"contents":[{"uri":"fake://fake/hello","mimeType":"text/plain","text":"hello from fake"}],` + cacheable},
		{"prompts/list", nil, `{"prompts":[{"name":"greet","description":"Greets someone.","arguments":[{"name":"who","required":true}]}],` + cacheable},
		{"prompts/get", map[string]any{"name": "greet", "arguments": map[string]any{"who": "W"}},
			`{"description":"greeting","messages":[{"role":"user","content":{"type":"text","text":"Hello, W, from fake"}}],` + complete},
		{"completion/complete", map[string]any{"ref": map[string]any{"type": "ref/prompt", "name": "greet"},
			"argument": map[string]any{"name": "who", "value": "b"}},
			`{"completion":{"values":["bob"],"total":1,"hasMore":false},` + complete},
		{"tools/call", map[string]any{"name": "echo", "arguments": map[string]any{"text": "<é&>"}},
			`{"content":[{"type":"text","text":"<é&>"}],` + complete},
	} {
		p.modern(10+i, tt.method, tt.params, meta)
		if got := p.expectRaw(10 + i); !sameJSON([]byte(got), tt.want) {
			t.Errorf("%s = %s\nwant %s", tt.method, got, tt.want)
		}
	}
	p.modern(20, "tools/list", nil, meta)
	var tl map[string]json.RawMessage
	json.Unmarshal([]byte(p.expectRaw(20)), &tl)
	var tools []struct{ Name string }
	json.Unmarshal(tl["tools"], &tools)
	delete(tl, "tools")
	if want := `{"nextCursor":"` + encodeCursor(1) + `",` + cacheable; len(tools) != 1 || tools[0].Name != "echo" || !sameJSON(mustJSON(t, tl), want) {
		t.Errorf("tools/list = tools %+v and %s, want echo and %s", tools, mustJSON(t, tl), want)
	}
	p.modern(21, "resources/read", map[string]any{"uri": "fake://fake/nope"}, meta)
	p.expectErrorData(21, -32602, "resource not found: fake://fake/nope", "")
	p.modern(22, "tools/call", map[string]any{"name": "nope"}, meta)
	p.expectErrorData(22, -32602, `unknown tool "nope"`, "")
	p.modern(23, "tools/list", map[string]any{"cursor": "bad"}, meta)
	p.expectErrorData(23, -32602, "invalid cursor", "")

	// Capabilities still apply.
	q := start(t, "-era", "modern", "-capabilities", "tools")
	q.modern(1, "prompts/list", nil, meta)
	q.expectErrorData(1, -32601, "method not found: prompts/list", "")
}

func TestModernProgressAndLogging(t *testing.T) {
	p := start(t, "-era", "modern")
	meta := newMeta(nil)
	meta["progressToken"] = "tok"
	p.modernTool(1, "progress", map[string]any{"steps": 2}, meta, nil)
	for i := 1; i <= 2; i++ {
		m := p.expectNotification("notifications/progress")
		if want := fmt.Sprintf(`{"progressToken":"tok","progress":%d,"total":2,"message":"step %d of 2"}`, i, i); !sameJSON(m.Params, want) {
			t.Errorf("progress params = %s, want %s", m.Params, want)
		}
	}
	if got := p.expectText(1); got != "done 2" {
		t.Errorf("progress = %q", got)
	}
	if e := p.requestEvent("1"); string(e.ProgressToken) != `"tok"` {
		t.Errorf("request event %+v, want progressToken", e)
	}

	// No logLevel, no notifications/message.
	noLevel := newMeta(nil)
	if got := p.expectTextOfModern(2, "log", map[string]any{"level": "emergency"}, noLevel); got != "filtered" {
		t.Errorf("log without logLevel = %q, want filtered", got)
	}
	if got := p.expectTextOfModern(3, "flood", map[string]any{"count": 3}, noLevel); got != "filtered" {
		t.Errorf("flood without logLevel = %q, want filtered", got)
	}
	warning := newMeta(nil)
	warning[mLogLevel] = "warning"
	if got := p.expectTextOfModern(4, "log", map[string]any{"level": "notice"}, warning); got != "filtered" {
		t.Errorf("notice log at warning = %q, want filtered", got)
	}
	if got := p.expectTextOfModern(5, "flood", map[string]any{"count": 3}, warning); got != "filtered" {
		t.Errorf("flood at warning = %q, want filtered", got)
	}
	p.modernTool(6, "log", map[string]any{"level": "error", "data": "bad"}, warning, nil)
	if m := p.expectNotification("notifications/message"); !sameJSON(m.Params, `{"level":"error","logger":"fake","data":"bad"}`) {
		t.Errorf("message params = %s", m.Params)
	}
	if got := p.expectText(6); got != "logged" {
		t.Errorf("log = %q, want logged", got)
	}
	debug := newMeta(nil)
	debug[mLogLevel] = "debug"
	p.modernTool(7, "flood", map[string]any{"count": 2}, debug, nil)
	p.expectNotification("notifications/message")
	p.expectNotification("notifications/message")
	if got := p.expectText(7); got != "done" {
		t.Errorf("flood = %q, want done", got)
	}
	if e := p.requestEvent("7"); !sameJSON(e.Meta, `{"`+mVersion+`":"2026-07-28","`+mCaps+`":{},"`+mInfo+`":{"name":"test","version":"0"},"`+mLogLevel+`":"debug"}`) {
		t.Errorf("request event meta = %s", e.Meta)
	}
}

// expectTextOfModern calls a tool with a modern request and returns the
// text of its answer.
func (p *proc) expectTextOfModern(id any, name string, args, meta map[string]any) string {
	p.t.Helper()
	p.modernTool(id, name, args, meta, nil)
	return p.expectText(id)
}

func TestModernInputRequired(t *testing.T) {
	p := start(t, "-era", "modern", "-prefix", "x_")
	pid := p.cmd.Process.Pid
	all := newMeta(map[string]any{"sampling": map[string]any{}, "elicitation": map[string]any{}, "roots": map[string]any{}})

	// Capabilities are those of each request.
	for i, tt := range []struct{ tool, capability string }{
		{"x_sample", "sampling"}, {"x_elicit", "elicitation"}, {"x_roots", "roots"},
	} {
		caps := map[string]any{"sampling": map[string]any{}, "elicitation": map[string]any{}, "roots": map[string]any{}}
		delete(caps, tt.capability)
		caps["experimental"] = map[string]any{}
		p.modernTool(i+1, tt.tool, nil, newMeta(caps), nil)
		p.expectErrorData(i+1, -32021, "missing required client capability: "+tt.capability,
			`{"requiredCapabilities":{"`+tt.capability+`":{}}}`)
	}

	inputRequired := func(id any, method, params string, n int) string {
		t.Helper()
		state := fmt.Sprintf("fake-state-%d", n)
		if params != "" {
			params = `,"params":` + params
		}
		want := `{"resultType":"input_required","inputRequests":{"in1":{"method":"` + method + `"` + params +
			`}},"requestState":"` + state + `",` + serverInfoMeta + `}`
		if got := p.expectRaw(id); !sameJSON([]byte(got), want) {
			t.Errorf("id %v = %s\nwant %s", id, got, want)
		}
		return state
	}
	retry := func(id any, tool string, args map[string]any, state string, in any) {
		t.Helper()
		p.modernTool(id, tool, args, all, map[string]any{"requestState": state, "inputResponses": map[string]any{"in1": in}})
	}

	p.modernTool(10, "x_sample", map[string]any{"prompt": "tell me"}, all, nil)
	state := inputRequired(10, "sampling/createMessage",
		`{"messages":[{"role":"user","content":{"type":"text","text":"tell me"}}],"maxTokens":100}`, 1)
	answer := map[string]any{"role": "assistant", "content": map[string]any{"type": "text", "text": "sure"}, "model": "m"}
	retry(11, "x_sample", map[string]any{"prompt": "tell me"}, state, answer)
	if got, want := p.expectRaw(11), `{"content":[{"type":"text","text":"sampled: sure"}],"resultType":"complete",`+serverInfoMeta+`}`; !sameJSON([]byte(got), want) {
		t.Errorf("retried sample = %s, want %s", got, want)
	}
	// A state may be used again; an unknown one, one issued for another
	// tool, or a missing answer, get a new input request.
	retry(12, "x_sample", nil, state, map[string]any{"content": map[string]any{"type": "text", "text": "again"}})
	if got := p.expectText(12); got != "sampled: again" {
		t.Errorf("sample = %q", got)
	}
	retry(13, "x_sample", nil, "fake-state-99", answer)
	inputRequired(13, "sampling/createMessage", `{"messages":[{"role":"user","content":{"type":"text","text":"hi"}}],"maxTokens":100}`, 2)
	retry(14, "x_elicit", nil, state, map[string]any{"action": "accept"})
	elicitParams := `{"message":"name?","requestedSchema":{"properties":{"name":{"type":"string"}},"type":"object"}}` // as legacy
	elicitState := inputRequired(14, "elicitation/create", elicitParams, 3)
	p.modernTool(15, "x_elicit", nil, all, map[string]any{"requestState": elicitState})
	inputRequired(15, "elicitation/create", elicitParams, 4)

	retry(16, "x_elicit", map[string]any{"message": "age?"}, elicitState, map[string]any{"action": "accept", "content": map[string]any{"name": "Ann"}})
	if got := p.expectText(16); got != `elicited: {"action":"accept","content":{"name":"Ann"}}` {
		t.Errorf("elicit = %q", got)
	}
	p.modernTool(17, "x_roots", nil, all, nil)
	rootsState := inputRequired(17, "roots/list", "", 5)
	retry(18, "x_roots", nil, rootsState, json.RawMessage(`{"roots":[{"uri":"file:///tmp","name":"tmp"}]}`))
	if got := p.expectText(18); got != `roots: [{"uri":"file:///tmp","name":"tmp"}]` {
		t.Errorf("roots = %q", got)
	}

	var got []string
	for _, e := range readEvents(t, p.stateDir, pid) {
		switch e.Event {
		case "input-required":
			got = append(got, fmt.Sprintf("%s %s %s %s", e.ID, e.Tool, e.Method, e.RequestState))
		case "server-request":
			t.Errorf("server-request event %+v in the modern era", e)
		}
	}
	want := []string{
		"10 x_sample sampling/createMessage fake-state-1",
		"13 x_sample sampling/createMessage fake-state-2",
		"14 x_elicit elicitation/create fake-state-3",
		"15 x_elicit elicitation/create fake-state-4",
		"17 x_roots roots/list fake-state-5",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("input-required events = %q\nwant %q", got, want)
	}
	p.stdin.Close()
	for _, m := range p.drain() {
		t.Errorf("unexpected message %q", m.Line)
	}
}

// listen opens a listen stream and checks its acknowledgement.
func (p *proc) listen(id any, meta, notifications map[string]any, wantAck string) {
	p.t.Helper()
	p.modern(id, "subscriptions/listen", map[string]any{"notifications": notifications}, meta)
	m := p.expectNotification("notifications/subscriptions/acknowledged")
	if !sameJSON(m.Params, wantAck) {
		p.t.Errorf("acknowledgement params = %s, want %s", m.Params, wantAck)
	}
}

// expectChange checks that the next line is the change notification method
// on the listen stream sub, with params having uri if it is not "".
func (p *proc) expectChange(method, sub, uri string) {
	p.t.Helper()
	m := p.expectNotification(method)
	want := `{"_meta":{"io.modelcontextprotocol/subscriptionId":` + sub + `}}`
	if uri != "" {
		want = `{"_meta":{"io.modelcontextprotocol/subscriptionId":` + sub + `},"uri":"` + uri + `"}`
	}
	if !sameJSON(m.Params, want) {
		p.t.Errorf("%s params = %s, want %s", method, m.Params, want)
	}
}

func TestModernListen(t *testing.T) {
	p := start(t, "-era", "modern")
	pid := p.cmd.Process.Pid
	meta := newMeta(nil)
	counter := "fake://fake/counter"
	p.listen("a", meta, map[string]any{"toolsListChanged": true, "promptsListChanged": false, "resourceSubscriptions": []string{counter}},
		`{"_meta":{"io.modelcontextprotocol/subscriptionId":"a"},"notifications":{"toolsListChanged":true,"resourceSubscriptions":["fake://fake/counter"]}}`)
	p.listen(7, meta, map[string]any{"promptsListChanged": true, "resourcesListChanged": true, "toolsListChanged": false},
		`{"_meta":{"io.modelcontextprotocol/subscriptionId":7},"notifications":{"promptsListChanged":true,"resourcesListChanged":true}}`)
	p.listen(8, meta, map[string]any{"toolsListChanged": true, "resourceSubscriptions": []string{"fake://fake/hello", counter}},
		`{"_meta":{"io.modelcontextprotocol/subscriptionId":8},"notifications":{"toolsListChanged":true,"resourceSubscriptions":["fake://fake/hello","fake://fake/counter"]}}`)
	p.modern(9, "subscriptions/listen", nil, meta)
	p.expectErrorData(9, -32602, "invalid params: notifications is required", "")
	p.modern(10, "subscriptions/listen", map[string]any{"notifications": map[string]any{"toolsListChanged": "yes"}}, meta)
	p.expectErrorData(10, -32602, "invalid params", "")

	p.modernTool(11, "list_changed", nil, meta, nil)
	p.expectChange("notifications/tools/list_changed", `"a"`, "")
	p.expectChange("notifications/tools/list_changed", "8", "")
	if got := p.expectText(11); got != "sent" {
		t.Errorf("list_changed = %q", got)
	}
	p.modernTool(12, "prompts_changed", nil, meta, nil)
	p.expectChange("notifications/prompts/list_changed", "7", "")
	p.expectText(12)
	p.modernTool(13, "resources_changed", nil, meta, nil)
	p.expectChange("notifications/resources/list_changed", "7", "")
	p.expectText(13)
	p.modernTool(14, "touch", nil, meta, nil)
	p.expectChange("notifications/resources/updated", `"a"`, counter)
	p.expectChange("notifications/resources/updated", "8", counter)
	if got := p.expectText(14); got != "counter 1" {
		t.Errorf("touch = %q", got)
	}

	// After cancellation, nothing more on the stream, and no answer.
	p.send(map[string]any{"jsonrpc": "2.0", "method": "notifications/cancelled", "params": map[string]any{"requestId": "a"}})
	p.modernTool(15, "touch", nil, meta, nil)
	p.expectChange("notifications/resources/updated", "8", counter)
	p.expectText(15)
	p.modernTool(16, "list_changed", nil, meta, nil)
	p.expectChange("notifications/tools/list_changed", "8", "")
	p.expectText(16)
	p.waitEvent(pid, "listen-cancelled event", func(e event) bool { return e.Event == "listen-cancelled" && string(e.ID) == `"a"` })

	var listens []event
	for _, e := range readEvents(t, p.stateDir, pid) {
		if e.Event == "listen" {
			listens = append(listens, e)
		}
	}
	want := []struct{ id, notifications, uris string }{
		{`"a"`, `{"toolsListChanged":true,"promptsListChanged":false,"resourceSubscriptions":["fake://fake/counter"]}`, `["fake://fake/counter"]`},
		{`7`, `{"promptsListChanged":true,"resourcesListChanged":true,"toolsListChanged":false}`, `[]`},
		{`8`, `{"toolsListChanged":true,"resourceSubscriptions":["fake://fake/hello","fake://fake/counter"]}`, `["fake://fake/hello","fake://fake/counter"]`},
	}
	if len(listens) != len(want) {
		t.Fatalf("listen events %+v, want %d", listens, len(want))
	}
	for i, w := range want {
		e := listens[i]
		uris, _ := json.Marshal(append([]string{}, e.URIs...))
		if string(e.ID) != w.id || !sameJSON(e.Notifications, w.notifications) || string(uris) != w.uris {
			t.Errorf("listen event %+v, want %+v", e, w)
		}
	}

	// Open streams are never answered.
	p.stdin.Close()
	for _, m := range p.drain() {
		t.Errorf("unexpected message %q", m.Line)
	}
	if code := p.wait(); code != 0 {
		t.Errorf("exit code %d, want 0", code)
	}
}

func TestModernListenCapabilities(t *testing.T) {
	p := start(t, "-era", "modern", "-capabilities", "tools,prompts")
	meta := newMeta(nil)
	p.listen(1, meta, map[string]any{"toolsListChanged": true, "promptsListChanged": true, "resourcesListChanged": true,
		"resourceSubscriptions": []string{"fake://fake/counter"}},
		`{"_meta":{"io.modelcontextprotocol/subscriptionId":1},"notifications":{"toolsListChanged":true,"promptsListChanged":true}}`)
	p.listen(2, meta, map[string]any{}, `{"_meta":{"io.modelcontextprotocol/subscriptionId":2},"notifications":{}}`)
	p.modernTool(3, "resources_changed", nil, meta, nil)
	p.expectText(3)
	p.modernTool(4, "touch", nil, meta, nil)
	p.expectText(4)
}

func TestBothEras(t *testing.T) {
	p := start(t, "-era", "both")
	pid := p.cmd.Process.Pid
	if r := p.initialize("2025-06-18"); r.ProtocolVersion != "2025-06-18" {
		t.Errorf("initialize answered %+v", r)
	}
	meta := newMeta(map[string]any{"sampling": map[string]any{}})

	// Legacy requests are served as legacy ones.
	p.request(1, "ping", nil)
	if got := p.expectRaw(1); got != "{}" {
		t.Errorf("ping = %s", got)
	}
	p.request(2, "server/discover", nil)
	p.expectError(2, -32601, "method not found: server/discover")
	p.callTool(3, "sample", map[string]any{"prompt": "legacy"})
	m := p.expectServerRequest("sampling/createMessage")
	p.respond(m.ID, map[string]any{"content": map[string]any{"type": "text", "text": "old"}})
	if got := p.expectText(3); got != "sampled: old" {
		t.Errorf("legacy sample = %q", got)
	}

	// Modern ones as modern ones, whatever the initialize.
	p.modern(4, "ping", nil, meta)
	p.expectError(4, -32601, "method not found: ping")
	p.modern(5, "server/discover", nil, meta)
	var d struct{ SupportedVersions json.RawMessage }
	if got := p.expectRaw(5); json.Unmarshal([]byte(got), &d) != nil ||
		!sameJSON(d.SupportedVersions, `["2026-07-28","2025-11-25","2025-06-18","2025-03-26","2024-11-05"]`) {
		t.Errorf("server/discover = %s", got)
	}
	p.modernTool(6, "sample", map[string]any{"prompt": "modern"}, meta, nil)
	var ir struct {
		ResultType   string `json:"resultType"`
		RequestState string `json:"requestState"`
	}
	p.expectResult(6, &ir)
	if ir.ResultType != "input_required" || ir.RequestState != "fake-state-1" {
		t.Errorf("modern sample answered %+v", ir)
	}
	p.modern(7, "tools/list", nil, map[string]any{mVersion: "2024-11-05", mCaps: map[string]any{}})
	p.expectErrorData(7, -32022, "unsupported protocol version",
		`{"supported":["2026-07-28","2025-11-25","2025-06-18","2025-03-26","2024-11-05"],"requested":"2024-11-05"}`)

	// Change notifications go to listen streams; those caused by legacy
	// requests also go out as in the legacy protocol.
	p.listen("L", meta, map[string]any{"toolsListChanged": true, "resourceSubscriptions": []string{"fake://fake/counter"}},
		`{"_meta":{"io.modelcontextprotocol/subscriptionId":"L"},"notifications":{"toolsListChanged":true,"resourceSubscriptions":["fake://fake/counter"]}}`)
	p.callTool(8, "list_changed", nil)
	if m := p.expectNotification("notifications/tools/list_changed"); m.Params != nil {
		t.Errorf("legacy list_changed has params %s", m.Params)
	}
	p.expectChange("notifications/tools/list_changed", `"L"`, "")
	p.expectText(8)
	p.modernTool(9, "list_changed", nil, meta, nil)
	p.expectChange("notifications/tools/list_changed", `"L"`, "")
	p.expectText(9)
	p.request(10, "resources/subscribe", map[string]any{"uri": "fake://fake/counter"})
	p.expect(10)
	p.modernTool(11, "touch", nil, meta, nil)
	p.expectChange("notifications/resources/updated", `"L"`, "fake://fake/counter")
	p.expectText(11)
	p.callTool(12, "touch", nil)
	if m := p.expectNotification("notifications/resources/updated"); !sameJSON(m.Params, `{"uri":"fake://fake/counter"}`) {
		t.Errorf("legacy updated params = %s", m.Params)
	}
	p.expectChange("notifications/resources/updated", `"L"`, "fake://fake/counter")
	if got := p.expectText(12); got != "counter 2" {
		t.Errorf("touch = %q", got)
	}

	for id, era := range map[string]string{"0": "legacy", "3": "legacy", "4": "modern", "7": "modern", "12": "legacy"} {
		if e := p.requestEvent(id); e.Era != era {
			t.Errorf("request event %+v, want era %s", e, era)
		}
	}
	if e := p.requestEvent("6"); e.Meta == nil {
		t.Errorf("modern request event %+v has no meta", e)
	}
	if e := p.requestEvent("3"); e.Meta != nil {
		t.Errorf("legacy request event %+v has meta", e)
	}
	if _, ok := p.findEvent(pid, func(e event) bool { return e.Event == "input-required" && string(e.ID) == "6" }); !ok {
		t.Error("no input-required event for request 6")
	}
}
