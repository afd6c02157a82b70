package etcdlocks

import (
	"context"
	"sync/atomic"

	"github.com/holdline/locks"
)

// markKey is the context key of a hold's mark.
type markKey struct{}

// mark marks the context of a function holding a key, while it runs: a
// hold of the same key under it would stand in line behind itself and
// wait until its Wait for nothing. A key is named by its directory in
// etcd (the prefix, the lock and the key), so that two Stores on one
// prefix, which share their keys, see each other's holds as nested, and
// two prefixes, which share nothing, do not.
type mark struct {
	dir       string
	lock, key string
	parent    context.Context // the hold's caller's
	ended     atomic.Bool     // set when the function has returned
}

// nestedIn reports whether ctx descends from the context of a running
// hold of the key whose directory is dir. Cost: one ctx.Value per
// enclosing hold.
func nestedIn(ctx context.Context, dir string) bool {
	for v := ctx.Value(markKey{}); v != nil; {
		m := v.(*mark)
		if m.dir == dir && !m.ended.Load() {
			return true
		}
		v = m.parent.Value(markKey{})
	}
	return false
}

// holdContext is the context a held function runs under: the caller's
// values, deadline and cancellation, ended when the lease is lost or the
// function returns, and marked as the hold's. Only the methods of
// context.Context and String are exported, so that no type assertion on
// it reaches anything that could end or rebind the lease.
type holdContext struct {
	context.Context
	mark *mark
}

// Value answers the hold's mark for the mark key, and otherwise what the
// caller's context answers.
func (c *holdContext) Value(key any) any {
	if key == (markKey{}) {
		return c.mark
	}
	return c.Context.Value(key)
}

// String names the hold, for debugging.
func (c *holdContext) String() string {
	return "etcdlocks: the context of a hold of lock " + c.mark.lock + ", key " + c.mark.key
}

// Detach returns a context with ctx's values and none of its
// cancellation, deadline, hold marks (of this package's holds and of
// package locks') or transaction mark, for work that a held function
// starts and that outlives it: given Detach(ctx), a hold of the same key
// waits in line like any other holder, where one given the function's
// context fails Invalid as nested. locks.Detach does not hide the marks
// of this package's holds. It allocates two contexts. Safe for
// concurrent use.
func Detach(ctx context.Context) context.Context {
	return detached{locks.Detach(ctx)}
}

// detached hides this package's marks from the contexts below it.
type detached struct{ context.Context }

// Value answers ctx's values but this package's mark.
func (d detached) Value(key any) any {
	if key == (markKey{}) {
		return nil
	}
	return d.Context.Value(key)
}

// canceledError is the error of a hold whose ctx ended before it held the
// key, as package locks makes it: it matches both ctx.Err() and
// context.Cause(ctx).
func canceledError(lock, key string, ctx context.Context) *locks.Error {
	var cause error = ctx.Err()
	if c := context.Cause(ctx); c != nil && c != cause {
		cause = ctxEnded{cause, c}
	}
	return &locks.Error{Kind: locks.Canceled, Lock: lock, Key: key, Reason: "the hold's context ended", Cause: cause}
}

// ctxEnded is a context's error with the distinct cause it was given
// (context.WithCancelCause, WithTimeoutCause): errors.Is matches both.
type ctxEnded struct{ err, cause error }

func (e ctxEnded) Error() string   { return e.err.Error() + ": " + e.cause.Error() }
func (e ctxEnded) Unwrap() []error { return []error{e.err, e.cause} }
