package etcdlocks

import (
	"context"

	"github.com/holdline/locks"
	"github.com/holdline/locks/internal/remote"
)

// Lock is a named keyspace of a Store's prefix: a locks.Locker. Two
// handles of one name, of one Store or of two on the same prefix (in
// this process or another), share their keys. Safe for concurrent use.
type Lock struct {
	s    *Store
	spec remote.Lock
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
	spec, err := remote.Open(name, s.mark(name), opts) // checked first, as locks.OpenLock does
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return nil, errStoreClosed(name, "")
	}
	return &Lock{s: s, spec: spec}, nil
}

// mark returns the name the holds of the lock called name mark their
// contexts by (locks.MarkHold): the prefix with the name, since a key is
// the same key only on the same prefix. Two Stores on one prefix, which
// share their keys, see each other's holds as nested; two prefixes, which
// share nothing, do not, nor do the holds of package locks' own locks or
// a locksd server's, whose names hold no space.
func (s *Store) mark(name string) string { return s.prefix + " " + name }

// Name returns the lock's name.
func (l *Lock) Name() string { return l.spec.Name() }

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
// key and its fence; Wait(0) does not stand in line. A hold that waits
// stands in line within its Wait, or locks.DefaultWait for a shorter one:
// when etcd has not granted the Store's lease or let it join by then,
// Hold fails with an error wrapping etcd's (context.DeadlineExceeded),
// where it would otherwise wait for a call's timeout, the lock's ttl. A
// line of
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
// function context; locks.Detach makes one that does not); Closed when
// the Store is closed, or when its etcd lease lapsed while the hold
// waited ("the session expired"). A call to etcd that fails as the hold
// joins the line, grants the Store's lease or revokes a stuck holder
// returns an error naming the lock and the key that wraps etcd's error
// (one that fails while the hold waits is made again until the wait
// ends; a release that fails, again in the background, and Hold returns
// fn's result); every other error but fn's own is a *locks.Error.
//
// Cost: on a free key two calls to etcd, a transaction that joins the line
// and finds it empty and one that lets the key go, and a watch of the key
// while fn runs (so that a revocation or a deletion by another hand ends
// fn's context); a wait adds a watch of the key just ahead in line (only
// that one: a release wakes one waiter), a transaction each time the key
// ahead is deleted, and one that records the grant. etcd's cost of each
// transaction grows with the number of keys in the key's line. The first
// hold of a ttl grants the Store's lease: one call more. Safe for
// concurrent use.
func (l *Lock) Hold(ctx context.Context, key any, fn locks.HoldFunc, opts ...locks.Option) error {
	text, st, err := l.spec.CheckHold(ctx, key, fn, opts)
	if err != nil {
		return err
	}
	how := standInLine
	if st.Wait == 0 {
		how = noWait
	}
	h, err := l.s.acquire(ctx, l.spec.Name(), text, st, how)
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
// is held, and one more for each holder past its maxHold it revokes.
// Safe for concurrent use.
func (l *Lock) TryHold(ctx context.Context, key any, fn locks.HoldFunc, opts ...locks.Option) (acquired bool, err error) {
	text, st, err := l.spec.CheckTry(ctx, key, fn, opts)
	if err != nil {
		return false, err
	}
	h, err := l.s.acquire(ctx, l.spec.Name(), text, st, try)
	if err != nil || h == nil {
		return false, err
	}
	return true, l.s.run(h, fn)
}
