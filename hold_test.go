package locks_test

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/holdline/locks"
)

// TestHoldReturnsWhatFnReturned: Hold runs fn holding the key, lets it go
// when fn returns, and returns what fn returned.
func TestHoldReturnsWhatFnReturned(t *testing.T) {
	_, l := newLock(t)
	fnErr := errors.New("charge declined")
	for _, want := range []error{nil, fnErr} {
		ran := false
		err := l.Hold(context.Background(), 9, func(_ context.Context, ls *locks.Lease) error {
			ran = true
			require.Equal(t, name, ls.Lock)
			require.Equal(t, "9", ls.Key)
			require.NotZero(t, ls.Fence)
			require.False(t, ls.Granted.IsZero())
			require.True(t, ls.Deadline.IsZero(), "maxHold is off unless given")
			requireHeld(t, l, 9, "the key is held while fn runs")
			return want
		})
		require.True(t, ran)
		require.Equal(t, want, err, "Hold returns fn's error itself")
		requireFree(t, l, 9, "the key is let go when fn returns")
	}
}

// TestHoldValue: HoldValue answers what fn answered; the zero value when fn
// did not run.
func TestHoldValue(t *testing.T) {
	_, l := newLock(t)
	v, err := locks.HoldValue(context.Background(), l, 9, func(_ context.Context, ls *locks.Lease) (string, error) {
		return "charged " + ls.Key, nil
	})
	require.NoError(t, err)
	require.Equal(t, "charged 9", v)

	fnErr := errors.New("declined")
	v, err = locks.HoldValue(context.Background(), l, 9, func(context.Context, *locks.Lease) (string, error) {
		return "partial", fnErr
	})
	require.Equal(t, fnErr, err)
	require.Equal(t, "partial", v)

	h := holding(t, l, 9)
	v, err = locks.HoldValue(context.Background(), l, 9, func(context.Context, *locks.Lease) (string, error) {
		t.Error("ran while the key was held")
		return "x", nil
	}, locks.Wait(0))
	require.ErrorIs(t, err, locks.ErrInUse)
	require.Empty(t, v)
	require.NoError(t, h.finish())
}

// TestTryHold: TryHold never waits: (true, fn's error) when it ran fn,
// (false, nil) when the key is held, without running fn.
func TestTryHold(t *testing.T) {
	_, l := newLock(t)
	fnErr := errors.New("declined")
	ok, err := l.TryHold(context.Background(), 9, func(context.Context, *locks.Lease) error { return fnErr })
	require.True(t, ok)
	require.Equal(t, fnErr, err)
	ok, err = l.TryHold(context.Background(), 9, nop)
	require.True(t, ok)
	require.NoError(t, err)

	h := holding(t, l, 9)
	ok, err = l.TryHold(context.Background(), 9, mustNotRun(t))
	require.False(t, ok)
	require.NoError(t, err)

	v, ok, err := locks.TryHoldValue(context.Background(), l, 9, func(context.Context, *locks.Lease) (int, error) {
		t.Error("ran while the key was held")
		return 1, nil
	})
	require.Zero(t, v)
	require.False(t, ok)
	require.NoError(t, err)
	require.NoError(t, h.finish())

	v, ok, err = locks.TryHoldValue(context.Background(), l, 9, func(context.Context, *locks.Lease) (int, error) {
		return 42, fnErr
	})
	require.Equal(t, 42, v)
	require.True(t, ok)
	require.Equal(t, fnErr, err)
}

