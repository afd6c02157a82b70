package fuzz

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/holdline/locks"
)

// Regression tests for the failure modes seen in the field about closing.
// Close from inside fn, Close twice and from many goroutines at once, a
// panic or runtime.Goexit in fn, and the limit of the line after churn are
// tested in the root package (TestCloseInsideFn, TestCloseConcurrently,
// TestPanicAndGoexitLetTheKeyGo, TestLimit).

// Close racing Hold: Holds running while the store closes end one way or
// another, none deadlocks; no fn starts with a live lease after Close has
// returned, and every Hold called after it fails Closed without running fn.
func TestCloseRacingHold(t *testing.T) {
	for round := range 50 {
		synctest.Test(t, func(t *testing.T) {
			st := locks.NewStore(locks.Shards(4))
			l := openLock(t, st, name)
			var closed atomic.Bool
			var late atomic.Int32
			var wg sync.WaitGroup
			for i := range 40 {
				wg.Go(func() {
					err := l.Hold(context.Background(), i%3, func(ctx context.Context, _ *locks.Lease) error {
						if closed.Load() && ctx.Err() == nil {
							late.Add(1) // granted a live lease after Close returned
						}
						time.Sleep(time.Duration(i%4) * time.Millisecond)
						return nil
					}, locks.Wait(time.Second), locks.MaxHold(time.Duration(i%5)*time.Millisecond))
					var e *locks.Error
					if err != nil && (!errors.As(err, &e) || (e.Kind != locks.Closed && e.Kind != locks.Lost)) {
						t.Errorf("round %d: Hold racing Close returned %v", round, err)
					}
				})
			}
			time.Sleep(time.Duration(round%4) * time.Millisecond)
			require.NoError(t, st.Close())
			closed.Store(true)
			wg.Wait()
			require.Zero(t, late.Load(), "a fn was granted a live lease after Close returned")
			ran := false
			err := l.Hold(context.Background(), 1, func(context.Context, *locks.Lease) error { ran = true; return nil })
			require.ErrorIs(t, err, locks.ErrClosed)
			require.False(t, ran)
			ok, err := l.TryHold(context.Background(), 1, func(context.Context, *locks.Lease) error { ran = true; return nil })
			require.ErrorIs(t, err, locks.ErrClosed)
			require.False(t, ok || ran)
		})
	}
}

// The waiter woken by a grant reads its state (hold.go, await) while the
// timer goroutine or Close may already be changing it: under -race this
// fails if await reads the holder's state without the shard's mutex. Here
// the timer goroutine grants the waiter (revoking its predecessor at its
// maxHold) and then revokes it at its own maxHold, or Close does, with
// nothing else ordering the waiter's read before that write. (Found by
// TestModel under -race, seed 2; fixed in 5fa036b by sending the settled
// state over the wake-up channel.)
func TestGrantedWaiterStateNotRacy(t *testing.T) {
	for _, via := range []string{"maxHold", "close"} {
		t.Run(via, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				st, l := newLock(t)
				h := holding(t, l, 9, locks.MaxHold(time.Millisecond))
				w := startHold(t, context.Background(), l, 9, locks.MaxHold(2*time.Millisecond))
				// No synctest.Wait until the write: it would order w's read
				// before it, and hide the race.
				time.Sleep(time.Millisecond) // the timer goroutine revokes h and grants w
				time.Sleep(time.Millisecond) // w has read its state
				if via == "close" {
					st.Close() // writes w's state
				} else {
					time.Sleep(time.Millisecond) // the timer goroutine revokes w
				}
				synctest.Wait()
				h.letGo()
				w.letGo()
				synctest.Wait()
				requireEnded(t, h, locks.Lost)
				requireEnded(t, w, locks.Lost)
			})
		})
	}
}
