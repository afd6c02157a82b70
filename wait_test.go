package locks_test

import (
	"context"
	"math"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/holdline/locks"
)

// tick is the default resolution of a store's timer wheel: deadlines are
// rounded up to it, never down.
const tick = locks.DefaultTick

// timedWait is a Hold on a held key that records how long it waited.
type timedWait struct {
	done    chan struct{}
	err     error
	elapsed time.Duration
}

func startTimedWait(t *testing.T, ctx context.Context, l *locks.Lock, key any, opts ...locks.Option) *timedWait {
	w := &timedWait{done: make(chan struct{})}
	start := time.Now()
	go func() {
		defer close(w.done)
		w.err = l.Hold(ctx, key, mustNotRun(t), opts...)
		w.elapsed = time.Since(start)
	}()
	return w
}

// TestWaitTiming: past its wait, counted from the call (not from when the
// key was held), a waiter fails InUse with the exact message; never
// before its time, and within one tick after it. The default wait is
// 10 s. Fake clock (synctest).
func TestWaitTiming(t *testing.T) {
	require.Equal(t, 10*time.Second, locks.DefaultWait)
	cases := []struct {
		name string
		opts []locks.Option
		want time.Duration
	}{
		{"default", nil, 10 * time.Second},
		{"Wait(10s)", []locks.Option{locks.Wait(10 * time.Second)}, 10 * time.Second},
		{"Wait(1ns)", []locks.Option{locks.Wait(time.Nanosecond)}, time.Nanosecond},
		{"Wait(1ms)", []locks.Option{locks.Wait(time.Millisecond)}, time.Millisecond},
		{"Wait(1.5ms)", []locks.Option{locks.Wait(1500 * time.Microsecond)}, 1500 * time.Microsecond},
		{"Wait(63ms)", []locks.Option{locks.Wait(63 * time.Millisecond)}, 63 * time.Millisecond},
		{"Wait(64ms)", []locks.Option{locks.Wait(64 * time.Millisecond)}, 64 * time.Millisecond},
		{"Wait(65ms)", []locks.Option{locks.Wait(65 * time.Millisecond)}, 65 * time.Millisecond},
		{"Wait(250ms)", []locks.Option{locks.Wait(250 * time.Millisecond)}, 250 * time.Millisecond},
		{"Wait(4.096s)", []locks.Option{locks.Wait(4096 * time.Millisecond)}, 4096 * time.Millisecond},
		{"Wait(30s)", []locks.Option{locks.Wait(30 * time.Second)}, 30 * time.Second},
		{"Wait(2m)", []locks.Option{locks.Wait(2 * time.Minute)}, 2 * time.Minute},
		{"Wait(3h)", []locks.Option{locks.Wait(3 * time.Hour)}, 3 * time.Hour},
		{"Wait(400d)", []locks.Option{locks.Wait(400 * 24 * time.Hour)}, 400 * 24 * time.Hour},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				_, l := newLock(t)
				h := holding(t, l, 9)
				// Call a minute after the holder was granted, off the tick:
				// the wait counts from the call, rounded up to the tick.
				time.Sleep(time.Minute + 1234567*time.Nanosecond)
				w := startTimedWait(t, context.Background(), l, 9, c.opts...)

				if c.want > time.Nanosecond {
					time.Sleep(c.want - time.Nanosecond)
					synctest.Wait()
					require.False(t, isClosed(w.done), "failed before its wait")
				}
				time.Sleep(tick + time.Nanosecond)
				synctest.Wait()
				require.True(t, isClosed(w.done), "still waiting a tick after its wait")
				require.EqualError(t, w.err, `lock invoices: key "9": held past the hold's wait: in use`)
				require.GreaterOrEqual(t, w.elapsed, c.want, "fired early")
				require.LessOrEqual(t, w.elapsed, c.want+tick, "fired late")

				// The holder kept the key throughout.
				requireHeld(t, l, 9)
				require.NoError(t, h.finish())
			})
		})
	}
}

// TestWaitZeroDoesNotWait: Wait(0) fails InUse at once on a held key, and
// holds a free key.
func TestWaitZeroDoesNotWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, l := newLock(t)
		require.NoError(t, l.Hold(context.Background(), 9, nop, locks.Wait(0)))
		h := holding(t, l, 9)
		start := time.Now()
		err := l.Hold(context.Background(), 9, mustNotRun(t), locks.Wait(0))
		require.Zero(t, time.Since(start))
		require.EqualError(t, err, `lock invoices: key "9": held past the hold's wait: in use`)
		require.NoError(t, h.finish())
	})
}

// TestVeryLongWaits: hours, years and math.MaxInt64 work: such a waiter does
// not fail at once nor soon, and is granted when the key is let go.
func TestVeryLongWaits(t *testing.T) {
	for _, d := range []time.Duration{
		time.Hour,
		1000 * time.Hour,
		100 * 365 * 24 * time.Hour,
		math.MaxInt64 / 2,
		math.MaxInt64 - 1,
		math.MaxInt64,
	} {
		t.Run(d.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				_, l := newLock(t)
				h := holding(t, l, 9)
				w := queued(t, context.Background(), l, 9, locks.Wait(d))
				require.False(t, isClosed(w.done), "failed at once")
				time.Sleep(min(d-time.Nanosecond, 500*24*time.Hour))
				synctest.Wait()
				require.False(t, isClosed(w.done), "failed early")
				require.NoError(t, h.finish())
				<-w.granted
				require.NoError(t, w.finish())
			})
		})
	}
}

