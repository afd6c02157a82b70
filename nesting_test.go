package locks_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/holdline/locks"
)

// TestHoldInTransactionIsInvalid: a Hold whose context carries
// InTransaction fails Invalid at once, naming lock and key, free key or
// held, queueing nothing and using no fence.
func TestHoldInTransactionIsInvalid(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, l := newLock(t, locks.Shards(1))
		tx := locks.InTransaction(context.Background())
		derived, cancel := context.WithCancel(context.WithValue(tx, ctxKey{}, 1))
		defer cancel()
		first := fenceOf(t, l, 9)
		for _, ctx := range []context.Context{tx, derived} {
			start := time.Now()
			err := l.Hold(ctx, 9, mustNotRun(t), locks.Wait(time.Hour))
			requireKind(t, err, locks.ErrInvalid, locks.Invalid, name, "9")
			require.Zero(t, time.Since(start))
			_, err = locks.HoldValue(ctx, l, 9, func(context.Context, *locks.Lease) (int, error) { return 0, nil })
			require.ErrorIs(t, err, locks.ErrInvalid)
		}
		require.Equal(t, first+1, fenceOf(t, l, 9), "no fence used")

		h := holding(t, l, 9)
		start := time.Now()
		err := l.Hold(tx, 9, mustNotRun(t), locks.Wait(time.Hour))
		requireKind(t, err, locks.ErrInvalid, locks.Invalid, name, "9")
		require.Zero(t, time.Since(start), "at once, not after a wait")
		require.NoError(t, h.finish())
		require.Equal(t, first+3, fenceOf(t, l, 9), "nothing was queued")

		// A transaction inside a hold: a Hold of any key is invalid there.
		require.NoError(t, l.Hold(context.Background(), 9, func(ctx context.Context, _ *locks.Lease) error {
			err := l.Hold(locks.InTransaction(ctx), 10, mustNotRun(t))
			requireKind(t, err, locks.ErrInvalid, locks.Invalid, name, "10")
			return nil
		}))
	})
}

// TestTryHoldInTransaction: TryHold is allowed inside a transaction: it
// runs fn on a free key and answers (false, nil) on a held one.
func TestTryHoldInTransaction(t *testing.T) {
	_, l := newLock(t)
	tx := locks.InTransaction(context.Background())
	ok, err := l.TryHold(tx, 9, func(ctx context.Context, _ *locks.Lease) error {
		// Still in the transaction inside: Hold stays invalid.
		require.ErrorIs(t, l.Hold(ctx, 10, mustNotRun(t)), locks.ErrInvalid)
		return nil
	})
	require.NoError(t, err)
	require.True(t, ok)

	h := holding(t, l, 9)
	ok, err = l.TryHold(tx, 9, mustNotRun(t))
	require.NoError(t, err)
	require.False(t, ok)
	require.NoError(t, h.finish())
}

// TestNestedHoldOfSameKeyIsInvalid: inside a hold, a Hold of the same lock
// and key with a context that descends from fn's fails Invalid at once,
// naming lock and key, queueing nothing and using no fence.
func TestNestedHoldOfSameKeyIsInvalid(t *testing.T) {
	derive := []struct {
		name string
		f    func(ctx context.Context) (context.Context, context.CancelFunc)
	}{
		{"fn's ctx", func(ctx context.Context) (context.Context, context.CancelFunc) { return ctx, func() {} }},
		{"WithValue", func(ctx context.Context) (context.Context, context.CancelFunc) {
			return context.WithValue(ctx, ctxKey{}, "v"), func() {}
		}},
		{"WithCancel", func(ctx context.Context) (context.Context, context.CancelFunc) { return context.WithCancel(ctx) }},
		{"WithTimeout", func(ctx context.Context) (context.Context, context.CancelFunc) {
			return context.WithTimeout(ctx, time.Hour)
		}},
		{"WithoutCancel", func(ctx context.Context) (context.Context, context.CancelFunc) {
			return context.WithoutCancel(ctx), func() {}
		}},
		{"WithCancel of WithValue", func(ctx context.Context) (context.Context, context.CancelFunc) {
			return context.WithCancel(context.WithValue(ctx, ctxKey{}, "v"))
		}},
		{"inside a hold of another key", nil}, // see below
	}
	for _, d := range derive {
		t.Run(d.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				st, l := newLock(t, locks.Shards(1))
				var outer uint64
				require.NoError(t, l.Hold(context.Background(), 9, func(ctx context.Context, ls *locks.Lease) error {
					outer = ls.Fence
					var inner context.Context
					if d.f != nil {
						var cancel context.CancelFunc
						inner, cancel = d.f(ctx)
						defer cancel()
					} else {
						// 9 held, then 10 held inside: a Hold of 9 is still nested.
						require.NoError(t, l.Hold(ctx, 10, func(ctx10 context.Context, _ *locks.Lease) error {
							inner = context.WithoutCancel(ctx10)
							return nil
						}))
						outer++ // the hold of 10 used a fence
					}
					for _, key := range []any{9, "9", InvoiceID("9")} {
						start := time.Now()
						err := l.Hold(inner, key, mustNotRun(t), locks.Wait(time.Hour))
						requireKind(t, err, locks.ErrInvalid, locks.Invalid, name, "9")
						require.Zero(t, time.Since(start), "at once")
					}
					_, err := locks.HoldValue(inner, l, 9, func(context.Context, *locks.Lease) (int, error) { return 0, nil })
					require.ErrorIs(t, err, locks.ErrInvalid)
					// Another handle of the same name is the same lock.
					other := openLock(t, st, name)
					require.ErrorIs(t, other.Hold(inner, 9, mustNotRun(t)), locks.ErrInvalid)
					return nil
				}))
				require.Equal(t, outer+1, fenceOf(t, l, 9), "the nested calls used no fence and queued nothing")
			})
		})
	}
}

