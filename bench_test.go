package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// The benchmarks below make the same tools/call (fakeserver's echo) at
// concurrency 1, directly over the server's stdio pipes and through corral
// over HTTP, so that corral's own cost is their difference:
//
//	go test -run '^$' -bench 'ToolsCall' -count 10 . | benchstat -

const benchCall = `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"}}}`

func BenchmarkToolsCallDirectStdio(b *testing.B) {
	dir := stateDir(b)
	p, err := startProcess(processSpec{name: "fake", command: fakeserverBin, args: fakeArgs(dir),
		stopGrace: time.Second, killGrace: time.Second, pipeDrain: time.Second, log: testLogger(b)})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Stop(nil)
	r := bufio.NewReader(p.stdout)
	io.WriteString(p.stdin, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"b","version":"1"}}}`+"\n")
	readLine(b, r)
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		fmt.Fprintf(p.stdin, benchCall+"\n", i)
		if line := readLine(b, r); !strings.Contains(string(line), "hello") {
			b.Fatalf("answer %s", line)
		}
	}
}

func BenchmarkToolsCallThroughCorralHTTP(b *testing.B) {
	benchToolsCallHTTP(b, `{"mcpServers":{"a": {"command":"FAKE","args":["-state","STATE"]}}}`)
}

// The same with the audit trail on, written to a file in the test's
// temporary directory; and with the server's arguments and results in it
// too (docs/performance.md compares them with the above).
func BenchmarkToolsCallThroughCorralHTTPAudited(b *testing.B) {
	benchToolsCallHTTP(b, `{"audit":{"file":"STATE/audit.jsonl"},"mcpServers":{"a": {"command":"FAKE","args":["-state","STATE"]}}}`)
}

func BenchmarkToolsCallThroughCorralHTTPAuditedArguments(b *testing.B) {
	benchToolsCallHTTP(b, `{"audit":{"file":"STATE/audit.jsonl"},"mcpServers":{"a": {"command":"FAKE","args":["-state","STATE"],"audit":{"arguments":true}}}}`)
}

// benchToolsCallHTTP makes the echo call through a gateway of config over
// HTTP, and reports the CPU time of the test process (the client and
// corral, not fakeserver) a call.
func benchToolsCallHTTP(b *testing.B, config string) {
	tg := startGateway(b, config)
	c := connect(b, tg.url)
	hc := &http.Client{}
	cpu0 := processCPU()
	defer func() {
		b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
	}()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		req, _ := http.NewRequest("POST", tg.url, strings.NewReader(fmt.Sprintf(benchCall, i)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", c.sid)
		resp, err := hc.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(body), "hello") {
			b.Fatalf("answer %s", body)
		}
	}
}

// BenchmarkHTTPFloor is a plain net/http handler answering a canned result:
// the cost of the HTTP round trip alone, with no gateway and no server.
func BenchmarkHTTPFloor(b *testing.B) {
	ts := startHTTPFloor(b)
	hc := &http.Client{}
	for i := 0; b.Loop(); i++ {
		resp, err := hc.Post(ts.URL, "application/json", strings.NewReader(fmt.Sprintf(benchCall, i)))
		if err != nil {
			b.Fatal(err)
		}
		io.ReadAll(resp.Body)
		resp.Body.Close()
	}
}

// startHTTPFloor starts the floor's handler, which answers a canned result,
// until the benchmark ends.
func startHTTPFloor(b *testing.B) *httptest.Server {
	answer := []byte(`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"hello"}]}}`)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Write(answer)
	}))
	b.Cleanup(ts.Close)
	return ts
}

// BenchmarkCrashRecovery measures, at default settings, the time from a
// server's death (its own "exit" record) to the error of a call pending on
// it, and to the first successful call after corral restarts it:
//
//	go test -run '^$' -bench CrashRecovery -benchtime 5x .
func BenchmarkCrashRecovery(b *testing.B) {
	var toError, toRecovery time.Duration
	for i := 0; b.Loop(); i++ {
		// A gateway of its own for each crash, so that each is a first
		// crash, restarted after restartDelay, not a later, longer backoff.
		b.StopTimer()
		tg := startGateway(b, `{"mcpServers":{"a": {"command":"FAKE","args":["-state","STATE","-name","a"]}}}`)
		c := connect(b, tg.url)
		b.StartTimer()
		pending := make(chan *wireMsg, 1)
		go func() { pending <- c.callTool(fmt.Sprint(i), "sleep", `{"ms":600000}`) }()
		c.callTool(`"crash"`, "crash", `{}`) // answered with the crash error
		msg := <-pending
		failedAt := time.Now()
		if msg.Error == nil {
			b.Fatalf("pending call = %+v, want an error", msg)
		}
		for {
			if m := c.callTool(`"again"`, "echo", `{"text":"x"}`); m.Error == nil {
				break
			}
		}
		recoveredAt := time.Now()
		died := lastExit(b, tg.dir)
		toError += failedAt.Sub(died)
		toRecovery += recoveredAt.Sub(died)
	}
	b.ReportMetric(float64(toError.Microseconds())/float64(b.N)/1000, "ms-death-to-error")
	b.ReportMetric(float64(toRecovery.Microseconds())/float64(b.N)/1000, "ms-death-to-success")
	b.ReportMetric(0, "ns/op")
}

// lastExit returns the time of the newest "exit" event recorded in dir.
func lastExit(tb testing.TB, dir string) time.Time {
	var last time.Time
	files, _ := filepath.Glob(filepath.Join(dir, "*.events"))
	for _, f := range files {
		data, _ := os.ReadFile(f)
		for _, line := range strings.Split(string(data), "\n") {
			var e struct {
				Time  time.Time `json:"time"`
				Event string    `json:"event"`
			}
			if json.Unmarshal([]byte(line), &e) == nil && e.Event == "exit" && e.Time.After(last) {
				last = e.Time
			}
		}
	}
	if last.IsZero() {
		tb.Fatal("no exit recorded")
	}
	return last
}

// BenchmarkHeapAndGoroutinesAfter100kCalls makes 100,000 calls through corral
// (32 at a time) and reports the live heap and goroutine counts before and
// after, each measured after a collection, with the client's idle
// connections closed:
//
//	go test -run '^$' -bench HeapAndGoroutines -benchtime 1x .
func BenchmarkHeapAndGoroutinesAfter100kCalls(b *testing.B) {
	tg := startGateway(b, `{"mcpServers":{"a": {"command":"FAKE","args":["-state","STATE"]}}}`)
	c := connect(b, tg.url)
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 32}}
	calls := func(n int) {
		var wg sync.WaitGroup
		var next atomic.Int64
		for range 32 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := next.Add(1); i <= int64(n); i = next.Add(1) {
					req, _ := http.NewRequest("POST", tg.url, strings.NewReader(fmt.Sprintf(benchCall, i)))
					req.Header.Set("Content-Type", "application/json")
					req.Header.Set("Accept", "application/json, text/event-stream")
					req.Header.Set("Mcp-Session-Id", c.sid)
					resp, err := hc.Do(req)
					if err != nil {
						b.Error(err)
						return
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			}()
		}
		wg.Wait()
		hc.CloseIdleConnections()
	}
	measure := func() (heapMiB float64, goroutines int) {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return float64(m.HeapAlloc) / (1 << 20), runtime.NumGoroutine()
	}
	for b.Loop() {
		calls(1000) // warm up: pools, buffers, connections
		heap0, g0 := measure()
		calls(100_000)
		heap1, g1 := measure()
		b.ReportMetric(heap0, "heap-before-MiB")
		b.ReportMetric(heap1, "heap-after-MiB")
		b.ReportMetric(float64(g0), "goroutines-before")
		b.ReportMetric(float64(g1), "goroutines-after")
		b.ReportMetric(0, "ns/op")
	}
}

// processCPU returns the CPU time, user and system, the test process has
// used so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
