package locks_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/holdline/locks"
)

// TestFencesIncreasePerKey: for one key, every grant's fence is higher
// than every fence given before for it: through plain holds, TryHold,
// handoffs to waiters and revocations at maxHold.
func TestFencesIncreasePerKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, l := newLock(t)
		var fences []uint64
		record := func(_ context.Context, ls *locks.Lease) error {
			fences = append(fences, ls.Fence)
			return nil
		}
		require.NoError(t, l.Hold(context.Background(), 9, record))
		ok, err := l.TryHold(context.Background(), 9, record)
		require.NoError(t, err)
		require.True(t, ok)

		// Handoffs: a holder and a line of waiters.
		h := holding(t, l, 9)
		fences = append(fences, h.lease.Fence)
		ws := queue(t, l, 9, 5, locks.Wait(time.Hour))
		require.NoError(t, h.finish())
		for _, w := range ws {
			<-w.granted
			fences = append(fences, w.lease.Fence)
			require.NoError(t, w.finish())
		}

		// Revocations: overstaying holders with waiters behind them.
		revoked := holding(t, l, 9, locks.MaxHold(time.Second))
		fences = append(fences, revoked.lease.Fence)
		ws = queue(t, l, 9, 3, locks.MaxHold(time.Second), locks.Wait(time.Hour))
		for _, w := range ws {
			<-w.granted // each granted as the one before is revoked
			fences = append(fences, w.lease.Fence)
		}
		for _, w := range append(ws, revoked) {
			<-w.ctx.Done() // revoked at its maxHold
			require.ErrorIs(t, w.finish(), locks.ErrLost)
		}
		require.NoError(t, l.Hold(context.Background(), 9, record))

		require.Len(t, fences, 13)
		for i := 1; i < len(fences); i++ {
			require.Greater(t, fences[i], fences[i-1], "fence %d", i)
		}
	})
}

// TestFencesAcrossKeysOfOneShard: the fences of a key rise even when other
// keys of its shard are held in between (gaps are allowed, order is not
// broken).
func TestFencesAcrossKeysOfOneShard(t *testing.T) {
	_, l := newLock(t, locks.Shards(1))
	last := map[int]uint64{}
	for round := 0; round < 20; round++ {
		for key := 0; key < 10; key++ {
			f := fenceOf(t, l, key)
			require.Greater(t, f, last[key])
			last[key] = f
		}
	}
}

// TestFencesAcrossStores: a store opened later in the same place gives every
// key higher fences than an earlier one did, as long as the wall clock
// did not go back (it seeds them; real clock, not a bubble).
func TestFencesAcrossStores(t *testing.T) {
	keys := []any{9, "m", InvoiceID("inv-42"), []byte("raw")}
	last := map[string]uint64{}
	for gen := 0; gen < 3; gen++ {
		for _, opts := range [][]locks.StoreOption{nil, {locks.Shards(1)}} {
			st := locks.NewStore(opts...)
			l := openLock(t, st, name)
			for _, key := range keys {
				for i := 0; i < 200; i++ {
					var f uint64
					var text string
					require.NoError(t, l.Hold(context.Background(), key, func(_ context.Context, ls *locks.Lease) error {
						f, text = ls.Fence, ls.Key
						return nil
					}))
					require.Greater(t, f, last[text], "store %d, key %q", gen, text)
					last[text] = f
				}
			}
			require.NoError(t, st.Close())
		}
	}
}
