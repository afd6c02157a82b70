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

// call is a Hold running in its own goroutine, for the hand-written
// regression tests: its fn records the grant and holds the key until let go
// (Let), ignoring its context unless made with obey.
type call struct {
	release chan error
	cancel  context.CancelFunc
	start   time.Time

	mu      sync.Mutex
	ran     bool
	lease   locks.Lease
	fnCtx   context.Context
	granted time.Duration // after start
	ended   bool
	err     error
	endedAt time.Duration // after start
}

// startHold calls l.Hold(key) in a new goroutine.
func startHold(l *locks.Lock, key any, opts ...locks.Option) *call {
	return startCall(context.Background(), l, key, false, opts...)
}

func startCall(parent context.Context, l *locks.Lock, key any, obey bool, opts ...locks.Option) *call {
	ctx, cancel := context.WithCancel(parent)
	c := &call{release: make(chan error, 1), cancel: cancel, start: time.Now()}
	liveMu.Lock()
	live = append(live, c)
	liveMu.Unlock()
	go func() {
		err := l.Hold(ctx, key, func(ctx context.Context, lease *locks.Lease) error {
			c.mu.Lock()
			c.ran, c.lease, c.fnCtx, c.granted = true, *lease, ctx, time.Since(c.start)
			c.mu.Unlock()
			if obey {
				select {
				case err := <-c.release:
					return err
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			return <-c.release
		}, opts...)
		c.mu.Lock()
		c.ended, c.err, c.endedAt = true, err, time.Since(c.start)
		c.mu.Unlock()
	}()
	return c
}

// Let makes the call's fn return err.
func (c *call) Let(err error) { c.release <- err }

// Ran reports whether fn has started.
func (c *call) Ran() bool { c.mu.Lock(); defer c.mu.Unlock(); return c.ran }

// Fence returns the fence of the grant, 0 before it.
func (c *call) Fence() uint64 { c.mu.Lock(); defer c.mu.Unlock(); return c.lease.Fence }

// Lease returns the lease fn got.
func (c *call) Lease() locks.Lease { c.mu.Lock(); defer c.mu.Unlock(); return c.lease }

// GrantedAt returns when fn started, after the call.
func (c *call) GrantedAt() time.Duration { c.mu.Lock(); defer c.mu.Unlock(); return c.granted }

// EndedAt returns when Hold returned, after the call.
func (c *call) EndedAt() time.Duration { c.mu.Lock(); defer c.mu.Unlock(); return c.endedAt }

// Ctx returns the context fn got, nil before it ran.
func (c *call) Ctx() context.Context { c.mu.Lock(); defer c.mu.Unlock(); return c.fnCtx }

// Ended reports whether Hold returned, and what.
func (c *call) Ended() (bool, error) { c.mu.Lock(); defer c.mu.Unlock(); return c.ended, c.err }

// requireHolding fails unless c's fn runs.
func requireHolding(t *testing.T, c *call, msgAndArgs ...any) {
	t.Helper()
	ended, err := c.Ended()
	require.True(t, c.Ran() && !ended, append([]any{"not holding (ran=%v, ended=%v, err=%v)", c.Ran(), ended, err}, msgAndArgs...)...)
}

// requireWaiting fails unless c is still in line.
func requireWaiting(t *testing.T, c *call) {
	t.Helper()
	ended, err := c.Ended()
	require.False(t, c.Ran(), "fn ran")
	require.False(t, ended, "Hold returned %v", err)
}

// requireEnded fails unless Hold returned an error of kind (0: nil).
func requireEnded(t *testing.T, c *call, kind locks.Kind) {
	t.Helper()
	ended, err := c.Ended()
	require.True(t, ended, "Hold has not returned")
	if kind == 0 {
		require.NoError(t, err)
		return
	}
	var e *locks.Error
	require.True(t, errors.As(err, &e), "Hold returned %v, want a *locks.Error of kind %v", err, kind)
	require.Equal(t, kind, e.Kind, "Hold returned %v", err)
}

// requireFree fails unless key can be taken at once, and returns the fence
// it was given.
func requireFree(t *testing.T, l *locks.Lock, key any) uint64 {
	t.Helper()
	var fence uint64
	ok, err := l.TryHold(context.Background(), key, func(_ context.Context, lease *locks.Lease) error {
		fence = lease.Fence
		return nil
	})
	require.NoError(t, err)
	require.True(t, ok, "key %v is not free", key)
	return fence
}

// live are the calls of the running test, let go when it ends.
var (
	liveMu sync.Mutex
	live   []*call
)

// newStore returns a store that is closed when the test ends, in its
// bubble, after every call the test started is let go: a failed test ends
// clean too, and the bubble's leak check stays meaningful.
func newStore(t *testing.T, opts ...locks.StoreOption) *locks.Store {
	s := locks.NewStore(opts...)
	liveMu.Lock()
	live = nil // calls of an earlier bubble are not ours to touch
	liveMu.Unlock()
	t.Cleanup(func() {
		s.Close()
		liveMu.Lock()
		calls := live
		live = nil
		liveMu.Unlock()
		for _, c := range calls {
			c.cancel()
			select {
			case c.release <- nil:
			default:
			}
		}
		synctest.Wait()
	})
	return s
}

// newLock opens lock name on s, failing the test if it cannot.
func newLock(t *testing.T, s *locks.Store, name string, opts ...locks.Option) *locks.Lock {
	t.Helper()
	l, err := locks.OpenLock(s, name, opts...)
	require.NoError(t, err)
	return l
}
