// Package lease is a building block of package locks: the Fences a
// store's shard hands out with each grant (a lease's fence, see
// locks.Lease).
//
// Fences are fencing tokens (Kleppmann, "How to do distributed locking",
// 2016; Burrows, "The Chubby lock service", OSDI 2006, calls them
// sequencers): a number given with each grant, higher than every number
// given before for the same key, so a resource that remembers the highest
// fence it has seen can refuse a write from a holder that stalled past its
// revocation.
package lease

import (
	"sync/atomic"
	"time"
)

// Fences hands out the fences of the keys of one shard: a counter seeded
// from the wall clock, so that a store opened later in the same place
// starts above every fence an earlier one gave.
//
// Why a seed and not a counter per key: a counter per key would have to be
// kept forever, even for keys nobody holds any more. One counter per shard
// orders every key of that shard at the cost of gaps in each key's
// sequence, which a fence's reader never minds. The seed argument: a store
// gives fewer than one grant per nanosecond on any shard, so the last fence
// of an earlier store is below its seed plus its lifetime in nanoseconds,
// which is below the wall clock when the next store starts.
//
// The zero value starts at zero; use Seed to start from the wall clock. A
// Fences is not safe for concurrent use: its shard's mutex guards it.
type Fences struct {
	last uint64
}

// retired is the highest fence given by a retired Fences of this process
// (see Retire): the floor of every later Seed, for a wall clock too coarse
// to move between one store's close and the next one's start.
var retired atomic.Uint64

// Seed returns the starting point of a store's fences: the wall clock in
// nanoseconds since 1970 (zero before it), or, if higher, the last fence
// any retired Fences of this process gave. Safe for concurrent use.
func Seed() uint64 {
	ns := max(time.Now().UnixNano(), 0)
	return max(uint64(ns), retired.Load())
}

// Retire records that f gives no more fences (its store closed), so that
// every later Seed in this process starts above f's last: it raises a
// floor shared by the whole process, so only the owner of real fences
// (a store, at Close) should call it. Safe for concurrent use.
func (f *Fences) Retire() {
	for {
		old := retired.Load()
		if f.last <= old || retired.CompareAndSwap(old, f.last) {
			return
		}
	}
}

// NewFences returns a Fences whose first fence is seed+1. A seed near the
// top of uint64 would wrap: stores seed from Seed, which is nowhere near.
func NewFences(seed uint64) Fences { return Fences{last: seed} }

// Next returns the next fence: higher than every fence f returned before.
// O(1), no allocation.
func (f *Fences) Next() uint64 {
	f.last++
	return f.last
}

// Last returns the latest fence f gave, or its seed if it gave none.
func (f *Fences) Last() uint64 { return f.last }
