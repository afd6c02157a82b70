package fuzz

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/holdline/locks"
)

// Regression tests for the failure modes seen in the field about closing, panics,
// runtime.Goexit and the limit of the line.

// Close racing Hold: Holds running while the store closes end one way or
// another, none deadlocks; no fn starts with a live lease after Close has
// returned, and every Hold called after it fails Closed without running fn.
func TestCloseRacingHold(t *testing.T) {
	for round := range 50 {
		synctest.Test(t, func(t *testing.T) {
			s := locks.NewStore(locks.Shards(4))
			l := newLock(t, s, "inv")
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
			require.NoError(t, s.Close())
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

// Close called from inside fn: no deadlock; fn's lease is lost ("its store
// closed"), the line fails Closed, and Hold returns Lost once fn returns.
func TestCloseInsideFn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newStore(t)
		l := newLock(t, s, "inv")
		other := startHold(l, "other", locks.MaxHold(time.Hour)) // a deadline pending: the timer goroutine runs
		synctest.Wait()
		w := startHold(l, 9)
		var cause error
		err := l.Hold(context.Background(), 9, func(ctx context.Context, _ *locks.Lease) error {
			synctest.Wait() // w is in line
			require.NoError(t, s.Close())
			require.NoError(t, s.Close()) // twice, from inside too
			<-ctx.Done()
			cause = context.Cause(ctx)
			return nil
		})
		require.EqualError(t, err, `lock inv: key "9": the lease was lost: its store closed`)
		require.ErrorIs(t, cause, locks.ErrLost)
		synctest.Wait()
		requireEnded(t, w, locks.Closed)
		other.Let(nil)
		synctest.Wait()
		requireEnded(t, other, locks.Lost)
	})
}

// Close twice, and from two goroutines at once: nil each time, no deadlock,
// and Shutdown after it returns at once.
func TestCloseTwice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := locks.NewStore()
		l := newLock(t, s, "inv")
		h := startHold(l, 9, locks.MaxHold(time.Hour))
		synctest.Wait()
		var wg sync.WaitGroup
		for range 2 {
			wg.Go(func() { require.NoError(t, s.Close()) })
		}
		wg.Wait()
		require.NoError(t, s.Close())
		h.Let(nil)
		synctest.Wait()
		requireEnded(t, h, locks.Lost)
		require.NoError(t, s.Shutdown(context.Background()))
		_, err := locks.OpenLock(s, "inv")
		require.ErrorIs(t, err, locks.ErrClosed)
	})
}

// A panic in fn lets the key go (then goes on, with its own value) and
// runtime.Goexit in fn lets the key go; another key on the same shard,
// held meanwhile, carries on untouched.
func TestPanicAndGoexitLetTheKeyGo(t *testing.T) {
	type boom struct{}
	for _, how := range []string{"panic", "Goexit"} {
		t.Run(how, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := newStore(t, locks.Shards(1))
				l := newLock(t, s, "inv")
				neighbour := startHold(l, 10)
				synctest.Wait()
				let := make(chan struct{})
				var recovered any
				var returned bool
				done := make(chan struct{})
				go func() {
					defer close(done)
					defer func() { recovered = recover() }()
					_ = l.Hold(context.Background(), 9, func(context.Context, *locks.Lease) error {
						<-let
						if how == "panic" {
							panic(boom{})
						}
						runtime.Goexit()
						return nil
					})
					returned = true
				}()
				synctest.Wait()
				w := startHold(l, 9)
				synctest.Wait()
				close(let)
				<-done
				synctest.Wait()
				require.False(t, returned, "Hold returned after fn's %s", how)
				if how == "panic" {
					require.Equal(t, boom{}, recovered, "the panic that came out of Hold")
				} else {
					require.Nil(t, recovered)
				}
				requireHolding(t, w)
				requireHolding(t, neighbour)
				w.Let(nil)
				neighbour.Let(nil)
				synctest.Wait()
				requireEnded(t, w, 0)
				requireEnded(t, neighbour, 0)
				requireFree(t, l, 9)
				requireFree(t, l, 10)
			})
		})
	}
}

// Exactly 10,000 waiters are accepted after heavy cancellation churn, and
// the next one is refused at once with limit.
func TestLimitAfterChurn(t *testing.T) {
	if testing.Short() {
		t.Skip("10,000 goroutines")
	}
	synctest.Test(t, func(t *testing.T) {
		s := newStore(t)
		l := newLock(t, s, "inv")
		h := startHold(l, 9)
		synctest.Wait()
		var waiting []*call
		parent, cancel := context.WithCancel(context.Background())
		for i := range locks.MaxWaiters {
			ctx := context.Background()
			if i%2 == 0 {
				ctx = parent
			}
			waiting = append(waiting, startCall(ctx, l, 9, false, locks.Wait(time.Hour)))
			synctest.Wait() // in line in this order
		}
		synctest.Wait()
		cancel() // the churn: every other waiter leaves, from all over the line
		synctest.Wait()
		for range locks.MaxWaiters / 2 {
			waiting = append(waiting, startHold(l, 9, locks.Wait(time.Hour)))
			synctest.Wait()
		}
		synctest.Wait()
		in := 0
		for _, w := range waiting {
			if ended, _ := w.Ended(); !ended {
				in++
			}
		}
		require.Equal(t, locks.MaxWaiters, in, "waiters in line")
		start := time.Now()
		err := l.Hold(context.Background(), 9, func(context.Context, *locks.Lease) error { return nil }, locks.Wait(time.Hour))
		require.EqualError(t, err, `lock inv: key "9": the line of waiters is full: limit`)
		require.ErrorIs(t, err, locks.ErrLimit)
		require.Zero(t, time.Since(start), "limit is refused at once")
		ok, err := l.TryHold(context.Background(), 9, func(context.Context, *locks.Lease) error { return nil })
		require.NoError(t, err)
		require.False(t, ok)
		other := startHold(l, 10) // other keys are not limited
		synctest.Wait()
		requireHolding(t, other)
		other.Let(nil)

		waiting[1].cancel() // one leaves: one more fits
		synctest.Wait()
		last := startHold(l, 9, locks.Wait(time.Hour))
		synctest.Wait()
		requireWaiting(t, last)
		h.Let(nil)
		synctest.Wait()
		requireHolding(t, waiting[3]) // the first in line still there
	})
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
				s := newStore(t)
				l := newLock(t, s, "inv")
				h := startHold(l, 9, locks.MaxHold(time.Millisecond))
				synctest.Wait()
				w := startHold(l, 9, locks.MaxHold(2*time.Millisecond))
				// No synctest.Wait until the write: it would order w's read
				// before it, and hide the race.
				time.Sleep(time.Millisecond) // the timer goroutine revokes h and grants w
				time.Sleep(time.Millisecond) // w has read its state
				if via == "close" {
					s.Close() // writes w's state
				} else {
					time.Sleep(time.Millisecond) // the timer goroutine revokes w
				}
				synctest.Wait()
				h.Let(nil)
				w.Let(nil)
				synctest.Wait()
				requireEnded(t, h, locks.Lost)
				requireEnded(t, w, locks.Lost)
			})
		})
	}
}
