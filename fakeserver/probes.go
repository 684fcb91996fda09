//go:build linux || darwin

package main

import (
	"encoding/json"
	"net"
	"os"
	"time"
)

// Tools that report what the server may reach, for tests of a sandbox: each
// answers what it could and could not do, never failing the call for it.

// addProbes adds the probing tools with add (see addTools).
func (s *server) addProbes(add func(name, description string, props map[string]property, run func(*call, json.RawMessage))) {
	add("net_probe", `Dials the TCP address given and one of its own on 127.0.0.1; answers {"dial":R,"loopback":R}, each R "ok" or the error.`, map[string]property{
		"address": {"string", "host:port to dial."},
	}, s.netProbe)
	add("write_file", `Writes the text to the file (created or truncated); answers "written" or the error.`, map[string]property{
		"path": {"string", "Path of the file."},
		"text": {"string", "What to write."},
	}, s.writeFile)
	add("read_file", `Answers the file's contents, or the error.`, map[string]property{
		"path": {"string", "Path of the file."},
	}, s.readFile)
}

// probeDialTimeout bounds each dial of net_probe: an address that drops
// packets answers with a timeout rather than a hang.
const probeDialTimeout = 3 * time.Second

func (s *server) netProbe(c *call, args json.RawMessage) {
	var a struct {
		Address string `json:"address"`
	}
	if !decodeArgs(c, args, &a) {
		return
	}
	dial := func(addr string) string {
		conn, err := net.DialTimeout("tcp", addr, probeDialTimeout)
		if err != nil {
			return err.Error()
		}
		conn.Close()
		return "ok"
	}
	r := struct {
		Dial     string `json:"dial"`
		Loopback string `json:"loopback"`
	}{Dial: dial(a.Address)}
	if ln, err := net.Listen("tcp", "127.0.0.1:0"); err != nil {
		r.Loopback = err.Error()
	} else {
		go func() {
			if conn, err := ln.Accept(); err == nil {
				conn.Close()
			}
		}()
		r.Loopback = dial(ln.Addr().String())
		ln.Close() // ends the Accept above, if the dial never reached it
	}
	b, _ := json.Marshal(r)
	replyText(c, string(b))
}

func (s *server) writeFile(c *call, args json.RawMessage) {
	var a struct {
		Path string `json:"path"`
		Text string `json:"text"`
	}
	if !decodeArgs(c, args, &a) {
		return
	}
	if err := os.WriteFile(a.Path, []byte(a.Text), 0o644); err != nil {
		replyText(c, err.Error())
		return
	}
	replyText(c, "written")
}

func (s *server) readFile(c *call, args json.RawMessage) {
	var a struct {
		Path string `json:"path"`
	}
	if !decodeArgs(c, args, &a) {
		return
	}
	data, err := os.ReadFile(a.Path)
	if err != nil {
		replyText(c, err.Error())
		return
	}
	replyText(c, string(data))
}
