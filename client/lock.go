package client

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/holdline/locks"
	pb "github.com/holdline/locks/proto/locksv1"
)

// Lock is a named keyspace of the server's store, held through a
// client's session: a locks.Locker. Two handles of one name, of one
// client or of two, share their keys, with each other and with the
// server's own holders. Safe for concurrent use.
type Lock struct {
	c    *Client
	name string
	st   locks.Settings
}

var _ locks.Locker = (*Lock)(nil)

// OpenLock returns a handle on the lock called name in the server's
// store, with the options of locks.OpenLock: locks.TTL (how long its
// leases live without the session being renewed), and the default
// locks.MaxHold and locks.Wait of its holds. A ttl shorter than those of
// the client's other locks makes the client renew its session more
// often (a third of the shortest ttl). It fails Invalid for a bad name or
// option, with the messages of locks.OpenLock, and Closed once the client
// is closed. It makes no call to the server.
func (c *Client) OpenLock(name string, opts ...locks.Option) (*Lock, error) {
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		return nil, errClosed(name, "")
	}
	// Checked by package locks itself, so that the errors are its own.
	if _, err := locks.OpenLock(c.probeStore, name, opts...); err != nil {
		return nil, err
	}
	st, err := locks.DefaultSettings().Apply(false, opts...)
	if err != nil {
		return nil, &locks.Error{Kind: locks.Invalid, Lock: name, Reason: err.Error()}
	}
	c.mu.Lock()
	if st.TTL < c.minTTL {
		c.minTTL = st.TTL
		select {
		case c.kick <- struct{}{}:
		default:
		}
	}
	c.mu.Unlock()
	return &Lock{c: c, name: name, st: st}, nil
}

// Name returns the lock's name.
func (l *Lock) Name() string { return l.name }

// Hold waits in line for key on the server, runs fn holding it, and lets
// it go when fn returns or panics (the panic goes on after the key is let
// go), as locks.Lock.Hold does, with the same keys, options, lines,
// fences and errors. It returns what fn returned; nil only if fn ran and
// returned nil.
//
// fn's context derives from ctx and ends when fn returns, when ctx ends,
// and when the lease is lost: at once when the server pushes the loss
// (its maxHold, its store closing), or when the client could not renew
// its session in time, before the server's ttl could give the key to
// another holder (see the package's documentation); context.Cause of it
// is then the Lost *locks.Error, and Hold fails Lost once fn returns,
// wrapping fn's error.
//
// Hold fails Invalid at once, sending nothing, for a bad key or option,
// a nil ctx or fn, inside locks.InTransaction, and inside a hold of the
// same lock name and key (ctx descending from that hold's function
// context; see Detach). It fails Canceled when ctx ends first, leaving the
// line; Closed when the client is closed, when its session expired while
// it waited ("the session expired"), or when the server's store is
// closed. A call refused without a *locks.Error, or failed in the
// transport, returns an error wrapping its gRPC status.
//
// Cost: two calls to the server (Acquire and Release), each a round
// trip, and a few allocations. Safe for concurrent use.
func (l *Lock) Hold(ctx context.Context, key any, fn locks.HoldFunc, opts ...locks.Option) error {
	text, st, err := l.check(ctx, key, fn, opts)
	if err != nil {
		return err
	}
	if nestedIn(ctx, l.name, text) {
		return &locks.Error{Kind: locks.Invalid, Lock: l.name, Key: text, Reason: "held inside a hold of the same key"}
	}
	if err := l.c.inTransaction(ctx, l.name, text); err != nil {
		return err
	}
	e, err := l.c.acquire(ctx, l.name, text, st)
	if err != nil {
		return err
	}
	return l.c.run(e, fn)
}