// TestHammerOneHolder: a key has at most one holder. Goroutines
// hold one key over and over; inside fn, a plain counter (the race
// detector watches it) and a holder count check the conserved quantities.
func TestHammerOneHolder(t *testing.T) {
	st := newStore(t)
	l := openLock(t, st, name)
	const workers, rounds = 8, 200
	var inside atomic.Int32
	counter := 0
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := 0; r < rounds; r++ {
				work := func(context.Context, *locks.Lease) error {
					if n := inside.Add(1); n != 1 {
						t.Errorf("%d holders at once", n)
					}
					counter++
					inside.Add(-1)
					return nil
				}
				var err error
				if r%4 == 3 {
					var ok bool
					for !ok && err == nil {
						ok, err = l.TryHold(context.Background(), "hot", work)
						if !ok {
							runtime.Gosched()
						}
					}
				} else {
					err = l.Hold(context.Background(), "hot", work, locks.Wait(time.Minute))
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	require.Equal(t, workers*rounds, counter)
}

// TestPanicAndGoexitLetTheKeyGo: however fn ends, the key is let go: a
// panic in fn lets the key go and then goes on with its value, out of
// Hold; runtime.Goexit in fn lets the key go too, and Hold does not
// return. The next in line is granted; other keys of the shard carry on:
// one held meanwhile stays held, a new one is held at once.
func TestPanicAndGoexitLetTheKeyGo(t *testing.T) {
	type boom struct{}
	for _, how := range []string{"panic", "Goexit"} {
		t.Run(how, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				_, l := newLock(t, locks.Shards(1))
				other := holding(t, l, "other")

				var w *hold
				var recovered any
				returned := false
				exited := make(chan struct{})
				go func() {
					defer close(exited)
					defer func() { recovered = recover() }()
					_ = l.Hold(context.Background(), 9, func(context.Context, *locks.Lease) error {
						w = queued(t, context.Background(), l, 9)
						if isClosed(w.granted) {
							t.Error("w was granted while fn held the key")
						}
						if how == "panic" {
							panic(boom{})
						}
						runtime.Goexit()
						return nil
					})
					returned = true
				}()
				<-exited
				require.False(t, returned, "Hold returned after fn's %s", how)
				if how == "panic" {
					require.Equal(t, boom{}, recovered, "the panic goes on with its value")
				} else {
					require.Nil(t, recovered)
				}

				<-w.granted // the next in line got the key
				require.NoError(t, w.finish())
				requireFree(t, l, 9, "the key is free")

				// Keys of the same shard carry on.
				require.NoError(t, l.Hold(context.Background(), "third", nop, locks.Wait(0)))
				requireHeld(t, l, "other", "the other key is still held by its holder")
				require.NoError(t, other.finish())
				requireFree(t, l, "other")
			})
		})
	}
}

// TestPanicWithMaxHoldLetsKeyGo: the same with a maxHold armed: the key is
// let go and nothing fires later.
func TestPanicWithMaxHoldLetsKeyGo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, l := newLock(t)
		require.Panics(t, func() {
			_ = l.Hold(context.Background(), 9, func(context.Context, *locks.Lease) error { panic("boom") },
				locks.MaxHold(time.Second))
		})
		h := holding(t, l, 9)
		time.Sleep(time.Hour)
		require.NoError(t, h.ctx.Err(), "the panicked hold's maxHold does not revoke the next holder")
		require.NoError(t, h.finish())
	})
}

// TestFnContextDerivesFromCaller: fn's context carries the caller's values
// and deadline, is live while fn runs, and has ended once Hold returned.
func TestFnContextDerivesFromCaller(t *testing.T) {
	_, l := newLock(t)
	deadline := time.Now().Add(time.Hour)
	ctx, cancel := context.WithDeadline(context.WithValue(context.Background(), ctxKey{}, "tenant-7"), deadline)
	defer cancel()
	var kept context.Context
	require.NoError(t, l.Hold(ctx, 9, func(ctx context.Context, _ *locks.Lease) error {
		kept = ctx
		require.Equal(t, "tenant-7", ctx.Value(ctxKey{}))
		d, ok := ctx.Deadline()
		require.True(t, ok)
		require.Equal(t, deadline, d)
		require.NoError(t, ctx.Err())
		require.False(t, isClosed(ctx.Done()))
		return nil
	}))
	require.Error(t, kept.Err(), "fn's context ends with the hold")
	require.True(t, isClosed(kept.Done()))
	require.Equal(t, "tenant-7", kept.Value(ctxKey{}))
	require.NotErrorIs(t, context.Cause(kept), locks.ErrLost, "a hold that ended normally was not lost")
	require.NoError(t, ctx.Err(), "the caller's context is untouched")
}

