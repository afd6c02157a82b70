package locks_test

import (
	"context"
	"math"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/holdline/locks"
)

// TestOptionsAtOpenLock: TTL must be positive; Wait and MaxHold must not be
// negative; zero Wait and MaxHold are allowed.
func TestOptionsAtOpenLock(t *testing.T) {
	cases := []struct {
		name string
		opt  locks.Option
		ok   bool
	}{
		{"TTL(1ns)", locks.TTL(time.Nanosecond), true},
		{"TTL(10s)", locks.TTL(10 * time.Second), true},
		{"TTL(MaxInt64)", locks.TTL(math.MaxInt64), true},
		{"TTL(0)", locks.TTL(0), false},
		{"TTL(-1)", locks.TTL(-1), false},
		{"TTL(MinInt64)", locks.TTL(math.MinInt64), false},
		{"Wait(0)", locks.Wait(0), true},
		{"Wait(1ns)", locks.Wait(time.Nanosecond), true},
		{"Wait(MaxInt64)", locks.Wait(math.MaxInt64), true},
		{"Wait(-1)", locks.Wait(-1), false},
		{"Wait(-1s)", locks.Wait(-time.Second), false},
		{"MaxHold(0)", locks.MaxHold(0), true},
		{"MaxHold(1m)", locks.MaxHold(time.Minute), true},
		{"MaxHold(MaxInt64)", locks.MaxHold(math.MaxInt64), true},
		{"MaxHold(-1)", locks.MaxHold(-1), false},
		{"zero Option", locks.Option{}, false},
	}
	st := newStore(t)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l, err := locks.OpenLock(st, name, c.opt)
			if c.ok {
				require.NoError(t, err)
				require.NoError(t, l.Hold(context.Background(), 1, nop))
				return
			}
			require.Nil(t, l)
			requireKind(t, err, locks.ErrInvalid, locks.Invalid, name, "")
			// A good option before a bad one does not save it.
			_, err = locks.OpenLock(st, name, locks.TTL(time.Second), c.opt)
			require.ErrorIs(t, err, locks.ErrInvalid)
		})
	}
}

// TestOptionsAtHold: TTL is given to OpenLock only; Wait and MaxHold must
// not be negative. A rejected Hold names the lock and the key,
// fails at once and leaves the key as it was: free (and no fence used), or
// held by its holder (who keeps it, with nobody queued behind it).
func TestOptionsAtHold(t *testing.T) {
	cases := []struct {
		name string
		opts []locks.Option
		ok   bool
	}{
		{"TTL(10s)", []locks.Option{locks.TTL(10 * time.Second)}, false},
		{"TTL(0)", []locks.Option{locks.TTL(0)}, false},
		{"Wait(-1)", []locks.Option{locks.Wait(-1)}, false},
		{"MaxHold(-1)", []locks.Option{locks.MaxHold(-1)}, false},
		{"zero Option", []locks.Option{{}}, false},
		{"Wait(1s), then MaxHold(-1)", []locks.Option{locks.Wait(time.Second), locks.MaxHold(-1)}, false},
		{"Wait(0)", []locks.Option{locks.Wait(0)}, true},
		{"Wait(MaxInt64)", []locks.Option{locks.Wait(math.MaxInt64)}, true},
		{"MaxHold(0)", []locks.Option{locks.MaxHold(0)}, true},
		{"MaxHold(1h), Wait(1h)", []locks.Option{locks.MaxHold(time.Hour), locks.Wait(time.Hour)}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, l := newLock(t, locks.Shards(1))
			if c.ok {
				require.NoError(t, l.Hold(context.Background(), 9, nop, c.opts...))
				return
			}
			first := fenceOf(t, l, 9)

			// On a free key.
			err := l.Hold(context.Background(), 9, mustNotRun(t), c.opts...)
			requireKind(t, err, locks.ErrInvalid, locks.Invalid, name, "9")
			_, err = locks.HoldValue(context.Background(), l, 9, func(context.Context, *locks.Lease) (int, error) {
				t.Error("HoldValue ran fn despite a bad option")
				return 0, nil
			}, c.opts...)
			require.ErrorIs(t, err, locks.ErrInvalid)
			require.Equal(t, first+1, fenceOf(t, l, 9), "a rejected Hold used a fence")

			// On a held key: at once, not after a wait.
			h := holding(t, l, 9)
			err = l.Hold(context.Background(), 9, mustNotRun(t), c.opts...)
			requireKind(t, err, locks.ErrInvalid, locks.Invalid, name, "9")
			requireHeld(t, l, 9, "the holder keeps the key")
			require.Equal(t, first+2, h.lease.Fence)
			require.NoError(t, h.finish())
			require.Equal(t, first+3, fenceOf(t, l, 9), "the rejected Hold queued behind the holder")
		})
	}
}

