package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"
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
	f.Add([]byte("{\n// VS Code\n\"servers\":{\"v\":{\"type\":\"stdio\",\"command\":\"${env:X}\",\"env\":{\"K\":\"${file:nope}\"},},},/* c */\"inputs\":[]}"), "x")
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

// FuzzSSE feeds event streams to the reader of a remote server's answers
// (msgReader.readSSE), read in pieces of any size, for a connection whose
// messages may be at most limit bytes (0: the default). For any bytes it must
// return, without panicking or blocking, and no
// message it delivers may be over the limit. The fuzzer's message, if it is a
// JSON object (padded with pad bytes, to span the read buffer), is also laid
// out as a well-formed stream, as layout says: an event of its data lines
// (pretty-printed over several, or one written by corral's own writeSSE),
// then an event holding an array of two copies, with LF or CRLF, comments,
// ids and other fields. Each copy must come out as one line, the message
// compacted, in order, and the last event's ID must be kept; a message over
// the limit must fail the read with errTooBig, with no part of it written.
func FuzzSSE(f *testing.F) {
	f.Add([]byte("data: {\"jsonrpc\":\"2.0\",\"method\":\"x\"}\n\n"), `{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`, uint16(0), uint16(0), uint8(0), uint8(0))
	f.Add([]byte(": c\r\nid: 7\r\ndata: [{\"id\":1,\r\ndata: \"result\":{}}]\r\n\r\n"), `{"a":"line\nbreak"}`, uint16(20000), uint16(0), uint8(0xff), uint8(3))
	f.Add([]byte("data: {\"a\":\"x\ny\"}\n\ndata: 5\n\n"), "{\"a\":\"\\r\\n\\u2028\"}", uint16(0), uint16(10), uint8(0x0a), uint8(1))
	f.Add([]byte("data\n\ndata:{}\n\ndata: {\"cut"), `{"id":"a\"b","result":[1,{"id":9}]}`, uint16(40000), uint16(30000), uint8(0x25), uint8(0))
	f.Fuzz(func(t *testing.T, raw []byte, msg string, pad, limit uint16, layout, split uint8) {
		max := int64(limit)
		if max == 0 {
			max = remoteMaxMessage
		}
		chunk := int(split)%64 + 1
		lines, _, _ := readSSEStream(t, raw, chunk, max)
		for _, l := range lines {
			if int64(len(l)) > max {
				t.Fatalf("readSSE(%q) wrote a line of %d bytes, over the limit %d", truncate(raw, 300), len(l), max)
			}
		}

		stream, want, wantID, ok := sseStream(msg, int(pad), layout)
		if !ok {
			return
		}
		lines, lastID, err := readSSEStream(t, stream, chunk, max)
		if int64(len(want[0])) > max {
			if !errors.Is(err, errTooBig) || len(lines) > 0 {
				t.Fatalf("readSSE of a %d-byte message over the limit %d wrote %d lines (first %q), %v; want errTooBig and nothing written\n%q",
					len(want[0]), max, len(lines), truncate([]byte(strings.Join(lines, "")), 100), err, truncate(stream, 300))
			}
			return
		}
		if err != nil || !slices.Equal(lines, want) || lastID != wantID {
			t.Fatalf("readSSE(%q) = %d lines, last ID %q, %v; want %d lines, last ID %q, each %q\ngot %q",
				truncate(stream, 300), len(lines), lastID, err, len(want), wantID, truncate([]byte(want[0]), 200), truncate([]byte(strings.Join(lines, "\n")), 600))
		}
	})
}