// TryHold runs fn holding key if the key is free on the server and
// nobody is in line for it, and never waits, as locks.Lock.TryHold does:
// (true, fn's error) when it ran fn, (false, nil) when the key was held,
// also by its own caller. A Wait option is Invalid. It fails (false, err)
// as Hold does for a bad key, a closed client or an ended ctx. Cost: as
// Hold's when it runs fn, one round trip when the key is held. Safe for
// concurrent use.
func (l *Lock) TryHold(ctx context.Context, key any, fn locks.HoldFunc, opts ...locks.Option) (acquired bool, err error) {
	text, st, err := l.check(ctx, key, fn, opts)
	if err != nil {
		return false, err
	}
	if hasWait(opts) {
		return false, &locks.Error{Kind: locks.Invalid, Lock: l.name, Key: text, Reason: "TryHold never waits: Wait is not one of its options"}
	}
	st.Wait = 0
	e, err := l.c.acquire(ctx, l.name, text, st)
	if errors.Is(err, locks.ErrInUse) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return true, l.c.run(e, fn)
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
// the client asks it: a hold of a private store's lock, under ctx, fails
// so at once (and otherwise takes a key nobody else holds, or finds it
// taken by a concurrent ask: either way not in a transaction).
func (c *Client) inTransaction(ctx context.Context, lock, key string) error {
	err := c.probe.Hold(ctx, "ask", func(context.Context, *locks.Lease) error { return nil }, locks.Wait(0))
	var le *locks.Error
	if errors.As(err, &le) && le.Kind == locks.Invalid && le.Reason == "held inside a transaction" {
		return &locks.Error{Kind: locks.Invalid, Lock: lock, Key: key, Reason: le.Reason}
	}
	return nil
}

// entry is one Acquire of the client's session, by its id: waiting, then
// held until released.
type entry struct {
	id   uint64
	gen  uint64 // the session's generation
	lock string
	key  string
	ttl  time.Duration
	sent time.Time // when the Acquire was sent: its ttl counts from later

	// Guarded by the client's mutex.
	held      bool
	lost      *locks.Error
	cancelRPC context.CancelCauseFunc // the Acquire call's, while waiting
	cancelFn  context.CancelCauseFunc // fn's context's, once held
	timer     *time.Timer
	done      bool // out of the client's entries

	// Set once held, read by the hold's goroutine.
	ctx   *holdContext
	lease *locks.Lease
}

// acquire waits in line on the server for key text of lock, and returns
// the held entry with its function's context, or the error of the hold.
func (c *Client) acquire(ctx context.Context, lock, text string, st locks.Settings) (*entry, error) {
	rctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, errClosed(lock, text)
	}
	c.nextID++
	e := &entry{id: c.nextID, gen: c.sess.gen, lock: lock, key: text, ttl: st.TTL, sent: time.Now(), cancelRPC: cancel}
	ref := c.sess
	c.entries[e.id] = e
	e.timer = time.AfterFunc(c.dueLocked(e).Sub(e.sent), func() { c.fire(e) })
	c.mu.Unlock()
	if ref.id == nil { // between sessions: the server ended the last one
		c.forget(e)
		return nil, &locks.Error{Kind: locks.Closed, Lock: lock, Key: text, Reason: "the session expired"}
	}

	resp, err := c.rpc.Acquire(c.outgoing(rctx), &pb.AcquireRequest{
		SessionId: ref.id, Secret: ref.secret, AcquireId: e.id,
		Lock: lock, Key: []byte(text),
		TtlNs: int64(st.TTL), WaitNs: int64(st.Wait), MaxHoldNs: int64(st.MaxHold),
	})
	cause := context.Cause(rctx) // the client's own reason to stop waiting, if any
	if err != nil {
		c.forget(e)
		if !definitive(err) {
			c.mu.Lock()
			c.releaseInBackgroundLocked(e.id, e.gen, e.ttl) // it may have been granted unseen
			c.mu.Unlock()
		}
		if ctx.Err() != nil {
			return nil, canceledError(lock, text, ctx)
		}
		var own *locks.Error
		if errors.As(cause, &own) {
			return nil, own
		}
		if le := pb.ErrorOf(err); le != nil {
			return nil, le
		}
		return nil, &rpcError{lock: lock, key: text, err: err}
	}

	c.mu.Lock()
	if ctx.Err() != nil || cause != nil || c.closed || e.done || e.gen != c.sess.gen {
		// Granted as the caller's ctx ended, or as the session ended:
		// the key goes on, and fn never runs.
		c.mu.Unlock()
		c.forget(e)
		c.mu.Lock()
		c.releaseInBackgroundLocked(e.id, e.gen, e.ttl)
		c.mu.Unlock()
		if ctx.Err() != nil {
			return nil, canceledError(lock, text, ctx)
		}
		var own *locks.Error
		if errors.As(cause, &own) {
			return nil, own
		}
		return nil, &locks.Error{Kind: locks.Closed, Lock: lock, Key: text, Reason: "the session expired"}
	}
	e.lease = &locks.Lease{Lock: lock, Key: text, Fence: resp.GetFence(), Granted: time.Unix(0, resp.GetGrantedUnixNs())}
	if d := resp.GetDeadlineUnixNs(); d != 0 {
		e.lease.Deadline = time.Unix(0, d)
	}
	fctx, fcancel := context.WithCancelCause(ctx)
	e.ctx = &holdContext{Context: fctx, mark: &mark{lock: lock, key: text, parent: ctx}}
	e.held, e.cancelFn, e.cancelRPC = true, fcancel, nil
	if e.lost != nil { // pushed before the answer came
		fcancel(e.lost)
	}
	c.rearmLocked(e)
	c.mu.Unlock()
	return e, nil
}

// run calls fn holding e's key, and lets the key go however fn ends.
func (c *Client) run(e *entry, fn locks.HoldFunc) (err error) {
	defer func() { err = c.release(e, err) }()
	return fn(e.ctx, e.lease)
}

