package main

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/holdline/locks"
)

// The floor of a call of Hold that waits: floor-contract+wait, and what
// Hold's contract asks of every call besides, and nothing more:
//   - its arguments checked: the key a string of 1 to MaxKeyLen bytes, a
//     function and a context that are not nil, a context not ended;
//   - the holds enclosing the caller's context looked up (one Value call
//     for a context outside any hold), since a hold inside a hold of the
//     same key fails at once;
//   - under the shard's lock, the store's closed flag read, the line's
//     length held to MaxWaiters, and the shard's count of running holds
//     kept (a Shutdown waits for them to drain);
//   - the function called with a context and a lease, the record standing
//     for both, as a context that answers the hold's own Err and Value;
//   - a wait that watches the caller's context, leaves the line when it
//     ends, and lets a grant that raced that end go on;
//   - the key let go by a deferred call, so that a panicking function lets
//     it go too, after checking that the lease is still the holder's;
//   - the function's context ended when the hold is over: when nothing
//     settled it before, a read of it and of the parent's Err and one
//     CompareAndSwap (its Err may be asked on any goroutine).
//
// locks over it is what locks adds to the floor of the call the contract
// defines, where floor-contract+wait leaves Hold's checks and context out.
// It is committed to nothing else: it revokes nothing (so its lease is
// never lost), keeps no stats, and its context's Done is the caller's
// (locks makes a channel of its own only when the function asks for it, a
// cost the hot key never pays).

// Errors of the checked floor.
var (
	errCheckedKey    = errors.New("the key is not a string of 1 to MaxKeyLen bytes")
	errCheckedFn     = errors.New("the function to run is nil")
	errCheckedCtx    = errors.New("the context is nil")
	errCheckedNested = errors.New("held inside a hold of the same key")
	errCheckedClosed = errors.New("the store is closed")
	errCheckedLimit  = errors.New("the line of waiters is full")
)

// checkedHoldKey is the key under which a record, as a context, answers
// itself: how a hold finds the holds enclosing its caller's context.
type checkedHoldKey struct{}

// checkedFunc is the function a hold of the checked floor runs, as a
// HoldFunc: with its context and its lease, both the record.
type checkedFunc func(ctx context.Context, rec *contractRecord) error

// checkedState is a settled state of a checked hold's context, installed
// whole with CompareAndSwap and never changed, so that Err never changes
// once it is not nil.
type checkedState struct {
	err  error // what Err answers
	over bool  // the hold is over
}

// checkedOver is the state of a hold that ended with nothing settled before.
var checkedOver = &checkedState{err: context.Canceled, over: true}

// checkedFloor is the floor-contract+wait+checks peer: the wait floor's
// shards, entries and waiters, with its own holds.
type checkedFloor struct {
	waitFloor
	closed  atomic.Bool
	drained atomic.Int32 // shards whose last hold ended after Close, as a Shutdown would count them
}

func newCheckedFloor() Locker {
	f := new(checkedFloor)
	f.init()
	return f
}

// Hold calls hold from its own frame, as locksPeer.Hold calls Hold (which
// is inlined): a frame more between the park and the bench's loop would
// cost a mispredicted return per grant that locks does not pay.
func (f *checkedFloor) Hold(key string, fn func()) {
	mustHold(f.hold(context.Background(), key, 0, func(context.Context, *contractRecord) error { fn(); return nil }))
}

func (f *checkedFloor) HoldMax(key string, maxHold time.Duration, fn func()) {
	mustHold(f.hold(context.Background(), key, maxHold, func(context.Context, *contractRecord) error { fn(); return nil }))
}

// Close fails the holds that come after it.
func (f *checkedFloor) Close() { f.closed.Store(true) }

