package main

import (
	"context"
	"sync"
	"time"
	"unsafe"

	"github.com/cespare/xxhash/v2"
)

// The floor of a hold that waits: floor-contract, but its waiters stand as
// the contract's bounded wait needs them to, and nothing more. A wait is
// bounded from the call, so a waiter reads the clock at the call (a
// reading taken earlier could end the wait early). It can leave the line
// alone, for its deadline or its context, so the line is a list it can be
// unlinked from in O(1), and its wake-up is its own (the head of a shared
// channel's queue is the only one a send can wake). Its deadline stands in
// its shard's list of deadlines, O(1) to join and to leave, in the order
// the waiters took the shard's lock: waits of one duration are due about
// in that order (a deadline read just before the lock may stand behind a
// later one, and fire late by the lock's wait, never early).
//
// What it leaves out: firing the deadlines. A list that never empties, as
// a hot key's, needs one timer for its head, armed once and re-armed when
// it fires, so its cost per hold tends to nothing; and no validation, no
// context, no revocation, as floor-contract.
//
// The grant instant is read by the woken waiter, as floor-contract reads
// it (locks reads it under the shard's lock at the handoff), from the
// monotonic clock, time.Since from an origin, as floor-contract and locks
// do. A waiter reads it twice in all: once for its wait's deadline, once
// at its grant.

// waitFloorWaiter is a waiter of the wait floor: its place in its key's
// line and in its shard's list of deadlines, its deadline, and its own
// wake-up. Kept by its shard for reuse.
type waitFloorWaiter struct {
	next, prev   *waitFloorWaiter // in the key's line; next also links the shard's spares
	dnext, dprev *waitFloorWaiter // in the shard's list of deadlines
	at           time.Duration    // the wait's deadline, on the floor's clock
	ready        chan uint64      // carries the fence of the handoff
}

// waitFloorEntry is a key held or waited for.
type waitFloorEntry struct {
	hash       uint64
	key        string
	next       *waitFloorEntry
	head, tail *waitFloorWaiter // the line
	waiters    int              // in the line: kept by floor-contract+wait+checks alone, for the line's limit
	rec        *contractRecord
}

// waitFloorShardState is a shard of the wait floor, guarded by mu.
type waitFloorShardState struct {
	mu           sync.Mutex
	m            map[uint64]*waitFloorEntry
	free         *waitFloorEntry
	nfree        int
	spare        *waitFloorWaiter
	nspare       int
	dhead, dtail *waitFloorWaiter // waiters by deadline: one wait, so in the order they came
	running      int              // holds running: kept by floor-contract+wait+checks alone, as a Shutdown needs
	fence        uint64
}

// waitFloorShard is padded as floor-contract's shard.
type waitFloorShard struct {
	waitFloorShardState
	_ [(contractPad - unsafe.Sizeof(waitFloorShardState{})%contractPad) % contractPad]byte
}

// waitFloorKeep is how many waiters a shard of the wait floor keeps for
// reuse, as many as locks keeps.
const waitFloorKeep = 32

// waitFloor is the floor-contract+wait peer.
type waitFloor struct {
	shards   [contractShards]waitFloorShard
	name     string
	nameHash uint64
	origin   time.Time
}

func newWaitFloor() Locker {
	f := new(waitFloor)
	f.init()
	return f
}

func (f *waitFloor) init() {
	f.name, f.origin = "invoices", time.Now()
	f.nameHash = xxhash.Sum64String(f.name) * 0x9E3779B97F4A7C15
	for i := range f.shards {
		f.shards[i].m = make(map[uint64]*waitFloorEntry)
	}
}

func (f *waitFloor) Hold(key string, fn func()) { f.hold(key, 0, fn) }

func (f *waitFloor) HoldMax(key string, maxHold time.Duration, fn func()) { f.hold(key, maxHold, fn) }

func (f *waitFloor) Close() {}

