package conformance

import (
	"os"
	"regexp"
	"strconv"
	"testing"
	"time"
)

// A server may send its client requests (sampling, elicitation, roots)
// while it serves the client's call. A gateway that keeps every one until
// the client answers grows without bound when a server floods: it must
// refuse those past a bound of its own, at once.

// Sizes of the flood: each request carries floodBytes of prompt, so that a
// gateway that keeps them all holds more than floodCount*floodBytes (40 MB).
const (
	floodCount = 10000
	floodBytes = 4000
	// floodAnswered is how many of the flood the server must have answered
	// (refused, or answered by the client, which here answers nothing)
	// within the fake server's 30 s: a gateway may let up to 1,000 wait.
	floodAnswered = 9000
	// floodGrowth bounds the growth of the gateway's resident memory in a
	// second flood: half of what keeping the flood would take. (corral,
	// bounded, grows by about 5 MB; with its bound removed, by about 70 MB.)
	floodGrowth = floodCount * floodBytes / 2
)

func TestServerRequestFloodIsBoundedAndTheGatewayKeepsServing(t *testing.T) {
	guarantee(t)
	// The other calls go to a server of their own, from a session of their
	// own, where the gateway can: a gateway may refuse a server's requests
	// while two sessions call it (it cannot tell whose they are), which
	// would end the flood early.
	names := []string{"fl", "ok"}
	if adapter.MaxServers == 1 {
		names = names[:1]
	}
	otherServer := names[len(names)-1]
	g := startGateway(t, servers(names...), options{}, names...)
	pid := g.cmd.Process.Pid
	caller := g.newSessionWith(map[string]any{"sampling": map[string]any{}})
	caller.listen(t)
	other := caller
	if adapter.Transport != "stdio" && otherServer != "fl" {
		other = g.newSession()
	}
	callOther := func(text string) (string, error) {
		return callText(t, other, otherServer, "echo", map[string]any{"text": text})
	}
	// The gateway has served a call before it is measured.
	if text, err := callOther("warm"); err != nil || text != "warm" {
		fatal(t, "before the flood the gateway answered %q, %v", text, err)
	}
	// One flood, then another: what a gateway holds of a flood grows with
	// each, while what it only parsed and dropped (a garbage-collected
	// heap's high-water mark after the first burst) is reused by the
	// second. So memory is measured across the second flood.
	var rss []int64
	for round := 1; round <= 2; round++ {
		rss = append(rss, treeRSS(pid, g.stateDir))
		var flood string
		var floodErr error
		done := make(chan struct{})
		go func() {
			defer close(done)
			m, err := caller.call(ctxFor(t, 90*time.Second), `"flood"`, "fl", "flood_sampling",
				map[string]any{"count": floodCount, "bytes": floodBytes, "answers": floodAnswered})
			flood, floodErr = m.textOr(err)
		}()
		// Another call while the server floods (or just after) is served.
		sent := time.Now().Add(30 * time.Second)
		for floodsSent(g.stateDir) < round {
			if time.Now().After(sent) {
				fatal(t, "the server never began its flood %d (no flood-sampling event within 30s)", round)
			}
			time.Sleep(20 * time.Millisecond) // the server's records give no signal
		}
		if text, err := callOther("during"); err != nil || text != "during" {
			fail(t, "during flood %d the gateway answered another call %q, %v; want %q", round, text, err, "during")
		}
		<-done
		if floodErr != nil {
			fatal(t, "the flooding call %d failed: %v", round, floodErr)
		}
		t.Logf("the server's tally of flood %d: %s", round, flood)
		answered, ok := tally(flood)
		switch {
		case !ok:
			fatal(t, "the flooding call %d answered %q, not the server's tally", round, flood)
		case answered < floodAnswered:
			fatal(t, "the server got answers to %d of its %d requests within 30s, want at least %d: the gateway holds the rest without bound (%s)",
				answered, floodCount, floodAnswered, flood)
		}
	}
	after := treeRSS(pid, g.stateDir)
	t.Logf("the gateway's resident memory: %d KiB before the floods, %d KiB after the first, %d KiB after the second", rss[0]/1024, rss[1]/1024, after/1024)
	if after-rss[1] > floodGrowth {
		fail(t, "the gateway's resident memory grew by %d MiB in a second flood of %d requests of %d bytes (by %d MiB in the first), want less than %d MiB: it holds what it was sent",
			(after-rss[1])>>20, floodCount, floodBytes, (rss[1]-rss[0])>>20, floodGrowth>>20)
	}
	if text, err := callOther("after"); err != nil || text != "after" {
		fail(t, "after the flood the gateway answered %q, %v", text, err)
	}
}

// floodsSent counts the floods the servers of dir recorded sending.
func floodsSent(dir string) int {
	n := 0
	for _, e := range allEvents(dir) {
		if e.Event == "flood-sampling" {
			n++
		}
	}
	return n
}

var tallyRE = regexp.MustCompile(`^answered (\d+) of \d+:`)

// tally returns how many requests the server says were answered.
func tally(text string) (int, bool) {
	m := tallyRE.FindStringSubmatch(text)
	if m == nil {
		return 0, false
	}
	n, err := strconv.Atoi(m[1])
	return n, err == nil
}

// treeRSS returns the resident memory, in bytes, of process pid and its
// descendants but the fake servers of dir: the gateway, however many
// processes it runs as.
func treeRSS(pid int, dir string) int64 {
	servers := map[int]bool{}
	for _, p := range marked(dir) {
		servers[p] = true
	}
	children := map[int][]int{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if _, ppid, ok := procStat(p); ok {
			children[ppid] = append(children[ppid], p)
		}
	}
	var total int64
	var walk func(int)
	walk = func(p int) {
		if servers[p] {
			return
		}
		total += int64(status(p, "VmRSS")) * 1024
		for _, c := range children[p] {
			walk(c)
		}
	}
	walk(pid)
	return total
}
