package fuzz

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/holdline/locks"
)

// Regression tests for the failure modes seen in the field that concern the line
// of waiters: each is named after its failure mode, runs in a synctest
// bubble (fake clock: exact instants, no sleeping) and checks what a user
// would see. The same cases are FuzzStore seeds (see README.md). A waiter
// cancelled or timed out at the head of the line, and two handles sharing
// a line, are tested in the root package (TestCancelledHeadWaiter,
// TestTimedOutWaiterLeavesLine, TestTwoHandlesShareKeys).

// A release landing between a waiter's check of the key and its park (a
// lost wake-up) would leave the waiter asleep until its wait ends, an hour
// here: no time may pass before it holds.
func TestLostWakeupReleaseBeforePark(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, l := newLock(t)
		for i := range 300 {
			h := holding(t, l, 9)
			start := time.Now()
			w := startHold(t, context.Background(), l, 9, locks.Wait(time.Hour))
			if i%2 == 0 {
				h.letGo() // the waiter's goroutine and the release run at once
			} else {
				go h.letGo()
			}
			synctest.Wait()
			requireHolding(t, w, "round %d", i)
			require.Zero(t, time.Since(start), "round %d: the waiter slept", i)
			w.letGo()
			synctest.Wait()
			requireEnded(t, h, 0)
			requireEnded(t, w, 0)
		}
		requireFree(t, l, 9)
	})
}

// Cancellation racing the handoff: the key goes to the cancelled waiter
// (whose fn then runs, and whose Hold returns what fn returned) or past it
// to the next in line; never to nobody. Hold returns nil exactly when fn
// ran.
func TestCancelRacingHandoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, l := newLock(t)
		var ran, left int
		for i := range 300 {
			h := holding(t, l, 9)
			ctx, cancel := context.WithCancel(context.Background())
			w := queued(t, ctx, l, 9)
			next := queued(t, context.Background(), l, 9)
			if i%2 == 0 {
				go cancel()
				go h.letGo()
			} else {
				go h.letGo()
				go cancel()
			}
			synctest.Wait()
			if isClosed(w.granted) {
				ran++
				requireHolding(t, w, "round %d", i)
				requireWaiting(t, next)
				w.letGo()
				synctest.Wait()
				requireEnded(t, w, 0) // what fn returned
			} else {
				left++
				err := requireEnded(t, w, locks.Canceled)
				require.ErrorIs(t, err, context.Canceled)
			}
			requireHolding(t, next, "round %d: the key went to nobody", i)
			next.letGo()
			synctest.Wait()
			requireFree(t, l, 9)
		}
		t.Logf("the cancelled waiter ran %d times and left %d times", ran, left)
	})
}

// A wait deadline racing the handoff: at the instant the waiter's wait ends
// its key is let go; the waiter holds or fails InUse, and in that case the
// key goes on to the next; never to nobody.
func TestDeadlineRacingHandoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, l := newLock(t)
		for i := range 200 {
			h := holding(t, l, 9)
			w := queued(t, context.Background(), l, 9, locks.Wait(10*time.Millisecond))
			next := startHold(t, context.Background(), l, 9, locks.Wait(time.Hour))
			time.Sleep(10 * time.Millisecond)
			h.letGo() // at the instant of w's deadline, while the timer fires
			synctest.Wait()
			if isClosed(w.granted) {
				requireHolding(t, w, "round %d", i)
				w.letGo()
				synctest.Wait()
				requireEnded(t, w, 0)
			} else {
				requireEnded(t, w, locks.InUse)
			}
			requireHolding(t, next, "round %d: the key went to nobody", i)
			next.letGo()
			synctest.Wait()
			requireFree(t, l, 9)
		}
	})
}

// Two adjacent waiters cancelled at the same instant (one context), and two
// timed out at the same instant, leave no ghost entry: the next in line is
// woken, and the key is free after.
func TestAdjacentWaitersLeaveAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, l := newLock(t, locks.Shards(1))
		h := holding(t, l, 9)
		parent, cancel := context.WithCancel(context.Background())
		w1 := queued(t, parent, l, 9)
		w2 := queued(t, parent, l, 9)
		t1 := queued(t, context.Background(), l, 9, locks.Wait(5*time.Millisecond))
		t2 := queued(t, context.Background(), l, 9, locks.Wait(5*time.Millisecond))
		w3 := queued(t, context.Background(), l, 9)
		cancel()
		synctest.Wait()
		requireEnded(t, w1, locks.Canceled)
		requireEnded(t, w2, locks.Canceled)
		time.Sleep(5 * time.Millisecond)
		synctest.Wait()
		requireEnded(t, t1, locks.InUse)
		requireEnded(t, t2, locks.InUse)
		h.letGo()
		synctest.Wait()
		requireHolding(t, w3)
		w3.letGo()
		synctest.Wait()
		requireFree(t, l, 9)

		// Both at once, racing the release of the holder too.
		h = holding(t, l, 9)
		parent, cancel = context.WithCancel(context.Background())
		w1 = queued(t, parent, l, 9)
		w2 = queued(t, parent, l, 9)
		w3 = queued(t, context.Background(), l, 9)
		go cancel()
		h.letGo()
		synctest.Wait()
		for _, w := range []*hold{w1, w2} {
			if isClosed(w.granted) {
				w.letGo()
				synctest.Wait()
			}
		}
		requireHolding(t, w3)
		w3.letGo()
		synctest.Wait()
		requireFree(t, l, 9)
	})
}

