package locks_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/holdline/locks"
)

const revokedMsg = `lock invoices: key "m": the lease was lost: it was revoked at its maxHold`

// TestMaxHoldRevokes: at Granted+maxHold the lease is revoked: the key goes
// to the next in line at once (before the revoked fn returns), fn's context
// is cancelled with the Lost *Error as its cause, and Hold fails Lost once
// fn returns, with the exact message, wrapping fn's error.
func TestMaxHoldRevokes(t *testing.T) {
	fnErr := errors.New("payment provider did not answer")
	for _, ret := range []error{nil, fnErr, context.Canceled} {
		tn := "fn returns nil"
		if ret != nil {
			tn = "fn returns " + ret.Error()
		}
		t.Run(tn, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				_, l := newLock(t)
				const maxHold = 2 * time.Minute
				var next *hold
				var fnCtx context.Context
				var lease *locks.Lease
				err := l.Hold(context.Background(), "m", func(ctx context.Context, ls *locks.Lease) error {
					fnCtx, lease = ctx, ls
					next = queued(t, context.Background(), l, "m", locks.Wait(time.Hour))
					require.False(t, isClosed(next.granted))
					require.Equal(t, maxHold, ls.Deadline.Sub(ls.Granted))

					time.Sleep(maxHold - time.Nanosecond)
					synctest.Wait()
					require.NoError(t, ctx.Err(), "revoked early")
					require.False(t, isClosed(next.granted))

					<-ctx.Done()
					require.Zero(t, time.Since(ls.Deadline), "revoked at its maxHold exactly")
					cause := context.Cause(ctx)
					requireKind(t, cause, locks.ErrLost, locks.Lost, name, "m")
					require.EqualError(t, cause, revokedMsg)
					require.ErrorIs(t, ctx.Err(), context.Canceled)

					// The next in line holds the key while this fn still runs.
					<-next.granted
					require.Equal(t, ls.Fence+1, next.lease.Fence)
					require.Zero(t, time.Since(next.lease.Granted), "granted at the revocation")
					requireHeld(t, l, "m")
					time.Sleep(time.Second) // a revoked fn that takes its time
					return ret
				}, locks.MaxHold(maxHold))

				requireKind(t, err, locks.ErrLost, locks.Lost, name, "m")
				if ret == nil {
					require.EqualError(t, err, revokedMsg)
				} else {
					require.EqualError(t, err, revokedMsg+"; the function returned: "+ret.Error(), "a log line keeps both")
				}
				if ret != nil {
					require.ErrorIs(t, err, ret, "wraps fn's error")
				}
				require.EqualError(t, context.Cause(fnCtx), revokedMsg, "the cause stays after Hold returned")
				require.False(t, lease.Deadline.IsZero())

				// The revoked fn returning did not disturb the new holder.
				requireHeld(t, l, "m")
				require.NoError(t, next.ctx.Err())
				require.NoError(t, next.finish())
			})
		})
	}
}

// TestMaxHoldWithoutWaiters: revoked with nobody in line, the key is free
// at once, before the revoked fn returns.
func TestMaxHoldWithoutWaiters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, l := newLock(t)
		err := l.Hold(context.Background(), "m", func(ctx context.Context, ls *locks.Lease) error {
			<-ctx.Done()
			var fence uint64
			ok, err := l.TryHold(context.Background(), "m", func(_ context.Context, ls2 *locks.Lease) error {
				fence = ls2.Fence
				return nil
			})
			require.NoError(t, err)
			require.True(t, ok, "the key is free once revoked")
			require.Greater(t, fence, ls.Fence)
			return nil
		}, locks.MaxHold(time.Second))
		require.EqualError(t, err, revokedMsg)
	})
}

// TestMaxHoldCountsFromTheGrant: maxHold counts from the grant, not the
// call: a waiter granted after 4 s with MaxHold(3s) is revoked at 7 s.
func TestMaxHoldCountsFromTheGrant(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, l := newLock(t)
		start := time.Now()
		h := holding(t, l, "m")
		w := startHold(t, context.Background(), l, "m", locks.MaxHold(3*time.Second), locks.Wait(time.Hour))
		time.Sleep(4 * time.Second)
		require.NoError(t, h.finish())
		<-w.granted
		require.Equal(t, 4*time.Second, w.lease.Granted.Sub(start))
		require.Equal(t, 3*time.Second, w.lease.Deadline.Sub(w.lease.Granted))
		<-w.ctx.Done()
		require.Equal(t, 7*time.Second, time.Since(start))
		require.EqualError(t, w.finish(), revokedMsg)
	})
}

