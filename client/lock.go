package client

import (
	"context"
	"errors"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/holdline/locks"
	"github.com/holdline/locks/internal/remote"
	pb "github.com/holdline/locks/proto/locksv1"
)

// Lock is a named keyspace of the server's store, held through a
// client's session: a locks.Locker. Two handles of one name, of one
// client or of two, share their keys, with each other and with the
// server's own holders. Safe for concurrent use.
type Lock struct {
	c    *Client
	spec remote.Lock
}

var _ locks.Locker = (*Lock)(nil)

// OpenLock returns a handle on the lock called name in the server's store,
// with the options of locks.OpenLock: locks.TTL (how long its leases live
// without the session being renewed), and the default locks.MaxHold and
// locks.Wait of its holds. A ttl shorter than those of the client's other
// locks, and than locks.DefaultTTL, makes the client renew its session
// more often (a third of the shortest ttl). It fails Invalid for a bad
// name or option, with the messages of locks.OpenLock, and Closed once the
// client is closed. It makes no call to the server.
func (c *Client) OpenLock(name string, opts ...locks.Option) (*Lock, error) {
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		return nil, errClosed(name, "")
	}
	// The server's keys are every holder's of the name: its holds mark
	// their contexts by the name itself.
	spec, err := remote.Open(name, name, opts)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if ttl := spec.Settings().TTL; ttl < c.minTTL {
		c.minTTL = ttl
		select {
		case c.kick <- struct{}{}:
		default:
		}
	}
	c.mu.Unlock()
	return &Lock{c: c, spec: spec}, nil
}

// Name returns the lock's name.
func (l *Lock) Name() string { return l.spec.Name() }

// Hold waits in line for key on the server, runs fn holding it, and lets
// it go when fn returns or panics (the panic goes on after the key is let
// go), as locks.Lock.Hold does, with the same keys, options, lines,
// fences and errors. It returns what fn returned; nil only if fn ran and
// returned nil.
//
// fn's context derives from ctx and ends when fn returns, when ctx ends,
// and when the lease is lost: at once when the server pushes the loss
// (its maxHold, its store closing); at its maxHold on the client's own
// clock, when no word came first (a partition, an answer held up): from
// when the Acquire was sent plus the wait the server reports, so no
// later than the server's revocation, and earlier by the request's time
// in transit; or when the client could not renew its session in time,
// before the server's ttl could give the key to another holder (see the
// package's documentation). context.Cause of it is then the Lost
// *locks.Error, and Hold fails Lost once fn returns, wrapping fn's error.
//
// Hold fails Invalid at once, sending nothing, for a bad key or option,
// a nil ctx or fn, inside locks.InTransaction, and inside a hold of the
// same lock name and key, a client's or a *locks.Lock's (ctx descending
// from that hold's function context; locks.Detach makes one that does
// not): the server's keys are named as package locks names its own. It
// fails Canceled when ctx ends first, leaving the line; Closed when the
// client is closed, when its session expired while it waited ("the
// session expired"), or when the server's store is closed. A call refused without a
// *locks.Error, or failed in the transport, returns an error wrapping its
// gRPC status.
//
// Cost: two calls to the server (Acquire and Release), each a round
// trip, and a few allocations. Safe for concurrent use.
func (l *Lock) Hold(ctx context.Context, key any, fn locks.HoldFunc, opts ...locks.Option) error {
	text, st, err := l.spec.CheckHold(ctx, key, fn, opts)
	if err != nil {
		return err
	}
	e, err := l.c.acquire(ctx, l.spec.Name(), text, st)
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
	text, st, err := l.spec.CheckTry(ctx, key, fn, opts)
	if err != nil {
		return false, err
	}
	e, err := l.c.acquire(ctx, l.spec.Name(), text, st)
	if errors.Is(err, locks.ErrInUse) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return true, l.c.run(e, fn)
}

// entry is one Acquire of the client's session, by its id: waiting, then
// held until released.
type entry struct {
	id   uint64
	gen  uint64 // the session's generation
	lock string
	key  string
	ttl  time.Duration
	sent time.Time     // when the Acquire was sent: its ttl counts from later
	max  time.Duration // its maxHold; 0: none

	// Guarded by the client's mutex.
	held      bool
	hold      remote.Hold             // its loss, and fn's context once held
	cancelRPC context.CancelCauseFunc // the Acquire call's, while waiting
	timer     *time.Timer
	done      bool // out of the client's entries

	// Set once held, read by the hold's goroutine.
	lease *locks.Lease
	// maxDue is when the client gives the lease up at its maxHold, if the
	// server's word of the revocation has not come first, on the client's
	// own clock: no later than the server's revocation.
	maxDue time.Time
}

