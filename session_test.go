package locks_test

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/holdline/locks"
)

const ttl = 10 * time.Second

func ttlLock(t *testing.T) (*locks.Store, *locks.Lock) {
	st := newStore(t)
	return st, openLock(t, st, name, locks.TTL(ttl))
}

func acquire(t *testing.T, l *locks.Lock, sess *locks.Session, key any, opts ...locks.Option) *locks.Grant {
	t.Helper()
	g, err := l.Acquire(context.Background(), sess, key, opts...)
	require.NoError(t, err)
	return g
}

// TestSessionAcquireRelease: a session's grant holds the key until Release,
// in the same FIFO line as Hold's waiters, with rising fences; Release is
// idempotent.
func TestSessionAcquireRelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, l := ttlLock(t)
		sess := st.NewSession()
		defer sess.Close()
		g := acquire(t, l, sess, 9)
		require.Equal(t, "9", g.Lease().Key)
		require.Equal(t, name, g.Lease().Lock)
		requireHeld(t, l, 9)
		w := queued(t, context.Background(), l, 9, locks.Wait(time.Hour))
		require.False(t, isClosed(w.granted))
		require.NoError(t, g.Release())
		<-w.granted
		require.Greater(t, w.lease.Fence, g.Lease().Fence)
		<-g.Context().Done()
		require.ErrorIs(t, context.Cause(g.Context()), context.Canceled)
		require.NoError(t, g.Release(), "a second release is harmless")
		require.NoError(t, w.finish())

		// A session waits in line behind a Hold like any holder.
		h := holding(t, l, 9)
		got := make(chan *locks.Grant, 1)
		go func() { got <- acquire(t, l, sess, 9) }()
		synctest.Wait()
		require.NoError(t, h.finish())
		g = <-got
		require.Greater(t, g.Lease().Fence, h.lease.Fence)
		require.NoError(t, g.Release())
		requireFree(t, l, 9)
	})
}

// TestSessionTTL: a lease not renewed is lost exactly at its ttl, never
// before; the key goes to the next in line at once; Release then returns
// the lost error and touches nothing.
func TestSessionTTL(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, l := ttlLock(t)
		sess := st.NewSession()
		defer sess.Close()
		g := acquire(t, l, sess, 9)
		w := queued(t, context.Background(), l, 9, locks.Wait(time.Hour))

		time.Sleep(ttl - time.Nanosecond)
		synctest.Wait()
		require.NoError(t, g.Context().Err(), "lost early")
		require.False(t, isClosed(w.granted))

		time.Sleep(time.Nanosecond)
		synctest.Wait()
		<-g.Context().Done()
		const msg = `lock invoices: key "9": the lease was lost: its ttl ran out`
		require.EqualError(t, context.Cause(g.Context()), msg)
		<-w.granted
		require.Zero(t, time.Since(w.lease.Granted), "the next in line got it at the ttl")
		err := g.Release()
		require.EqualError(t, err, msg)
		requireKind(t, err, locks.ErrLost, locks.Lost, name, "9")
		require.Equal(t, err, g.Release(), "the same answer again")
		requireHeld(t, l, 9, "the release of a lost grant left the new holder alone")
		require.NoError(t, w.finish())
	})
}

// TestSessionRenew: a renewal just before the ttl keeps the lease for a
// ttl from the renewal; a renewal after the ttl does not bring a lost
// lease back, and the session may acquire again.
func TestSessionRenew(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, l := ttlLock(t)
		sess := st.NewSession()
		defer sess.Close()
		g := acquire(t, l, sess, 9)
		time.Sleep(ttl - time.Millisecond)
		require.NoError(t, sess.Renew())
		time.Sleep(ttl - time.Nanosecond)
		synctest.Wait()
		require.NoError(t, g.Context().Err(), "renewed: lost before a ttl from the renewal")
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		require.ErrorIs(t, g.Context().Err(), context.Canceled)

		require.NoError(t, sess.Renew(), "late: the session lives on")
		require.ErrorIs(t, g.Release(), locks.ErrLost, "but the lease stays lost")
		requireFree(t, l, 9)
		g = acquire(t, l, sess, 9)
		require.NoError(t, g.Release())
	})
}

// TestClosedSessionLeavesNoTimer: a closed session's ttl timer leaves the
// store's wheel with it, rather than wake the store at its old lapse.
func TestClosedSessionLeavesNoTimer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, l := ttlLock(t)
		sess := st.NewSession()
		g := acquire(t, l, sess, 9)
		require.NoError(t, g.Release())
		_, idle := locks.PendingTimers(st)
		require.False(t, idle, "the released grant's group keeps its timer until its old lapse")
		require.NoError(t, sess.Close())
		synctest.Wait()
		n, idle := locks.PendingTimers(st)
		require.Zero(t, n)
		require.True(t, idle, "a timer outlives the closed session")
	})
}

