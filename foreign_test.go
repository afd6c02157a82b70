package locks_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/holdline/locks"
)

// TestForeignHolds: a hold of another Locker marked with MarkHold is seen
// by this package's checks (nesting, CheckHold) and hidden by Detach; the
// helpers give a *Lock's own errors.
func TestForeignHolds(t *testing.T) {
	_, l := newLock(t)
	over := false
	ctx := locks.MarkHold(context.Background(), name, "9", func() bool { return over })
	require.EqualError(t, l.Hold(ctx, 9, mustNotRun(t)), `lock invoices: key "9": held inside a hold of the same key: invalid`)
	require.EqualError(t, locks.CheckHold(ctx, name, "9"), `lock invoices: key "9": held inside a hold of the same key: invalid`)
	require.NoError(t, locks.CheckHold(ctx, name, "10"))
	require.NoError(t, locks.CheckHold(locks.Detach(ctx), name, "9"), "Detach hides the mark")
	require.NoError(t, l.Hold(ctx, 10, nop), "another key inside is fine")
	acquired, err := l.TryHold(ctx, 9, nop)
	require.NoError(t, err)
	require.True(t, acquired, "TryHold looks at its own store alone, where the key is free")
	over = true
	require.NoError(t, l.Hold(ctx, 9, nop), "an ended hold encloses nothing")
	require.EqualError(t, locks.CheckHold(locks.InTransaction(ctx), name, "9"), `lock invoices: key "9": held inside a transaction: invalid`)

	require.EqualError(t, locks.CheckName("bad name"), `lock "bad name": a name is made of A-Z a-z 0-9 _ - . : /, not " " (byte 3): invalid`)
	require.NoError(t, locks.CheckName("invoices"))

	cause := errors.New("gone")
	cctx, cancel := context.WithCancelCause(context.Background())
	cancel(cause)
	err = locks.ContextError(name, "9", cctx)
	require.ErrorIs(t, err, context.Canceled)
	require.ErrorIs(t, err, cause)
	require.EqualError(t, err, `lock invoices: key "9": the hold's context ended: context canceled: gone`)

	_, err = locks.DefaultSettings().ApplyTry(locks.Wait(1))
	require.EqualError(t, err, "TryHold never waits: Wait is not one of its options")
	s, err := locks.DefaultSettings().ApplyTry(locks.MaxHold(5))
	require.NoError(t, err)
	require.EqualValues(t, 5, s.MaxHold)
}
