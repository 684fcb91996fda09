// Command scale measures corral at the scale a user with many servers and
// clients asks about, from the outside: it starts a corral binary with a
// config of its own, drives it over HTTP, and reads the process's memory
// from /proc (Linux only) and its goroutines from /metrics.
//
//	go build -o /tmp/corral . && go build -o /tmp/fakeserver ./fakeserver
//	go run ./bench/scale -corral /tmp/corral -fakeserver /tmp/fakeserver -run servers
//
// -run picks one measurement:
//
//	servers   -n servers (default 200) configured: the time until /healthz
//	          reports every one ready, corral's own resident memory, and the
//	          total with its children
//	sessions  -n legacy sessions (default 10,000), each an initialize and
//	          nothing else: resident memory per session
//	streams   -n sessions (default 1,000), each with an open GET stream:
//	          resident memory and goroutines per stream
//	soak      -rate calls/s (default 100) for -duration (default 10m):
//	          resident memory, goroutines and threads every -every (30s)
//
// The config it writes raises the limits that would refuse these loads
// (maxSessions, maxStreams) and says so in its output. It stops corral, and
// with it every server, before it exits.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

func main() {
	corral := flag.String("corral", "", "path to the corral `binary`")
	fake := flag.String("fakeserver", "", "path to the fakeserver `binary`")
	run := flag.String("run", "", "measurement: servers, sessions, streams or soak")
	n := flag.Int("n", 0, "servers, sessions or streams (0: the measurement's default)")
	rate := flag.Int("rate", 100, "soak: calls per second")
	duration := flag.Duration("duration", 10*time.Minute, "soak: how long")
	every := flag.Duration("every", 30*time.Second, "soak: how often to sample")
	flag.Parse()
	if *corral == "" || *fake == "" {
		fail(errors.New("-corral and -fakeserver are required"))
	}
	var err error
	switch *run {
	case "servers":
		err = servers(*corral, *fake, orDefault(*n, 200))
	case "sessions":
		err = sessions(*corral, *fake, orDefault(*n, 10_000))
	case "streams":
		err = streams(*corral, *fake, orDefault(*n, 1000))
	case "soak":
		err = soak(*corral, *fake, *rate, *duration, *every)
	default:
		err = fmt.Errorf("-run %q: want servers, sessions, streams or soak", *run)
	}
	if err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "scale:", err)
	os.Exit(1)
}

func orDefault(n, def int) int {
	if n > 0 {
		return n
	}
	return def
}

// gateway is a running corral.
type gateway struct {
	cmd    *exec.Cmd
	base   string       // http://127.0.0.1:PORT
	dir    string       // its config and its servers' state
	client *http.Client // with room for many connections to corral
}

// start writes a config of nServers fakeservers plus extra top-level
// members, starts corral with it, and waits until it listens.
func start(corral, fake string, nServers int, extra string, lifetime time.Duration) (*gateway, error) {
	dir, err := os.MkdirTemp("", "corral-scale-")
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	var servers []string
	for i := range nServers {
		name := fmt.Sprintf("s%03d", i)
		// Each server bounds its own life, in case this program is killed.
		args, _ := json.Marshal([]string{"-state", dir, "-name", name, "-prefix", name + "_", "-lifetime", lifetime.String()})
		servers = append(servers, fmt.Sprintf(`%q: {"command": %q, "args": %s}`, name, fake, args))
	}
	cfg := fmt.Sprintf(`{"listen": "127.0.0.1:%d"%s, "mcpServers": {%s}}`, port, extra, strings.Join(servers, ", "))
	path := filepath.Join(dir, "config.json")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		return nil, err
	}
	if extra != "" {
		fmt.Printf("config: %s\n", strings.TrimPrefix(extra, ", "))
	}
	g := &gateway{cmd: exec.Command(corral, "-config", path), base: fmt.Sprintf("http://127.0.0.1:%d", port), dir: dir,
		client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}, Timeout: time.Minute}}
	g.cmd.Stderr = io.Discard
	if err := g.cmd.Start(); err != nil {
		return nil, err
	}
	for deadline := time.Now().Add(30 * time.Second); ; {
		if c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port)); err == nil {
			c.Close()
			return g, nil
		}
		if time.Now().After(deadline) {
			g.stop()
			return nil, errors.New("corral did not listen within 30s")
		}
		time.Sleep(5 * time.Millisecond) // corral gives no signal to wait on
	}
}

