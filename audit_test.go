package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// auditLine is one line of the audit trail, decoded.
type auditLine struct {
	Time       string          `json:"time"`
	Client     string          `json:"client"`
	Session    *string         `json:"session"`
	Server     string          `json:"server"`
	Method     string          `json:"method"`
	Name       string          `json:"name"`
	DurationMs *float64        `json:"durationMs"`
	Outcome    string          `json:"outcome"`
	Code       int             `json:"code"`
	BytesIn    *int            `json:"bytesIn"`
	BytesOut   *int            `json:"bytesOut"`
	Arguments  json.RawMessage `json:"arguments"`
	Result     json.RawMessage `json:"result"`
	Action     string          `json:"action"`
	Remote     string          `json:"remote"`
	Reason     string          `json:"reason"`
}

// readAudit returns the lines of the audit file at path, each checked to be
// one JSON object with the fields every call line has.
func readAudit(t *testing.T, path string) []auditLine {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var lines []auditLine
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var l auditLine
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		if err := dec.Decode(&l); err != nil || dec.More() {
			t.Fatalf("audit line %q is not one JSON object: %v", sc.Bytes(), err)
		}
		if ts, err := time.Parse(time.RFC3339Nano, l.Time); err != nil || !strings.HasSuffix(l.Time, "Z") || len(l.Time) != len("2006-01-02T15:04:05.000Z") || ts.IsZero() {
			t.Errorf("audit line %s: time %q is not RFC 3339 in UTC to the millisecond", sc.Bytes(), l.Time)
		}
		if l.Action == "" && (l.Session == nil || l.DurationMs == nil || l.BytesIn == nil || l.BytesOut == nil) {
			t.Errorf("audit line %s lacks session, durationMs, bytesIn or bytesOut", sc.Bytes())
		}
		lines = append(lines, l)
	}
	return lines
}

