package locks

import (
	"context"
	"sync/atomic"
	"time"
)

// holdContext is the context a held function runs under, and the lease it
// is given: the one allocation of a hold (112 bytes on amd64), never
// reused, so a context or a *Lease kept after the function returns stays
// valid and keeps its answers.
//
// It carries the values and the deadline of the caller's context (its
// parent) and ends when the parent ends, when the lease is lost, or when
// the hold is over, whichever comes first; that first outcome is settled
// once, and Err never changes after it. Only the methods of
// context.Context and String are exported: nothing reachable from it by
// type assertion can end, lose or rebind a lease.
//
// It costs nothing until its function asks for what only a real context
// can give (Done, or a value other than this package's marks): only then
// does it build one, on context.WithoutCancel of the parent, following the
// parent with context.AfterFunc. Building on WithoutCancel keeps the
// parent's code (its Done, Err, AfterFunc and their stop) off the store's
// goroutines: losing a lease there cancels only a context of this
// package's own making; the parent is asked only by the function's
// goroutine, the context package's, or the caller's own at the hold's end.
type holdContext struct {
	lease  Lease
	parent context.Context
	st     atomic.Pointer[ctxState] // nil: running, nothing built
}

// ctxState is one state of a holdContext. States are never changed once
// published: a transition installs a new one with CompareAndSwap.
type ctxState struct {
	real   context.Context // built on first need; nil before
	cancel context.CancelCauseFunc
	stop   func() bool // stops following the parent

	err   error // nil while running; then what Err answers
	cause error // what context.Cause answers once settled; nil: the parent's, or the loss's
	loss  loss  // why the lease was lost; notLost if it was not
	ended bool  // the hold is over
	// byLoss: the loss settled c, and the cause is its *Error, made when
	// first asked for, so that revoking a lease nobody looks at allocates
	// nothing.
	byLoss bool
}

// Shared states of a hold that ended without building anything, so that
// ending a hold allocates nothing.
var (
	endedState           = &ctxState{err: context.Canceled, cause: context.Canceled, ended: true}
	endedParentCanceled  = &ctxState{err: context.Canceled, ended: true}
	endedParentDeadlined = &ctxState{err: context.DeadlineExceeded, ended: true}
)

// Shared states of a hold lost before anything was built, and ended
// after, by reason.
var lostStates, endedLostStates = func() (lost, ended [lostClosed + 1]ctxState) {
	for r := range lost {
		lost[r] = ctxState{err: context.Canceled, loss: loss(r), byLoss: true}
		ended[r] = lost[r]
		ended[r].ended = true
	}
	return lost, ended
}()

// newHoldContext returns the context of a hold of key text in lock name,
// under parent.
func newHoldContext(parent context.Context, name, text string) *holdContext {
	c := &holdContext{parent: parent}
	c.lease.Lock, c.lease.Key = name, text
	return c
}

// Deadline returns the parent's deadline: losing a lease is a
// cancellation, not a deadline.
func (c *holdContext) Deadline() (deadline time.Time, ok bool) { return c.parent.Deadline() }

// Done returns a channel closed when c ends. The first call builds the
// real context.
func (c *holdContext) Done() <-chan struct{} { return c.built().Done() }

// Err returns nil while c runs, then the error of how it ended:
// context.Canceled once the lease was lost or the hold ended, or the
// parent's error when the parent ended first. Once non-nil it never
// changes. It builds nothing.
func (c *holdContext) Err() error {
	st := c.st.Load()
	if st == nil || st.err == nil {
		if c.parent.Err() == nil {
			return nil
		}
		c.parentEnded()
		st = c.st.Load() // settled now, by this call or another's
	}
	if st.real != nil && st.real.Err() == nil {
		// Settled (by a loss under the store's lock, or by the parent's
		// end on another goroutine), but the real context's Done is not
		// closed yet: its canceller is on its way. Err answers nil until
		// Done is closed, as a context must, and so never nil after
		// non-nil.
		return nil
	}
	return st.err
}

// Value returns c itself for this package's mark key (see enclosing), and
// otherwise what the real context answers, building it if needed:
// context.Cause and child contexts find their canceller through Value.
func (c *holdContext) Value(key any) any {
	if key == (markKey{}) {
		return c
	}
	return c.built().Value(key)
}

