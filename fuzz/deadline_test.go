package fuzz

import (
	"context"
	"math"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/holdline/locks"
	"github.com/holdline/locks/timerwheel"
)

// Regression tests for the failure modes seen in the field that concern deadlines
// and the timer wheel behind them, seen from the store: each deadline fires
// at the first tick (1 ms) at or after its instant, never before, once.

// ceilMs rounds d up to a whole millisecond, the store's default tick.
func ceilMs(d time.Duration) time.Duration {
	if c := d / time.Millisecond * time.Millisecond; c < d {
		return c + time.Millisecond
	}
	return d
}

// A deadline re-armed on each wake-up instead of counted once from the
// call: the waiter below sees its line move (the holder revoked at its
// maxHold, the waiter ahead granted) and must still fail at call+wait.
// maxHold is counted once from the grant.
func TestWaitCountedOnceFromCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, l := newLock(t)
		h := holding(t, l, 9, locks.MaxHold(12*time.Millisecond))
		w1 := startHold(t, context.Background(), l, 9, locks.MaxHold(100*time.Millisecond))
		time.Sleep(5 * time.Millisecond)
		w2 := queued(t, context.Background(), l, 9, locks.Wait(30*time.Millisecond)) // called at 5 ms: fails at 35 ms
		w3 := queued(t, context.Background(), l, 9, locks.Wait(time.Hour))
		time.Sleep(7 * time.Millisecond) // 12 ms: h revoked, w1 granted, w2 at the head
		synctest.Wait()
		requireHolding(t, w1)
		time.Sleep(23*time.Millisecond - time.Nanosecond)
		synctest.Wait()
		requireWaiting(t, w2)
		time.Sleep(time.Nanosecond) // 35 ms
		synctest.Wait()
		requireEnded(t, w2, locks.InUse)
		require.Equal(t, 30*time.Millisecond, w2.elapsed)
		requireHolding(t, w1)
		require.Equal(t, 100*time.Millisecond, w1.lease.Deadline.Sub(w1.lease.Granted), "maxHold counted from the grant")
		time.Sleep(77*time.Millisecond - time.Nanosecond) // 12+100 ms, less a nanosecond
		synctest.Wait()
		requireHolding(t, w1)
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		requireHolding(t, w3)
		h.letGo()
		w1.letGo()
		w3.letGo()
		synctest.Wait()
		requireEnded(t, w1, locks.Lost)
	})
}

// A timer left from an earlier wait or grant must not end the current one:
// a waiter granted before its wait ends keeps the key past that instant; a
// holder granted with a maxHold keeps it past its old wait deadline; a key
// whose earlier holder had a maxHold is not revoked at that holder's bound.
func TestStaleTimerDoesNotEndCurrentGrant(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, l := newLock(t)
		h := holding(t, l, 9, locks.MaxHold(10*time.Millisecond))
		w := queued(t, context.Background(), l, 9, locks.Wait(10*time.Millisecond))
		m := holding(t, l, "m")
		wm := queued(t, context.Background(), l, "m", locks.Wait(10*time.Millisecond), locks.MaxHold(20*time.Millisecond))
		time.Sleep(5 * time.Millisecond)
		h.letGo() // w granted at 5 ms, with no maxHold; h's maxHold was for 10 ms
		m.letGo() // wm granted at 5 ms: revoked at 25 ms, not at 10
		synctest.Wait()
		requireHolding(t, w)
		requireHolding(t, wm)
		time.Sleep(time.Hour)
		synctest.Wait()
		requireHolding(t, w, "a stale timer ended the grant")
		require.False(t, isClosed(wm.done))
		require.Equal(t, 5*time.Millisecond+20*time.Millisecond, wm.lease.Deadline.Sub(wm.start))
		w.letGo()
		wm.letGo()
		synctest.Wait()
		requireEnded(t, w, 0)
		requireEnded(t, wm, locks.Lost)

		// The same holder record for wait and maxHold: revoked exactly once,
		// at grant+maxHold, whatever its wait was.
		h = holding(t, l, 9)
		w = queued(t, context.Background(), l, 9, locks.Wait(10*time.Millisecond), locks.MaxHold(20*time.Millisecond))
		next := queued(t, context.Background(), l, 9, locks.Wait(time.Hour))
		time.Sleep(9 * time.Millisecond)
		h.letGo()
		synctest.Wait()
		time.Sleep(20*time.Millisecond - time.Nanosecond)
		synctest.Wait()
		requireHolding(t, w)
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		requireHolding(t, next)
		w.letGo()
		next.letGo()
		synctest.Wait()
	})
}

