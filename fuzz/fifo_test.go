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
// would see. The same cases are FuzzStore seeds (see README.md).

// A waiter cancelled at the head of the line: the one behind it must still
// be woken at the next release.
func TestHeadWaiterCancelledNextIsWoken(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newStore(t)
		l := newLock(t, s, "inv")
		h := startHold(l, 9)
		synctest.Wait()
		w1 := startHold(l, 9)
		synctest.Wait()
		w2 := startHold(l, int64(9))
		synctest.Wait()
		w1.cancel()
		synctest.Wait()
		requireEnded(t, w1, locks.Canceled)
		h.Let(nil)
		synctest.Wait()
		requireHolding(t, w2)
		require.Greater(t, w2.Fence(), h.Fence())
		w2.Let(nil)
		synctest.Wait()
		requireEnded(t, w2, 0)
		requireFree(t, l, "9")
	})
}

// A waiter timed out at the head of the line: the one behind it must still
// be woken at the next release.
func TestHeadWaiterTimedOutNextIsWoken(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newStore(t)
		l := newLock(t, s, "inv")
		h := startHold(l, 9)
		synctest.Wait()
		w1 := startHold(l, 9, locks.Wait(10*time.Millisecond))
		synctest.Wait()
		w2 := startHold(l, 9, locks.Wait(time.Second))
		time.Sleep(10 * time.Millisecond)
		synctest.Wait()
		requireEnded(t, w1, locks.InUse)
		requireWaiting(t, w2)
		h.Let(nil)
		synctest.Wait()
		requireHolding(t, w2)
		w2.Let(nil)
		synctest.Wait()
		requireFree(t, l, 9)
	})
}

// A release landing between a waiter's check of the key and its park (a
// lost wake-up) would leave the waiter asleep until its wait ends, an hour
// here: no time may pass before it holds.
func TestLostWakeupReleaseBeforePark(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newStore(t)
		l := newLock(t, s, "inv")
		for i := range 300 {
			h := startHold(l, 9)
			synctest.Wait()
			start := time.Now()
			w := startHold(l, 9, locks.Wait(time.Hour))
			if i%2 == 0 {
				h.Let(nil) // the waiter's goroutine and the release run at once
			} else {
				go h.Let(nil)
			}
			synctest.Wait()
			requireHolding(t, w, "round %d", i)
			require.Zero(t, time.Since(start), "round %d: the waiter slept", i)
			w.Let(nil)
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
		s := newStore(t)
		l := newLock(t, s, "inv")
		var ran, left int
		for i := range 300 {
			h := startHold(l, 9)
			synctest.Wait()
			w := startHold(l, 9)
			synctest.Wait()
			next := startHold(l, 9)
			synctest.Wait()
			if i%2 == 0 {
				go w.cancel()
				go h.Let(nil)
			} else {
				go h.Let(nil)
				go w.cancel()
			}
			synctest.Wait()
			if w.Ran() {
				ran++
				requireHolding(t, w, "round %d", i)
				requireWaiting(t, next)
				w.Let(nil)
				synctest.Wait()
				requireEnded(t, w, 0) // what fn returned
			} else {
				left++
				ended, err := w.Ended()
				require.True(t, ended, "round %d: the cancelled waiter neither ran nor left", i)
				require.ErrorIs(t, err, context.Canceled)
				requireEnded(t, w, locks.Canceled)
			}
			requireHolding(t, next, "round %d: the key went to nobody", i)
			next.Let(nil)
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
		s := newStore(t)
		l := newLock(t, s, "inv")
		for i := range 200 {
			h := startHold(l, 9)
			synctest.Wait()
			w := startHold(l, 9, locks.Wait(10*time.Millisecond))
			synctest.Wait()
			next := startHold(l, 9, locks.Wait(time.Hour))
			time.Sleep(10 * time.Millisecond)
			h.Let(nil) // at the instant of w's deadline, while the timer fires
			synctest.Wait()
			if w.Ran() {
				requireHolding(t, w, "round %d", i)
				w.Let(nil)
				synctest.Wait()
				requireEnded(t, w, 0)
			} else {
				requireEnded(t, w, locks.InUse)
			}
			requireHolding(t, next, "round %d: the key went to nobody", i)
			next.Let(nil)
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
		s := newStore(t, locks.Shards(1))
		l := newLock(t, s, "inv")
		h := startHold(l, 9)
		synctest.Wait()
		parent, cancel := context.WithCancel(context.Background())
		w1 := startCall(parent, l, 9, false)
		synctest.Wait()
		w2 := startCall(parent, l, 9, false)
		synctest.Wait()
		t1 := startHold(l, 9, locks.Wait(5*time.Millisecond))
		synctest.Wait()
		t2 := startHold(l, 9, locks.Wait(5*time.Millisecond))
		synctest.Wait()
		w3 := startHold(l, 9)
		synctest.Wait()
		cancel()
		synctest.Wait()
		requireEnded(t, w1, locks.Canceled)
		requireEnded(t, w2, locks.Canceled)
		time.Sleep(5 * time.Millisecond)
		synctest.Wait()
		requireEnded(t, t1, locks.InUse)
		requireEnded(t, t2, locks.InUse)
		h.Let(nil)
		synctest.Wait()
		requireHolding(t, w3)
		w3.Let(nil)
		synctest.Wait()
		requireFree(t, l, 9)

		// Both at once, racing the release of the holder too.
		h = startHold(l, 9)
		synctest.Wait()
		parent, cancel = context.WithCancel(context.Background())
		w1 = startCall(parent, l, 9, false)
		synctest.Wait()
		w2 = startCall(parent, l, 9, false)
		synctest.Wait()
		w3 = startHold(l, 9)
		synctest.Wait()
		go cancel()
		h.Let(nil)
		synctest.Wait()
		for _, w := range []*call{w1, w2} {
			if w.Ran() {
				w.Let(nil)
				synctest.Wait()
			}
		}
		requireHolding(t, w3)
		w3.Let(nil)
		synctest.Wait()
		requireFree(t, l, 9)
	})
}

// A fast release-and-hold loop in one goroutine must not starve a queued
// waiter: the key passes to the waiter at the loop's first release, and the
// loop's next Hold waits behind it; its TryHold gets nothing.
func TestReleaseHoldLoopDoesNotStarve(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newStore(t)
		l := newLock(t, s, "inv")
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
				if ok, _ := l.TryHold(context.Background(), 9, func(context.Context, *locks.Lease) error { return nil }); ok {
					tries.Add(1)
				}
			}
		}()
		synctest.Wait()
		w := startHold(l, 9)
		synctest.Wait()
		close(first)
		synctest.Wait()
		requireHolding(t, w)
		require.EqualValues(t, 1, rounds.Load(), "the loop held again while a waiter was in line")
		require.Zero(t, tries.Load(), "the loop's TryHold took the key from a waiter")
		w.Let(nil)
		<-loopDone
		require.EqualValues(t, 100, rounds.Load())
	})
}

