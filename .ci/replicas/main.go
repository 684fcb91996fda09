// Command replicas is the check of .ci/replicas/run: three corral replicas
// behind HAProxy with examples/haproxy.cfg (docs/operations.md, "Several
// replicas behind a load balancer"). It starts the replicas and HAProxy
// itself, so that it can signal them and time their exits, and stops all
// of them whatever happens. It prints what it measured, and exits 1 when
// a check fails.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

var (
	corralBin = flag.String("corral", "", "the corral binary")
	fakeBin   = flag.String("fakeserver", "", "the fakeserver binary")
	haproxyCf = flag.String("haproxy-cfg", "examples/haproxy.cfg", "HAProxy's config")
	work      = flag.String("work", "", "a directory for configs and state")
	sessions  = flag.Int("sessions", 60, "legacy sessions opened through HAProxy")
	loadFor   = flag.Duration("load", 3*time.Second, "how long each throughput run lasts")
)

// The drain settings of every replica; the bound of its exit after
// SIGTERM is their sum.
const (
	drainDelay      = 3 * time.Second
	shutdownTimeout = 3 * time.Second
	stopGrace       = 500 * time.Millisecond
	killGrace       = 1 * time.Second
)

var names = []string{"corral-0", "corral-1", "corral-2"}

type replica struct {
	name, addr, state string
	cmd               *exec.Cmd
	exited            chan struct{}
	exitedAt          time.Time
}

var (
	procs   []*exec.Cmd
	procsMu sync.Mutex
	failed  atomic.Bool
	client  = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}, Timeout: 30 * time.Second}
)

func logf(format string, args ...any) { fmt.Printf("replicas: "+format+"\n", args...) }

func check(ok bool, format string, args ...any) {
	if ok {
		logf("ok: "+format, args...)
		return
	}
	failed.Store(true)
	logf("FAIL: "+format, args...)
}

func fatal(format string, args ...any) {
	logf("FAIL: "+format, args...)
	stopAll()
	os.Exit(1)
}

func start(name string, args []string, env []string, out io.Writer) *exec.Cmd {
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		fatal("starting %s: %v", name, err)
	}
	procsMu.Lock()
	procs = append(procs, cmd)
	procsMu.Unlock()
	return cmd
}

// stopAll kills every process started, with its process group.
func stopAll() {
	procsMu.Lock()
	defer procsMu.Unlock()
	for _, c := range procs {
		syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
	}
}

func freePort() string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fatal("%v", err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func waitReady(url string) {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if resp, err := client.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	fatal("%s did not answer 200 within 30s", url)
}

func startReplica(i int) *replica {
	r := &replica{name: names[i], addr: freePort(), state: filepath.Join(*work, names[i]), exited: make(chan struct{})}
	os.MkdirAll(r.state, 0o755)
	cfg := fmt.Sprintf(`{"listen":%q,"replica":%q,"drainDelay":%q,"shutdownTimeout":%q,"stopGrace":%q,"killGrace":%q,"heartbeatInterval":"5s",
		"mcpServers":{"fake":{"command":%q,"args":["-state",%q,"-name","fake"]}}}`,
		r.addr, r.name, drainDelay.String(), shutdownTimeout.String(), stopGrace.String(), killGrace.String(), *fakeBin, r.state)
	path := filepath.Join(*work, r.name+".json")
	os.WriteFile(path, []byte(cfg), 0o644)
	logFile, _ := os.Create(filepath.Join(*work, r.name+".log"))
	r.cmd = start(r.name, []string{*corralBin, "-config", path}, nil, logFile)
	go func() {
		r.cmd.Wait()
		r.exitedAt = time.Now()
		close(r.exited)
	}()
	return r
}

// post sends an MCP message and returns the status, headers and the JSON
// message of the answer (from a JSON body or the last event of a stream).
func post(url string, body string, headers ...string) (int, http.Header, map[string]any, error) {
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, resp.Header, nil, err
	}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		var last []byte
		for _, line := range bytes.Split(data, []byte("\n")) {
			if d, ok := bytes.CutPrefix(line, []byte("data: ")); ok {
				last = d
			}
		}
		data = last
	}
	var m map[string]any
	if len(bytes.TrimSpace(data)) > 0 {
		if err := json.Unmarshal(data, &m); err != nil {
			return resp.StatusCode, resp.Header, nil, fmt.Errorf("%d, not JSON: %q", resp.StatusCode, data)
		}
	}
	return resp.StatusCode, resp.Header, m, nil
}

