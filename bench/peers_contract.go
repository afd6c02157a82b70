package main

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/cespare/xxhash/v2"
)

// The contract's floor: a keyed lock that does only the work no
// implementation of the contract can skip on a hold, and nothing else. It is
// not a lock anyone would use (no validation, no wait bound, no
// revocation, no stats), so it is never the best correct peer; it is the
// reference of the ×floor ratio.
//
// What a hold of a free key costs it, and why each step is unavoidable:
//   - the key's hash (xxhash, as the library; the lock name's hash is
//     taken once per lock, as OpenLock can), to find its shard;
//   - the shard's mutex, twice: once to insert the key's entry, once to
//     unlink it, since an entry exists only while its key is held or
//     waited for (the contract: memory for a key is reclaimed);
//   - a map insert and delete, the entry itself from a free list;
//   - one heap record of 112 bytes with pointers, never reused: the
//     context and lease a function may keep after it returns (the size of
//     locks' own, which is both);
//   - one reading of the monotonic clock (Lease.Granted, as time since
//     the floor's origin: time.Now would read the wall clock too, about
//     20 ns more on linux/amd64, which a lease's time needs no more than
//     locks' does) and a fence from the shard's counter.
//
// A waiter stands in line on a one-slot channel that the entry makes the
// first time someone waits for its key (and keeps, through the free list):
// blocked receivers of a channel are served in the order they came, and
// the holder letting go sends the next fence down it, so the key passes
// straight to the head of the line. A free key never touches it.
//
// floor-contract+list is the floor of a hold with a maxHold: a deadline
// that can be revoked must be found when it comes due, so the holder's
// entry stands in its shard's list of maxHold deadlines while it holds,
// with its deadline, counted from a reading of the clock under the lock
// (so no earlier than the grant), linked under the shard's lock the grant
// takes anyway and unlinked under the one the release takes; holds of one
// maxHold reach their deadlines in the order they were granted, so the
// list is in deadline order. What it
// leaves out, as floor-contract+wait does for a wait: firing, one timer
// per list for its head, armed once while the list holds anyone, whose
// cost per hold tends to nothing. A waiter granted links its entry under
// the shard's lock once more (a library would do it at the handoff, under
// the releaser's lock): the floor runs only where keys are free.

// contractShards is the number of shards of the floor, the library's
// default.
const contractShards = 256

// contractPad is the unit a shard is padded to: two 64-byte lines, since
// x86 prefetches lines in adjacent pairs.
const contractPad = 128

// contractKeepFree is how many freed entries a shard keeps for reuse.
const contractKeepFree = 16

// contractRecord stands for what a grant hands the function and the
// function may keep: its lease and context. 112 bytes, with pointers: a
// Lease's fields, the caller's context, a state word, as locks'
// holdContext.
type contractRecord struct {
	lock, key string
	fence     uint64
	granted   time.Time
	deadline  time.Time // Lease.Deadline, a time.Time by the contract
	parent    context.Context
	// state is the function's context's settled state in
	// floor-contract+wait+checks: nil while the hold runs and nothing
	// settled it. The other floors leave it: it stands for a context's own
	// state, so that the record has a lease's and a context's size.
	state atomic.Pointer[checkedState]
}

// contractEntry is a key held or waited for.
type contractEntry struct {
	hash    uint64
	key     string
	next    *contractEntry // same hash, or the next free entry
	waiters int            // receivers that are or will be blocked on line
	line    chan uint64    // made at the first waiter; carries the fence of a handoff
	rec     *contractRecord
	timer   *time.Timer // the hold's maxHold (floor-contract+AfterFunc)
	// In the shard's list of maxHold deadlines while linked
	// (floor-contract+list); due, when the linked hold's maxHold is due on
	// the floor's clock, means nothing once unlinked (the next link
	// writes it), and linked is the tests' to read.
	dnext, dprev *contractEntry
	linked       bool
	due          time.Duration
}

type contractShardState struct {
	mu           sync.Mutex
	m            map[uint64]*contractEntry
	free         *contractEntry
	nfree        int
	fence        uint64
	dhead, dtail *contractEntry // the list of maxHold deadlines (floor-contract+list)
}

// contractShard is padded to whole 128-byte blocks, computed from its
// fields' size so that a change of fields keeps it padded.
type contractShard struct {
	contractShardState
	_ [(contractPad - unsafe.Sizeof(contractShardState{})%contractPad) % contractPad]byte
}

