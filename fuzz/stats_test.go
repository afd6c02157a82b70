package fuzz

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/holdline/locks"
)

// What the callers of a store saw, counted in the terms of locks.Stats, so
// that the store's figures can be checked against it: the stress test and
// the model driver both require
//
//	Grants   = functions that started
//	Waits    = holds that stood in line
//	TimedOut = holds that failed InUse after standing in line (not Wait(0))
//	Canceled = holds that failed Canceled after standing in line (not a
//	           context that had ended before the call)
//	Limited  = holds refused Limit

// watchedCtx is a caller's context that notes whether the store watched it
// (called Done) before the call's function started. A hold watches its
// context to stand in line, and only then: a hold that finds its context
// ended, or its key free, held with Wait(0) or its line full, returns or
// runs its function without asking for Done (the function's own context is
// built, on Done, only once the function runs). So watched tells which
// holds stood in line, which a caller cannot otherwise see. The model
// driver checks that it agrees with the model wherever the model knows
// (every call but one made while the holder lets go: see rcall.raced).
type watchedCtx struct {
	context.Context
	started atomic.Bool // the call's function has started
	watched atomic.Bool // Done was called before that
}

func (c *watchedCtx) Done() <-chan struct{} {
	if !c.started.Load() {
		c.watched.Store(true)
	}
	return c.Context.Done()
}

// start marks the call's function started: the first thing the function
// does.
func (c *watchedCtx) start() { c.started.Store(true) }

// seen is one call as its caller saw it: whether its function started,
// whether it stood in line, and what Hold (or TryHold) returned, if it
// returned (a function that panicked or called runtime.Goexit did not).
type seen struct {
	ran, waited, returned bool
	err                   error
}

// seenOf reads a finished call's watchedCtx and result.
func seenOf(c *watchedCtx, returned bool, err error) seen {
	return seen{ran: c.started.Load(), waited: c.watched.Load(), returned: returned, err: err}
}

// count adds s to want, the figures the store must give, and returns what
// is wrong with s itself, if anything: an error that contradicts how the
// call went.
func (s seen) count(want *locks.Stats) string {
	if s.ran {
		want.Grants++
	}
	if s.waited {
		want.Waits++
	}
	var e *locks.Error
	if !s.returned || !errors.As(s.err, &e) {
		return ""
	}
	switch e.Kind {
	case locks.InUse:
		switch {
		case s.waited && e.HolderFence == 0:
			return fmt.Sprintf("%q after standing in line names no holder's fence", s.err)
		case !s.waited && (e.HolderFence != 0 || e.HeldFor != 0):
			return fmt.Sprintf("%q without standing in line names a holder (fence %d, held for %v)", s.err, e.HolderFence, e.HeldFor)
		}
		if s.waited {
			want.TimedOut++
		}
	case locks.Canceled:
		if s.ran {
			return fmt.Sprintf("%q, but the function ran", s.err)
		}
		if s.waited {
			want.Canceled++
		}
	case locks.Limit:
		if s.waited {
			return fmt.Sprintf("%q after standing in line", s.err)
		}
		want.Limited++
	}
	return ""
}

// statsDiff returns how got differs from want, or "". With revoked false,
// the revocations are not compared (a caller does not always see a
// revocation: a function that ends by panicking, say, after its lease was
// revoked).
func statsDiff(got, want locks.Stats, revoked bool) string {
	if !revoked {
		got.Revoked, got.RevokedMaxHold, got.RevokedTTL, got.RevokedClosed = 0, 0, 0, 0
		want.Revoked, want.RevokedMaxHold, want.RevokedTTL, want.RevokedClosed = 0, 0, 0, 0
	}
	if got == want {
		return ""
	}
	return fmt.Sprintf("Stats() = %+v, but the callers saw %+v", got, want)
}
