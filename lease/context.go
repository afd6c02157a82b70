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
// The first of End and Lose settles how the Context ended, once: from then
// on Err, and a real context built afterwards, answer that outcome, so a
// context kept past its hold never changes its answer.
//
// Embed a Context in the holder's record and hand its address to the
// function; its Lease field is the lease the function gets. Bind it before
// the function runs. Bind, Lose and End are for the store that grants the
// lease, not for the function holding it. All methods are safe for concurrent use; a Context
// must not be copied after Bind.
type Context struct {
	// Lease is the grant this context belongs to; it is filled before the
	// function runs and read-only afterwards.
	Lease Lease

	parent context.Context

	mu   sync.Mutex
	real *built   // the real context, nil until needed; guarded by mu
	out  *outcome // how c ended, nil while it runs; guarded by mu
}

// built is the real context behind a Context, made on first need. Keeping
// it apart keeps a Context small when it is never needed.
type built struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
}

// outcome is how a Context ended: what Err answers and why.
type outcome struct {
	err   error // context.Canceled or context.DeadlineExceeded
	cause error // what context.Cause answers; nil: the parent's cause
	loss  error // the cause given to Lose; nil if the lease was not lost
	ended bool  // End was called
}

// The outcomes of an End before any Lose, shared so that ending a hold
// allocates nothing. A Lose allocates its own outcome, which End then
// marks ended.
var (
	endedOutcome    = &outcome{err: context.Canceled, cause: context.Canceled, ended: true}
	parentCanceled  = &outcome{err: context.Canceled, ended: true}
	parentDeadlined = &outcome{err: context.DeadlineExceeded, ended: true}
)

// Bind makes parent the context c derives from. Call it once, before c is
// shared.
func (c *Context) Bind(parent context.Context) { c.parent = parent }

// Parent returns the context c derives from.
func (c *Context) Parent() context.Context { return c.parent }

// Lose records that the lease was lost for the given cause (not nil) and
// cancels c with it, reporting whether this call settled c. A Context that
// already ended (End, or an earlier Lose) stays as it was. Lose runs none
// of the parent's code, so a store may call it from its timer goroutine.
func (c *Context) Lose(cause error) bool {
	c.mu.Lock()
	if c.out != nil {
		c.mu.Unlock()
		return false
	}
	o := &outcome{err: context.Canceled, cause: cause, loss: cause}
	if err := c.endedErrLocked(); err != nil {
		o.err, o.cause = err, nil // the parent ended first: its outcome stands
	}
	c.out = o
	b := c.real
	c.mu.Unlock()
	if b != nil {
		b.cancel(cause)
	}
	return true
}

// Lost returns the cause given to the Lose that settled c, or nil if c was
// not settled by a Lose.
func (c *Context) Lost() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.out == nil {
		return nil
	}
	return c.out.loss
}

// End marks the hold as over: c is cancelled (with context.Canceled as the
// cause, unless the lease was lost or the parent ended before) and the
// resources of a built context are released. A context kept past its hold
// is done, never reused. End allocates nothing.
func (c *Context) End() {
	c.mu.Lock()
	switch {
	case c.out != nil:
		if !c.out.ended {
			c.out.ended = true // a Lose's own outcome (the shared ones are ended)
		}
	default:
		switch c.endedErrLocked() {
		case nil:
			c.out = endedOutcome
		case context.DeadlineExceeded:
			c.out = parentDeadlined
		default:
			c.out = parentCanceled
		}
	}
	b := c.real
	c.mu.Unlock()
	if b != nil {
		b.cancel(context.Canceled)
	}
}

// endedErrLocked returns the error of the parent (or of the built
// context, which follows it) if it has ended, or nil.
func (c *Context) endedErrLocked() error {
	if c.real != nil {
		return c.real.ctx.Err()
	}
	return c.parent.Err()
}

// isEnded reports whether End was called.
func (c *Context) isEnded() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.out != nil && c.out.ended
}

// built returns the real context, building it on first use. It builds
// without holding c's mutex, since building runs the parent's code (its
// Done, for a context of another package). A builder that finds another's
// context installed first, or c settled while it built, throws its own
// away and looks again; c settles once, so that happens at most twice.
func (c *Context) built() context.Context {
	for {
		c.mu.Lock()
		b, out := c.real, c.out
		c.mu.Unlock()
		if b != nil {
			return b.ctx
		}
		b = c.build(out)
		c.mu.Lock()
		if c.real == nil && c.out == out {
			c.real = b
			c.mu.Unlock()
			return b.ctx
		}
		c.mu.Unlock()
		b.cancel(context.Canceled)
	}
}

// build makes a real context for the outcome out (nil: still running). A
// running Context derives from its parent; an ended one answers its
// settled outcome from a context that keeps the parent's values only.
func (c *Context) build(out *outcome) *built {
	b := new(built)
	switch {
	case out == nil:
		b.ctx, b.cancel = context.WithCancelCause(c.parent)
	case out.err == context.DeadlineExceeded:
		var stop context.CancelFunc
		b.ctx, stop = context.WithDeadlineCause(context.WithoutCancel(c.parent), time.Time{}, out.causeOr(c.parent))
		b.cancel = func(error) { stop() }
	default:
		b.ctx, b.cancel = context.WithCancelCause(context.WithoutCancel(c.parent))
		b.cancel(out.causeOr(c.parent))
	}
	return b
}

// causeOr returns o's cause, or the parent's when o came from it.
func (o *outcome) causeOr(parent context.Context) error {
	if o.cause != nil {
		return o.cause
	}
	return context.Cause(parent)
}

// Deadline returns the parent's deadline: losing a lease is a cancellation,
// not a deadline.
func (c *Context) Deadline() (deadline time.Time, ok bool) { return c.parent.Deadline() }

// Done returns a channel closed when c ends. The first call builds the
// real context (one allocation).
func (c *Context) Done() <-chan struct{} { return c.built().Done() }

// Err returns nil while c runs, and then the error of how it ended:
// context.Canceled once the lease was lost or the hold ended, or the
// parent's error when the parent ended first. Once non-nil it never
// changes. It builds nothing.
func (c *Context) Err() error {
	c.mu.Lock()
	b, out := c.real, c.out
	c.mu.Unlock()
	switch {
	case b != nil:
		return b.ctx.Err()
	case out != nil:
		return out.err
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
