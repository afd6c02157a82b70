package shard_test

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
	"time"
	"unique"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/holdline/locks/shard"
)

// holder is a key's holder as the shard sees it: it names the key, as a
// lease does, and may change what it names.
type holder struct{ lock, key string }

// insert adds an entry for lock's key, hash h, with a holder naming it.
func insert(sh *shard.Shard[*holder, *ticket], h uint64, lock, key string) *shard.Entry[*holder, *ticket] {
	e := sh.InsertLocked(h, unique.Make(lock), key)
	e.Holder = &holder{lock, key}
	return e
}

// remove lets e's holder go and gives e back.
func remove(sh *shard.Shard[*holder, *ticket], e *shard.Entry[*holder, *ticket]) {
	e.Holder = nil
	sh.DeleteLocked(e)
}

// lookup finds the entry of lock's key, hash h.
func lookup(sh *shard.Shard[*holder, *ticket], h uint64, lock, key string) *shard.Entry[*holder, *ticket] {
	return sh.LookupLocked(h, unique.Make(lock), key)
}

type ticket struct{}

func TestEntryIsSmall(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) == 8 {
		assert.Equal(t, uintptr(64), unsafe.Sizeof(shard.Entry[*holder, *ticket]{}), "an entry per held key: 64 bytes, a size class")
	}
}

func TestShardIsPaddedToCacheLines(t *testing.T) {
	size := unsafe.Sizeof(shard.Shard[*holder, *ticket]{})
	assert.Zero(t, size%shard.CacheLine, "Shard is %d bytes, not a multiple of %d", size, shard.CacheLine)
	assert.Equal(t, uintptr(shard.CacheLine), size, "a shard should fit one padded block")
	if unsafe.Sizeof(uintptr(0)) == 8 {
		var sh shard.Shard[*holder, *ticket]
		for name, end := range map[string]uintptr{
			"Fences": unsafe.Offsetof(sh.Fences) + unsafe.Sizeof(sh.Fences),
			"Kept":   unsafe.Offsetof(sh.Kept) + unsafe.Sizeof(sh.Kept),
			"NKept":  unsafe.Offsetof(sh.NKept) + unsafe.Sizeof(sh.NKept),
		} {
			assert.LessOrEqual(t, end, uintptr(64), "%s is in the mutex's 64-byte line", name)
		}
		for name, off := range map[string]uintptr{
			"Running": unsafe.Offsetof(sh.Running),
			"Waiting": unsafe.Offsetof(sh.Waiting),
			"Counts":  unsafe.Offsetof(sh.Counts),
		} {
			assert.GreaterOrEqual(t, off, uintptr(64), "%s is in the owner's counts' line, not the mutex's", name)
		}
	}
}

// TestShardsStartOnABlock checks that the shards of a small table start
// on a padding block, as a large one's do.
func TestShardsStartOnABlock(t *testing.T) {
	for _, n := range []int{1, 8, 64, 128, 256, 1024} {
		tb := shard.NewTable[*holder, *ticket](n, 0)
		for i := range tb.Len() {
			addr := uintptr(unsafe.Pointer(tb.At(i)))
			require.Zero(t, addr%shard.CacheLine, "table of %d: shard %d at %#x", n, i, addr)
		}
	}
}

func TestTableRoundsUpToPowerOfTwo(t *testing.T) {
	for _, tc := range []struct{ in, want int }{{-3, 1}, {0, 1}, {1, 1}, {2, 2}, {3, 4}, {255, 256}, {256, 256}, {257, 512}} {
		assert.Equal(t, tc.want, shard.NewTable[*holder, *ticket](tc.in, 0).Len(), "NewTable(%d)", tc.in)
	}
}

func TestShardChoiceIsStableAndSpread(t *testing.T) {
	tb := shard.NewTable[*holder, *ticket](64, 0)
	lh := shard.LockHash("invoices")
	seen := map[*shard.Shard[*holder, *ticket]]int{}
	for i := 0; i < 64*100; i++ {
		key := fmt.Sprintf("invoice-%06d", i)
		sh := tb.Shard(shard.Hash(lh, key))
		require.Same(t, sh, tb.Shard(shard.Hash(lh, key)), "a key always maps to one shard")
		seen[sh]++
	}
	assert.Len(t, seen, 64, "6,400 keys reach every one of 64 shards")
	for sh, n := range seen {
		assert.Greater(t, n, 40, "shard %p got %d of 6,400 keys", sh, n)
	}
}

