package locks_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/holdline/locks"
)

// TestStats counts each kind of event once, and what is held and running
// now.
func TestStats(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, l := newLock(t)
		require.Equal(t, locks.Stats{}, st.Stats(), "a new store")

		require.NoError(t, l.Hold(context.Background(), 1, nop))
		require.Equal(t, locks.Stats{Grants: 1}, st.Stats(), "a hold of a free key")

		h := holding(t, l, 9)
		require.Equal(t, locks.Stats{Grants: 2, Keys: 1, Running: 1}, st.Stats(), "a key held")

		// A waiter whose wait passes.
		require.ErrorIs(t, l.Hold(context.Background(), 9, nop, locks.Wait(time.Second)), locks.ErrInUse)
		// A waiter whose context ends.
		ctx, cancel := context.WithCancel(context.Background())
		w := queued(t, ctx, l, 9)
		cancel()
		require.ErrorIs(t, w.wait(), context.Canceled)
		// A waiter granted.
		g := queued(t, context.Background(), l, 9)
		require.Equal(t, 1, st.Stats().Waiting, "one in line")
		require.NoError(t, h.finish())
		<-g.granted
		require.Equal(t, locks.Stats{Grants: 3, Waits: 3, TimedOut: 1, Canceled: 1, Keys: 1, Running: 1}, st.Stats())
		require.NoError(t, g.finish())

		// A lease revoked at its maxHold, whose function then returns.
		m := startHold(t, context.Background(), l, "m", locks.MaxHold(time.Second))
		<-m.granted
		time.Sleep(time.Second)
		synctest.Wait()
		require.Equal(t, locks.Stats{Grants: 4, Waits: 3, TimedOut: 1, Canceled: 1, Revoked: 1, RevokedMaxHold: 1, Keys: 0, Running: 1}, st.Stats(),
			"a revoked function still runs, its key is free")
		require.ErrorIs(t, m.finish(), locks.ErrLost)
		require.Equal(t, 0, st.Stats().Running)
	})
}
