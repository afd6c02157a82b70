package fuzz

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/holdline/locks"
)

// The helpers of the regression tests, named and shaped as the root
// package's (main_test.go there): newStore, openLock, newLock, startHold,
// queued, holding, hold.letGo, requireFree. They differ in one way: these tests run in synctest bubbles and look at a
// hold without waiting for it (requireHolding, requireWaiting,
// requireEnded, after synctest.Wait), so that no fake time passes unseen;
// and a hold records its instants.

// name is the lock name most regression tests use.
const name = "inv"

// newStore returns a store that is closed when the test ends. Inside a
// synctest bubble it must be called inside the bubble.
func newStore(t testing.TB, opts ...locks.StoreOption) *locks.Store {
	t.Helper()
	st := locks.NewStore(opts...)
	t.Cleanup(func() { st.Close() })
	return st
}

// openLock opens the lock called n in st, failing the test on an error.
func openLock(t testing.TB, st *locks.Store, n string, opts ...locks.Option) *locks.Lock {
	t.Helper()
	l, err := locks.OpenLock(st, n, opts...)
	require.NoError(t, err)
	return l
}

// newLock returns the lock "inv" of a new store.
func newLock(t testing.TB, opts ...locks.StoreOption) (*locks.Store, *locks.Lock) {
	t.Helper()
	st := newStore(t, opts...)
	return st, openLock(t, st, name)
}

// nop is a HoldFunc that does nothing.
func nop(context.Context, *locks.Lease) error { return nil }

// hold is a call of Hold running in its own goroutine. Its function
// reports the grant, then holds the key until letGo is called (it ignores
// its context), and returns ret.
type hold struct {
	granted chan struct{} // closed when fn starts
	done    chan struct{} // closed when Hold has returned
	start   time.Time     // when Hold was called

	// Set before granted is closed.
	ctx          context.Context
	lease        *locks.Lease
	grantedAfter time.Duration // since start

	// Set before done is closed.
	err     error
	ran     bool
	elapsed time.Duration // since start

	letGoCh chan struct{}
	once    sync.Once
	ret     error
}

// startHold calls l.Hold(ctx, key, fn, opts...) in a new goroutine, whose
// fn holds the key until h.letGo(). The key is let go at the end of the
// test at the latest.
func startHold(t testing.TB, ctx context.Context, l *locks.Lock, key any, opts ...locks.Option) *hold {
	return startHoldRet(t, ctx, l, key, nil, opts...)
}

// startHoldRet is startHold for a fn that returns ret.
func startHoldRet(t testing.TB, ctx context.Context, l *locks.Lock, key any, ret error, opts ...locks.Option) *hold {
	h := &hold{
		granted: make(chan struct{}),
		done:    make(chan struct{}),
		start:   time.Now(),
		letGoCh: make(chan struct{}),
		ret:     ret,
	}
	t.Cleanup(h.letGo)
	go func() {
		defer close(h.done)
		h.err = l.Hold(ctx, key, func(ctx context.Context, ls *locks.Lease) error {
			h.ctx, h.lease, h.ran, h.grantedAfter = ctx, ls, true, time.Since(h.start)
			close(h.granted)
			<-h.letGoCh
			return h.ret
		}, opts...)
		h.elapsed = time.Since(h.start)
	}()
	return h
}

// queued is startHold inside a synctest bubble, returning once the new
// call has settled: in line behind the holder (or granted, if the key was
// free), so that arrival order is known.
func queued(t testing.TB, ctx context.Context, l *locks.Lock, key any, opts ...locks.Option) *hold {
	h := startHold(t, ctx, l, key, opts...)
	synctest.Wait()
	return h
}

// holding is startHold with a background context that returns once fn
// runs: the key is held until h.letGo().
func holding(t testing.TB, l *locks.Lock, key any, opts ...locks.Option) *hold {
	h := startHold(t, context.Background(), l, key, opts...)
	<-h.granted
	return h
}

// letGo makes h's function return. Idempotent.
func (h *hold) letGo() { h.once.Do(func() { close(h.letGoCh) }) }

// isClosed reports whether ch is closed, without waiting.
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// requireHolding fails unless h's fn runs.
func requireHolding(t testing.TB, h *hold, msgAndArgs ...any) {
	t.Helper()
	ran, ended := isClosed(h.granted), isClosed(h.done)
	var err error
	if ended {
		err = h.err
	}
	require.True(t, ran && !ended, append([]any{"not holding (ran=%v, ended=%v, err=%v)", ran, ended, err}, msgAndArgs...)...)
}

// requireWaiting fails unless h is still in line.
func requireWaiting(t testing.TB, h *hold) {
	t.Helper()
	require.False(t, isClosed(h.granted), "fn ran")
	if isClosed(h.done) {
		require.Fail(t, "not waiting", "Hold returned %v", h.err)
	}
}

// requireEnded fails unless h's Hold has returned: nil for kind 0, or else
// a *locks.Error of that kind. It returns what Hold returned.
func requireEnded(t testing.TB, h *hold, kind locks.Kind) error {
	t.Helper()
	require.True(t, isClosed(h.done), "Hold has not returned")
	if kind == 0 {
		require.NoError(t, h.err)
		return nil
	}
	var e *locks.Error
	require.True(t, errors.As(h.err, &e), "Hold returned %v, want a *locks.Error of kind %v", h.err, kind)
	require.Equal(t, kind, e.Kind, "Hold returned %v", h.err)
	return h.err
}

// requireFree checks that key is free in l: TryHold takes it at once.
func requireFree(t testing.TB, l *locks.Lock, key any, msgAndArgs ...any) {
	t.Helper()
	ok, err := l.TryHold(context.Background(), key, nop)
	require.NoError(t, err, msgAndArgs...)
	require.True(t, ok, msgAndArgs...)
}
