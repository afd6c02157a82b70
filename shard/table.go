package shard

import (
	"math/bits"
	"sync"
	"unique"
	"unsafe"

	"github.com/holdline/locks/lease"
)

// Policy constants, in one place.
const (
	// CacheLine is the padding unit of a Shard. 128 bytes rather than 64:
	// x86 prefetches cache lines in adjacent pairs, so two shards must not
	// share a 128-byte block either.
	CacheLine = 128
	// keepFree is how many freed entries a shard keeps for reuse: enough to
	// make churn on a handful of keys allocation-free, few enough that a
	// store whose keys are all let go holds almost nothing.
	keepFree = 8
	// minBuckets is the fewest buckets a shard has: 64 bytes of pointers.
	minBuckets = 8
	// alignedShards is the fewest shards a Table allocates (it uses as
	// many as asked): 32 KiB of them, an allocation the runtime places on
	// a page boundary.
	alignedShards = 256
	// shrinkAt: a shard's buckets shrink to fit (fitBuckets) once its
	// entries fall below 1/shrinkAt of them (they are doubled once the
	// entries outnumber them), so that a shard that held a million keys
	// gives the memory back when they are let go. Amortized O(1) per
	// insertion and deletion.
	shrinkAt = 8
)

// Shard is one shard of a Table: a mutex and the hash table of the key
// entries that hash onto it, padded to whole cache lines. Its fields other than
// the mutex are guarded by it; methods ending in Locked must be called with
// it held. The zero value is not usable; shards are made by NewTable.
//
// Its first 64-byte line holds the mutex and what a hold at a hot key
// writes with it (the fences, the owner's kept records); the second, the
// owner's counts. A hold writes no other line of its shard.
type Shard[H comparable, T any] struct {
	mu sync.Mutex
	// Fences gives the fences of every key on this shard. Guarded by the
	// mutex.
	Fences lease.Fences
	// Kept is the owner's: a stack of records it keeps for reuse, by
	// their T, linked through the owner's own links, and NKept their
	// number. Here, beside the mutex, a hold that takes or gives back a
	// record writes no cache line but the mutex's for it: a hot key's
	// hold was 1-1.5 % cheaper at GOMAXPROCS 1, and 0-1.5 % at 2, than
	// with the stack in a line of the owner's (go run ./bench -run
	// hotkey, two batches of alternated runs, 14 and 8).
	Kept    T
	NKept   uint8
	nfree   uint8        // at most keepFree
	walking bool         // AllLocked runs: buckets are not resized
	n       int32        // entries (2^31 of them would take 128 GiB)
	free    *Entry[H, T] // freed entries kept for reuse, linked through next
	// buckets: a power of two of them; entry e is in the chain, linked
	// through next, of buckets[bucket(e.hash, len(buckets))].
	buckets []*Entry[H, T]

	// Padding to whole padding units; not the last field, where a
	// zero-length one would itself take room.
	_ [shardPad]byte

	// Running is a count the owner keeps per shard under its mutex (the store
	// counts the shard's keys held by running functions), so that no counter
	// shared by all shards is written on every hold.
	Running int
	// Waiting is a count the owner keeps as Running: the store counts the
	// waiters in the lines of the shard's keys.
	Waiting int
	// Counts are the owner's running totals of what happened on the
	// shard's keys, kept under its mutex, which the owner holds at each
	// event anyway: counting costs no atomic and no extra cache line.
	Counts Counts
}

// shardLayout has a Shard's fields but the padding, with the same sizes
// whatever H and T are (T is a pointer in every Table of this module), so
// that the padding is computed rather than counted by hand: a generic
// type's size is no constant.
type shardLayout struct {
	mu      sync.Mutex
	Fences  lease.Fences
	Kept    *struct{}
	NKept   uint8
	nfree   uint8
	walking bool
	n       int32
	free    *struct{}
	buckets []*struct{}
	Running int
	Waiting int
	Counts  Counts
}

// shardPad pads a Shard to whole padding units.
const shardPad = (CacheLine - unsafe.Sizeof(shardLayout{})%CacheLine) % CacheLine

// Counts are running totals of the events on a shard's keys.
type Counts struct {
	Grants   uint64 // keys given to a holder
	Waits    uint64 // holders that joined a line
	TimedOut uint64 // waiters whose wait passed
	Canceled uint64 // waiters whose context ended in line
	Revoked  uint64 // leases revoked (maxHold, ttl, close)
	Limited  uint64 // holds refused because the line was full
}

// Add adds o to c.
func (c *Counts) Add(o Counts) {
	c.Grants += o.Grants
	c.Waits += o.Waits
	c.TimedOut += o.TimedOut
	c.Canceled += o.Canceled
	c.Revoked += o.Revoked
	c.Limited += o.Limited
}

// Lock locks the shard's mutex.
func (s *Shard[H, T]) Lock() { s.mu.Lock() }