// TestFnContextEndsWhenCallerEnds: when the caller's context ends while fn
// runs, fn's context ends too, but the lease is not lost: the key stays
// held until fn returns, and Hold returns what fn returned.
func TestFnContextEndsWhenCallerEnds(t *testing.T) {
	for _, ret := range []error{nil, errors.New("stopped early")} {
		synctest.Test(t, func(t *testing.T) {
			_, l := newLock(t)
			ctx, cancel := context.WithCancelCause(context.Background())
			callerCause := errors.New("request aborted")
			h := startHoldRet(t, ctx, l, 9, ret, locks.MaxHold(time.Hour))
			<-h.granted
			w := queued(t, context.Background(), l, 9, locks.Wait(time.Hour))

			cancel(callerCause)
			<-h.ctx.Done()
			require.ErrorIs(t, h.ctx.Err(), context.Canceled)
			require.Equal(t, callerCause, context.Cause(h.ctx))
			require.NotErrorIs(t, context.Cause(h.ctx), locks.ErrLost)

			time.Sleep(time.Minute)
			requireHeld(t, l, 9, "the key is still held")
			require.False(t, isClosed(w.granted), "the key did not pass on")

			require.Equal(t, ret, h.finish(), "Hold returns what fn returned")
			<-w.granted
			require.Equal(t, h.lease.Fence+1, w.lease.Fence)
			require.NoError(t, w.finish())
		})
	}
}

// TestEndedContext: a context that has already ended makes Hold fail with
// its error, free key or not, without running fn and without using a
// fence; TryHold too.
func TestEndedContext(t *testing.T) {
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithDeadline(context.Background(), time.Now().Add(-time.Minute))
	defer cancel2()
	causeErr := errors.New("shutting down")
	withCause, cancel3 := context.WithCancelCause(context.Background())
	cancel3(causeErr)
	for _, c := range []struct {
		name string
		ctx  context.Context
		want error
	}{
		{"canceled", canceled, context.Canceled},
		{"deadline exceeded", expired, context.DeadlineExceeded},
		{"canceled with a cause", withCause, context.Canceled},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, l := newLock(t, locks.Shards(1))
			first := fenceOf(t, l, 9)

			err := l.Hold(c.ctx, 9, mustNotRun(t))
			requireNamesKey(t, err, c.want, "9", "free key")
			require.Contains(t, err.Error(), `lock invoices: key "9": `)
			for _, s := range []error{locks.ErrInvalid, locks.ErrInUse, locks.ErrLost, locks.ErrLimit, locks.ErrClosed} {
				require.NotErrorIs(t, err, s, "a sentinel of another outcome")
			}
			ok, err := l.TryHold(c.ctx, 9, mustNotRun(t))
			require.False(t, ok)
			require.ErrorIs(t, err, c.want, "TryHold, free key")
			_, err = locks.HoldValue(c.ctx, l, 9, func(context.Context, *locks.Lease) (int, error) {
				t.Error("ran")
				return 0, nil
			}, locks.MaxHold(time.Second))
			require.ErrorIs(t, err, c.want)

			h := holding(t, l, 9)
			require.Equal(t, first+1, h.lease.Fence, "the failed calls used no fence")
			err = l.Hold(c.ctx, 9, mustNotRun(t), locks.Wait(time.Hour))
			requireNamesKey(t, err, c.want, "9", "held key: fails at once")
			require.NoError(t, h.finish())
			require.Equal(t, first+2, fenceOf(t, l, 9), "nothing was queued, no fence was used")
		})
	}
}

