package locks_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/holdline/locks"
)

// TestMain fails the run if any test leaves a goroutine behind: nothing
// outlives its use.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// InvoiceID is a named string type: its values are keys by their text.
type InvoiceID string

// name is the lock name most tests use, as in the exact messages they check.
const name = "invoices"

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

// newLock returns the lock "invoices" of a new store.
func newLock(t testing.TB, opts ...locks.StoreOption) (*locks.Store, *locks.Lock) {
	t.Helper()
	st := newStore(t, opts...)
	return st, openLock(t, st, name)
}

// nop is a HoldFunc that does nothing.
func nop(context.Context, *locks.Lease) error { return nil }

// mustNotRun is a HoldFunc for calls that must not run their function.
func mustNotRun(t testing.TB) locks.HoldFunc {
	return func(context.Context, *locks.Lease) error {
		t.Errorf("fn ran, but the call should have failed without running it")
		return nil
	}
}

// fenceOf holds key once (it must be free or its line must pass it on
// within the lock's wait) and returns the fence of that grant.
func fenceOf(t testing.TB, l *locks.Lock, key any) uint64 {
	t.Helper()
	var fence uint64
	require.NoError(t, l.Hold(context.Background(), key, func(_ context.Context, ls *locks.Lease) error {
		fence = ls.Fence
		return nil
	}))
	return fence
}

// requireFree checks that key is free in l: TryHold takes it at once.
func requireFree(t testing.TB, l *locks.Lock, key any, msgAndArgs ...any) {
	t.Helper()
	ok, err := l.TryHold(context.Background(), key, nop)
	require.NoError(t, err, msgAndArgs...)
	require.True(t, ok, msgAndArgs...)
}

// requireHeld checks that key is held in l: TryHold answers (false, nil)
// without running its function.
func requireHeld(t testing.TB, l *locks.Lock, key any, msgAndArgs ...any) {
	t.Helper()
	ok, err := l.TryHold(context.Background(), key, mustNotRun(t))
	require.NoError(t, err, msgAndArgs...)
	require.False(t, ok, msgAndArgs...)
}

// isClosed reports whether ch is closed, without waiting.
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// hold is a call of Hold running in its own goroutine. Its function
// reports the grant, then holds the key until letGo is called (it ignores
// its context unless the test makes it look), and returns ret.
type hold struct {
	granted chan struct{} // closed when fn starts
	done    chan struct{} // closed when Hold has returned

	// Set before granted is closed.
	ctx   context.Context
	lease *locks.Lease

	// Set before done is closed.
	err error
	ran bool

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
		letGoCh: make(chan struct{}),
		ret:     ret,
	}
	t.Cleanup(h.letGo)
	go func() {
		defer close(h.done)
		h.err = l.Hold(ctx, key, func(ctx context.Context, ls *locks.Lease) error {
			h.ctx, h.lease, h.ran = ctx, ls, true
			close(h.granted)
			<-h.letGoCh
			return h.ret
		}, opts...)
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

// wait waits until h's Hold has returned and returns its error.
func (h *hold) wait() error {
	<-h.done
	return h.err
}

// finish lets h go and returns what its Hold returned.
func (h *hold) finish() error {
	h.letGo()
	return h.wait()
}

// asError returns err as a *locks.Error, failing the test if it is not one.
func asError(t testing.TB, err error) *locks.Error {
	t.Helper()
	var e *locks.Error
	require.Truef(t, errors.As(err, &e), "error %v (%T) is not a *locks.Error", err, err)
	return e
}

// requireKind checks that err is a *locks.Error of kind k naming lock and
// key, and that errors.Is matches it with sentinel.
func requireKind(t testing.TB, err error, sentinel error, k locks.Kind, lock, key string) {
	t.Helper()
	require.Error(t, err)
	require.ErrorIs(t, err, sentinel)
	e := asError(t, err)
	require.Equal(t, k, e.Kind, "kind of %q", err)
	require.Equal(t, lock, e.Lock, "lock of %q", err)
	require.Equal(t, key, e.Key, "key of %q", err)
}

// requireNamesKey checks that err matches target (errors.Is) and is a
// *locks.Error naming the lock "invoices" and key: the form of a context's
// error from Hold.
func requireNamesKey(t testing.TB, err, target error, key string, msgAndArgs ...any) {
	t.Helper()
	require.ErrorIs(t, err, target, msgAndArgs...)
	e := asError(t, err)
	require.Equal(t, name, e.Lock)
	require.Equal(t, key, e.Key)
}

// ctxKey is a context key of the tests.
type ctxKey struct{}
