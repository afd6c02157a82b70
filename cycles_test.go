package locks_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/holdline/locks"
)

// holdThen holds a of first in a new goroutine and, inside that hold once
// go is closed, waits for b of then; its Hold's error comes on the
// returned channel.
func holdThen(first *locks.Lock, a any, then *locks.Lock, b any, held chan<- struct{}, goOn <-chan struct{}) <-chan error {
	errs := make(chan error, 1)
	go func() {
		errs <- first.Hold(context.Background(), a, func(ctx context.Context, _ *locks.Lease) error {
			held <- struct{}{}
			<-goOn
			return then.Hold(ctx, b, nop, locks.Wait(time.Hour))
		})
	}()
	return errs
}

// TestCycleFailsAtOnce: a hold made inside a hold of a, waiting for b, and
// a hold made inside a hold of b waiting for a: the second closes a cycle
// and fails Invalid at once, naming the keys; the first then gets b.
func TestCycleFailsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, l := newLock(t)
		held, goOn := make(chan struct{}), make(chan struct{})
		first := holdThen(l, "a", l, "b", held, goOn)
		<-held
		start := time.Now()
		err := l.Hold(context.Background(), "b", func(ctx context.Context, _ *locks.Lease) error {
			close(goOn)
			synctest.Wait() // the first now waits for b
			return l.Hold(ctx, "a", mustNotRun(t), locks.Wait(time.Hour))
		})
		require.EqualError(t, err, `lock invoices: key "a": waiting would close a cycle of holds waiting on each other: invoices "a" → invoices "b": invalid`)
		require.Zero(t, time.Since(start), "at once, not at the wait")
		require.NoError(t, <-first, "the other got b when this let it go")
		requireFree(t, l, "a")
		requireFree(t, l, "b")
	})
}

// TestCycleOfThree: three holds in a ring across two locks.
func TestCycleOfThree(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, l := newLock(t)
		orders := openLock(t, st, "orders")
		held, goOn := make(chan struct{}), make(chan struct{})
		one := holdThen(l, 1, orders, 2, held, goOn)
		two := holdThen(orders, 2, l, 3, held, goOn)
		<-held
		<-held
		err := l.Hold(context.Background(), 3, func(ctx context.Context, _ *locks.Lease) error {
			close(goOn)
			synctest.Wait()
			return l.Hold(ctx, 1, mustNotRun(t), locks.Wait(time.Hour))
		})
		require.ErrorIs(t, err, locks.ErrInvalid)
		require.Contains(t, err.Error(), `invoices "1" → orders "2" → invoices "3"`)
		require.NoError(t, <-two)
		require.NoError(t, <-one)
	})
}

// TestNoCycleNoFailure: waiting inside a hold for a key whose holder waits
// for a key this goroutine does not hold is no cycle: it waits as usual,
// and gets the key.
func TestNoCycleNoFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, l := newLock(t)
		c := holding(t, l, "c")
		held, goOn := make(chan struct{}), make(chan struct{})
		chained := holdThen(l, "b", l, "c", held, goOn) // holds b, waits for c
		<-held
		close(goOn)
		synctest.Wait()
		done := make(chan error, 1)
		go func() {
			done <- l.Hold(context.Background(), "a", func(ctx context.Context, _ *locks.Lease) error {
				return l.Hold(ctx, "b", nop, locks.Wait(time.Hour))
			})
		}()
		synctest.Wait()
		require.NoError(t, c.finish())
		require.NoError(t, <-chained)
		require.NoError(t, <-done)
	})
}

// TestHoldAllAgainstANestedHold: a HoldAll holding a and waiting for b,
// and a hold of b that then waits for a inside it: the cycle is seen, and
// the HoldAll gets both keys.
func TestHoldAllAgainstANestedHold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, l := newLock(t)
		held, goOn := make(chan struct{}), make(chan struct{})
		inner := holdThen(l, "b", l, "a", held, goOn)
		<-held
		all := make(chan error, 1)
		go func() {
			all <- l.HoldAll(context.Background(), []any{"b", "a"}, func(context.Context, []*locks.Lease) error { return nil },
				locks.Wait(time.Hour))
		}()
		synctest.Wait() // the HoldAll holds a, waits for b
		close(goOn)
		require.ErrorIs(t, <-inner, locks.ErrInvalid)
		require.NoError(t, <-all)
	})
}

// TestCycleThroughAGoroutine: a goroutine a held function starts with its
// context counts as that hold, as for a hold of the same key (SPEC §4):
// its wait for b, and a hold of b waiting for a, close a cycle, refused
// although the function could return and let a go. Started with
// Detach(ctx), it is a holder of its own, and the hold of b waits for a.
func TestCycleThroughAGoroutine(t *testing.T) {
	for _, detach := range []bool{false, true} {
		t.Run(map[bool]string{false: "fn's context", true: "Detach"}[detach], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				_, l := newLock(t)
				aHeld, bHeld := make(chan struct{}), make(chan struct{})
				aDone, bg := make(chan error, 1), make(chan error, 1)
				go func() {
					aDone <- l.Hold(context.Background(), "a", func(ctx context.Context, _ *locks.Lease) error {
						close(aHeld)
						<-bHeld
						if detach {
							ctx = locks.Detach(ctx)
						}
						go func() { bg <- l.Hold(ctx, "b", nop, locks.Wait(time.Hour)) }()
						time.Sleep(time.Second) // the goroutine waits for b meanwhile
						return nil
					})
				}()
				<-aHeld
				start := time.Now()
				err := l.Hold(context.Background(), "b", func(ctx context.Context, _ *locks.Lease) error {
					close(bHeld)
					synctest.Wait() // the goroutine waits for b
					return l.Hold(ctx, "a", nop, locks.Wait(time.Hour))
				})
				took := time.Since(start)
				require.NoError(t, <-aDone)
				if detach {
					require.NoError(t, err)
					require.Equal(t, time.Second, took, "a came when its function returned")
					require.NoError(t, <-bg, "the detached goroutine got b after")
					return
				}
				require.EqualError(t, err, `lock invoices: key "a": waiting would close a cycle of holds waiting on each other: invoices "a" → invoices "b": invalid`)
				require.Zero(t, took, "at once")
				require.NoError(t, <-bg, "the goroutine got b when the refused hold let it go")
			})
		})
	}
}