// TestTryHoldOfOwnKey: TryHold inside a hold of the same key is not
// invalid: it answers (false, nil).
func TestTryHoldOfOwnKey(t *testing.T) {
	_, l := newLock(t)
	require.NoError(t, l.Hold(context.Background(), 9, func(ctx context.Context, _ *locks.Lease) error {
		ok, err := l.TryHold(ctx, 9, mustNotRun(t))
		require.NoError(t, err)
		require.False(t, ok)
		v, ok, err := locks.TryHoldValue(context.WithValue(ctx, ctxKey{}, 1), l, "9", func(context.Context, *locks.Lease) (int, error) {
			return 1, nil
		})
		require.NoError(t, err)
		require.False(t, ok)
		require.Zero(t, v)
		return nil
	}))
}

// TestBackgroundGoroutineInsideHoldWaits: nesting is seen through ctx: a
// goroutine started inside fn with context.Background() is another holder
// and waits like any other, then is granted.
func TestBackgroundGoroutineInsideHoldWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, l := newLock(t)
		var w *hold
		var outer uint64
		require.NoError(t, l.Hold(context.Background(), 9, func(_ context.Context, ls *locks.Lease) error {
			outer = ls.Fence
			w = startHold(t, context.Background(), l, 9, locks.Wait(time.Hour))
			time.Sleep(time.Minute)
			synctest.Wait()
			require.False(t, isClosed(w.done), "it waits")
			return nil
		}))
		<-w.granted
		require.Equal(t, outer+1, w.lease.Fence)
		require.NoError(t, w.finish())
	})
}

// TestOtherKeysInsideHold: a hold of a different key inside a hold is fine,
// and so is the same key text under another lock name. Keys
// held in one order by two holders nest without deadlock.
func TestOtherKeysInsideHold(t *testing.T) {
	st, l := newLock(t)
	receipts := openLock(t, st, "receipts")
	require.NoError(t, l.Hold(context.Background(), "a", func(ctx context.Context, a *locks.Lease) error {
		require.NoError(t, l.Hold(ctx, "b", func(ctx context.Context, b *locks.Lease) error {
			require.Equal(t, "b", b.Key)
			return receipts.Hold(ctx, "a", func(ctx context.Context, r *locks.Lease) error {
				require.Equal(t, "receipts", r.Lock)
				require.Equal(t, "a", r.Key)
				// Back on the outer key: still nested, still invalid.
				require.ErrorIs(t, l.Hold(ctx, "a", mustNotRun(t)), locks.ErrInvalid)
				require.ErrorIs(t, l.Hold(ctx, "b", mustNotRun(t)), locks.ErrInvalid)
				require.ErrorIs(t, receipts.Hold(ctx, "a", mustNotRun(t)), locks.ErrInvalid)
				return nil
			})
		}))
		return nil
	}))
}

// TestNestingEndsWithTheHold: a context kept from a hold (detached with
// context.WithoutCancel, say, for work that outlives the request) is no
// longer "inside a hold of the same key" once that hold is over: a Hold
// of the key with it is an ordinary Hold (nesting is a hold inside an
// enclosing fn; an fn that returned encloses nothing).
func TestNestingEndsWithTheHold(t *testing.T) {
	_, l := newLock(t)
	var kept context.Context
	require.NoError(t, l.Hold(context.Background(), 9, func(ctx context.Context, _ *locks.Lease) error {
		kept = context.WithoutCancel(ctx)
		return nil
	}))
	ran := false
	err := l.Hold(kept, 9, func(context.Context, *locks.Lease) error {
		ran = true
		return nil
	})
	require.NoError(t, err, "the hold that made the context is over")
	require.True(t, ran)
}