// auditOf returns the one line of the trail about the call of name with
// method in session, failing the test if there is not exactly one.
func auditOf(t *testing.T, lines []auditLine, session, method, name string) auditLine {
	t.Helper()
	var found []auditLine
	for _, l := range lines {
		if l.Method == method && l.Name == name && l.Session != nil && *l.Session == session {
			found = append(found, l)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d audit lines of %s %q, want 1: %+v", len(found), method, name, lines)
	}
	return found[0]
}

func TestAuditLinesMatchCalls(t *testing.T) {
	t.Parallel()
	tg := startGateway(t, `{"audit":{"file":"STATE/audit.jsonl"},"mcpServers":{
		"a": {"command":"FAKE","args":["-state","STATE","-name","a"],"requestTimeout":"1s"}}}`)
	path := filepath.Join(tg.dir, "audit.jsonl")
	c := connect(t, tg.url)

	if got := toolText(t, c.callTool("1", "echo", `{"text":"hello"}`)); got != "hello" {
		t.Fatalf("echo = %q", got)
	}
	// A client without sampling: the server's request fails, and so the
	// tool's result says isError.
	c.callTool("2", "sample", `{}`)
	if m := c.callTool("3", "nope", `{}`); m.Error == nil || m.Error.Code != codeInvalidParams {
		t.Fatalf("unknown tool = %+v", m)
	}
	if m := c.callTool("4", "hang", `{}`); m.Error == nil || m.Error.Code != codeTimeout {
		t.Fatalf("hang = %+v, want a timeout", m)
	}
	c.request("5", "resources/read", `{"uri":"fake://a/hello"}`)

	// A call the client cancels.
	p := newHTTPPeer(t, tg.url, `{}`)
	sleeping := make(chan struct{})
	go func() {
		defer close(sleeping)
		p.callID(`"long"`, "tools/call", `{"name":"sleep","arguments":{"ms":60000}}`)
	}()
	pid := fakeProcesses(t, tg.dir)[0].PID
	waitFor(t, 10*time.Second, "the sleep call to reach the server", func() bool {
		return slices.ContainsFunc(fakeEvents(t, tg.dir, pid), func(e fakeEvent) bool { return e.Tool == "sleep" })
	})
	p.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"long"}}`)
	<-sleeping

	// A modern request: no session.
	if resp, err := goSDKPost(t.Context(), t, tg.url, "tools/call", sleepCall("9", 1)); err != nil {
		t.Fatal(err)
	} else {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	// A -stdio client.
	sp := newStdioPeer(t, tg.gw, `{}`)
	sp.call("tools/call", `{"name":"whoami","arguments":{}}`)

	var lines []auditLine
	waitFor(t, 10*time.Second, "the cancelled call's audit line", func() bool {
		lines = readAudit(t, path)
		return len(lines) == 8
	})
	check := func(l auditLine, client, session, server, outcome string, code int) {
		t.Helper()
		if l.Client != client || *l.Session != session || l.Server != server || l.Outcome != outcome || l.Code != code {
			t.Errorf("audit line of %s %q = client %q session %q server %q outcome %q code %d; want %q %q %q %q %d",
				l.Method, l.Name, l.Client, *l.Session, l.Server, l.Outcome, l.Code, client, session, server, outcome, code)
		}
		if l.Arguments != nil || l.Result != nil {
			t.Errorf("audit line of %s %q holds arguments or a result, which no server asked for: %s %s", l.Method, l.Name, l.Arguments, l.Result)
		}
	}
	check(auditOf(t, lines, c.sid, "tools/call", "echo"), "anonymous", c.sid, "a", "ok", 0)
	check(auditOf(t, lines, c.sid, "tools/call", "sample"), "anonymous", c.sid, "a", "tool_error", 0)
	check(auditOf(t, lines, c.sid, "tools/call", "nope"), "anonymous", c.sid, "", "error", codeInvalidParams)
	hang := auditOf(t, lines, c.sid, "tools/call", "hang")
	check(hang, "anonymous", c.sid, "a", "timeout", codeTimeout)
	if *hang.DurationMs < 1000 {
		t.Errorf("the timed-out call took %v ms by the audit, under its requestTimeout (1s)", *hang.DurationMs)
	}
	check(auditOf(t, lines, c.sid, "resources/read", "fake://a/hello"), "anonymous", c.sid, "a", "ok", 0)
	check(auditOf(t, lines, p.sid, "tools/call", "sleep"), "anonymous", p.sid, "a", "cancelled", 0)
	check(auditOf(t, lines, "", "tools/call", "sleep"), "anonymous", "", "a", "ok", 0) // the modern call
	check(auditOf(t, lines, "", "tools/call", "whoami"), "stdio", "", "a", "ok", 0)
	echo := auditOf(t, lines, c.sid, "tools/call", "echo")
	if *echo.BytesIn != len(`{"name":"echo","arguments":{"text":"hello"}}`) || *echo.BytesOut == 0 {
		t.Errorf("echo: bytesIn %d, bytesOut %d; want the params' size and the answer's", *echo.BytesIn, *echo.BytesOut)
	}
}

// answerOf serves request line from session s as a legacy client's, and
// returns the answer as written.
func answerOf(t *testing.T, g *Gateway, s *session, line string) string {
	t.Helper()
	msg, werr := decodeMessage([]byte(line))
	if werr != nil {
		t.Fatal(werr.Message)
	}
	var out bytes.Buffer
	if r := g.handle(t.Context(), s, legacyInbound(msg), nil); r != nil {
		r.WriteTo(&out)
	}
	return out.String()
}

func TestAuditSeesRefusalsTheClientCannotTellFromUnknownNames(t *testing.T) {
	t.Parallel()
	// Two servers offer resources, so that corral, not a server, answers a
	// URI that none lists (catalog.resolveURI).
	tg := startGateway(t, `{"audit":{"file":"STATE/audit.jsonl"},"mcpServers":{
		"a": {"command":"FAKE","args":["-state","STATE","-name","a"]},
		"b": {"command":"FAKE","args":["-state","STATE","-name","b"],"prefix":"b"}}}`)
	path := filepath.Join(tg.dir, "audit.jsonl")
	// alice sees none of a's echo tool, nor its resource hello.
	alice := principal{name: "alice", view: &view{name: "no echo", allows: func(k kind, server, name string, _ json.RawMessage) bool {
		return name != "echo" && name != "fake://a/hello"
	}}}
	s := tg.gw.sessions.newSession(nil, alice, "alice-1")
	t.Cleanup(func() { tg.gw.sessions.endSession(s) })

	refused := answerOf(t, tg.gw, s, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}`)
	unknown := answerOf(t, tg.gw, s, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ohce","arguments":{"text":"x"}}}`)
	if strings.ReplaceAll(unknown, "ohce", "echo") != refused {
		t.Errorf("a tool outside the view was answered\n%s\nand an unknown one\n%s\nwant the same answer", refused, unknown)
	}
	readRefused := answerOf(t, tg.gw, s, `{"jsonrpc":"2.0","id":2,"method":"resources/read","params":{"uri":"fake://a/hello"}}`)
	readUnknown := answerOf(t, tg.gw, s, `{"jsonrpc":"2.0","id":2,"method":"resources/read","params":{"uri":"fake://z/hello"}}`)
	if strings.ReplaceAll(readUnknown, "fake://z/hello", "fake://a/hello") != readRefused {
		t.Errorf("a resource outside the view was answered\n%s\nand an unknown one\n%s\nwant the same answer", readRefused, readUnknown)
	}
	for _, p := range fakeProcesses(t, tg.dir) {
		for _, e := range fakeEvents(t, tg.dir, p.PID) {
			if e.Tool == "echo" || e.Method == "resources/read" {
				t.Errorf("a server received a refused call: %+v", e)
			}
		}
	}

	lines := readAudit(t, path)
	for _, want := range []struct{ method, name, server, outcome string }{
		{"tools/call", "echo", "a", "refused"},
		{"tools/call", "ohce", "", "error"},
		{"resources/read", "fake://a/hello", "a", "refused"},
		{"resources/read", "fake://z/hello", "", "error"},
	} {
		l := auditOf(t, lines, "alice-1", want.method, want.name)
		if l.Client != "alice" || l.Server != want.server || l.Outcome != want.outcome || l.Code == 0 {
			t.Errorf("audit line of %s %s = %+v; want client alice, server %q, outcome %q with the code answered", want.method, want.name, l, want.server, want.outcome)
		}
	}
}