// Unlock unlocks the shard's mutex.
func (s *Shard[H, T]) Unlock() { s.mu.Unlock() }

// TryLock locks the shard's mutex if it is free, and reports whether it
// did. It never waits, so a goroutine that holds one shard may take
// another with it without an order among shards: a user that holds
// several must have taken all but the first this way.
func (s *Shard[H, T]) TryLock() bool { return s.mu.TryLock() }

// LenLocked returns the number of keys with an entry on the shard.
func (s *Shard[H, T]) LenLocked() int { return int(s.n) }

// LookupLocked returns the entry of key of the lock named lock, whose hash
// is h, or nil: always nil for a key longer than MaxKeyLen bytes, which
// no entry has. A walk of one bucket's chain (about one entry), the
// names compared only for entries of hash h (almost always one); no
// allocation.
//
// The entry keeps its key's name, where it used to ask its holder's lease:
// a holder's function may write to its lease, and a key whose name can be
// changed from outside can be made to look free.
func (s *Shard[H, T]) LookupLocked(h uint64, lock unique.Handle[string], key string) *Entry[H, T] {
	eh := entryHash(h, key)
	for e := s.buckets[bucket(eh, len(s.buckets))]; e != nil; e = e.next {
		// The entry's own text, at its own length: a key too long for an
		// entry makes a word another's may have, and is no entry's key.
		if e.hash == eh && e.lock == lock && e.Key() == key {
			return e
		}
	}
	return nil
}

// checkLen panics if key is longer than an entry can name: its length
// would run into its hash's bits.
func checkLen(key string) {
	if len(key) > MaxKeyLen {
		panic("shard: a key of more than MaxKeyLen bytes")
	}
}

// bucket returns the bucket, among n (a power of two), of an entry whose
// entryHash is eh: the low bits of its key's hash.
func bucket(eh uint64, n int) uint64 { return eh >> keyLenBits & uint64(n-1) }

// InsertLocked adds an entry for key of the lock named lock, whose hash is
// h, and returns it, free and with an empty line; the caller gives it its
// holder before it lets the shard's mutex go. The key must not have an
// entry already. It reuses a freed entry when the shard has one. The entry
// keeps key's bytes from the collector until DeleteLocked. A key longer
// than MaxKeyLen bytes panics, before anything changes.
func (s *Shard[H, T]) InsertLocked(h uint64, lock unique.Handle[string], key string) *Entry[H, T] {
	checkLen(key)
	e := s.free
	if e != nil {
		s.free, e.next = e.next, nil
		s.nfree--
	} else {
		e = new(Entry[H, T])
	}
	e.hash, e.lock, e.key = entryHash(h, key), lock, unsafe.StringData(key)
	// At the chain's end, which the failed lookup before this walked:
	// entries stand in their chain in the order they came (but where a
	// shrink put one chain after another), so an entry deleted in that
	// order, as deadlines fire, oldest first, is mostly first in its chain.
	p := &s.buckets[bucket(e.hash, len(s.buckets))]
	for *p != nil {
		p = &(*p).next
	}
	*p = e
	s.n++
	if int(s.n) > len(s.buckets) && !s.walking {
		s.resizeLocked(2 * len(s.buckets))
	}
	return e
}

// DeleteLocked removes e from the shard and keeps it for reuse. e must be
// Idle. After it returns, e belongs to the shard again and must not be used.
// Unlinking reads only e's bucket and the chain ahead of e in it (about
// nothing): no probe of a map, whose lines are cold when a shard holds
// many keys.
func (s *Shard[H, T]) DeleteLocked(e *Entry[H, T]) {
	s.n--
	p := &s.buckets[bucket(e.hash, len(s.buckets))]
	for *p != e {
		p = &(*p).next
	}
	*p = e.next
	// The line is empty (its ends are nil), the holder is the zero H
	// (DeleteLocked's rule); the name goes, so that a freed entry kept for
	// reuse keeps no key's text, nor a lock's name, from the collector.
	e.lock, e.key = unique.Handle[string]{}, nil
	if s.nfree < keepFree {
		e.next, s.free = s.free, e
		s.nfree++
	} else {
		e.next = nil
	}
	if len(s.buckets) > minBuckets && int(s.n) < len(s.buckets)/shrinkAt && !s.walking {
		s.resizeLocked(fitBuckets(int(s.n)))
	}
}

// fitBuckets returns the buckets a shrinking shard of n entries gets: the
// least power of two that is at least 2n, and at least minBuckets. Going
// straight there rather than by halves reads the old buckets once, not
// about twice over as the entries leave, and writes a third as many: as
// a million revocations emptied the shards, their shrinking took a third
// to a half less of the timer goroutine's time (CPU profiles of go run
// ./bench -run deadlines). The shard grows again only once its entries
// double.
func fitBuckets(n int) int {
	if n <= minBuckets/2 {
		return minBuckets
	}
	return 1 << bits.Len(uint(2*n-1))
}