// TestReadSSEDropsALargeMessageThatBreaksOff covers what FuzzSSE's inputs
// are too small to reach: a message larger than a read, which breaks off,
// is dropped whole, and the read fails as the break says.
func TestReadSSEDropsALargeMessageThatBreaksOff(t *testing.T) {
	large := "data: {\"id\":1,\"result\":\"" + strings.Repeat("x", largeMessage+1000)
	for _, tc := range []struct {
		name    string
		stream  string
		wantErr error
	}{
		{"cut off by the end of the stream", large, nil},
		{"cut off by a line break inside a string", large + "\ndata: y\"}\n\n", errLineBreak},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lines, _, err := readSSEStream(t, []byte(tc.stream), 4096, remoteMaxMessage)
			if len(lines) != 0 || !errors.Is(err, tc.wantErr) {
				t.Errorf("readSSE = %d lines, %v; want the broken-off message dropped, %v", len(lines), err, tc.wantErr)
			}
		})
	}
}

// sseStream lays out msg, if it is a JSON object, as a well-formed event
// stream, as layout says (see FuzzSSE), with a member of pad bytes added. It
// returns the stream, the lines readSSE must write for it and the ID it must
// keep.
func sseStream(msg string, pad int, layout uint8) (stream []byte, lines []string, lastID string, ok bool) {
	obj := bytes.TrimSpace([]byte(msg))
	var m map[string]json.RawMessage
	if json.Unmarshal(obj, &m) != nil || m == nil { // null is no object
		return nil, nil, "", false
	}
	if pad > 0 {
		member := `"pad":"` + strings.Repeat("p", pad) + `"`
		if len(m) > 0 {
			member += ","
		}
		obj = append([]byte("{"+member), bytes.TrimSpace(obj[1:])...)
	}
	var compact, pretty bytes.Buffer
	if json.Compact(&compact, obj) != nil || json.Indent(&pretty, obj, "", "  ") != nil {
		return nil, nil, "", false
	}
	eol, field := "\n", "data: "
	if layout&1 != 0 {
		eol = "\r\n"
	}
	if layout&2 != 0 {
		field = "data:"
	}
	extras := layout&4 != 0
	var b bytes.Buffer
	event := func(id string, data []string) {
		if extras {
			b.WriteString(": a comment" + eol + "event: message" + eol + "retry: 100" + eol + "id: " + id + eol)
			lastID = id
		}
		for i, d := range data {
			if i > 0 && layout&8 != 0 {
				b.WriteString(":between" + eol)
			}
			b.WriteString(field + d + eol)
		}
		b.WriteString(eol)
	}
	if layout&16 != 0 {
		writeSSE(&b, compact.Bytes()) // corral's own writer
	} else {
		event("e1", strings.Split(pretty.String(), "\n"))
	}
	event("e2", []string{"[" + compact.String() + ", " + compact.String() + "]"})
	line := compact.String()
	return b.Bytes(), []string{line, line, line}, lastID, true
}

// readSSEStream runs readSSE on stream, read chunk bytes at a time, for a
// connection whose messages may be at most limit bytes. It returns the lines
// delivered, the ID of the last event and readSSE's error. It fails the
// test if readSSE does not return.
func readSSEStream(t *testing.T, stream []byte, chunk int, limit int64) (lines []string, lastID string, err error) {
	t.Helper()
	c := dialRemote("fuzz", "http://127.0.0.1:1/mcp", nil, nil, slog.New(slog.DiscardHandler))
	defer c.cancel()
	c.maxMessage = limit
	read := make(chan []string, 1)
	go func() {
		var got []string
		for {
			msg, err := c.ReadMessage()
			if err != nil {
				break
			}
			got = append(got, string(msg))
		}
		read <- got
	}()
	returned := make(chan error, 1)
	go func() {
		r := &msgReader{c: c}
		returned <- r.readSSE(&chunkReader{b: stream, n: chunk}, &lastID)
	}()
	select {
	case err = <-returned:
	case <-time.After(10 * time.Second):
		// Reading a few KiB takes microseconds: only a reader that never
		// returns takes this long, even on a loaded machine.
		t.Fatalf("readSSE(%q) did not return within 10s", truncate(stream, 300))
	}
	c.fail(errors.New("the read is over"))
	lines = <-read
	return lines, lastID, err
}