// stop stops corral with SIGTERM, which stops every server, and waits.
func (g *gateway) stop() {
	g.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { g.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		g.cmd.Process.Kill()
		<-done
	}
	os.RemoveAll(g.dir)
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// healthy reports whether /healthz answers 200: every server ready.
func (g *gateway) healthy() bool {
	resp, err := http.Get(g.base + "/healthz")
	if err != nil {
		return false
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// waitHealthy waits up to limit for /healthz to answer 200.
func (g *gateway) waitHealthy(limit time.Duration) error {
	for deadline := time.Now().Add(limit); !g.healthy(); {
		if time.Now().After(deadline) {
			return fmt.Errorf("not every server was ready within %s", limit)
		}
		time.Sleep(10 * time.Millisecond) // corral gives no signal to wait on
	}
	return nil
}

// metric returns the value of an unlabelled sample of corral's /metrics.
func (g *gateway) metric(name string) float64 {
	resp, err := http.Get(g.base + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return -1
}

// kib returns a field of /proc/PID/status in KiB (VmRSS) or as a count
// (Threads).
func kib(pid int, field string) float64 {
	data, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			if f := strings.Fields(v); len(f) > 0 {
				n, _ := strconv.ParseFloat(f[0], 64)
				return n
			}
		}
	}
	return 0
}

// treeRSS returns the resident memory of pid and all its descendants, in
// KiB, and how many processes that is.
func treeRSS(pid int) (float64, int) {
	children := map[int][]int{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		f := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+1:]))
		if len(f) > 1 {
			ppid, _ := strconv.Atoi(f[1])
			children[ppid] = append(children[ppid], p)
		}
	}
	var total float64
	count := 0
	var walk func(int)
	walk = func(p int) {
		total += kib(p, "VmRSS")
		count++
		for _, c := range children[p] {
			walk(c)
		}
	}
	walk(pid)
	return total, count
}

func mib(k float64) string { return fmt.Sprintf("%.1f MiB", k/1024) }

// servers measures n configured servers.
func servers(corral, fake string, n int) error {
	t0 := time.Now()
	g, err := start(corral, fake, n, "", 10*time.Minute)
	if err != nil {
		return err
	}
	defer g.stop()
	if err := g.waitHealthy(5 * time.Minute); err != nil {
		return err
	}
	ready := time.Since(t0)
	cpu := g.metric("process_cpu_seconds_total")
	time.Sleep(2 * time.Second) // let the start's garbage settle before reading memory
	pid := g.cmd.Process.Pid
	total, procs := treeRSS(pid)
	fmt.Printf("%d servers: all ready %.2f s after corral started, which used %.2f s of CPU meanwhile\n", n, ready.Seconds(), cpu)
	fmt.Printf("corral's VmRSS: %s; with its %d children: %s (%s a server)\n",
		mib(kib(pid, "VmRSS")), procs-1, mib(total), mib((total-kib(pid, "VmRSS"))/float64(procs-1)))
	fmt.Printf("corral's goroutines: %.0f, threads: %.0f, heap allocated %.1f MiB (uncollected garbage included), memory from the system %.1f MiB\n",
		g.metric("go_goroutines"), kib(pid, "Threads"), g.metric("go_memstats_alloc_bytes")/(1<<20), g.metric("go_memstats_sys_bytes")/(1<<20))
	return nil
}

// initialize opens a legacy session and returns its ID.
func (g *gateway) initialize() (string, error) {
	body := `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"scale","version":"1"}}}`
	resp, err := g.post("", body)
	if err != nil {
		return "", err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("initialize: %s", resp.Status)
	}
	return resp.Header.Get("Mcp-Session-Id"), nil
}

func (g *gateway) post(sid, body string) (*http.Response, error) {
	req, _ := http.NewRequest("POST", g.base+"/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
	}
	return g.client.Do(req)
}

// openSessions opens n sessions, 16 at a time, and returns their IDs.
func (g *gateway) openSessions(n int) ([]string, error) {
	ids := make([]string, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	var firstErr atomic.Value
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				sid, err := g.initialize()
				if err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
				ids[i] = sid
			}
		}()
	}
	wg.Wait()
	if err, _ := firstErr.Load().(error); err != nil {
		return nil, err
	}
	return ids, nil
}

// settle waits a little and closes the client's idle connections, so that
// what is measured is the sessions, not connections or the garbage of
// opening them.
func (g *gateway) settle() {
	g.client.CloseIdleConnections()
	time.Sleep(2 * time.Second)
}

// sessions measures n idle legacy sessions.
func sessions(corral, fake string, n int) error {
	g, err := start(corral, fake, 1, fmt.Sprintf(`, "maxSessions": %d`, n+10), 10*time.Minute)
	if err != nil {
		return err
	}
	defer g.stop()
	if err := g.waitHealthy(time.Minute); err != nil {
		return err
	}
	if _, err := g.openSessions(10); err != nil { // warm up
		return err
	}
	g.settle()
	pid := g.cmd.Process.Pid
	rss0, heap0, gr0 := kib(pid, "VmRSS"), g.metric("go_memstats_alloc_bytes"), g.metric("go_goroutines")
	t0 := time.Now()
	if _, err := g.openSessions(n); err != nil {
		return err
	}
	took := time.Since(t0)
	g.settle()
	rss1, heap1, gr1 := kib(pid, "VmRSS"), g.metric("go_memstats_alloc_bytes"), g.metric("go_goroutines")
	fmt.Printf("%d idle sessions opened in %.1f s\n", n, took.Seconds())
	fmt.Printf("corral's VmRSS: %s before, %s after: %.2f KiB a session\n", mib(rss0), mib(rss1), (rss1-rss0)/float64(n))
	fmt.Printf("heap allocated (uncollected garbage included): %.1f MiB before, %.1f MiB after\n", heap0/(1<<20), heap1/(1<<20))
	fmt.Printf("goroutines: %.0f before, %.0f after\n", gr0, gr1)
	return nil
}