func (f *waitFloor) hold(key string, maxHold time.Duration, fn func()) {
	h := xxhash.Sum64String(key) ^ f.nameHash
	sh := &f.shards[h%contractShards]
	rec := &contractRecord{lock: f.name, key: key, parent: context.Background()}
	start := time.Since(f.origin) // the wait's start, and a free key's grant

	sh.mu.Lock()
	e := sh.lookup(h, key)
	var w *waitFloorWaiter
	var granted time.Duration // on the floor's clock
	if e == nil {
		e = sh.insert(h, key)
		sh.fence++
		rec.fence = sh.fence
		sh.mu.Unlock()
		granted = start
	} else {
		w = sh.joinLocked(e, start+deadlineWait)
		sh.mu.Unlock()
		rec.fence = <-w.ready // parked in this frame, as locks' Hold
		granted = time.Since(f.origin)
	}
	rec.granted = f.origin.Add(granted)
	if maxHold > 0 {
		rec.deadline = rec.granted.Add(maxHold)
	}
	e.rec = rec
	fn()
	e.rec = nil

	sh.mu.Lock()
	if w != nil {
		sh.keepWaiter(w)
	}
	if next := sh.passLocked(e); next != nil {
		sh.fence++
		fence := sh.fence
		sh.mu.Unlock()
		next.ready <- fence
		return
	}
	sh.remove(e)
	sh.mu.Unlock()
}

// joinLocked puts a waiter due at at at the back of e's line and of the
// shard's list of deadlines, and returns it.
func (s *waitFloorShard) joinLocked(e *waitFloorEntry, at time.Duration) *waitFloorWaiter {
	w := s.takeWaiter()
	w.at = at
	w.prev = e.tail
	if e.tail == nil {
		e.head = w
	} else {
		e.tail.next = w
	}
	e.tail = w
	w.dprev = s.dtail
	if s.dtail == nil {
		s.dhead = w
	} else {
		s.dtail.dnext = w
	}
	s.dtail = w
	return w
}

// passLocked takes the head of e's line out of the line and of the list of
// deadlines, and returns it; nil if nobody waits.
func (s *waitFloorShard) passLocked(e *waitFloorEntry) *waitFloorWaiter {
	w := e.head
	if w == nil {
		return nil
	}
	e.head, w.next = w.next, nil
	if e.head == nil {
		e.tail = nil
	} else {
		e.head.prev = nil
	}
	if w.dprev == nil {
		s.dhead = w.dnext
	} else {
		w.dprev.dnext = w.dnext
	}
	if w.dnext == nil {
		s.dtail = w.dprev
	} else {
		w.dnext.dprev = w.dprev
	}
	w.dnext, w.dprev = nil, nil
	return w
}

// takeWaiter returns a kept waiter, or a new one.
func (s *waitFloorShard) takeWaiter() *waitFloorWaiter {
	w := s.spare
	if w != nil {
		s.spare, w.next = w.next, nil
		s.nspare--
		return w
	}
	return &waitFloorWaiter{ready: make(chan uint64, 1)}
}

// keepWaiter keeps w for reuse, up to waitFloorKeep of them.
func (s *waitFloorShard) keepWaiter(w *waitFloorWaiter) {
	if s.nspare < waitFloorKeep {
		w.next, s.spare = s.spare, w
		s.nspare++
	}
}

func (s *waitFloorShard) lookup(h uint64, key string) *waitFloorEntry {
	for e := s.m[h]; e != nil; e = e.next {
		if e.key == key {
			return e
		}
	}
	return nil
}

func (s *waitFloorShard) insert(h uint64, key string) *waitFloorEntry {
	e := s.free
	if e != nil {
		s.free, e.next = e.next, nil
		s.nfree--
	} else {
		e = new(waitFloorEntry)
	}
	e.hash, e.key = h, key
	e.next = s.m[h]
	s.m[h] = e
	return e
}

func (s *waitFloorShard) remove(e *waitFloorEntry) {
	if head := s.m[e.hash]; head == e {
		if e.next == nil {
			delete(s.m, e.hash)
		} else {
			s.m[e.hash] = e.next
		}
	} else {
		for p := head; p != nil; p = p.next {
			if p.next == e {
				p.next = e.next
				break
			}
		}
	}
	e.key, e.next = "", nil
	if s.nfree < contractKeepFree {
		e.next, s.free = s.free, e
		s.nfree++
	}
}
