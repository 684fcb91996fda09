package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkLazyFirstCall measures the time from the first call to an idle
// lazy server, its catalog read from the cache, to the call's answer: the
// start of the server's process, its handshake and listing, and the call.
// Between iterations idleStop stops the server, untimed. server-everything
// runs when .ci/interop's node_modules holds it (npm ci there).
func BenchmarkLazyFirstCall(b *testing.B) {
	everything, _ := filepath.Abs(".ci/interop/node_modules/@modelcontextprotocol/server-everything/dist/index.js")
	node, nodeErr := exec.LookPath("node")
	for _, srv := range []struct {
		name, tool, arguments string
		entry                 map[string]any // "start" and "idleStop" are added
		missing               string         // why it cannot run, if it cannot
	}{
		{"fakeserver", "echo", `{"text":"hi"}`, map[string]any{"command": "FAKE", "args": []string{"-state", "STATE", "-lifetime", "10m"}}, ""},
		{"server-everything", "echo", `{"message":"hi"}`, map[string]any{"command": node, "args": []string{everything, "stdio"}}, missingFile(everything, nodeErr)},
	} {
		b.Run(srv.name, func(b *testing.B) {
			if srv.missing != "" {
				b.Skip(srv.missing)
			}
			srv.entry["start"], srv.entry["idleStop"] = "lazy", "1ms"
			config, _ := json.Marshal(map[string]any{"cacheDir": b.TempDir(), "mcpServers": map[string]any{"s": srv.entry}})
			tg := startGateway(b, string(config))
			back := tg.gw.backends[0]
			c := connect(b, tg.url)
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				waitIdle(b, back)
				b.StartTimer()
				if m := c.callTool("1", srv.tool, srv.arguments); m.Error != nil {
					b.Fatalf("call: %+v", m.Error)
				}
			}
		})
	}
}

// missingFile says why a benchmark needing file and node cannot run, or
// returns "".
func missingFile(file string, nodeErr error) string {
	if nodeErr != nil {
		return "no node: " + nodeErr.Error()
	}
	if _, err := os.Stat(file); err != nil {
		return "run npm ci in .ci/interop first: " + err.Error()
	}
	return ""
}

// waitIdle waits until back is idle and its last process, if any, is gone.
func waitIdle(tb testing.TB, back *backend) {
	tb.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		back.mu.Lock()
		state, changed, p := back.state, back.changed, back.proc
		back.mu.Unlock()
		if state == stateIdle {
			if p != nil {
				<-p.exited
			}
			return
		}
		select {
		case <-changed:
		case <-time.After(time.Until(deadline)):
			tb.Fatalf("server still %s after 30s", state)
		}
	}
}
