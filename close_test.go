package locks_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/holdline/locks"
)

func closedLostMsg(key string) string {
	return fmt.Sprintf(`lock invoices: key %q: the lease was lost: its store closed`, key)
}

// TestCloseFailsWaitersAndLosesLeases: Close fails every waiter Closed and
// loses every lease: fn's context is cancelled with the Lost *Error,
// reason "its store closed", and its Hold fails Lost once fn returns,
// wrapping fn's error. Nothing armed before fires afterwards.
func TestCloseFailsWaitersAndLosesLeases(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, l := newLock(t)
		fnErr := errors.New("interrupted")
		plain := startHoldRet(t, context.Background(), l, 9, fnErr)
		armed := startHold(t, context.Background(), l, 10, locks.MaxHold(time.Hour))
		<-plain.granted
		<-armed.granted
		var waiters []*hold
		keys := []string{"9", "9", "10", "9"}
		for _, key := range keys {
			waiters = append(waiters, startHold(t, context.Background(), l, key, locks.Wait(time.Hour)))
			synctest.Wait()
		}

		require.NoError(t, st.Close())
		for i, w := range waiters {
			err := w.wait()
			requireKind(t, err, locks.ErrClosed, locks.Closed, name, keys[i])
			require.Regexp(t, `^lock invoices: key "(9|10)": [a-z][^:]*: closed$`, err.Error())
			require.False(t, w.ran)
		}
		for _, h := range []*hold{plain, armed} {
			<-h.ctx.Done()
			cause := context.Cause(h.ctx)
			requireKind(t, cause, locks.ErrLost, locks.Lost, name, h.lease.Key)
			require.EqualError(t, cause, closedLostMsg(h.lease.Key))
			require.ErrorIs(t, h.ctx.Err(), context.Canceled)
		}
		err := plain.finish()
		require.EqualError(t, err, closedLostMsg("9")+"; the function returned: "+fnErr.Error())
		require.ErrorIs(t, err, fnErr)
		require.EqualError(t, armed.finish(), closedLostMsg("10"))

		time.Sleep(2 * time.Hour) // past every wait and maxHold armed before
		synctest.Wait()
	})
}

// TestCallsAfterClose: every later OpenLock, Hold and TryHold fails Closed,
// on new and old handles alike; Close is idempotent: again, it returns
// nil.
func TestCallsAfterClose(t *testing.T) {
	st, l := newLock(t)
	require.NoError(t, l.Hold(context.Background(), 9, nop))
	require.NoError(t, st.Close())
	require.NoError(t, st.Close())

	_, err := locks.OpenLock(st, name)
	requireKind(t, err, locks.ErrClosed, locks.Closed, name, "")
	_, err = locks.OpenLock(st, "receipts")
	requireKind(t, err, locks.ErrClosed, locks.Closed, "receipts", "")

	err = l.Hold(context.Background(), 9, mustNotRun(t))
	requireKind(t, err, locks.ErrClosed, locks.Closed, name, "9")
	ok, err := l.TryHold(context.Background(), 9, mustNotRun(t))
	require.False(t, ok)
	requireKind(t, err, locks.ErrClosed, locks.Closed, name, "9")
	_, err = locks.HoldValue(context.Background(), l, 9, func(context.Context, *locks.Lease) (int, error) { return 0, nil })
	require.ErrorIs(t, err, locks.ErrClosed)
	_, ok, err = locks.TryHoldValue(context.Background(), l, 9, func(context.Context, *locks.Lease) (int, error) { return 0, nil })
	require.False(t, ok)
	require.ErrorIs(t, err, locks.ErrClosed)

	require.NoError(t, st.Shutdown(context.Background()))
	require.NoError(t, st.Close())
}

