package locks_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/holdline/locks"
)

// TestNilContextAndZeroStore: a nil context is Invalid, never a panic; a
// Store not made by NewStore is refused with a message that says so.
func TestNilContextAndZeroStore(t *testing.T) {
	_, l := newLock(t)
	err := l.Hold(nil, 9, mustNotRun(t))
	require.EqualError(t, err, `lock invoices: key "9": the context is nil: invalid`)
	ok, err := l.TryHold(nil, 9, mustNotRun(t))
	require.False(t, ok)
	require.ErrorIs(t, err, locks.ErrInvalid)
	requireFree(t, l, 9)

	var zero locks.Store
	_, err = locks.OpenLock(&zero, "invoices")
	require.EqualError(t, err, "lock invoices: the store was not made by NewStore: invalid")
	require.NoError(t, zero.Close())
	require.Equal(t, locks.Stats{}, zero.Stats())
}

// TestCanceledMatchesTheCause: the error of a hold whose context ended,
// before the call or in line, matches both ctx.Err() and its cause.
func TestCanceledMatchesTheCause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, l := newLock(t)
		cause := errors.New("the customer hung up")

		ctx, cancel := context.WithCancelCause(context.Background())
		cancel(cause)
		err := l.Hold(ctx, 9, mustNotRun(t))
		require.ErrorIs(t, err, context.Canceled)
		require.ErrorIs(t, err, cause)
		require.EqualError(t, err, `lock invoices: key "9": the hold's context ended: context canceled: the customer hung up`)

		h := holding(t, l, 9)
		ctx, stop := context.WithTimeoutCause(context.Background(), time.Second, cause)
		defer stop()
		err = l.Hold(ctx, 9, mustNotRun(t), locks.Wait(time.Hour))
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.ErrorIs(t, err, cause)
		requireKind(t, err, context.DeadlineExceeded, locks.Canceled, name, "9")
		require.NoError(t, h.finish())
	})
}

// doneBlocksCtx is a context whose first Done call blocks until let go:
// the waiter is parked there while the test grants it the key and then
// ends the context.
type doneBlocksCtx struct {
	context.Context
	entered, proceed chan struct{}
}

func (c *doneBlocksCtx) Done() <-chan struct{} {
	select {
	case <-c.entered:
	default:
		close(c.entered)
		<-c.proceed
	}
	return c.Context.Done()
}

// TestEndedInLineNeverRuns: a waiter whose context ended while it stood in
// line, just as the key was handed to it, passes the key on and fails with
// its context's error; its function does not run, and the store counts it
// as a cancelled wait, not a grant.
func TestEndedInLineNeverRuns(t *testing.T) {
	for range 20 { // the waiter's select sees both at once: either way
		synctest.Test(t, func(t *testing.T) {
			st, l := newLock(t)
			h := holding(t, l, 9)
			inner, cancel := context.WithCancel(context.Background())
			ctx := &doneBlocksCtx{Context: inner, entered: make(chan struct{}), proceed: make(chan struct{})}
			errc := make(chan error, 1)
			go func() { errc <- l.Hold(ctx, 9, mustNotRun(t), locks.Wait(time.Hour)) }()
			<-ctx.entered
			next := queued(t, context.Background(), l, 9, locks.Wait(time.Hour))
			require.NoError(t, h.finish()) // the key is handed to the parked waiter
			cancel()                       // whose context then ends
			close(ctx.proceed)
			err := <-errc
			require.ErrorIs(t, err, context.Canceled)
			requireKind(t, err, context.Canceled, locks.Canceled, name, "9")
			<-next.granted // the key went on
			require.NoError(t, next.finish())

			s := st.Stats()
			require.Equal(t, uint64(2), s.Grants, "grants: functions started")
			require.Equal(t, uint64(1), s.Canceled, "the waiter that never ran")
			require.Equal(t, uint64(2), s.Waits)
		})
	}
}

// TestInUseSaysWhoHeld: a hold whose wait passed says how long the holder
// had held the key, and the holder's fence.
func TestInUseSaysWhoHeld(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, l := newLock(t)
		h := holding(t, l, 9)
		time.Sleep(time.Minute)
		err := l.Hold(context.Background(), 9, mustNotRun(t), locks.Wait(3*time.Second))
		require.EqualError(t, err, `lock invoices: key "9": held past the hold's wait: in use`)
		e := asError(t, err)
		require.Equal(t, time.Minute+3*time.Second, e.HeldFor)
		require.Equal(t, h.lease.Fence, e.HolderFence)

		// A holder handed the key from the line.
		w := queued(t, context.Background(), l, 9, locks.Wait(time.Hour))
		require.NoError(t, h.finish())
		<-w.granted
		time.Sleep(time.Second)
		err = l.Hold(context.Background(), 9, mustNotRun(t), locks.Wait(2*time.Second))
		e = asError(t, err)
		require.Equal(t, 3*time.Second, e.HeldFor)
		require.Equal(t, w.lease.Fence, e.HolderFence)
		require.NoError(t, w.finish())

		err = l.Hold(context.Background(), 9, nop)
		require.NoError(t, err)
		h = holding(t, l, 9)
		err = l.Hold(context.Background(), 9, mustNotRun(t), locks.Wait(0))
		e = asError(t, err)
		require.Zero(t, e.HeldFor, "a hold that did not wait")
		require.Zero(t, e.HolderFence)
		require.NoError(t, h.finish())
	})
}