// TestReleaseOfALapsedGrant: a grant that lapsed, renewed too late and
// released before the store acted on the lapse, was lost all the same:
// Release says so, and the key is free.
func TestReleaseOfALapsedGrant(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, l := ttlLock(t)
		sess := st.NewSession()
		defer sess.Close()
		for range 10 {
			g := acquire(t, l, sess, 9)
			time.Sleep(ttl) // due now: the store may or may not have acted yet
			require.NoError(t, sess.Renew(), "late: the session lives on")
			require.EqualError(t, g.Release(), `lock invoices: key "9": the lease was lost: its ttl ran out`)
			requireFree(t, l, 9)
		}
		require.Equal(t, uint64(10), st.Stats().RevokedTTL)
	})
}

// TestCloseAfterALapse: a session closed after its grant's ttl ran out,
// whether or not the store has acted on the lapse yet (at the lapse
// instant, at a Renew that came too late, or with a Renew racing the
// store's timer), loses the lease as at its lapse (SPEC §8): Release
// returns the lost error, and the grant's context ends with it as its
// cause; a wait that lapsed fails "the session expired", not "the session
// is closed", whether it is another session's or the grant's own
// session's, handed the key as the grant goes.
func TestCloseAfterALapse(t *testing.T) {
	const lost = `lock invoices: key "9": the lease was lost: its ttl ran out`
	const expired = `lock invoices: key "9": the session expired: closed`
	for _, own := range []bool{false, true} {
		for _, renew := range []bool{false, true} {
			t.Run(fmt.Sprintf("waiter of the same session %v, renewed late %v", own, renew), func(t *testing.T) {
				for range 30 { // the store's timer and Close race differently each time
					synctest.Test(t, func(t *testing.T) {
						st, l := ttlLock(t)
						holder := st.NewSession()
						defer holder.Close()
						g := acquire(t, l, holder, 9)
						sess := st.NewSession()
						if own {
							sess = holder
						}
						errc := make(chan error, 1)
						go func() {
							_, err := l.Acquire(context.Background(), sess, 9, locks.Wait(time.Hour))
							errc <- err
						}()
						synctest.Wait()
						time.Sleep(ttl) // both lapse now
						if renew {
							require.NoError(t, holder.Renew())
							require.NoError(t, sess.Renew())
						}
						require.NoError(t, holder.Close())
						require.NoError(t, sess.Close())
						require.EqualError(t, g.Release(), lost)
						require.EqualError(t, context.Cause(g.Context()), lost)
						require.EqualError(t, <-errc, expired)
						requireFree(t, l, 9)
					})
				}
			})
		}
	}
}

// TestSessionWaitLapses: a session waiting for a key, not renewed, leaves
// the line at its ttl and is never granted; a renewed one keeps waiting.
func TestSessionWaitLapses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, l := ttlLock(t)
		h := holding(t, l, 9)
		idle, busy := st.NewSession(), st.NewSession()
		defer idle.Close()
		defer busy.Close()
		errc := make(chan error, 1)
		go func() {
			_, err := l.Acquire(context.Background(), idle, 9, locks.Wait(time.Hour))
			errc <- err
		}()
		got := make(chan *locks.Grant, 1)
		go func() { got <- acquire(t, l, busy, 9, locks.Wait(time.Hour)) }()
		synctest.Wait()
		time.Sleep(ttl / 2)
		require.NoError(t, busy.Renew())
		time.Sleep(ttl / 2)
		synctest.Wait()
		err := <-errc
		require.EqualError(t, err, `lock invoices: key "9": the session expired: closed`)
		requireKind(t, err, locks.ErrClosed, locks.Closed, name, "9")

		require.NoError(t, h.finish())
		g := <-got
		require.NoError(t, g.Release())
		require.Equal(t, locks.Stats{Grants: 2, Waits: 2, Keys: 0}, st.Stats())
	})
}

// TestSessionClose: Close releases every grant of the session and fails
// its waiters at once; Release afterwards returns nil; Acquire on a closed
// session fails Closed.
func TestSessionClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, l := ttlLock(t)
		sess := st.NewSession()
		var grants []*locks.Grant
		for k := range 5 {
			grants = append(grants, acquire(t, l, sess, k))
		}
		other := holding(t, l, "held")
		errs := make(chan error, 3)
		for range 3 {
			go func() {
				_, err := l.Acquire(context.Background(), sess, "held", locks.Wait(time.Hour))
				errs <- err
			}()
		}
		synctest.Wait()
		require.NoError(t, sess.Close())
		for range 3 {
			require.EqualError(t, <-errs, `lock invoices: key "held": the session is closed: closed`)
		}
		for k, g := range grants {
			requireFree(t, l, k)
			require.NoError(t, g.Release())
			require.ErrorIs(t, context.Cause(g.Context()), context.Canceled)
		}
		require.NoError(t, sess.Close(), "idempotent")
		_, err := l.Acquire(context.Background(), sess, 1)
		require.EqualError(t, err, `lock invoices: key "1": the session is closed: closed`)
		// A held key, with or without a wait: closed still, and no wait counted.
		waits := st.Stats().Waits
		for _, wait := range []time.Duration{0, time.Hour} {
			_, err = l.Acquire(context.Background(), sess, "held", locks.Wait(wait))
			require.EqualError(t, err, `lock invoices: key "held": the session is closed: closed`)
		}
		require.Equal(t, waits, st.Stats().Waits)
		require.EqualError(t, sess.Renew(), "the session is closed: closed")
		require.NoError(t, other.finish())
		require.Zero(t, locks.KeyEntries(st))
	})
}

