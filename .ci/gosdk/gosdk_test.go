// Package gosdk drives corral with the official MCP Go SDK (v1.8.0), which
// speaks 2026-07-28 by default: stateless requests, and notifications POSTed
// with that version's header. It is a module of its own, so that the SDK
// never enters corral's go.mod; .ci/run runs it:
//
//	cd .ci/gosdk && CORRAL_BIN=/path/to/corral FAKESERVER_BIN=/path/to/fakeserver go test ./...
//
// Either binary that is unset is built from the repository.
package gosdk

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// binary returns the path of the binary env names, or builds pkg (a package
// of the repository) into dir.
func binary(t *testing.T, env, pkg, dir string) string {
	t.Helper()
	if p := os.Getenv(env); p != "" {
		abs, _ := filepath.Abs(p)
		return abs
	}
	out := filepath.Join(dir, filepath.Base(pkg))
	if pkg == "." {
		out = filepath.Join(dir, "corral")
	}
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Dir = "../.."
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, b)
	}
	return out
}

// startCorral runs corral over HTTP with one fakeserver named a, recording
// into state, and returns its endpoint once it listens. It is stopped, and
// waited for, when the test ends.
func startCorral(t *testing.T, state string) string {
	t.Helper()
	dir := t.TempDir()
	corral, fake := binary(t, "CORRAL_BIN", ".", dir), binary(t, "FAKESERVER_BIN", "./fakeserver", dir)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cfg, _ := json.Marshal(map[string]any{"listen": addr, "mcpServers": map[string]any{
		"a": map[string]any{"command": fake, "args": []string{"-state", state, "-name", "a"}}}})
	path := filepath.Join(dir, "corral.json")
	os.WriteFile(path, cfg, 0o600)
	cmd := exec.Command(corral, "-config", path)
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	listening := make(chan struct{})
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			log.WriteString(sc.Text() + "\n")
			if strings.Contains(sc.Text(), "serving MCP over Streamable HTTP") {
				close(listening)
			}
		}
	}()
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		<-copied
		if t.Failed() {
			t.Logf("corral's log:\n%s", log.String())
		}
	})
	select {
	case <-listening:
	case <-copied:
		t.Fatalf("corral exited before it listened")
	case <-time.After(10 * time.Second):
		t.Fatalf("corral did not listen within 10s")
	}
	return "http://" + addr + "/mcp"
}

// event is one line of what fakeserver records in its state directory.
type event struct {
	Event     string          `json:"event"`
	Tool      string          `json:"tool"`
	ID        json.RawMessage `json:"id"`
	RequestID json.RawMessage `json:"requestId"`
}

// events returns what the fakeservers recorded in state.
func events(state string) []event {
	files, _ := filepath.Glob(filepath.Join(state, "*.events"))
	var out []event
	for _, f := range files {
		data, _ := os.ReadFile(f)
		for _, line := range bytes.Split(data, []byte("\n")) {
			var e event
			if json.Unmarshal(line, &e) == nil {
				out = append(out, e)
			}
		}
	}
	return out
}

// waitFor polls cond (the server's records give no signal) for up to d.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(d); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("gave up after %s waiting for %s", d, what)
		}
	}
}

func text(res *mcp.CallToolResult, err error) string {
	if err != nil {
		return "error: " + err.Error()
	}
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

func TestGoSDKClientOf20260728CallsAddsRootsAndCancelsThroughCorral(t *testing.T) {
	state := t.TempDir()
	url := startCorral(t, state)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "corral-gosdk", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if v := cs.InitializeResult().ProtocolVersion; v != "2026-07-28" {
		t.Errorf("negotiated %s, want 2026-07-28 (server/discover)", v)
	}
	call := func(ctx context.Context, name string, args map[string]any) string {
		return text(cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args}))
	}
	if got := call(ctx, "echo", map[string]any{"text": "hi"}); got != "hi" {
		t.Fatalf("echo = %q", got)
	}

	// notifications/roots/list_changed, POSTed with the 2026-07-28 header.
	client.AddRoots(&mcp.Root{URI: "file:///tmp", Name: "tmp"})
	if got := call(ctx, "echo", map[string]any{"text": "after roots"}); got != "after roots" {
		t.Fatalf("echo after AddRoots = %q, want the answer (a refused notification closes the SDK's connection)", got)
	}

	// A call whose context ends: the SDK drops the POST and sends
	// notifications/cancelled; the server hears of it, and the connection
	// goes on.
	callCtx, stop := context.WithCancel(ctx)
	ended := make(chan string, 1)
	go func() { ended <- call(callCtx, "sleep", map[string]any{"ms": 60000}) }()
	var serverID string
	waitFor(t, 10*time.Second, "the server to get the sleep call", func() bool {
		for _, e := range events(state) {
			if e.Event == "request" && e.Tool == "sleep" {
				serverID = string(e.ID)
			}
		}
		return serverID != ""
	})
	stop()
	if got := <-ended; !strings.Contains(got, "context canceled") {
		t.Errorf("the cancelled call returned %q, want context canceled", got)
	}
	waitFor(t, 10*time.Second, "the server to hear of the cancellation", func() bool {
		for _, e := range events(state) {
			if e.Event == "cancelled" && string(e.RequestID) == serverID {
				return true
			}
		}
		return false
	})
	for i := range 3 {
		want := "after cancel " + strconv.Itoa(i)
		if got := call(ctx, "echo", map[string]any{"text": want}); got != want {
			t.Fatalf("echo after the cancellation = %q, want %q", got, want)
		}
	}
}