// contractMode is what a floor of the contract does for a maxHold.
type contractMode int

const (
	recordDeadline contractMode = iota // floor-contract: it computes the deadline, nothing more
	withAfterFunc                      // floor-contract+AfterFunc: and arms one time.AfterFunc
	linkDeadline                       // floor-contract+list: and links the entry in its shard's list
)

// contractFloor is the floor-contract peer, or, by mode, the
// floor-contract+AfterFunc or floor-contract+list one: they differ only in
// HoldMax.
type contractFloor struct {
	shards   [contractShards]contractShard
	name     string
	nameHash uint64
	mode     contractMode
	origin   time.Time // the zero of the floor's clock
}

func newContractFloor(mode contractMode) Locker {
	f := &contractFloor{name: "invoices", mode: mode, origin: time.Now()}
	f.nameHash = xxhash.Sum64String(f.name) * 0x9E3779B97F4A7C15
	for i := range f.shards {
		f.shards[i].m = make(map[uint64]*contractEntry)
	}
	return f
}

// Hold is the same for the three floors: their modes differ only for a
// maxHold.
func (f *contractFloor) Hold(key string, fn func()) { f.holdPlain(key, 0, fn) }

// HoldMax of floor-contract only records the deadline: it is the hold a
// maxHold must stay within 10 % of. floor-contract+AfterFunc also arms a
// runtime timer, as the peers do; floor-contract+list links the deadline
// where it can be found (see the top of this file).
//
// Each mode's hold is a function of its own, written out: with the
// modes' steps as branches of one function, never taken for
// floor-contract, its holds were 2-5 % slower, and floor-contract+list's
// 5-7 % (alternated runs of uncontended and maxhold); and with their common
// release as a function of its own, which the compiler does not inline,
// 1-3 %. A floor is the cheapest hold of what it does, and
// floor-contract the reference of every ratio.
//
// maxHold is positive: a scenario calls HoldMax only with a maxHold
// (walk), and with one of 0 or less floor-contract+AfterFunc would arm a
// timer due at once, and floor-contract+list link a deadline already due.
// A guard for it, one more branch, moved the floors' holds by 1-2 % (four
// alternated runs): the layout again.
func (f *contractFloor) HoldMax(key string, maxHold time.Duration, fn func()) {
	switch f.mode {
	case withAfterFunc:
		f.holdAfterFunc(key, maxHold, fn)
	case linkDeadline:
		f.holdList(key, maxHold, fn)
	default:
		f.holdPlain(key, maxHold, fn)
	}
}

// holdPlain is floor-contract's hold.
func (f *contractFloor) holdPlain(key string, maxHold time.Duration, fn func()) {
	h := xxhash.Sum64String(key) ^ f.nameHash
	sh := &f.shards[h%contractShards]
	rec := &contractRecord{lock: f.name, key: key, parent: context.Background()} // made before the line: off the key's serial path

	sh.mu.Lock()
	e := sh.lookup(h, key)
	var fence uint64
	if e == nil {
		e = sh.insert(h, key)
		sh.fence++
		fence = sh.fence
		sh.mu.Unlock()
	} else {
		sh.joinLocked(e)
		sh.mu.Unlock()
		fence = <-e.line
	}

	rec.fence, rec.granted = fence, f.origin.Add(time.Since(f.origin))
	if maxHold > 0 {
		rec.deadline = rec.granted.Add(maxHold)
	}
	e.rec = rec // the entry keeps the record: it lives on the heap, as a lease does
	fn()
	e.rec = nil

	sh.mu.Lock()
	if e.waiters > 0 {
		e.waiters--
		sh.fence++
		fence = sh.fence
		sh.mu.Unlock()
		e.line <- fence // never blocks: one fence is in flight at a time
		return
	}
	sh.remove(e)
	sh.mu.Unlock()
}

func (f *contractFloor) Close() {}

