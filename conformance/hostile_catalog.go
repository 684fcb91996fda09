package conformance

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// --- hostile catalogs ---

// hugeCatalogMiB is the size of the hostile server's catalog: far more than
// a gateway needs to hold for any real server, and twice peakBound.
const hugeCatalogMiB = 256

// peakBound is the most memory the gateway (its processes, not its servers)
// may have used at its peak, in KiB.
const peakBound = 128 << 10

func TestHugeCatalogDoesNotTakeTheGatewaysMemoryOrStopOthers(t *testing.T) {
	guarantee(t)
	specs := []serverSpec{{Name: "steady"}, {Name: "huge", flags: []string{"-huge-catalog", strconv.Itoa(hugeCatalogMiB)}}}
	g := startGateway(t, specs, options{}, "steady")
	s := g.newSession()
	defer s.close()

	// Until the gateway is done with the catalog (it has read it all, or
	// given up on it and started the server again, or stopped asking for
	// pages: how far it follows pages is the catalog case's verdict, not
	// this one's), the other server must keep answering.
	pages := hugeCatalogMiB + 1 // of about 1 MiB each
	const quiet = 15 * time.Second
	deadline := time.Now().Add(90 * time.Second)
	lastLists, lastChange := -1, time.Now()
	for {
		lists, starts := 0, len(serverStarts(g.stateDir, "huge"))
		for _, st := range serverStarts(g.stateDir, "huge") {
			for _, e := range events(g.stateDir, st.PID) {
				if e.Event == "request" && e.Method == "tools/list" {
					lists++
				}
			}
		}
		if lists != lastLists {
			lastLists, lastChange = lists, time.Now()
		}
		if lists >= pages || starts >= 2 {
			break
		}
		if time.Since(lastChange) > quiet {
			t.Logf("the gateway stopped asking for pages of the huge catalog after %d of %d", lists, pages)
			break
		}
		if time.Now().After(deadline) {
			fatal(t, "90s after it started, the gateway is still reading the huge catalog, and has not started its server again (%d pages asked for of %d, %d starts)", lists, pages, starts)
		}
		start := time.Now()
		if text, err := callText(t, s, "steady", "whoami", map[string]any{}); err != nil || !strings.Contains(text, `"steady"`) {
			fatal(t, "while the gateway listed the huge catalog, the other server's whoami answered %q, %v", text, err)
		}
		if took := time.Since(start); took > 10*time.Second {
			fail(t, "while the gateway listed the huge catalog, the other server's whoami took %s", took)
		}
	}
	peak, err := gatewayPeakKiB(g)
	t.Logf("the gateway's memory peaked at %d MiB", peak>>10)
	if err != nil {
		fatal(t, "reading the gateway's memory: %v", err)
	} else if peak > peakBound {
		fail(t, "the gateway's memory peaked at %d MiB with a server listing a %d MiB catalog; want under %d MiB", peak>>10, hugeCatalogMiB, peakBound>>10)
	}
	if text, err := callText(t, s, "steady", "whoami", map[string]any{}); err != nil || !strings.Contains(text, `"steady"`) {
		fail(t, "after the huge catalog, the other server's whoami answered %q, %v", text, err)
	}
}

// gatewayPeakKiB returns the peak resident memory (VmHWM) of the gateway's
// process and its descendants, but for the fake servers and theirs.
func gatewayPeakKiB(g *gateway) (int, error) {
	servers := map[int]bool{}
	for _, pid := range marked(g.stateDir) {
		servers[pid] = true
	}
	children := map[int][]int{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			if _, ppid, ok := procStat(pid); ok {
				children[ppid] = append(children[ppid], pid)
			}
		}
	}
	total := 0
	for todo := []int{g.cmd.Process.Pid}; len(todo) > 0; todo = todo[1:] {
		pid := todo[0]
		if servers[pid] {
			continue
		}
		status, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
		if err != nil {
			if pid == g.cmd.Process.Pid {
				return 0, err
			}
			continue // it has just exited
		}
		for line := range bytes.Lines(status) {
			if rest, ok := bytes.CutPrefix(line, []byte("VmHWM:")); ok {
				kib, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(string(rest)), " kB"))
				total += kib
			}
		}
		todo = append(todo, children[pid]...)
	}
	return total, nil
}

