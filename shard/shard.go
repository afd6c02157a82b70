// Package shard is the table of keys of a store: keys hashed onto a fixed
// number of shards, each with its own mutex and its own hash table of key
// entries.
// An entry holds the key's name, its holder and its line of waiters, and
// exists only while it has a holder or a waiter.
//
// Why shards: one mutex over every key would make every Hold in the process
// queue on one cache line. With a fixed table of shards, each padded to
// whole cache lines so that two shards never share one (as the Go runtime's
// semTable and xsync's buckets do), goroutines holding different keys
// mostly touch different memory. Two keys that fall on one shard share its
// mutex only for the few nanoseconds of a lookup: neither ever waits for
// the other to be let go, since waiting happens in the key's own line.
//
// Keys are identified by a lock name and a key text together, hashed once
// with xxhash (github.com/cespare/xxhash/v2); the 64-bit hash's top bits
// pick the shard, its low bits the bucket within the shard's table.
//
// The table is intrusive, as the lines are: a power of two of buckets,
// each the head of a chain of entries linked through the entries
// themselves, mostly in the order they were inserted, doubled when the
// entries outnumber the buckets and shrunk to fit, twice the entries,
// when they fall below an eighth of them (so a shard that held a million
// keys gives the memory back when they are let go). Taking an entry out
// unlinks it from a chain of about one, where the oldest mostly stands
// first (as deadlines fire, oldest first): no probe of a map, whose lines
// are cold when a shard holds many keys. A Go map here cost a hold of a free key 14 % (an insert and a
// delete) and a revocation among a million held keys most of its time.
// A resize moves every entry of the shard under its mutex at once, where
// a Go map grows piecemeal: with 256 shards, a million keys held make a
// resize of about 4,000 entries (tens of microseconds); a store of few
// shards and many keys pauses longer, once per doubling.
//
// Entries are recycled: a shard keeps a few freed entries for the next new
// key, so that holding a fresh key allocates no entry in the steady state.
package shard

import (
	"unique"
	"unsafe"

	"github.com/cespare/xxhash/v2"

	"github.com/holdline/locks/waitq"
)

// Entry is the state of one key: its name (the lock's and the key's), its
// holder (the zero H when nobody holds it) and its line of waiters.
// Entries are owned by their Shard and valid only while its mutex is held;
// an entry given back to the shard by DeleteLocked may be reused for
// another key.
type Entry[H comparable, T any] struct {
	// Holder is the key's holder, the zero H when the key is free.
	Holder H
	// Line is the key's line of waiters, first come first served: the
	// owner's tickets.
	Line waitq.List[T]

	hash uint64       // entryHash of the key's hash and text
	next *Entry[H, T] // the next entry in its bucket's chain, or the next free one
	// The key's name, set by InsertLocked and never changed while the
	// entry is the key's: what LookupLocked compares, so that nothing
	// outside the shard, a holder's lease included, can make a key look
	// free or another's. The lock's name is interned (unique.Make), one
	// word, equal for every handle of one name; the key's text is the
	// address of its bytes, its length in hash: 64 bytes in all, one size
	// class, where a string would make 72 and the size class of 80. (In
	// this order, the holder and the line first, a hold cost 1-3 % less at
	// GOMAXPROCS 1 than with the hash and the chain first, on a free key,
	// a hot key and a maxHold alike, in alternated runs of go run ./bench.)
	lock unique.Handle[string]
	key  *byte
}

// LockName returns the name of the lock e's key belongs to.
func (e *Entry[H, T]) LockName() string { return e.lock.Value() }

// Key returns the text of e's key.
func (e *Entry[H, T]) Key() string { return unsafe.String(e.key, e.hash&keyLenMask) }

// Idle reports whether the entry has neither a holder nor a waiter, the
// moment it must be given back with DeleteLocked.
func (e *Entry[H, T]) Idle() bool {
	var none H
	return e.Holder == none && e.Line.Len() == 0
}

// MaxKeyLen is the longest key text, in bytes, a Table takes: an entry
// keeps its key's length in keyLenBits bits.
const MaxKeyLen = keyLenMask

const (
	keyLenBits = 11
	keyLenMask = 1<<keyLenBits - 1
)

// Hash returns the 64-bit hash of a key: the xxhash of its text mixed with
// lockHash, the hash of its lock's name (see LockHash). One pass over the
// key; no allocation.
func Hash(lockHash uint64, key string) uint64 {
	return xxhash.Sum64String(key) ^ lockHash
}

// entryHash is what an entry of a key of hash h keeps of it: the hash's
// low 53 bits above the key's length, key being at most MaxKeyLen bytes
// (the entry keeps its text's bytes, not a string). Its bits above the
// length are h's, the ones a bucket is chosen by.
func entryHash(h uint64, key string) uint64 { return h<<keyLenBits | uint64(len(key)) }

// LockHash returns the hash of a lock name, computed once per lock and
// mixed into the hash of each of its keys, so that one key text under two
// names makes two keys on (usually) two shards.
func LockHash(name string) uint64 {
	// Multiplying by an odd constant spreads the name's hash over all bits
	// again, so xor with a key's hash cannot cancel it out for equal texts.
	return xxhash.Sum64String(name) * 0x9E3779B97F4A7C15
}
