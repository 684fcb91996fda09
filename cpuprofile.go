package main

import (
	"fmt"
	"os"
	"runtime/pprof"
	"strconv"
	"time"
)

// cpuProfileEnv names the environment variable that, when set, makes corral
// write CPU profiles of its run, for profiling it under load from outside
// (the conformance benchmarks run corral as a process of its own and end it
// with SIGKILL). It is a debugging aid, not a setting. The profile is cut
// into pieces of cpuProfileSlice, each in a file of its own named by the
// variable's value with ".PID.N" appended, so that a process killed without
// warning loses only its last piece; `go tool pprof` merges the pieces:
//
//	CORRAL_CPUPROFILE=/tmp/corral.prof go test ./conformance -run '^$' -bench 'ToolsCall/c=32' -benchtime 30000x
//	go tool pprof -top /tmp/corral.prof.*
const cpuProfileEnv = "CORRAL_CPUPROFILE"

const cpuProfileSlice = 2 * time.Second

// cpuProfileMaxPieces bounds the files a profile writes: an hour of pieces.
const cpuProfileMaxPieces = 1800

// startCPUProfile starts the CPU profiles cpuProfileEnv asks for, if any,
// and returns the function that stops them; it writes the last piece and
// joins the goroutine that cuts them. A profile that cannot be written is
// reported on stderr, and corral runs without it.
func startCPUProfile() (stop func()) {
	base := os.Getenv(cpuProfileEnv)
	if base == "" {
		return func() {}
	}
	base += "." + strconv.Itoa(os.Getpid()) + "."
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(cpuProfileSlice)
		defer tick.Stop()
		for n := 0; ; n++ {
			if n == cpuProfileMaxPieces {
				fmt.Fprintf(os.Stderr, "corral: %s: stopped after %d pieces\n", cpuProfileEnv, n)
				return
			}
			f, err := os.Create(base + strconv.Itoa(n))
			if err == nil {
				err = pprof.StartCPUProfile(f)
			}
			if err != nil {
				fmt.Fprintf(os.Stderr, "corral: %s: no CPU profile: %v\n", cpuProfileEnv, err)
				if f != nil {
					f.Close()
				}
				return
			}
			select {
			case <-tick.C:
			case <-quit:
			}
			pprof.StopCPUProfile()
			f.Close()
			select {
			case <-quit:
				return
			default:
			}
		}
	}()
	return func() {
		close(quit)
		<-done
	}
}
