package main

import (
	"context"
	"errors"
	"time"
)

// armDeadline bounds a request's call to timeout: when it ends, cancel,
// which ends ctx, the request's context (see Gateway.handle), is called
// with context.DeadlineExceeded as the cause. It returns the context to
// call under and the deadline, whose stop must be called once the call has
// ended. A timer on the request's own context costs 2 allocations where a
// context.WithTimeout under it cost 7. The context ends with Err
// context.Canceled; what reads it for a timeout reads ctxErr, not Err. If
// cancel is nil (a request not served through handle), the call gets a
// context.WithTimeout of its own.
func armDeadline(ctx context.Context, cancel context.CancelCauseFunc, timeout time.Duration) (context.Context, deadline) {
	if cancel == nil {
		ctx, end := context.WithTimeout(ctx, timeout)
		return ctx, deadline{end: end}
	}
	return ctx, deadline{t: time.AfterFunc(timeout, func() { cancel(context.DeadlineExceeded) })}
}

// deadline is a call's requestTimeout, armed by armDeadline.
type deadline struct {
	t   *time.Timer
	end context.CancelFunc
}

// stop disarms the deadline. The request's context goes on.
func (d deadline) stop() {
	if d.t != nil {
		d.t.Stop()
	}
	if d.end != nil {
		d.end()
	}
}

// ctxErr returns ctx's error, context.DeadlineExceeded when its cause is
// a deadline (armDeadline's, or a context.WithTimeout's), or nil while ctx
// has not ended.
func ctxErr(ctx context.Context) error {
	err := ctx.Err()
	if err == nil {
		return nil
	}
	if errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
		return context.DeadlineExceeded
	}
	return err
}