// hold is the checked floor's Hold: the wait floor's, with the checks and
// the context above. Its steps around the park repeat the wait floor's
// hold rather than share functions with it: a waiter parks in its hold's
// own frame, as in locks, and a function for the steps would add a call
// to the wait floor's hold, which is a floor.
func (f *checkedFloor) hold(ctx context.Context, key any, maxHold time.Duration, fn checkedFunc) error {
	text, ok := key.(string)
	if !ok || len(text) == 0 || len(text) > locks.MaxKeyLen {
		return f.fail("", errCheckedKey)
	}
	if fn == nil {
		return f.fail(text, errCheckedFn)
	}
	if ctx == nil {
		return f.fail(text, errCheckedCtx)
	}
	if err := ctx.Err(); err != nil {
		return f.fail(text, err)
	}
	for v := ctx.Value(checkedHoldKey{}); v != nil; {
		r := v.(*contractRecord)
		if r.key == text && r.running() {
			return f.fail(text, errCheckedNested)
		}
		v = r.parent.Value(checkedHoldKey{})
	}
	h := xxhash.Sum64String(text) ^ f.nameHash
	sh := &f.shards[h%contractShards]
	rec := &contractRecord{lock: f.name, key: text, parent: ctx}
	start := time.Since(f.origin)

	sh.mu.Lock()
	if f.closed.Load() {
		sh.mu.Unlock()
		return f.fail(text, errCheckedClosed)
	}
	e := sh.lookup(h, text)
	var w *waitFloorWaiter
	var granted time.Duration // on the floor's clock
	if e == nil {
		e = sh.insert(h, text)
		sh.fence++
		rec.fence = sh.fence
		sh.running++
		sh.mu.Unlock()
		granted = start
	} else {
		if e.waiters >= locks.MaxWaiters {
			sh.mu.Unlock()
			return f.fail(text, errCheckedLimit)
		}
		w = sh.joinLocked(e, start+deadlineWait)
		e.waiters++
		sh.mu.Unlock()
		// Parked in this frame, as locks' Hold.
		if done := ctx.Done(); done == nil {
			rec.fence = <-w.ready
		} else {
			select {
			case rec.fence = <-w.ready:
				if err := ctx.Err(); err != nil { // ended too, perhaps first: its end wins, as in locks
					e.rec = rec
					f.letGo(sh, e, w, rec)
					return f.fail(text, err)
				}
			case <-done:
				return f.leave(sh, e, w, rec)
			}
		}
		granted = time.Since(f.origin)
	}
	rec.granted = f.origin.Add(granted)
	if maxHold > 0 {
		rec.deadline = rec.granted.Add(maxHold)
	}
	e.rec = rec
	defer f.letGo(sh, e, w, rec)
	return fn(rec, rec)
}

// fail returns err as the error of a hold of key text, naming the lock and
// the key.
func (f *checkedFloor) fail(text string, err error) error {
	return fmt.Errorf("lock %s: key %q: %w", f.name, text, err)
}

// letGo lets e go once its hold's function returned or panicked, handing
// it to the next in line, and ends the function's context.
func (f *checkedFloor) letGo(sh *waitFloorShard, e *waitFloorEntry, w *waitFloorWaiter, rec *contractRecord) {
	sh.mu.Lock()
	sh.running--
	if e.rec != rec { // locks checks that the lease was not revoked; nothing revokes here
		panic("floor: the key's record is another hold's")
	}
	e.rec = nil
	if w != nil {
		sh.keepWaiter(w)
	}
	next := sh.passLocked(e)
	if next != nil {
		e.waiters--
		sh.running++
		sh.fence++
	} else {
		sh.remove(e)
	}
	fence := sh.fence
	drained := sh.running == 0 && f.closed.Load() // the last hold of a closed shard: what a Shutdown waits for
	sh.mu.Unlock()
	if next != nil {
		next.ready <- fence
	}
	rec.end()
	if drained {
		f.drained.Add(1)
	}
}

// leave takes w, whose caller's context ended while it waited, out of e's
// line and returns the context's error. If it was handed the key
// meanwhile, it takes its fence and lets the key go on: the context's end
// wins, and the key is never left held by nobody.
func (f *checkedFloor) leave(sh *waitFloorShard, e *waitFloorEntry, w *waitFloorWaiter, rec *contractRecord) error {
	sh.mu.Lock()
	if w.prev != nil || e.head == w { // still in line: passLocked takes the head
		sh.unlinkLocked(e, w)
		e.waiters--
		sh.keepWaiter(w)
		sh.mu.Unlock()
		rec.end()
	} else {
		sh.mu.Unlock()
		rec.fence = <-w.ready
		e.rec = rec
		f.letGo(sh, e, w, rec)
	}
	return f.fail(rec.key, rec.parent.Err())
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

// Done is the caller's: the floor makes no channel of its own.
func (r *contractRecord) Done() <-chan struct{} { return r.parent.Done() }

// Err returns nil while the hold runs and its caller's context has not
// ended, then the error that settled it, never changed after.
func (r *contractRecord) Err() error {
	if st := r.state.Load(); st != nil {
		return st.err
	}
	err := r.parent.Err()
	if err == nil {
		return nil
	}
	r.state.CompareAndSwap(nil, &checkedState{err: err}) // settled by the caller's end; the hold runs on
	return r.state.Load().err
}

func (r *contractRecord) Value(k any) any {
	if k == (checkedHoldKey{}) {
		return r
	}
	return r.parent.Value(k)
}

// running reports whether the hold is not over.
func (r *contractRecord) running() bool {
	st := r.state.Load()
	return st == nil || !st.over
}

// end marks the hold as over, keeping the error that settled its context
// before, if one did.
func (r *contractRecord) end() {
	if r.state.Load() == nil && r.parent.Err() == nil && r.state.CompareAndSwap(nil, checkedOver) {
		return // most holds: nothing settled it before, as in locks' end
	}
	for {
		st := r.state.Load()
		if st != nil && st.over {
			return
		}
		n := &checkedState{err: context.Canceled, over: true}
		if st != nil {
			n.err = st.err
		} else if err := r.parent.Err(); err != nil {
			n.err = err
		}
		if r.state.CompareAndSwap(st, n) {
			return
		}
	}
}