// TryHold never barges: while someone is in line the key is never free, not
// even for an instant at a release.
func TestTryHoldNeverBarges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newStore(t)
		l := newLock(t, s, "inv")
		for range 200 {
			h := startHold(l, 9)
			synctest.Wait()
			w := startHold(l, 9)
			synctest.Wait()
			got := make(chan bool)
			go func() {
				ok, _ := l.TryHold(context.Background(), 9, func(context.Context, *locks.Lease) error { return nil })
				got <- ok
			}()
			h.Let(nil)
			require.False(t, <-got, "TryHold took a key someone waits for")
			synctest.Wait()
			requireHolding(t, w)
			w.Let(nil)
			synctest.Wait()
		}
	})
}

// A revoked holder's late release must not free its successor's key, nor
// touch the line; a second "release" (the revoked holder's, after its
// successor's) changes nothing either.
func TestRevokedHolderLateRelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newStore(t)
		l := newLock(t, s, "invoices")
		a := startHold(l, "m", locks.MaxHold(5*time.Millisecond))
		synctest.Wait()
		b := startHold(l, "m")
		synctest.Wait()
		c := startHold(l, "m")
		time.Sleep(5 * time.Millisecond)
		synctest.Wait()
		requireHolding(t, b)
		require.Greater(t, b.Fence(), a.Fence())
		var e *locks.Error
		require.True(t, errors.As(context.Cause(a.Ctx()), &e), "the revoked fn's context: %v", context.Cause(a.Ctx()))
		require.Equal(t, locks.Lost, e.Kind)

		a.Let(nil) // late
		synctest.Wait()
		requireEnded(t, a, locks.Lost)
		_, err := a.Ended()
		require.EqualError(t, err, `lock invoices: key "m": the lease was lost: it was revoked at its maxHold`)
		requireHolding(t, b)
		requireWaiting(t, c)
		ok, err := l.TryHold(context.Background(), "m", func(context.Context, *locks.Lease) error { return nil })
		require.NoError(t, err)
		require.False(t, ok, "the late release freed the successor's key")

		b.Let(nil)
		synctest.Wait()
		requireHolding(t, c)
		c.Let(nil)
		synctest.Wait()
		requireFree(t, l, "m")
	})
}

// The revoked holder returning after its successor let go (a double release
// of one grant, in effect) must not free the next holder's key, and the
// store must keep counting it as running: Shutdown waits for it.
func TestRevokedHolderReleaseAfterSuccessor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newStore(t)
		l := newLock(t, s, "inv")
		a := startHold(l, 9, locks.MaxHold(5*time.Millisecond))
		synctest.Wait()
		b := startHold(l, 9)
		synctest.Wait()
		c := startHold(l, 9)
		time.Sleep(5 * time.Millisecond)
		synctest.Wait()
		b.Let(nil)
		synctest.Wait()
		requireHolding(t, c)
		a.Let(errFn) // the revoked holder returns last
		synctest.Wait()
		requireEnded(t, a, locks.Lost)
		_, err := a.Ended()
		require.ErrorIs(t, err, errFn, "Lost wraps fn's own error")
		requireHolding(t, c)

		d := startHold(l, 9, locks.MaxHold(time.Millisecond))
		synctest.Wait()
		c.Let(nil)
		time.Sleep(time.Millisecond) // d revoked, its fn still runs
		synctest.Wait()
		shut := make(chan error, 1)
		go func() { shut <- s.Shutdown(context.Background()) }()
		synctest.Wait()
		select {
		case err := <-shut:
			t.Fatalf("Shutdown returned %v while a revoked holder's fn still runs", err)
		default:
		}
		d.Let(nil)
		require.NoError(t, <-shut)
		requireEnded(t, d, locks.Lost)
	})
}

// Two handles of one lock name share the line; the same key text under
// another name is another key, and integer, string and named-type keys of
// one text are one key.
func TestHandlesShareTheLine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newStore(t, locks.Shards(1))
		a, b := newLock(t, s, "inv"), newLock(t, s, "inv", locks.Wait(time.Hour))
		other := newLock(t, s, "other")
		h := startHold(a, 9)
		synctest.Wait()
		w := startHold(b, invoiceID("9"))
		o := startHold(other, "9")
		synctest.Wait()
		requireWaiting(t, w)
		requireHolding(t, o)
		h.Let(nil)
		synctest.Wait()
		requireHolding(t, w)
		w.Let(nil)
		o.Let(nil)
		synctest.Wait()
	})
}
