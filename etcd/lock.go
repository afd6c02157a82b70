package etcdlocks

import (
	"context"
	"errors"

	"github.com/holdline/locks"
)

// Lock is a named keyspace of a Store's prefix: a locks.Locker. Two
// handles of one name, of one Store or of two on the same prefix (in
// this process or another), share their keys. Safe for concurrent use.
type Lock struct {
	s    *Store
	name string
	st   locks.Settings
}

var _ locks.Locker = (*Lock)(nil)

// OpenLock returns a handle on the lock called name, with the options of
// locks.OpenLock: locks.TTL (how long its leases live in etcd unrenewed,
// rounded up to whole seconds, and never less than the cluster's least,
// 2 s with etcd's default election timeout), and the default
// locks.MaxHold and locks.Wait of its holds. Locks of one ttl share one
// etcd lease. It fails Invalid for a bad name or option, with the
// messages of locks.OpenLock, and Closed once the Store is closed. It
// makes no call to etcd.
func (s *Store) OpenLock(name string, opts ...locks.Option) (*Lock, error) {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return nil, errStoreClosed(name, "")
	}
	// Checked by package locks itself, so that the errors are its own.
	if _, err := locks.OpenLock(s.probeStore, name, opts...); err != nil {
		return nil, err
	}
	st, err := locks.DefaultSettings().Apply(false, opts...)
	if err != nil {
		return nil, &locks.Error{Kind: locks.Invalid, Lock: name, Reason: err.Error()}
	}
	return &Lock{s: s, name: name, st: st}, nil
}

// Name returns the lock's name.
func (l *Lock) Name() string { return l.name }

// Hold waits in line for key in etcd, runs fn holding it, and lets it go
// when fn returns or panics (the panic goes on after the key is let go),
// as locks.Lock.Hold does, with the same keys, options, lines and errors.
// It returns what fn returned; nil only if fn ran and returned nil.
//
// The line is the keys of the key's directory in etcd, in the order of
// their create revisions: strictly first come, first served, across
// every process on the prefix. The wait is bounded by the hold's Wait
// (the lock's, or locks.DefaultWait): past it Hold leaves the line and
// fails InUse, the *locks.Error naming how long the holder had held the
// key and its fence; Wait(0) does not stand in line. A line of
// locks.MaxWaiters waiters fails Limit. When ctx ends first, Hold leaves
// the line and fails Canceled, matching ctx.Err() and context.Cause(ctx);
// a grant racing with that goes to the next in line.
//
// fn's context derives from ctx and ends when fn returns, when ctx ends,
// and when the lease is lost, with context.Cause the Lost *locks.Error:
// at the hold's maxHold, on this process's clock (the key goes to the
// next in line at once); when the Store's etcd lease could not be renewed,
// before etcd could let it lapse and give the key to another process
// ("its ttl ran out"); when the key was deleted by another hand; when
// the Store closes. Hold then fails Lost once fn returns, wrapping fn's
// error. lease.Fence is the key's create revision in etcd: higher than
// that of every earlier holder of the key, whichever process held it.
//
// Hold fails Invalid at once, calling etcd for nothing, for a bad key or
// option, a nil ctx or fn, inside locks.InTransaction, and inside a hold
// of the same key on the same prefix (ctx descending from that hold's
// function context; see Detach); Closed when the Store is closed, or
// when its etcd lease lapsed while the hold waited ("the session
// expired"). A call to etcd that fails returns an error naming the lock
// and the key that wraps etcd's error; every other error but fn's own is
// a *locks.Error.
//
// Cost: on a free key two calls to etcd, a transaction that joins the
// line and finds it empty and one that lets the key go, and a watch of
// the key while fn runs (so that a revocation or a deletion by another
// hand ends fn's context); a wait adds a watch of the key just ahead in
// line (only that one: a release wakes one waiter), a transaction per
// change ahead, and one that records the grant. etcd's cost of each
// transaction grows with the number of keys in the key's line. The first
// hold of a ttl grants the Store's lease: one call more. Safe for
// concurrent use.
func (l *Lock) Hold(ctx context.Context, key any, fn locks.HoldFunc, opts ...locks.Option) error {
	text, st, err := l.check(ctx, key, fn, opts)
	if err != nil {
		return err
	}
	if nestedIn(ctx, dir(l.s.prefix, l.name, text)) {
		return &locks.Error{Kind: locks.Invalid, Lock: l.name, Key: text, Reason: "held inside a hold of the same key"}
	}
	if err := l.s.inTransaction(ctx, l.name, text); err != nil {
		return err
	}
	how := standInLine
	if st.Wait == 0 {
		how = noWait
	}
	h, err := l.s.acquire(ctx, l.name, text, st, how)
	if err != nil {
		return err
	}
	return l.s.run(h, fn)
}

