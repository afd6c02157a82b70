package locks_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"runtime/pprof"
	"strings"
	"testing"
	"testing/synctest"
	"time"
	"weak"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/holdline/locks"
)

// errList is an error whose type is not comparable (a slice), as
// multi-error types often are.
type errList []error

func (e errList) Error() string { return fmt.Sprint([]error(e)) }

// TestReviewHoldAllUncomparableError: HoldAll returns what fn returned; a
// fn error of a non-comparable type must not make HoldAll panic
// (releaseAll compares it with != to release's answer).
func TestReviewHoldAllUncomparableError(t *testing.T) {
	_, l := newLock(t)
	want := errList{errors.New("one"), errors.New("two")}
	var err error
	var panicked any
	func() {
		defer func() { panicked = recover() }()
		err = l.HoldAll(context.Background(), []any{"a", "b"}, func(context.Context, []*locks.Lease) error {
			return want
		})
	}()
	assert.Nil(t, panicked, "HoldAll panicked")
	if panicked == nil {
		assert.Equal(t, want.Error(), err.Error())
	}
	ok, terr := l.TryHold(context.Background(), "a", nop)
	assert.True(t, ok && terr == nil, "key a is left held by nobody after HoldAll returned")
	ok, terr = l.TryHold(context.Background(), "b", nop)
	assert.True(t, ok && terr == nil, "key b is left held by nobody after HoldAll returned")
}

// TestReviewLostCauseSurvivesEnd: when a lease is revoked, fn's context
// reports a non-nil Err only once its Done is closed, and its cause is the
// Lost *Error, also when fn returns (ends the hold) before the store has
// cancelled its real context. Two leases on one shard are revoked by one
// firing, A's first: A's context has many children, so cancelling it takes
// a while; B wakes on A's Done and looks at its own context, then returns.
func TestReviewLostCauseSurvivesEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, l := newLock(t, locks.Shards(1))
		ctxA := make(chan context.Context, 1)
		aDone := make(chan error, 1)
		go func() {
			aDone <- l.Hold(context.Background(), "a", func(ctx context.Context, _ *locks.Lease) error {
				cancels := make([]context.CancelFunc, 0, 50_000)
				for range cap(cancels) {
					_, c := context.WithCancel(ctx)
					cancels = append(cancels, c)
				}
				ctxA <- ctx
				<-ctx.Done()
				for _, c := range cancels {
					c()
				}
				return nil
			}, locks.MaxHold(time.Second))
		}()
		ca := <-ctxA // no fake time passed: B's grant is at A's instant
		var errSeen error
		var doneSeen bool
		var ctxB context.Context
		errB := l.Hold(context.Background(), "b", func(ctx context.Context, _ *locks.Lease) error {
			ctxB = ctx
			_ = ctx.Done() // built before the loss
			<-ca.Done()
			errSeen, doneSeen = ctx.Err(), isClosed(ctx.Done())
			return nil
		}, locks.MaxHold(time.Second))
		require.ErrorIs(t, <-aDone, locks.ErrLost)
		require.ErrorIs(t, errB, locks.ErrLost)
		assert.False(t, errSeen != nil && !doneSeen, "Err() was %v while Done was not closed", errSeen)
		var e *locks.Error
		cause := context.Cause(ctxB)
		assert.Truef(t, errors.As(cause, &e) && e.Kind == locks.Lost,
			"the cause of a revoked hold's context is the Lost *Error, not %v", cause)
	})
}

// holdInBackground calls l.Hold in a new goroutine whose function waits
// for release, and returns once the function runs. Nothing of the
// goroutine refers to l while the function runs but Hold's own frames.
func holdInBackground(l *locks.Lock, release <-chan struct{}, errc chan<- error) {
	started := make(chan struct{})
	go func(l *locks.Lock) {
		err := l.Hold(context.Background(), 9, func(ctx context.Context, _ *locks.Lease) error {
			close(started)
			<-release
			return nil
		})
		errc <- err
	}(l)
	<-started
}