func TestAuditWritesArgumentsOnlyWhenAskedAndMasksSecrets(t *testing.T) {
	t.Parallel()
	tg := startGateway(t, `{"audit":{"file":"STATE/audit.jsonl"},"mcpServers":{
		"a": {"command":"FAKE","args":["-state","STATE","-name","a","-prefix","a_"],"audit":{"arguments":true}},
		"b": {"command":"FAKE","args":["-state","STATE","-name","b","-prefix","b_"]}}}`)
	c := connect(t, tg.url)
	args := `{"text":"hello","api_key":"sekrit1","nested":{"Authorization":"Bearer sekrit2","list":[{"password":"sekrit3"}]},` +
		`"endpoint":"https://user:sekrit4@h.example/x?q=sekrit5","note":"see https://h.example/ for more"}`
	toolText(t, c.callTool("1", "a_echo", args))
	toolText(t, c.callTool("2", "b_echo", args))
	data := mustRead(t, filepath.Join(tg.dir, "audit.jsonl"))
	if bytes.Contains(data, []byte("sekrit")) {
		t.Errorf("the audit trail holds a secret:\n%s", data)
	}
	lines := readAudit(t, filepath.Join(tg.dir, "audit.jsonl"))
	a := auditOf(t, lines, c.sid, "tools/call", "a_echo")
	wantArgs := `{"text":"hello","api_key":"****","nested":{"Authorization":"****","list":[{"password":"****"}]},` +
		`"endpoint":"https://user:****@h.example/x?q=****","note":"see https://h.example/ for more"}`
	if !sameJSON(a.Arguments, []byte(wantArgs)) {
		t.Errorf("a's arguments in the trail = %s, want %s", a.Arguments, wantArgs)
	}
	if !strings.Contains(string(a.Result), `"text":"hello"`) {
		t.Errorf("a's result in the trail = %s, want echo's", a.Result)
	}
	b := auditOf(t, lines, c.sid, "tools/call", "b_echo")
	if b.Arguments != nil || b.Result != nil {
		t.Errorf("b, which asked for no arguments, has them in the trail: %s %s", b.Arguments, b.Result)
	}
}

