package main

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// jsonRouteCases are messages in the plain form and around its edges:
// each must be read as encoding/json reads it, whether fast or not.
var jsonRouteCases = []string{
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"}}}`,
	`{"jsonrpc":"2.0","id":"a\"b","method":"tools/call","params":{"name":"e\u0063ho","_meta":{"progressToken":"t"}}}`,
	`{"jsonrpc":"2.0","id":7,"method":"resources/read","params":{"uri":"fake://a/hello","_meta":{"progressToken":12}}}`,
	`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"x","_meta":{"ProgressToken":12}}}`,
	`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"x","_meta":{"progress\u0054oken":12}}}`,
	`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"NAME":"x"}}`,
	`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"n\u0061me":"x","name":"y"}}`,
	`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"x","name":"y"}}`,
	`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":null,"uri":null,"_meta":null}}`,
	`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":3}}`,
	`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"x","_meta":[1]}}`,
	`{"jsonrpc":"2.0","id":7,"method":"completion/complete","params":{"ref":{"type":"ref/prompt","name":"p"}}}`,
	`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":[1,2]}`,
	`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":null}`,
	`{"jsonrpc":"2.0","id":7,"method":"tools/call"}`,
	`{"jsonrpc":"2.0","ID":7,"Method":"ping"}`,
	`{"jsonrpc":"2.0","id":7,"method":"ping","method":"tools/list"}`,
	`{"jsonrpc":"2.0","id":null,"method":"ping"}`,
	`{"jsonrpc":null,"id":1,"method":null}`,
	`{"jsonrpc":2,"id":1,"method":"ping"}`,
	`{"jsonrpc":"2.0","id":1,"method":"p\u0069ng"}`,
	"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\xff\"}",
	`{"jsonrpc":"2.0","id":1,"result":{"content":[]}}`,
	`{"jsonrpc":"2.0","id":1,"error":{"code":-1,"message":"no"}}`,
	`{"jsonrpc":"2.0","id":1,"method":"ping","other":{"id":2,"method":"x"}}`,
	` { "jsonrpc" : "2.0" , "id" : 1 , "method" : "ping" , "params" : { "name" : "a" } } `,
	`{"jsonrpc":"2.0","id":1,"method":"ping"`,
	`"just a string"`,
	`null`,
	`{}`,
}

// TestScannedMessagesAreReadAsEncodingJSONReadsThem: whenever scanMessage
// and scanRouting read a message, they read what encoding/json reads.
func TestScannedMessagesAreReadAsEncodingJSONReadsThem(t *testing.T) {
	for _, c := range jsonRouteCases {
		checkScans(t, []byte(c))
	}
}

func FuzzScanMessage(f *testing.F) {
	for _, c := range jsonRouteCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, data []byte) { checkScans(t, data) })
}

// checkScans checks scanMessage and scanRouting on data against
// encoding/json.
func checkScans(t *testing.T, data []byte) {
	t.Helper()
	var got, want wireMsg
	if scanMessage(data, &got) {
		if err := json.Unmarshal(data, &want); err != nil {
			t.Fatalf("scanMessage(%s) read it; encoding/json fails: %v", data, err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("scanMessage(%s) (-encoding/json +scanMessage):\n%s", data, diff)
		}
	}
	var params struct{ Params json.RawMessage }
	if json.Unmarshal(data, &params) != nil || !json.Valid(params.Params) {
		return
	}
	var gotR, wantR routing
	if scanRouting(params.Params, &gotR) {
		if err := json.Unmarshal(params.Params, &wantR); err != nil {
			t.Fatalf("scanRouting(%s) read it; encoding/json fails: %v", params.Params, err)
		}
		if diff := cmp.Diff(wantR, gotR); diff != "" {
			t.Fatalf("scanRouting(%s) (-encoding/json +scanRouting):\n%s", params.Params, diff)
		}
	}
}

// TestDecodingAToolsCallAllocatesOnlyTheMessage: a plain tools/call is
// read without encoding/json's decoding: the message is its one
// allocation, and routing reads its params without any.
func TestDecodingAToolsCallAllocatesOnlyTheMessage(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool, which encoding/json.Valid uses, drop items: allocations cannot be counted")
	}
	data := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"},"_meta":{"progressToken":1}}}`)
	if n := testing.AllocsPerRun(100, func() { decodeMessage(data) }); n > 1 {
		t.Errorf("decodeMessage of a tools/call allocates %v times, want 1", n)
	}
	msg, _ := decodeMessage(data)
	var p routing
	if n := testing.AllocsPerRun(100, func() { p = routing{}; scanRouting(msg.Params, &p) }); n > 1 {
		t.Errorf("reading a tools/call's routing allocates %v times, want at most 1", n)
	}
	if p.Name != "echo" || string(p.Meta.Token) != "1" {
		t.Errorf("a tools/call's routing = %+v, want name echo and progress token 1", p)
	}
}

// BenchmarkReadToolsCall reads a tools/call as the gateway does, for its
// routing: with encoding/json, as corral did, and with the scanners.
func BenchmarkReadToolsCall(b *testing.B) {
	data := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"}}}`)
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var msg wireMsg
			json.Unmarshal(data, &msg)
			var p routing
			json.Unmarshal(msg.Params, &p)
		}
	})
	b.Run("scan", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var msg wireMsg
			scanMessage(data, &msg)
			var p routing
			scanRouting(msg.Params, &p)
		}
	})
}