// toolText returns the text of a tools/call answer, or an error.
func toolText(status int, m map[string]any, err error) (string, error) {
	if err != nil {
		return "", err
	}
	if e, ok := m["error"].(map[string]any); ok {
		return "", fmt.Errorf("HTTP %d: %v", status, e["message"])
	}
	res, _ := m["result"].(map[string]any)
	content, _ := res["content"].([]any)
	if len(content) == 0 {
		return "", fmt.Errorf("HTTP %d: no content in %v", status, m)
	}
	text, _ := content[0].(map[string]any)["text"].(string)
	return text, nil
}

// legacy is a Streamable HTTP session (protocol 2025-06-18).
type legacy struct {
	url, sid string
	n        int
}

func (s *legacy) replica() string { name, _, _ := strings.Cut(s.sid, "."); return name }

func openLegacy(url string) (*legacy, error) {
	status, h, m, err := post(url, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"replicas-check","version":"1"}}}`)
	if err != nil {
		return nil, err
	}
	if status != 200 || h.Get("Mcp-Session-Id") == "" {
		return nil, fmt.Errorf("initialize: HTTP %d %v", status, m)
	}
	s := &legacy{url: url, sid: h.Get("Mcp-Session-Id")}
	if status, _, _, err := post(url, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, "Mcp-Session-Id", s.sid); err != nil || status != 202 {
		return nil, fmt.Errorf("notifications/initialized: HTTP %d %v", status, err)
	}
	return s, nil
}

func (s *legacy) echo(text string) error {
	s.n++
	status, _, m, err := post(s.url, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"text":%q}}}`, s.n, text), "Mcp-Session-Id", s.sid)
	got, err := toolText(status, m, err)
	if err == nil && got != text {
		err = fmt.Errorf("echo %q answered %q", text, got)
	}
	return err
}

// sseSession is a legacy HTTP+SSE session (protocol 2024-11-05).
type sseSession struct {
	base, endpoint string
	body           io.ReadCloser
	events         *bufio.Reader
}

func openSSE(base string) (*sseSession, error) {
	req, _ := http.NewRequest("GET", base+"/sse", nil)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := (&http.Client{Transport: client.Transport}).Do(req)
	if err != nil {
		return nil, err
	}
	s := &sseSession{base: base, body: resp.Body, events: bufio.NewReader(resp.Body)}
	if resp.StatusCode != 200 {
		resp.Body.Close()
		return nil, fmt.Errorf("GET /sse: %s", resp.Status)
	}
	ev, data, err := s.next()
	if err != nil || ev != "endpoint" {
		s.body.Close()
		return nil, fmt.Errorf("no endpoint event: %v", err)
	}
	s.endpoint = data
	return s, nil
}

func (s *sseSession) sessionID() string {
	_, id, _ := strings.Cut(s.endpoint, "sessionId=")
	return id
}

// next returns the next event of the stream, skipping heartbeats.
func (s *sseSession) next() (event, data string, err error) {
	for {
		line, err := s.events.ReadString('\n')
		if err != nil {
			return "", "", err
		}
		line = strings.TrimRight(line, "\n")
		switch {
		case strings.HasPrefix(line, "event: "):
			event = line[len("event: "):]
		case strings.HasPrefix(line, "data: "):
			data = line[len("data: "):]
		case line == "" && data != "":
			return event, data, nil
		}
	}
}

