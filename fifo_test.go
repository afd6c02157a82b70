package locks_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/holdline/locks"
)

// queue starts n holds of key in l, one after the other, each standing in
// line (synctest.Wait) before the next comes, so their order is known.
// Must run in a synctest bubble.
func queue(t *testing.T, l *locks.Lock, key any, n int, opts ...locks.Option) []*hold {
	t.Helper()
	hs := make([]*hold, n)
	for i := range hs {
		hs[i] = startHold(t, context.Background(), l, key, opts...)
		synctest.Wait()
		require.False(t, isClosed(hs[i].granted), "waiter %d was granted at once", i)
	}
	return hs
}

// TestFIFO: waiters are given the key strictly in the order they came
// (first come, first served), with fences in the same order.
func TestFIFO(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, l := newLock(t)
		h := holding(t, l, 9)
		ws := queue(t, l, 9, 50, locks.Wait(time.Hour))
		require.NoError(t, h.finish())
		prev := h.lease.Fence
		for i, w := range ws {
			<-w.granted
			require.Greater(t, w.lease.Fence, prev)
			prev = w.lease.Fence
			synctest.Wait()
			for j := i + 1; j < len(ws); j++ {
				require.False(t, isClosed(ws[j].granted), "waiter %d granted while %d holds", j, i)
			}
			require.NoError(t, w.finish())
		}
	})
}

// TestFIFOOrderUnderChurn: the order of grants is the order of arrival,
// checked by the functions themselves as they run.
func TestFIFOOrderUnderChurn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, l := newLock(t)
		h := holding(t, l, "k")
		var mu sync.Mutex
		var order []int
		var wg sync.WaitGroup
		for i := 0; i < 20; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				assert.NoError(t, l.Hold(context.Background(), "k", func(context.Context, *locks.Lease) error {
					mu.Lock()
					order = append(order, i)
					mu.Unlock()
					return nil
				}))
			}()
			synctest.Wait()
		}
		require.NoError(t, h.finish())
		wg.Wait()
		want := make([]int, 20)
		for i := range want {
			want[i] = i
		}
		require.Equal(t, want, order)
	})
}

// TestNoBargingAtRelease: on release the key passes straight to the head of
// the line; no newcomer, TryHold included, can take it in between.
// Hold has already handed the key over when it returns.
func TestNoBargingAtRelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, l := newLock(t)
		var w *hold
		require.NoError(t, l.Hold(context.Background(), 9, func(context.Context, *locks.Lease) error {
			w = queued(t, context.Background(), l, 9)
			return nil
		}))
		// w has not run yet, but the key is already its.
		requireHeld(t, l, 9, "TryHold barged in at the release")
		err := l.Hold(context.Background(), 9, mustNotRun(t), locks.Wait(0))
		require.ErrorIs(t, err, locks.ErrInUse, "Hold barged in at the release")
		<-w.granted
		require.NoError(t, w.finish())
	})
}

// TestCancelledHeadWaiter: a waiter whose context ends leaves the line at
// once (Hold fails with the context's error, naming lock and key); the next
// in line is still granted, in order.
func TestCancelledHeadWaiter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, l := newLock(t)
		h := holding(t, l, 9)
		ctx, cancel := context.WithCancel(context.Background())
		head := queued(t, ctx, l, 9, locks.Wait(time.Hour))
		ws := queue(t, l, 9, 3, locks.Wait(time.Hour))

		start := time.Now()
		cancel()
		err := head.wait()
		require.Zero(t, time.Since(start), "left the line at once")
		requireNamesKey(t, err, context.Canceled, "9")
		require.False(t, head.ran)

		require.NoError(t, h.finish())
		for i, w := range ws {
			<-w.granted
			if i == 0 {
				require.Equal(t, h.lease.Fence+1, w.lease.Fence, "the waiter that left used no fence")
			}
			require.NoError(t, w.finish())
		}
		requireFree(t, l, 9)
	})
}

