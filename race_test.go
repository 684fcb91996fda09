//go:build race

package main

// raceEnabled is whether the race detector is on: it makes sync.Pool drop
// items at random, so counts of allocations are not what they are without.
const raceEnabled = true
