package locks_test

import (
	"context"
	"runtime"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/holdline/locks"
)

// TestWritingTheLeaseChangesNoGrant: a function that writes every field
// of its *Lease still holds its key, and only its key (SPEC §3: at most one
// holder; §1: nothing fn gets can rebind a lease); its maxHold revokes it
// at the real grant's Granted+maxHold, and the next in line gets the key
// with the next fence.
func TestWritingTheLeaseChangesNoGrant(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, l := newLock(t)
		other := openLock(t, st, "refunds")
		const maxHold = time.Minute
		var next *hold
		err := l.Hold(context.Background(), "9", func(ctx context.Context, ls *locks.Lease) error {
			granted := *ls
			ls.Lock, ls.Key, ls.Fence = "refunds", "nine", 0
			ls.Granted, ls.Deadline = time.Time{}, time.Now().Add(time.Hour)

			requireHeld(t, l, "9", "the key its lease no longer names")
			requireHeld(t, l, 9)
			requireFree(t, l, "nine", "the key its lease names now")
			requireFree(t, other, "nine")
			holders, err := st.Holders(name, "9")
			require.NoError(t, err)
			require.Len(t, holders, 1)
			require.Equal(t, name, holders[0].Lease.Lock)
			require.Equal(t, "9", holders[0].Lease.Key)

			next = queued(t, context.Background(), l, "9", locks.Wait(time.Hour))
			time.Sleep(maxHold - time.Nanosecond)
			synctest.Wait()
			require.NoError(t, ctx.Err(), "revoked early")
			<-ctx.Done()
			require.Equal(t, granted.Deadline, time.Now(), "revoked at the grant's own deadline")
			<-next.granted
			require.Equal(t, granted.Fence+1, next.lease.Fence)
			return nil
		}, locks.MaxHold(maxHold))
		require.ErrorIs(t, err, locks.ErrLost)
		requireHeld(t, l, "9")
		require.NoError(t, next.finish())
		requireFree(t, l, "9")
	})
}

// TestHoldersReadsNoNameFromTheLease: Holders names a holder's key from
// the key's entry, so a function writing its lease's Lock and Key races
// with nothing of the store's (run with -race).
func TestHoldersReadsNoNameFromTheLease(t *testing.T) {
	st, l := newLock(t)
	writing, stop, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		done <- l.Hold(context.Background(), "9", func(_ context.Context, ls *locks.Lease) error {
			close(writing)
			for i := 0; ; i++ {
				select {
				case <-stop:
					return nil
				default:
					ls.Lock, ls.Key = "refunds", strconv.Itoa(i)
				}
			}
		})
	}()
	<-writing
	for range 100 {
		holders, err := st.Holders(name)
		require.NoError(t, err)
		require.Len(t, holders, 1)
		require.Equal(t, "9", holders[0].Lease.Key)
		require.Equal(t, name, holders[0].Lease.Lock)
	}
	close(stop)
	require.NoError(t, <-done)
}

// TestAReleasedHoldIsNotKeptByItsMaxHold: once a hold with a maxHold is
// over, nothing of the store's keeps its context, nor the caller's
// context and its values, from the collector: alone in its list, first
// or last of several.
func TestAReleasedHoldIsNotKeptByItsMaxHold(t *testing.T) {
	_, l := newLock(t)
	type payload struct{ _ [1024]byte }
	type payloadKey struct{}
	// holdsWith holds key, with a maxHold, in a new goroutine whose
	// caller's context carries a payload. It returns once the key is held,
	// with a function that lets it go and returns what Hold returned (the
	// goroutine has ended then, and keeps nothing), and a channel closed
	// once the payload is collected.
	holdsWith := func(key string) (finish func() error, collected <-chan struct{}) {
		p := new(payload)
		ch := make(chan struct{})
		runtime.AddCleanup(p, func(ch chan struct{}) { close(ch) }, ch)
		ctx := context.WithValue(context.Background(), payloadKey{}, p)
		granted, letGo, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
		go func() {
			done <- l.Hold(ctx, key, func(context.Context, *locks.Lease) error {
				close(granted)
				<-letGo
				return nil
			}, locks.MaxHold(time.Hour))
		}()
		<-granted
		return func() error { close(letGo); return <-done }, ch
	}
	requireCollected := func(collected <-chan struct{}, what string) {
		t.Helper()
		for range 100 {
			runtime.GC()
			select {
			case <-collected:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
		t.Fatalf("%s: its caller's context was not collected", what)
	}

	finish, collected := holdsWith("a")
	require.NoError(t, finish())
	requireCollected(collected, "a hold alone in its list")

	// One shard, so that the three share a list.
	st := newStore(t, locks.Shards(1))
	l = openLock(t, st, name)
	finishA, ca := holdsWith("a")
	finishB, cb := holdsWith("b")
	finishC, cc := holdsWith("c")
	require.NoError(t, finishC()) // the last slot
	requireCollected(cc, "the last of three")
	require.NoError(t, finishA()) // the first slot
	requireCollected(ca, "the first of three")
	require.NoError(t, finishB()) // alone again
	requireCollected(cb, "the last one left")

	// Released between two that stay, then uncovered at the back.
	finishA, _ = holdsWith("a")
	finishB, cb = holdsWith("b")
	finishC, cc = holdsWith("c")
	require.NoError(t, finishB()) // stale, between a and c
	require.NoError(t, finishC())
	requireCollected(cc, "the last of three, after the middle one")
	requireCollected(cb, "the middle one, left at the back")
	require.NoError(t, finishA())
}