// TestMaxHoldSettings: MaxHold at OpenLock is the lock's default; a Hold's
// MaxHold overrides it; MaxHold(0) turns it off (Deadline zero, never
// revoked). Revocation comes at the effective maxHold exactly.
func TestMaxHoldSettings(t *testing.T) {
	cases := []struct {
		name string
		lock []locks.Option
		hold []locks.Option
		want time.Duration // 0: off
	}{
		{"off by default", nil, nil, 0},
		{"lock default", []locks.Option{locks.MaxHold(time.Minute)}, nil, time.Minute},
		{"hold only", nil, []locks.Option{locks.MaxHold(90 * time.Second)}, 90 * time.Second},
		{"hold overrides lock", []locks.Option{locks.MaxHold(time.Minute)}, []locks.Option{locks.MaxHold(5 * time.Second)}, 5 * time.Second},
		{"hold lengthens lock", []locks.Option{locks.MaxHold(time.Minute)}, []locks.Option{locks.MaxHold(time.Hour)}, time.Hour},
		{"MaxHold(0) at hold turns it off", []locks.Option{locks.MaxHold(time.Minute)}, []locks.Option{locks.MaxHold(0)}, 0},
		{"MaxHold(0) at lock is off", []locks.Option{locks.MaxHold(0)}, nil, 0},
		{"last option wins", nil, []locks.Option{locks.MaxHold(time.Second), locks.MaxHold(2 * time.Second)}, 2 * time.Second},
		{"1ns", nil, []locks.Option{locks.MaxHold(time.Nanosecond)}, time.Nanosecond},
		{"1.5ms", nil, []locks.Option{locks.MaxHold(1500 * time.Microsecond)}, 1500 * time.Microsecond},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				st := newStore(t)
				l := openLock(t, st, name, c.lock...)
				err := l.Hold(context.Background(), "m", func(ctx context.Context, ls *locks.Lease) error {
					if c.want == 0 {
						require.True(t, ls.Deadline.IsZero())
						time.Sleep(1000 * time.Hour)
						synctest.Wait()
						require.NoError(t, ctx.Err(), "revoked with maxHold off")
						return nil
					}
					require.Equal(t, c.want, ls.Deadline.Sub(ls.Granted))
					<-ctx.Done()
					elapsed := time.Since(ls.Granted)
					require.GreaterOrEqual(t, elapsed, c.want, "revoked early")
					require.LessOrEqual(t, elapsed, c.want+tick, "revoked late")
					return nil
				}, c.hold...)
				if c.want == 0 {
					require.NoError(t, err)
				} else {
					require.EqualError(t, err, revokedMsg)
				}
			})
		})
	}
}

// TestMaxHoldRevokesEachHolderInTurn: a line of holders that all overstay
// is revoked one after the other, each at its own grant + maxHold.
func TestMaxHoldRevokesEachHolderInTurn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newStore(t)
		l := openLock(t, st, name, locks.MaxHold(time.Second), locks.Wait(time.Hour))
		start := time.Now()
		errs := make(chan error, 5)
		grants := make(chan time.Duration, 5)
		for i := 0; i < 5; i++ {
			go func() {
				errs <- l.Hold(context.Background(), "m", func(ctx context.Context, ls *locks.Lease) error {
					grants <- ls.Granted.Sub(start)
					<-ctx.Done()
					time.Sleep(10 * time.Second) // overstay well past the next grant
					return ctx.Err()
				})
			}()
			synctest.Wait()
		}
		for i := 0; i < 5; i++ {
			require.Equal(t, time.Duration(i)*time.Second, <-grants)
		}
		for i := 0; i < 5; i++ {
			err := <-errs
			require.EqualError(t, err, revokedMsg+"; the function returned: context canceled")
			require.ErrorIs(t, err, context.Canceled)
		}
	})
}

