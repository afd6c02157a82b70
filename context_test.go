package locks

import (
	"context"
	"errors"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type ctxKey string

func TestContextCarriesParentValuesAndDeadline(t *testing.T) {
	deadline := time.Now().Add(time.Hour)
	parent, cancel := context.WithDeadline(context.WithValue(context.Background(), ctxKey("who"), "me"), deadline)
	defer cancel()
	c := newHoldContext(parent, "l", "k")
	defer c.end()
	assert.Equal(t, "me", c.Value(ctxKey("who")))
	d, ok := c.Deadline()
	assert.True(t, ok)
	assert.Equal(t, deadline, d)
	assert.NoError(t, c.Err())
}

func TestContextEndsWithParentButIsNotLost(t *testing.T) {
	parent, cancel := context.WithCancelCause(context.Background())
	c := newHoldContext(parent, "l", "k")
	defer c.end()
	done := c.Done()
	cause := errors.New("the caller went away")
	cancel(cause)
	<-done
	assert.ErrorIs(t, c.Err(), context.Canceled)
	assert.Same(t, cause, context.Cause(c), "the parent's cause")
	assert.Equal(t, notLost, c.lost(), "the parent ending is not a lost lease")
}

func TestLoseCancelsWithCause(t *testing.T) {
	for _, builtFirst := range []bool{false, true} {
		c := newHoldContext(context.Background(), "l", "k")
		if builtFirst {
			_ = c.Done()
		}
		assert.NoError(t, c.Err())
		c.loseLocked(lostMaxHold)
		c.loseLocked(lostClosed) // a lease is lost once
		c.cancelLost()
		<-c.Done()
		assert.ErrorIs(t, c.Err(), context.Canceled)
		cause := context.Cause(c)
		assert.EqualError(t, cause, `lock l: key "k": the lease was lost: it was revoked at its maxHold`, "built first: %v", builtFirst)
		assert.Same(t, cause, context.Cause(c), "one cause")
		assert.Equal(t, lostMaxHold, c.lost())
		c.end()
		assert.Same(t, cause, context.Cause(c), "end keeps the cause of a lost lease")
		assert.Equal(t, lostMaxHold, c.lost())
	}
}

func TestEndCancelsAndCannotBeLost(t *testing.T) {
	c := newHoldContext(context.Background(), "l", "k")
	assert.NoError(t, c.Err())
	c.end()
	assert.ErrorIs(t, c.Err(), context.Canceled, "Err without building")
	<-c.Done() // built after end: born done
	c.loseLocked(lostMaxHold)
	assert.Equal(t, notLost, c.lost())
	assert.Equal(t, context.Canceled, context.Cause(c))
}

func TestChildContextsFollowLoss(t *testing.T) {
	c := newHoldContext(context.Background(), "l", "k")
	child, cancel := context.WithCancel(c)
	defer cancel()
	c.loseLocked(lostMaxHold)
	c.cancelLost()
	<-child.Done()
	assert.Same(t, context.Cause(c), context.Cause(child))
	assert.ErrorIs(t, context.Cause(child), ErrLost)
	c.end()
}

func TestEnclosing(t *testing.T) {
	bg := context.Background()
	outer := newHoldContext(bg, "invoices", "9")
	defer outer.end()
	inner := newHoldContext(context.WithValue(outer, ctxKey("x"), 1), "invoices", "10")
	defer inner.end()
	derived, cancel := context.WithCancel(inner)
	defer cancel()

	for _, tc := range []struct {
		name      string
		ctx       context.Context
		lock, key string
		want      conflict
	}{
		{"background", bg, "invoices", "9", noConflict},
		{"same key", outer, "invoices", "9", nested},
		{"other key", outer, "invoices", "10", noConflict},
		{"other lock", outer, "orders", "9", noConflict},
		{"outer key through inner", derived, "invoices", "9", nested},
		{"inner key", derived, "invoices", "10", nested},
		{"transaction", InTransaction(bg), "invoices", "9", inTransaction},
		{"transaction inside a hold", InTransaction(outer), "invoices", "10", inTransaction},
		{"hold inside a transaction", newHoldContext(InTransaction(bg), "invoices", "1"), "invoices", "2", inTransaction},
	} {
		assert.Equal(t, tc.want, enclosing(tc.ctx, tc.lock, tc.key), tc.name)
	}
}

func TestEnclosingSkipsEndedHolds(t *testing.T) {
	tx := InTransaction(context.Background())
	outer := newHoldContext(tx, "invoices", "9")
	kept := context.WithoutCancel(outer) // work that outlives the hold
	require.Equal(t, nested, enclosing(kept, "invoices", "9"))
	outer.end()
	assert.Equal(t, inTransaction, enclosing(kept, "invoices", "9"),
		"an ended hold encloses nothing; the walk goes on to the transaction above it")
}

func TestEnclosingBuildsNothing(t *testing.T) {
	c := newHoldContext(context.Background(), "l", "k")
	defer c.end()
	allocs := testing.AllocsPerRun(100, func() {
		_ = enclosing(c, "l", "other")
		_ = c.Err()
	})
	assert.Equal(t, 0.0, allocs)
	assert.Nil(t, c.st.Load(), "nothing built")
}

func TestErrIsSettledOnce(t *testing.T) {
	// The parent ends after the hold ended: a kept context keeps answering
	// how the hold ended, built or not.
	parent, cancel := context.WithCancel(context.Background())
	c := newHoldContext(parent, "l", "k")
	c.end()
	cancel()
	assert.ErrorIs(t, c.Err(), context.Canceled)
	<-c.Done()
	assert.Equal(t, context.Canceled, c.Err())
	assert.Equal(t, context.Canceled, context.Cause(c))

	// The parent ended first: its error stands, before and after building,
	// and a loss after it changes nothing but the reason the hold reports.
	parent, cancel = context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	c = newHoldContext(parent, "l", "k")
	before := c.Err()
	c.loseLocked(lostMaxHold)
	c.cancelLost()
	c.end()
	assert.Equal(t, context.DeadlineExceeded, before)
	assert.Equal(t, before, c.Err())
	<-c.Done()
	assert.Equal(t, before, c.Err())
	assert.Equal(t, context.DeadlineExceeded, context.Cause(c))
	assert.Equal(t, lostMaxHold, c.lost())
}

// TestErrNeverNilAfterNonNil checks Err's promise that once non-nil it
// never changes where the parent's end settles a built context on the
// context package's goroutine while the function's goroutine asks Err:
// either may settle it first, and until the real context is cancelled Err
// must answer nil, not the settled error and then nil.
func TestErrNeverNilAfterNonNil(t *testing.T) {
	for range 20_000 {
		parent, cancel := context.WithCancel(context.Background())
		c := newHoldContext(parent, "l", "k")
		c.Done() // built: the parent's end reaches it by context.AfterFunc
		cancel()
		if first, second := c.Err(), c.Err(); first != nil && second == nil {
			t.Fatalf("Err answered %v, then nil", first)
		}
		<-c.Done()
		c.end()
	}
}

func TestLoseThenEnd(t *testing.T) {
	c := newHoldContext(context.Background(), "l", "k")
	c.loseLocked(lostMaxHold)
	assert.Equal(t, nested, enclosing(c, "l", "k"), "a lost hold still runs its function")
	c.end()
	assert.Equal(t, noConflict, enclosing(c, "l", "k"), "an ended hold encloses nothing")
	assert.ErrorIs(t, context.Cause(c), ErrLost)
	assert.Equal(t, lostMaxHold, c.lost())
}

// TestContextHasOnlyContextMethods: nothing reachable from the function's
// context by type assertion can end, lose or rebind a lease.
func TestContextHasOnlyContextMethods(t *testing.T) {
	var ctx context.Context = newHoldContext(context.Background(), "l", "k")
	_, canLose := ctx.(interface{ Lose(error) bool })
	_, canEnd := ctx.(interface{ End() })
	_, canBind := ctx.(interface{ Bind(context.Context) })
	assert.False(t, canLose || canEnd || canBind)
}

// TestSizes: the hold's one allocation stays in its size class, and a
// pending maxHold's slot and a wait's ticket stay their size (amd64 and other 64-bit platforms).
func TestSizes(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("sizes are for 64-bit platforms")
	}
	assert.Equal(t, uintptr(112), unsafe.Sizeof(holdContext{}), "fn's context and lease")
	assert.Equal(t, uintptr(24), unsafe.Sizeof(dueHold{}), "a pending maxHold")
	assert.Equal(t, uintptr(48), unsafe.Sizeof(ticket{}), "a waiter's pending wait")
	assert.Zero(t, unsafe.Sizeof(shardLocal{})%128, "shardLocal is padded")
	assert.Less(t, unsafe.Sizeof(shardLocal{})-unsafe.Sizeof(local{}), uintptr(128), "shardLocal is padded no more than it needs")
}

// TestRevokingAllocatesNothing: revoking a lease whose function never
// built its context allocates nothing; ending it after neither.
func TestRevokingAllocatesNothing(t *testing.T) {
	cs := make([]*holdContext, 200)
	for i := range cs {
		cs[i] = newHoldContext(context.Background(), "l", "k")
	}
	i := 0
	allocs := testing.AllocsPerRun(100, func() {
		c := cs[i]
		i++
		c.loseLocked(lostMaxHold)
		c.cancelLost()
		c.end()
	})
	assert.Zero(t, allocs)
	assert.Equal(t, lostMaxHold, cs[0].lost())
	assert.ErrorIs(t, cs[0].Err(), context.Canceled)
}
