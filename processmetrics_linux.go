package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// userHZ is the unit, in ticks per second, of the times in /proc/PID/stat:
// USER_HZ, 100 on every Linux architecture Go runs on (the Prometheus Go
// client assumes it too).
const userHZ = 100

// readProcessStats reads what the process_* metrics report of this process
// from /proc/self and /proc/stat, and its limits from getrlimit.
func readProcessStats() (processStats, error) {
	var st processStats
	data, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return st, err
	}
	// The command's name, in parentheses, may hold spaces: fields start
	// after the last ')', with field 3 (state) first.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return st, errors.New("/proc/self/stat: no ')'")
	}
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 22 {
		return st, fmt.Errorf("/proc/self/stat: %d fields after the name, want at least 22", len(f))
	}
	field := func(n int) float64 { // n as numbered in proc(5)
		v, _ := strconv.ParseUint(f[n-3], 10, 64)
		return float64(v)
	}
	st.cpuSeconds = (field(14) + field(15)) / userHZ
	st.virtualBytes = field(23)
	st.residentBytes = field(24) * float64(os.Getpagesize())
	boot, err := bootTime()
	if err != nil {
		return st, err
	}
	st.startTime = boot + field(22)/userHZ
	if st.openFDs, err = openFDs(); err != nil {
		return st, err
	}
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return st, err
	}
	st.maxFDs = float64(lim.Cur)
	if err := syscall.Getrlimit(syscall.RLIMIT_AS, &lim); err != nil {
		return st, err
	}
	st.maxVirtualBytes = float64(lim.Cur)
	return st, nil
}

// bootTime returns when the system booted, in seconds since the Unix epoch:
// the btime line of /proc/stat.
func bootTime() (float64, error) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(data)) {
		if v, ok := strings.CutPrefix(line, "btime "); ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	return 0, errors.New("/proc/stat: no btime line")
}

// openFDs returns the number of this process's open file descriptors: the
// entries of /proc/self/fd, less the one reading it.
func openFDs() (float64, error) {
	d, err := os.Open("/proc/self/fd")
	if err != nil {
		return 0, err
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return 0, err
	}
	return float64(len(names) - 1), nil
}
