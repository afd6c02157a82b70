// Package remote is what the Lockers of this module that keep their keys
// outside the process share: package client's (on a locksd server) and
// package etcdlocks' (on etcd). It checks their calls as a *locks.Lock
// checks its own, with the same messages, and runs a held function under
// a context that ends when the lease is lost, marked so that package
// locks' nesting checks (and locks.Detach) see the hold. Where their keys
// live, and how a lease is granted, renewed and lost, stays theirs.
package remote

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/holdline/locks"
)

// Reasons of the errors a remote Locker makes itself rather than
// receives, worded as package locks words them: a caller comparing
// messages sees no difference between Lockers.
const (
	// LostTTL: the lease could not be renewed in time, and was given up
	// before the store could let it lapse.
	LostTTL = "the lease was lost: its ttl ran out"
	// LostClosed: the store the lease was in closed.
	LostClosed = "the lease was lost: its store closed"
	// LostMaxHold: the lease was revoked at its maxHold.
	LostMaxHold = "the lease was lost: it was revoked at its maxHold"
	// Expired: the session (or lease) a hold waited under ended first.
	Expired = "the session expired"
	// StoreClosed: the store is closed.
	StoreClosed = "the store is closed"
)

// Lock is the part of a remote Locker's lock that needs no store: its
// name, the name its holds' marks go by, and the settings it was opened
// with. It is a value, set once by Open.
type Lock struct {
	name     string
	mark     string
	settings locks.Settings
}

// Open checks the name and options of a lock as locks.OpenLock does,
// with its messages, and returns the lock.
//
// mark is the lock's name in the marks of its holds (locks.MarkHold),
// which package locks' nesting checks compare: name itself where the
// lock's keys are named as package locks names its own (a locksd
// server's), so that a hold of the same name and key inside one of its
// holds is nested whichever Locker makes it; a name of the Locker's own
// where its keys are a space apart (an etcd prefix), so that only holds
// of that space count. Such a name should hold a space, which no lock
// name does, so that it never meets one.
func Open(name, mark string, opts []locks.Option) (Lock, error) {
	if err := locks.CheckName(name); err != nil {
		return Lock{}, err
	}
	st, err := locks.DefaultSettings().Apply(false, opts...)
	if err != nil {
		return Lock{}, &locks.Error{Kind: locks.Invalid, Lock: name, Reason: err.Error()}
	}
	return Lock{name: name, mark: mark, settings: st}, nil
}

// Name returns the lock's name.
func (l *Lock) Name() string { return l.name }

// Settings returns the settings the lock was opened with.
func (l *Lock) Settings() locks.Settings { return l.settings }

// CheckHold checks a Hold's arguments as a *locks.Lock's Hold does, in the
// same order and with the same messages, and returns the key's text and
// the hold's settings: a bad key, a nil fn, a bad option or a nil ctx
// fail Invalid, an ended ctx Canceled, and so do (Invalid) a hold inside
// locks.InTransaction and one inside a hold of the same key (see Open).
// It calls nothing outside the process: a refused call costs nothing
// remote.
func (l *Lock) CheckHold(ctx context.Context, key any, fn locks.HoldFunc, opts []locks.Option) (string, locks.Settings, error) {
	text, st, err := l.check(ctx, key, fn, opts)
	if err != nil {
		return "", st, err
	}
	if err := locks.CheckHold(ctx, l.mark, text); err != nil {
		if le, ok := err.(*locks.Error); ok && l.mark != l.name {
			named := *le // the error names the lock, not its mark
			named.Lock = l.name
			return "", st, &named
		}
		return "", st, err
	}
	return text, st, nil
}

// CheckTry checks a TryHold's arguments as a *locks.Lock's TryHold does:
// as CheckHold, then a Wait option is Invalid; neither a transaction nor
// an enclosing hold of the key is (the key is held: TryHold answers
// false). The settings' Wait is 0.
func (l *Lock) CheckTry(ctx context.Context, key any, fn locks.HoldFunc, opts []locks.Option) (string, locks.Settings, error) {
	text, st, err := l.check(ctx, key, fn, opts)
	if err != nil {
		return "", st, err
	}
	if _, err := st.ApplyTry(opts...); err != nil {
		return "", st, &locks.Error{Kind: locks.Invalid, Lock: l.name, Key: text, Reason: err.Error()}
	}
	st.Wait = 0
	return text, st, nil
}

// check checks what both Hold and TryHold take, in package locks' order.
func (l *Lock) check(ctx context.Context, key any, fn locks.HoldFunc, opts []locks.Option) (string, locks.Settings, error) {
	text, err := locks.KeyText(key)
	if err != nil {
		return "", locks.Settings{}, &locks.Error{Kind: locks.Invalid, Lock: l.name, Reason: err.Error()}
	}
	if fn == nil {
		return "", locks.Settings{}, &locks.Error{Kind: locks.Invalid, Lock: l.name, Key: text, Reason: "the function to run is nil"}
	}
	st := l.settings
	if len(opts) > 0 {
		if st, err = st.Apply(true, opts...); err != nil {
			return "", locks.Settings{}, &locks.Error{Kind: locks.Invalid, Lock: l.name, Key: text, Reason: err.Error()}
		}
	}
	if ctx == nil {
		return "", locks.Settings{}, &locks.Error{Kind: locks.Invalid, Lock: l.name, Key: text, Reason: "the context is nil"}
	}
	if ctx.Err() != nil {
		return "", locks.Settings{}, locks.ContextError(l.name, text, ctx)
	}
	return text, st, nil
}

