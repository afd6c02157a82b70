package locks

import (
	"context"
	"errors"
)

// The pieces a Locker of another package (a client of a locksd server, a
// lock on etcd) needs to behave as a *Lock does, down to the messages of
// its errors: checks of names, options and nesting, and marks on the
// contexts of its holds that this package's own checks see too.

// MarkHold returns a copy of ctx marked as running inside a hold of key
// (its text) in the lock named lock, made by a Locker of another package;
// ended reports whether that hold is over (it must be safe to call from
// any goroutine). A Hold, HoldAll or Acquire of this package, and
// CheckHold, then see the mark as they see their own holds: a hold of the
// same lock and key inside it is nested, and Detach hides it. TryHold,
// which never waits, looks at its own store alone, and answers (false,
// nil) only for a key held there. It allocates one context.
func MarkHold(ctx context.Context, lock, key string, ended func() bool) context.Context {
	return &foreignHold{Context: ctx, lock: lock, key: key, ended: ended}
}

// foreignHold is the mark MarkHold puts on a context.
type foreignHold struct {
	context.Context
	lock, key string
	ended     func() bool
}

// Value answers the mark for this package's key, and ctx's values otherwise.
func (f *foreignHold) Value(key any) any {
	if key == (markKey{}) {
		return f
	}
	return f.Context.Value(key)
}

// CheckHold returns the Invalid *Error that a Hold of key (its text) in
// the lock named lock, made with ctx, fails with at once: inside a
// transaction (InTransaction), or inside a hold of the same lock and key,
// this package's or another Locker's marked with MarkHold. It returns nil
// when neither. Cost: one ctx.Value per enclosing hold; no allocation
// unless it fails.
func CheckHold(ctx context.Context, lock, key string) error {
	switch enclosing(ctx, lock, key) {
	case inTransaction:
		return newError(Invalid, lock, key, "held inside a transaction")
	case nested:
		return newError(Invalid, lock, key, "held inside a hold of the same key")
	}
	return nil
}

// CheckName returns the Invalid *Error of a bad lock name (see OpenLock),
// or nil.
func CheckName(name string) error {
	if why := checkName(name); why != "" {
		return newError(Invalid, name, "", why)
	}
	return nil
}

// ContextError returns the Canceled *Error of a hold of key (its text) in
// lock whose ctx ended before it held the key: it matches ctx.Err() and
// context.Cause(ctx) with errors.Is, as a *Lock's does. ctx must have
// ended.
func ContextError(lock, key string, ctx context.Context) *Error {
	return canceledError(lock, key, ctx)
}

// ApplyTry is Apply for the options of a TryHold: a Wait is refused, since
// TryHold never waits, with the message a *Lock's TryHold gives.
func (s Settings) ApplyTry(opts ...Option) (Settings, error) {
	for _, o := range opts {
		if o.kind == optWait {
			return s, errors.New(tryWaitWhy)
		}
	}
	return s.Apply(true, opts...)
}

const tryWaitWhy = "TryHold never waits: Wait is not one of its options"
