package main

import (
	"bufio"
	"encoding/json"
	"io"
	"os/exec"
	"reflect"
	"testing"
)

// fakeserverTools returns the names of the tools fakeserver offers when
// started with args, asked of a fakeserver process itself, so that tests
// expect whatever tools it has rather than a copy of its list.
func fakeserverTools(t *testing.T, args ...string) []string {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), fakeserverBin, fakeArgs(stateDir(t), args...)...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer stdin.Close() // the end of its stdin ends fakeserver
	io.WriteString(stdin, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`+"\n"+
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n"+
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`+"\n")
	r := bufio.NewReader(stdout)
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			t.Fatalf("fakeserver %q did not answer tools/list: %v", args, err)
		}
		var m struct {
			ID     json.RawMessage
			Result struct {
				Tools []struct{ Name string }
			}
		}
		if json.Unmarshal(line, &m) != nil || string(m.ID) != "2" {
			continue
		}
		var names []string
		for _, tool := range m.Result.Tools {
			names = append(names, tool.Name)
		}
		if len(names) == 0 {
			t.Fatalf("fakeserver %q lists no tools: %s", args, line)
		}
		return names
	}
}

// sameJSON reports whether a and b are the same JSON value, whatever the
// order of object members: the order is not part of the protocol.
func sameJSON(a, b []byte) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && reflect.DeepEqual(x, y)
}