// TestTryHoldOptions: TryHold takes a per-hold MaxHold; a Wait is Invalid.
func TestTryHoldOptions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, l := newLock(t)
		ok, err := l.TryHold(context.Background(), 9, func(ctx context.Context, ls *locks.Lease) error {
			require.Equal(t, time.Second, ls.Deadline.Sub(ls.Granted))
			<-ctx.Done()
			return nil
		}, locks.MaxHold(time.Second))
		require.True(t, ok)
		require.ErrorIs(t, err, locks.ErrLost)

		ok, err = l.TryHold(context.Background(), 9, mustNotRun(t), locks.Wait(time.Second))
		require.False(t, ok)
		require.EqualError(t, err, `lock invoices: key "9": TryHold never waits: Wait is not one of its options: invalid`)
	})
}

// TestHoldValueOnALocker: HoldValue and TryHoldValue take any Locker.
func TestHoldValueOnALocker(t *testing.T) {
	_, l := newLock(t)
	var lk locks.Locker = l
	v, err := locks.HoldValue(context.Background(), lk, 9, func(_ context.Context, ls *locks.Lease) (string, error) {
		return ls.Key, nil
	})
	require.NoError(t, err)
	require.Equal(t, "9", v)
	v, ok, err := locks.TryHoldValue(context.Background(), lk, 9, func(context.Context, *locks.Lease) (string, error) {
		return "tried", nil
	}, locks.MaxHold(time.Hour))
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "tried", v)
	_, err = locks.HoldValue(context.Background(), nil, 9, func(context.Context, *locks.Lease) (int, error) { return 1, nil })
	require.ErrorIs(t, err, locks.ErrInvalid)
	var none *locks.Lock // a nil *Lock in a Locker is a nil l too
	_, err = locks.HoldValue(context.Background(), none, 9, func(context.Context, *locks.Lease) (int, error) { return 1, nil })
	require.EqualError(t, err, "the Locker is nil: invalid")
	_, ok, err = locks.TryHoldValue(context.Background(), none, 9, func(context.Context, *locks.Lease) (int, error) { return 1, nil })
	require.False(t, ok)
	require.EqualError(t, err, "the Locker is nil: invalid")
	var other *otherLocker // and so is a nil pointer of another Locker
	_, err = locks.HoldValue(context.Background(), other, 9, func(context.Context, *locks.Lease) (int, error) { return 1, nil })
	require.EqualError(t, err, "the Locker is nil: invalid")
}

// otherLocker is a Locker of another package's making.
type otherLocker struct{ locks.Locker }

// TestDetach: work a held function starts with Detach(ctx) keeps ctx's
// values, outlives the function, and waits in line for the same key like
// any other holder; given fn's own context it would be refused as nested.
func TestDetach(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, l := newLock(t)
		type k struct{}
		base := locks.InTransaction(context.WithValue(context.Background(), k{}, "v"))
		var later error
		done := make(chan struct{})
		// Inside a transaction Hold is refused; a hold's own TryHold is not.
		ok, err := l.TryHold(base, 9, func(ctx context.Context, _ *locks.Lease) error {
			require.ErrorIs(t, l.Hold(ctx, 9, mustNotRun(t)), locks.ErrInvalid, "nested")
			d := locks.Detach(ctx)
			require.Equal(t, "v", d.Value(k{}))
			go func() {
				defer close(done)
				later = l.Hold(d, 9, func(ctx context.Context, _ *locks.Lease) error {
					require.Equal(t, "v", ctx.Value(k{}))
					return nil
				})
			}()
			synctest.Wait()
			return nil
		})
		require.True(t, ok)
		require.NoError(t, err)
		<-done
		require.NoError(t, later, "the detached work waited for the key and held it")
	})
}

// TestWaitForever: Wait(Forever) waits as long as it takes.
func TestWaitForever(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, l := newLock(t)
		h := holding(t, l, 9)
		w := queued(t, context.Background(), l, 9, locks.Wait(locks.Forever))
		time.Sleep(100 * 365 * 24 * time.Hour)
		synctest.Wait()
		require.False(t, isClosed(w.granted), "a century later, still waiting")
		require.NoError(t, h.finish())
		<-w.granted
		require.NoError(t, w.finish())
	})
}
