package conformance

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/url"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// A case about remote servers: fake servers the suite runs itself, serving
// MCP over HTTP, which the gateway reaches by URL.

// remoteServer is a fake server serving HTTP, run by the suite.
type remoteServer struct {
	cmd *exec.Cmd
	url string
	pid int
}

// startRemote starts fakeserver NAME serving transport ("http" for
// Streamable HTTP, "sse" for the HTTP+SSE transport of 2024-11-05) at
// addr (127.0.0.1:0 for any port), and returns it once it serves. It is
// killed when the test ends, unless stop killed it before.
func startRemote(t *testing.T, transport, name, addr string) *remoteServer {
	t.Helper()
	cmd := exec.Command(fakeserverBin, "-"+transport, addr, "-name", name, "-prefix", name+"_", "-lifetime", "10m")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		fatal(t, "%v", err)
	}
	if err := cmd.Start(); err != nil {
		fatal(t, "starting the remote server: %v", err)
	}
	r := &remoteServer{cmd: cmd, pid: cmd.Process.Pid}
	t.Cleanup(r.stop)
	// Its first line on stdout is its URL, written once it listens.
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		fatal(t, "the remote server %s (%s at %s) wrote no URL: %v", name, transport, addr, err)
	}
	r.url = strings.TrimSpace(line)
	return r
}

// stop kills the server and waits for it; it may be called twice.
func (r *remoteServer) stop() {
	if r.cmd.ProcessState == nil {
		r.cmd.Process.Kill()
		r.cmd.Wait()
	}
}

// whoamiPID calls server's whoami and returns the PID it answers.
func whoamiPID(t *testing.T, s *session, server string) (int, error) {
	text, err := callText(t, s, server, "whoami", map[string]any{})
	if err != nil {
		return 0, err
	}
	var who struct{ PID int }
	if err := json.Unmarshal([]byte(text), &who); err != nil {
		return 0, fmt.Errorf("whoami answered %q", text)
	}
	return who.PID, nil
}

func TestRemoteServersAreServedAndComeBackAfterTheyGoAway(t *testing.T) {
	guarantee(t)
	if !adapter.has("remote") {
		skip(t, "the adapter has no remote setting (a server named by URL)")
	}
	requireLinux(t)
	web := startRemote(t, "http", "web", "127.0.0.1:0")
	old := startRemote(t, "sse", "old", "127.0.0.1:0")
	specs := []serverSpec{{Name: "web", url: web.url, typ: "http"}, {Name: "old", url: old.url, typ: "sse"}}
	opts := options{}
	if adapter.has("restartDelay") {
		opts.restartDelay = 200 * time.Millisecond
	}
	g := startGateway(t, specs, opts, "web", "old")
	s := g.newSession()
	for _, r := range []struct {
		name string
		srv  *remoteServer
	}{{"web", web}, {"old", old}} {
		if pid, err := whoamiPID(t, s, r.name); err != nil || pid != r.srv.pid {
			fail(t, "whoami of the remote server %s (%s) answered PID %d, %v; want %d, the process at its URL", r.name, r.srv.url, pid, err, r.srv.pid)
		}
		if text, err := callText(t, s, r.name, "echo", map[string]any{"text": "far"}); err != nil || text != "far" {
			fail(t, "echo of the remote server %s answered %q, %v", r.name, text, err)
		}
	}
	if t.Failed() {
		return
	}
	// Each goes away and comes back at the same address, a new process
	// that knows none of the old one's sessions.
	for _, r := range []struct {
		name, transport string
		srv             *remoteServer
	}{{"web", "http", web}, {"old", "sse", old}} {
		r.srv.stop()
		u, _ := url.Parse(r.srv.url)
		back := startRemote(t, r.transport, r.name, u.Host)
		deadline := time.Now().Add(30 * time.Second)
		var pid int
		var err error
		for time.Now().Before(deadline) {
			if pid, err = whoamiPID(t, s, r.name); err == nil && pid == back.pid {
				break
			}
			time.Sleep(200 * time.Millisecond) // the gateway gives no signal of its reconnection
		}
		if pid != back.pid {
			fail(t, "30s after the remote server %s (%s) came back, its whoami answered PID %d, %v; want %d, the new process", r.name, r.transport, pid, err, back.pid)
		}
	}
}