// Durations at and around the spans of the timer wheel's levels (64^L
// ticks), one tick either side, sub-tick ones, and the extremes, as waits
// and as maxHolds: each fires at the first tick at or after its instant,
// not a nanosecond before. Zero means "do not wait" (or no maxHold), a
// negative one is invalid, and math.MaxInt64 never fires.
func TestDeadlinesAtWheelBoundaries(t *testing.T) {
	ds := []time.Duration{time.Nanosecond, 999 * time.Microsecond, time.Millisecond,
		time.Millisecond + time.Nanosecond, 1500 * time.Microsecond,
		63 * time.Millisecond, 64 * time.Millisecond, 65 * time.Millisecond,
		4095 * time.Millisecond, 4096 * time.Millisecond, 4097 * time.Millisecond,
		262143 * time.Millisecond, 262144 * time.Millisecond, 262145 * time.Millisecond,
		64 * 64 * 64 * 64 * time.Millisecond, 64*64*64*64*time.Millisecond + time.Millisecond}
	for _, d := range ds {
		for _, asMaxHold := range []bool{false, true} {
			name := "wait=" + d.String()
			if asMaxHold {
				name = "maxHold=" + d.String()
			}
			t.Run(name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					_, l := newLock(t)
					time.Sleep(3 * time.Millisecond) // not at the wheel's origin
					var c, h *hold
					if asMaxHold {
						c = holding(t, l, 9, locks.MaxHold(d))
						h = queued(t, context.Background(), l, 9, locks.Wait(math.MaxInt64))
					} else {
						h = holding(t, l, 9)
						c = queued(t, context.Background(), l, 9, locks.Wait(d))
					}
					fire := ceilMs(d)
					time.Sleep(fire - time.Nanosecond)
					synctest.Wait()
					if asMaxHold {
						requireHolding(t, c, "revoked early")
						requireWaiting(t, h)
					} else {
						requireWaiting(t, c)
					}
					time.Sleep(time.Nanosecond)
					synctest.Wait()
					if asMaxHold {
						requireHolding(t, h, "not revoked on time")
						c.letGo()
						synctest.Wait()
						requireEnded(t, c, locks.Lost)
					} else {
						requireEnded(t, c, locks.InUse)
						require.Equal(t, fire, c.elapsed)
					}
					h.letGo()
					synctest.Wait()
				})
			})
		}
	}
	t.Run("zero, negative and math.MaxInt64", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			_, l := newLock(t)
			h := holding(t, l, 9, locks.MaxHold(0))
			require.True(t, h.lease.Deadline.IsZero(), "MaxHold(0) is off")
			now := queued(t, context.Background(), l, 9, locks.Wait(0))
			requireEnded(t, now, locks.InUse)
			require.Zero(t, now.elapsed, "Wait(0) waits")
			for _, o := range []locks.Option{locks.Wait(-1), locks.MaxHold(-time.Hour), locks.Wait(math.MinInt64)} {
				bad := queued(t, context.Background(), l, 9, o)
				requireEnded(t, bad, locks.Invalid)
			}
			long := queued(t, context.Background(), l, 9, locks.Wait(math.MaxInt64), locks.MaxHold(math.MaxInt64))
			time.Sleep(100000 * time.Hour)
			synctest.Wait()
			requireWaiting(t, long)
			h.letGo()
			synctest.Wait()
			requireHolding(t, long)
			time.Sleep(100000 * time.Hour)
			synctest.Wait()
			requireHolding(t, long, "a maxHold of math.MaxInt64 fired")
			long.letGo()
			synctest.Wait()
			requireEnded(t, long, 0)
		})
	})
}

