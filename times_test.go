package locks_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/holdline/locks"
)

// TestStatsGaugesAndTimes: Stats counts waiters now, revocations by
// reason, and with RecordTimes how long waiters stood in line and keys
// were held, in the histogram's buckets.
func TestStatsGaugesAndTimes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newStore(t, locks.RecordTimes())
		l := openLock(t, st, name)
		h := holding(t, l, 9)
		w := queued(t, context.Background(), l, 9, locks.Wait(time.Hour))
		require.Equal(t, 1, st.Stats().Waiting)
		time.Sleep(30 * time.Millisecond) // the holder holds 30 ms, the waiter waits as long
		require.NoError(t, h.finish())
		<-w.granted
		time.Sleep(2 * time.Second)
		require.NoError(t, w.finish())

		require.ErrorIs(t, l.Hold(context.Background(), "m", func(ctx context.Context, _ *locks.Lease) error {
			<-ctx.Done()
			return nil
		}, locks.MaxHold(time.Second)), locks.ErrLost)

		s := st.Stats()
		require.Zero(t, s.Waiting)
		require.Equal(t, uint64(1), s.Revoked)
		require.Equal(t, uint64(1), s.RevokedMaxHold)
		require.Zero(t, s.RevokedTTL)
		require.Zero(t, s.RevokedClosed)

		var wait locks.Histogram
		wait.Counts[3] = 1 // 30 ms: above 25 ms, at most 50 ms
		wait.Sum = 0.030
		require.True(t, s.TimesRecorded)
		require.Equal(t, wait, s.WaitTimes)
		require.Equal(t, uint64(3), s.HoldTimes.Count())
		require.Equal(t, uint64(1), s.HoldTimes.Counts[3], "30 ms")
		require.Equal(t, uint64(1), s.HoldTimes.Counts[7], "1 s")
		require.Equal(t, uint64(1), s.HoldTimes.Counts[8], "2 s")
		require.InDelta(t, 3.030, s.HoldTimes.Sum, 1e-9)

		require.NoError(t, st.Close())
		require.False(t, newStore(t).Stats().TimesRecorded, "off unless asked for")
	})
}

// TestHoldTimesSumShortHolds: HoldTimes.Sum is the total time held to the
// nanosecond, short holds included (whole microseconds lost 0.5 µs a hold
// here, and all of a hold under one).
func TestHoldTimesSumShortHolds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newStore(t, locks.RecordTimes())
		l := openLock(t, st, name)
		for range 1000 {
			require.NoError(t, l.Hold(context.Background(), 9, func(context.Context, *locks.Lease) error {
				time.Sleep(1500 * time.Nanosecond)
				return nil
			}))
		}
		require.NoError(t, l.Hold(context.Background(), 9, func(context.Context, *locks.Lease) error {
			time.Sleep(300 * time.Nanosecond)
			return nil
		}))
		times := st.Stats().HoldTimes
		require.Equal(t, uint64(1001), times.Count())
		require.InDelta(t, 1000*1.5e-6+0.3e-6, times.Sum, 1e-12)
	})
}
