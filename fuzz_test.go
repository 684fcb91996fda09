package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"
)

// The fuzz targets run briefly in CI (their seed corpora in testdata/fuzz
// always run with go test) and for long by hand:
//
//	go test -run '^$' -fuzz FuzzJSONRPC -fuzztime 10m .

// FuzzJSONRPC feeds arbitrary bytes to everything that decodes JSON-RPC from
// a client or a server and builds the answer with the client's ID: nothing
// may panic, a decoded message must agree with encoding/json, an answer must
// be valid JSON carrying exactly the ID it was given, an ID accepted from a
// client or found in a line over the limit must be a string or an integer,
// and a line over the limit must never come out of the line reader.
func FuzzJSONRPC(f *testing.F) {
	for _, seed := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}`,
		`{"jsonrpc":"2.0","id":"a\"b","result":{"content":[]}}`,
		`{"jsonrpc":"2.0","id":-7,"error":{"code":-32601,"message":"no"}}`,
		`{"id" : 3 , "result" : [1,{"id":9}] , "jsonrpc" : "2.0"}`,
		`[{"jsonrpc":"2.0","id":1,"method":"ping"}]`,
		`{"jsonrpc":"2.0","id":null,"method":"x"}`,
		"not json\n{\"jsonrpc\":\"2.0\",\"id\":5,\"result\":1}\n",
		"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":\"\xff\xfe\"}",
		`{"jsonrpc":"2.0","id":1e999,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":[1,"error"],"method":"ping","params":{"pad":"` + strings.Repeat("x", 64) + `"}}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if msg, werr := decodeMessage(data); werr == nil && msg.ID != nil {
			if !validID(msg.ID) {
				t.Fatalf("decodeMessage(%q) accepted id %s, which is not a string or an integer", data, msg.ID)
			}
			checkReply(t, msg.ID)
		}
		if msg, err := decodeServerLine(data); err == nil {
			var want wireMsg
			if json.Unmarshal(data, &want) == nil {
				if string(want.ID) == "null" {
					want.ID = nil
				}
				if compactJSON(msg.ID) != compactJSON(want.ID) || msg.Method != want.Method || compactJSON(msg.Result) != compactJSON(want.Result) {
					t.Fatalf("decodeServerLine(%q) = id %s method %q result %s; encoding/json says id %s method %q result %s",
						data, msg.ID, msg.Method, msg.Result, want.ID, want.Method, want.Result)
				}
			}
			if msg.ID != nil {
				checkReply(t, msg.ID)
			}
		}
		const max = 64
		lr := newLineReader(bytes.NewReader(data), max)
		for range 1000 {
			line, err := lr.next()
			if err == io.EOF {
				break
			}
			var tooLong *lineTooLongError
			switch {
			case errors.As(err, &tooLong) && tooLong.id != nil:
				if !validID(tooLong.id) {
					t.Fatalf("lineReader found id %s in a line over the limit, which is not a string or an integer", tooLong.id)
				}
				checkReply(t, tooLong.id)
			case err != nil && !isTooLong(err):
				t.Fatalf("lineReader: %v", err)
			}
			if len(line) > max {
				t.Fatalf("lineReader returned %d bytes, over its maximum %d", len(line), max)
			}
		}
	})
}

// checkReply checks that answers built for id are valid JSON carrying id.
func checkReply(t *testing.T, id json.RawMessage) {
	for _, r := range []*reply{resultReply(id, json.RawMessage(`{}`)), errorReply(id, &wireError{Code: 1, Message: "m\n\"x\""})} {
		var buf bytes.Buffer
		r.WriteTo(&buf)
		var back struct{ ID json.RawMessage }
		if err := json.Unmarshal(buf.Bytes(), &back); err != nil || compactJSON(back.ID) != compactJSON(id) {
			t.Fatalf("the answer to id %s is %s (%v)", id, buf.Bytes(), err)
		}
	}
}

func compactJSON(b []byte) string {
	if b == nil {
		return "<nil>"
	}
	var buf bytes.Buffer
	if json.Compact(&buf, b) != nil {
		return "invalid:" + string(b)
	}
	return buf.String()
}