// TestVeryLongWaitFiresAtItsTime: a wait of a year fails at a year, not
// before; a longer one queued beside it is untouched.
func TestVeryLongWaitFiresAtItsTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const year = 365 * 24 * time.Hour
		_, l := newLock(t)
		h := holding(t, l, 9)
		w := startTimedWait(t, context.Background(), l, 9, locks.Wait(year))
		forever := startHold(t, context.Background(), l, 9, locks.Wait(math.MaxInt64))
		time.Sleep(year - time.Nanosecond)
		synctest.Wait()
		require.False(t, isClosed(w.done))
		time.Sleep(tick + time.Nanosecond)
		synctest.Wait()
		require.True(t, isClosed(w.done))
		require.ErrorIs(t, w.err, locks.ErrInUse)
		require.GreaterOrEqual(t, w.elapsed, year)
		require.LessOrEqual(t, w.elapsed, year+tick)
		require.False(t, isClosed(forever.done))
		require.NoError(t, h.finish())
		<-forever.granted
		require.NoError(t, forever.finish())
	})
}

// TestWaiterKeepsOriginalDeadline: a deadline is counted once, from the
// call: a waiter whose line moved (the holder let go to the one ahead, a
// waiter ahead left) still fails at its original time.
func TestWaiterKeepsOriginalDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, l := newLock(t)
		h := holding(t, l, 9)
		ctx, cancel := context.WithCancel(context.Background())
		gone := queued(t, ctx, l, 9, locks.Wait(time.Hour))
		ahead := queued(t, context.Background(), l, 9, locks.Wait(time.Hour))
		w := startTimedWait(t, context.Background(), l, 9, locks.Wait(10*time.Second))

		time.Sleep(3 * time.Second)
		cancel() // the head leaves
		require.ErrorIs(t, gone.wait(), context.Canceled)
		time.Sleep(3 * time.Second)
		require.NoError(t, h.finish()) // the key passes to the one ahead
		<-ahead.granted
		time.Sleep(3 * time.Second)
		synctest.Wait()
		require.False(t, isClosed(w.done))

		time.Sleep(time.Second + tick)
		synctest.Wait()
		require.True(t, isClosed(w.done), "the deadline moved")
		require.ErrorIs(t, w.err, locks.ErrInUse)
		require.Equal(t, 10*time.Second, w.elapsed)
		require.NoError(t, ahead.finish())
	})
}

// TestWaiterContextDeadline: a waiter whose context's deadline comes before
// its wait leaves at the context's deadline, failing with its error, not
// InUse.
func TestWaiterContextDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, l := newLock(t)
		h := holding(t, l, 9)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		w := startTimedWait(t, ctx, l, 9, locks.Wait(10*time.Second))
		<-w.done
		requireNamesKey(t, w.err, context.DeadlineExceeded, "9")
		require.NotErrorIs(t, w.err, locks.ErrInUse)
		require.Equal(t, 2*time.Second, w.elapsed)
		require.NoError(t, h.finish())
	})
}

// TestWaitRealClock: the one real-time check of a wait: it does not fire
// early, and fires (very generously, for a loaded machine) within seconds.
func TestWaitRealClock(t *testing.T) {
	_, l := newLock(t)
	h := holding(t, l, 9)
	const wait = 50 * time.Millisecond
	start := time.Now()
	err := l.Hold(context.Background(), 9, mustNotRun(t), locks.Wait(wait))
	elapsed := time.Since(start)
	require.ErrorIs(t, err, locks.ErrInUse)
	require.GreaterOrEqual(t, elapsed, wait, "fired early")
	require.Less(t, elapsed, wait+5*time.Second, "fired very late")
	require.NoError(t, h.finish())
}

// TestTimerTickRoundsUp: with a coarser TimerTick, deadlines are rounded up
// to a whole tick: never early, at most one tick late (TimerTick's
// contract).
func TestTimerTickRoundsUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const coarse = 100 * time.Millisecond
		_, l := newLock(t, locks.TimerTick(coarse))
		h := holding(t, l, 9)
		for _, d := range []time.Duration{time.Nanosecond, 50 * time.Millisecond, coarse, 150 * time.Millisecond, 10 * time.Second} {
			w := startTimedWait(t, context.Background(), l, 9, locks.Wait(d))
			<-w.done
			require.ErrorIs(t, w.err, locks.ErrInUse)
			require.GreaterOrEqual(t, w.elapsed, d, "Wait(%v) fired early", d)
			require.LessOrEqual(t, w.elapsed, d+coarse, "Wait(%v) fired more than a tick late", d)
		}
		require.NoError(t, h.finish())

		err := l.Hold(context.Background(), "m", func(ctx context.Context, ls *locks.Lease) error {
			<-ctx.Done()
			elapsed := time.Since(ls.Granted)
			require.GreaterOrEqual(t, elapsed, 250*time.Millisecond)
			require.LessOrEqual(t, elapsed, 250*time.Millisecond+coarse)
			return nil
		}, locks.MaxHold(250*time.Millisecond))
		require.EqualError(t, err, revokedMsg)
	})
}