// TestWaiterLeavesFromTheMiddle: waiters leaving from the middle of the line
// (context ended, deadline) do not disturb the order of the others.
func TestWaiterLeavesFromTheMiddle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, l := newLock(t)
		h := holding(t, l, 9)
		a := queued(t, context.Background(), l, 9, locks.Wait(time.Hour))
		ctx, cancel := context.WithCancel(context.Background())
		b := queued(t, ctx, l, 9, locks.Wait(time.Hour))
		dctx, dcancel := context.WithTimeout(context.Background(), time.Minute)
		defer dcancel()
		c := queued(t, dctx, l, 9, locks.Wait(time.Hour))
		d := queued(t, context.Background(), l, 9, locks.Wait(time.Hour))

		cancel()
		require.ErrorIs(t, b.wait(), context.Canceled)
		time.Sleep(time.Minute)
		require.ErrorIs(t, c.wait(), context.DeadlineExceeded)
		e := asError(t, c.err)
		require.Equal(t, "9", e.Key)

		require.NoError(t, h.finish())
		<-a.granted
		synctest.Wait()
		require.False(t, isClosed(d.granted))
		require.NoError(t, a.finish())
		<-d.granted
		require.Equal(t, a.lease.Fence+1, d.lease.Fence, "the waiters who left used no fence")
		require.NoError(t, d.finish())
	})
}

// TestTimedOutWaiterLeavesLine: a waiter whose wait passes fails InUse and
// leaves the line; the holder keeps the key and the others keep their
// places.
func TestTimedOutWaiterLeavesLine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, l := newLock(t)
		h := holding(t, l, 9)
		short := queued(t, context.Background(), l, 9, locks.Wait(time.Second))
		long := queued(t, context.Background(), l, 9, locks.Wait(time.Hour))

		err := short.wait()
		require.EqualError(t, err, `lock invoices: key "9": held past the hold's wait: in use`)
		require.False(t, short.ran)
		requireHeld(t, l, 9)
		synctest.Wait()
		require.False(t, isClosed(long.done), "the one behind still waits")

		require.NoError(t, h.finish())
		<-long.granted
		require.Equal(t, h.lease.Fence+1, long.lease.Fence)
		require.NoError(t, long.finish())
		requireFree(t, l, 9)
	})
}

// TestCancelRacesGrant: a waiter's context ending as the key is handed to
// it never loses the key: it ends with the next in line, or free; Hold
// returns nil exactly when fn ran (as x/sync's semaphore, go.dev/issue/63615).
// Real goroutines, many rounds, to let the race happen both ways. (The
// same race in a synctest bubble: TestCancelRacingHandoff in package fuzz;
// forced, with the context ending after the grant: TestEndedInLineNeverRuns.)
func TestCancelRacesGrant(t *testing.T) {
	_, l := newLock(t)
	var granted, canceled int
	for round := 0; round < 300; round++ {
		withNext := round%2 == 0
		h := holding(t, l, 9)
		ctx, cancel := context.WithCancel(context.Background())
		w := startHold(t, ctx, l, 9, locks.Wait(time.Minute))
		w.letGo() // return at once when granted
		var next *hold
		if withNext {
			next = startHold(t, context.Background(), l, 9, locks.Wait(time.Minute))
		}
		ready := make(chan struct{})
		go func() {
			<-ready
			cancel()
		}()
		close(ready)
		h.letGo()
		require.NoError(t, h.wait())
		err := w.wait()
		if err == nil {
			require.True(t, w.ran, "round %d: Hold returned nil without running fn", round)
			granted++
		} else {
			require.False(t, w.ran, "round %d: fn ran, yet Hold failed: %v", round, err)
			require.ErrorIs(t, err, context.Canceled, "round %d", round)
			canceled++
		}
		if next != nil {
			// The next in line gets the key either way.
			require.NoError(t, next.finish(), "round %d", round)
		}
		requireFree(t, l, 9, "round %d: the key was left held by nobody", round)
		cancel()
	}
	t.Logf("granted %d, canceled %d", granted, canceled)
}

