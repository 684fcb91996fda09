package main

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

// TestArmDeadlineEndsTheRequestsContextAsATimeout checks that a deadline
// armed on a request's own context reads, through ctxErr and
// context.Cause, as the timeout a context.WithTimeout gave, that a
// client's cancel still reads as a cancel, and that a stopped deadline
// leaves the context alone.
func TestArmDeadlineEndsTheRequestsContextAsATimeout(t *testing.T) {
	t.Parallel()
	t.Run("the timeout reads as DeadlineExceeded", func(t *testing.T) {
		ctx, cancel := context.WithCancelCause(t.Context())
		defer cancel(context.Canceled)
		ctx, dl := armDeadline(ctx, cancel, time.Millisecond)
		defer dl.stop()
		<-ctx.Done()
		if err := ctxErr(ctx); err != context.DeadlineExceeded {
			t.Errorf("ctxErr(ctx) = %v, want %v", err, context.DeadlineExceeded)
		}
		if cause := context.Cause(ctx); !errors.Is(cause, context.DeadlineExceeded) {
			t.Errorf("context.Cause(ctx) = %v, want %v (mux.cancel tells the server it timed out by it)", cause, context.DeadlineExceeded)
		}
	})
	t.Run("a cancel reads as Canceled", func(t *testing.T) {
		ctx, cancel := context.WithCancelCause(t.Context())
		ctx, dl := armDeadline(ctx, cancel, time.Hour)
		defer dl.stop()
		cancel(context.Canceled)
		if err := ctxErr(ctx); err != context.Canceled {
			t.Errorf("ctxErr(ctx) = %v, want %v", err, context.Canceled)
		}
	})
	t.Run("a cut-off keeps its cause", func(t *testing.T) {
		ctx, cancel := context.WithCancelCause(t.Context())
		ctx, dl := armDeadline(ctx, cancel, time.Hour)
		defer dl.stop()
		cancel(errShuttingDown)
		if err := ctxErr(ctx); err != context.Canceled || context.Cause(ctx) != errShuttingDown {
			t.Errorf("ctxErr(ctx), context.Cause(ctx) = %v, %v, want %v, %v", err, context.Cause(ctx), context.Canceled, errShuttingDown)
		}
	})
	t.Run("a stopped deadline leaves the context alone", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) { // the bubble's clock: the sleep is not real
			ctx, cancel := context.WithCancelCause(t.Context())
			defer cancel(context.Canceled)
			ctx, dl := armDeadline(ctx, cancel, 10*time.Millisecond)
			dl.stop()
			time.Sleep(time.Second)
			if err := context.Cause(ctx); err != nil {
				t.Errorf("context ended by a stopped deadline: %v", err)
			}
		})
	})
	t.Run("without a cancel, a context of its own", func(t *testing.T) {
		ctx, dl := armDeadline(t.Context(), nil, time.Millisecond)
		defer dl.stop()
		<-ctx.Done()
		if err := ctxErr(ctx); err != context.DeadlineExceeded {
			t.Errorf("ctxErr(ctx) = %v, want %v", err, context.DeadlineExceeded)
		}
	})
}