// TestSessionReleaseActsOnItsOwn: releasing a grant that was lost never
// touches the key's current holder, even another grant of the same
// session.
func TestSessionReleaseActsOnItsOwn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, l := ttlLock(t)
		sess := st.NewSession()
		defer sess.Close()
		old := acquire(t, l, sess, 9, locks.MaxHold(time.Second))
		time.Sleep(time.Second)
		synctest.Wait()
		renewed := acquire(t, l, sess, 9) // the same session holds it again
		require.ErrorIs(t, old.Release(), locks.ErrLost)
		requireHeld(t, l, 9)
		require.NoError(t, renewed.Context().Err())
		require.NoError(t, renewed.Release())
		requireFree(t, l, 9)
	})
}

// TestClosedStoreClosesSessions: a closed store's sessions are closed,
// their leases lost; NewSession on it returns a closed session.
func TestClosedStoreClosesSessions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, l := ttlLock(t)
		sess := st.NewSession()
		g := acquire(t, l, sess, 9)
		require.NoError(t, st.Close())
		<-g.Context().Done()
		require.EqualError(t, g.Release(), `lock invoices: key "9": the lease was lost: its store closed`)
		_, err := l.Acquire(context.Background(), sess, 9)
		require.ErrorIs(t, err, locks.ErrClosed)
		require.ErrorIs(t, st.NewSession().Renew(), locks.ErrClosed)
		require.NoError(t, sess.Close())
	})
}

// TestAcquireRefusesBadInput: no session, another store's session, a ttl
// per acquire, nesting through ctx: Invalid at once, nothing held.
func TestAcquireRefusesBadInput(t *testing.T) {
	st, l := ttlLock(t)
	other := newStore(t)
	_, err := l.Acquire(context.Background(), nil, 9)
	require.EqualError(t, err, `lock invoices: key "9": the session is nil: invalid`)
	_, err = l.Acquire(context.Background(), other.NewSession(), 9)
	require.EqualError(t, err, `lock invoices: key "9": the session is another store's: invalid`)
	sess := st.NewSession()
	defer sess.Close()
	_, err = l.Acquire(context.Background(), sess, 9, locks.TTL(time.Second))
	require.ErrorIs(t, err, locks.ErrInvalid)
	require.NoError(t, l.Hold(context.Background(), 9, func(ctx context.Context, _ *locks.Lease) error {
		_, err := l.Acquire(ctx, sess, 9)
		require.EqualError(t, err, `lock invoices: key "9": held inside a hold of the same key: invalid`)
		return nil
	}))
	requireFree(t, l, 9)
}

// TestSessionLapseRaces: at the very instant a session's ttl runs out, a
// renewal or a handoff racing with the store's own expiry never saves the
// lapsed lease or grants the lapsed wait.
func TestSessionLapseRaces(t *testing.T) {
	for range 20 {
		synctest.Test(t, func(t *testing.T) {
			st, l := ttlLock(t)
			sess := st.NewSession()
			defer sess.Close()
			g := acquire(t, l, sess, "lease")
			time.Sleep(ttl) // the renewal comes at the lapse, with the store's timer
			require.NoError(t, sess.Renew())
			synctest.Wait()
			require.ErrorIs(t, g.Release(), locks.ErrLost, "a renewal at the lapse is too late")

			// A waiter of the session lapses as its key is let go.
			waiting := st.NewSession()
			defer waiting.Close()
			h := startHold(t, context.Background(), l, "wait")
			<-h.granted
			errc := make(chan error, 1)
			go func() {
				_, err := l.Acquire(context.Background(), waiting, "wait", locks.Wait(time.Hour))
				errc <- err
			}()
			synctest.Wait()
			time.Sleep(ttl)
			h.letGo() // at the lapse
			require.EqualError(t, <-errc, `lock invoices: key "wait": the session expired: closed`)
			require.NoError(t, h.wait())
			requireFree(t, l, "wait")
		})
	}
}
