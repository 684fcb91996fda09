package conformance

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The benchmarks measure a gateway the same way whatever it is, through its
// adapter, next to two baselines measured in the same run:
//
//   - the HTTP floor: a plain net/http handler, in a process of its own,
//     answering a canned tools/call result: the cost of an HTTP round trip
//     to another process, with no gateway and no server;
//   - direct stdio: the same tools/call written straight to fakeserver's
//     stdin, the cost of the server with no gateway and no HTTP.
//
// Run them with
//
//	go test ./conformance -run '^$' -bench . -count 6 | tee bench.txt
//	benchstat bench.txt
//
// Every figure is a custom metric: calls/s, p50-µs and p99-µs for each of
// the three, the ratios the targets are stated in, and the CPU per call of
// the gateway, of its server and of the floor's process.

// benchEcho is the tools/call every benchmark makes; %s is the tool name.
const benchEcho = `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":{"text":"hello"}}}`

// latencies collects call durations from many goroutines.
type latencies struct {
	mu sync.Mutex
	d  []time.Duration
}

func (l *latencies) add(d time.Duration) {
	l.mu.Lock()
	l.d = append(l.d, d)
	l.mu.Unlock()
}

// stats returns calls per second over wall, and the 50th and 99th
// percentiles in microseconds.
func (l *latencies) stats(wall time.Duration) (perSec, p50, p99 float64) {
	sort.Slice(l.d, func(i, j int) bool { return l.d[i] < l.d[j] })
	if len(l.d) == 0 {
		return 0, 0, 0
	}
	pct := func(p float64) float64 {
		return float64(l.d[int(p*float64(len(l.d)-1))].Nanoseconds()) / 1e3
	}
	return float64(len(l.d)) / wall.Seconds(), pct(0.50), pct(0.99)
}

// drive makes n calls with c workers, each call done by call, and returns
// the latencies and the wall time.
func drive(b *testing.B, n, c int, call func(worker, i int) error) (*latencies, time.Duration) {
	var l latencies
	var next atomic.Int64
	var wg sync.WaitGroup
	var firstErr atomic.Value
	start := time.Now()
	for w := range c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1))
				if i > n {
					return
				}
				t0 := time.Now()
				if err := call(w, i); err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
				l.add(time.Since(t0))
			}
		}()
	}
	wg.Wait()
	if err, _ := firstErr.Load().(error); err != nil {
		b.Fatal(err)
	}
	return &l, time.Since(start)
}

// floorHandler answers every request with a canned tools/call result.
func floorHandler(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	w.Header().Set("Content-Type", "application/json")
	w.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"hello"}]}}`))
}

// floorEnv, when set in the environment of this test binary, makes it serve
// floorHandler on the address it names instead of running tests: the floor
// runs in a process of its own, as every gateway does, so that it pays the
// same cross-process costs.
const floorEnv = "CONFORMANCE_HTTP_FLOOR"

func serveFloor(addr string) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println("ready") // the parent waits for this line
	http.Serve(ln, http.HandlerFunc(floorHandler))
}

// httpFloor starts the floor in a child process and returns its URL and
// PID.
func httpFloor(b *testing.B) (string, int) {
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(b))
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), floorEnv+"="+addr)
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "ready\n" {
		b.Fatalf("the HTTP floor did not start: %q, %v", line, err)
	}
	return "http://" + addr, cmd.Process.Pid
}

// postCall posts one tools/call and reads the whole answer.
func postCall(client *http.Client, url, sid, body string) error {
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	data, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err == nil && !bytes.Contains(data, []byte("hello")) {
		err = fmt.Errorf("unexpected answer: %s", truncate(data))
	}
	return err
}

// directServer is fakeserver driven over its own stdio, with concurrent
// requests matched to answers by ID.
type directServer struct {
	mu      sync.Mutex
	stdin   io.Writer
	waiting map[int]chan struct{}
}

func startDirect(b *testing.B, dir string) *directServer {
	cmd := exec.Command(fakeserverBin, "-state", dir, "-name", "direct", "-prefix", "direct_", "-lifetime", "10m")
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { stdin.Close(); cmd.Process.Kill(); cmd.Wait() })
	d := &directServer{stdin: stdin, waiting: map[int]chan struct{}{}}
	go func() {
		br := bufio.NewReaderSize(stdout, 1<<20)
		for {
			line, err := br.ReadBytes('\n')
			if err != nil {
				return
			}
			var m struct{ ID int }
			json.Unmarshal(line, &m)
			d.mu.Lock()
			if c := d.waiting[m.ID]; c != nil {
				close(c)
				delete(d.waiting, m.ID)
			}
			d.mu.Unlock()
		}
	}()
	if err := d.call(0, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}`); err != nil {
		b.Fatal(err)
	}
	return d
}

