package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// TestCPUProfileEnvWritesAProfile checks that CORRAL_CPUPROFILE makes corral
// write a CPU profile, in a file named by the variable with ".PID.0"
// appended, and that without it no profile is started.
func TestCPUProfileEnvWritesAProfile(t *testing.T) {
	base := filepath.Join(t.TempDir(), "corral.prof")
	t.Setenv(cpuProfileEnv, "")
	startCPUProfile()()
	if m, _ := filepath.Glob(base + "*"); len(m) != 0 {
		t.Fatalf("profiles written without %s: %v", cpuProfileEnv, m)
	}

	t.Setenv(cpuProfileEnv, base)
	stop := startCPUProfile()
	sum := 0
	for i := range 1_000_000 {
		sum += i % 7
	}
	stop()
	data, err := os.ReadFile(base + "." + strconv.Itoa(os.Getpid()) + ".0")
	if err != nil {
		t.Fatal(err)
	}
	// A pprof profile is a gzipped protocol buffer.
	if !bytes.HasPrefix(data, []byte{0x1f, 0x8b}) {
		t.Fatalf("the profile is not gzipped (%d bytes, sum %d)", len(data), sum)
	}
}
