package locks

import (
	"context"
	"errors"
	"strconv"
	"time"
)

// Kind says what went wrong, in the terms callers branch on. Each kind but
// Canceled has a sentinel error (ErrInvalid, ...) for errors.Is.
type Kind uint8

const (
	// Invalid: a bad lock name, key or option, or a Hold where it may not be
	// called (inside a transaction, inside a hold of the same key, or where
	// its wait would close a cycle of holds waiting on each other).
	// Waiting cannot help, so it is reported at once.
	Invalid Kind = iota + 1
	// InUse: the hold's wait passed with the key still held.
	InUse
	// Lost: the lease was revoked at its maxHold, its ttl ran out, or its
	// store closed, before the function returned.
	Lost
	// Limit: the key's line of waiters was full (MaxWaiters).
	Limit
	// Closed: the store was closed.
	Closed
	// Canceled: the caller's context ended before the key was held; the
	// error wraps the context's error, so errors.Is(err, context.Canceled)
	// (or context.DeadlineExceeded) reports it.
	Canceled
)

// String returns the kind's name: "invalid", "in use", "lost", "limit",
// "closed", "canceled". It ends the message of an *Error of kind
// Invalid, InUse, Limit or Closed (see Error.Error).
func (k Kind) String() string {
	switch k {
	case Invalid:
		return "invalid"
	case InUse:
		return "in use"
	case Lost:
		return "lost"
	case Limit:
		return "limit"
	case Closed:
		return "closed"
	case Canceled:
		return "canceled"
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// Sentinels for errors.Is: every *Error of a kind matches its kind's
// sentinel. A Canceled error matches the context's error instead.
var (
	ErrInvalid = errors.New("locks: invalid")
	ErrInUse   = errors.New("locks: in use")
	ErrLost    = errors.New("locks: lost")
	ErrLimit   = errors.New("locks: limit")
	ErrClosed  = errors.New("locks: closed")
)

// sentinel returns the sentinel of k, or nil.
func (k Kind) sentinel() error {
	switch k {
	case Invalid:
		return ErrInvalid
	case InUse:
		return ErrInUse
	case Lost:
		return ErrLost
	case Limit:
		return ErrLimit
	case Closed:
		return ErrClosed
	}
	return nil
}

// Error is the error of every failed call of this package. Its message
// names the lock, the key where there is one, and what happened:
//
//	lock invoices: key "9": held past the hold's wait: in use
//	lock invoices: key "m": the lease was lost: it was revoked at its maxHold
//
// Use errors.Is with a sentinel (ErrInUse, ...) to branch on the kind, and
// errors.As to read the lock and the key. An Error may wrap a Cause: the
// context's error (and its context.Cause) for Canceled, the function's own
// error for Lost; either is part of the message too.
type Error struct {
	// Kind says what went wrong.
	Kind Kind
	// Lock is the lock's name.
	Lock string
	// Key is the key's text, "" where no key is involved.
	Key string
	// HeldFor and HolderFence describe the holder an InUse hold waited
	// for, as the wait passed: how long it had held the key, and its
	// lease's fence. Zero for other kinds, and for a hold that did not
	// wait.
	HeldFor     time.Duration
	HolderFence uint64
	// Reason says what happened, in words: "held past the hold's wait",
	// "the lease was lost: its ttl ran out". The message is made of the
	// fields above and the two below, so that a client of a store in
	// another process rebuilds the same *Error, message and all.
	Reason string
	// Cause is the wrapped cause, part of the message too: the context's
	// error (and its context.Cause) for Canceled, the function's own
	// error for Lost; nil otherwise.
	Cause error
}

// Error returns the message: lock NAME: key "KEY": what happened,
// followed by the kind (": in use"), or, for a caller's context that
// ended, by the context's error (": context canceled"). For a lost lease,
// what happened names the kind and the reason ("the lease was lost: it was
// revoked at its maxHold"), followed by the function's error if it
// returned one ("; the function returned: ..."). The key is quoted as Go
// quotes strings; a bad lock name is quoted too.
func (e *Error) Error() string {
	b := make([]byte, 0, 64)
	if e.Lock != "" { // "" where no lock is involved: a session's own
		b = append(b, "lock "...)
		if validName(e.Lock) {
			b = append(b, e.Lock...)
		} else {
			b = strconv.AppendQuote(b, e.Lock)
		}
		b = append(b, ": "...)
	}
	if e.Key != "" {
		b = append(b, "key "...)
		b = strconv.AppendQuote(b, e.Key)
		b = append(b, ": "...)
	}
	b = append(b, e.Reason...)
	switch e.Kind {
	case Lost:
		// "the lease was lost: <reason>" already names the kind.
		if e.Cause != nil {
			b = append(b, "; the function returned: "...)
			b = append(b, e.Cause.Error()...)
		}
	case Canceled:
		if e.Cause != nil {
			b = append(b, ": "...)
			b = append(b, e.Cause.Error()...)
		}
	default:
		b = append(b, ": "...)
		b = append(b, e.Kind.String()...)
	}
	return string(b)
}

// Unwrap returns the wrapped cause, or nil.
func (e *Error) Unwrap() error { return e.Cause }

// Is reports whether target is the sentinel of e's kind.
func (e *Error) Is(target error) bool {
	s := e.Kind.sentinel()
	return s != nil && target == s
}

// loss is why a lease was lost.
type loss uint8

const (
	notLost     loss = iota
	lostMaxHold      // revoked at its maxHold
	lostTTL          // not renewed within its ttl (leases over a connection)
	lostClosed       // its store closed
)

// what returns what happened to a lease lost for r, in words: the whole
// of the message after the key, one constant per loss, so that revoking a
// lease builds no string.
func (r loss) what() string {
	switch r {
	case lostMaxHold:
		return "the lease was lost: it was revoked at its maxHold"
	case lostTTL:
		return "the lease was lost: its ttl ran out"
	case lostClosed:
		return "the lease was lost: its store closed"
	}
	return "the lease was not lost"
}

func newError(k Kind, lock, key, what string) *Error {
	return &Error{Kind: k, Lock: lock, Key: key, Reason: what}
}

// lostError is the error of a lease lost for reason; Hold wraps the
// function's own error into a copy of it.
func lostError(lock, key string, r loss) *Error {
	return newError(Lost, lock, key, r.what())
}

// canceledError is the error of a hold whose ctx ended before it held the
// key: it matches both ctx.Err() and context.Cause(ctx).
func canceledError(lock, key string, ctx context.Context) *Error {
	return &Error{Kind: Canceled, Lock: lock, Key: key, Reason: "the hold's context ended", Cause: endedError(ctx)}
}

// endedError returns the error of ctx, which has ended: its Err, or,
// where it was given a distinct cause, an error that errors.Is matches to
// both.
func endedError(ctx context.Context) error {
	err, cause := ctx.Err(), context.Cause(ctx)
	if cause == nil || cause == err {
		return err
	}
	return ctxEnded{err, cause}
}

// ctxEnded is a context's error with the distinct cause it was given
// (context.WithCancelCause, WithTimeoutCause): errors.Is matches both.
type ctxEnded struct{ err, cause error }

func (e ctxEnded) Error() string   { return e.err.Error() + ": " + e.cause.Error() }
func (e ctxEnded) Unwrap() []error { return []error{e.err, e.cause} }
