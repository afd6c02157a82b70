package locks_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/holdline/locks"
)

// ignoreCtx is a HoldFunc that does not look at its context: the holder
// record, which is fn's context and lease, is then the only allocation.
func ignoreCtx(context.Context, *locks.Lease) error { return nil }

// allocs measures the average allocations of f over many runs, after a
// warm-up (testing.AllocsPerRun runs f once first and pins GOMAXPROCS to 1).
func allocs(t *testing.T, f func()) float64 {
	t.Helper()
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under the race detector (sync.Pool drops items at random)")
	}
	for i := 0; i < 100; i++ { // fill the shard's free entries, the pools, the maps
		f()
	}
	return testing.AllocsPerRun(1000, f)
}

// TestAllocsHoldFreeKey: the uncontended Hold of a free string key, fn
// ignoring its context, allocates once: the holder record (fn's context
// and lease). Measured: 1.
func TestAllocsHoldFreeKey(t *testing.T) {
	_, l := newLock(t)
	ctx := context.Background()
	var key any = "invoice-42"
	n := allocs(t, func() {
		if err := l.Hold(ctx, key, ignoreCtx); err != nil {
			t.Fatal(err)
		}
	})
	t.Logf("Hold of a free string key: %v allocs/op", n)
	require.LessOrEqual(t, n, 1.0)
}

// TestAllocsHoldFreeKeyMaxHold: the same with a maxHold armed and
// disarmed (the timer lives in a pooled slot). Measured: 1.
func TestAllocsHoldFreeKeyMaxHold(t *testing.T) {
	_, l := newLock(t)
	ctx := context.Background()
	var key any = "invoice-42"
	opts := []locks.Option{locks.MaxHold(time.Minute)}
	n := allocs(t, func() {
		if err := l.Hold(ctx, key, ignoreCtx, opts...); err != nil {
			t.Fatal(err)
		}
	})
	t.Logf("Hold of a free string key with MaxHold: %v allocs/op", n)
	require.LessOrEqual(t, n, 1.0)

	// The lock's default maxHold costs the same.
	st := newStore(t)
	lm := openLock(t, st, name, locks.MaxHold(time.Minute))
	n = allocs(t, func() {
		if err := lm.Hold(ctx, key, ignoreCtx); err != nil {
			t.Fatal(err)
		}
	})
	t.Logf("Hold with the lock's MaxHold: %v allocs/op", n)
	require.LessOrEqual(t, n, 1.0)
}

// TestAllocsTryHoldHeldKey: TryHold on a held key allocates nothing: it
// looks, finds the key held and answers (false, nil). Measured: 0.
func TestAllocsTryHoldHeldKey(t *testing.T) {
	_, l := newLock(t)
	ctx := context.Background()
	var key any = "invoice-42"
	h := startHold(t, ctx, l, key)
	<-h.granted
	n := allocs(t, func() {
		ok, err := l.TryHold(ctx, key, ignoreCtx)
		if ok || err != nil {
			t.Fatal(ok, err)
		}
	})
	t.Logf("TryHold of a held key: %v allocs/op", n)
	require.Zero(t, n)
	require.NoError(t, h.finish())
}

// TestAllocsTryHoldFreeKey: TryHold of a free key costs what Hold does.
// Measured: 1.
func TestAllocsTryHoldFreeKey(t *testing.T) {
	_, l := newLock(t)
	ctx := context.Background()
	var key any = "invoice-42"
	n := allocs(t, func() {
		ok, err := l.TryHold(ctx, key, ignoreCtx)
		if !ok || err != nil {
			t.Fatal(ok, err)
		}
	})
	t.Logf("TryHold of a free key: %v allocs/op", n)
	require.LessOrEqual(t, n, 1.0)
}