// TestHoldNilOnlyIfFnRanAndReturnedNil: every failure of Hold is non-nil,
// and nil means fn ran and returned nil.
func TestHoldNilOnlyIfFnRanAndReturnedNil(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, l := newLock(t)
		ran := false
		fn := func(ctx context.Context, _ *locks.Lease) error {
			ran = true
			<-ctx.Done()
			return nil
		}
		// Revoked at maxHold, fn returned nil: Lost, not nil.
		err := l.Hold(context.Background(), 9, fn, locks.MaxHold(time.Second))
		require.True(t, ran)
		require.ErrorIs(t, err, locks.ErrLost)

		// The store closed under fn, fn returned nil: Lost, not nil.
		ran = false
		err = l.Hold(context.Background(), 9, func(ctx context.Context, ls *locks.Lease) error {
			st.Close()
			return fn(ctx, ls)
		})
		require.True(t, ran)
		require.ErrorIs(t, err, locks.ErrLost)
	})
}

// TestRejectedCallsUseNoFence: with every key on one shard, the fence of a
// grant is the previous one plus one when the calls in between were all
// rejected: they used no fence and left every key as it was.
func TestRejectedCallsUseNoFence(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, l := newLock(t, locks.Shards(1))
		h := holding(t, l, "held")
		last := h.lease.Fence
		canceled, cancel := context.WithCancel(context.Background())
		cancel()
		rejected := []struct {
			name string
			call func() error
		}{
			{"bad key", func() error { return l.Hold(context.Background(), 1.5, mustNotRun(t)) }},
			{"bad option", func() error { return l.Hold(context.Background(), "free", mustNotRun(t), locks.Wait(-1)) }},
			{"ended ctx, free key", func() error { return l.Hold(canceled, "free", mustNotRun(t)) }},
			{"ended ctx, held key", func() error { return l.Hold(canceled, "held", mustNotRun(t)) }},
			{"transaction", func() error {
				return l.Hold(locks.InTransaction(context.Background()), "free", mustNotRun(t))
			}},
			{"nested", func() error { return l.Hold(h.ctx, "held", mustNotRun(t)) }},
			{"Wait(0), held key", func() error { return l.Hold(context.Background(), "held", mustNotRun(t), locks.Wait(0)) }},
			{"TryHold, held key", func() error {
				ok, err := l.TryHold(context.Background(), "held", mustNotRun(t))
				if err == nil && !ok {
					return errors.New("not acquired")
				}
				return err
			}},
			{"timed out", func() error {
				return l.Hold(context.Background(), "held", mustNotRun(t), locks.Wait(time.Second))
			}},
			{"left the line", func() error {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				defer cancel()
				return l.Hold(ctx, "held", mustNotRun(t), locks.Wait(time.Hour))
			}},
		}
		for _, r := range rejected {
			require.Error(t, r.call(), r.name)
		}
		require.Equal(t, last+1, fenceOf(t, l, "free"), "a rejected call used a fence")
		require.NoError(t, h.finish())
		require.Equal(t, last+2, fenceOf(t, l, "held"), "a rejected call stayed in line")
	})
}

// TestNilFunctionIsInvalid: a nil function fails Invalid at once, holding
// nothing.
func TestNilFunctionIsInvalid(t *testing.T) {
	_, l := newLock(t)
	err := l.Hold(context.Background(), 9, nil)
	requireKind(t, err, locks.ErrInvalid, locks.Invalid, name, "9")
	require.EqualError(t, err, `lock invoices: key "9": the function to run is nil: invalid`)
	acquired, err := l.TryHold(context.Background(), 9, nil)
	require.False(t, acquired)
	require.ErrorIs(t, err, locks.ErrInvalid)
	_, err = locks.HoldValue[int](context.Background(), l, 9, nil)
	require.ErrorIs(t, err, locks.ErrInvalid)
	_, acquired, err = locks.TryHoldValue[int](context.Background(), l, 9, nil)
	require.False(t, acquired)
	require.ErrorIs(t, err, locks.ErrInvalid)
	requireFree(t, l, 9)
}
