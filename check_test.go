package locks

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestHoldChecksAsCheckDoes: Hold passes most holds' arguments in its own
// frame, and check names what is wrong with the rest; for every mix of
// key, function, options and context, Hold fails with check's error,
// word for word, or, where check passes them, runs its function.
func TestHoldChecksAsCheckDoes(t *testing.T) {
	st := NewStore()
	defer st.Close()
	l, err := OpenLock(st, "invoices", MaxHold(time.Minute))
	require.NoError(t, err)

	ran := false
	run := func(context.Context, *Lease) error { ran = true; return nil }
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	keys := []any{"k", "", strings.Repeat("x", MaxKeyLen), strings.Repeat("x", MaxKeyLen+1), 7, nil}
	fns := []HoldFunc{run, nil}
	optss := [][]Option{nil, {Wait(time.Second)}, {MaxHold(-1)}, {Wait(-1)}, {TTL(time.Second)}, {Wait(time.Second), {}}}
	ctxs := []context.Context{context.Background(), ended, nil}
	n := 0
	for _, key := range keys {
		for _, fn := range fns {
			for _, opts := range optss {
				for _, ctx := range ctxs {
					_, _, want := l.check(ctx, key, opts, fn)
					ran = false
					got := l.Hold(ctx, key, fn, opts...)
					if want != nil {
						require.EqualError(t, got, want.Error(), "key %v, fn %v, opts %v, ctx %v", key, fn != nil, opts, ctx)
						require.False(t, ran)
					} else {
						require.NoError(t, got, "key %v, opts %v", key, opts)
						require.True(t, ran)
						n++
					}
				}
			}
		}
	}
	// Those that pass: three keys ("k", MaxKeyLen bytes, and 7 by its
	// text) with the function, no options or a Wait, and a live context.
	require.Equal(t, 6, n)
}
