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

// timeout bounds every wait in these tests.
const timeout = 10 * time.Second

// msg is a line the server wrote to stdout.
type msg struct {
	Line   string          `json:"-"`
	JSON   bool            `json:"-"` // whether Line is a JSON object
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
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
// 30s lifetime. Every process recorded in the state directory is killed
// when the test ends.
func start(t *testing.T, args ...string) *proc {
	t.Helper()
	p := &proc{
		t:        t,
		stateDir: t.TempDir(),
		msgs:     make(chan msg),
		stop:     make(chan struct{}),
	}
	args = append([]string{"-state", p.stateDir, "-lifetime", "30s"}, args...)
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
	m := p.expect(id)
	if m.Error != nil {
		p.t.Fatalf("id %v: error %d %s", id, m.Error.Code, m.Error.Message)
	}
	var r struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
		IsError bool `json:"isError"`
	}
	if err := json.Unmarshal(m.Result, &r); err != nil {
		p.t.Fatalf("id %v: %v", id, err)
	}
	if len(r.Content) != 1 || r.Content[0].Type != "text" || r.IsError {
		p.t.Fatalf("id %v: unexpected result %s", id, m.Result)
	}
	return r.Content[0].Text
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
	p.request(0, "initialize", map[string]any{
		"protocolVersion": version,
		"capabilities":    map[string]any{},
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
			if !r.Capabilities.Tools.ListChanged || r.ServerInfo.Name != "alpha" || r.ServerInfo.Version != "1.0.0" {
				t.Errorf("unexpected result %+v", r)
			}
			p.request(1, "ping", nil)
			if m := p.expect(1); string(m.Result) != "{}" {
				t.Errorf("ping result = %s, want {}", m.Result)
			}
			text := p.expectTextOf(2, "whoami", nil)
			if want := fmt.Sprintf(`{"name":"alpha","pid":%d}`, p.cmd.Process.Pid); text != want {
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
	p := start(t, "-page-size", "2", "-extra-tools", "5", "-prefix", "x_")
	p.initialize("2025-11-25")
	seen := map[string]int{}
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
			if tool.Description == "" || tool.InputSchema["type"] != "object" || tool.InputSchema["properties"] == nil {
				t.Errorf("bad tool %+v", tool)
			}
		}
		if r.NextCursor == "" {
			break
		}
		cursor = r.NextCursor
	}
	want := []string{"echo", "whoami", "sleep", "hang", "big", "stderr", "garbage", "crash", "list_changed", "flood",
		"tool_000", "tool_001", "tool_002", "tool_003", "tool_004"}
	if len(seen) != len(want) || pages != 8 {
		t.Errorf("got %d tools in %d pages, want %d in 8: %v", len(seen), pages, len(want), seen)
	}
	for _, name := range want {
		if seen["x_"+name] != 1 {
			t.Errorf("tool x_%s seen %d times, want 1", name, seen["x_"+name])
		}
	}

	for i, bad := range []any{"nonsense", encodeCursor(0), encodeCursor(15), encodeCursor(99)} {
		p.request(100+i, "tools/list", map[string]any{"cursor": bad})
		p.expectError(100+i, -32602, "invalid cursor")
	}
	if got := p.expectTextOf(200, "x_tool_003", nil); !strings.Contains(got, `"pid"`) {
		t.Errorf("x_tool_003 = %s, want whoami's answer", got)
	}
}

func TestErrors(t *testing.T) {
	p := start(t)
	p.initialize("2025-11-25")
	p.sendLine("this is not json")
	p.expectError(nil, -32700, "parse error")
	p.request(1, "resources/list", nil)
	p.expectError(1, -32601, "method not found: resources/list")
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
	if !strings.Contains(strings.Join(sleeper.Args, " "), "-lifetime 30s") {
		t.Errorf("sleeper args %q lack -lifetime 30s", sleeper.Args)
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