// TestCloseConcurrently: Close from many goroutines at once, with a
// maxHold pending: each returns nil, and the store ends closed with its
// waiters failed and its leases lost; Close once more returns nil, and
// Shutdown, with nothing left running, returns nil at once.
func TestCloseConcurrently(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, l := newLock(t)
		h := holding(t, l, 9, locks.MaxHold(time.Hour))
		w := queued(t, context.Background(), l, 9, locks.Wait(time.Hour))
		var wg sync.WaitGroup
		for i := 0; i < 8; i++ {
			wg.Go(func() { assert.NoError(t, st.Close()) })
		}
		wg.Wait()
		require.NoError(t, st.Close())
		require.ErrorIs(t, w.wait(), locks.ErrClosed)
		require.ErrorIs(t, h.finish(), locks.ErrLost)
		start := time.Now()
		require.NoError(t, st.Shutdown(context.Background()))
		require.Zero(t, time.Since(start))
	})
}

// TestCloseInsideFn: Close called from inside a held function (twice)
// does not deadlock, also with another key's maxHold pending (the timer
// goroutine at work): fn's context ends with the lost *Error of its
// store's closing, and its Hold fails Lost; the one in line for the key
// fails Closed, and so does a Hold after Close; the other key's holder
// loses its lease too. Real goroutines and a real-time guard, since a
// deadlock on a mutex would not show in a bubble.
func TestCloseInsideFn(t *testing.T) {
	for _, opts := range [][]locks.Option{nil, {locks.MaxHold(time.Hour)}} {
		st, l := newLock(t)
		other := holding(t, l, "other", locks.MaxHold(time.Hour))
		var w *hold
		done := make(chan error, 1)
		go func() {
			done <- l.Hold(context.Background(), 9, func(ctx context.Context, _ *locks.Lease) error {
				// A waiter asks its context for Done once it stands in line.
				wctx := &doneBlocksCtx{Context: context.Background(), entered: make(chan struct{}), proceed: make(chan struct{})}
				w = startHold(t, wctx, l, 9, locks.Wait(time.Minute))
				<-wctx.entered
				close(wctx.proceed)
				assert.NoError(t, st.Close())
				assert.NoError(t, st.Close(), "Close again, from inside too")
				<-ctx.Done()
				assert.ErrorIs(t, context.Cause(ctx), locks.ErrLost)
				assert.ErrorIs(t, l.Hold(context.Background(), 10, mustNotRun(t)), locks.ErrClosed)
				return nil
			}, opts...)
		}()
		select {
		case err := <-done:
			require.EqualError(t, err, closedLostMsg("9"))
		case <-time.After(10 * time.Second):
			t.Fatal("Close inside fn did not return within 10 s")
		}
		require.ErrorIs(t, w.wait(), locks.ErrClosed)
		require.EqualError(t, other.finish(), closedLostMsg("other"))
	}
}

// TestShutdownWaitsForFunctions: Shutdown closes the store, then waits
// until every function that was running has returned, those whose lease
// was revoked included; then it returns nil.
func TestShutdownWaitsForFunctions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newStore(t)
		l := openLock(t, st, name, locks.MaxHold(time.Second))
		var returned sync.Map
		run := func(key string, d time.Duration) {
			go func() {
				_ = l.Hold(context.Background(), key, func(context.Context, *locks.Lease) error {
					time.Sleep(d) // ignores its context
					returned.Store(key, true)
					return nil
				})
			}()
		}
		run("revoked", 2*time.Minute)
		time.Sleep(5 * time.Second) // "revoked" was revoked at 1 s and still runs
		run("a", time.Minute)
		run("b", 30*time.Second)
		synctest.Wait()

		start := time.Now()
		require.NoError(t, st.Shutdown(context.Background()))
		require.Equal(t, 2*time.Minute-5*time.Second, time.Since(start), "returns when the last function returned")
		for _, key := range []string{"revoked", "a", "b"} {
			_, ok := returned.Load(key)
			require.True(t, ok, key)
		}
		require.ErrorIs(t, l.Hold(context.Background(), 9, mustNotRun(t)), locks.ErrClosed)
	})
}