// Hold is one hold of a remote Locker, from its request until its
// function returns: the loss of its lease, which may come before the
// grant is seen (a store that pushes losses), and the context its
// function runs under, which ends with the lease. The Locker keeps one in
// the record of each hold; the zero Hold is ready. Lose, Lost and Start
// are called under the Locker's mutex, which guards them; Run by the
// goroutine that holds.
type Hold struct {
	lost   *locks.Error
	ctx    context.Context         // the function's, once started
	cancel context.CancelCauseFunc // ends ctx
	f      *followed               // ctx, unmarked
	ended  atomic.Bool             // the function has returned: the mark marks nothing
}

// Lose records le as the loss of the lease unless one is recorded
// already, and ends the function's context with it (context.Cause) if
// the function has started.
func (h *Hold) Lose(le *locks.Error) {
	if h.lost != nil {
		return
	}
	h.lost = le
	if h.cancel != nil {
		h.cancel(le)
	}
}

// Lost returns the loss of the lease, or nil.
func (h *Hold) Lost() *locks.Error { return h.lost }

// Start makes the context the function holding key of the lock marked
// mark (see Open) runs under: ctx's values, deadline and cancellation
// (see Follow; Run starts following ctx), ended when the lease is lost
// (at once if it is already) or when the function returns, and marked
// with locks.MarkHold for as long as the function runs. Run calls the
// function. Start calls nothing of ctx's, so it may run under the
// Locker's mutex.
func (h *Hold) Start(ctx context.Context, mark, key string) {
	f, cancel := newFollowed(ctx, true)
	h.ctx, h.cancel, h.f = locks.MarkHold(f, mark, key, h.ended.Load), cancel, f
	if h.lost != nil {
		cancel(h.lost)
	}
}

// Follow returns a context with ctx's values and deadline that ends when
// ctx does (a moment after, on package context's goroutine), with its
// error and cause, or when cancel is called, with context.Canceled and
// cancel's cause, whichever comes first; stop, once the context is done
// with, stops following ctx.
//
// Unlike context.WithCancelCause(ctx)'s, cancel calls nothing of ctx's: it
// ends a context built on context.WithoutCancel(ctx), which follows ctx
// with context.AfterFunc, as package locks' hold contexts do. A Locker
// may call it under its mutex or on its own goroutines, where a caller's
// context, whose methods may block, must not run (SPEC §5). ctx's methods
// run on the goroutines of Follow's and stop's callers, of the returned
// context's users, and of package context.
func Follow(ctx context.Context) (_ context.Context, cancel context.CancelCauseFunc, stop func() bool) {
	f, cancel := newFollowed(ctx, false)
	return f, cancel, f.follow()
}

// newFollowed makes Follow's context, not following ctx yet. It calls
// nothing of ctx's. With asks, its Err and Done ask ctx first (see
// catchUp): for a context that only the caller's code uses.
func newFollowed(ctx context.Context, asks bool) (*followed, context.CancelCauseFunc) {
	real, cancelReal := context.WithCancelCause(context.WithoutCancel(ctx))
	f := &followed{Context: real, parent: ctx, cancel: cancelReal, asks: asks}
	return f, func(cause error) { f.end(context.Canceled, cause) }
}

// follow makes f end when its parent does, and returns what stops that.
func (f *followed) follow() func() bool {
	return context.AfterFunc(f.parent, func() { f.end(f.parent.Err(), context.Cause(f.parent)) })
}

// followed is Follow's context.
type followed struct {
	context.Context // real: Done, Value, and the cause context.Cause finds
	parent          context.Context
	cancel          context.CancelCauseFunc // real's
	asks            bool                    // Err and Done ask the parent first

	mu  sync.Mutex
	err error // set by the first end, with real's Done closed under mu
}

// Deadline returns the parent's deadline.
func (f *followed) Deadline() (time.Time, bool) { return f.parent.Deadline() }

// Done returns a channel closed when f ends.
func (f *followed) Done() <-chan struct{} {
	f.catchUp()
	return f.Context.Done()
}

// Err returns nil until Done is closed, then the error of the first end:
// the parent's when the parent ended first.
func (f *followed) Err() error {
	f.catchUp()
	if f.Context.Err() == nil {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

// catchUp ends f at once, if it asks, when its parent has ended and the
// AfterFunc that follows the parent has not run yet: a context derived
// from the parent would have ended with it, and the caller's code that
// ended the parent, or saw it end, expects f's Err and Done to say so.
func (f *followed) catchUp() {
	if f.asks && f.Context.Err() == nil {
		if err := f.parent.Err(); err != nil {
			f.end(err, context.Cause(f.parent))
		}
	}
}

// end ends f with err and cause, unless it has ended. Real's Done is
// closed under f.mu, so that Err, which waits for mu, never answers an
// error before Done is closed.
func (f *followed) end(err, cause error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err == nil {
		f.err = err
		f.cancel(cause)
	}
}

// Run calls fn with the context Start made and lease, and however fn
// ends (returning, panicking, runtime.Goexit: the panic goes on) ends
// that context and calls release, which lets the key go and returns the
// loss of the lease, if it was lost. Run returns what Hold returns: fn's
// error as it is, or the Lost error wrapping it (its Cause).
func (h *Hold) Run(fn locks.HoldFunc, lease *locks.Lease, release func() *locks.Error) (err error) {
	stop := h.f.follow()
	defer func() {
		h.ended.Store(true)
		stop()
		h.f.catchUp() // a parent that ended first, its AfterFunc not run yet, gives the cause
		h.cancel(nil)
		if lost := release(); lost != nil {
			le := *lost
			le.Cause = err
			err = &le
		}
	}()
	return fn(h.ctx, lease)
}
