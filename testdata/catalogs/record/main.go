// Command record writes the tools/list result of a stdio MCP server to a
// file: it starts the server, initializes it, lists every page of its tools,
// and writes {"tools": [...]} as indented JSON. It is how the catalogs
// beside it were recorded (see ../README.md); it is not part of corral.
//
//	go run ./testdata/catalogs/record -o testdata/catalogs/NAME.json [-env K=V]... -- COMMAND ARGS...
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"strings"
	"time"
)

type envFlags []string

func (e *envFlags) String() string     { return strings.Join(*e, ",") }
func (e *envFlags) Set(v string) error { *e = append(*e, v); return nil }

func main() {
	out := flag.String("o", "", "output `file`")
	var env envFlags
	flag.Var(&env, "env", "`K=V` added to the server's environment (repeatable)")
	flag.Parse()
	if *out == "" || flag.NArg() == 0 {
		log.Fatal("usage: record -o FILE [-env K=V]... -- COMMAND ARGS...")
	}
	cmd := exec.Command(flag.Arg(0), flag.Args()[1:]...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = io.Discard
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		log.Fatal(err)
	}
	defer func() { stdin.Close(); cmd.Process.Kill(); cmd.Wait() }()
	timer := time.AfterFunc(60*time.Second, func() { cmd.Process.Kill() })
	defer timer.Stop()
	r := bufio.NewReaderSize(stdout, 1<<20)
	id := 0
	call := func(method string, params any) json.RawMessage {
		id++
		line, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
		stdin.Write(append(line, '\n'))
		for {
			l, err := r.ReadBytes('\n')
			if err != nil {
				log.Fatalf("%s: %v", method, err)
			}
			var m struct {
				ID     json.RawMessage
				Result json.RawMessage
				Error  json.RawMessage
			}
			if json.Unmarshal(l, &m) != nil || string(m.ID) != fmt.Sprint(id) {
				continue // a notification, a log line, a request of the server's
			}
			if m.Error != nil {
				log.Fatalf("%s: %s", method, m.Error)
			}
			return m.Result
		}
	}
	call("initialize", map[string]any{"protocolVersion": "2025-06-18", "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "corral-catalog-recorder", "version": "1"}})
	stdin.Write([]byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n"))
	var tools []json.RawMessage
	cursor := ""
	for {
		params := map[string]any{}
		if cursor != "" {
			params["cursor"] = cursor
		}
		var page struct {
			Tools      []json.RawMessage `json:"tools"`
			NextCursor string            `json:"nextCursor"`
		}
		if err := json.Unmarshal(call("tools/list", params), &page); err != nil {
			log.Fatal(err)
		}
		tools = append(tools, page.Tools...)
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	var buf bytes.Buffer
	buf.WriteString("{\"tools\": [\n")
	for i, t := range tools {
		var c bytes.Buffer
		json.Compact(&c, t)
		buf.Write(c.Bytes())
		if i < len(tools)-1 {
			buf.WriteByte(',')
		}
		buf.WriteByte('\n')
	}
	buf.WriteString("]}\n")
	if err := os.WriteFile(*out, buf.Bytes(), 0o644); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s: %d tools, %d bytes\n", *out, len(tools), buf.Len())
}
