//go:build linux

package main

import (
	"os"
	"path/filepath"
	"testing"
)

func TestWaitAnswersOnceItsFileExists(t *testing.T) {
	p := start(t)
	p.initialize("2025-11-25")
	release := filepath.Join(t.TempDir(), "release")
	p.callTool(1, "wait", map[string]any{"file": release})
	// A ping sent after the wait is answered first: the wait is in flight.
	p.request(2, "ping", nil)
	p.expect(2)
	if err := os.WriteFile(release, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if got := p.expectText(1); got != "released" {
		t.Errorf("wait = %q, want released", got)
	}
	p.callTool(3, "wait", map[string]any{})
	p.expectError(3, -32602, "invalid arguments: file is required")
}