func TestHashSeparatesLocks(t *testing.T) {
	assert.NotEqual(t, shard.Hash(shard.LockHash("a"), "9"), shard.Hash(shard.LockHash("b"), "9"))
	assert.Equal(t, shard.Hash(shard.LockHash("a"), "9"), shard.Hash(shard.LockHash("a"), "9"))
}

func TestInsertLookupDelete(t *testing.T) {
	tb := shard.NewTable[*holder, *ticket](1, 0)
	sh := tb.At(0)
	sh.Lock()
	defer sh.Unlock()

	assert.Nil(t, lookup(sh, 1, "l", "k"))
	e := sh.InsertLocked(1, unique.Make("l"), "k")
	assert.True(t, e.Idle(), "a new entry is free, its line empty")
	assert.Equal(t, "l", e.LockName())
	assert.Equal(t, "k", e.Key())
	e.Holder = &holder{"l", "k"}
	assert.Same(t, e, lookup(sh, 1, "l", "k"))
	assert.Nil(t, lookup(sh, 1, "l", "other"), "same hash, other key")
	assert.Nil(t, lookup(sh, 1, "m", "k"), "same hash, other lock")
	assert.Equal(t, 1, sh.LenLocked())

	assert.False(t, e.Idle())
	e.Holder = nil
	remove(sh, e)
	assert.Nil(t, lookup(sh, 1, "l", "k"))
	assert.Equal(t, 0, sh.LenLocked())
}

// TestTheEntryNamesItsKey: what the holder names, it may change; the
// entry is still its key's, and no other key's.
func TestTheEntryNamesItsKey(t *testing.T) {
	sh := shard.NewTable[*holder, *ticket](1, 0).At(0)
	sh.Lock()
	defer sh.Unlock()
	e := insert(sh, 1, "l", "k")
	e.Holder.lock, e.Holder.key = "m", "other"
	assert.Same(t, e, lookup(sh, 1, "l", "k"))
	assert.Nil(t, lookup(sh, 1, "l", "other"))
	assert.Nil(t, lookup(sh, 1, "m", "k"))
}

// TestKeysTooLong: a key longer than MaxKeyLen bytes is no entry's, though
// its length runs into its hash's bits and makes another key's word (a
// 2049-byte key of hash 6, a 1-byte key's of hash 7); InsertLocked
// refuses it with a panic.
func TestKeysTooLong(t *testing.T) {
	sh := shard.NewTable[*holder, *ticket](1, 0).At(0)
	sh.Lock()
	defer sh.Unlock()
	short := strings.Repeat("k", 4096)[:1] // "k", its bytes in a larger allocation
	insert(sh, 7, "l", short)
	long := strings.Repeat("k", shard.MaxKeyLen+2)
	l := unique.Make("l")
	assert.Nil(t, sh.LookupLocked(6, l, long))
	remove(sh, insert(sh, 8, "l", "other")) // a freed entry, kept
	assert.PanicsWithValue(t, "shard: a key of more than MaxKeyLen bytes", func() { sh.InsertLocked(6, l, long) })
	assert.Equal(t, 1, sh.LenLocked())
	assert.Equal(t, 1, sh.FreeLenLocked(), "the refused key took no freed entry")
}