// String names the hold, for debugging.
func (c *holdContext) String() string {
	return "locks: the context of a hold of lock " + c.lease.Lock + ", key " + c.lease.Key
}

// settle installs the outcome made by next from the current state, unless
// c has already settled one (next returns nil then), and returns the state
// it installed or nil.
func (c *holdContext) settle(next func(*ctxState) *ctxState) *ctxState {
	for {
		old := c.st.Load()
		st := next(old)
		if st == nil {
			return nil
		}
		if c.st.CompareAndSwap(old, st) {
			return st
		}
	}
}

// with returns a copy of st (nil: the running, unbuilt state).
func with(st *ctxState) *ctxState {
	if st == nil {
		return new(ctxState)
	}
	n := *st
	return &n
}

// parentEnded settles c with the parent's outcome if nothing was settled
// before, and cancels the real context with the parent's cause. It runs
// on the function's goroutine (Err) or the context package's (the
// parent's AfterFunc), never on the store's.
func (c *holdContext) parentEnded() {
	err := c.parent.Err()
	st := c.settle(func(old *ctxState) *ctxState {
		if old != nil && old.err != nil {
			return nil
		}
		n := with(old)
		n.err = err
		return n
	})
	if st != nil && st.cancel != nil {
		st.cancel(context.Cause(c.parent))
	}
}

// loseLocked records that the lease was lost for r, and settles c with it
// unless it ended first. It runs none of the parent's code, does not
// cancel the real context (cancelLost does, once the store's lock is let
// go), and allocates nothing unless c's state was set before (fn built a
// real context, or saw its parent end). The store
// calls it under the shard's mutex, so a holder that lets go under that
// mutex later sees the loss.
func (c *holdContext) loseLocked(r loss) {
	c.settle(func(old *ctxState) *ctxState {
		switch {
		case old == nil:
			return &lostStates[r]
		case old.loss != notLost || old.ended:
			return nil
		}
		n := with(old)
		n.loss = r
		if n.err == nil {
			n.err, n.byLoss = context.Canceled, true
		}
		return n
	})
}

// cancelLost cancels the real context, if one was built, with the lost
// *Error. It runs no code of the parent's.
func (c *holdContext) cancelLost() {
	if st := c.st.Load(); st != nil && st.cancel != nil && st.byLoss {
		st.cancel(st.causeOf(c))
	}
}

// lost returns why the lease was lost, or notLost.
func (c *holdContext) lost() loss {
	if st := c.st.Load(); st != nil {
		return st.loss
	}
	return notLost
}

// end marks the hold as over, on the holder's own goroutine: c is
// settled (with context.Canceled, unless the lease was lost or the parent
// ended before), the real context is cancelled and stops following the
// parent. Ending a context whose state was never set (nothing built, lost
// or seen ended) allocates nothing.
func (c *holdContext) end() {
	// Most holds end with nothing built, lost or settled: the CAS the
	// general path below would make, without its closure.
	if c.st.Load() == nil && c.parent.Err() == nil && c.st.CompareAndSwap(nil, endedState) {
		return
	}
	st := c.settle(func(old *ctxState) *ctxState {
		switch {
		case old != nil && old.ended:
			return nil
		case old != nil && old.byLoss && old == &lostStates[old.loss]:
			return &endedLostStates[old.loss]
		case old == nil:
			switch c.parent.Err() {
			case nil:
				return endedState
			case context.DeadlineExceeded:
				return endedParentDeadlined
			default:
				return endedParentCanceled
			}
		}
		n := with(old)
		n.ended = true
		if n.err == nil {
			n.err = c.parent.Err()
			if n.err == nil {
				n.err, n.cause = context.Canceled, context.Canceled
			}
		}
		return n
	})
	if st != nil && st.cancel != nil {
		// The settled cause, not context.Canceled: a loss whose canceller
		// has not run yet keeps its *Error as the cause. A no-op if the loss
		// or the parent cancelled it already.
		st.cancel(st.causeOf(c))
		st.stop()
	}
}

// ended reports whether the hold is over.
func (c *holdContext) ended() bool {
	st := c.st.Load()
	return st != nil && st.ended
}

