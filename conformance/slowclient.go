package conformance

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// --- a client that stops reading ---

// unreadAnswers and unreadMiB are the answers a client asks for and never
// reads, and the size of each: together far more than unreadPeakBound.
const (
	unreadAnswers = 24
	unreadMiB     = 16
)

// unreadPeakBound is the most memory the gateway (its processes, not its
// servers) may have used at its peak while those answers wait, in KiB.
const unreadPeakBound = 256 << 10

func TestClientThatStopsReadingDoesNotPinTheGatewaysMemory(t *testing.T) {
	guarantee(t)
	if adapter.Transport != "http" {
		skip(t, "the case needs the Streamable HTTP transport; the gateway's is %s", adapter.Transport)
	}
	var opts options
	const writeTimeout = 2 * time.Second
	if adapter.has("writeTimeout") {
		opts.writeTimeout = writeTimeout
	}
	// The calls that are not read go to "big"; another session's calls to
	// "steady", or, for a gateway of one server, to "big" too.
	specs, steady := servers("big", "steady"), "steady"
	if adapter.MaxServers == 1 {
		specs, steady = specs[:1], "big"
	}
	g := startGateway(t, specs, opts, names(specs)...)
	stuck := g.newSession()
	sid := stuck.conn.(*httpConn).sid
	other := g.newSession()

	// Each call on a connection of its own, which reads the status line of
	// its answer, so that the gateway has it, and nothing more.
	u, err := url.Parse(g.url)
	if err != nil {
		fatal(t, "the gateway's URL %q: %v", g.url, err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, unreadAnswers)
	for i := range unreadAnswers {
		wg.Go(func() {
			if err := postUnread(t, u, sid, i, g.toolName("big", "big_big")); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		fatal(t, "a call whose answer is never read: %v", err)
	}

	start := time.Now()
	if text, err := callText(t, other, steady, "whoami", map[string]any{}); err != nil || !strings.Contains(text, `"`+steady+`"`) {
		fail(t, "while a client did not read %d answers, another session's whoami answered %q, %v", unreadAnswers, text, err)
	} else if took := time.Since(start); took > 10*time.Second {
		fail(t, "while a client did not read %d answers, another session's whoami took %s", unreadAnswers, took)
	}
	peak, err := settledPeakKiB(g)
	t.Logf("the gateway's memory peaked at %d MiB with %d answers of %d MiB unread", peak>>10, unreadAnswers, unreadMiB)
	if err != nil {
		fatal(t, "reading the gateway's memory: %v", err)
	} else if peak > unreadPeakBound {
		fail(t, "the gateway's memory peaked at %d MiB while a client did not read %d answers of %d MiB; want under %d MiB", peak>>10, unreadAnswers, unreadMiB, unreadPeakBound>>10)
	}

	if opts.writeTimeout == 0 {
		return
	}
	// Once writeTimeout has passed, the unread answers are let go: the
	// session that did not read them is served again.
	deadline := start.Add(writeTimeout + 15*time.Second)
	for {
		m, err := stuck.call(ctxFor(t, 30*time.Second), fmt.Sprint(1000+time.Now().UnixNano()%1000), steady, "whoami", map[string]any{})
		text := ""
		if err == nil {
			text, err = m.text()
		}
		if err == nil && strings.Contains(text, `"`+steady+`"`) {
			break
		}
		if time.Now().After(deadline) {
			fail(t, "%s after its client stopped reading (writeTimeout %s), the session's next call answered %q, %v; want it served", time.Since(start).Round(time.Second), writeTimeout, text, err)
			break
		}
		time.Sleep(250 * time.Millisecond) // the gateway gives no signal that it let the answers go
	}
}

// settledPeakKiB returns the gateway's peak memory (gatewayPeakKiB) once it
// has stopped growing: the answers the client does not read may still be
// on their way from the server into the gateway, and nothing tells when
// the last has arrived, so the peak is read again every half second until
// it has not grown for 5 s, for at most 60 s.
func settledPeakKiB(g *gateway) (int, error) {
	peak, err := gatewayPeakKiB(g)
	still, end := time.Now(), time.Now().Add(60*time.Second)
	for err == nil && time.Since(still) < 5*time.Second && time.Now().Before(end) {
		time.Sleep(500 * time.Millisecond) // a measurement settling: there is no event to wait for
		var p int
		if p, err = gatewayPeakKiB(g); p > peak {
			peak, still = p, time.Now()
		}
	}
	return peak, err
}

// postUnread POSTs a call of tool (the big tool, for unreadMiB MiB) in session
// sid on a connection of its own with a 4 KiB receive buffer, reads the
// status line of the answer and no more, and leaves the connection open
// until the test ends.
func postUnread(t *testing.T, u *url.URL, sid string, i int, tool string) error {
	conn, err := net.DialTimeout("tcp", u.Host, 10*time.Second)
	if err != nil {
		return err
	}
	t.Cleanup(func() { conn.Close() })
	conn.(*net.TCPConn).SetReadBuffer(4096)
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 100 + i, "method": "tools/call",
		"params": map[string]any{"name": tool, "arguments": map[string]any{"bytes": unreadMiB << 20}}})
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"+
		"Mcp-Session-Id: %s\r\nMCP-Protocol-Version: 2025-06-18\r\nContent-Length: %d\r\n\r\n%s", u.RequestURI(), u.Host, sid, len(body), body)
	conn.SetReadDeadline(time.Now().Add(60 * time.Second))
	line, err := bufio.NewReaderSize(conn, 16).ReadString('\n')
	if err != nil {
		return fmt.Errorf("reading the status line: %v", err)
	}
	if !strings.HasPrefix(line, "HTTP/1.1 ") {
		return fmt.Errorf("the answer began %q, want an HTTP/1.1 status line", line)
	}
	return nil
}