// TestTTLDoesNotRevokeInProcessHolders: in-process holders renew their
// lease implicitly (the ttl is for leases over a connection): a hold far
// longer than the lock's ttl is not lost.
func TestTTLDoesNotRevokeInProcessHolders(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newStore(t)
		l := openLock(t, st, name, locks.TTL(time.Second))
		require.NoError(t, l.Hold(context.Background(), "m", func(ctx context.Context, ls *locks.Lease) error {
			require.True(t, ls.Deadline.IsZero())
			time.Sleep(24 * time.Hour)
			synctest.Wait()
			require.NoError(t, ctx.Err())
			return nil
		}))
	})
}

// TestMaxHoldRealClock: the one real-time check of a maxHold: it does not
// fire early and does fire (with a wide margin for a loaded machine).
func TestMaxHoldRealClock(t *testing.T) {
	_, l := newLock(t)
	const maxHold = 30 * time.Millisecond
	err := l.Hold(context.Background(), "m", func(ctx context.Context, ls *locks.Lease) error {
		select {
		case <-ctx.Done():
		case <-time.After(10 * time.Second):
			t.Error("not revoked within 10 s")
		}
		require.GreaterOrEqual(t, time.Since(ls.Granted), maxHold, "revoked early")
		return nil
	}, locks.MaxHold(maxHold))
	require.EqualError(t, err, revokedMsg)
}

// TestManyMaxHoldsOneShard: a shard keeps a deadline list for each of its
// first eight durations; past them, the deadlines due within one tick
// share one list, whatever their durations and in whatever order they
// came. Each lease is still revoked at its own Granted+maxHold rounded up
// to the tick (1 ms), never before, and waits and maxHolds of the same
// tick do not mix.
func TestManyMaxHoldsOneShard(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, l := newLock(t, locks.Shards(1))
		const n = 60
		type revoked struct {
			maxHold, after time.Duration
			err            error
		}
		out := make(chan revoked, n)
		for i := range n {
			// Three durations a tick, sub-tick apart, the later due first.
			maxHold := time.Duration(n-i)*time.Millisecond/3 + 7*time.Microsecond
			go func() {
				var after time.Duration
				err := l.Hold(context.Background(), i, func(ctx context.Context, ls *locks.Lease) error {
					<-ctx.Done()
					after = time.Since(ls.Granted)
					return nil
				}, locks.MaxHold(maxHold))
				out <- revoked{maxHold, after, err}
			}()
		}
		// And waiters of the same durations, timing out in the same ticks.
		h := holding(t, l, "held")
		waits := make(chan revoked, n)
		for i := range n {
			wait := time.Duration(i+1)*time.Millisecond/3 + 7*time.Microsecond
			go func() {
				start := time.Now()
				err := l.Hold(context.Background(), "held", func(context.Context, *locks.Lease) error { return nil }, locks.Wait(wait))
				waits <- revoked{wait, time.Since(start), err}
			}()
		}
		for range n {
			r := <-out
			require.ErrorIs(t, r.err, locks.ErrLost)
			require.Equal(t, ceilTick(r.maxHold), r.after, "maxHold %v", r.maxHold)
		}
		for range n {
			r := <-waits
			require.ErrorIs(t, r.err, locks.ErrInUse)
			require.Equal(t, ceilTick(r.maxHold), r.after, "wait %v", r.maxHold)
		}
		require.NoError(t, h.finish())
	})
}

// ceilTick rounds d up to a whole default tick.
func ceilTick(d time.Duration) time.Duration {
	return (d + locks.DefaultTick - 1) / locks.DefaultTick * locks.DefaultTick
}