// TestReviewUnreachableStoreKeepsRunningHold: the store is closed by the
// garbage collector only when no Store, Lock or hold of it is left; a
// function running under one of its keys is such a hold, and must not have
// its lease lost ("its store closed") because its caller kept no Lock.
func TestReviewUnreachableStoreKeepsRunningHold(t *testing.T) {
	release := make(chan struct{})
	errc := make(chan error, 1)
	func() {
		st := locks.NewStore()
		l, err := locks.OpenLock(st, name)
		require.NoError(t, err)
		holdInBackground(l, release, errc)
	}()
	for range 20 {
		runtime.GC()
		time.Sleep(5 * time.Millisecond)
	}
	close(release)
	require.NoError(t, <-errc, "a hold whose function ran to its end, untouched")
}

// TestReviewSessionCloseFailsWaitersClosed: Session.Close takes its
// waiters out of their lines, and their Acquire fails exactly "... the
// session is closed: closed", also when a key is handed on as the session
// closes (it must then be passed to the next in line, or the Acquire
// granted before Close; never "the session expired": the session was
// renewed a moment ago and its ttl is an hour).
func TestReviewSessionCloseFailsWaitersClosed(t *testing.T) {
	st := newStore(t)
	l := openLock(t, st, name, locks.TTL(time.Hour))
	const n = 200
	expired := 0
	for round := 0; round < 40 && expired == 0; round++ {
		holder, waiter := st.NewSession(), st.NewSession()
		grants := make([]*locks.Grant, n)
		for i := range n {
			grants[i] = acquire(t, l, holder, i)
		}
		errs := make(chan error, n)
		for i := range n {
			go func() {
				g, err := l.Acquire(context.Background(), waiter, i, locks.Wait(time.Hour))
				if err == nil {
					g.Release()
				}
				errs <- err
			}()
		}
		require.Eventually(t, func() bool { return st.Stats().Waiting == n }, 10*time.Second, time.Millisecond)
		start := make(chan struct{})
		for _, g := range grants { // keys handed on to the waiter...
			go func() { <-start; g.Release() }()
		}
		close(start)
		waiter.Close() // ...as it closes
		for range n {
			if err := <-errs; err != nil && strings.Contains(err.Error(), "expired") {
				expired++
				if expired == 1 {
					t.Errorf("a waiter of a session that closed failed with %q", err)
				}
			}
		}
		holder.Close()
	}
	require.Zero(t, expired)
}

// TestReviewProfileForgetsGrantsOfAClosedStore: with ProfileHolds, a hold
// leaves the holds profile once it lets its key go. A closed store closes
// its sessions; a session's grants lost with it are let go by the
// session's Close, and must leave the profile too.
func TestReviewProfileForgetsGrantsOfAClosedStore(t *testing.T) {
	prof := pprofLookupHolds(t)
	st := locks.NewStore(locks.ProfileHolds(1))
	l := openLock(t, st, name)
	before := prof.Count()
	sess := st.NewSession()
	g := acquire(t, l, sess, 9)
	require.Equal(t, before+1, prof.Count())
	require.NoError(t, st.Close())
	<-g.Context().Done()
	require.NoError(t, sess.Close())
	require.Equal(t, before, prof.Count(), "the lost grant, closed with its session, is still in the holds profile")
}

// TestProfileForgetsALostGrant: a session's grant leaves the holds profile
// when its lease is lost, at its ttl or its maxHold, released or not: a
// session that lapsed may never release it.
func TestProfileForgetsALostGrant(t *testing.T) {
	prof := pprofLookupHolds(t)
	st := newStore(t, locks.ProfileHolds(1))
	l := openLock(t, st, name, locks.TTL(time.Millisecond))
	before := prof.Count()
	g := acquire(t, l, st.NewSession(), 9) // never renewed, never released
	<-g.Context().Done()
	require.Eventually(t, func() bool { return prof.Count() == before }, 10*time.Second, time.Millisecond,
		"the lost grant is still in the holds profile")
	m := openLock(t, st, "orders")
	g = acquire(t, m, st.NewSession(), 9, locks.MaxHold(time.Millisecond))
	<-g.Context().Done()
	require.Eventually(t, func() bool { return prof.Count() == before }, 10*time.Second, time.Millisecond,
		"the grant revoked at its maxHold is still in the holds profile")
	require.ErrorIs(t, g.Release(), locks.ErrLost)
	require.Equal(t, before, prof.Count())
}

