package main

import (
	"context"
	"errors"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/holdline/locks"
)

// The floor of a call of Hold that waits: floor-contract+wait, and what
// Hold's signature asks of every call besides, and nothing more:
//   - its arguments checked: the key a string of 1 to MaxKeyLen bytes, a
//     function and a context that are not nil, a context not ended;
//   - the holds enclosing the caller's context looked up (one Value call
//     for a context outside any hold), since a hold inside a hold of the
//     same key fails at once;
//   - the function called with a context and a lease, the record standing
//     for both, as a context that answers the hold's own Err and Value;
//   - a wait that watches the caller's context, and leaves the line when
//     it ends;
//   - the key let go by a deferred call, so that a panicking function lets
//     it go too;
//   - the function's context ended when the hold is over, with one
//     CompareAndSwap, since other goroutines may ask its Err.
//
// locks over it is what locks adds to the floor of the call the contract
// defines, where floor-contract+wait leaves Hold's checks and context out.
// It is not committed to anything else: no revocation, no Done channel of
// its own, no limits or stats.

// Errors of the checked floor: what Hold fails Invalid with.
var (
	errCheckedKey    = errors.New("floor: the key is not a string of 1 to MaxKeyLen bytes")
	errCheckedFn     = errors.New("floor: the function to run is nil")
	errCheckedCtx    = errors.New("floor: the context is nil")
	errCheckedNested = errors.New("floor: held inside a hold of the same key")
)

// checkedHoldKey is the key under which a record, as a context, answers
// itself: how a hold finds the holds enclosing its caller's context.
type checkedHoldKey struct{}

// checkedFunc is the function a hold of the checked floor runs, as a
// HoldFunc: with its context and its lease, both the record.
type checkedFunc func(ctx context.Context, rec *contractRecord) error

// checkedFloor is the floor-contract+wait+checks peer: the wait floor's
// shards, entries and waiters, with its own Hold. Its HoldMax is the wait
// floor's (it runs in hotkey only).
type checkedFloor struct {
	waitFloor
}

func newCheckedFloor() Locker {
	f := new(checkedFloor)
	f.init()
	return f
}

func (f *checkedFloor) Hold(key string, fn func()) {
	mustHold(f.hold(context.Background(), key, func(context.Context, *contractRecord) error { fn(); return nil }))
}

// hold is the checked floor's Hold: the wait floor's, with the checks and
// the context above. Its steps around the park repeat the wait floor's
// hold rather than share functions with it: a waiter parks in its hold's
// own frame, as in locks, and a function for the steps would add a call
// to the wait floor's hold, which is a floor.
func (f *checkedFloor) hold(ctx context.Context, key any, fn checkedFunc) error {
	text, ok := key.(string)
	if !ok || len(text) == 0 || len(text) > locks.MaxKeyLen {
		return errCheckedKey
	}
	if fn == nil {
		return errCheckedFn
	}
	if ctx == nil {
		return errCheckedCtx
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	for v := ctx.Value(checkedHoldKey{}); v != nil; {
		r := v.(*contractRecord)
		if r.key == text && r.ended.Load() == nil {
			return errCheckedNested
		}
		v = r.parent.Value(checkedHoldKey{})
	}
	h := xxhash.Sum64String(text) ^ f.nameHash
	sh := &f.shards[h%contractShards]
	rec := &contractRecord{lock: f.name, key: text, parent: ctx}
	start := time.Since(f.origin)

	sh.mu.Lock()
	e := sh.lookup(h, text)
	var w *waitFloorWaiter
	if e == nil {
		e = sh.insert(h, text)
		sh.fence++
		rec.fence = sh.fence
		sh.mu.Unlock()
		rec.granted = f.origin.Add(start)
	} else {
		w = sh.joinLocked(e, start+deadlineWait)
		sh.mu.Unlock()
		// Parked in this frame, as locks' Hold.
		if done := ctx.Done(); done == nil {
			rec.fence = <-w.ready
		} else {
			select {
			case rec.fence = <-w.ready:
			case <-done:
				return f.leave(sh, e, w, rec)
			}
		}
		rec.granted = f.origin.Add(time.Since(f.origin))
	}
	e.rec = rec
	defer f.letGo(sh, e, w, rec)
	return fn(rec, rec)
}

// letGo lets e go once its hold's function returned or panicked, handing
// it to the next in line, and ends the function's context.
func (f *checkedFloor) letGo(sh *waitFloorShard, e *waitFloorEntry, w *waitFloorWaiter, rec *contractRecord) {
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
	} else {
		sh.remove(e)
		sh.mu.Unlock()
	}
	rec.ended.CompareAndSwap(nil, rec)
}

// leave takes w, whose caller's context ended while it waited, out of e's
// line and returns the context's error. If it was handed the key
// meanwhile, it takes its fence and lets the key go on: the context's end
// wins, and the key is never left held by nobody.
func (f *checkedFloor) leave(sh *waitFloorShard, e *waitFloorEntry, w *waitFloorWaiter, rec *contractRecord) error {
	sh.mu.Lock()
	if w.prev != nil || e.head == w { // still in line: passLocked takes the head
		sh.unlinkLocked(e, w)
		sh.keepWaiter(w)
		sh.mu.Unlock()
	} else {
		sh.mu.Unlock()
		rec.fence = <-w.ready
		f.letGo(sh, e, w, rec)
	}
	rec.ended.CompareAndSwap(nil, rec)
	return rec.parent.Err()
}

// unlinkLocked takes w out of e's line and of the shard's list of
// deadlines, wherever it stands in them.
func (s *waitFloorShard) unlinkLocked(e *waitFloorEntry, w *waitFloorWaiter) {
	if w.prev == nil {
		e.head = w.next
	} else {
		w.prev.next = w.next
	}
	if w.next == nil {
		e.tail = w.prev
	} else {
		w.next.prev = w.prev
	}
	w.next, w.prev = nil, nil
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
}

// The record as the function's context: the caller's, but for the hold's
// own Err and Value.

func (r *contractRecord) Deadline() (time.Time, bool) { return r.parent.Deadline() }

// Done is the caller's: the floor makes no channel of its own (locks makes
// one only when the function asks for it).
func (r *contractRecord) Done() <-chan struct{} { return r.parent.Done() }

func (r *contractRecord) Err() error {
	if r.ended.Load() != nil {
		return context.Canceled
	}
	return r.parent.Err()
}

func (r *contractRecord) Value(k any) any {
	if k == (checkedHoldKey{}) {
		return r
	}
	return r.parent.Value(k)
}
