package lease_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/holdline/locks/lease"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type ctxKey string

func bound(parent context.Context, lock, key string) *lease.Context {
	c := new(lease.Context)
	c.Bind(parent)
	c.Lease.Lock, c.Lease.Key = lock, key
	return c
}

func TestContextCarriesParentValuesAndDeadline(t *testing.T) {
	deadline := time.Now().Add(time.Hour)
	parent, cancel := context.WithDeadline(context.WithValue(context.Background(), ctxKey("who"), "me"), deadline)
	defer cancel()
	c := bound(parent, "l", "k")
	defer c.End()
	assert.Equal(t, "me", c.Value(ctxKey("who")))
	d, ok := c.Deadline()
	assert.True(t, ok)
	assert.Equal(t, deadline, d)
	assert.NoError(t, c.Err())
	assert.Same(t, parent, c.Parent())
}

func TestContextEndsWithParentButIsNotLost(t *testing.T) {
	parent, cancel := context.WithCancel(context.Background())
	c := bound(parent, "l", "k")
	defer c.End()
	done := c.Done()
	cancel()
	<-done
	assert.ErrorIs(t, c.Err(), context.Canceled)
	assert.Nil(t, c.Lost(), "the parent ending is not a lost lease")
}

func TestLoseCancelsWithCause(t *testing.T) {
	cause := errors.New("revoked")
	for _, builtFirst := range []bool{false, true} {
		c := bound(context.Background(), "l", "k")
		if builtFirst {
			_ = c.Done()
		}
		assert.NoError(t, c.Err())
		require.True(t, c.Lose(cause))
		assert.False(t, c.Lose(errors.New("again")), "a lease is lost once")
		<-c.Done()
		assert.ErrorIs(t, c.Err(), context.Canceled)
		assert.Same(t, cause, context.Cause(c), "built first: %v", builtFirst)
		assert.Same(t, cause, c.Lost())
		c.End()
		assert.Same(t, cause, context.Cause(c), "End keeps the cause of a lost lease")
	}
}

func TestEndCancelsAndCannotBeLost(t *testing.T) {
	c := bound(context.Background(), "l", "k")
	assert.NoError(t, c.Err())
	c.End()
	assert.ErrorIs(t, c.Err(), context.Canceled, "Err without building")
	<-c.Done() // built after End: born done
	assert.False(t, c.Lose(errors.New("late")))
	assert.Nil(t, c.Lost())
}

func TestChildContextsFollowLoss(t *testing.T) {
	c := bound(context.Background(), "l", "k")
	child, cancel := context.WithCancel(c)
	defer cancel()
	cause := errors.New("gone")
	c.Lose(cause)
	<-child.Done()
	assert.Same(t, cause, context.Cause(child))
	c.End()
}

func TestCheck(t *testing.T) {
	bg := context.Background()
	outer := bound(bg, "invoices", "9")
	defer outer.End()
	inner := bound(context.WithValue(outer, ctxKey("x"), 1), "invoices", "10")
	defer inner.End()
	derived, cancel := context.WithCancel(inner)
	defer cancel()

	for _, tc := range []struct {
		name      string
		ctx       context.Context
		lock, key string
		want      lease.Conflict
	}{
		{"background", bg, "invoices", "9", lease.None},
		{"same key", outer, "invoices", "9", lease.Nested},
		{"other key", outer, "invoices", "10", lease.None},
		{"other lock", outer, "orders", "9", lease.None},
		{"outer key through inner", derived, "invoices", "9", lease.Nested},
		{"inner key", derived, "invoices", "10", lease.Nested},
		{"transaction", lease.InTransaction(bg), "invoices", "9", lease.Transaction},
		{"transaction inside a hold", lease.InTransaction(outer), "invoices", "10", lease.Transaction},
		{"hold inside a transaction", bound(lease.InTransaction(bg), "invoices", "1"), "invoices", "2", lease.Transaction},
	} {
		assert.Equal(t, tc.want, lease.Check(tc.ctx, tc.lock, tc.key), tc.name)
	}
}

func TestCheckSkipsEndedHolds(t *testing.T) {
	tx := lease.InTransaction(context.Background())
	outer := bound(tx, "invoices", "9")
	kept := context.WithoutCancel(outer) // work that outlives the hold
	require.Equal(t, lease.Nested, lease.Check(kept, "invoices", "9"))
	outer.End()
	assert.Equal(t, lease.Transaction, lease.Check(kept, "invoices", "9"),
		"an ended hold encloses nothing; the walk goes on to the transaction above it")
	assert.Equal(t, lease.None, lease.Check(context.WithoutCancel(bound(context.Background(), "l", "k")), "l", "x"))
}

func TestCheckBuildsNothing(t *testing.T) {
	c := bound(context.Background(), "l", "k")
	defer c.End()
	allocs := testing.AllocsPerRun(100, func() {
		_ = lease.Check(c, "l", "other")
		_ = c.Err()
	})
	assert.Equal(t, 0.0, allocs)
}

func TestFences(t *testing.T) {
	f := lease.NewFences(41)
	assert.Equal(t, uint64(41), f.Last())
	assert.Equal(t, uint64(42), f.Next())
	assert.Equal(t, uint64(43), f.Next())
	assert.Equal(t, uint64(43), f.Last())
}

func TestSeedFollowsTheWallClock(t *testing.T) {
	before := uint64(time.Now().UnixNano())
	assert.GreaterOrEqual(t, lease.Seed(), before, "never below the wall clock (it may be above: see Retire)")
}

func TestErrIsSettledOnce(t *testing.T) {
	// The parent's deadline passes after the hold ended: a kept context
	// keeps answering how the hold ended, built or not.
	parent, cancel := context.WithCancel(context.Background())
	c := bound(parent, "l", "k")
	c.End()
	cancel()
	assert.ErrorIs(t, c.Err(), context.Canceled)
	<-c.Done()
	assert.Equal(t, context.Canceled, c.Err())
	assert.Equal(t, context.Canceled, context.Cause(c))

	// The parent ended first: its error stands, before and after building.
	parent, cancel = context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	c = bound(parent, "l", "k")
	before := c.Err()
	c.End()
	assert.Equal(t, context.DeadlineExceeded, before)
	assert.Equal(t, before, c.Err())
	<-c.Done()
	assert.Equal(t, before, c.Err())
}

func TestLoseThenEnd(t *testing.T) {
	c := bound(context.Background(), "l", "k")
	cause := errors.New("revoked")
	c.Lose(cause)
	assert.Equal(t, lease.Nested, lease.Check(c, "l", "k"), "a lost hold still runs its function")
	c.End()
	assert.Equal(t, lease.None, lease.Check(c, "l", "k"), "an ended hold encloses nothing")
	assert.Same(t, cause, c.Lost())
	assert.Same(t, cause, context.Cause(c))
}

func TestRetireRaisesTheSeed(t *testing.T) {
	f := lease.NewFences(lease.Seed() + 1_000_000) // a millisecond ahead of the wall clock
	f.Next()
	f.Retire()
	assert.Greater(t, lease.Seed(), uint64(0))
	assert.GreaterOrEqual(t, lease.Seed(), f.Last(), "a later store starts above a retired store's last fence")
}
