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

// requireAllocs measures f's allocations with allocs, logs them under the
// label what, and checks that they are at most limit.
func requireAllocs(t *testing.T, what string, limit float64, f func()) {
	t.Helper()
	n := allocs(t, f)
	t.Logf("%s: %v allocs/op", what, n)
	require.LessOrEqual(t, n, limit)
}

// holdOnce returns a function that holds key once with ignoreCtx, failing
// the test on an error. key is an interface already, so that converting it
// allocates nothing in the loop.
func holdOnce(t *testing.T, l *locks.Lock, key any, opts ...locks.Option) func() {
	ctx := context.Background()
	return func() {
		if err := l.Hold(ctx, key, ignoreCtx, opts...); err != nil {
			t.Fatal(err)
		}
	}
}

// tryHoldOnce returns a function that calls TryHold of key once with
// ignoreCtx, failing the test unless it answers (acquired, nil).
func tryHoldOnce(t *testing.T, l *locks.Lock, key any, acquired bool) func() {
	ctx := context.Background()
	return func() {
		ok, err := l.TryHold(ctx, key, ignoreCtx)
		if ok != acquired || err != nil {
			t.Fatal(ok, err)
		}
	}
}

// TestAllocsHoldFreeKey: the uncontended Hold of a free string key, fn
// ignoring its context, allocates once: the holder record (fn's context
// and lease). Measured: 1.
func TestAllocsHoldFreeKey(t *testing.T) {
	_, l := newLock(t)
	requireAllocs(t, "Hold of a free string key", 1, holdOnce(t, l, "invoice-42"))
}

// TestAllocsHoldFreeKeyMaxHold: the same with a maxHold armed and
// disarmed (the timer lives in a pooled slot). Measured: 1.
func TestAllocsHoldFreeKeyMaxHold(t *testing.T) {
	_, l := newLock(t)
	requireAllocs(t, "Hold of a free string key with MaxHold", 1,
		holdOnce(t, l, "invoice-42", locks.MaxHold(time.Minute)))

	// The lock's default maxHold costs the same.
	st := newStore(t)
	lm := openLock(t, st, name, locks.MaxHold(time.Minute))
	requireAllocs(t, "Hold with the lock's MaxHold", 1, holdOnce(t, lm, "invoice-42"))
}

// TestAllocsTryHoldHeldKey: TryHold on a held key allocates nothing: it
// looks, finds the key held and answers (false, nil). Measured: 0.
func TestAllocsTryHoldHeldKey(t *testing.T) {
	_, l := newLock(t)
	h := holding(t, l, "invoice-42")
	requireAllocs(t, "TryHold of a held key", 0, tryHoldOnce(t, l, "invoice-42", false))
	require.NoError(t, h.finish())
}

// TestAllocsTryHoldFreeKey: TryHold of a free key costs what Hold does.
// Measured: 1.
func TestAllocsTryHoldFreeKey(t *testing.T) {
	_, l := newLock(t)
	requireAllocs(t, "TryHold of a free key", 1, tryHoldOnce(t, l, "invoice-42", true))
}

// TestAllocsDetach: Detach allocates twice, as its comment says:
// context.WithoutCancel's context and the wrapper that hides the marks.
func TestAllocsDetach(t *testing.T) {
	ctx := locks.MarkHold(context.Background(), name, "9", func() bool { return false })
	var sink context.Context
	n := allocs(t, func() { sink = locks.Detach(ctx) })
	require.Equal(t, 2.0, n)
	require.NotNil(t, sink)
}