func pprofLookupHolds(t *testing.T) *pprof.Profile {
	locks.NewStore(locks.ProfileHolds(1)).Close() // registers it
	p := pprof.Lookup(locks.HoldsProfile)
	require.NotNil(t, p)
	return p
}

// TestReviewHoldTimesCountOnlyGrants: with RecordTimes, HoldTimes counts
// how long keys were held by the holds the store counts as grants. A
// waiter whose context ended as the key was handed to it is counted as a
// cancelled wait, not a grant (its function never runs): it must not add
// a time held (it adds 0 s, computed from a zero Granted).
func TestReviewHoldTimesCountOnlyGrants(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newStore(t, locks.RecordTimes())
		l := openLock(t, st, name)
		h := holding(t, l, 9)
		inner, cancel := context.WithCancel(context.Background())
		ctx := &doneBlocksCtx{Context: inner, entered: make(chan struct{}), proceed: make(chan struct{})}
		errc := make(chan error, 1)
		go func() { errc <- l.Hold(ctx, 9, mustNotRun(t), locks.Wait(time.Hour)) }()
		<-ctx.entered
		require.NoError(t, h.finish()) // the key is handed to the parked waiter
		cancel()                       // whose context then ends
		close(ctx.proceed)
		require.ErrorIs(t, <-errc, context.Canceled)
		s := st.Stats()
		require.Equal(t, uint64(1), s.Grants)
		require.Equal(t, uint64(1), s.Canceled)
		require.Equal(t, s.Grants, s.HoldTimes.Count(), "HoldTimes %+v", s.HoldTimes)
	})
}

// TestReviewTextMarshalerKeysWithPointers: a key is any value whose type
// implements encoding.TextMarshaler, its identity MarshalText's text: an
// IP address (netip.Addr, net.IP) is a common one. These hold pointers
// (or are slices), and are held by their text like any other.
func TestReviewTextMarshalerKeysWithPointers(t *testing.T) {
	_, l := newLock(t)
	for _, key := range []any{netip.MustParseAddr("10.0.0.1"), net.ParseIP("10.0.0.1")} {
		var got string
		err := l.Hold(context.Background(), key, func(_ context.Context, ls *locks.Lease) error {
			got = ls.Key
			return nil
		})
		if assert.NoError(t, err, "a %T key", key) {
			assert.Equal(t, "10.0.0.1", got, "a %T key's text", key)
		}
	}
}

// TestReviewAbandonedSessionIsReclaimed: an abandoned session (never
// closed, no longer referenced) is reclaimed at its ttl: once its lease
// lapsed, nothing of the store should keep it. The store keeps every open
// session in a map until the session's or the store's Close.
func TestReviewAbandonedSessionIsReclaimed(t *testing.T) {
	st := newStore(t)
	l := openLock(t, st, name, locks.TTL(10*time.Millisecond))
	wp := func() weak.Pointer[locks.Session] {
		sess := st.NewSession()
		g := acquire(t, l, sess, 9)
		<-g.Context().Done() // lapsed at its ttl
		return weak.Make(sess)
	}()
	requireFree(t, l, 9)
	for range 10 {
		runtime.GC()
		if wp.Value() == nil {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("an abandoned session whose lease lapsed is still held by its store")
}

// TestReviewHoldAllLeaseLostWhileWaiting: a key HoldAll took is revoked at
// its maxHold while HoldAll waits for the next key; HoldAll lets go and
// fails. The caller's context never ended, so the error must not be of
// kind Canceled, nor match context.Canceled (a caller reads that as "my
// request went away"); the lease was lost.
func TestReviewHoldAllLeaseLostWhileWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, l := newLock(t)
		h := holding(t, l, "b")
		err := l.HoldAll(context.Background(), []any{"a", "b"}, mustNotRunAll(t),
			locks.MaxHold(time.Second), locks.Wait(time.Hour))
		e := asError(t, err)
		assert.NotEqual(t, locks.Canceled, e.Kind, "%v", err)
		assert.NotErrorIs(t, err, context.Canceled)
		assert.ErrorIs(t, err, locks.ErrLost)
		require.NoError(t, h.finish())
		requireFree(t, l, "a")
	})
}

func mustNotRunAll(t *testing.T) func(context.Context, []*locks.Lease) error {
	return func(context.Context, []*locks.Lease) error {
		t.Error("fn ran")
		return nil
	}
}
