//go:build linux || darwin

package main

// This file holds the tools that exhaust a resource, for the limits a
// gateway may put on a server: memory (alloc) and processes (fork).

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"time"
)

// alloc allocates a.MiB MiB, touches every page, keeps it, and answers.
func (s *server) alloc(c *call, args json.RawMessage) {
	var a struct {
		MiB int `json:"mib"`
	}
	if !decodeArgs(c, args, &a) || !nonNegative(c, "mib", a.MiB) {
		return
	}
	pageSize := os.Getpagesize()
	for range a.MiB {
		b := make([]byte, 1<<20)
		for i := 0; i < len(b); i += pageSize {
			b[i] = 1
		}
		s.mu.Lock()
		s.hog = append(s.hog, b)
		s.mu.Unlock()
	}
	replyText(c, fmt.Sprintf("allocated %d MiB", a.MiB))
}

// fork starts a.Count processes that sleep and answers how many started.
func (s *server) fork(c *call, args json.RawMessage) {
	var a struct {
		Count      int  `json:"count"`
		KeepTrying bool `json:"keep_trying"`
	}
	if !decodeArgs(c, args, &a) || !nonNegative(c, "count", a.Count) {
		return
	}
	started := 0
	var firstErr error
	for started < a.Count {
		cmd, err := s.forkSleeper()
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			if !a.KeepTrying {
				break
			}
			continue
		}
		go cmd.Wait() // reaps it when it ends
		started++
	}
	text := fmt.Sprintf("started %d of %d", started, a.Count)
	if firstErr != nil {
		text += "; first error: " + firstErr.Error()
	}
	replyText(c, text)
}

// forkSleeper starts sleep(1) for the process's lifetime: one process with
// one thread, cheaper than a sleeper of this executable's, so that a pids
// limit counts processes. Its argv[0] names it "fakeserver -role forked",
// with -name and -state, so that it is found as the server's descendant.
func (s *server) forkSleeper() (*exec.Cmd, error) {
	path, err := exec.LookPath("sleep")
	if err != nil {
		return nil, err
	}
	secs := int(s.opts.lifetime / time.Second)
	if secs <= 0 {
		secs = 86400
	}
	argv0 := "fakeserver -role forked -name " + s.opts.name
	if s.opts.stateDir != "" {
		argv0 += " -state " + s.opts.stateDir
	}
	cmd := &exec.Cmd{Path: path, Args: []string{argv0, strconv.Itoa(secs)}}
	return cmd, cmd.Start()
}