// streams measures n sessions with an open GET stream each.
func streams(corral, fake string, n int) error {
	g, err := start(corral, fake, 1, fmt.Sprintf(`, "maxSessions": %d, "maxStreams": %d`, n+10, n+10), 10*time.Minute)
	if err != nil {
		return err
	}
	defer g.stop()
	if err := g.waitHealthy(time.Minute); err != nil {
		return err
	}
	ids, err := g.openSessions(n)
	if err != nil {
		return err
	}
	g.settle()
	pid := g.cmd.Process.Pid
	rss0, gr0 := kib(pid, "VmRSS"), g.metric("go_goroutines")
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait() // after cancel, which ends every stream
	defer cancel()
	streamClient := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 0}}
	opened := make(chan error, n)
	for _, sid := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequestWithContext(ctx, "GET", g.base+"/mcp", nil)
			req.Header.Set("Accept", "text/event-stream")
			req.Header.Set("Mcp-Session-Id", sid)
			resp, err := streamClient.Do(req)
			if err == nil && resp.StatusCode != http.StatusOK {
				err = fmt.Errorf("GET: %s", resp.Status)
			}
			opened <- err
			if err == nil {
				io.Copy(io.Discard, resp.Body) // until cancelled
				resp.Body.Close()
			}
		}()
	}
	for range n {
		if err := <-opened; err != nil {
			return err
		}
	}
	time.Sleep(2 * time.Second)
	rss1, gr1 := kib(pid, "VmRSS"), g.metric("go_goroutines")
	fmt.Printf("%d open GET streams (one per session)\n", n)
	fmt.Printf("corral's VmRSS: %s before, %s after: %.1f KiB a stream\n", mib(rss0), mib(rss1), (rss1-rss0)/float64(n))
	fmt.Printf("goroutines: %.0f before, %.0f after: %.2f a stream\n", gr0, gr1, (gr1-gr0)/float64(n))
	return nil
}

// soak makes rate calls a second for d, on at most soakConns connections,
// sampling every so often. Call i starts at i/rate seconds, or as soon as a
// connection is free when the calls fall behind.
func soak(corral, fake string, rate int, d, every time.Duration) error {
	g, err := start(corral, fake, 1, "", d+5*time.Minute)
	if err != nil {
		return err
	}
	defer g.stop()
	if err := g.waitHealthy(time.Minute); err != nil {
		return err
	}
	ids, err := g.openSessions(1)
	if err != nil {
		return err
	}
	sid := ids[0]
	// A bounded pool, so that corral's goroutines (one a connection) show
	// its own state, not how many connections the client opened.
	g.client.CloseIdleConnections()
	g.client = &http.Client{Transport: &http.Transport{MaxConnsPerHost: soakConns, MaxIdleConnsPerHost: soakConns}, Timeout: time.Minute}
	pid := g.cmd.Process.Pid
	var calls, failed atomic.Int64
	sample := func(at time.Duration) {
		fmt.Printf("%6.0f s  calls %7d  failed %d  VmRSS %s  goroutines %.0f  open fds %.0f  threads %.0f  heap %.1f MiB\n",
			at.Seconds(), calls.Load(), failed.Load(), mib(kib(pid, "VmRSS")), g.metric("go_goroutines"),
			g.metric("process_open_fds"), kib(pid, "Threads"), g.metric("go_memstats_alloc_bytes")/(1<<20))
	}
	t0 := time.Now()
	sample(0)
	next := every
	var wg sync.WaitGroup
	for i := 1; time.Since(t0) < d; i++ {
		time.Sleep(time.Until(t0.Add(time.Duration(i) * time.Second / time.Duration(rate))))
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := g.echo(sid, i); err != nil {
				failed.Add(1)
			}
			calls.Add(1)
		}()
		if at := time.Since(t0); at >= next {
			sample(at)
			next += every
		}
	}
	wg.Wait()
	sample(time.Since(t0))
	if failed.Load() > 0 {
		return fmt.Errorf("%d calls failed", failed.Load())
	}
	return nil
}

// soakConns bounds the soak's connections to corral.
const soakConns = 16

// echo calls fakeserver's echo tool through corral with request ID id.
func (g *gateway) echo(sid string, id int) error {
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"s000_echo","arguments":{"text":"hello"}}}`, id)
	resp, err := g.post(sid, body)
	if err != nil {
		return err
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !bytes.Contains(data, []byte("hello")) {
		return fmt.Errorf("call %d: no echo in %.200s", id, data)
	}
	return nil
}