// release lets e's key go once fn has returned (fnErr), and returns what
// Hold returns: the Lost error wrapping fnErr if the lease was lost
// (pushed, found lost by the server at the release, or given up by the
// client), fnErr otherwise. A release that fails in the transport is
// retried in the background (see retryReleasesLocked).
func (c *Client) release(e *entry, fnErr error) error {
	e.ctx.mark.ended.Store(true)
	c.mu.Lock()
	e.cancelFn(nil)
	c.forgetLocked(e)
	lost := e.lost
	ref, closed := c.sess, c.closed
	c.mu.Unlock()
	if !closed && ref.gen == e.gen && ref.id != nil {
		ctx, cancel := context.WithTimeout(c.bg, releaseTimeout(e.ttl))
		resp, err := c.rpc.Release(c.outgoing(ctx), &pb.ReleaseRequest{SessionId: ref.id, Secret: ref.secret, AcquireId: e.id})
		cancel()
		switch {
		case err == nil:
			if w := resp.GetLost(); w != nil && lost == nil {
				lost = w.LocksError()
			}
		case !definitive(err):
			c.mu.Lock()
			if !c.closed && c.sess.gen == e.gen {
				c.releases[e.id] = e.gen
			}
			c.mu.Unlock()
		}
	}
	if lost != nil {
		le := *lost
		le.Cause = fnErr
		return &le
	}
	return fnErr
}

// forget takes e out of the client's entries and stops its timer.
func (c *Client) forget(e *entry) {
	c.mu.Lock()
	c.forgetLocked(e)
	c.mu.Unlock()
}

func (c *Client) forgetLocked(e *entry) {
	if e.done {
		return
	}
	e.done = true
	delete(c.entries, e.id)
	e.timer.Stop()
}

// dueLocked returns when the client gives e up unless the session is
// renewed first: for a wait, its lapse on the server, a ttl after the
// later of the call and the last renewal the server answered; for a
// lease, a margin before that.
func (c *Client) dueLocked(e *entry) time.Time {
	from := c.renewed
	if e.sent.After(from) {
		from = e.sent
	}
	if e.held {
		return from.Add(e.ttl - margin(e.ttl))
	}
	return from.Add(e.ttl)
}

// rearmLocked sets e's timer for its due time.
func (c *Client) rearmLocked(e *entry) {
	e.timer.Reset(time.Until(c.dueLocked(e)))
}

// fire gives e up if it is due, or waits again until it is: renewals
// move its due time later without touching its timer, so that a renewal
// costs nothing per entry.
func (c *Client) fire(e *entry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e.done {
		return
	}
	if left := time.Until(c.dueLocked(e)); left > 0 {
		e.timer.Reset(left)
		return
	}
	if e.held {
		c.loseLocked(e, &locks.Error{Kind: locks.Lost, Lock: e.lock, Key: e.key, Reason: "the lease was lost: its ttl ran out"})
	} else if e.cancelRPC != nil {
		e.cancelRPC(&locks.Error{Kind: locks.Closed, Lock: e.lock, Key: e.key, Reason: "the session expired"})
	}
}

// loseLocked records the first loss of e's lease and cancels its
// function's context with it, if it runs.
func (c *Client) loseLocked(e *entry, le *locks.Error) {
	if e.lost != nil {
		return
	}
	e.lost = le
	if e.cancelFn != nil {
		e.cancelFn(le)
	}
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

// ctxEnded is a context's error with the distinct cause it was given.
type ctxEnded struct{ err, cause error }

func (e ctxEnded) Error() string   { return e.err.Error() + ": " + e.cause.Error() }
func (e ctxEnded) Unwrap() []error { return []error{e.err, e.cause} }

// markKey is the context key of a client hold's mark.
type markKey struct{}

// mark marks the context of a function holding key of lock, while it
// runs: a hold of the same lock and key under it would wait for itself.
type mark struct {
	lock, key string
	parent    context.Context // the hold's caller's
	ended     atomic.Bool
}

// nestedIn reports whether ctx descends from the context of a running
// client hold of key in lock. Cost: one ctx.Value per enclosing mark.
func nestedIn(ctx context.Context, lock, key string) bool {
	for v := ctx.Value(markKey{}); v != nil; {
		m := v.(*mark)
		if m.lock == lock && m.key == key && !m.ended.Load() {
			return true
		}
		v = m.parent.Value(markKey{})
	}
	return false
}

// holdContext is the context a client's held function runs under: the
// caller's values, deadline and cancellation, ended when the lease is
// lost or the function returns, and marked as the hold's. Only the
// methods of context.Context and String are exported.
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
	return "client: the context of a hold of lock " + c.mark.lock + ", key " + c.mark.key
}

// Detach returns a context with ctx's values and none of its
// cancellation, deadline, hold marks (of this package's holds and of
// package locks') or transaction mark, for work that a held function
// starts and that outlives it: given Detach(ctx), a hold of the same key
// waits in line like any other holder. locks.Detach does not hide the
// marks of this package's holds. It allocates two contexts.
func Detach(ctx context.Context) context.Context {
	return detached{locks.Detach(ctx)}
}

type detached struct{ context.Context }

// Value answers ctx's values but this package's mark.
func (d detached) Value(key any) any {
	if key == (markKey{}) {
		return nil
	}
	return d.Context.Value(key)
}