// TestLimit: a key's line holds exactly MaxWaiters (10,000) waiters; the
// next Hold fails Limit at once, naming lock and key, and TryHold answers
// (false, nil); also after every other waiter left, from all over the
// line, and others took their places. One leaving makes room for exactly
// one; the line keeps its order throughout; every refusal is counted.
func TestLimit(t *testing.T) {
	require.Equal(t, 10000, locks.MaxWaiters)
	synctest.Test(t, func(t *testing.T) {
		st, l := newLock(t)
		h := holding(t, l, 9)

		full := func(what string) {
			t.Helper()
			start := time.Now()
			err := l.Hold(context.Background(), 9, mustNotRun(t), locks.Wait(time.Hour))
			requireKind(t, err, locks.ErrLimit, locks.Limit, name, "9")
			require.EqualError(t, err, `lock invoices: key "9": the line of waiters is full: limit`, what)
			require.Zero(t, time.Since(start), "fails at once: %s", what)
			ok, err := l.TryHold(context.Background(), 9, mustNotRun(t))
			require.NoError(t, err, what)
			require.False(t, ok, what)
		}

		// 10,000 in line, in this order; every other one will leave.
		churn, cancelChurn := context.WithCancel(context.Background())
		var line []*hold
		for i := range locks.MaxWaiters {
			ctx := context.Background()
			if i%2 == 0 {
				ctx = churn
			}
			line = append(line, queued(t, ctx, l, 9, locks.Wait(time.Hour)))
		}
		full("10,000 in line")

		// The churn: every other waiter leaves; as many others take their
		// places, the last of them with a context of its own.
		cancelChurn()
		synctest.Wait()
		for i := 0; i < locks.MaxWaiters; i += 2 {
			require.ErrorIs(t, line[i].wait(), context.Canceled)
		}
		for range locks.MaxWaiters/2 - 1 {
			line = append(line, queued(t, context.Background(), l, 9, locks.Wait(time.Hour)))
		}
		leaving, leave := context.WithCancel(context.Background())
		last := queued(t, leaving, l, 9, locks.Wait(time.Hour))
		full("after the churn")

		// One leaves: one more fits, and no more.
		leave()
		require.ErrorIs(t, last.wait(), context.Canceled)
		extra := queued(t, context.Background(), l, 9, locks.Wait(time.Hour))
		require.False(t, isClosed(extra.done), "a place was free, yet Hold returned")
		full("after one left and another came")
		require.Equal(t, uint64(3), st.Stats().Limited, "every refusal is counted")

		// Another key is not limited by this one's line.
		require.NoError(t, l.Hold(context.Background(), 10, nop))

		// The first in line is still first.
		require.NoError(t, h.finish())
		<-line[1].granted
		synctest.Wait()
		require.False(t, isClosed(line[3].granted), "the second in line was granted too")

		st.Close()
		require.ErrorIs(t, line[1].finish(), locks.ErrLost)
		for i, w := range append(line, extra) {
			switch {
			case i == 1: // lost, above
			case i < locks.MaxWaiters && i%2 == 0: // left in the churn
			default:
				require.ErrorIs(t, w.wait(), locks.ErrClosed, "waiter %d", i)
			}
		}
	})
}

// TestLimitFreesUpAsTheLineMoves: once the head of a full line is granted,
// one place is free again.
func TestLimitFreesUpAsTheLineMoves(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, l := newLock(t)
		h := holding(t, l, 9)
		first := queued(t, context.Background(), l, 9, locks.Wait(time.Hour))
		errs := make(chan error, locks.MaxWaiters)
		for i := 1; i < locks.MaxWaiters; i++ {
			go func() { errs <- l.Hold(context.Background(), 9, mustNotRun(t), locks.Wait(time.Hour)) }()
		}
		synctest.Wait()
		require.ErrorIs(t, l.Hold(context.Background(), 9, mustNotRun(t)), locks.ErrLimit)

		require.NoError(t, h.finish())
		<-first.granted // first left the line for the key
		last := queued(t, context.Background(), l, 9, locks.Wait(time.Hour))
		require.False(t, isClosed(last.done), "a place was free, yet Hold returned")
		require.ErrorIs(t, l.Hold(context.Background(), 9, mustNotRun(t)), locks.ErrLimit)

		st.Close()
		require.ErrorIs(t, first.finish(), locks.ErrLost)
		require.ErrorIs(t, last.wait(), locks.ErrClosed)
		for i := 1; i < locks.MaxWaiters; i++ {
			err := <-errs
			require.True(t, errors.Is(err, locks.ErrClosed), "%v", err)
		}
	})
}