// TestShutdownContextEnds: Shutdown returns ctx's error when ctx ends
// before the functions return; the store is closed all the same, and a
// later Shutdown waits again.
func TestShutdownContextEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, l := newLock(t)
		h := holding(t, l, 9)

		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		start := time.Now()
		err := st.Shutdown(ctx)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.Equal(t, 5*time.Second, time.Since(start))
		require.ErrorIs(t, l.Hold(context.Background(), 10, mustNotRun(t)), locks.ErrClosed)
		require.ErrorIs(t, context.Cause(h.ctx), locks.ErrLost)

		canceled, cancel2 := context.WithCancel(context.Background())
		cancel2()
		require.ErrorIs(t, st.Shutdown(canceled), context.Canceled)

		// A context ended with a cause of its own: matched too (SPEC §3).
		why := errors.New("the deploy's budget is spent")
		caused, cancel3 := context.WithCancelCause(context.Background())
		cancel3(why)
		err = st.Shutdown(caused)
		require.ErrorIs(t, err, context.Canceled)
		require.ErrorIs(t, err, why)

		done := make(chan error, 1)
		go func() { done <- st.Shutdown(context.Background()) }()
		time.Sleep(time.Minute)
		synctest.Wait()
		require.Empty(t, done, "Shutdown returned while fn still runs")
		require.ErrorIs(t, h.finish(), locks.ErrLost)
		require.NoError(t, <-done)
	})
}

// TestShutdownNilContext: Shutdown(nil) fails Invalid, never a panic, and
// closes nothing.
func TestShutdownNilContext(t *testing.T) {
	st, l := newLock(t)
	h := holding(t, l, 9)
	err := st.Shutdown(nil)
	requireKind(t, err, locks.ErrInvalid, locks.Invalid, "", "")
	require.EqualError(t, err, "the context is nil: invalid")
	requireHeld(t, l, 9)
	require.NoError(t, l.Hold(context.Background(), 10, nop), "the store is open")
	require.NoError(t, h.finish())
}

// TestShutdownIdle: with nothing running Shutdown returns nil at once.
func TestShutdownIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, l := newLock(t)
		require.NoError(t, l.Hold(context.Background(), 9, nop))
		start := time.Now()
		require.NoError(t, st.Shutdown(context.Background()))
		require.Zero(t, time.Since(start))
	})
}

// TestNewStoreHoldsNoLease: a store that opens again holds no lease: the
// keys a closed store's functions still run under are free in the new one,
// with higher fences (fences rise across stores in the same place).
func TestNewStoreHoldsNoLease(t *testing.T) {
	old, l := newLock(t)
	h := holding(t, l, 9)
	require.NoError(t, old.Close())

	st := newStore(t)
	l2 := openLock(t, st, name)
	var fence uint64
	ok, err := l2.TryHold(context.Background(), 9, func(_ context.Context, ls *locks.Lease) error {
		fence = ls.Fence
		return nil
	})
	require.NoError(t, err)
	require.True(t, ok, "the new store holds no lease")
	require.Greater(t, fence, h.lease.Fence)
	require.ErrorIs(t, h.finish(), locks.ErrLost)
}

// TestCloseEndsTimerGoroutine: no goroutine outlives a closed store, also
// with deadlines pending at Close.
func TestCloseEndsTimerGoroutine(t *testing.T) {
	st, l := newLock(t)
	h := holding(t, l, 9, locks.MaxHold(time.Hour))
	w := startHold(t, context.Background(), l, 9, locks.Wait(time.Hour))
	require.NoError(t, l.Hold(context.Background(), 10, nop, locks.MaxHold(time.Hour)))
	require.NoError(t, st.Close())
	require.ErrorIs(t, w.wait(), locks.ErrClosed)
	require.ErrorIs(t, h.finish(), locks.ErrLost)
	goleak.VerifyNone(t)
}

