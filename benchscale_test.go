package main

import (
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// BenchmarkIdleSessionsHeap opens 10,000 legacy sessions (initialize and
// nothing else) and reports the live heap and goroutines they add, each
// measured after a collection: the in-process half of the idle sessions
// figure in docs/performance.md, whose resident memory half bench/scale
// measures from outside:
//
//	go test -run '^$' -bench IdleSessionsHeap -benchtime 1x .
func BenchmarkIdleSessionsHeap(b *testing.B) {
	const n = 10_000
	tg := startGateway(b, `{"maxSessions": 10010, "mcpServers":{"a": {"command":"FAKE","args":["-state","STATE"]}}}`)
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	open := func(count int) {
		var wg sync.WaitGroup
		var next atomic.Int64
		for range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for next.Add(1) <= int64(count) {
					req, _ := http.NewRequest("POST", tg.url, strings.NewReader(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"b","version":"1"}}}`))
					req.Header.Set("Content-Type", "application/json")
					req.Header.Set("Accept", "application/json, text/event-stream")
					resp, err := hc.Do(req)
					if err != nil {
						b.Error(err)
						return
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						b.Errorf("initialize: %s", resp.Status)
						return
					}
				}
			}()
		}
		wg.Wait()
		hc.CloseIdleConnections()
	}
	measure := func() (heap uint64, goroutines int) {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc, runtime.NumGoroutine()
	}
	for b.Loop() {
		open(10) // warm up: connections, pools
		heap0, g0 := measure()
		open(n)
		heap1, g1 := measure()
		tg.h.mu.Lock()
		if got := len(tg.h.sessions); got < n {
			b.Fatalf("%d sessions open, want %d", got, n)
		}
		tg.h.mu.Unlock()
		b.ReportMetric(float64(heap1-heap0)/n/1024, "heap-KiB/session")
		b.ReportMetric(float64(g1-g0)/n, "goroutines/session")
		b.ReportMetric(0, "ns/op")
	}
}