// request POSTs a request and reads its answer from the stream.
func (s *sseSession) request(id int, method, params string) (map[string]any, error) {
	status, _, _, err := post(s.base+s.endpoint, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`, id, method, params))
	if err != nil || status != 202 {
		return nil, fmt.Errorf("POST %s: HTTP %d %v", method, status, err)
	}
	for {
		_, data, err := s.next()
		if err != nil {
			return nil, err
		}
		var m map[string]any
		if json.Unmarshal([]byte(data), &m) == nil && m["id"] == float64(id) {
			return m, nil
		}
	}
}

// modern sends a 2026-07-28 request.
func modern(url, method, params string, caps string) (int, map[string]any, error) {
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":` + caps + `,"io.modelcontextprotocol/clientInfo":{"name":"replicas-check","version":"1"}}`
	var p struct{ Name string }
	json.Unmarshal([]byte("{"+params+"}"), &p)
	status, _, m, err := post(url, fmt.Sprintf(`{"jsonrpc":"2.0","id":"m","method":%q,"params":{%s,%s}}`, method, params, meta),
		"MCP-Protocol-Version", "2026-07-28", "Mcp-Method", method, "Mcp-Name", p.Name)
	return status, m, err
}

func modernEcho(url, text string) error {
	status, m, err := modern(url, "tools/call", fmt.Sprintf(`"name":"echo","arguments":{"text":%q}`, text), `{}`)
	got, err := toolText(status, m, err)
	if err == nil && got != text {
		err = fmt.Errorf("echo %q answered %q", text, got)
	}
	return err
}

// modernSample calls the tool that asks the client for sampling: the
// first answer is input_required with corral's requestState, the second,
// with the client's answer, the tool's. It returns the replica the state
// names.
func modernSample(url string, retryURL func(owner string) string) (string, error) {
	status, m, err := modern(url, "tools/call", `"name":"sample","arguments":{"prompt":"hi"}`, `{"sampling":{}}`)
	if err != nil || status != 200 {
		return "", fmt.Errorf("sample: HTTP %d %v %v", status, m, err)
	}
	res, _ := m["result"].(map[string]any)
	state, _ := res["requestState"].(string)
	inputs, _ := res["inputRequests"].(map[string]any)
	if res["resultType"] != "input_required" || len(inputs) != 1 {
		return "", fmt.Errorf("sample: want input_required, got %v", m)
	}
	owner, _, _ := strings.Cut(strings.TrimPrefix(state, "corral-"), ".")
	var key string
	for k := range inputs {
		key = k
	}
	params := fmt.Sprintf(`"name":"sample","arguments":{"prompt":"hi"},"inputResponses":{%q:{"role":"assistant","content":{"type":"text","text":"pong"},"model":"m"}},"requestState":%q`, key, state)
	status, m, err = modern(retryURL(owner), "tools/call", params, `{"sampling":{}}`)
	got, err := toolText(status, m, err)
	if err == nil && got != "sampled: pong" {
		err = fmt.Errorf("sample answered %q", got)
	}
	return owner, err
}

// throughput runs workers goroutines calling call for d, and returns
// calls per second and the errors.
func throughput(workers int, d time.Duration, call func(w int) error) (float64, int64) {
	var n, errs atomic.Int64
	var wg sync.WaitGroup
	end := time.Now().Add(d)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(end) {
				if call(w) != nil {
					errs.Add(1)
				}
				n.Add(1)
			}
		}()
	}
	wg.Wait()
	return float64(n.Load()) / d.Seconds(), errs.Load()
}

// fakeserversOf returns the PIDs of the processes whose command line
// names dir, a replica's fakeserver state directory.
func fakeserversOf(dir string) []string {
	var pids []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		cmdline, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil {
			continue
		}
		if bytes.Contains(cmdline, []byte(dir+"\x00")) && bytes.Contains(cmdline, []byte("fakeserver")) {
			stat, _ := os.ReadFile("/proc/" + e.Name() + "/stat")
			if i := bytes.LastIndexByte(stat, ')'); i > 0 && i+2 < len(stat) && stat[i+2] == 'Z' {
				continue // a zombie holds no resource but its entry
			}
			pids = append(pids, e.Name())
		}
	}
	return pids
}

