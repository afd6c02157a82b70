package locks_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/holdline/locks"
	"github.com/holdline/locks/internal/lockertest"
)

// TestNoCallerCodeOnTheStoreGoroutine: revoking a lease at its maxHold, and
// closing the store, call no method of the caller's context, so a caller
// whose context stalls delays nobody but itself: another key's maxHold
// fires on time, and Close returns.
func TestNoCallerCodeOnTheStoreGoroutine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, l := newLock(t)
		stalling := lockertest.NewStallingCtx()
		stalledDone := make(chan error, 1)
		go func() {
			stalledDone <- l.Hold(stalling, "stalls", func(ctx context.Context, _ *locks.Lease) error {
				done := ctx.Done() // built before the caller's context stalls
				stalling.Arm()
				<-done
				return nil
			}, locks.MaxHold(time.Second))
		}()
		synctest.Wait()

		// Another key's maxHold, due after the stalling one's.
		var revokedAt time.Duration
		start := time.Now()
		err := l.Hold(context.Background(), "other", func(ctx context.Context, _ *locks.Lease) error {
			<-ctx.Done()
			revokedAt = time.Since(start)
			return nil
		}, locks.MaxHold(2*time.Second))
		require.ErrorIs(t, err, locks.ErrLost)
		require.Equal(t, 2*time.Second, revokedAt, "revoked at its maxHold, not held up by the stalling caller")

		// Close goes through too: it fails a waiter and revokes a holder.
		h := holding(t, l, "held")
		w := queued(t, context.Background(), l, "held", locks.Wait(time.Hour))
		require.NoError(t, st.Close())
		require.ErrorIs(t, w.wait(), locks.ErrClosed)
		require.ErrorIs(t, h.finish(), locks.ErrLost)

		// The stalling caller's own goroutine asks its context as its hold
		// ends: that delays only that caller.
		synctest.Wait()
		require.Positive(t, stalling.Stalls())
		select {
		case err := <-stalledDone:
			t.Fatalf("the stalling caller returned %v before its context let go", err)
		default:
		}
		stalling.LetGo()
		require.ErrorIs(t, <-stalledDone, locks.ErrLost)
	})
}
