//go:build linux

package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

// The spawn benchmarks start fakeserver and wait for its answer to
// initialize, plainly and in a cgroup of its own (through the shim), so that
// the cgroup's cost is their difference:
//
//	go test -run '^$' -bench 'Spawn' -count 6 . | benchstat -
//
// BenchmarkCallsDuringForkBomb calls one server while another, limited to
// 64 processes and threads, runs a fork bomb, and reports the calls'
// latency percentiles.

func BenchmarkSpawnPlain(b *testing.B) { benchSpawn(b, nil, Limits{}) }

func BenchmarkSpawnCgroup(b *testing.B) {
	benchSpawn(b, needCgroups(b)["v1"], Limits{})
}

func BenchmarkSpawnCgroupLimits(b *testing.B) {
	benchSpawn(b, needCgroups(b)["v1"], Limits{Memory: "256MiB", CPU: 1, Pids: 256})
}

func benchSpawn(b *testing.B, tree *cgroupTree, l Limits) {
	if tree == nil && l != (Limits{}) {
		b.Skip("no v1 cgroups here")
	}
	dir := stateDir(b)
	for b.Loop() {
		p, err := startProcess(processSpec{name: "spawn", command: fakeserverBin, args: fakeArgs(dir),
			stopGrace: time.Second, killGrace: time.Second, pipeDrain: 10 * time.Millisecond, log: testLogger(b), cgroups: tree, limits: l})
		if err != nil {
			b.Fatal(err)
		}
		io.WriteString(p.stdin, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"b","version":"1"}}}`+"\n")
		readLine(b, bufio.NewReader(p.stdout))
		b.StopTimer()
		p.Stop(nil)
		b.StartTimer()
	}
}

func BenchmarkCallsDuringForkBomb(b *testing.B) {
	needLimits(b, Limits{Pids: 64})
	for _, bomb := range []bool{false, true} {
		b.Run(map[bool]string{false: "quiet", true: "forkbomb"}[bomb], func(b *testing.B) {
			tg := startGateway(b, `{"mcpServers":{
				"bomb": {"command":"FAKE","args":["-state","STATE","-name","bomb","-prefix","b_"],"limits":{"pids":64}},
				"calm": {"command":"FAKE","args":["-state","STATE","-name","calm","-prefix","c_"]}}}`)
			if bomb {
				forkBomb(b, tg)
			}
			c := connect(b, tg.url)
			var took []time.Duration
			for i := 0; b.Loop(); i++ {
				start := time.Now()
				if got := toolText(b, c.callTool(fmt.Sprint(i), "c_echo", `{"text":"hi"}`)); got != "hi" {
					b.Fatalf("echo answered %q", got)
				}
				took = append(took, time.Since(start))
			}
			slices.Sort(took)
			b.ReportMetric(float64(took[len(took)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(took[len(took)*99/100].Microseconds()), "p99-µs")
		})
	}
}

// forkBomb calls fakeserver's fork tool of server "bomb" of tg, which keeps
// trying to fork, again and again until the benchmark ends: a Go server
// dies when its runtime cannot start a thread, and is restarted. It returns
// once the bomb has filled most of its pids limit.
func forkBomb(b *testing.B, tg *testGateway) {
	c := connect(b, tg.url)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	b.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"b_fork","arguments":{"count":100000000,"keep_trying":true}}}`
		for ctx.Err() == nil {
			req, _ := http.NewRequestWithContext(ctx, "POST", tg.url, strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("Mcp-Session-Id", c.sid)
			if resp, err := http.DefaultClient.Do(req); err == nil {
				io.Copy(io.Discard, resp.Body) // the server died of its limit; bomb again
				resp.Body.Close()
			}
		}
	}()
	waitFor(b, 10*time.Second, "the fork bomb to fill its limit", func() bool {
		return len(liveMarked("-role forked -name bomb")) > 20
	})
}
