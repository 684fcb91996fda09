package main

import "sync"

// goroutines is a group of goroutines with an owner that stops and joins
// them. Its zero value is ready to use; its methods are safe for concurrent
// use.
//
// Lock order: mu is a leaf, held only while the group is counted.
type goroutines struct {
	mu     sync.Mutex
	wg     sync.WaitGroup
	closed bool
}

// goOrRun runs f on a new goroutine of the group or, once stop was called,
// on the caller's: then it blocks until f returns.
func (gs *goroutines) goOrRun(f func()) {
	gs.mu.Lock()
	if gs.closed {
		gs.mu.Unlock()
		f()
		return
	}
	gs.wg.Add(1)
	gs.mu.Unlock()
	go func() {
		defer gs.wg.Done()
		f()
	}()
}

// stop blocks until every goroutine started by goOrRun has returned. It
// may be called twice.
func (gs *goroutines) stop() {
	gs.mu.Lock()
	gs.closed = true
	gs.mu.Unlock()
	gs.wg.Wait()
}