// chunkReader reads b, at most n bytes at a time.
type chunkReader struct {
	b []byte
	n int
}

func (r *chunkReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	k := min(len(p), r.n, len(r.b))
	copy(p, r.b[:k])
	r.b = r.b[k:]
	return k, nil
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

// FuzzJWT feeds any token to the JWT parser, the claims reader and the
// signature check with the keys of the RFCs' vectors: nothing panics, and
// a token verifies only when what it signs is a vector's own signing
// input (a signature cannot be forged, nor a token's signed part changed).
func FuzzJWT(f *testing.F) {
	var keys []*jwk
	var inputs []string
	for _, v := range jwsVectors {
		ks, _, err := parseJWKS([]byte(`{"keys":[` + v.key + `]}`))
		if err != nil {
			f.Fatal(err)
		}
		keys = append(keys, ks...)
		inputs = append(inputs, v.token[:strings.LastIndexByte(v.token, '.')])
		f.Add(v.token)
	}
	f.Add("eyJhbGciOiJub25lIn0.eyJpc3MiOiJqb2UifQ.")
	f.Add("eyJhbGciOiJIUzI1NiIsImNyaXQiOlsiYiJdfQ.e30.AAAA")
	f.Add(`eyJ9.e30.AA`)
	f.Fuzz(func(t *testing.T, token string) {
		looksLikeJWT(token)
		tok, err := parseJWS(token)
		if err != nil {
			return
		}
		if len(token) > maxTokenBytes || len(tok.signature) == 0 {
			t.Fatalf("parseJWS accepted a token of %d bytes with a %d-byte signature", len(token), len(tok.signature))
		}
		if c, err := parseClaims(tok.payload, "groups"); err == nil {
			c.check("joe", "aud", time.Unix(1300819000, 0), time.Minute)
		}
		for _, k := range keys {
			if tok.verify(k) == nil && !slices.Contains(inputs, string(tok.signingInput)) {
				t.Fatalf("a token whose signed part is no vector's verified with key %v: %q", k.algs, token)
			}
		}
	})
}

// FuzzJWKS feeds any bytes to the key set parser: nothing panics, and each
// key it returns allows only the algorithms of its own kind (so an HMAC or
// "none" is never allowed by any key).
func FuzzJWKS(f *testing.F) {
	for _, v := range jwsVectors {
		f.Add([]byte(`{"keys":[` + v.key + `]}`))
	}
	f.Add([]byte(`{"keys":[{"kty":"oct","k":"AAAA","alg":"HS256"},{"kty":"RSA","n":"AQAB","e":"AQAB","alg":"none"}]}`))
	f.Add([]byte(`{"keys":[{"kty":"EC","crv":"P-256","x":"AA","y":"AA","use":"enc"},{"kty":"OKP","crv":"X25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}]}`))
	f.Add([]byte(`{"keys":{}}`))
	kinds := map[string][]string{"*rsa.PublicKey": {algRS256, algPS256}, "*ecdsa.PublicKey": {algES256}, "ed25519.PublicKey": {algEdDSA}}
	f.Fuzz(func(t *testing.T, data []byte) {
		keys, _, err := parseJWKS(data)
		if err != nil {
			return
		}
		if len(keys) == 0 || len(keys) > maxJWKSKeys {
			t.Fatalf("parseJWKS returned %d keys and no error", len(keys))
		}
		for _, k := range keys {
			allowed := kinds[fmt.Sprintf("%T", k.pub)]
			if len(k.algs) == 0 {
				t.Fatalf("a key of type %T allows no algorithm", k.pub)
			}
			for _, alg := range k.algs {
				if !slices.Contains(allowed, alg) {
					t.Fatalf("a key of type %T allows %q", k.pub, alg)
				}
			}
		}
	})
}
