package main

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

func TestGoroutinesStopJoinsThemAndThenRunsOnTheCaller(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var gs goroutines
		release := make(chan struct{})
		var done atomic.Bool
		gs.goOrRun(func() {
			<-release
			done.Store(true)
		})
		stopped := make(chan struct{})
		go func() {
			gs.stop()
			close(stopped)
		}()
		synctest.Wait()
		select {
		case <-stopped:
			t.Fatal("stop returned while a goroutine of the group was running")
		default:
		}
		close(release)
		<-stopped
		if !done.Load() {
			t.Fatal("stop returned before the goroutine did")
		}
		ran := false
		gs.goOrRun(func() { ran = true }) // no race: on this goroutine
		if !ran {
			t.Error("goOrRun after stop did not run f before returning")
		}
		gs.stop() // twice is fine
	})
}

func TestParkedExchangesAreForgottenAtTheirTimeoutOrAtStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newParkedExchanges()
		newEx := func() (*exchange, context.Context) {
			ctx, cancel := context.WithCancel(context.Background())
			return &exchange{cancel: cancel}, ctx
		}
		taken, takenCtx := newEx()
		p.park("a", taken, time.Second)
		if got := p.take("a"); got != taken {
			t.Fatalf("take(a) = %p, want %p", got, taken)
		}
		if got := p.take("a"); got != nil {
			t.Fatalf("take(a) the second time = %p, want nil", got)
		}
		expired, expiredCtx := newEx()
		p.park("b", expired, time.Second)
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if p.take("b") != nil || expiredCtx.Err() == nil {
			t.Error("an exchange parked past its timeout is still parked, or its call not cancelled")
		}
		if takenCtx.Err() != nil {
			t.Error("the timeout of a taken exchange cancelled its call")
		}
		atStop, atStopCtx := newEx()
		p.park("c", atStop, time.Hour)
		p.stop()
		if p.take("c") != nil || atStopCtx.Err() == nil {
			t.Error("an exchange parked at stop is still parked, or its call not cancelled")
		}
		late, lateCtx := newEx()
		p.park("d", late, time.Hour)
		if p.take("d") != nil || lateCtx.Err() == nil {
			t.Error("an exchange parked after stop was kept, or its call not cancelled")
		}
	})
}
