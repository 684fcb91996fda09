package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestStdioFrontEndAnswersAnOverLongLineWithItsIDOnlyWhenItIsWhole(t *testing.T) {
	t.Parallel()
	cfg := &Config{}
	cfg.applyDefaults()
	gw := NewGateway(cfg, testLogger(t), nil) // no servers: the lines never reach one
	const maxLine = 64
	pad := `,"params":{"pad":"` + strings.Repeat("x", maxLine) + `"}}`
	tests := []struct {
		name, id, want string
	}{
		{"an integer id is echoed", `7`, `7`},
		{"a string id is echoed", `"a,}\"b"`, `"a,}\"b"`},
		{"an array id is null", `[1,"error"]`, `null`},
		{"an object id is null", `{"a":1,"b":[2]}`, `null`},
		{"a fractional id is null", `1.5`, `null`},
	}
	var in strings.Builder
	for _, tc := range tests {
		in.WriteString(`{"jsonrpc":"2.0","id":` + tc.id + `,"method":"ping"` + pad + "\n")
	}
	var out bytes.Buffer
	served := make(chan struct{})
	go func() {
		defer close(served)
		serveStdio(t.Context(), gw, stdioPrincipal, strings.NewReader(in.String()), &out, maxLine, time.Second, testLogger(t))
	}()
	select {
	case <-served: // at the end of its input, after writing every answer
	case <-time.After(10 * time.Second):
		t.Fatal("serveStdio did not return at the end of its input")
	}
	answers := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(answers) != len(tests) {
		t.Fatalf("serveStdio wrote %d lines, want %d:\n%s", len(answers), len(tests), out.String())
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var msg wireMsg
			if err := json.Unmarshal([]byte(answers[i]), &msg); err != nil {
				t.Fatalf("answer %s is not JSON: %v", answers[i], err)
			}
			got := string(msg.ID)
			if got == "" {
				got = "null"
			}
			if got != tc.want || msg.Error == nil || msg.Error.Code != codeInvalidRequest {
				t.Errorf("answer = %s, want id %s and error %d", answers[i], tc.want, codeInvalidRequest)
			}
		})
	}
}