// acquire waits in line on the server for key text of lock, and returns
// the held entry with its function's context, or the error of the hold.
func (c *Client) acquire(ctx context.Context, lock, text string, st locks.Settings) (*entry, error) {
	// The client ends the wait (cancelRPC) under its mutex, on its own
	// goroutines: a context that follows ctx, whose cancel calls nothing
	// of ctx's.
	rctx, cancel, stop := remote.Follow(ctx)
	defer func() {
		stop()
		cancel(nil)
	}()
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, errClosed(lock, text)
	}
	c.nextID++
	e := &entry{id: c.nextID, gen: c.sess.gen, lock: lock, key: text, ttl: st.TTL, max: st.MaxHold, sent: time.Now(), cancelRPC: cancel}
	ref := c.sess
	c.entries[e.id] = e
	e.timer = time.AfterFunc(c.dueLocked(e).Sub(e.sent), func() { c.fire(e) })
	c.mu.Unlock()
	if ref.id == nil { // between sessions: the server ended the last one
		c.forget(e)
		return nil, &locks.Error{Kind: locks.Closed, Lock: lock, Key: text, Reason: remote.Expired}
	}

	resp, err := c.rpc.Acquire(c.outgoing(rctx), &pb.AcquireRequest{
		SessionId: ref.id, Secret: ref.secret, AcquireId: e.id,
		Lock: []byte(lock), Key: []byte(text),
		TtlNs: int64(st.TTL), WaitNs: int64(st.Wait), MaxHoldNs: int64(st.MaxHold),
	})
	cause := context.Cause(rctx) // the client's own reason to stop waiting, if any
	if err != nil {
		if d, ok := ctx.Deadline(); ok && status.Code(err) == codes.DeadlineExceeded && time.Until(d) < deadlineSlack {
			// The server saw the caller's deadline pass (gRPC sends it
			// along) and its answer came before ctx's own timer fired:
			// the caller's context error, not the transport's.
			<-ctx.Done()
		}
		c.forget(e)
		if !definitive(err) {
			c.mu.Lock()
			c.releaseInBackgroundLocked(e.id, e.gen, e.ttl) // it may have been granted unseen
			c.mu.Unlock()
		}
		if err := waitEnded(ctx, cause, lock, text); err != nil {
			return nil, err
		}
		if le := pb.ErrorOf(err); le != nil {
			return nil, le
		}
		return nil, &rpcError{lock: lock, key: text, err: err}
	}

	ended := ctx.Err() != nil // asked here, not under the mutex: the caller's code
	c.mu.Lock()
	if ended || cause != nil || c.closed || e.done || e.gen != c.sess.gen {
		// Granted as the caller's ctx ended, or as the session ended:
		// the key goes on, and fn never runs.
		c.mu.Unlock()
		c.forget(e)
		c.mu.Lock()
		c.releaseInBackgroundLocked(e.id, e.gen, e.ttl)
		c.mu.Unlock()
		if err := waitEnded(ctx, cause, lock, text); err != nil {
			return nil, err
		}
		return nil, &locks.Error{Kind: locks.Closed, Lock: lock, Key: text, Reason: remote.Expired}
	}
	e.lease = &locks.Lease{Lock: lock, Key: text, Fence: resp.GetFence(), Granted: time.Unix(0, resp.GetGrantedUnixNs())}
	if d := resp.GetDeadlineUnixNs(); d != 0 {
		e.lease.Deadline = time.Unix(0, d)
	}
	if e.max > 0 {
		if w := resp.WaitedNs; w != nil {
			// The grant came no earlier than the Acquire was sent plus
			// its wait on the server: a maxHold counted from there ends
			// no later than the server's revocation, however late this
			// answer came (earlier by the request's time in transit).
			e.maxDue = e.sent.Add(time.Duration(*w)).Add(e.max)
		} else { // a server that does not say
			e.maxDue = time.Now().Add(e.max)
		}
		if !time.Now().Before(e.maxDue) { // revoked on the server already
			e.hold.Lose(&locks.Error{Kind: locks.Lost, Lock: lock, Key: text, Reason: remote.LostMaxHold})
		}
	}
	e.hold.Start(ctx, lock, text) // ended at once by a loss pushed before the answer came, or found above
	e.held, e.cancelRPC = true, nil
	c.rearmLocked(e)
	c.mu.Unlock()
	return e, nil
}

// deadlineSlack is how far from the caller's deadline a server's
// DeadlineExceeded is taken as that deadline's, ahead of ctx's own timer.
const deadlineSlack = 10 * time.Millisecond

// waitEnded returns the error of a wait for key text of lock that ended
// as the caller's ctx ended (Canceled), or as the client ended it itself
// with cause (its session expired, the client closed); nil otherwise.
func waitEnded(ctx context.Context, cause error, lock, text string) error {
	if ctx.Err() != nil {
		return locks.ContextError(lock, text, ctx)
	}
	var own *locks.Error
	if errors.As(cause, &own) {
		return own
	}
	return nil
}

// run calls fn holding e's key, and lets the key go however fn ends.
func (c *Client) run(e *entry, fn locks.HoldFunc) error {
	return e.hold.Run(fn, e.lease, func() *locks.Error { return c.release(e) })
}

// release lets e's key go once fn has returned, and returns the loss of
// its lease if it was lost (pushed, found lost by the server at the
// release, or given up by the client), for Hold to wrap fn's error in. A
// release that fails in the transport is retried in the background (see
// retryReleasesLocked).
func (c *Client) release(e *entry) *locks.Error {
	c.mu.Lock()
	c.forgetLocked(e)
	lost := e.hold.Lost()
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
	return lost
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
// lease, a margin before that, or its maxHold if that comes first.
func (c *Client) dueLocked(e *entry) time.Time {
	from := c.renewed
	if e.sent.After(from) {
		from = e.sent
	}
	if e.held {
		due := from.Add(e.ttl - margin(e.ttl))
		if !e.maxDue.IsZero() && e.maxDue.Before(due) {
			return e.maxDue
		}
		return due
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
		reason := remote.LostTTL
		if !e.maxDue.IsZero() && !time.Now().Before(e.maxDue) {
			reason = remote.LostMaxHold
		}
		e.hold.Lose(&locks.Error{Kind: locks.Lost, Lock: e.lock, Key: e.key, Reason: reason})
	} else if e.cancelRPC != nil {
		e.cancelRPC(&locks.Error{Kind: locks.Closed, Lock: e.lock, Key: e.key, Reason: remote.Expired})
	}
}