func TestAuditRotationKeepsTheBound(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	const maxBytes, keep = 4096, 2
	tr := newAuditTrail(testLogger(t))
	tr.configure(&Config{Audit: AuditConfig{File: path, MaxBytes: maxBytes, Keep: keep}})
	defer tr.close()
	const n = 500
	for i := range n {
		tr.write([]byte(fmt.Sprintf(`{"n":%d,"pad":"%s"}`+"\n", i, strings.Repeat("x", 60))))
	}
	var all []int
	var total int64
	for i := keep; i >= 0; i-- {
		p := path
		if i > 0 {
			p += "." + strconv.Itoa(i)
		}
		info, err := os.Stat(p)
		if err != nil {
			t.Fatalf("rotated file %s: %v", p, err)
		}
		if info.Size() > maxBytes {
			t.Errorf("%s is %d bytes, over maxBytes (%d)", p, info.Size(), maxBytes)
		}
		total += info.Size()
		for line := range strings.Lines(string(mustRead(t, p))) {
			var l struct{ N int }
			if err := json.Unmarshal([]byte(line), &l); err != nil {
				t.Fatalf("%s: line %q: %v", p, line, err)
			}
			all = append(all, l.N)
		}
	}
	if _, err := os.Stat(path + "." + strconv.Itoa(keep+1)); !os.IsNotExist(err) {
		t.Errorf("a file past keep exists: %v", err)
	}
	if total > (keep+1)*maxBytes {
		t.Errorf("the trail takes %d bytes, over (keep+1)*maxBytes = %d", total, (keep+1)*maxBytes)
	}
	// The files hold the newest lines, in order, none missing.
	if len(all) == 0 || all[len(all)-1] != n-1 {
		t.Fatalf("the newest line is not last: %v", all)
	}
	for i := 1; i < len(all); i++ {
		if all[i] != all[i-1]+1 {
			t.Fatalf("lines out of order or missing across rotations: %v", all)
		}
	}
	if got := tr.lostLines(); got != 0 {
		t.Errorf("%d lines lost", got)
	}
}

