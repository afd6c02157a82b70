package locks

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/holdline/locks/shard"
)

// TestFireTogetherPassesBusyShards: a list fired together with others
// (fire), not the first, whose shard another goroutine holds is fired
// after the others, alone, once the shard is free; the others'
// revocations and handoffs are not held up by it, and two lists of one
// shard fire under one acquisition of its mutex, the first's handoff
// taking the second's deadline out of it.
func TestFireTogetherPassesBusyShards(t *testing.T) {
	st := NewStore()
	defer st.Close()
	l, err := OpenLock(st, "invoices")
	require.NoError(t, err)
	s := l.store
	shardOf := func(key string) *shardLocal {
		sd, _ := s.shardOf(shard.Hash(l.state.hash, key))
		return sd
	}
	a, b := "a", ""
	for i := 0; b == ""; i++ {
		if k := "b" + strconv.Itoa(i); shardOf(k) != shardOf(a) {
			b = k
		}
	}

	type call struct {
		granted, done chan struct{}
		ctx           context.Context
		err           error
	}
	hold := func(key string, opts ...Option) *call {
		c := &call{granted: make(chan struct{}), done: make(chan struct{})}
		go func() {
			defer close(c.done)
			c.err = l.Hold(context.Background(), key, func(ctx context.Context, _ *Lease) error {
				c.ctx = ctx
				close(c.granted)
				<-ctx.Done()
				return nil
			}, opts...)
		}()
		return c
	}
	await := func(ch <-chan struct{}, what string) {
		t.Helper()
		select {
		case <-ch:
		case <-time.After(10 * time.Second):
			t.Fatal(what)
		}
	}
	// list returns sd's list for p and d, out of the wheel, as the timer
	// goroutine has it when it fires it.
	list := func(sd *shardLocal, p purpose, d time.Duration) *deadlineList {
		t.Helper()
		sd.sh.Lock()
		defer sd.sh.Unlock()
		for _, dl := range sd.lists {
			if dl.p == p && dl.d == d {
				require.True(t, s.timers.cancel(dl), "the list's timer is in the wheel")
				return dl
			}
		}
		t.Fatalf("no list for %v of %v", p, d)
		return nil
	}

	ha := hold(a, MaxHold(time.Hour))
	await(ha.granted, "a not granted")
	hb := hold(b, MaxHold(time.Hour))
	await(hb.granted, "b not granted")
	next := hold(a, Wait(2*time.Hour)) // in a's line, its wait in a's shard's list for 2 h
	require.Eventually(t, func() bool {
		sd := shardOf(a)
		sd.sh.Lock()
		defer sd.sh.Unlock()
		return sd.sh.Waiting == 1
	}, 10*time.Second, time.Millisecond)
	group := []*deadlineList{
		list(shardOf(a), forMaxHold, time.Hour),
		list(shardOf(a), forWait, 2*time.Hour),
		list(shardOf(b), forMaxHold, time.Hour),
	}

	busy := shardOf(b).sh
	busy.Lock()
	unlock := sync.OnceFunc(busy.Unlock)
	defer unlock() // before Close, which takes every shard, on a failure
	fired := make(chan struct{})
	go func() {
		defer close(fired)
		var f firing
		s.fire(group, s.since()+90*time.Minute, &f) // both maxHolds due, the wait not
	}()
	await(ha.done, "a's maxHold waited for a busy shard")
	require.ErrorIs(t, ha.err, ErrLost)
	await(next.granted, "a not handed on")
	require.NoError(t, hb.ctx.Err())
	select {
	case <-fired:
		t.Fatal("fire returned before b's list could fire")
	default:
	}
	unlock()
	await(fired, "b's list never fired")
	await(hb.done, "b not revoked")
	require.ErrorIs(t, hb.err, ErrLost)

	for _, sd := range []*shardLocal{shardOf(a), shardOf(b)} {
		sd.sh.Lock()
		require.Empty(t, sd.lists, "every list emptied and dropped")
		sd.sh.Unlock()
	}
	require.NoError(t, next.ctx.Err(), "the new holder has no deadline")
	st.Close()
	await(next.done, "the new holder not ended by Close")
}

// TestDeadlineListsStayInTheShard: a shard's first maxLists deadline
// lists are kept in the shard's own array (listArr), through lists made,
// filled past maxLists, emptied, dropped and made again, so that arming a
// deadline never reads an array of its own.
func TestDeadlineListsStayInTheShard(t *testing.T) {
	st := NewStore(Shards(1))
	defer st.Close()
	l, err := OpenLock(st, "invoices")
	require.NoError(t, err)
	sd := &l.store.local[0]
	inArray := func() bool {
		sd.sh.Lock()
		defer sd.sh.Unlock()
		return cap(sd.lists) == maxLists && unsafe.SliceData(sd.lists) == &sd.listArr[0]
	}
	require.True(t, inArray(), "a new store's lists are in its array")
	for round := range 2 {
		for i := range maxLists + 2 { // two more durations than the array holds: those go to the map
			d := time.Duration(20+10*round+i) * time.Millisecond
			require.NoError(t, l.Hold(context.Background(), "k"+strconv.Itoa(i), func(context.Context, *Lease) error { return nil }, MaxHold(d)))
		}
		sd.sh.Lock()
		made := len(sd.lists)
		sd.sh.Unlock()
		require.Equal(t, maxLists, made, "round %d: the array is full", round)
		require.True(t, inArray(), "round %d: the lists made are in the array", round)
		// The lists' timers fire at their old heads' deadlines, find them
		// empty, and drop them.
		require.Eventually(t, func() bool {
			sd.sh.Lock()
			defer sd.sh.Unlock()
			return len(sd.lists) == 0 && len(sd.more) == 0
		}, 10*time.Second, time.Millisecond, "round %d: every list dropped", round)
		require.True(t, inArray(), "round %d: the lists dropped leave the array in place", round)
	}
}