// A timer added while its bucket is being expired must still fire: a chain
// of holders with 1 ms (and 1 ns) maxHolds, each armed by the expiry of the
// one before, in the timer goroutine's own pass.
func TestTimerArmedDuringExpiry(t *testing.T) {
	for _, m := range []time.Duration{time.Nanosecond, time.Millisecond} {
		t.Run("maxHold="+m.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				_, l := newLock(t)
				var chain []*hold
				for range 5 {
					chain = append(chain, queued(t, context.Background(), l, 9, locks.MaxHold(m), locks.Wait(time.Hour)))
				}
				for i, c := range chain {
					requireHolding(t, c, "holder %d", i)
					require.Equal(t, time.Duration(i)*time.Millisecond, c.grantedAfter, "holder %d", i)
					time.Sleep(time.Millisecond)
					synctest.Wait()
				}
				for _, c := range chain {
					c.letGo()
				}
				synctest.Wait()
				for _, c := range chain {
					requireEnded(t, c, locks.Lost)
				}
				requireFree(t, l, 9)
			})
		})
	}
}

// A wheel idle for a long time (a thousand hours, with and without a far
// deadline pending) and then given a short deadline fires it on time.
func TestIdleStoreThenShortDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, l := newLock(t)
		h := holding(t, l, 9)
		w := startHold(t, context.Background(), l, 9, locks.Wait(time.Millisecond))
		time.Sleep(time.Millisecond)
		synctest.Wait()
		requireEnded(t, w, locks.InUse)
		shortWait := func() {
			w := startHold(t, context.Background(), l, 9, locks.Wait(time.Millisecond))
			time.Sleep(time.Millisecond - time.Nanosecond)
			synctest.Wait()
			requireWaiting(t, w)
			time.Sleep(time.Nanosecond)
			synctest.Wait()
			requireEnded(t, w, locks.InUse)
		}
		time.Sleep(1000 * time.Hour) // nothing pending
		shortWait()
		far := holding(t, l, "far-holder")
		farWait := queued(t, context.Background(), l, "far-holder", locks.Wait(5000*time.Hour))
		for _, idle := range []time.Duration{1000 * time.Hour, 1000*time.Hour + 7*time.Millisecond} {
			time.Sleep(idle)
			synctest.Wait()
			requireWaiting(t, farWait)
			shortWait()
		}
		h.letGo()
		far.letGo()
		synctest.Wait()
		farWait.letGo()
		synctest.Wait()
		requireEnded(t, farWait, 0)
	})
}

// Cancelled timers must not keep memory until their slot comes round: the
// wheel forgets each at once (Len, Next), at every level.
func TestCancelledTimersFreedAtOnce(t *testing.T) {
	w := timerwheel.New[int](time.Millisecond, 0)
	timers := make([]timerwheel.Timer[int], 10000)
	for i := range timers {
		w.Schedule(&timers[i], time.Duration(i+1)*time.Duration(i+1)*time.Millisecond*997)
	}
	require.Equal(t, len(timers), w.Len())
	for i := range timers {
		require.True(t, w.Cancel(&timers[i]))
		require.False(t, timers[i].Scheduled())
		require.Equal(t, len(timers)-i-1, w.Len())
	}
	_, ok := w.Next()
	require.False(t, ok, "an empty wheel reports a next instant")
	require.Empty(t, w.Advance(math.MaxInt64, nil))

	// At the store: waiters cancelled in their thousands leave nothing that
	// fires later.
	synctest.Test(t, func(t *testing.T) {
		_, l := newLock(t)
		h := holding(t, l, 9)
		parent, cancel := context.WithCancel(context.Background())
		for i := range 1000 {
			startHold(t, parent, l, 9, locks.Wait(time.Duration(i+1)*time.Millisecond))
		}
		synctest.Wait()
		cancel()
		synctest.Wait()
		w := queued(t, context.Background(), l, 9, locks.Wait(time.Hour))
		time.Sleep(2 * time.Second)
		synctest.Wait()
		requireWaiting(t, w)
		h.letGo()
		synctest.Wait()
		requireHolding(t, w)
		w.letGo()
		synctest.Wait()
	})
}