// TestKeyMemoryReclaimed: memory for a key is reclaimed when it has no
// holder and no waiter, whatever way those went: returned, panicked, timed
// out, left, revoked, closed.
func TestKeyMemoryReclaimed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, l := newLock(t)
		require.Zero(t, locks.KeyEntries(st))
		require.NoError(t, l.Hold(context.Background(), 9, func(context.Context, *locks.Lease) error {
			require.Equal(t, 1, locks.KeyEntries(st))
			return nil
		}))
		require.Zero(t, locks.KeyEntries(st))

		require.Panics(t, func() {
			_ = l.Hold(context.Background(), 9, func(context.Context, *locks.Lease) error { panic("boom") })
		})
		require.Zero(t, locks.KeyEntries(st), "after a panic")

		h := holding(t, l, 9)
		ctx, cancel := context.WithCancel(context.Background())
		left := startHold(t, ctx, l, 9, locks.Wait(time.Hour))
		timedOut := queued(t, context.Background(), l, 9, locks.Wait(time.Second))
		require.Equal(t, 1, locks.KeyEntries(st), "one entry for the holder and its line")
		cancel()
		require.Error(t, left.wait())
		require.ErrorIs(t, timedOut.wait(), locks.ErrInUse)
		require.Equal(t, 1, locks.KeyEntries(st))
		require.NoError(t, h.finish())
		require.Zero(t, locks.KeyEntries(st), "after waiters left and timed out")

		// Revoked: the key is free (no holder, no waiter) while the revoked
		// function still runs.
		require.ErrorIs(t, l.Hold(context.Background(), 9, func(ctx context.Context, _ *locks.Lease) error {
			<-ctx.Done()
			require.Zero(t, locks.KeyEntries(st), "revoked, nobody in line")
			return nil
		}, locks.MaxHold(time.Second)), locks.ErrLost)

		// Many keys, one after the other and all at once.
		for i := 0; i < 5000; i++ {
			require.NoError(t, l.Hold(context.Background(), i, nop))
		}
		require.Zero(t, locks.KeyEntries(st))
		var hs []*hold
		for i := 0; i < 300; i++ {
			hs = append(hs, startHold(t, context.Background(), l, i))
		}
		for _, h := range hs {
			<-h.granted
		}
		require.Equal(t, 300, locks.KeyEntries(st))
		for _, h := range hs {
			require.NoError(t, h.finish())
		}
		require.Zero(t, locks.KeyEntries(st))

		// Closed with holders and waiters.
		h = holding(t, l, 9)
		w := queued(t, context.Background(), l, 9, locks.Wait(time.Hour))
		require.NoError(t, st.Close())
		require.Zero(t, locks.KeyEntries(st), "after Close")
		require.ErrorIs(t, w.wait(), locks.ErrClosed)
		require.ErrorIs(t, h.finish(), locks.ErrLost)
		require.Zero(t, locks.KeyEntries(st))
	})
}