// built returns the real context, building it on first use. A builder
// that finds another's context installed first, or c settled meanwhile,
// throws its own away and looks again.
func (c *holdContext) built() context.Context {
	for {
		old := c.st.Load()
		if old != nil && old.real != nil {
			return old.real
		}
		n := with(old)
		n.real, n.cancel = context.WithCancelCause(context.WithoutCancel(c.parent))
		n.stop = func() bool { return false }
		if n.err != nil {
			n.cancel(n.causeOf(c)) // born ended, as it settled
		} else {
			n.stop = context.AfterFunc(c.parent, c.parentEnded)
		}
		if c.st.CompareAndSwap(old, n) {
			return n.real
		}
		n.stop()
		n.cancel(context.Canceled)
	}
}

// causeOf returns the cause of c's outcome st: its own, the lost *Error,
// or the parent's when the outcome came from it.
func (st *ctxState) causeOf(c *holdContext) error {
	switch {
	case st.cause != nil:
		return st.cause
	case st.byLoss:
		return lostError(c.lease.Lock, c.lease.Key, st.loss)
	}
	return context.Cause(c.parent)
}

// markKey is the one context key under which every mark of this package
// answers: a transaction mark, the *holdContext of an enclosing hold, or
// a *foreignHold (MarkHold). One key for all means one walk up a context
// chain checks them all.
type markKey struct{}

// sessionParent is the parent of a session's hold's context: the caller's
// context without its cancellation (context.WithoutCancel), of a type of
// its own so that Holders tells a session's hold by it (a key's entry
// keeps no waiter record), and only this hold's: a hold made inside it has
// its context as parent.
type sessionParent struct{ context.Context }

// txMark marks a context as running inside a write transaction.
type txMark struct{}

// conflict is what enclosing found on a context chain.
type conflict uint8

const (
	noConflict    conflict = iota
	inTransaction          // the context runs inside a write transaction
	nested                 // it descends from the context of a hold of the same key
)

// enclosing walks ctx's chain of marks, nearest first, and reports the
// first conflict for a hold of key in lock: a transaction mark, or an
// enclosing hold of the same lock and key that has not ended (a context
// kept past its hold, with context.WithoutCancel say, encloses nothing).
// Holds of other keys, and ended ones, are walked through. Cost: one
// ctx.Value lookup per enclosing mark, one in all when there is none; no
// allocation.
func enclosing(ctx context.Context, lock, key string) conflict {
	c, _ := enclosingHold(ctx, lock, key)
	return c
}

// enclosingHold is enclosing, and also reports whether some hold that has
// not ended encloses ctx: a hold made there can close a cycle of holds
// waiting on each other (see cycles.go).
func enclosingHold(ctx context.Context, lock, key string) (conflict, bool) {
	v := ctx.Value(markKey{})
	if v == nil { // most holds are made outside any other
		return noConflict, false
	}
	return enclosingMarks(v, lock, key)
}

// enclosingMarks is enclosingHold from v, the value of ctx's nearest mark:
// Hold calls it after making the Value call in its own frame, a call
// fewer on every hold.
func enclosingMarks(v any, lock, key string) (conflict, bool) {
	inside := false
	for v != nil {
		switch m := v.(type) {
		case txMark:
			return inTransaction, inside
		case *holdContext:
			if !m.ended() {
				if m.lease.Lock == lock && m.lease.Key == key {
					return nested, true
				}
				inside = true
			}
			v = m.parent.Value(markKey{})
		case *foreignHold:
			if m.lock == lock && m.key == key && !m.ended() {
				return nested, inside
			}
			v = m.Context.Value(markKey{})
		default:
			return noConflict, inside
		}
	}
	return noConflict, inside
}

// enclosingHolds returns the holds that have not ended enclosing ctx,
// nearest first.
func enclosingHolds(ctx context.Context) []*holdContext {
	var out []*holdContext
	for v := ctx.Value(markKey{}); v != nil; {
		switch m := v.(type) {
		case *holdContext:
			if !m.ended() {
				out = append(out, m)
			}
			v = m.parent.Value(markKey{})
		case *foreignHold: // not this store's: no part of its cycles
			v = m.Context.Value(markKey{})
		default:
			return out
		}
	}
	return out
}
