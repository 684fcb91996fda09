package conformance

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A server that keeps state per connection (a browser page, the roots it
// was told) needs a process of its own for each client session: a gateway
// that offers that ("sessionScope": corral's "scope": "session";
// supergateway's stateful mode, which always runs one per session) must
// give each session its own process, end it with the session, and pass the
// process's requests to the session that owns it, whatever other sessions
// are doing.

// sessionScoped is one server, ps, with a process per client session.
func sessionScoped() []serverSpec { return []serverSpec{{Name: "ps", scope: "session"}} }

// needsSessions skips a case over the stdio transport, which carries one
// session.
func needsSessions(t *testing.T) {
	if adapter.Transport == "stdio" {
		skip(t, "the gateway's stdio transport carries one session; the case needs two")
	}
}

// scopedPID returns the PID of the process that answers s's call of ps's
// whoami.
func scopedPID(t *testing.T, s *session) int {
	t.Helper()
	pid, err := whoamiPID(t, s, "ps")
	if err != nil {
		fatal(t, "whoami: %v", err)
	}
	if pid == 0 {
		fatal(t, "whoami answered no PID")
	}
	return pid
}

func TestSessionScopedServerRunsAProcessPerSession(t *testing.T) {
	guarantee(t)
	needsSessions(t)
	g := startGateway(t, sessionScoped(), options{}, "ps")
	one, two := g.newSession(), g.newSession()
	pid1, pid2 := scopedPID(t, one), scopedPID(t, two)
	if pid1 == pid2 {
		fatal(t, "two sessions' calls both reached process %d, want a process per session", pid1)
	}
	if again := scopedPID(t, one); again != pid1 {
		fail(t, "a session's second call reached process %d, its first %d: want its own process each time", again, pid1)
	}
	if again := scopedPID(t, two); again != pid2 {
		fail(t, "the other session's second call reached process %d, its first %d", again, pid2)
	}
}

func TestSessionScopedServersProcessEndsWithItsSession(t *testing.T) {
	guarantee(t)
	needsSessions(t)
	g := startGateway(t, sessionScoped(), options{}, "ps")
	one, two := g.newSession(), g.newSession()
	pid1, pid2 := scopedPID(t, one), scopedPID(t, two)
	one.close() // DELETE, or the end of its stream
	deadline := time.Now().Add(10 * time.Second)
	for alive(pid1) {
		if time.Now().After(deadline) {
			fatal(t, "process %d of the ended session still runs 10s after the session ended", pid1)
		}
		time.Sleep(20 * time.Millisecond) // another's process gives no signal
	}
	if !alive(pid2) {
		fail(t, "process %d of the session still open went with the other session", pid2)
	}
	if again := scopedPID(t, two); again != pid2 {
		fail(t, "after the other session ended, the open session's call reached process %d, want its own %d", again, pid2)
	}
}

func TestSessionScopedServersRequestReachesTheSessionThatOwnsTheProcess(t *testing.T) {
	guarantee(t)
	needsSessions(t)
	const sampled = "owner's sample"
	g := startGateway(t, sessionScoped(), options{}, "ps")
	caps := map[string]any{"sampling": map[string]any{}}
	// Another session holds a call in flight to its own process: a gateway
	// that shares one process cannot tell whose a request is, but with a
	// process per session it can.
	busy := g.newSessionWith(caps)
	busy.listen(t)
	release := filepath.Join(t.TempDir(), "release")
	held := make(chan struct{})
	go func() {
		defer close(held)
		callText(t, busy, "ps", "wait", map[string]any{"file": release})
	}()
	t.Cleanup(func() { os.WriteFile(release, nil, 0o600); <-held })
	waitEvents(t, g.stateDir, 30*time.Second, func(es []fakeEvent) bool { return countTool(es, "ps_wait") > 0 })

	owner := g.newSessionWith(caps)
	owner.listen(t)
	callCtx := ctxFor(t, 60*time.Second)
	ctx, callEnded := context.WithCancel(callCtx) // no request comes after the answer
	var answer *message
	var callErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer callEnded()
		answer, callErr = owner.call(callCtx, `"sample"`, "ps", "sample", map[string]any{})
	}()
	msgs, ok := owner.in.await(ctx, func(msgs []received) bool { return len(samplingOf(msgs)) > 0 })
	if !ok {
		<-done
		text, err := answer.textOr(callErr)
		fatal(t, "the session whose process asked never received sampling/createMessage while another session had a call in flight; the call answered %q, %v", text, err)
	}
	req := samplingOf(msgs)[0]
	reply := fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"role":"assistant","content":{"type":"text","text":%q},"model":"conformance","stopReason":"endTurn"}}`, req.ID, sampled)
	if err := owner.send([]byte(reply)); err != nil {
		fail(t, "answering sampling/createMessage: %v", err)
	}
	<-done
	if text, err := answer.textOr(callErr); err != nil || text != "sampled: "+sampled {
		fail(t, "after the owner answered the sampling request, the call answered %q, %v; want %q", text, err, "sampled: "+sampled)
	}
	if n := len(samplingOf(busy.in.all())); n > 0 {
		fail(t, "the other session received %d sampling requests of a process not its own", n)
	}
}
