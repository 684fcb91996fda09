//go:build !linux

package main

import "errors"

// readProcessStats is not available here: the process_* metrics need Linux's
// /proc, and are left out.
func readProcessStats() (processStats, error) {
	return processStats{}, errors.New("process metrics are read from /proc, which only Linux has")
}