// TryHold runs fn holding key if the key is free in etcd and nobody is
// in line for it, and never waits, as locks.Lock.TryHold does: (true,
// fn's error) when it ran fn, (false, nil) when the key was held, also by
// its own caller. A holder past its maxHold (and the clocks' skew) counts
// as gone: TryHold revokes it. A Wait option is Invalid. It fails (false,
// err) as Hold does for a bad key, a closed Store or an ended ctx. Cost:
// as Hold's on a free key when it runs fn, one transaction when the key
// is held. Safe for concurrent use.
func (l *Lock) TryHold(ctx context.Context, key any, fn locks.HoldFunc, opts ...locks.Option) (acquired bool, err error) {
	text, st, err := l.check(ctx, key, fn, opts)
	if err != nil {
		return false, err
	}
	if hasWait(opts) {
		return false, &locks.Error{Kind: locks.Invalid, Lock: l.name, Key: text, Reason: "TryHold never waits: Wait is not one of its options"}
	}
	st.Wait = 0
	h, err := l.s.acquire(ctx, l.name, text, st, try)
	if err != nil || h == nil {
		return false, err
	}
	return true, l.s.run(h, fn)
}

// hasWait reports whether opts hold a Wait option: applied to two
// settings of different waits, a Wait makes them equal.
func hasWait(opts []locks.Option) bool {
	a, errA := locks.Settings{TTL: 1, Wait: 1}.Apply(true, opts...)
	b, errB := locks.Settings{TTL: 1, Wait: 2}.Apply(true, opts...)
	return errA == nil && errB == nil && a.Wait == b.Wait
}

// check validates a hold's arguments as package locks does, in the same
// order and with the same messages, and returns the key's text and the
// hold's settings.
func (l *Lock) check(ctx context.Context, key any, fn locks.HoldFunc, opts []locks.Option) (string, locks.Settings, error) {
	text, err := locks.KeyText(key)
	if err != nil {
		return "", locks.Settings{}, &locks.Error{Kind: locks.Invalid, Lock: l.name, Reason: err.Error()}
	}
	if fn == nil {
		return "", locks.Settings{}, &locks.Error{Kind: locks.Invalid, Lock: l.name, Key: text, Reason: "the function to run is nil"}
	}
	st := l.st
	if len(opts) > 0 {
		if st, err = st.Apply(true, opts...); err != nil {
			return "", locks.Settings{}, &locks.Error{Kind: locks.Invalid, Lock: l.name, Key: text, Reason: err.Error()}
		}
	}
	if ctx == nil {
		return "", locks.Settings{}, &locks.Error{Kind: locks.Invalid, Lock: l.name, Key: text, Reason: "the context is nil"}
	}
	if ctx.Err() != nil {
		return "", locks.Settings{}, canceledError(l.name, text, ctx)
	}
	return text, st, nil
}

// inTransaction returns the Invalid error of a hold inside
// locks.InTransaction, or nil. Only package locks can read its mark, so
// the Store asks it: a hold of a private store's lock under ctx fails so
// at once (and otherwise takes a key nobody else holds, or finds it taken
// by a concurrent ask: either way not in a transaction). Cost: an
// in-process hold, well under a microsecond.
func (s *Store) inTransaction(ctx context.Context, lock, key string) error {
	err := s.probe.Hold(ctx, "ask", func(context.Context, *locks.Lease) error { return nil }, locks.Wait(0))
	var le *locks.Error
	if errors.As(err, &le) && le.Kind == locks.Invalid && le.Reason == "held inside a transaction" {
		return &locks.Error{Kind: locks.Invalid, Lock: lock, Key: key, Reason: le.Reason}
	}
	return nil
}