func (d *directServer) call(id int, line string) error {
	done := make(chan struct{})
	d.mu.Lock()
	d.waiting[id] = done
	_, err := io.WriteString(d.stdin, line+"\n")
	d.mu.Unlock()
	if err != nil {
		return err
	}
	select {
	case <-done:
		return nil
	case <-time.After(30 * time.Second):
		return fmt.Errorf("no answer to %d", id)
	}
}

func BenchmarkToolsCall(b *testing.B) {
	for _, c := range []int{1, 32} {
		b.Run(fmt.Sprintf("c=%d", c), func(b *testing.B) {
			floorURL, floorPID := httpFloor(b)
			dir := b.TempDir()
			b.Cleanup(func() { killMarked(dir) })
			direct := startDirect(b, dir)
			g := startBenchGateway(b, servers("bench"))
			sid := g.benchSession(b)
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: c}}
			tool := renderBench(b, adapter.ToolName, templateData{Server: "bench", Tool: "bench_echo"})
			n := max(b.N, 200*c)

			b.ResetTimer()
			floorCPU := cpuTime(floorPID)
			floor, floorWall := drive(b, n, c, func(_, i int) error { return postCall(client, floorURL, "", fmt.Sprintf(benchEcho, i, "x")) })
			floorCPU = cpuTime(floorPID) - floorCPU
			dl, directWall := drive(b, n, c, func(_, i int) error { return direct.call(i, fmt.Sprintf(benchEcho, i, "direct_echo")) })
			gwCPU, srvCPU := cpuTime(g.cmd.Process.Pid), cpuTime(g.serverPID(b, "bench"))
			gl, gwWall := drive(b, n, c, func(_, i int) error { return postCall(client, g.url, sid, fmt.Sprintf(benchEcho, i, tool)) })
			gwCPU, srvCPU = cpuTime(g.cmd.Process.Pid)-gwCPU, cpuTime(g.serverPID(b, "bench"))-srvCPU
			b.StopTimer()
			b.ReportMetric(float64(gwCPU.Microseconds())/float64(n), "gw-cpu-µs/call")
			b.ReportMetric(float64(srvCPU.Microseconds())/float64(n), "server-cpu-µs/call")
			b.ReportMetric(float64(floorCPU.Microseconds())/float64(n), "floor-cpu-µs/call")
			b.ReportMetric(float64((gwCPU-floorCPU).Microseconds())/float64(n), "gw-cpu-above-floor-µs/call")

			fps, f50, f99 := floor.stats(floorWall)
			dps, d50, d99 := dl.stats(directWall)
			gps, g50, g99 := gl.stats(gwWall)
			b.ReportMetric(gps, "gw-calls/s")
			b.ReportMetric(g50, "gw-p50-µs")
			b.ReportMetric(g99, "gw-p99-µs")
			b.ReportMetric(fps, "floor-calls/s")
			b.ReportMetric(f50, "floor-p50-µs")
			b.ReportMetric(f99, "floor-p99-µs")
			b.ReportMetric(dps, "direct-calls/s")
			b.ReportMetric(d50, "direct-p50-µs")
			b.ReportMetric(d99, "direct-p99-µs")
			b.ReportMetric(g50/(f50+d50), "p50/(floor+direct)")
			b.ReportMetric(gps/fps, "calls/s÷floor")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// cpuTime returns the user and system CPU time process pid has used, from
// /proc (in clock ticks of 10ms).
func cpuTime(pid int) time.Duration {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

// serverPID returns the PID of the server process named name.
func (g *benchGateway) serverPID(b *testing.B, name string) int {
	starts := serverStarts(g.dir, name)
	if len(starts) == 0 {
		b.Fatalf("no process of server %s", name)
	}
	return starts[len(starts)-1].PID
}

// benchGateway is a gateway started for a benchmark.
type benchGateway struct {
	cmd *exec.Cmd
	url string
	dir string
}

// startBenchGateway starts the gateway under test like startGateway, for a
// benchmark: testing.B cannot share startGateway's *testing.T helpers.
func startBenchGateway(b *testing.B, specs []serverSpec) *benchGateway {
	requireLinuxB(b)
	if adapter.MaxServers > 0 && len(specs) > adapter.MaxServers {
		b.Skipf("the gateway runs at most %d server(s)", adapter.MaxServers)
	}
	g := &benchGateway{dir: b.TempDir()}
	b.Cleanup(func() { killMarked(g.dir) })
	caseDir := b.TempDir()
	data := templateData{Dir: adapter.dir, Source: sourceDir, Bin: adapter.bin, CaseDir: caseDir, ConfigPath: caseDir + "/config.json", StateDir: g.dir, Port: freePortB(b)}
	for _, s := range specs {
		args := append([]string{"-state", g.dir, "-name", s.Name, "-prefix", s.Name + "_", "-lifetime", "10m"}, s.flags...)
		data.Servers = append(data.Servers, templateServer{Name: s.Name, Command: fakeserverBin, Args: args,
			CommandLine: shellQuote(append([]string{fakeserverBin}, args...))})
	}
	if adapter.ConfigTemplate != "" {
		os.WriteFile(data.ConfigPath, []byte(renderBench(b, adapter.ConfigTemplate, data)), 0o600)
	}
	g.url = renderBench(b, adapter.URL, data)
	var argv []string
	for _, w := range adapter.Command {
		if w := renderBench(b, w, data); w != "" {
			argv = append(argv, w)
		}
	}
	g.cmd = exec.Command(argv[0], argv[1:]...)
	g.cmd.Env = append(os.Environ(), adapter.Env...)
	if err := g.cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { g.cmd.Process.Kill(); g.cmd.Wait() })
	if adapter.Transport != "http" {
		b.Skip("the benchmarks speak Streamable HTTP only")
	}
	// Ready when every server's whoami is listed.
	deadline := time.Now().Add(adapter.readyFor)
	for {
		if g.listsAll(b, specs) {
			return g
		}
		if time.Now().After(deadline) {
			b.Fatalf("the gateway was not ready within %s", adapter.readyFor)
		}
		time.Sleep(10 * time.Millisecond) // the gateway gives no signal to wait on
	}
}

// listsAll reports whether the gateway lists the whoami tool of every server.
func (g *benchGateway) listsAll(b *testing.B, specs []serverSpec) bool {
	c := &httpConn{url: g.url}
	defer c.close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.roundTrip(ctx, []byte(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}`), "0"); err != nil {
		return false
	}
	c.notify([]byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`))
	raw, err := c.roundTrip(ctx, []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`), "1")
	if err != nil {
		return false
	}
	for _, s := range specs {
		name := renderBench(b, adapter.ToolName, templateData{Server: s.Name, Tool: s.Name + "_whoami"})
		if !bytes.Contains(raw, []byte(strconv.Quote(name))) {
			return false
		}
	}
	return true
}

// benchSession opens a session and returns its ID.
func (g *benchGateway) benchSession(b *testing.B) string {
	c := &httpConn{url: g.url}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.roundTrip(ctx, []byte(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}`), "0"); err != nil {
		b.Fatal(err)
	}
	c.notify([]byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`))
	return c.sid
}

func renderBench(b *testing.B, text string, data templateData) string {
	s, err := renderErr("bench", text, data)
	if err != nil {
		b.Fatal(err)
	}
	return s
}

func freePortB(b *testing.B) int { return freePort(b) }

func requireLinuxB(b *testing.B) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		b.Skip("the benchmarks read /proc, which only Linux has")
	}
}

func BenchmarkMemory(b *testing.B) {
	var specs []serverSpec
	for i := range 10 {
		specs = append(specs, serverSpec{Name: fmt.Sprintf("m%d", i)})
	}
	for b.Loop() {
		g := startBenchGateway(b, specs)
		pid := g.cmd.Process.Pid
		idle := status(pid, "VmRSS")
		sid := g.benchSession(b)
		client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 8}}
		tool := renderBench(b, adapter.ToolName, templateData{Server: "m0", Tool: "m0_echo"})
		warm := func(n int) {
			drive(b, n, 8, func(_, i int) error { return postCall(client, g.url, sid, fmt.Sprintf(benchEcho, i, tool)) })
		}
		warm(1000)
		rssBefore, threadsBefore := status(pid, "VmRSS"), status(pid, "Threads")
		warm(100_000)
		client.CloseIdleConnections()
		rssAfter, threadsAfter := status(pid, "VmRSS"), status(pid, "Threads")
		peakBefore := status(pid, "VmHWM")
		big := renderBench(b, adapter.ToolName, templateData{Server: "m0", Tool: "m0_big"})
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":%q,"arguments":{"bytes":%d}}}`, big, 16<<20)
		req, _ := http.NewRequest("POST", g.url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", sid)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		n, _ := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if n < 16<<20 {
			b.Fatalf("16 MiB answer arrived with %d bytes", n)
		}
		peakAfter := status(pid, "VmHWM")
		b.ReportMetric(idle/1024, "idle-10-servers-MiB")
		b.ReportMetric(rssBefore/1024, "rss-before-100k-MiB")
		b.ReportMetric(rssAfter/1024, "rss-after-100k-MiB")
		b.ReportMetric(threadsBefore, "threads-before-100k")
		b.ReportMetric(threadsAfter, "threads-after-100k")
		b.ReportMetric((peakAfter-peakBefore)/1024/16, "peak-growth÷16MiB")
		b.ReportMetric(0, "ns/op")
	}
}

