//go:build linux

package main

import (
	"bufio"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
)

// startHTTP starts fakeserver with args (which name -http or -sse) and
// returns the URL it writes first on stdout. It is killed when the test
// ends.
func startHTTP(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"-lifetime", "1m"}, args...)...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("fakeserver %q wrote no URL: %v", args, err)
	}
	return strings.TrimSpace(line)
}

// post posts body to url in session sid (none if empty) and returns the
// response, whose body it has read.
func post(t *testing.T, url, sid, body string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

const initializeBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`

// events reads the event stream r and sends each event's name and data.
func events(r io.Reader) <-chan [2]string {
	ch := make(chan [2]string, 100)
	go func() {
		defer close(ch)
		sc := bufio.NewScanner(r)
		var name, data string
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				ch <- [2]string{name, data}
				name, data = "", ""
			case strings.HasPrefix(line, "event: "):
				name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				data = strings.TrimPrefix(line, "data: ")
			}
		}
	}()
	return ch
}

func TestHTTPServesSessionsOverStreamableHTTP(t *testing.T) {
	url := startHTTP(t, "-http", "127.0.0.1:0", "-name", "web")
	if !strings.HasSuffix(url, "/mcp") {
		t.Fatalf("URL = %q, want one ending in /mcp", url)
	}
	resp, body := post(t, url, "", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, `"id":1`) {
		t.Errorf("a request without a session = %s %s, want 400 with a JSON-RPC error", resp.Status, body)
	}
	resp, body = post(t, url, "", initializeBody)
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || sid == "" || resp.Header.Get("Content-Type") != "application/json" || !strings.Contains(body, `"serverInfo"`) {
		t.Fatalf("initialize = %s %v %s, want 200, a session and its JSON answer", resp.Status, resp.Header, body)
	}
	if resp, _ := post(t, url, sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); resp.StatusCode != http.StatusAccepted {
		t.Errorf("a notification = %s, want 202", resp.Status)
	}
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Mcp-Session-Id", sid)
	stream, err := http.DefaultClient.Do(req)
	if err != nil || stream.StatusCode != http.StatusOK {
		t.Fatalf("GET = %v, %v", stream, err)
	}
	defer stream.Body.Close()
	evs := events(stream.Body)
	if _, body := post(t, url, sid, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"list_changed","arguments":{}}}`); !strings.Contains(body, `"sent"`) {
		t.Errorf("list_changed = %s", body)
	}
	if ev := <-evs; ev[0] != "message" || !strings.Contains(ev[1], "notifications/tools/list_changed") {
		t.Errorf("GET stream's event = %q, want the list_changed notification", ev)
	}
	if resp, _ := post(t, url, "nope", `{"jsonrpc":"2.0","id":3,"method":"ping"}`); resp.StatusCode != http.StatusNotFound {
		t.Errorf("an unknown session = %s, want 404", resp.Status)
	}
	req, _ = http.NewRequest(http.MethodDelete, url, nil)
	req.Header.Set("Mcp-Session-Id", sid)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("DELETE = %v, %v, want 200", resp, err)
	}
	if resp, _ := post(t, url, sid, `{"jsonrpc":"2.0","id":4,"method":"ping"}`); resp.StatusCode != http.StatusNotFound {
		t.Errorf("the ended session = %s, want 404", resp.Status)
	}
}

func TestHTTPNoContentTypeAnswersWithoutOne(t *testing.T) {
	url := startHTTP(t, "-http", "127.0.0.1:0", "-no-content-type")
	resp, body := post(t, url, "", initializeBody)
	if ct, ok := resp.Header["Content-Type"]; ok || !strings.Contains(body, `"serverInfo"`) {
		t.Errorf("initialize = Content-Type %q, %s; want no Content-Type and the answer", ct, body)
	}
}

func TestSSEServesTheHTTPAndSSETransport(t *testing.T) {
	url := startHTTP(t, "-sse", "127.0.0.1:0", "-name", "old")
	if !strings.HasSuffix(url, "/sse") {
		t.Fatalf("URL = %q, want one ending in /sse", url)
	}
	stream, err := http.Get(url)
	if err != nil || stream.StatusCode != http.StatusOK || stream.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("GET = %v, %v", stream, err)
	}
	defer stream.Body.Close()
	evs := events(stream.Body)
	ev := <-evs
	if ev[0] != "endpoint" || !strings.HasPrefix(ev[1], "/messages?sessionId=") {
		t.Fatalf("first event = %q, want the endpoint", ev)
	}
	endpoint := strings.TrimSuffix(url, "/sse") + ev[1]
	if resp, body := post(t, endpoint, "", initializeBody); resp.StatusCode != http.StatusAccepted || body != "Accepted" {
		t.Errorf("POST initialize = %s %q, want 202 Accepted", resp.Status, body)
	}
	if ev := <-evs; ev[0] != "message" || !strings.Contains(ev[1], `"name":"old"`) || !strings.Contains(ev[1], `"id":1`) {
		t.Errorf("event after initialize = %q, want its answer", ev)
	}
	post(t, endpoint, "", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`)
	if ev := <-evs; !strings.Contains(ev[1], `"text":"hi"`) {
		t.Errorf("event after echo = %q, want its answer", ev)
	}
	if resp, _ := post(t, strings.TrimSuffix(url, "/sse")+"/messages?sessionId=nope", "", `{"jsonrpc":"2.0","id":3,"method":"ping"}`); resp.StatusCode != http.StatusNotFound {
		t.Errorf("an unknown session = %s, want 404", resp.Status)
	}
}