// WarmLocked reads what DeleteLocked(e) reads besides e itself, e's
// bucket and the chain ahead of e in it, and returns a sum of what it
// read for the caller to keep (a read whose result is dropped may be
// dropped). For a caller about to act on many entries of a large table:
// read for all of them in one loop first, their cache misses are in
// flight together instead of one after another. It changes nothing.
func (s *Shard[H, T]) WarmLocked(e *Entry[H, T]) uintptr {
	var sum uintptr
	for p := s.buckets[bucket(e.hash, len(s.buckets))]; p != e && p != nil; p = p.next {
		sum += uintptr(p.hash)
	}
	return sum
}

// resizeLocked moves every entry into a new array of size buckets, a
// power of two times more or fewer. Growing splits each chain without
// reordering it. Shrinking puts the chains of buckets i, i+size, i+2·size,
// ... one after the other in bucket i, walking a chain only when another
// is put after it: a shard shrinks when its chains are mostly empty, and
// its entries, in a large table, are cache misses. (As a million
// revocations emptied the shards, walking every chain but the last cost
// 64-76 ns a revocation in CPU profiles; walking only those with a chain
// after them, 32-54.)
func (s *Shard[H, T]) resizeLocked(size int) {
	buckets := make([]*Entry[H, T], size)
	if size < len(s.buckets) {
		for i := range buckets {
			p := &buckets[i]
			for j := i; j < len(s.buckets); j += size {
				if s.buckets[j] == nil {
					continue // most are empty
				}
				for *p != nil {
					p = &(*p).next
				}
				*p = s.buckets[j]
			}
		}
		s.buckets = buckets
		return
	}
	for _, e := range s.buckets {
		for e != nil {
			next := e.next
			e.next = nil
			p := &buckets[bucket(e.hash, size)]
			for *p != nil {
				p = &(*p).next
			}
			*p = e
			e = next
		}
	}
	s.buckets = buckets
}

// AllLocked calls f for every entry of the shard, stopping early if f
// returns false. f may delete the entry it is given (the buckets are
// resized once the walk is over, not during it).
func (s *Shard[H, T]) AllLocked(f func(*Entry[H, T]) bool) {
	s.walking = true
	defer func() {
		s.walking = false
		size := len(s.buckets)
		for size > minBuckets && int(s.n) < size/shrinkAt {
			size /= 2
		}
		for int(s.n) > size {
			size *= 2
		}
		if size != len(s.buckets) {
			s.resizeLocked(size)
		}
	}()
	for _, first := range s.buckets {
		for e := first; e != nil; {
			next := e.next // f may give e back
			if !f(e) {
				return
			}
			e = next
		}
	}
}

// Table is a fixed set of shards. Safe for concurrent use: each shard is
// guarded by its own mutex.
type Table[H comparable, T any] struct {
	shards []Shard[H, T]
	shift  uint
}

// NewTable returns a table of n shards (rounded up to a power of two, at
// least 1), every shard's fences starting above seed.
func NewTable[H comparable, T any](n int, seed uint64) *Table[H, T] {
	if n < 1 {
		n = 1
	}
	var zero T
	if unsafe.Sizeof(zero) != unsafe.Sizeof(uintptr(0)) {
		panic("shard: a Table's T must be a pointer (see shardLayout)")
	}
	b := bits.Len(uint(n - 1))
	// At least alignedShards of them are made: an array that large is
	// allocated on a page boundary, where a smaller one of these (1 to 16
	// KiB) starts 8 bytes past one, after the allocator's header, and
	// every shard would then straddle its padding blocks.
	shards := make([]Shard[H, T], max(1<<b, alignedShards))[: 1<<b : 1<<b]
	t := &Table[H, T]{shards: shards, shift: uint(64 - b)}
	for i := range t.shards {
		t.shards[i].buckets = make([]*Entry[H, T], minBuckets)
		t.shards[i].Fences = lease.NewFences(seed)
	}
	return t
}

// Shard returns the shard of the key whose hash is h: the top bits of h,
// since the shard's buckets take the low ones. (With one shard the shift
// is 64, and a Go shift by the width gives 0.)
func (t *Table[H, T]) Shard(h uint64) *Shard[H, T] {
	return &t.shards[h>>t.shift]
}

// Index returns the index of the shard of the key whose hash is h: the
// shard Shard(h) returns is At(Index(h)). Owners keep per-shard state of
// their own in a slice of Len() beside the table.
func (t *Table[H, T]) Index(h uint64) int { return int(h >> t.shift) }

// Len returns the number of shards.
func (t *Table[H, T]) Len() int { return len(t.shards) }

// At returns shard i, 0 <= i < Len().
func (t *Table[H, T]) At(i int) *Shard[H, T] { return &t.shards[i] }
