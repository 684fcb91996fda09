package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// ctxFor returns a context that ends after d, ended when the test ends.
func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func servers(names ...string) []serverSpec {
	var s []serverSpec
	for _, n := range names {
		s = append(s, serverSpec{Name: n})
	}
	return s
}

// --- catalog and routing ---

func TestCatalogListsEveryServersToolsByTheAdaptersNamingRule(t *testing.T) {
	guarantee(t)
	specs := []serverSpec{{Name: "paged", flags: []string{"-page-size", "2", "-extra-tools", "5"}}, {Name: "alpha"}, {Name: "beta"}}
	if adapter.MaxServers == 1 {
		specs = specs[:1]
	}
	g := startGateway(t, specs, options{}, "paged")
	listed, err := g.newSession().toolNames()
	if err != nil {
		fatal(t, "tools/list: %v", err)
	}
	var missing []string
	for _, s := range names(specs) {
		for _, tool := range []string{"echo", "whoami", "sleep", "hang", "big", "crash"} {
			if n := toolName(t, s, s+"_"+tool); !contains(listed, n) {
				missing = append(missing, n)
			}
		}
	}
	for i := range 5 {
		// Only reachable by following the server's nextCursor.
		if n := toolName(t, "paged", fmt.Sprintf("paged_tool_%03d", i)); !contains(listed, n) {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		fail(t, "tools/list lacks %q (listed: %q)", missing, listed)
	}
	seen := map[string]bool{}
	for _, n := range listed {
		if seen[n] {
			fail(t, "tools/list lists %q twice", n)
		}
		seen[n] = true
	}
}

func TestRoutingSendsEachCallToTheServerThatOwnsTheTool(t *testing.T) {
	guarantee(t)
	specs := servers("alpha", "beta", "gamma")
	// With prefixes, two servers whose own names for their tools are the
	// same (shared_whoami): a gateway that found the server by that name,
	// not by the name the client called, would send both calls to one.
	shared := adapter.has("prefix")
	if shared {
		specs = append(specs, serverSpec{Name: "one", flags: []string{"-prefix", "shared_"}, prefix: "one"},
			serverSpec{Name: "two", flags: []string{"-prefix", "shared_"}, prefix: "two"})
	} else {
		t.Logf("the adapter has no prefix setting: servers whose tools share a name are not tried")
	}
	g := startGateway(t, specs, options{}, "alpha", "beta", "gamma")
	s := g.newSession()
	for _, name := range []string{"gamma", "alpha", "beta"} {
		m, err := s.call(ctxFor(t, 30*time.Second), `1`, name, "whoami", map[string]any{})
		if err != nil {
			fatal(t, "calling %s's whoami: %v", name, err)
		}
		text, err := m.text()
		if err != nil || !strings.Contains(text, `"name":"`+name+`"`) {
			fail(t, "%s's whoami answered %q, %v: the call reached the wrong server", name, text, err)
		}
	}
	if !shared {
		return
	}
	names := []string{g.toolName("two", "shared_whoami"), g.toolName("one", "shared_whoami")}
	for deadline := time.Now().Add(adapter.readyFor); ; {
		listed, err := s.toolNames()
		if err == nil && contains(listed, names[0]) && contains(listed, names[1]) {
			break
		}
		if time.Now().After(deadline) {
			fatal(t, "%q are not both listed within %s (%v): %v", names, adapter.readyFor, err, listed)
		}
		time.Sleep(100 * time.Millisecond) // the gateway gives no signal to wait on
	}
	for i, server := range []string{"two", "one"} {
		m, err := s.request(ctxFor(t, 30*time.Second), fmt.Sprint(2+i), "tools/call", map[string]any{"name": names[i], "arguments": map[string]any{}})
		if err != nil {
			fatal(t, "calling %s: %v", names[i], err)
		}
		text, err := m.text()
		if err != nil || !strings.Contains(text, `"name":"`+server+`"`) {
			fail(t, "%s, server %s's shared_whoami, answered %q, %v: the call reached the wrong server (servers one and two both name the tool shared_whoami)", names[i], server, text, err)
		}
	}
}

func TestUnknownToolIsAnErrorAndTheGatewayKeepsWorking(t *testing.T) {
	guarantee(t)
	g := startGateway(t, servers("alpha"), options{}, "alpha")
	s := g.newSession()
	m, err := s.request(ctxFor(t, 30*time.Second), `"u"`, "tools/call", map[string]any{"name": "no_such_tool_anywhere", "arguments": map[string]any{}})
	switch {
	case err != nil:
		fatal(t, "calling an unknown tool: %v", err)
	case m.Error == nil && !strings.Contains(string(m.Result), `"isError":true`):
		fail(t, "calling an unknown tool answered %s, want an error", truncate(m.Result))
	}
	if _, err := callText(t, s, "alpha", "echo", map[string]any{"text": "still here"}); err != nil {
		fail(t, "after the unknown tool, echo: %v", err)
	}
}

// callText calls a tool and returns its text.
func callText(t *testing.T, s *session, server, tool string, args any) (string, error) {
	m, err := s.call(ctxFor(t, 60*time.Second), fmt.Sprint(rand.Int64N(1<<40)), server, tool, args)
	if err != nil {
		return "", err
	}
	return m.text()
}

// --- multiplexing ---

func TestMultiplexingReturnsEveryAnswerToItsCallerWithItsOwnID(t *testing.T) {
	guarantee(t)
	if adapter.Transport == "stdio" {
		skip(t, "the gateway's stdio transport carries one session")
	}
	const sessions, perSession = 10, 100
	g := startGateway(t, servers("mux"), options{}, "mux")
	var ss []*session
	for range sessions {
		ss = append(ss, g.newSession())
	}
	var mu sync.Mutex
	var wrong []string
	var wg sync.WaitGroup
	for si, s := range ss {
		for n := range perSession {
			wg.Add(1)
			go func() {
				defer wg.Done()
				// The same IDs in every session; integers and strings of the
				// same digits; answers delayed at random, so they come back
				// out of order.
				id := []string{fmt.Sprint(n), fmt.Sprintf(`"%d"`, n)}[n%2]
				text := fmt.Sprintf("session %d call %d", si, n)
				raw, err := s.rawRequest(ctxFor(t, 120*time.Second), id, "tools/call", map[string]any{
					"name": toolName(t, "mux", "mux_echo"), "arguments": map[string]any{"text": text, "delay_ms": rand.IntN(50)}})
				var m message
				if err == nil {
					err = json.Unmarshal(raw, &m)
				}
				got := ""
				if err == nil {
					got, err = m.text()
				}
				if err != nil || !sameID(m.ID, id) || got != text {
					mu.Lock()
					wrong = append(wrong, fmt.Sprintf("session %d, id %s: got id %s, text %q, err %v", si, id, m.ID, got, err))
					mu.Unlock()
				}
			}()
		}
	}
	wg.Wait()
	if len(wrong) > 0 {
		fail(t, "%d of %d calls came back wrong; first: %s", len(wrong), sessions*perSession, wrong[0])
	}
	if n := len(serverStarts(g.stateDir, "mux")); n != 1 {
		fail(t, "%d processes ran the server, want 1 shared by every session", n)
	}
}

// --- timeouts ---

func TestTimeoutFailsTheCallInTimeAndCancelsItOnTheServer(t *testing.T) {
	guarantee(t)
	const timeout, slack = 2 * time.Second, 5 * time.Second
	g := startGateway(t, servers("slow"), options{timeout: timeout}, "slow")
	s := g.newSession()

	// A fast call during the hang must not be held up by it.
	fast := make(chan error, 1)
	start := time.Now()
	hang := make(chan *message, 1)
	go func() {
		m, err := s.call(ctxFor(t, timeout+slack), `"hang"`, "slow", "hang", map[string]any{})
		if err != nil {
			m = nil
		}
		hang <- m
	}()
	go func() { _, err := callText(t, s, "slow", "echo", map[string]any{"text": "fast"}); fast <- err }()
	if err := <-fast; err != nil {
		fail(t, "a call during the hang failed: %v", err)
	}
	m := <-hang
	took := time.Since(start)
	switch {
	case m == nil:
		fatal(t, "the hanging call got no answer within the timeout (%s) plus %s", timeout, slack)
	case m.Error == nil && !strings.Contains(string(m.Result), `"isError":true`):
		fail(t, "the hanging call answered %s, want an error", truncate(m.Result))
	case took < timeout-100*time.Millisecond:
		fail(t, "the hanging call failed after %s, before its timeout of %s", took, timeout)
	}

	// The server must hear of it, with its own ID for the request.
	var hangID json.RawMessage
	deadline := time.Now().Add(slack)
	cancelled := false
	for !cancelled && time.Now().Before(deadline) {
		for _, e := range allEvents(g.stateDir) {
			if e.Event == "request" && e.Tool == "slow_hang" {
				hangID = e.ID
			}
			if e.Event == "cancelled" && hangID != nil && bytes.Equal(e.RequestID, hangID) {
				cancelled = true
			}
		}
		time.Sleep(50 * time.Millisecond) // the server's records give no signal
	}
	if !cancelled {
		fail(t, "the server never received notifications/cancelled for its request %s", hangID)
	}

	// A late answer must not be delivered: the next call gets its own.
	late := make(chan *message, 1)
	go func() {
		m, _ := s.call(ctxFor(t, timeout+slack), `"late"`, "slow", "echo", map[string]any{"text": "late", "delay_ms": (timeout + time.Second).Milliseconds()})
		late <- m
	}()
	if m := <-late; m != nil && m.Error == nil {
		if text, _ := m.text(); text == "late" {
			fail(t, "a call slower than the timeout was answered anyway after %s", timeout)
		}
	}
	if text, err := callText(t, s, "slow", "echo", map[string]any{"text": "next"}); err != nil || text != "next" {
		fail(t, "the call after the late one got %q, %v; want its own answer", text, err)
	}
}

// --- crashes ---

func TestCrashFailsPendingCallsPromptlyAndTheServerComesBack(t *testing.T) {
	guarantee(t)
	const pending = 20
	opts := options{}
	if adapter.has("timeout") {
		opts.timeout = 60 * time.Second
	}
	if adapter.has("restartDelay") {
		opts.restartDelay = 200 * time.Millisecond
	}
	g := startGateway(t, servers("crashy"), opts, "crashy")
	s := g.newSession()
	first := serverStarts(g.stateDir, "crashy")[0].PID
	results := make(chan time.Duration, pending)
	for i := range pending {
		go func() {
			start := time.Now()
			s.call(ctxFor(t, 90*time.Second), fmt.Sprint(i), "crashy", "sleep", map[string]any{"ms": 600000})
			results <- time.Since(start)
		}()
	}
	waitEvents(t, g.stateDir, 10*time.Second, func(es []fakeEvent) bool { return countTool(es, "crashy_sleep") == pending })
	crashAt := time.Now()
	go s.call(ctxFor(t, 30*time.Second), `"crash"`, "crashy", "crash", map[string]any{"code": 3})
	const prompt = 10 * time.Second // well before any sensible timeout
	for range pending {
		select {
		case <-results:
		case <-time.After(prompt - time.Since(crashAt)):
			fatal(t, "calls pending on the crashed server were still waiting %s after the crash", prompt)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		text, err := callText(t, s, "crashy", "whoami", map[string]any{})
		if err == nil && !strings.Contains(text, fmt.Sprintf(`"pid":%d`, first)) {
			break
		}
		if time.Now().After(deadline) {
			fatal(t, "30s after the crash the server still does not answer (last: %q, %v)", text, err)
		}
		time.Sleep(200 * time.Millisecond) // polling the gateway as a client would
	}
}

func countTool(es []fakeEvent, tool string) int {
	n := 0
	for _, e := range es {
		if e.Event == "request" && e.Tool == tool {
			n++
		}
	}
	return n
}

// waitEvents polls the servers' records until cond holds.
func waitEvents(t *testing.T, dir string, d time.Duration, cond func([]fakeEvent) bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond(allEvents(dir)) {
		if time.Now().After(deadline) {
			fatal(t, "the servers' records did not show what the case waits for within %s", d)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestCrashLoopRestartsSlowDownAndStopWhileOthersServe(t *testing.T) {
	guarantee(t)
	opts := options{}
	if adapter.has("restartDelay") {
		opts.restartDelay = 200 * time.Millisecond
	}
	specs, ready := withSteady(serverSpec{Name: "loop", flags: []string{"-crash-at-start"}})
	g := startGateway(t, specs, opts, ready...)
	// Watch the starts until none comes for quiet, within limit.
	const quiet, limit = 15 * time.Second, 120 * time.Second
	start, lastCount, lastChange := time.Now(), 0, time.Now()
	for time.Since(lastChange) < quiet {
		if time.Since(start) > limit {
			fatal(t, "the gateway was still restarting the crashing server after %s (%d starts)", limit, lastCount)
		}
		if n := len(serverStarts(g.stateDir, "loop")); n != lastCount {
			lastCount, lastChange = n, time.Now()
		}
		time.Sleep(100 * time.Millisecond)
	}
	starts := serverStarts(g.stateDir, "loop")
	if len(starts) < 3 {
		fatal(t, "the crashing server was started %d time(s); want restarts (at least 3 starts) before the gateway gives up", len(starts))
	}
	// The gateway's delay before a restart is the time from the server's
	// exit (which it records) to its next start: the gaps between starts
	// also carry the start-up overhead, so a delay that exactly doubles
	// does not double the gap. A delay that grows, as a doubling backoff's
	// does, puts the later half of the delays well above the earlier half:
	// their mean at least 1.75 times (doubling gives 2 or more; a constant
	// delay, with 50% jitter and a loaded machine's noise, stays near 1).
	var delays []time.Duration
	for i := 1; i < len(starts); i++ {
		from := starts[i-1].Start
		for _, e := range events(g.stateDir, starts[i-1].PID) {
			if e.Event == "exit" {
				from = e.Time
			}
		}
		delays = append(delays, starts[i].Start.Sub(from))
	}
	half := len(delays) / 2
	mean := func(ds []time.Duration) time.Duration {
		var sum time.Duration
		for _, d := range ds {
			sum += d
		}
		return sum / time.Duration(len(ds))
	}
	if early, late := mean(delays[:half]), mean(delays[len(delays)-half:]); 4*late < 7*early {
		fail(t, "the restarts did not slow down: the later delays (from the server's exit to its next start) average %s, the earlier %s, want at least 1.75 times as long: a delay that grows (delays %v)", late, early, delays)
	}
	if len(ready) > 0 {
		if _, err := callText(t, g.newSession(), "steady", "echo", map[string]any{"text": "ok"}); err != nil {
			fail(t, "the other server stopped serving during the crash loop: %v", err)
		}
	}
}

// --- large and bad messages from servers ---

func TestLargeMessagesArriveIntact(t *testing.T) {
	guarantee(t)
	g := startGateway(t, servers("big"), options{}, "big")
	s := g.newSession()
	for _, size := range []int{1 << 20, 16 << 20} {
		text, err := callText(t, s, "big", "big", map[string]any{"bytes": size})
		if err != nil {
			fail(t, "a %d MiB answer: %v", size>>20, err)
			continue
		}
		if len(text) != size {
			fail(t, "a %d MiB answer arrived with %d bytes", size>>20, len(text))
			continue
		}
		for i := range len(text) {
			if text[i] != byte('a'+i%26) {
				fail(t, "a %d MiB answer differs at byte %d", size>>20, i)
				break
			}
		}
	}
	req := strings.Repeat("0123456789abcdef", 1<<20/16)
	if text, err := callText(t, s, "big", "echo", map[string]any{"text": req}); err != nil || text != req {
		fail(t, "a 1 MiB request came back as %d bytes, %v", len(text), err)
	}
}

func TestStderrFloodDoesNotStallTheServer(t *testing.T) {
	guarantee(t)
	g := startGateway(t, servers("noisy"), options{}, "noisy")
	s := g.newSession()
	if text, err := callText(t, s, "noisy", "stderr", map[string]any{"bytes": 10 << 20}); err != nil || text != "done" {
		fail(t, "after writing 10 MiB to stderr the server answered %q, %v", text, err)
	}
	if text, err := callText(t, s, "noisy", "echo", map[string]any{"text": "still"}); err != nil || text != "still" {
		fail(t, "the next call answered %q, %v", text, err)
	}
}

func TestGarbageOnStdoutDoesNotBreakTheServer(t *testing.T) {
	guarantee(t)
	g := startGateway(t, servers("messy"), options{}, "messy")
	s := g.newSession()
	if text, err := callText(t, s, "messy", "garbage", map[string]any{"lines": 20}); err != nil || text != "done" {
		fail(t, "after 20 lines that are not JSON the server answered %q, %v", text, err)
	}
	if text, err := callText(t, s, "messy", "echo", map[string]any{"text": "still"}); err != nil || text != "still" {
		fail(t, "the next call answered %q, %v", text, err)
	}
}

// --- orphans and shutdown ---

// escapers are servers whose descendants try to outlive them: one in the
// server's process group, one that called setsid, one double-forked daemon;
// and a server that ignores both the end of its stdin and SIGTERM.
func escapers() []serverSpec {
	if adapter.MaxServers == 1 {
		// One server that does the worst it can alone: a grandchild that
		// leaves the group, and no exit on the end of stdin or SIGTERM.
		return []serverSpec{{Name: "setsid", flags: []string{"-grandchild", "setsid", "-grandchild-ignores-sigterm", "-ignore-sigterm", "-ignore-stdin-close"}}}
	}
	return []serverSpec{
		{Name: "group", flags: []string{"-grandchild", "group", "-grandchild-ignores-sigterm"}},
		{Name: "setsid", flags: []string{"-grandchild", "setsid", "-grandchild-ignores-sigterm"}},
		{Name: "daemon", flags: []string{"-grandchild", "daemon", "-grandchild-ignores-sigterm"}},
		{Name: "stubborn", flags: []string{"-ignore-sigterm", "-ignore-stdin-close"}},
	}
}

func shutdownOptions() options {
	o := options{}
	if adapter.has("stopGrace") {
		o.stopGrace = 500 * time.Millisecond
	}
	return o
}

func TestSIGTERMLeavesNoProcessOfAnyServersTree(t *testing.T) {
	guarantee(t)
	g := startGateway(t, escapers(), shutdownOptions(), names(escapers())...)
	g.signal(syscall.SIGTERM)
	if !g.waitExit(adapter.bound) {
		fail(t, "the gateway did not exit within %s of SIGTERM", adapter.bound)
	}
	if left := waitGone(g.stateDir, 5*time.Second); len(left) > 0 {
		fail(t, "after the gateway's exit these are still running: %s", describe(g.stateDir, left))
	}
}

func TestCrashAndRestartLeaveNoProcessOfTheDeadServersTree(t *testing.T) {
	guarantee(t)
	opts := options{}
	if adapter.has("restartDelay") {
		opts.restartDelay = 200 * time.Millisecond
	}
	g := startGateway(t, []serverSpec{{Name: "setsid", flags: []string{"-grandchild", "setsid", "-grandchild-ignores-sigterm"}}}, opts, "setsid")
	s := g.newSession()
	var before []int
	for _, p := range processes(g.stateDir) {
		before = append(before, p.PID)
	}
	go s.call(ctxFor(t, 30*time.Second), `"crash"`, "setsid", "crash", map[string]any{})
	deadline := time.Now().Add(30 * time.Second)
	for len(serverStarts(g.stateDir, "setsid")) < 2 {
		if time.Now().After(deadline) {
			fatal(t, "the gateway did not restart the crashed server within 30s")
		}
		time.Sleep(100 * time.Millisecond)
	}
	var left []int
	for end := time.Now().Add(10 * time.Second); ; {
		left = left[:0]
		for _, pid := range before {
			if alive(pid) {
				left = append(left, pid)
			}
		}
		if len(left) == 0 || time.Now().After(end) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if len(left) > 0 {
		fail(t, "10s after the restart, the crashed server's tree is still running: %s", describe(g.stateDir, left))
	}
}

func TestSIGTERMDuringBackoffStartsNothing(t *testing.T) {
	guarantee(t)
	opts := options{}
	if adapter.has("restartDelay") {
		opts.restartDelay = 3 * time.Second
	}
	specs, ready := withSteady(serverSpec{Name: "loop", flags: []string{"-crash-at-start"}})
	g := startGateway(t, specs, opts, ready...)
	// Wait for the first crash; the gateway then waits before restarting.
	deadline := time.Now().Add(10 * time.Second)
	for !hasExit(g.stateDir, "loop") {
		if time.Now().After(deadline) {
			fatal(t, "the crashing server never ran")
		}
		time.Sleep(20 * time.Millisecond)
	}
	n := len(serverStarts(g.stateDir, "loop"))
	g.signal(syscall.SIGTERM)
	if !g.waitExit(adapter.bound) {
		fail(t, "the gateway did not exit within %s of SIGTERM", adapter.bound)
	}
	if got := len(serverStarts(g.stateDir, "loop")); got != n {
		fail(t, "the gateway started the crashing server %d more time(s) after SIGTERM", got-n)
	}
	if left := waitGone(g.stateDir, 5*time.Second); len(left) > 0 {
		fail(t, "after the gateway's exit these are still running: %s", describe(g.stateDir, left))
	}
}

func hasExit(dir, name string) bool {
	for _, s := range serverStarts(dir, name) {
		for _, e := range events(dir, s.PID) {
			if e.Event == "exit" {
				return true
			}
		}
	}
	return false
}

func TestSIGTERMWithCallsInFlightAnswersEachAndExitsInTime(t *testing.T) {
	guarantee(t)
	if adapter.Transport == "stdio" {
		skip(t, "a stdio gateway's answers cannot outlive the signal's effect on its stdout")
	}
	const calls = 100
	opts := shutdownOptions()
	if adapter.has("shutdownTimeout") {
		// Room for the released calls to be answered on a loaded machine;
		// the slow calls hold the gateway for all of it, and it must still
		// exit within its bound.
		opts.shutdownTimeout = 5 * time.Second
	}
	g := startGateway(t, servers("busy"), opts, "busy")
	ss := []*session{g.newSession(), g.newSession(), g.newSession(), g.newSession()}
	release := filepath.Join(t.TempDir(), "release")
	type outcome struct {
		i    int
		text string
		err  error
	}
	done := make(chan outcome, calls)
	for i := range calls {
		go func() {
			// The even calls are held until just after SIGTERM, so they are
			// in flight when it comes and could then be answered at once;
			// the odd ones outlast any drain.
			tool, args := "wait", map[string]any{"file": release}
			if i%2 == 1 {
				tool, args = "sleep", map[string]any{"ms": 600000}
			}
			o := outcome{i: i}
			var m *message
			if m, o.err = ss[i%len(ss)].call(ctxFor(t, adapter.bound+30*time.Second), fmt.Sprint(i), "busy", tool, args); o.err == nil {
				o.text, o.err = m.text()
			}
			done <- o
		}()
	}
	waitEvents(t, g.stateDir, 30*time.Second, func(es []fakeEvent) bool {
		return countTool(es, "busy_wait") == calls/2 && countTool(es, "busy_sleep") == calls/2
	})
	g.signal(syscall.SIGTERM)
	if err := os.WriteFile(release, nil, 0o600); err != nil {
		fatal(t, "releasing the held calls: %v", err)
	}
	if !g.waitExit(adapter.bound) {
		fail(t, "the gateway did not exit within %s of SIGTERM with %d calls in flight", adapter.bound, calls)
	}
	var hung, lost []string
	for range calls {
		switch o := <-done; {
		case errors.Is(o.err, context.DeadlineExceeded):
			hung = append(hung, fmt.Sprint(o.i))
		case o.i%2 == 0 && (o.err != nil || o.text != "released"):
			lost = append(lost, fmt.Sprintf("call %d: %q, %v", o.i, o.text, o.err))
		}
	}
	if len(hung) > 0 {
		fail(t, "calls %s got nothing: they hung past the gateway's exit", strings.Join(hung, ", "))
	}
	if len(lost) > 0 {
		fail(t, "%d of the %d calls released just after SIGTERM did not get their answer \"released\" (first: %s)", len(lost), calls/2, lost[0])
	}
}

func TestSIGKILLedGatewayLeavesNoServerRunning(t *testing.T) {
	guarantee(t)
	g := startGateway(t, escapers(), options{}, names(escapers())...)
	var serverPIDs []int
	for _, p := range processes(g.stateDir) {
		if p.Role == "server" {
			serverPIDs = append(serverPIDs, p.PID)
		}
	}
	g.signal(syscall.SIGKILL)
	g.waitExit(10 * time.Second)
	var left []int
	for end := time.Now().Add(5 * time.Second); ; {
		left = left[:0]
		for _, pid := range serverPIDs {
			if alive(pid) {
				left = append(left, pid)
			}
		}
		if len(left) == 0 || time.Now().After(end) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(left) > 0 {
		fatal(t, "5s after the gateway was killed with SIGKILL its servers still run: %s", describe(g.stateDir, left))
	}
	// Descendants that left their server's group cannot get a parent-death
	// signal; the gateway's next start must clean them up.
	startGateway(t, servers("next"), options{}, "next")
	if left := waitGone(g.stateDir, 10*time.Second); len(left) > 0 {
		fail(t, "after the gateway was started again, the killed gateway's processes still run: %s", describe(g.stateDir, left))
	}
}

func names(specs []serverSpec) []string {
	var n []string
	for _, s := range specs {
		n = append(n, s.Name)
	}
	return n
}

// withSteady adds a well-behaved server beside specs, when the gateway can
// run more than one, and returns the servers and the names to wait for.
func withSteady(specs ...serverSpec) ([]serverSpec, []string) {
	if adapter.MaxServers == 1 {
		return specs, nil
	}
	return append(specs, serverSpec{Name: "steady"}), []string{"steady"}
}

// --- bad input from clients ---

func TestBadInputGetsTheSpecsAnswerAndTheGatewayKeepsServing(t *testing.T) {
	guarantee(t)
	if adapter.Transport != "http" {
		skip(t, "these cases are about the Streamable HTTP transport")
	}
	g := startGateway(t, servers("good"), options{}, "good")
	s := g.newSession()
	c := s.conn.(*httpConn)
	ping := []byte(`{"jsonrpc":"2.0","id":1,"method":"ping"}`)
	for _, tc := range []struct {
		name       string
		body       []byte
		headers    []string
		noSession  bool
		session    string
		wantStatus []int
		wantCode   int // JSON-RPC error code the body must hold; 0 for none
	}{
		{name: "malformed JSON", body: []byte(`{"jsonrpc":"2.0","id":1,`), wantStatus: []int{400}, wantCode: -32700},
		{name: "not a JSON-RPC request", body: []byte(`{"jsonrpc":"2.0","id":1}`), wantStatus: []int{400, 200}, wantCode: -32600},
		{name: "a batch", body: []byte(`[` + string(ping) + `]`), wantStatus: []int{400, 200}, wantCode: -32600},
		{name: "a foreign Origin", body: ping, headers: []string{"Origin", "https://evil.example"}, wantStatus: []int{403}},
		{name: "an oversized body", body: append(append([]byte(`{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"`), bytes.Repeat([]byte("x"), 40<<20)...), `"}}`...), wantStatus: []int{413}},
		{name: "no session", body: ping, noSession: true, wantStatus: []int{400}},
		{name: "an unknown session", body: ping, session: "00000000000000000000000000000000", wantStatus: []int{404}},
	} {
		parent := t
		t.Run(tc.name, func(t *testing.T) {
			fail := func(t *testing.T, format string, args ...any) {
				t.Helper()
				note(parent, fmt.Sprintf(format, args...))
				t.Errorf(format, args...)
			}
			req, _ := http.NewRequest("POST", c.url, bytes.NewReader(tc.body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			switch {
			case tc.session != "":
				req.Header.Set("Mcp-Session-Id", tc.session)
			case !tc.noSession:
				req.Header.Set("Mcp-Session-Id", c.sid)
			}
			for i := 0; i+1 < len(tc.headers); i += 2 {
				req.Header.Set(tc.headers[i], tc.headers[i+1])
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				fail(t, "%s: %v", tc.name, err)
				return
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if !containsInt(tc.wantStatus, resp.StatusCode) {
				fail(t, "%s: HTTP %d (%s), want %v", tc.name, resp.StatusCode, truncate(body), tc.wantStatus)
				return
			}
			if tc.wantCode == 0 {
				return
			}
			// The error is the body, or the data of the first event of a
			// stream; anything that is not a JSON-RPC error fails.
			msg := bytes.TrimSpace(body)
			if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
				msg = nil
				sseEvents(bytes.NewReader(body), func(_, data string) bool { msg = []byte(data); return false })
			}
			var m message
			if err := json.Unmarshal(msg, &m); err != nil || m.Error == nil || m.Error.Code != tc.wantCode {
				fail(t, "%s: HTTP %d with body %q, want a JSON-RPC error %d", tc.name, resp.StatusCode, truncate(body), tc.wantCode)
			}
		})
	}
	if text, err := callText(t, s, "good", "echo", map[string]any{"text": "ok"}); err != nil || text != "ok" {
		fail(t, "after the bad input the gateway answered %q, %v", text, err)
	}
}

func containsInt(list []int, n int) bool {
	for _, x := range list {
		if x == n {
			return true
		}
	}
	return false
}
