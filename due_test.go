package locks

import (
	"context"
	"strconv"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"
)

// queueStore returns a lock of a one-shard store, so that every maxHold
// of one duration stands in one list, and a function that takes a hold of
// key with a maxHold of an hour, as Hold would, without a goroutine.
func queueStore(t *testing.T) (*Store, *Lock, *shardLocal, func(key string) hold) {
	t.Helper()
	st := NewStore(Shards(1))
	t.Cleanup(func() { st.Close() })
	l, err := OpenLock(st, "invoices")
	require.NoError(t, err)
	take := func(key string) hold {
		t.Helper()
		h, err := l.acquire(context.Background(), key, settings{maxHold: time.Hour, wait: time.Second}, nil)
		require.NoError(t, err)
		return h
	}
	return st, l, &l.store.local[0], take
}

// queueOf returns sd's list of maxHolds of an hour, and how many slots its
// queue has, how many of them are live, and its capacity, checking that
// the list counts its live slots right.
func queueOf(t *testing.T, sd *shardLocal) (l *deadlineList, slots, live, capacity int) {
	t.Helper()
	sd.sh.Lock()
	defer sd.sh.Unlock()
	l = sd.firstListLocked(forMaxHold, time.Hour)
	if l == nil {
		return nil, 0, 0, 0
	}
	for i := l.first; i < len(l.due); i++ {
		if l.due[i].liveLocked() {
			live++
		}
	}
	require.Equal(t, l.n, live, "the list counts its live slots")
	return l, len(l.due) - l.first, live, cap(l.due)
}

// TestMaxHoldQueueLeavesAtEitherEnd: a release whose slot is the last or
// the first of its list's queue takes it off; one in between is left,
// stale; the last release empties the queue.
func TestMaxHoldQueueLeavesAtEitherEnd(t *testing.T) {
	st, l, sd, take := queueStore(t)
	s := l.store
	hs := []hold{take("a"), take("b"), take("c"), take("d")}
	_, slots, live, _ := queueOf(t, sd)
	require.Equal(t, []int{4, 4}, []int{slots, live})

	require.NoError(t, s.release(hs[3], nil)) // the last
	_, slots, live, _ = queueOf(t, sd)
	require.Equal(t, []int{3, 3}, []int{slots, live})
	require.NoError(t, s.release(hs[0], nil)) // the first
	_, slots, live, _ = queueOf(t, sd)
	require.Equal(t, []int{2, 2}, []int{slots, live})

	h := take("e") // the queue is b, c, e
	require.NoError(t, s.release(hs[2], nil))
	_, slots, live, _ = queueOf(t, sd)
	require.Equal(t, []int{3, 2}, []int{slots, live}, "c, between, is left stale")

	require.NoError(t, s.release(hs[1], nil))
	require.NoError(t, s.release(h, nil))
	dl, slots, live, _ := queueOf(t, sd)
	require.Equal(t, []int{0, 0}, []int{slots, live})
	require.Zero(t, dl.first)
	n, _ := PendingTimers(st)
	require.Zero(t, n)
}

// TestMaxHoldQueueSkipsStaleSlots: a list fired with every slot due
// revokes exactly the holds that still hold their keys, not one whose
// slot was left stale when it let go, nor the new holder of its key (a
// later holder of the same entry).
func TestMaxHoldQueueSkipsStaleSlots(t *testing.T) {
	st, l, sd, take := queueStore(t)
	s := l.store
	a, b, c := take("a"), take("b"), take("c")
	require.NoError(t, s.release(b, nil)) // stale, between a and c
	b2 := take("b")                       // b again: its slot is the last
	sd.sh.Lock()
	dl := sd.firstListLocked(forMaxHold, time.Hour)
	require.True(t, s.timers.cancel(dl), "the list's timer is in the wheel")
	sd.sh.Unlock()
	// Due: a, the stale b, c; not the new b, whose hour starts later.
	var f firing
	s.fire([]*deadlineList{dl}, b2.c.lease.Granted.Sub(s.origin)+time.Hour-time.Nanosecond, &f)

	require.ErrorIs(t, a.c.Err(), context.Canceled)
	require.ErrorIs(t, c.c.Err(), context.Canceled)
	require.NoError(t, b2.c.Err(), "the key's new holder keeps it")
	require.Equal(t, uint64(2), st.Stats().RevokedMaxHold)
	_, slots, live, _ := queueOf(t, sd)
	require.Equal(t, []int{1, 1}, []int{slots, live})
	for _, h := range []hold{a, c} {
		require.ErrorIs(t, s.release(h, nil), ErrLost)
	}
	require.NoError(t, s.release(b2, nil))
}