// A fast release-and-hold loop in one goroutine must not starve a queued
// waiter: the key passes to the waiter at the loop's first release, and the
// loop's next Hold waits behind it; its TryHold gets nothing.
func TestReleaseHoldLoopDoesNotStarve(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, l := newLock(t)
		first := make(chan struct{})
		var rounds, tries atomic.Int32
		loopDone := make(chan struct{})
		go func() {
			defer close(loopDone)
			for i := range 100 {
				_ = l.Hold(context.Background(), 9, func(context.Context, *locks.Lease) error {
					if i == 0 {
						<-first
					}
					rounds.Add(1)
					return nil
				})
				if ok, _ := l.TryHold(context.Background(), 9, nop); ok {
					tries.Add(1)
				}
			}
		}()
		synctest.Wait()
		w := queued(t, context.Background(), l, 9)
		close(first)
		synctest.Wait()
		requireHolding(t, w)
		require.EqualValues(t, 1, rounds.Load(), "the loop held again while a waiter was in line")
		require.Zero(t, tries.Load(), "the loop's TryHold took the key from a waiter")
		w.letGo()
		<-loopDone
		require.EqualValues(t, 100, rounds.Load())
	})
}

// TryHold never barges: while someone is in line the key is never free, not
// even for an instant at a release.
func TestTryHoldNeverBarges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, l := newLock(t)
		for range 200 {
			h := holding(t, l, 9)
			w := queued(t, context.Background(), l, 9)
			got := make(chan bool)
			go func() {
				ok, _ := l.TryHold(context.Background(), 9, nop)
				got <- ok
			}()
			h.letGo()
			require.False(t, <-got, "TryHold took a key someone waits for")
			synctest.Wait()
			requireHolding(t, w)
			w.letGo()
			synctest.Wait()
		}
	})
}

// A revoked holder's late release must not free its successor's key, nor
// touch the line; a second "release" (the revoked holder's, after its
// successor's) changes nothing either.
func TestRevokedHolderLateRelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, l := newLock(t)
		a := holding(t, l, "m", locks.MaxHold(5*time.Millisecond))
		b := queued(t, context.Background(), l, "m")
		c := startHold(t, context.Background(), l, "m")
		time.Sleep(5 * time.Millisecond)
		synctest.Wait()
		requireHolding(t, b)
		require.Greater(t, b.lease.Fence, a.lease.Fence)
		var e *locks.Error
		require.True(t, errors.As(context.Cause(a.ctx), &e), "the revoked fn's context: %v", context.Cause(a.ctx))
		require.Equal(t, locks.Lost, e.Kind)

		a.letGo() // late
		synctest.Wait()
		err := requireEnded(t, a, locks.Lost)
		require.EqualError(t, err, `lock inv: key "m": the lease was lost: it was revoked at its maxHold`)
		requireHolding(t, b)
		requireWaiting(t, c)
		ok, err := l.TryHold(context.Background(), "m", nop)
		require.NoError(t, err)
		require.False(t, ok, "the late release freed the successor's key")

		b.letGo()
		synctest.Wait()
		requireHolding(t, c)
		c.letGo()
		synctest.Wait()
		requireFree(t, l, "m")
	})
}

// The revoked holder returning after its successor let go (a double release
// of one grant, in effect) must not free the next holder's key, and the
// store must keep counting it as running: Shutdown waits for it.
func TestRevokedHolderReleaseAfterSuccessor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, l := newLock(t)
		a := startHoldRet(t, context.Background(), l, 9, errFn, locks.MaxHold(5*time.Millisecond))
		synctest.Wait()
		b := queued(t, context.Background(), l, 9)
		c := startHold(t, context.Background(), l, 9)
		time.Sleep(5 * time.Millisecond)
		synctest.Wait()
		b.letGo()
		synctest.Wait()
		requireHolding(t, c)
		a.letGo() // the revoked holder returns last
		synctest.Wait()
		err := requireEnded(t, a, locks.Lost)
		require.ErrorIs(t, err, errFn, "Lost wraps fn's own error")
		requireHolding(t, c)

		d := queued(t, context.Background(), l, 9, locks.MaxHold(time.Millisecond))
		c.letGo()
		time.Sleep(time.Millisecond) // d revoked, its fn still runs
		synctest.Wait()
		shut := make(chan error, 1)
		go func() { shut <- st.Shutdown(context.Background()) }()
		synctest.Wait()
		select {
		case err := <-shut:
			t.Fatalf("Shutdown returned %v while a revoked holder's fn still runs", err)
		default:
		}
		d.letGo()
		require.NoError(t, <-shut)
		requireEnded(t, d, locks.Lost)
	})
}
