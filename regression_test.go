package locks_test

// Regression tests for bugs found in review, each named after what it
// guards: a kept context that changed its Err, a revocation that ran the
// caller's context code on the timer goroutine, a concurrent Close that
// returned before the store was closed, and fences that repeated across
// stores on a coarse wall clock.

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/holdline/locks"
)

// TestRegressionKeptContextErrIsStable: the context fn got, kept past the hold,
// must answer the same Err every time once it has answered a non-nil one
// (context.Context's contract: "After Err returns a non-nil error,
// successive calls to Err return the same error"). Here the caller's
// deadline passes while fn runs, fn never calls Done, and the hold ends:
// Err answers DeadlineExceeded (from the parent), then Canceled (ended,
// nothing built), then DeadlineExceeded again once Done builds the real
// context.
func TestRegressionKeptContextErrIsStable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, l := newLock(t)
		parent, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		var kept context.Context
		var during error
		require.NoError(t, l.Hold(parent, 9, func(ctx context.Context, _ *locks.Lease) error {
			time.Sleep(2 * time.Second) // the caller's deadline passes while fn runs
			during = ctx.Err()
			kept = ctx
			return nil
		}))
		require.ErrorIs(t, during, context.DeadlineExceeded)
		after := kept.Err()
		<-kept.Done()
		built := kept.Err()
		require.Equal(t, during, after, "Err changed when the hold ended")
		require.Equal(t, after, built, "Err changed when Done built the real context")
	})
}

// TestRegressionKeptContextErrIsStableParentEndsLater: the same, with the
// caller's deadline passing only after the hold ended: Err answers
// Canceled, then DeadlineExceeded once anything (Done, Value,
// context.Cause) builds the real context.
func TestRegressionKeptContextErrIsStableParentEndsLater(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, l := newLock(t)
		parent, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		var kept context.Context
		require.NoError(t, l.Hold(parent, 9, func(ctx context.Context, _ *locks.Lease) error {
			kept = ctx
			return nil
		}))
		first := kept.Err()
		require.ErrorIs(t, first, context.Canceled, "the hold is over")
		time.Sleep(2 * time.Second) // the caller's deadline passes
		_ = context.Cause(kept)     // builds the real context
		require.Equal(t, first, kept.Err(), "Err changed after the hold ended")
	})
}

// slowDoneCtx is a caller's context whose Done takes a while to answer (a
// context type of the caller's own, say one that builds its channel behind
// a busy mutex): until gate is closed. Only the goroutine that calls Done
// should pay for it.
type slowDoneCtx struct {
	context.Context
	gate chan struct{}
}

func (c slowDoneCtx) Done() <-chan struct{} {
	<-c.gate
	return c.Context.Done()
}

// TestRegressionRevokeRunsNoCallerCodeOnTheTimerGoroutine: revoking a lease at
// its maxHold must not run the holder's caller's context code on the store's
// one timer goroutine. Revocation once built fn's real context (a
// context.WithCancelCause on the caller's context, which calls its Done)
// on the timer goroutine, and under the lease's mutex: every
// other deadline of the store then waits for that call. Here key 2's
// maxHold passes 1 s after key 1's, and is not acted on for as long as that
// Done call takes.
func TestRegressionRevokeRunsNoCallerCodeOnTheTimerGoroutine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, l := newLock(t)
		gate := make(chan struct{})
		defer close(gate) // before the cleanups, which need the lease's mutex
		slow := startHold(t, slowDoneCtx{context.Background(), gate}, l, 1, locks.MaxHold(time.Second))
		other := startHold(t, context.Background(), l, 2, locks.MaxHold(2*time.Second))
		<-slow.granted
		<-other.granted
		time.Sleep(2*time.Second + 10*time.Millisecond)
		require.Error(t, other.ctx.Err(), "key 2's maxHold passed 10 ms ago; its lease is not revoked yet")
		waiter := startHold(t, context.Background(), l, 2, locks.Wait(time.Minute))
		time.Sleep(10 * time.Millisecond)
		require.True(t, isClosed(waiter.granted), "key 2 was not passed on at its maxHold")
	})
}

// TestRegressionCloseReturnsOnlyOnceClosed: Close is idempotent, and a Close
// that returns has closed the store, whoever else is closing it at the
// same time (as sync.Once.Do returns only once its function has run, and
// as Close's doc promises: every lease lost, the timer goroutine ended).
// Here a second Close, called as soon as the first has lost one lease (from
// a context.AfterFunc of that lease's context), returns at once, while the
// first is still going through the other shards: most leases are not yet
// lost. Real goroutines; a few rounds, for a loaded machine.
func TestRegressionCloseReturnsOnlyOnceClosed(t *testing.T) {
	const n, rounds = 4000, 5
	for round := 0; round < rounds; round++ {
		st, l := newLock(t)
		hs := make([]*hold, n)
		for i := range hs {
			hs[i] = startHold(t, context.Background(), l, i)
		}
		var once sync.Once
		notLost := make(chan int, 1)
		second := func() {
			require.NoError(t, st.Close()) // the second Close: the store must be closed when it returns
			k := 0
			for _, h := range hs {
				if h.ctx.Err() == nil {
					k++
				}
			}
			notLost <- k
		}
		for _, h := range hs {
			<-h.granted
			context.AfterFunc(h.ctx, func() { once.Do(second) })
		}
		require.NoError(t, st.Close()) // the first Close
		k := <-notLost
		require.Zero(t, k, "round %d: the second Close returned with %d of %d leases not yet lost", round, k, n)
		for _, h := range hs {
			require.ErrorIs(t, h.finish(), locks.ErrLost)
		}
	}
}

// TestRegressionFencesAcrossStoresOnACoarseClock: a store opened later
// in the same place gives every key higher fences than an earlier one did,
// "as long as the wall clock did not go back". The seed argument (lease.Seed,
// shard.NewTable) needs the wall clock to have moved on by at least as many
// nanoseconds as the earlier store gave fences on one shard; a clock that
// did not go back but did not move either (a coarse clock: Windows' ticks,
// a jiffies clocksource, a VM; here the bubble's clock) gives the new store
// the old seed, and its first fences repeat the old store's.
func TestRegressionFencesAcrossStoresOnACoarseClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var last uint64
		for gen := 0; gen < 2; gen++ {
			st := locks.NewStore(locks.Shards(1))
			l := openLock(t, st, name)
			for i := 0; i < 3; i++ {
				f := fenceOf(t, l, 9)
				require.Greater(t, f, last, "store %d, grant %d", gen, i)
				last = f
			}
			require.NoError(t, st.Close())
		}
	})
}