func main() {
	flag.Parse()
	if *corralBin == "" || *fakeBin == "" || *work == "" {
		fatal("-corral, -fakeserver and -work are needed")
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() { <-sigs; fatal("interrupted") }()
	defer stopAll()

	reps := make([]*replica, len(names))
	for i := range names {
		reps[i] = startReplica(i)
	}
	for _, r := range reps {
		waitReady("http://" + r.addr + "/readyz")
	}
	front := freePort()
	hlog, _ := os.Create(filepath.Join(*work, "haproxy.log"))
	start("haproxy", []string{"haproxy", "-db", "-f", *haproxyCf}, []string{"CORRAL_LISTEN=" + front,
		"CORRAL_0=" + reps[0].addr, "CORRAL_1=" + reps[1].addr, "CORRAL_2=" + reps[2].addr}, hlog)
	base := "http://" + front
	url := base + "/mcp"
	waitReady(base + "/readyz")
	time.Sleep(2500 * time.Millisecond) // rise 2 at inter 1s: every replica up in HAProxy

	// 1. Legacy sessions through HAProxy: each one's calls reach its replica.
	perReplica := map[string]int{}
	var open []*legacy
	okCalls, calls := 0, 0
	for i := range *sessions {
		s, err := openLegacy(url)
		if err != nil {
			fatal("opening legacy session %d: %v", i, err)
		}
		perReplica[s.replica()]++
		open = append(open, s)
		for j := range 5 {
			calls++
			if s.echo(fmt.Sprintf("s%d-%d", i, j)) == nil {
				okCalls++
			}
		}
	}
	check(okCalls == calls && len(perReplica) == 3, "legacy Streamable HTTP: %d sessions (%v), %d/%d calls reached their replica", len(open), perReplica, okCalls, calls)
	// What a session's request gets at another replica, as a balancer without the rule would send it.
	other := reps[(indexOf(open[0].replica())+1)%3]
	status, _, m, _ := post("http://"+other.addr+"/mcp", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, "Mcp-Session-Id", open[0].sid)
	msg, _ := m["error"].(map[string]any)
	check(status == 404 && strings.Contains(fmt.Sprint(msg["message"]), `belongs to replica "`+open[0].replica()+`"`),
		"a session's request sent to another replica directly: %d %v", status, msg["message"])

	sseOK, sseN := 0, 15
	ssePer := map[string]int{}
	for i := range sseN {
		s, err := openSSE(base)
		if err != nil {
			fatal("opening /sse session %d: %v", i, err)
		}
		owner, _, _ := strings.Cut(s.sessionID(), ".")
		ssePer[owner]++
		good := true
		if _, err := s.request(0, "initialize", `{"protocolVersion":"2024-11-05","capabilities":{},"clientInfo":{"name":"replicas-check","version":"1"}}`); err != nil {
			good = false
		}
		for j := 1; j <= 3 && good; j++ {
			got, err := toolText(mustMsg(s.request(j, "tools/call", fmt.Sprintf(`{"name":"echo","arguments":{"text":"sse%d"}}`, j))))
			good = err == nil && got == fmt.Sprintf("sse%d", j)
		}
		if good {
			sseOK++
		}
		s.body.Close()
	}
	check(sseOK == sseN && len(ssePer) == 3, "legacy HTTP+SSE: %d/%d sessions (%v) had every POST to /messages?sessionId= reach the replica holding their stream", sseOK, sseN, ssePer)

	// 2. 2026-07-28 requests through HAProxy, round robin; sampling retries
	// routed by requestState.
	modernOK := 0
	for i := range 30 {
		if modernEcho(url, fmt.Sprintf("m%d", i)) == nil {
			modernOK++
		}
	}
	check(modernOK == 30, "2026-07-28 calls: %d/30 passed", modernOK)
	sampleOK, owners := 0, map[string]int{}
	for range 9 {
		owner, err := modernSample(url, func(string) string { return url })
		owners[owner]++
		if err == nil {
			sampleOK++
		} else {
			logf("sampling call: %v", err)
		}
	}
	check(sampleOK == 9 && len(owners) > 1, "2026-07-28 calls that need sampling: %d/9 passed, their requestState from replicas %v", sampleOK, owners)
	_, err := modernSample(url, func(owner string) string { return "http://" + reps[(indexOf(owner)+1)%3].addr + "/mcp" })
	check(err != nil && strings.Contains(err.Error(), "requestState belongs to replica"), "a retry sent to another replica directly: %v", err)

	// 3. Throughput: HAProxy against one replica direct.
	direct := "http://" + reps[0].addr + "/mcp"
	for _, target := range []struct{ name, url string }{{"one replica direct", direct}, {"HAProxy, 3 replicas", url}} {
		rate, errs := throughput(8, *loadFor, func(int) error { return modernEcho(target.url, "x") })
		logf("figure: 2026-07-28 tools/call echo, 8 clients, %s: %.0f calls/s, %d errors", target.name, rate, errs)
		ls := make([]*legacy, 8)
		for i := range ls {
			if ls[i], err = openLegacy(target.url); err != nil {
				fatal("%v", err)
			}
		}
		rate, errs = throughput(8, *loadFor, func(w int) error { return ls[w].echo("x") })
		logf("figure: legacy session tools/call echo, 8 sessions, %s: %.0f calls/s, %d errors", target.name, rate, errs)
	}

	// 4. SIGTERM of corral-1 under load, then SIGKILL of corral-2.
	type result struct {
		errs       atomic.Int64
		calls      atomic.Int64
		firstErr   atomic.Value // time.Time
		recovered  atomic.Value // time.Time
		lastErrMsg atomic.Value
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	byReplica := map[string][]*result{}
	var mu sync.Mutex
	for i := range 30 {
		s, err := openLegacy(url)
		if err != nil {
			fatal("%v", err)
		}
		res := &result{}
		mu.Lock()
		byReplica[s.replica()] = append(byReplica[s.replica()], res)
		mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			failing := false
			for j := 0; !stop.Load(); j++ {
				res.calls.Add(1)
				if err := s.echo(fmt.Sprintf("load%d-%d", i, j)); err != nil {
					res.errs.Add(1)
					res.lastErrMsg.Store(err.Error())
					if res.firstErr.Load() == nil {
						res.firstErr.Store(time.Now())
					}
					failing = true
					// What a client does when its session is gone: a new one.
					if ns, err := openLegacy(url); err == nil {
						s = ns
					}
					continue
				}
				if failing && res.recovered.Load() == nil {
					res.recovered.Store(time.Now())
				}
				time.Sleep(10 * time.Millisecond)
			}
		}()
	}
	var modernErrs, modernCalls atomic.Int64
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				modernCalls.Add(1)
				if modernEcho(url, "x") != nil {
					modernErrs.Add(1)
				}
				time.Sleep(10 * time.Millisecond)
			}
		}()
	}
	time.Sleep(time.Second)
	term := time.Now()
	reps[1].cmd.Process.Signal(syscall.SIGTERM)
	bound := drainDelay + shutdownTimeout + stopGrace + killGrace
	select {
	case <-reps[1].exited:
	case <-time.After(bound + 10*time.Second):
	}
	took := reps[1].exitedAt.Sub(term)
	check(!reps[1].exitedAt.IsZero() && took >= drainDelay && took <= bound+2*time.Second,
		"corral-1 exited %v after SIGTERM: after drainDelay (%v), within drainDelay + shutdownTimeout + stopGrace + killGrace (%v) + 2s", took.Round(time.Millisecond), drainDelay, bound)
	allBack := func(name string, since time.Time) string {
		var last time.Time
		for _, r := range byReplica[name] {
			if t, ok := r.recovered.Load().(time.Time); ok && t.After(last) {
				last = t
			} else if !ok {
				return "not every session came back"
			}
		}
		return fmt.Sprintf("every one of its sessions answered again on another replica %v after its exit", last.Sub(since).Round(time.Millisecond))
	}
	waitFailover := func(name string) {
		// Until every session of the replica gone has failed once and then
		// had a call answered on a new session, or 15s.
		for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			done := true
			for _, r := range byReplica[name] {
				done = done && r.recovered.Load() != nil
			}
			if done {
				return
			}
		}
	}
	waitFailover("corral-1")
	errsOf := func(name string) (errs, calls int64) {
		for _, r := range byReplica[name] {
			errs += r.errs.Load()
			calls += r.calls.Load()
		}
		return
	}
	for _, name := range []string{"corral-0", "corral-2"} {
		e, c := errsOf(name)
		check(e == 0, "sessions on %s during corral-1's drain and exit: %d errors in %d calls", name, e, c)
	}
	var failover []time.Duration
	drainErrs := 0
	for _, r := range byReplica["corral-1"] {
		if t, ok := r.firstErr.Load().(time.Time); ok {
			if t.Sub(term) < drainDelay {
				drainErrs++
			}
			if rec, ok := r.recovered.Load().(time.Time); ok {
				failover = append(failover, rec.Sub(t))
			}
		}
	}
	e1, c1 := errsOf("corral-1")
	check(drainErrs == 0, "corral-1's own %d sessions: no error within drainDelay; after its exit %d errors in %d calls (each client then opens a new session elsewhere)", len(byReplica["corral-1"]), e1, c1)
	logf("figure: failover of corral-1's sessions after SIGTERM (first error to first call answered on a new session): %s; %s", spread(failover), allBack("corral-1", reps[1].exitedAt))
	check(modernErrs.Load() == 0, "2026-07-28 calls during corral-1's drain and exit: %d errors in %d calls", modernErrs.Load(), modernCalls.Load())

	e0before, _ := errsOf("corral-0")
	kill := time.Now()
	reps[2].cmd.Process.Signal(syscall.SIGKILL)
	<-reps[2].exited
	var left []string
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if left = fakeserversOf(reps[2].state); len(left) == 0 {
			break
		}
	}
	check(len(left) == 0, "corral-2 killed with SIGKILL: no fakeserver process of its left in /proc (%v), %v after the kill", left, time.Since(kill).Round(time.Millisecond))
	waitFailover("corral-2")
	stop.Store(true)
	wg.Wait()
	e0, c0 := errsOf("corral-0")
	check(e0 == e0before, "sessions on corral-0 during corral-2's SIGKILL: %d errors in %d calls", e0-e0before, c0)
	failover = failover[:0]
	for _, r := range byReplica["corral-2"] {
		if t, ok := r.firstErr.Load().(time.Time); ok {
			if rec, ok := r.recovered.Load().(time.Time); ok {
				failover = append(failover, rec.Sub(t))
			}
		}
	}
	logf("figure: failover of corral-2's sessions after SIGKILL: %s; %s; 2026-07-28 calls meanwhile: %d errors in %d calls", spread(failover), allBack("corral-2", reps[2].exitedAt), modernErrs.Load(), modernCalls.Load())

	// The last replica stops as a service manager stops it; then no
	// fakeserver of any replica is left.
	reps[0].cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-reps[0].exited:
	case <-time.After(bound + 10*time.Second):
	}
	var leftAll []string
	for _, r := range reps {
		leftAll = append(leftAll, fakeserversOf(r.state)...)
	}
	check(!reps[0].exitedAt.IsZero() && len(leftAll) == 0, "corral-0 stopped with SIGTERM; no fakeserver of any replica left in /proc (%v)", leftAll)
	stopAll()
	if failed.Load() {
		logf("FAILED; logs in %s", *work)
		os.Exit(1)
	}
	logf("all checks passed")
}

func mustMsg(m map[string]any, err error) (int, map[string]any, error) { return 200, m, err }

func indexOf(name string) int {
	for i, n := range names {
		if n == name {
			return i
		}
	}
	return 0
}

// spread says how many durations there are, and their least, median and most.
func spread(ds []time.Duration) string {
	if len(ds) == 0 {
		return "none measured"
	}
	for i := range ds {
		for j := i + 1; j < len(ds); j++ {
			if ds[j] < ds[i] {
				ds[i], ds[j] = ds[j], ds[i]
			}
		}
	}
	return fmt.Sprintf("%d sessions, min %v, median %v, max %v", len(ds), ds[0].Round(time.Millisecond), ds[len(ds)/2].Round(time.Millisecond), ds[len(ds)-1].Round(time.Millisecond))
}