func TestAuditFileCorralCannotWriteIsAConfigError(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, tt := range []struct{ file, want string }{
		{filepath.Join(dir, "no-such-dir", "audit.jsonl"), "create the directory"},
		{dir, "is a directory"},
	} {
		_, err := ParseConfig(filepath.Join(dir, "c.json"), []byte(`{"audit":{"file":`+string(jsonString(tt.file))+`}}`), nil, nil)
		if err == nil || !strings.Contains(err.Error(), "audit.file") || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("audit file %s: err = %v, want one naming audit.file and saying %q", tt.file, err, tt.want)
		}
	}
	for _, tt := range []struct{ audit, want string }{
		{`{"file":"a.jsonl","maxBytes":-1}`, "audit.maxBytes"},
		{`{"file":"a.jsonl","maxBytes":100}`, "audit.maxBytes"},
		{`{"file":"a.jsonl","keep":-1}`, "audit.keep"},
		{`{"maxBytes":100000}`, "audit.file"},
		{`{"file":"a.jsonl","kep":3}`, `did you mean "keep"`},
	} {
		_, err := ParseConfig(filepath.Join(dir, "c.json"), []byte(`{"audit":`+tt.audit+`}`), nil, nil)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("audit %s: err = %v, want one saying %q", tt.audit, err, tt.want)
		}
	}
	_, err := ParseConfig(filepath.Join(dir, "c.json"), []byte(`{"mcpServers":{"a":{"command":"x","audit":{"argument":true}}}}`), nil, nil)
	if err == nil || !strings.Contains(err.Error(), `mcpServers.a.audit`) || !strings.Contains(err.Error(), `did you mean "arguments"`) {
		t.Errorf("a server's audit with a typo: err = %v", err)
	}
	// A relative file starts from the config's directory.
	c, err := ParseConfig(filepath.Join(dir, "c.json"), []byte(`{"audit":{"file":"rel.jsonl"},"mcpServers":{"a":{"command":"x"}}}`), nil, nil)
	if err != nil || c.audit().File != filepath.Join(dir, "rel.jsonl") || c.audit().MaxBytes != defaultAuditMaxBytes || c.audit().Keep != defaultAuditKeep {
		t.Errorf("relative audit file: %+v, %v", c.audit(), err)
	}
}

func TestAuditToStdoutIsRefusedWithStdio(t *testing.T) {
	t.Parallel()
	path := writeConfig(t, `{"audit":{"file":"-"},"mcpServers":{"a":{"command":"FAKE"}}}`, t.TempDir())
	var stdout, stderr bytes.Buffer
	code := run([]string{"-stdio", "-config", path}, strings.NewReader(""), &stdout, &stderr)
	if code != 2 || !strings.Contains(stderr.String(), "audit.file") || !strings.Contains(stderr.String(), "MCP channel") {
		t.Errorf("-stdio with audit to stdout: exit %d, stderr %q; want 2 and an error naming audit.file", code, stderr.String())
	}
	if stdout.Len() != 0 {
		t.Errorf("stdout got %q", stdout.String())
	}
}

func TestAuditWriteFailureNeverFailsTheCall(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full, whose writes fail")
	}
	gw, log, _ := startLoggedGateway(t, `{"audit":{"file":"/dev/full"},"mcpServers":{"a": {"command":"FAKE","args":["-state","STATE"]}}}`)
	p := newStdioPeer(t, gw, `{}`)
	for i := range 3 {
		m, _ := p.call("tools/call", `{"name":"echo","arguments":{"text":"still here"}}`)
		if got := text(t, m); got != "still here" {
			t.Fatalf("call %d with the trail failing = %q", i, got)
		}
	}
	if got := gw.audit.lostLines(); got != 3 {
		t.Errorf("lost lines = %d, want 3", got)
	}
	if got, _ := log.linesMatching(0, "cannot write the audit trail"); len(got) != 1 {
		t.Errorf("logged the failure %d times, want once a minute at most: %q", len(got), got)
	}
}