func BenchmarkStartup(b *testing.B) {
	var specs []serverSpec
	for i := range 20 {
		specs = append(specs, serverSpec{Name: fmt.Sprintf("s%02d", i)})
	}
	for b.Loop() {
		// The slowest single server: each of 20 started alone, directly.
		var slowest time.Duration
		dir := b.TempDir()
		for range 20 {
			start := time.Now()
			startDirect(b, dir)
			slowest = max(slowest, time.Since(start))
		}
		killMarked(dir)
		// The same 20 started directly and all at once: on a machine with
		// few cores their startups compete for CPU, gateway or not.
		start := time.Now()
		var wg sync.WaitGroup
		for range 20 {
			wg.Add(1)
			go func() { defer wg.Done(); startDirect(b, dir) }()
		}
		wg.Wait()
		parallel := time.Since(start)
		killMarked(dir)
		start = time.Now()
		startBenchGateway(b, specs)
		all := time.Since(start)
		b.ReportMetric(float64(all.Milliseconds()), "20-servers-ready-ms")
		b.ReportMetric(float64(slowest.Microseconds())/1000, "slowest-single-ms")
		b.ReportMetric(float64(parallel.Microseconds())/1000, "20-direct-parallel-ms")
		b.ReportMetric(float64((all - slowest).Milliseconds()), "overhead-ms")
		b.ReportMetric(0, "ns/op")
	}
}