// TestAFreedEntryKeepsNoName: once its key is let go, an entry kept for
// reuse keeps nothing of its key (SPEC §6: memory for a key is reclaimed
// when it has no holder and no waiter).
func TestAFreedEntryKeepsNoName(t *testing.T) {
	sh := shard.NewTable[*holder, *ticket](1, 0).At(0)
	sh.Lock()
	defer sh.Unlock()
	key := strings.Repeat("k", 100) // an allocation of its own
	collected := make(chan struct{})
	runtime.AddCleanup(unsafe.StringData(key), func(ch chan struct{}) { close(ch) }, collected)
	e := insert(sh, 7, "l", key)
	key = ""
	remove(sh, e)
	require.Equal(t, 1, sh.FreeLenLocked(), "the entry is kept for reuse")
	for range 100 {
		runtime.GC()
		select {
		case <-collected:
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
	t.Fatal("the key's text was not collected")
}

// TestLongKeys: a key of MaxKeyLen bytes has an entry that names it
// whole, and one a byte shorter, of the same hash, is another key.
func TestLongKeys(t *testing.T) {
	sh := shard.NewTable[*holder, *ticket](1, 0).At(0)
	sh.Lock()
	defer sh.Unlock()
	long := strings.Repeat("k", shard.MaxKeyLen)
	e := insert(sh, 3, "l", long)
	assert.Equal(t, long, e.Key())
	assert.Same(t, e, lookup(sh, 3, "l", strings.Clone(long)), "its text compared, not its address")
	assert.Nil(t, lookup(sh, 3, "l", long[1:]))
}

// TestHashCollisions gives three keys one hash: each is found, and each
// can be deleted wherever it stands in the chain.
func TestHashCollisions(t *testing.T) {
	for del := 0; del < 3; del++ {
		sh := shard.NewTable[*holder, *ticket](1, 0).At(0)
		sh.Lock()
		keys := []string{"a", "b", "c"}
		es := map[string]*shard.Entry[*holder, *ticket]{}
		for _, k := range keys {
			es[k] = insert(sh, 42, "lock", k)
		}
		for _, k := range keys {
			require.Same(t, es[k], lookup(sh, 42, "lock", k))
		}
		remove(sh, es[keys[del]])
		for i, k := range keys {
			if i == del {
				assert.Nil(t, lookup(sh, 42, "lock", k))
			} else {
				assert.Same(t, es[k], lookup(sh, 42, "lock", k), "after deleting %s", keys[del])
			}
		}
		sh.Unlock()
	}
}

func TestFreedEntriesAreReusedUpToALimit(t *testing.T) {
	sh := shard.NewTable[*holder, *ticket](1, 0).At(0)
	sh.Lock()
	defer sh.Unlock()
	var es []*shard.Entry[*holder, *ticket]
	for i := 0; i < shard.KeepFree+5; i++ {
		es = append(es, insert(sh, uint64(i), "l", fmt.Sprint(i)))
	}
	for _, e := range es {
		remove(sh, e)
	}
	assert.Equal(t, shard.KeepFree, sh.FreeLenLocked())
	e := sh.InsertLocked(7, unique.Make("l"), "new")
	assert.Equal(t, shard.KeepFree-1, sh.FreeLenLocked())
	assert.True(t, e.Idle(), "a reused entry comes back free, with an empty line")
	e.Holder = &holder{"l", "new"}
	assert.Same(t, e, lookup(sh, 7, "l", "new"))
	assert.Nil(t, lookup(sh, 7, "l", "6"), "a reused entry is the new key's only")
}

// TestBucketsFollowTheKeys: a shard's buckets double as its entries
// outnumber them, and shrink to fit as they fall below 1/ShrinkAt of them:
// to the least power of two at least twice the entries, and at least
// MinBuckets, so that a shard that held many keys gives the memory back.
func TestBucketsFollowTheKeys(t *testing.T) {
	sh := shard.NewTable[*holder, *ticket](1, 0).At(0)
	sh.Lock()
	defer sh.Unlock()
	require.Equal(t, shard.MinBuckets, sh.BucketsLocked())
	const n = 1000
	spread := func(i int) uint64 { return uint64(i) * 0x9E3779B97F4A7C15 } // hashes over every bucket
	var es []*shard.Entry[*holder, *ticket]
	for i := 0; i < n; i++ {
		es = append(es, insert(sh, spread(i), "l", fmt.Sprint(i)))
		require.GreaterOrEqual(t, sh.BucketsLocked(), sh.LenLocked(), "no more entries than buckets")
	}
	require.Equal(t, 1024, sh.BucketsLocked())
	var shrunk []int // the buckets after each shrink
	for i, e := range es[:n-1] {
		before := sh.BucketsLocked()
		remove(sh, e)
		left := n - 1 - i
		require.GreaterOrEqual(t, left, sh.BucketsLocked()/shard.ShrinkAt, "with %d entries left", left)
		if b := sh.BucketsLocked(); b != before {
			require.Equal(t, before/shard.ShrinkAt-1, left, "shrunk only once the entries fell below 1/ShrinkAt")
			shrunk = append(shrunk, b)
		}
	}
	// From 1,024 buckets: 127 entries left (below 128) fit in 256; then 31
	// in 64, 7 in 16, and 1 in MinBuckets' 8.
	assert.Equal(t, []int{256, 64, 16, shard.MinBuckets}, shrunk)
	assert.Equal(t, shard.MinBuckets, sh.BucketsLocked())
	assert.Same(t, es[n-1], lookup(sh, spread(n-1), "l", fmt.Sprint(n-1)), "what stays is still found")
	for i, e := range es[:n-1] {
		assert.Nil(t, lookup(sh, spread(i), "l", fmt.Sprint(i)), "deleted: %v", e)
	}
}

// TestChainsKeepInsertionOrder: an entry joins the end of its chain, and
// growing splits each chain without reordering it, so that entries let go
// in the order they came are found first in their chains; halving keeps
// every entry found.
func TestChainsKeepInsertionOrder(t *testing.T) {
	sh := shard.NewTable[*holder, *ticket](1, 0).At(0)
	sh.Lock()
	defer sh.Unlock()
	const n = 1000
	// Bits 8 and 9 clear: the 1,024 buckets n entries grow to use 256,
	// about four entries a chain, through seven doublings that split them.
	hash := func(i int) uint64 { return uint64(i) * 0x9E3779B97F4A7C15 &^ 0x300 }
	var es []*shard.Entry[*holder, *ticket]
	order := map[*shard.Entry[*holder, *ticket]]int{}
	for i := range n {
		e := insert(sh, hash(i), "l", fmt.Sprint(i))
		es = append(es, e)
		order[e] = i
	}
	require.Equal(t, 1024, sh.BucketsLocked())
	long := 0
	for b := range sh.BucketsLocked() {
		chain := sh.ChainLocked(b)
		long = max(long, len(chain))
		for j := 1; j < len(chain); j++ {
			require.Less(t, order[chain[j-1]], order[chain[j]], "bucket %d's chain out of insertion order", b)
		}
	}
	require.GreaterOrEqual(t, long, 4, "the test's hashes make chains")

	// Let go in an order unrelated to insertion's, through every halving.
	left := map[int]bool{}
	for i := range n {
		left[i] = true
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, i := range rng.Perm(n) {
		remove(sh, es[i])
		delete(left, i)
		for j := range left {
			require.Same(t, es[j], lookup(sh, hash(j), "l", fmt.Sprint(j)), "entry %d lost with %d left, %d buckets", j, len(left), sh.BucketsLocked())
		}
		require.Equal(t, len(left), sh.LenLocked())
	}
	assert.Equal(t, shard.MinBuckets, sh.BucketsLocked())
}

// TestChurnAgainstAMap: inserts and deletes in a random order, the count
// of entries swinging up past a thousand and down to none several times,
// so that the buckets grow and shrink between the two, with pairs of keys
// sharing a hash: after every step every key present is found, as its own
// entry, and the count and the buckets keep their bounds (no more
// entries than buckets; fewer than 1/ShrinkAt of them only at
// MinBuckets).
func TestChurnAgainstAMap(t *testing.T) {
	sh := shard.NewTable[*holder, *ticket](1, 0).At(0)
	sh.Lock()
	defer sh.Unlock()
	const keys = 4096
	hash := func(k int) uint64 { return uint64(k/2) * 0x9E3779B97F4A7C15 } // k and k^1 collide
	rng := rand.New(rand.NewPCG(3, 4))
	present := map[int]*shard.Entry[*holder, *ticket]{}
	var order []int // the keys present, for picking one at random
	steps := 0
	for _, target := range []int{1500, 3, 700, 0, 2000, 40, 900, 0} {
		for len(present) != target {
			grow := len(present) < target
			if rng.IntN(10) < 3 { // a step the other way now and then
				grow = !grow
			}
			if grow && len(present) < keys {
				k := rng.IntN(keys)
				for present[k] != nil {
					k = rng.IntN(keys)
				}
				present[k] = insert(sh, hash(k), "l", fmt.Sprint(k))
				order = append(order, k)
			} else if !grow && len(present) > 0 {
				i := rng.IntN(len(order))
				k := order[i]
				order[i] = order[len(order)-1]
				order = order[:len(order)-1]
				remove(sh, present[k])
				delete(present, k)
				require.Nil(t, lookup(sh, hash(k), "l", fmt.Sprint(k)), "key %d found after its delete", k)
			}
			steps++
			n, b := sh.LenLocked(), sh.BucketsLocked()
			require.Equal(t, len(present), n, "step %d", steps)
			require.LessOrEqual(t, n, b, "step %d: more entries than buckets", steps)
			if b > shard.MinBuckets {
				require.GreaterOrEqual(t, n, b/shard.ShrinkAt, "step %d: %d entries left in %d buckets", steps, n, b)
			}
			if steps%101 == 0 || len(present) == target {
				for k, e := range present {
					require.Same(t, e, lookup(sh, hash(k), "l", fmt.Sprint(k)), "step %d: key %d", steps, k)
				}
			}
		}
	}
	assert.Equal(t, shard.MinBuckets, sh.BucketsLocked(), "empty again: back to the fewest buckets")
}

func TestAllLockedMayDelete(t *testing.T) {
	sh := shard.NewTable[*holder, *ticket](1, 0).At(0)
	sh.Lock()
	defer sh.Unlock()
	for i := 0; i < 10; i++ {
		insert(sh, uint64(i%3), "l", fmt.Sprint(i)) // chains too
	}
	seen := 0
	sh.AllLocked(func(e *shard.Entry[*holder, *ticket]) bool {
		seen++
		remove(sh, e)
		return true
	})
	assert.Equal(t, 10, seen)
	assert.Equal(t, 0, sh.LenLocked())
}

// TestAllLockedShrinksKeepingWhatStays: a walk that deletes most entries
// shrinks the buckets by several halvings at once, once it is over, and
// every entry left is still found.
func TestAllLockedShrinksKeepingWhatStays(t *testing.T) {
	sh := shard.NewTable[*holder, *ticket](1, 0).At(0)
	sh.Lock()
	defer sh.Unlock()
	hash := func(i int) uint64 { return uint64(i) * 0x9E3779B97F4A7C15 }
	for i := range 200 {
		insert(sh, hash(i), "l", fmt.Sprint(i))
	}
	require.Equal(t, 256, sh.BucketsLocked())
	var kept []int
	sh.AllLocked(func(e *shard.Entry[*holder, *ticket]) bool {
		var i int
		fmt.Sscan(e.Holder.key, &i)
		if i%40 == 0 {
			kept = append(kept, i)
		} else {
			remove(sh, e)
		}
		return true
	})
	require.Len(t, kept, 5)
	assert.Equal(t, 32, sh.BucketsLocked(), "three halvings at once")
	assert.Equal(t, 5, sh.LenLocked())
	for _, i := range kept {
		assert.NotNil(t, lookup(sh, hash(i), "l", fmt.Sprint(i)), "entry %d", i)
	}
}

func TestFencesStartAboveSeedAndIncrease(t *testing.T) {
	tb := shard.NewTable[*holder, *ticket](4, 1000)
	for i := 0; i < tb.Len(); i++ {
		sh := tb.At(i)
		sh.Lock()
		assert.Equal(t, uint64(1001), sh.Fences.Next())
		assert.Equal(t, uint64(1002), sh.Fences.Next())
		sh.Unlock()
	}
}

func TestChurnAllocatesNothing(t *testing.T) {
	sh := shard.NewTable[*holder, *ticket](1, 0).At(0)
	sh.Lock()
	defer sh.Unlock()
	h := &holder{"l", "k"}
	l := unique.Make("l")
	allocs := testing.AllocsPerRun(1000, func() {
		e := sh.InsertLocked(5, l, "k")
		e.Holder = h
		e.Holder = nil
		remove(sh, e)
	})
	assert.Equal(t, 0.0, allocs)
}
