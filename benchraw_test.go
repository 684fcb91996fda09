package main

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/url"
	"strconv"
	"strings"
	"testing"
)

// The benchmarks in this file are BenchmarkToolsCallThroughCorralHTTP and
// BenchmarkHTTPFloor with a client that allocates nothing a call: one
// keep-alive connection, requests written from a buffer it reuses, answers
// read by Content-Length. net/http's client allocates about 64 times a
// call, which the in-process benchmarks count with the server's; here
// allocs/op is what the serving side allocates, corral or the floor:
//
//	go test -run '^$' -bench 'RawClient' -benchmem -benchtime 3000x .

func BenchmarkToolsCallThroughCorralRawClient(b *testing.B) {
	tg := startGateway(b, `{"mcpServers":{"a": {"command":"FAKE","args":["-state","STATE"]}}}`)
	c := connect(b, tg.url)
	rc := dialRaw(b, tg.url, "Mcp-Session-Id: "+c.sid+"\r\nAccept: application/json, text/event-stream\r\n")
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if body := rc.call(b, i); !bytes.Contains(body, []byte("hello")) {
			b.Fatalf("answer %s", body)
		}
	}
}

func BenchmarkHTTPFloorRawClient(b *testing.B) {
	rc := dialRaw(b, startHTTPFloor(b).URL, "")
	for i := 0; b.Loop(); i++ {
		if body := rc.call(b, i); !bytes.Contains(body, []byte("hello")) {
			b.Fatalf("answer %s", body)
		}
	}
}

// rawClient posts benchCall over one HTTP/1.1 connection, reusing its
// buffers.
type rawClient struct {
	conn    net.Conn
	br      *bufio.Reader
	head    string // the request line and headers, up to Content-Length's value
	req     []byte
	payload []byte
	body    []byte
}

func dialRaw(b *testing.B, rawURL, headers string) *rawClient {
	u, err := url.Parse(rawURL)
	if err != nil {
		b.Fatal(err)
	}
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { conn.Close() })
	path := u.Path
	if path == "" {
		path = "/"
	}
	return &rawClient{conn: conn, br: bufio.NewReader(conn),
		head: "POST " + path + " HTTP/1.1\r\nHost: " + u.Host + "\r\nContent-Type: application/json\r\n" + headers + "Content-Length: "}
}

// call posts benchCall with id i and returns the answer's body, valid until
// the next call.
func (c *rawClient) call(b *testing.B, i int) []byte {
	// Built without fmt, which could allocate for the client.
	before, after, _ := strings.Cut(benchCall, "%d")
	c.payload = append(strconv.AppendInt(append(c.payload[:0], before...), int64(i), 10), after...)
	c.req = append(c.req[:0], c.head...)
	c.req = strconv.AppendInt(c.req, int64(len(c.payload)), 10)
	c.req = append(append(c.req, "\r\n\r\n"...), c.payload...)
	if _, err := c.conn.Write(c.req); err != nil {
		b.Fatal(err)
	}
	status, err := c.br.ReadSlice('\n')
	if err != nil {
		b.Fatal(err)
	}
	if !bytes.HasPrefix(status, []byte("HTTP/1.1 200 ")) {
		b.Fatalf("status %q", status)
	}
	n := -1
	for {
		line, err := c.br.ReadSlice('\n')
		if err != nil {
			b.Fatal(err)
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) == 0 {
			break
		}
		name, value, _ := bytes.Cut(line, []byte(":"))
		if bytes.EqualFold(name, []byte("Content-Length")) {
			v, err := strconv.Atoi(string(bytes.TrimSpace(value)))
			if err != nil {
				b.Fatalf("Content-Length %q", value)
			}
			n = v
		}
	}
	if n < 0 {
		b.Fatal("an answer without Content-Length")
	}
	if cap(c.body) < n {
		c.body = make([]byte, n)
	}
	c.body = c.body[:n]
	if _, err := io.ReadFull(c.br, c.body); err != nil {
		b.Fatal(err)
	}
	return c.body
}

// BenchmarkToolsCallThroughCorralRawClientAsAClient is
// BenchmarkToolsCallThroughCorralRawClient from a named client of two,
// whose profile filters tools by a pattern and by their readOnlyHint: the
// cost of the token compares and of the view on each call.
func BenchmarkToolsCallThroughCorralRawClientAsAClient(b *testing.B) {
	tg := startGateway(b, `{
		"clients": {"alice": {"tokenFile": `+tokenFile(b, aliceToken)+`, "profile": "p"}, "bob": {"tokenFile": `+tokenFile(b, bobToken)+`}},
		"profiles": {"p": {"servers": {"a": {"tools": {"deny": ["delete_*"]}}}, "readOnlyTools": true}},
		"mcpServers": {"a": {"command":"FAKE","args":["-state","STATE","-read-only","echo"]}}
	}`)
	c := connectWith(b, tg.url, "Bearer "+aliceToken)
	rc := dialRaw(b, tg.url, "Authorization: Bearer "+aliceToken+"\r\nMcp-Session-Id: "+c.sid+"\r\nAccept: application/json, text/event-stream\r\n")
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if body := rc.call(b, i); !bytes.Contains(body, []byte("hello")) {
			b.Fatalf("answer %s", body)
		}
	}
}

// BenchmarkToolsCallThroughCorralRawClientAsALimitedClient is
// BenchmarkToolsCallThroughCorralRawClientAsAClient with limits in the
// client's profile that never bind: the cost of the per-client accounting
// of calls in flight and rate (clientlimits.go) on each call.
func BenchmarkToolsCallThroughCorralRawClientAsALimitedClient(b *testing.B) {
	tg := startGateway(b, `{
		"clients": {"alice": {"tokenFile": `+tokenFile(b, aliceToken)+`, "profile": "p"}, "bob": {"tokenFile": `+tokenFile(b, bobToken)+`}},
		"profiles": {"p": {"servers": {"a": {"tools": {"deny": ["delete_*"]}}}, "readOnlyTools": true, "maxInFlight": 1000, "callsPerSecond": 1000000000}},
		"mcpServers": {"a": {"command":"FAKE","args":["-state","STATE","-read-only","echo"]}}
	}`)
	c := connectWith(b, tg.url, "Bearer "+aliceToken)
	rc := dialRaw(b, tg.url, "Authorization: Bearer "+aliceToken+"\r\nMcp-Session-Id: "+c.sid+"\r\nAccept: application/json, text/event-stream\r\n")
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if body := rc.call(b, i); !bytes.Contains(body, []byte("hello")) {
			b.Fatalf("answer %s", body)
		}
	}
}
