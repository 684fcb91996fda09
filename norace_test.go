//go:build !race

package main

// raceEnabled is whether the race detector is on (see race_test.go).
const raceEnabled = false
