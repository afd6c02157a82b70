package timerwheel

import (
	"math/bits"
	"time"
)

// Advance moves the clock to now and hands back what is due: it appends to
// due every scheduled timer whose rounded instant is <= now, and every timer
// scheduled for an instant not after the previous Now, marks each of them
// unscheduled (Scheduled reports false, When keeps its instant) and returns
// the extended slice. The order of the appended timers is unspecified.
//
// A now before Now moves nothing but still hands back the due-now timers.
// Timers the caller schedules while processing the returned slice go into
// the wheel as usual and are handed back by a later Advance.
//
// Higher-level buckets whose start has come are cascaded into lower levels on
// the way. Cost: O((due + cascaded) · occupied levels + levels), however far
// the clock moves: empty buckets are skipped with the occupancy bitmaps, never
// stepped through tick by tick. Nothing is allocated except by growing due.
func (w *Wheel[T]) Advance(now time.Duration, due []*Timer[T]) []*Timer[T] {
	due = w.drainDue(due)
	if now <= w.now {
		return due
	}
	w.now = now
	target := int64(now / w.tick)
	for {
		l, start, ok := w.earliest()
		if !ok || start > target {
			break
		}
		// Every other occupied bucket starts at or after start, so moving
		// cur there keeps each of them 0..63 slots ahead; 0 only for a bucket
		// that also starts exactly at start, which the next round takes.
		w.cur = start
		due = w.cascade(l, start, target, due)
	}
	// Every bucket left starts after target, and was filed less than 64 of
	// its level's slots ahead of a cur <= target, so it lies 1..63 slots
	// ahead of target: moving cur does not change which bucket a slot means.
	w.cur = target
	return due
}

// earliest returns the level and start tick of the occupied bucket that
// starts first, preferring the lowest level on a tie, or ok == false when
// every bucket is empty. O(occupied levels).
func (w *Wheel[T]) earliest() (level int, start int64, ok bool) {
	for m := w.levels; m != 0; m &= m - 1 {
		l := bits.TrailingZeros16(m)
		shift := uint(slotBits * l)
		idx := w.cur >> shift
		// Rotate so that bit 0 is cur's slot; the first set bit is then the
		// number of slots from cur's to the first occupied one.
		off := bits.TrailingZeros64(bits.RotateLeft64(w.occ[l], -int(idx&(numSlots-1))))
		// No overflow: the result is the start of a bucket holding an int64
		// expiry, hence <= that expiry.
		s := (idx + int64(off)) << shift
		if !ok || s < start {
			level, start, ok = l, s, true
		}
	}
	return level, start, ok
}

// cascade detaches the bucket of level l starting at tick start (== cur)
// and empties it: timers expiring by target are released and appended to
// due, the rest are re-inserted relative to cur, which files them at a lower
// level because they share cur's slot at level l.
func (w *Wheel[T]) cascade(l int, start, target int64, due []*Timer[T]) []*Timer[T] {
	s := uint8(start>>(slotBits*l)) & (numSlots - 1)
	chain := detach(&w.slots[l][s])
	w.occ[l] &^= 1 << s
	if w.occ[l] == 0 {
		w.levels &^= 1 << l
	}
	w.visited++
	for t := chain; t != nil; {
		next := t.next
		if t.expiry <= target {
			t.release()
			w.count--
			due = append(due, t)
		} else {
			w.insert(t)
		}
		t = next
	}
	return due
}

// drainDue releases every timer of the due-now list and appends it to due.
func (w *Wheel[T]) drainDue(due []*Timer[T]) []*Timer[T] {
	for t := detach(&w.due); t != nil; {
		next := t.next
		t.release()
		w.count--
		due = append(due, t)
		t = next
	}
	return due
}