// holdAfterFunc is floor-contract+AfterFunc's hold of a key with a
// maxHold: holdPlain, with a runtime timer armed for the maxHold and
// stopped at the release.
func (f *contractFloor) holdAfterFunc(key string, maxHold time.Duration, fn func()) {
	h := xxhash.Sum64String(key) ^ f.nameHash
	sh := &f.shards[h%contractShards]
	rec := &contractRecord{lock: f.name, key: key, parent: context.Background()} // as holdPlain's, and the rest of its steps

	sh.mu.Lock()
	e := sh.lookup(h, key)
	var fence uint64
	if e == nil {
		e = sh.insert(h, key)
		sh.fence++
		fence = sh.fence
		sh.mu.Unlock()
	} else {
		sh.joinLocked(e)
		sh.mu.Unlock()
		fence = <-e.line
	}

	rec.fence, rec.granted = fence, f.origin.Add(time.Since(f.origin))
	rec.deadline = rec.granted.Add(maxHold)
	e.timer = time.AfterFunc(maxHold, expired)
	e.rec = rec
	fn()
	e.timer.Stop()
	e.timer, e.rec = nil, nil

	sh.mu.Lock()
	if e.waiters > 0 {
		e.waiters--
		sh.fence++
		fence = sh.fence
		sh.mu.Unlock()
		e.line <- fence
		return
	}
	sh.remove(e)
	sh.mu.Unlock()
}

// holdList is floor-contract+list's hold of a key with a maxHold:
// holdPlain, with the deadline linked in the shard's list while the key
// is held, a waiter's once it is handed the key.
func (f *contractFloor) holdList(key string, maxHold time.Duration, fn func()) {
	h := xxhash.Sum64String(key) ^ f.nameHash
	sh := &f.shards[h%contractShards]
	rec := &contractRecord{lock: f.name, key: key, parent: context.Background()} // as holdPlain's, and the rest of its steps

	sh.mu.Lock()
	e := sh.lookup(h, key)
	var fence uint64
	var granted time.Duration
	if e == nil {
		e = sh.insert(h, key)
		sh.fence++
		fence = sh.fence
		granted = sh.linkLocked(e, f.origin, maxHold)
		sh.mu.Unlock()
	} else {
		sh.joinLocked(e)
		sh.mu.Unlock()
		fence = <-e.line
		sh.mu.Lock()
		granted = sh.linkLocked(e, f.origin, maxHold)
		sh.mu.Unlock()
	}

	rec.fence, rec.granted = fence, f.origin.Add(granted)
	rec.deadline = rec.granted.Add(maxHold)
	e.rec = rec
	fn()
	e.rec = nil

	sh.mu.Lock()
	sh.unlink(e)
	if e.waiters > 0 {
		e.waiters--
		sh.fence++
		fence = sh.fence
		sh.mu.Unlock()
		e.line <- fence
		return
	}
	sh.remove(e)
	sh.mu.Unlock()
}

// joinLocked counts a waiter for e's key, which waits on e's line, made
// for the key's first waiter.
func (s *contractShard) joinLocked(e *contractEntry) {
	if e.line == nil {
		e.line = make(chan uint64, 1)
	}
	e.waiters++
}

func (s *contractShard) lookup(h uint64, key string) *contractEntry {
	for e := s.m[h]; e != nil; e = e.next {
		if e.key == key {
			return e
		}
	}
	return nil
}

func (s *contractShard) insert(h uint64, key string) *contractEntry {
	e := s.free
	if e != nil {
		s.free, e.next = e.next, nil
		s.nfree--
	} else {
		e = new(contractEntry)
	}
	e.hash, e.key = h, key
	e.next = s.m[h]
	s.m[h] = e
	return e
}

func (s *contractShard) remove(e *contractEntry) {
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

// linkLocked puts e at the back of s's list of maxHold deadlines, due
// maxHold from now, and returns now, on the clock of origin. The clock is
// read here, under the shard's lock: a deadline that can be revoked is
// known where it is found, and counts from no earlier than the grant (read
// before the lock, it could; read after, it would have to be published to
// whoever fires it). Against a reading after the lock, as floor-contract
// takes it, it costs the floor 0-1 % (five alternated pairs).
func (s *contractShard) linkLocked(e *contractEntry, origin time.Time, maxHold time.Duration) time.Duration {
	now := time.Since(origin)
	e.due = now + maxHold
	e.dprev, e.linked = s.dtail, true
	if s.dtail == nil {
		s.dhead = e
	} else {
		s.dtail.dnext = e
	}
	s.dtail = e
	return now
}

// unlink takes e out of s's list of maxHold deadlines.
func (s *contractShard) unlink(e *contractEntry) {
	if e.dprev == nil {
		s.dhead = e.dnext
	} else {
		e.dprev.dnext = e.dnext
	}
	if e.dnext == nil {
		s.dtail = e.dprev
	} else {
		e.dnext.dprev = e.dprev
	}
	e.dnext, e.dprev, e.linked = nil, nil, false
}
