package main

import (
	"runtime"
	"strings"
	"testing"
	"time"
)

// relistingGoroutines counts the goroutines that wait to list a server
// again (upstream.refreshLoop), over the whole test binary.
func relistingGoroutines() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Count(string(buf[:n]), "(*upstream).refreshLoop(")
		}
		buf = make([]byte, 2*len(buf))
	}
}

func TestAServersFirstListChangedStartsItsRelisting(t *testing.T) {
	// Not parallel: the goroutines of other tests' servers would count.
	tg := startGateway(t, `{"mcpServers":{"fake":{"command":"FAKE","args":["-state","STATE"]}}}`)
	if n := relistingGoroutines(); n != 0 {
		t.Errorf("a ready server that never said its lists changed has %d goroutines waiting to list it again, want 0", n)
	}
	pid := serversNamed(t, tg.dir, "fake")[0].PID
	lists := func() int {
		n := 0
		for _, e := range fakeEvents(t, tg.dir, pid) {
			if e.Event == "request" && e.Method == "tools/list" {
				n++
			}
		}
		return n
	}
	before := lists()
	c := connect(t, tg.url)
	if got := toolText(t, c.callTool("1", "list_changed", `{}`)); got != "sent" {
		t.Fatalf("list_changed = %q, want sent", got)
	}
	waitFor(t, 10*time.Second, "the server listed again after its list_changed", func() bool { return lists() > before })
	if n := relistingGoroutines(); n != 1 {
		t.Errorf("after its list_changed the server has %d goroutines listing it again, want 1", n)
	}
}