// TestFarMaxHoldsKeepTheirTicks: lists past a shard's first eight
// durations are told apart by the end of their tick, however far: two
// maxHolds 2^62 ns apart (146 years; a tick of 2^20 ns divides them) are
// each revoked at their own instant, not the earlier one's.
func TestFarMaxHoldsKeepTheirTicks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const tick = time.Duration(1 << 20)
		_, l := newLock(t, locks.Shards(1), locks.TimerTick(tick))
		type revoked struct {
			maxHold, after time.Duration
			err            error
		}
		holds := []time.Duration{1 << 61, 1<<61 + 1<<62} // the last two: past the eight lists
		for i := range 8 {
			holds = append([]time.Duration{time.Duration(i+1) * time.Hour}, holds...)
		}
		out := make(chan revoked, len(holds))
		for i, maxHold := range holds {
			granted := make(chan struct{})
			go func() {
				var after time.Duration
				err := l.Hold(context.Background(), i, func(ctx context.Context, ls *locks.Lease) error {
					close(granted)
					<-ctx.Done()
					after = time.Since(ls.Granted)
					return nil
				}, locks.MaxHold(maxHold))
				out <- revoked{maxHold, after, err}
			}()
			<-granted // in this order
		}
		for range holds {
			r := <-out
			require.ErrorIs(t, r.err, locks.ErrLost)
			require.Equal(t, (r.maxHold+tick-1)/tick*tick, r.after, "maxHold %v", r.maxHold)
		}
	})
}

// TestListsByTickGoWhenEmpty: a shard's deadlines past its first eight
// durations share a list per tick they fall due in; one whose holds all let
// go before that tick is dropped at once, its timer with it, so that a
// program holding briefly with long maxHolds keeps no list, nor timer, per
// tick of its longest one.
func TestListsByTickGoWhenEmpty(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, l := newLock(t, locks.Shards(1))
		for i := range 2000 {
			d := time.Duration(1+i%12) * time.Hour // twelve durations: four past the eight lists
			require.NoError(t, l.Hold(context.Background(), i, nop, locks.MaxHold(d)))
			time.Sleep(time.Millisecond)
		}
		pending, _ := locks.PendingTimers(st)
		require.Zero(t, pending)
		lists, timers := locks.DeadlineLists(st)
		require.Equal(t, 8, lists, "the eight lists by duration, none by tick")
		require.Equal(t, 8, timers, "their timers, each due at its old head's instant")
	})
}

// TestManyShardsRevokedAtOnce: a thousand maxHolds of one duration, over
// every shard, come due in one tick, so the timer goroutine fires some
// 250 lists at once: eight shards side by side, shared with a helper
// goroutine where GOMAXPROCS allows. Each lease is revoked once, at its
// maxHold, and its key handed to the one waiter behind it, at a higher
// fence; no waiter's own wait, pending in the same shards, ends early.
func TestManyShardsRevokedAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, l := newLock(t)
		const n = 1000
		const maxHold = 50 * time.Millisecond
		type result struct {
			key   int
			fence uint64
			after time.Duration // from the grant to the end of the hold's ctx (holders) or from the call to the grant (waiters)
			err   error
		}
		holders := make(chan result, n)
		for i := range n {
			go func() {
				r := result{key: i}
				r.err = l.Hold(context.Background(), i, func(ctx context.Context, ls *locks.Lease) error {
					r.fence = ls.Fence
					<-ctx.Done()
					r.after = time.Since(ls.Granted)
					return nil
				}, locks.MaxHold(maxHold))
				holders <- r
			}()
		}
		synctest.Wait() // every key held
		waiters := make(chan result, n)
		for i := range n {
			go func() {
				r := result{key: i}
				start := time.Now()
				r.err = l.Hold(context.Background(), i, func(_ context.Context, ls *locks.Lease) error {
					r.fence, r.after = ls.Fence, time.Since(start)
					return nil
				}, locks.Wait(time.Second))
				waiters <- r
			}()
		}
		synctest.Wait() // every waiter in line
		require.Equal(t, n, st.Stats().Waiting)

		fences := make(map[int]uint64, n)
		for range n {
			r := <-holders
			require.ErrorIs(t, r.err, locks.ErrLost, "key %d", r.key)
			require.Equal(t, ceilTick(maxHold), r.after, "key %d", r.key)
			fences[r.key] = r.fence
		}
		for range n {
			r := <-waiters
			require.NoError(t, r.err, "key %d", r.key)
			require.Equal(t, ceilTick(maxHold), r.after, "key %d: granted at the revocation", r.key)
			require.Greater(t, r.fence, fences[r.key], "key %d", r.key)
		}
		s := st.Stats()
		require.Equal(t, uint64(n), s.RevokedMaxHold)
		require.Equal(t, uint64(2*n), s.Grants)
		require.Zero(t, s.TimedOut)
		require.Zero(t, s.Keys)
		for i := range n {
			requireFree(t, l, i)
		}
	})
}