// TestMaxHoldQueueCompacts: a queue whose stale slots pile up behind a
// long holder, as holds come and go, keeps its live ones only when it
// fills, so it stays the size of what is live, not of how many holds came
// and went.
func TestMaxHoldQueueCompacts(t *testing.T) {
	_, l, sd, take := queueStore(t)
	s := l.store
	first := take("long")
	for i := range 1000 {
		x, y := take("x"+strconv.Itoa(i)), take("y"+strconv.Itoa(i))
		require.NoError(t, s.release(x, nil)) // between first and y: stale
		require.NoError(t, s.release(y, nil)) // the last
	}
	_, slots, live, capacity := queueOf(t, sd)
	require.Equal(t, 1, live)
	require.LessOrEqual(t, slots, minQueue)
	require.Equal(t, minQueue, capacity)
	require.NoError(t, s.release(first, nil))
}

// TestMaxHoldQueueLetsABurstGo: a burst of holds let go oldest first
// behind one that stays, all of them between the ends of the queue, is
// not kept until the one that stays lets go: past keepQueue stale slots,
// and twice the live ones, the queue keeps its live ones only.
func TestMaxHoldQueueLetsABurstGo(t *testing.T) {
	_, l, sd, take := queueStore(t)
	s := l.store
	long := take("long")
	var hs []hold
	for i := range 1000 {
		hs = append(hs, take("k"+strconv.Itoa(i)))
	}
	for _, h := range hs[:999] { // oldest first; the last stays for now
		require.NoError(t, s.release(h, nil))
		_, slots, live, _ := queueOf(t, sd)
		require.LessOrEqual(t, slots-live, max(2*live, keepQueue)+1)
	}
	_, slots, live, capacity := queueOf(t, sd)
	require.Equal(t, 2, live)
	require.LessOrEqual(t, slots, keepQueue+3)
	require.Less(t, capacity, 1024, "the array shrank with its live slots")
	require.NoError(t, s.release(hs[999], nil))
	require.NoError(t, s.release(long, nil))
}

// TestMaxHoldQueueShrinks: a queue grown past keepQueue is let go when
// its list empties, for the list's inline one, so that a burst of
// maxHolds leaves nothing once released.
func TestMaxHoldQueueShrinks(t *testing.T) {
	_, l, sd, take := queueStore(t)
	s := l.store
	var hs []hold
	for i := range 200 {
		hs = append(hs, take("k"+strconv.Itoa(i)))
	}
	_, _, _, capacity := queueOf(t, sd)
	require.Equal(t, 256, capacity)
	for _, h := range hs {
		require.NoError(t, s.release(h, nil))
	}
	dl, slots, _, capacity := queueOf(t, sd)
	require.Zero(t, slots)
	require.Equal(t, len(dl.inline), capacity)
	sd.sh.Lock()
	defer sd.sh.Unlock()
	require.Same(t, &dl.inline[0], unsafe.SliceData(dl.due[:1]), "the queue is the inline one again")
	require.Equal(t, [2]dueHold{}, dl.inline, "holding no entry")
}

// TestMaxHoldLeavesItsQueueWhenRevokedOtherwise: a session's hold with a
// maxHold revoked at its ttl, and holds revoked as the store closes,
// leave their lists' counts.
func TestMaxHoldLeavesItsQueueWhenRevokedOtherwise(t *testing.T) {
	st := NewStore(Shards(1))
	defer st.Close()
	l, err := OpenLock(st, "invoices", TTL(50*time.Millisecond))
	require.NoError(t, err)
	sd := &l.store.local[0]
	sess := st.NewSession()
	defer sess.Close()
	g, err := l.Acquire(context.Background(), sess, "a", MaxHold(time.Hour))
	require.NoError(t, err)
	_, _, live, _ := queueOf(t, sd)
	require.Equal(t, 1, live)
	select {
	case <-g.Context().Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the session's lease outlived its ttl")
	}
	require.Equal(t, uint64(1), st.Stats().RevokedTTL)
	_, _, live, _ = queueOf(t, sd)
	require.Zero(t, live, "the lease lost at its ttl left the maxHold's list")
	require.ErrorIs(t, g.Release(), ErrLost)

	h, err := l.acquire(context.Background(), "b", settings{maxHold: time.Hour, wait: time.Second}, nil)
	require.NoError(t, err)
	require.NoError(t, st.Close())
	dl, slots, live, _ := queueOf(t, sd)
	require.NotNil(t, dl)
	require.Equal(t, []int{0, 0}, []int{slots, live}, "the store's close emptied the list")
	require.ErrorIs(t, l.store.release(h, nil), ErrLost)
}