// FuzzConfig feeds arbitrary files and environment values to the config
// loader: nothing may panic, -check must print nothing of the variables'
// values, and a file it accepts must come out of -check as a config it
// accepts again (unless a URL had to be masked whole).
func FuzzConfig(f *testing.F) {
	f.Add([]byte(`{"mcpServers":{"a":{"command":"${CMD}","args":["${X:-d}","$$"],"env":{"K":"${X}"}}}}`), "value")
	f.Add([]byte(`{"listen":"127.0.0.1:1","requestTimeout":1.5,"maxRestarts":2,"mcpServers":{"b":{"command":"x","prefix":"p","restartDelay":"1s"}}}`), "")
	f.Add([]byte(`{"theme":"dark","mcpServers":{"c":{"comand":"x"}}}`), "$")
	f.Add([]byte(`{"mcpServers":{"d":{"command":"${`), "}")
	f.Add([]byte(`{"mcpServers":{"u":{"url":"https://me:${X}@h/${X}?k=${X}","headers":{"A":"${X}"}}}}`), "secret")
	f.Add([]byte(`{"mcpServers":{"u":{"url":"${X}://h/"}}}`), "https")
	f.Fuzz(func(t *testing.T, data []byte, value string) {
		getenvFor := func(value string) func(string) (string, bool) {
			return func(name string) (string, bool) {
				if name == "UNSET" {
					return "", false
				}
				return value, true
			}
		}
		getenv := getenvFor(value)
		cfg, err := ParseConfig("fuzz.json", data, getenv, func(string) {})
		if err != nil {
			if !strings.HasPrefix(err.Error(), "fuzz.json") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		resolved := cfg.resolved()
		// -check prints nothing of the variables' values: with other values
		// (if the file is still valid with them) it prints the same.
		if other, err := ParseConfig("fuzz.json", data, getenvFor(value+"~other"), func(string) {}); err == nil {
			if again := other.resolved(); !bytes.Equal(again, resolved) {
				t.Fatalf("-check prints the variables' values: with %q\n%s\nwith %q\n%s", value, resolved, value+"~other", again)
			}
		}
		if bytes.Contains(resolved, []byte(`"url": "****"`)) {
			return // a URL that cannot be parsed once masked is masked whole, and is no URL
		}
		// Values from the environment may hold "$"; -check's output is not
		// meant to be expanded again, so compare without expansion.
		again, err := ParseConfig("resolved.json", bytes.ReplaceAll(resolved, []byte("$"), []byte("$$")), getenv, func(string) {})
		if err != nil {
			t.Fatalf("the resolved config of an accepted file is rejected: %v\n%s", err, resolved)
		}
		if len(again.Servers()) != len(cfg.Servers()) {
			t.Fatalf("the resolved config has %d servers, the file %d", len(again.Servers()), len(cfg.Servers()))
		}
	})
}

// FuzzSSE checks that any JSON message written as a server-sent event reads
// back as the same data.
func FuzzSSE(f *testing.F) {
	f.Add(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`)
	f.Add(`{"a":"line\nbreak"}`)
	f.Add("{\"a\":\"\\r\\n\\u2028\"}")
	f.Fuzz(func(t *testing.T, msg string) {
		var m any
		if json.Unmarshal([]byte(msg), &m) != nil {
			return
		}
		compact, _ := json.Marshal(m) // what corral sends: compact JSON, no newline
		var buf bytes.Buffer
		if _, err := writeSSE(&buf, compact); err != nil {
			t.Fatal(err)
		}
		var data []string
		sc := bufio.NewScanner(&buf)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				data = append(data, d)
			}
		}
		if len(data) != 1 || data[0] != string(compact) {
			t.Fatalf("writeSSE(%s) read back as %q", compact, data)
		}
	})
}

// FuzzHTTPHandler sends arbitrary bodies, methods and headers to the HTTP
// front end of a gateway with no servers: it must never panic, answer with a
// status the specification allows, and send JSON whenever it says JSON.
func FuzzHTTPHandler(f *testing.F) {
	f.Add("POST", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18"}}`, "", "", "")
	f.Add("POST", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}`, "abc", "2025-06-18", "")
	f.Add("GET", ``, "", "", "http://localhost:1")
	f.Add("DELETE", ``, "deadbeef", "", "")
	f.Add("POST", `[1,2]`, "", "1999-01-01", "https://evil.example")
	cfg, err := ParseConfig("fuzz.json", []byte(`{"maxRequestBytes":4096,"mcpServers":{"a":{"command":"/nonexistent"}}}`), nil, nil)
	if err != nil {
		f.Fatal(err)
	}
	gw := NewGateway(cfg, slog.New(slog.DiscardHandler), nil) // never started: no process
	h := newHTTPFrontEnd(gw, true, slog.New(slog.DiscardHandler))
	for _, b := range gw.backendList() {
		b.firstOnce.Do(func() { close(b.firstDone) }) // as if its start had failed
	}
	f.Fuzz(func(t *testing.T, method, body, session, version, origin string) {
		if !utf8.ValidString(method) || method == "" || strings.ContainsAny(method, " \t\r\n") {
			return
		}
		req := httptest.NewRequest("POST", "http://127.0.0.1/mcp", strings.NewReader(body))
		req.Method = method
		req.Header.Set("Accept", "application/json, text/event-stream")
		for k, v := range map[string]string{"Mcp-Session-Id": session, "MCP-Protocol-Version": version, "Origin": origin} {
			if v != "" {
				req.Header.Set(k, v)
			}
		}
		w := httptest.NewRecorder()
		if method == "GET" {
			return // a GET on a valid session streams until the client leaves
		}
		h.ServeHTTP(w, req)
		switch w.Code {
		case 200, 202, 204, 400, 403, 404, 405, 406, 413, 503:
		default:
			t.Fatalf("%s %q: status %d", method, body, w.Code)
		}
		if strings.HasPrefix(w.Header().Get("Content-Type"), "application/json") && !json.Valid(w.Body.Bytes()) {
			t.Fatalf("%s %q: a JSON answer that is not JSON: %q", method, body, w.Body.String())
		}
	})
}
