package conformance

import (
	"encoding/json"
	"net"
	"testing"
)

// Cases about a sandbox: what a gateway lets a server it was told to
// confine reach.

func TestSandboxedServerHasNoNetwork(t *testing.T) {
	guarantee(t)
	specs := []serverSpec{{Name: "boxed", noNetwork: true}, {Name: "open"}}
	if adapter.MaxServers == 1 {
		specs = specs[:1]
	}
	// A listener of the suite's own on 127.0.0.1: the host's loopback,
	// which a server without network must not reach either.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fatal(t, "listening: %v", err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			conn.Close()
		}
	}()
	defer func() { ln.Close(); <-done }()
	var names []string
	for _, s := range specs {
		names = append(names, s.Name)
	}
	g := startGateway(t, specs, options{}, names...)
	s := g.newSession()
	probe := func(server string) (dial, loopback string) {
		text, err := callText(t, s, server, "net_probe", map[string]any{"address": ln.Addr().String()})
		var r struct{ Dial, Loopback string }
		if err != nil || json.Unmarshal([]byte(text), &r) != nil {
			fatal(t, "%s_net_probe answered %q, %v", server, text, err)
		}
		return r.Dial, r.Loopback
	}
	if len(specs) > 1 {
		if dial, _ := probe("open"); dial != "ok" {
			fatal(t, "the server without a sandbox could not reach %s either (%s): nothing to compare", ln.Addr(), dial)
		}
	}
	dial, loopback := probe("boxed")
	if dial == "ok" {
		fail(t, "the server without network connected to %s, on the host's loopback", ln.Addr())
	}
	if loopback != "ok" {
		fail(t, "the server without network cannot reach its own loopback: %s", loopback)
	}
}