func TestPrefixedNameBelongsToItsPrefixsServer(t *testing.T) {
	guarantee(t)
	// The owner zzz lists zzz_whoami, which the gateway names with the
	// prefix gh; aaa, without a prefix and sorting first, lists the very
	// name the gateway gives it (for corral, gh__zzz_whoami).
	if !adapter.has("prefix") {
		skip(t, "the adapter has no prefix setting")
	}
	name := render(t, "toolName", adapter.ToolName, templateData{Server: "zzz", Tool: "zzz_whoami", Prefix: "gh"})
	squat, ok := strings.CutSuffix(name, "whoami")
	if !ok {
		skip(t, "the gateway names zzz_whoami %q; the case needs a name that ends with the tool's own", name)
	}
	specs := []serverSpec{{Name: "aaa", flags: []string{"-prefix", squat}}, {Name: "zzz", prefix: "gh"}}
	g := startGateway(t, specs, options{}, "zzz")
	s := g.newSession()
	defer s.close()

	// Once aaa has listed its tools, and for a while after, so that a
	// gateway that takes them in late is caught too, the name reaches zzz.
	waitEvents(t, g.stateDir, 30*time.Second, func(es []fakeEvent) bool {
		for _, st := range serverStarts(g.stateDir, "aaa") {
			for _, e := range events(g.stateDir, st.PID) {
				if e.Event == "request" && e.Method == "tools/list" {
					return true
				}
			}
		}
		return false
	})
	for i := range 10 {
		m, err := s.request(ctxFor(t, 30*time.Second), strconv.Itoa(100+i), "tools/call", map[string]any{"name": name, "arguments": map[string]any{}})
		if err != nil {
			fatal(t, "calling %s: %v", name, err)
		}
		text, err := m.text()
		if err != nil || !strings.Contains(text, `"name":"zzz"`) {
			fatal(t, "%s, a name in the namespace of zzz's prefix, reached %q (%v), want server zzz; an unprefixed server listing that name took it", name, text, err)
		}
		time.Sleep(200 * time.Millisecond) // the gateway gives no signal that it took aaa's list in
	}
}

func TestTwoServersCannotShareAPrefix(t *testing.T) {
	guarantee(t)
	// aaa and zzz are both given the prefix gh. A gateway may refuse the
	// config at its start; if it serves it, the names of gh's namespace must
	// all reach one server, the same at every call.
	if !adapter.has("prefix") {
		skip(t, "the adapter has no prefix setting")
	}
	specs := []serverSpec{{Name: "aaa", prefix: "gh"}, {Name: "zzz", prefix: "gh"}}
	g := launchGateway(t, specs, options{})
	deadline := time.Now().Add(adapter.readyFor)
	for {
		select {
		case <-g.exited:
			if g.waitErr == nil {
				fatal(t, "the gateway exited with status 0 at its start, neither serving the config nor refusing it")
			}
			t.Logf("the gateway refused the config at its start (%v): %s", g.waitErr, g.output())
			return
		default:
		}
		if s, err := g.trySession(); err == nil {
			s.close()
			break
		}
		if time.Now().After(deadline) {
			fatal(t, "the gateway neither served nor exited within %s", adapter.readyFor)
		}
		time.Sleep(100 * time.Millisecond) // the gateway gives no signal to wait on
	}

	// It serves: each server it started has listed its tools first, so that
	// a gateway that takes a list in late is caught too.
	waitEvents(t, g.stateDir, 30*time.Second, func([]fakeEvent) bool {
		started := 0
		for _, name := range []string{"aaa", "zzz"} {
			for _, st := range serverStarts(g.stateDir, name) {
				started++
				listed := false
				for _, e := range events(g.stateDir, st.PID) {
					listed = listed || e.Event == "request" && e.Method == "tools/list"
				}
				if !listed {
					return false
				}
			}
		}
		return started > 0
	})
	s := g.newSession()
	defer s.close()
	reached := map[string]bool{}
	for i := range 5 {
		for _, server := range []string{"aaa", "zzz"} {
			name := render(t, "toolName", adapter.ToolName, templateData{Server: server, Tool: server + "_whoami", Prefix: "gh"})
			m, err := s.request(ctxFor(t, 30*time.Second), fmt.Sprintf(`"%s-%d"`, server, i), "tools/call", map[string]any{"name": name, "arguments": map[string]any{}})
			if err != nil {
				fatal(t, "calling %s: %v", name, err)
			}
			if text, err := m.text(); err == nil {
				for _, who := range []string{"aaa", "zzz"} {
					if strings.Contains(text, `"name":"`+who+`"`) {
						reached[who] = true
					}
				}
			}
		}
		time.Sleep(200 * time.Millisecond) // the gateway gives no signal that it took a list in
	}
	if reached["aaa"] && reached["zzz"] {
		fatal(t, "names in the namespace of prefix gh reached both aaa and zzz: two servers share the prefix, whose names must belong to one server alone; refuse the config, or give the prefix to one server")
	}
}