// TestNoTimerOutlivesItsUse: a deadline is armed only while it can matter;
// once every hold is done the store's timer wheel is empty and expects
// nothing: no timer outlives its use, and no ticker runs while no deadline
// is set.
func TestNoTimerOutlivesItsUse(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, l := newLock(t)
		requireIdle := func(what string) {
			t.Helper()
			n, _ := locks.PendingTimers(st)
			require.Zero(t, n, "deadlines pending %s", what)
			// A deadline that left early leaves its list's one timer in
			// the wheel until its old instant (every deadline here is
			// due within two hours): one wake-up, then nothing.
			time.Sleep(2 * time.Hour)
			synctest.Wait()
			n, idle := locks.PendingTimers(st)
			require.Zero(t, n, "deadlines pending %s", what)
			require.True(t, idle, "the wheel still expects something %s", what)
		}
		requireIdle("in a new store")
		require.NoError(t, l.Hold(context.Background(), 9, nop))
		requireIdle("after a hold without deadlines")

		require.NoError(t, l.Hold(context.Background(), 9, func(context.Context, *locks.Lease) error {
			n, _ := locks.PendingTimers(st)
			require.Equal(t, 1, n, "the maxHold is armed")
			return nil
		}, locks.MaxHold(time.Hour)))
		requireIdle("after a hold returned before its maxHold")

		// A waiter granted: its wait deadline is disarmed.
		h := holding(t, l, 9)
		w := queued(t, context.Background(), l, 9, locks.Wait(time.Hour))
		n, _ := locks.PendingTimers(st)
		require.Equal(t, 1, n, "the wait is armed")
		require.NoError(t, h.finish())
		<-w.granted
		requireIdle("after the waiter was granted")
		require.NoError(t, w.finish())

		// A waiter granted with a maxHold: the wait becomes the maxHold.
		h = holding(t, l, 9)
		w = queued(t, context.Background(), l, 9, locks.Wait(time.Hour), locks.MaxHold(time.Hour))
		require.NoError(t, h.finish())
		<-w.granted
		n, _ = locks.PendingTimers(st)
		require.Equal(t, 1, n, "only the maxHold is armed")
		require.NoError(t, w.finish())
		requireIdle("after a granted waiter with a maxHold returned")

		// Waits that passed, waiters that left, a revocation: all fired or disarmed.
		h = holding(t, l, 9)
		ctx, cancel := context.WithCancel(context.Background())
		left := startHold(t, ctx, l, 9, locks.Wait(time.Hour))
		timedOut := queued(t, context.Background(), l, 9, locks.Wait(3*time.Second))
		cancel()
		require.Error(t, left.wait())
		require.ErrorIs(t, timedOut.wait(), locks.ErrInUse)
		requireIdle("after a waiter left and another timed out")
		require.NoError(t, h.finish())

		require.ErrorIs(t, l.Hold(context.Background(), 9, func(ctx context.Context, _ *locks.Lease) error {
			<-ctx.Done()
			return nil
		}, locks.MaxHold(70*time.Second)), locks.ErrLost)
		requireIdle("after a revocation")

		time.Sleep(24 * time.Hour)
		synctest.Wait()
		requireIdle("a day later")
	})
}

// TestCloseRacesHandoff: Close racing with a release that hands the key to
// a waiter: whatever wins, the waiter's Hold returns nil or Lost exactly
// when its fn ran, and Closed when it did not (real goroutines, for the
// race detector).
func TestCloseRacesHandoff(t *testing.T) {
	for round := 0; round < 100; round++ {
		st := locks.NewStore()
		l := openLock(t, st, name)
		var opts []locks.Option
		if round%2 == 1 {
			opts = append(opts, locks.MaxHold(time.Hour))
		}
		h := holding(t, l, 9, opts...)
		w := startHold(t, context.Background(), l, 9, append(opts, locks.Wait(time.Minute))...)
		w.letGo()
		go h.letGo()
		require.NoError(t, st.Close())
		herr := h.wait()
		require.True(t, herr == nil || errors.Is(herr, locks.ErrLost), "holder: %v", herr)
		err := w.wait()
		if w.ran {
			require.True(t, err == nil || errors.Is(err, locks.ErrLost), "round %d: fn ran, Hold returned %v", round, err)
		} else {
			require.ErrorIs(t, err, locks.ErrClosed, "round %d", round)
		}
	}
}

// TestCloseManyKeysOnOneShard: Close reaches every key of a crowded shard
// (its map shrinks as Close frees the entries): every holder loses its
// lease, every waiter fails Closed, no entry is left.
func TestCloseManyKeysOnOneShard(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, l := newLock(t, locks.Shards(1))
		const keys = 600
		var holders, waiters []*hold
		for i := 0; i < keys; i++ {
			holders = append(holders, startHold(t, context.Background(), l, i))
		}
		for _, h := range holders {
			<-h.granted
		}
		for i := 0; i < keys; i += 2 {
			waiters = append(waiters, startHold(t, context.Background(), l, i, locks.Wait(time.Hour)))
		}
		synctest.Wait()
		require.Equal(t, keys, locks.KeyEntries(st))
		require.NoError(t, st.Close())
		require.Zero(t, locks.KeyEntries(st))
		for _, w := range waiters {
			require.ErrorIs(t, w.wait(), locks.ErrClosed)
		}
		for _, h := range holders {
			<-h.ctx.Done()
			require.ErrorIs(t, h.finish(), locks.ErrLost)
		}
	})
}
