package lease

import (
	"context"
	"sync"
	"time"
)

// Context is the context a holder's function runs under. It carries the
// values and the deadline of the caller's context (its parent), and it
// ends when the parent ends, when the lease is lost (Lose), or when the
// hold is over (End), whichever comes first. After Lose, context.Cause
// reports the reason given to it.
//
// A Context costs nothing until its function asks for something only a
// real context can give: Done, or a value it does not know. Only then does
// it build a context.WithCancelCause on its parent, so a hold whose
// function never looks at its context allocates nothing for it. Err, a
// Deadline, and the marks of this package (see Check) are answered without
// building anything.
//
// Embed a Context in the holder's record and hand its address to the
// function; its Lease field is the lease the function gets. Bind it before
// the function runs. All methods are safe for concurrent use; a Context
// must not be copied after Bind.
type Context struct {
	// Lease is the grant this context belongs to; it is filled before the
	// function runs and read-only afterwards.
	Lease Lease

	parent context.Context

	mu    sync.Mutex
	real  *built // the real context, nil until needed; guarded by mu
	lost  bool   // Lose was called; guarded by mu
	ended bool   // End was called; guarded by mu
}

// built is the real context behind a Context, made on first need. Keeping
// it apart keeps a Context small when it is never needed.
type built struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
}

// Bind makes parent the context c derives from. Call it once, before c is
// shared.
func (c *Context) Bind(parent context.Context) { c.parent = parent }

// Parent returns the context c derives from.
func (c *Context) Parent() context.Context { return c.parent }

// Lose records that the lease was lost for the given cause (not nil) and
// cancels c with it, reporting whether this call was the first to lose it.
// A lease ended by End can no longer be lost.
func (c *Context) Lose(cause error) bool {
	c.mu.Lock()
	if c.lost || c.ended {
		c.mu.Unlock()
		return false
	}
	c.lost = true
	b := c.buildLocked() // so that Err and Done agree from here on
	c.mu.Unlock()
	b.cancel(cause)
	return true
}

// Lost returns the cause given to Lose, or nil if the lease was not lost.
func (c *Context) Lost() error {
	c.mu.Lock()
	lost, b := c.lost, c.real
	c.mu.Unlock()
	if !lost {
		return nil
	}
	return context.Cause(b.ctx)
}

// End marks the hold as over: c is cancelled (with context.Canceled as the
// cause, unless the lease was lost before) and the resources of a built
// context are released. A context kept past its hold is done, never reused.
func (c *Context) End() {
	c.mu.Lock()
	c.ended = true
	b := c.real
	c.mu.Unlock()
	if b != nil {
		b.cancel(context.Canceled)
	}
}

// isEnded reports whether End was called.
func (c *Context) isEnded() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ended
}

// buildLocked returns the real context, building it on first use (one
// context.WithCancelCause).
func (c *Context) buildLocked() *built {
	if c.real == nil {
		b := new(built)
		b.ctx, b.cancel = context.WithCancelCause(c.parent)
		if c.ended {
			b.cancel(context.Canceled)
		}
		c.real = b
	}
	return c.real
}

func (c *Context) built() context.Context {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buildLocked().ctx
}

// Deadline returns the parent's deadline: losing a lease is a cancellation,
// not a deadline.
func (c *Context) Deadline() (deadline time.Time, ok bool) { return c.parent.Deadline() }

// Done returns a channel closed when c ends. The first call builds the
// real context (one allocation).
func (c *Context) Done() <-chan struct{} { return c.built().Done() }

// Err returns nil while c has not ended; context.Canceled once the lease
// was lost or the hold ended; otherwise the parent's error. It builds
// nothing.
func (c *Context) Err() error {
	c.mu.Lock()
	b, ended := c.real, c.lost || c.ended
	c.mu.Unlock()
	switch {
	case b != nil:
		return b.ctx.Err()
	case ended:
		return context.Canceled
	default:
		return c.parent.Err()
	}
}

// Value returns c itself for this package's mark key (see Check), and
// otherwise the value its real context holds for key, building it if
// needed: context.Cause and child contexts find their canceller through
// Value, so only the real context can answer them.
func (c *Context) Value(key any) any {
	if key == (markKey{}) {
		return c
	}
	return c.built().Value(key)
}

// String names the hold, for debugging.
func (c *Context) String() string {
	return "lease.Context(lock " + c.Lease.Lock + ", key " + c.Lease.Key + ")"
}
