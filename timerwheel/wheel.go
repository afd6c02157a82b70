package timerwheel

import (
	"math"
	"math/bits"
	"time"
)

// Geometry of the wheel. Policy lives here and nowhere else.
const (
	// slotBits is log2 of the slots per level: 64 slots, so that one uint64
	// records which slots of a level are occupied.
	slotBits = 6
	// numSlots is the number of slots per level.
	numSlots = 1 << slotBits
	// numLevels is enough levels for every int64 tick: 64^11 = 2^66 > 2^63.
	// The top level's slots span 2^60 ticks, so a non-negative tick's index
	// there is at most 7 and every expiry fits.
	numLevels = 11
	// topLevel is the highest level.
	topLevel = numLevels - 1
)

// Wheel is a passive hierarchical timer wheel. See the package
// documentation for the algorithm and its costs.
//
// A Wheel must be created with [New]; the zero value is not usable. A Wheel
// must not be copied after first use: scheduled timers point back at it.
//
// A Wheel is not safe for concurrent use. It starts no goroutines, uses no Go
// timers and never reads a clock: every instant is passed in by the owner,
// which guards the wheel and its timers with its own lock.
type Wheel[T any] struct {
	// tick is the resolution: instants are rounded up to multiples of it.
	tick time.Duration
	// now is the instant given to the last Advance (or New), not rounded.
	now time.Duration
	// cur is the wheel's time in ticks, floor(now/tick), except inside
	// Advance where it steps through the starts of the buckets it cascades.
	cur int64
	// count is the number of scheduled timers, in buckets and in due.
	count int
	// due is the head of the list of timers due at the next Advance
	// whatever its instant: those scheduled for an instant not after now.
	due *Timer[T]
	// levels has bit L set when occ[L] != 0.
	levels uint16
	// occ[L] has bit s set when slots[L][s] is non-empty.
	occ [numLevels]uint64
	// slots[L][s] is the head of a circular list of timers whose expiry e
	// has e>>(6L) ≡ s (mod 64), and lies 1..63 slots of level L ahead of cur.
	slots [numLevels][numSlots]*Timer[T]
	// visited counts buckets detached by Advance; read by tests only.
	visited int
}

// New returns an empty wheel whose clock reads now.
//
// tick is the resolution: scheduled instants are rounded up to a whole
// number of ticks. Instants are time.Duration values on one monotonic clock
// chosen by the owner, such as time.Since(origin). New panics if tick <= 0 or
// now < 0. The wheel occupies about 6 KiB regardless of T.
func New[T any](tick time.Duration, now time.Duration) *Wheel[T] {
	if tick <= 0 {
		panic("timerwheel: New with non-positive tick")
	}
	if now < 0 {
		panic("timerwheel: New with negative now")
	}
	return &Wheel[T]{tick: tick, now: now, cur: int64(now / tick)}
}

// Tick returns the resolution given to New. O(1).
func (w *Wheel[T]) Tick() time.Duration { return w.tick }

// Now returns the instant given to the last Advance that moved the clock, or
// to New: exactly as given, not rounded. O(1).
func (w *Wheel[T]) Now() time.Duration { return w.now }

// Len returns the number of scheduled timers. O(1).
func (w *Wheel[T]) Len() int { return w.count }

// Schedule arms t to fire at instant at, rounded up to a whole tick so that
// it never fires early: Advance hands t back once it is given an instant >=
// ceil(at/tick)*tick. If t is already scheduled in w it is moved. An at not
// after Now (zero, negative or past) makes t due at the next Advance,
// whatever instant that Advance is given. Any at up to math.MaxInt64 is
// accepted without overflow; a timer whose rounded instant exceeds
// math.MaxInt64 stays scheduled until cancelled.
//
// Schedule panics if t is scheduled in another wheel. O(1), no allocation.
func (w *Wheel[T]) Schedule(t *Timer[T], at time.Duration) {
	switch t.w {
	case nil:
		t.w = w
		w.count++
	case w:
		w.unlink(t)
	default:
		panic("timerwheel: Schedule of a timer scheduled in another wheel")
	}
	t.when = at
	if at <= w.now {
		t.level, t.slot = dueLevel, 0
		push(&w.due, t)
		return
	}
	// at > now >= cur*tick, so e > cur: the timer lands ahead of cur.
	e := int64(at / w.tick)
	if at%w.tick != 0 {
		e++ // no overflow: tick >= 2 here, so at/tick <= MaxInt64/2
	}
	t.expiry = e
	w.insert(t)
}

// Cancel removes t from w and reports whether it was scheduled. It is an
// O(1) unlink: nothing of t stays in the wheel. Cancelling an unscheduled
// timer (never scheduled, handed back by Advance, or already cancelled) does
// nothing and returns false. Cancel panics if t is scheduled in another
// wheel.
func (w *Wheel[T]) Cancel(t *Timer[T]) bool {
	switch t.w {
	case nil:
		return false
	case w:
	default:
		panic("timerwheel: Cancel of a timer scheduled in another wheel")
	}
	w.unlink(t)
	t.release()
	w.count--
	return true
}

// Next reports the earliest instant at which Advance may have something to
// do. It is never later than the earliest rounded instant of a scheduled
// timer, so a driver that sleeps until Next never fires late; it may be
// earlier, at the start of a higher-level bucket that must cascade: Advance
// to such an instant may hand back nothing, and Next then reports a later
// one. Each such step descends a level. If a timer is due now
// Next returns Now. ok is false when the wheel is empty. An instant past
// math.MaxInt64 is reported as math.MaxInt64. O(levels).
func (w *Wheel[T]) Next() (at time.Duration, ok bool) {
	if w.due != nil {
		return w.now, true
	}
	_, start, ok := w.earliest()
	if !ok {
		return 0, false
	}
	if start > int64(math.MaxInt64/w.tick) {
		return math.MaxInt64, true
	}
	return time.Duration(start) * w.tick, true
}

// insert files t, whose expiry is after cur, in the bucket that covers it.
func (w *Wheel[T]) insert(t *Timer[T]) {
	l := levelFor(t.expiry, w.cur)
	s := uint8(t.expiry>>(slotBits*l)) & (numSlots - 1)
	t.level, t.slot = uint8(l), s
	push(&w.slots[l][s], t)
	w.occ[l] |= 1 << s
	w.levels |= 1 << l
}

// unlink takes t out of whichever list holds it, keeping the occupancy
// bitmaps exact. t stays counted and marked scheduled.
func (w *Wheel[T]) unlink(t *Timer[T]) {
	if t.level == dueLevel {
		remove(&w.due, t)
		return
	}
	l, s := t.level, t.slot
	if remove(&w.slots[l][s], t) {
		w.occ[l] &^= 1 << s
		if w.occ[l] == 0 {
			w.levels &^= 1 << l
		}
	}
}

// levelFor returns the lowest level L at which expiry e > cur lies within
// the 64 slots starting at cur's own: (e>>6L) - (cur>>6L) < 64. O(1).
//
// With d = e-cur, no lower level qualifies while d >= 64^(L+1), and since
// (e>>k) - (cur>>k) is (d>>k) or (d>>k)+1, the first level with
// d < 64^(L+1) qualifies unless the difference is exactly 64, when the next
// one does. At the top level the difference is at most 7.
func levelFor(e, cur int64) int {
	d := uint64(e - cur) // 0 <= cur < e, no overflow
	l := (bits.Len64(d)+slotBits-1)/slotBits - 1
	if l < topLevel && e>>(slotBits*l)-cur>>(slotBits*l) >= numSlots {
		l++
	}
	return l
}