// TestLockDefaultsAndHoldOverrides: Wait and MaxHold given to OpenLock are
// the defaults of the lock's holds; a Hold's own options override them for
// that hold only; another handle of the same name has its own defaults.
// Timed with synctest's fake clock.
func TestLockDefaultsAndHoldOverrides(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newStore(t)
		short := openLock(t, st, name, locks.Wait(2*time.Second), locks.MaxHold(3*time.Second))
		plain := openLock(t, st, name)

		h := holding(t, plain, 9)
		require.True(t, h.lease.Deadline.IsZero(), "maxHold is off unless given")

		start := time.Now()
		waitFor := func(l *locks.Lock, opts ...locks.Option) time.Duration {
			err := l.Hold(context.Background(), 9, mustNotRun(t), opts...)
			requireKind(t, err, locks.ErrInUse, locks.InUse, name, "9")
			d := time.Since(start)
			start = time.Now()
			return d
		}
		require.Equal(t, 2*time.Second, waitFor(short), "the lock's Wait")
		require.Equal(t, 5*time.Second, waitFor(short, locks.Wait(5*time.Second)), "the hold's Wait")
		require.Equal(t, 2*time.Second, waitFor(short), "the lock's Wait again")
		require.Equal(t, locks.DefaultWait, waitFor(plain), "the other handle's default")
		require.Equal(t, time.Duration(0), waitFor(short, locks.Wait(0)))
		require.NoError(t, h.finish())

		grant := func(l *locks.Lock, opts ...locks.Option) time.Duration {
			var d time.Duration
			require.NoError(t, l.Hold(context.Background(), 9, func(_ context.Context, ls *locks.Lease) error {
				if !ls.Deadline.IsZero() {
					d = ls.Deadline.Sub(ls.Granted)
				}
				return nil
			}, opts...))
			return d
		}
		require.Equal(t, 3*time.Second, grant(short), "the lock's MaxHold")
		require.Equal(t, time.Minute, grant(short, locks.MaxHold(time.Minute)), "the hold's MaxHold")
		require.Zero(t, grant(short, locks.MaxHold(0)), "MaxHold(0) at Hold turns the lock's off")
		require.Zero(t, grant(plain))
		require.Equal(t, time.Second, grant(plain, locks.MaxHold(time.Second)))
		require.Equal(t, 3*time.Second, grant(short), "the lock's MaxHold again")
	})
}

// TestTryHoldUsesLockMaxHold: a TryHold given no MaxHold gets the lock's,
// which revokes it on time. (TestTryHoldOptions: a TryHold's own.)
func TestTryHoldUsesLockMaxHold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newStore(t)
		l := openLock(t, st, name, locks.MaxHold(3*time.Second))
		ok, err := l.TryHold(context.Background(), 9, func(ctx context.Context, ls *locks.Lease) error {
			require.Equal(t, 3*time.Second, ls.Deadline.Sub(ls.Granted))
			<-ctx.Done()
			require.Equal(t, 3*time.Second, time.Since(ls.Granted))
			return nil
		})
		require.True(t, ok)
		require.EqualError(t, err, `lock invoices: key "9": the lease was lost: it was revoked at its maxHold`)
	})
}

// TestStoreOptions: Shards and TimerTick take positive values; NewStore
// panics otherwise (their documented contract). Valid ones give a working
// store.
func TestStoreOptions(t *testing.T) {
	for _, opts := range [][]locks.StoreOption{
		nil,
		{locks.Shards(1)},
		{locks.Shards(3)},
		{locks.Shards(1024)},
		{locks.TimerTick(time.Nanosecond)},
		{locks.TimerTick(time.Second)},
		{locks.Shards(2), locks.TimerTick(10 * time.Millisecond)},
	} {
		st := locks.NewStore(opts...)
		l := openLock(t, st, name)
		require.NoError(t, l.Hold(context.Background(), 9, nop))
		require.NoError(t, st.Close())
	}
	for _, opts := range [][]locks.StoreOption{
		{locks.Shards(0)},
		{locks.Shards(-1)},
		{locks.TimerTick(0)},
		{locks.TimerTick(-time.Millisecond)},
		{{}},
	} {
		require.Panics(t, func() { locks.NewStore(opts...).Close() })
	}
}

// TestSettingsApply: the exported Settings apply options as a Lock does.
func TestSettingsApply(t *testing.T) {
	s, err := locks.DefaultSettings().Apply(false, locks.TTL(time.Second), locks.MaxHold(time.Minute))
	require.NoError(t, err)
	require.Equal(t, locks.Settings{TTL: time.Second, MaxHold: time.Minute, Wait: locks.DefaultWait}, s)
	_, err = s.Apply(true, locks.TTL(time.Second))
	require.EqualError(t, err, "a ttl is set when the lock is opened, not per hold")
	_, err = s.Apply(true, locks.Wait(-1))
	require.EqualError(t, err, "the wait is negative (-1ns)")
}

// TestKeyText: the exported KeyText names keys as a Lock does.
func TestKeyText(t *testing.T) {
	text, err := locks.KeyText(int64(9))
	require.NoError(t, err)
	require.Equal(t, "9", text)
	_, err = locks.KeyText(9.5)
	require.EqualError(t, err, "a key is a string, an integer, a []byte, a [N]byte or an encoding.TextMarshaler, not a float64")
}