func TestAuditReloadChangesTheTrail(t *testing.T) {
	t.Parallel()
	dir := stateDir(t)
	src := `{"audit":{"file":"STATE/one.jsonl"},"mcpServers":{"a": {"command":"FAKE","args":["-state","STATE"]}}}`
	cfg, err := LoadConfig(writeConfig(t, src, dir), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	gw := NewGateway(cfg, testLogger(t), nil)
	gw.Start()
	t.Cleanup(func() { gw.Stop(nil); requireGone(t, dir) })
	p := newStdioPeer(t, gw, `{}`)
	reload := func(src string) {
		t.Helper()
		cfg, err := LoadConfig(writeConfig(t, src, dir), nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if r := gw.Reload(cfg); len(r.Changed) > 0 {
			t.Errorf("a change of the audit trail restarted %v", r.Changed)
		}
	}
	call := func(text string) {
		t.Helper()
		if m, _ := p.call("tools/call", `{"name":"echo","arguments":{"text":"`+text+`"}}`); m.Error != nil {
			t.Fatal(m.Error.Message)
		}
	}
	call("one")
	reload(strings.Replace(src, "one.jsonl", "two.jsonl", 1))
	call("two")
	reload(`{"audit":{"file":"STATE/two.jsonl"},"mcpServers":{"a": {"command":"FAKE","args":["-state","STATE"],"audit":{"arguments":true}}}}`)
	call("three")
	reload(`{"mcpServers":{"a": {"command":"FAKE","args":["-state","STATE"],"audit":{"arguments":true}}}}`)
	call("four")

	one, two := readAudit(t, filepath.Join(dir, "one.jsonl")), readAudit(t, filepath.Join(dir, "two.jsonl"))
	if len(one) != 1 || len(two) != 2 {
		t.Fatalf("one.jsonl has %d lines, two.jsonl %d; want 1 and 2 (none after the trail was turned off)", len(one), len(two))
	}
	if two[0].Arguments != nil || !strings.Contains(string(two[1].Arguments), "three") {
		t.Errorf("arguments after reloads: %s, %s; want none, then the third call's", two[0].Arguments, two[1].Arguments)
	}
}

func TestAuditRecordsAdminActions(t *testing.T) {
	t.Parallel()
	tg := startGateway(t, adminConfig(t, `"audit":{"file":"STATE/audit.jsonl"},`, `"file":{"command":"FAKE","args":["-state","STATE","-name","file"]}`))
	base := strings.TrimSuffix(tg.url, mcpPath)
	if status, body := admin(t, base, "POST", adminServersPath, dynEntry("dyn", tg.dir, "d_")); status != 201 {
		t.Fatalf("POST = %d %s", status, body)
	}
	admin(t, base, "DELETE", adminServersPath+"/file", "")
	admin(t, base, "DELETE", adminServersPath+"/dyn", "")
	data := mustRead(t, filepath.Join(tg.dir, "audit.jsonl"))
	if bytes.Contains(data, []byte("hunter2")) {
		t.Errorf("the trail holds the registered server's secret: %s", data)
	}
	var got []string
	for _, l := range readAudit(t, filepath.Join(tg.dir, "audit.jsonl")) {
		if l.Client != "bearer token" || l.Remote == "" {
			t.Errorf("admin line %+v: want the caller (bearer token) and its address", l)
		}
		got = append(got, l.Action+" "+l.Server+" "+l.Outcome)
	}
	want := []string{"register dyn ok", "unregister file refused", "unregister dyn ok"}
	if !slices.Equal(got, want) {
		t.Errorf("admin lines = %q, want %q", got, want)
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// BenchmarkAuditCallLine is the cost of one call's audit line alone: built
// and written to a file (in the test's temporary directory), as
// Gateway.serve makes it for an echo tools/call.
func BenchmarkAuditCallLine(b *testing.B) {
	for _, args := range []bool{false, true} {
		name := "plain"
		if args {
			name = "arguments"
		}
		b.Run(name, func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "audit.jsonl")
			cfg := &Config{Audit: AuditConfig{File: path}, MCPServers: map[string]*ServerConfig{"a": {Audit: &ServerAudit{Arguments: args}}}}
			g := &Gateway{cfg: cfg, audit: newAuditTrail(testLogger(b))}
			g.audit.configure(cfg)
			defer g.audit.close()
			msg, _ := decodeMessage([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"}}}`))
			in := legacyInbound(msg)
			s := makeSession(nil, anonymousPrincipal)
			s.id = "0123456789abcdef0123456789abcdef"
			routed := &backend{name: "a"}
			r := resultReply(msg.ID, json.RawMessage(`{"content":[{"type":"text","text":"hello"}]}`))
			ctx := b.Context()
			b.ReportAllocs()
			cpu0 := processCPU() // this machine may be shared: CPU time, not only wall time
			for b.Loop() {
				g.audit.call(ctx, g.audit.clock(), s, in, routed, nil, r)
			}
			b.ReportMetric(float64((processCPU()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
		})
	}
}
