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
// call: the waiter below sees its line move (the holder revoked, the head
// granted, a waiter ahead cancelled) and must still fail at call+wait.
// maxHold is counted once from the grant.
func TestWaitCountedOnceFromCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newStore(t)
		l := newLock(t, s, "inv")
		h := startHold(l, 9, locks.MaxHold(12*time.Millisecond))
		synctest.Wait()
		w1 := startHold(l, 9, locks.MaxHold(100*time.Millisecond))
		time.Sleep(5 * time.Millisecond)
		w2 := startHold(l, 9, locks.Wait(30*time.Millisecond)) // called at 5 ms: fails at 35 ms
		synctest.Wait()
		w3 := startHold(l, 9, locks.Wait(time.Hour))
		synctest.Wait()
		time.Sleep(7 * time.Millisecond) // 12 ms: h revoked, w1 granted, w2 at the head
		synctest.Wait()
		requireHolding(t, w1)
		time.Sleep(23*time.Millisecond - time.Nanosecond)
		synctest.Wait()
		requireWaiting(t, w2)
		time.Sleep(time.Nanosecond) // 35 ms
		synctest.Wait()
		requireEnded(t, w2, locks.InUse)
		require.Equal(t, 30*time.Millisecond, w2.EndedAt())
		requireHolding(t, w1)
		l1 := w1.Lease()
		require.Equal(t, 100*time.Millisecond, l1.Deadline.Sub(l1.Granted), "maxHold counted from the grant")
		time.Sleep(77*time.Millisecond - time.Nanosecond) // 12+100 ms, less a nanosecond
		synctest.Wait()
		requireHolding(t, w1)
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		requireHolding(t, w3)
		h.Let(nil)
		w1.Let(nil)
		w3.Let(nil)
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
		s := newStore(t)
		l := newLock(t, s, "inv")
		h := startHold(l, 9, locks.MaxHold(10*time.Millisecond))
		synctest.Wait()
		w := startHold(l, 9, locks.Wait(10*time.Millisecond))
		synctest.Wait()
		m := startHold(l, "m")
		synctest.Wait()
		wm := startHold(l, "m", locks.Wait(10*time.Millisecond), locks.MaxHold(20*time.Millisecond))
		synctest.Wait()
		time.Sleep(5 * time.Millisecond)
		h.Let(nil) // w granted at 5 ms, with no maxHold; h's maxHold was for 10 ms
		m.Let(nil) // wm granted at 5 ms: revoked at 25 ms, not at 10
		synctest.Wait()
		requireHolding(t, w)
		requireHolding(t, wm)
		time.Sleep(time.Hour)
		synctest.Wait()
		requireHolding(t, w, "a stale timer ended the grant")
		ended, _ := wm.Ended()
		require.False(t, ended)
		require.Equal(t, 5*time.Millisecond+20*time.Millisecond, wm.Lease().Deadline.Sub(wm.start))
		w.Let(nil)
		wm.Let(nil)
		synctest.Wait()
		requireEnded(t, w, 0)
		requireEnded(t, wm, locks.Lost)

		// The same holder record for wait and maxHold: revoked exactly once,
		// at grant+maxHold, whatever its wait was.
		h = startHold(l, 9)
		synctest.Wait()
		w = startHold(l, 9, locks.Wait(10*time.Millisecond), locks.MaxHold(20*time.Millisecond))
		synctest.Wait()
		next := startHold(l, 9, locks.Wait(time.Hour))
		synctest.Wait()
		time.Sleep(9 * time.Millisecond)
		h.Let(nil)
		synctest.Wait()
		time.Sleep(20*time.Millisecond - time.Nanosecond)
		synctest.Wait()
		requireHolding(t, w)
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		requireHolding(t, next)
		w.Let(nil)
		next.Let(nil)
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
					s := newStore(t)
					l := newLock(t, s, "inv")
					time.Sleep(3 * time.Millisecond) // not at the wheel's origin
					var c, h *call
					if asMaxHold {
						c = startHold(l, 9, locks.MaxHold(d))
						synctest.Wait()
						h = startHold(l, 9, locks.Wait(math.MaxInt64))
					} else {
						h = startHold(l, 9)
						synctest.Wait()
						c = startHold(l, 9, locks.Wait(d))
					}
					synctest.Wait()
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
						c.Let(nil)
						synctest.Wait()
						requireEnded(t, c, locks.Lost)
					} else {
						requireEnded(t, c, locks.InUse)
						require.Equal(t, fire, c.EndedAt())
					}
					h.Let(nil)
					synctest.Wait()
				})
			})
		}
	}
	t.Run("zero, negative and math.MaxInt64", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := newStore(t)
			l := newLock(t, s, "inv")
			h := startHold(l, 9, locks.MaxHold(0))
			synctest.Wait()
			require.True(t, h.Lease().Deadline.IsZero(), "MaxHold(0) is off")
			now := startHold(l, 9, locks.Wait(0))
			synctest.Wait()
			requireEnded(t, now, locks.InUse)
			require.Zero(t, now.EndedAt(), "Wait(0) waits")
			for _, o := range []locks.Option{locks.Wait(-1), locks.MaxHold(-time.Hour), locks.Wait(math.MinInt64)} {
				bad := startHold(l, 9, o)
				synctest.Wait()
				requireEnded(t, bad, locks.Invalid)
			}
			long := startHold(l, 9, locks.Wait(math.MaxInt64), locks.MaxHold(math.MaxInt64))
			synctest.Wait()
			time.Sleep(100000 * time.Hour)
			synctest.Wait()
			requireWaiting(t, long)
			h.Let(nil)
			synctest.Wait()
			requireHolding(t, long)
			time.Sleep(100000 * time.Hour)
			synctest.Wait()
			requireHolding(t, long, "a maxHold of math.MaxInt64 fired")
			long.Let(nil)
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
				s := newStore(t)
				l := newLock(t, s, "inv")
				var chain []*call
				for range 5 {
					chain = append(chain, startHold(l, 9, locks.MaxHold(m), locks.Wait(time.Hour)))
					synctest.Wait()
				}
				for i, c := range chain {
					require.Equal(t, time.Duration(i)*time.Millisecond, c.GrantedAt(), "holder %d", i)
					requireHolding(t, c, "holder %d", i)
					time.Sleep(time.Millisecond)
					synctest.Wait()
				}
				for _, c := range chain {
					c.Let(nil)
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
		s := newStore(t)
		l := newLock(t, s, "inv")
		h := startHold(l, 9)
		synctest.Wait()
		w := startHold(l, 9, locks.Wait(time.Millisecond))
		time.Sleep(time.Millisecond)
		synctest.Wait()
		requireEnded(t, w, locks.InUse)
		far := startHold(l, "far-holder")
		synctest.Wait()
		farWait := startHold(l, "far-holder", locks.Wait(5000*time.Hour))
		synctest.Wait()
		for _, idle := range []time.Duration{1000 * time.Hour, 1000*time.Hour + 7*time.Millisecond} {
			time.Sleep(idle)
			synctest.Wait()
			requireWaiting(t, farWait)
			w := startHold(l, 9, locks.Wait(time.Millisecond))
			time.Sleep(time.Millisecond - time.Nanosecond)
			synctest.Wait()
			requireWaiting(t, w)
			time.Sleep(time.Nanosecond)
			synctest.Wait()
			requireEnded(t, w, locks.InUse)
		}
		h.Let(nil)
		far.Let(nil)
		synctest.Wait()
		farWait.Let(nil)
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
		s := newStore(t)
		l := newLock(t, s, "inv")
		h := startHold(l, 9)
		synctest.Wait()
		parent, cancel := context.WithCancel(context.Background())
		for i := range 1000 {
			startCall(parent, l, 9, false, locks.Wait(time.Duration(i+1)*time.Millisecond))
		}
		synctest.Wait()
		cancel()
		synctest.Wait()
		w := startHold(l, 9, locks.Wait(time.Hour))
		synctest.Wait()
		time.Sleep(2 * time.Second)
		synctest.Wait()
		requireWaiting(t, w)
		h.Let(nil)
		synctest.Wait()
		requireHolding(t, w)
		w.Let(nil)
		synctest.Wait()
	})
}
