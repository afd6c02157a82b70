package locks_test

import (
	"context"
	"fmt"
	"runtime/pprof"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/holdline/locks"
)

// TestHolders: the snapshot reports each held key's lease, how long it has
// been held, whether a session holds it, and its line; filtered by lock
// and by key.
func TestHolders(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, l := newLock(t)
		orders := openLock(t, st, "orders", locks.TTL(time.Minute))
		h := holding(t, l, 9, locks.MaxHold(time.Hour))
		time.Sleep(time.Minute)
		w1 := queued(t, context.Background(), l, 9, locks.Wait(time.Hour))
		time.Sleep(time.Second)
		queued(t, context.Background(), l, 9, locks.Wait(time.Hour))
		sess := st.NewSession()
		defer sess.Close()
		g, err := orders.Acquire(context.Background(), sess, "a")
		require.NoError(t, err)

		all, err := st.Holders("")
		require.NoError(t, err)
		require.Len(t, all, 2)
		got := all[0]
		require.Equal(t, "invoices", got.Lease.Lock)
		require.Equal(t, "9", got.Lease.Key)
		require.Equal(t, h.lease.Fence, got.Lease.Fence)
		require.True(t, got.Lease.Granted.Equal(h.lease.Granted))
		require.True(t, got.Lease.Deadline.Equal(h.lease.Deadline))
		require.Equal(t, time.Minute+time.Second, got.HeldFor)
		require.False(t, got.Session)
		require.Equal(t, 2, got.Waiters)
		require.Equal(t, time.Second, got.OldestWait)
		require.Equal(t, "orders", all[1].Lease.Lock)
		require.True(t, all[1].Session)
		require.Equal(t, g.Lease().Fence, all[1].Lease.Fence)

		only, err := st.Holders("orders")
		require.NoError(t, err)
		require.Len(t, only, 1)
		keyed, err := st.Holders("invoices", 9, "nobody", int64(9))
		require.NoError(t, err)
		require.Len(t, keyed, 1, "a free key is left out, a key named twice reported once")

		// A holder handed the key from the line.
		require.NoError(t, h.finish())
		<-w1.granted
		time.Sleep(2 * time.Second)
		keyed, err = st.Holders("invoices", 9)
		require.NoError(t, err)
		require.Equal(t, w1.lease.Fence, keyed[0].Lease.Fence)
		require.Equal(t, 2*time.Second, keyed[0].HeldFor)
		require.Equal(t, 1, keyed[0].Waiters)
		require.NoError(t, w1.finish())

		// A hold made inside the session's grant is not the session's.
		inner := startHold(t, g.Context(), l, "inner")
		<-inner.granted
		keyed, err = st.Holders("invoices", "inner")
		require.NoError(t, err)
		require.Len(t, keyed, 1)
		require.False(t, keyed[0].Session)
		require.NoError(t, inner.finish())
		require.NoError(t, g.Release())

		_, err = st.Holders("", 9)
		require.ErrorIs(t, err, locks.ErrInvalid)
		_, err = st.Holders("bad name")
		require.ErrorIs(t, err, locks.ErrInvalid)
	})
}

// TestHoldAll: keys named in either order are taken in one order, so two
// callers asking for {a, b} and {b, a} in a loop never wait out their
// waits; fn gets one lease per key in sorted order.
func TestHoldAll(t *testing.T) {
	_, l := newLock(t)
	var wg sync.WaitGroup
	for i := range 2 {
		keys := []any{"a", "b"}
		if i == 1 {
			keys = []any{"b", "a"}
		}
		wg.Go(func() {
			for range 200 {
				err := l.HoldAll(context.Background(), keys, func(_ context.Context, leases []*locks.Lease) error {
					if len(leases) != 2 || leases[0].Key != "a" || leases[1].Key != "b" {
						return fmt.Errorf("leases %v", leases)
					}
					return nil
				}, locks.Wait(5*time.Second))
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	requireFree(t, l, "a")
	requireFree(t, l, "b")
}

// TestHoldAllIsAllOrNothing: a key held elsewhere makes the whole hold
// wait, then fail InUse holding nothing; a lost lease fails it Lost.
func TestHoldAllIsAllOrNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, l := newLock(t)
		h := holding(t, l, "b")
		err := l.HoldAll(context.Background(), []any{"c", "a", "b"}, func(context.Context, []*locks.Lease) error {
			t.Error("fn ran")
			return nil
		}, locks.Wait(3*time.Second))
		require.EqualError(t, err, `lock invoices: key "b": held past the hold's wait: in use`)
		requireFree(t, l, "a")
		requireFree(t, l, "c")
		require.NoError(t, h.finish())

		err = l.HoldAll(context.Background(), []any{"x", "y"}, func(ctx context.Context, _ []*locks.Lease) error {
			<-ctx.Done()
			return ctx.Err()
		}, locks.MaxHold(time.Second))
		require.ErrorIs(t, err, locks.ErrLost)
		require.ErrorIs(t, err, context.Canceled)
		requireFree(t, l, "x")

		require.ErrorIs(t, l.HoldAll(context.Background(), nil, nil), locks.ErrInvalid)
		err = l.HoldAll(context.Background(), []any{1, "1"}, func(context.Context, []*locks.Lease) error { return nil })
		require.EqualError(t, err, `lock invoices: key "1": the key is named twice: invalid`)
	})
}

// TestHoldsProfile: with ProfileHolds, each live hold and wait is in the
// holds profile with the stack that called Hold, and leaves it when done.
func TestHoldsProfile(t *testing.T) {
	st := newStore(t, locks.ProfileHolds(1))
	l := openLock(t, st, name)
	prof := pprof.Lookup(locks.HoldsProfile)
	require.NotNil(t, prof)
	before := prof.Count()
	h := holding(t, l, 9)
	w := startHold(t, context.Background(), l, 9, locks.Wait(time.Hour))
	require.Eventually(t, func() bool { return prof.Count() == before+2 }, 10*time.Second, time.Millisecond)
	var b strings.Builder
	require.NoError(t, prof.WriteTo(&b, 1))
	require.Contains(t, b.String(), "locks_test.startHoldRet", "the stack that called Hold")
	require.NoError(t, h.finish())
	require.NoError(t, w.finish())
	require.Equal(t, before, prof.Count())
}
