package timerwheel

import "time"

// dueLevel is the level recorded in a Timer that sits in the wheel's "due
// now" list rather than in a bucket.
const dueLevel = 0xff

// Timer is one entry of a [Wheel].
//
// The zero value is an unscheduled timer, ready for [Wheel.Schedule]. The
// owner embeds a Timer in its own struct, so that scheduling allocates
// nothing, and sets Value to find its way back when the timer is handed back
// by [Wheel.Advance].
//
// A Timer must not be copied while it is scheduled: the wheel holds pointers
// to it. Like its Wheel, a Timer is not safe for concurrent use; it is guarded
// by whatever guards the wheel it is scheduled in.
type Timer[T any] struct {
	// next and prev link the timer into a circular list: a bucket, or the
	// wheel's due-now list. Both are nil while unscheduled.
	next, prev *Timer[T]
	// w is the wheel the timer is scheduled in, nil when unscheduled.
	w *Wheel[T]
	// expiry is the tick the timer fires at, ceil(when/tick). Meaningless
	// while the timer sits in the due-now list.
	expiry int64
	// when is the instant given to Schedule, before rounding.
	when time.Duration
	// level and slot name the bucket holding the timer; level is dueLevel
	// for the due-now list.
	level, slot uint8

	// Value is the owner's payload, typically a pointer back to the struct
	// that embeds the Timer. The wheel never reads or writes it.
	Value T
}

// Scheduled reports whether t is in a wheel: true from Schedule until
// Advance hands it back or Cancel removes it. O(1).
func (t *Timer[T]) Scheduled() bool { return t.w != nil }

// When returns the instant t was last scheduled for, exactly as given to
// Schedule (before rounding to a tick), or 0 if t was never scheduled. It
// keeps its value after t fires or is cancelled. O(1).
func (t *Timer[T]) When() time.Duration { return t.when }

// push appends t at the tail of the circular list whose head is *head.
// O(1).
func push[T any](head **Timer[T], t *Timer[T]) {
	h := *head
	if h == nil {
		t.next, t.prev = t, t
		*head = t
		return
	}
	tail := h.prev
	t.prev, t.next = tail, h
	tail.next = t
	h.prev = t
}

// remove unlinks t from the circular list whose head is *head, clears t's
// links and reports whether the list is now empty. O(1).
func remove[T any](head **Timer[T], t *Timer[T]) (empty bool) {
	if t.next == t {
		*head = nil
		empty = true
	} else {
		t.prev.next = t.next
		t.next.prev = t.prev
		if *head == t {
			*head = t.next
		}
	}
	t.next, t.prev = nil, nil
	return empty
}

// detach empties the circular list whose head is *head and returns its
// timers as a nil-terminated chain in list order (following next), still
// marked as scheduled. The caller must relink or release every timer on it.
// O(1).
func detach[T any](head **Timer[T]) *Timer[T] {
	h := *head
	*head = nil
	if h != nil {
		h.prev.next = nil
	}
	return h
}

// release marks t unscheduled after it has left every list: it drops the
// back-pointer and the links but keeps when, so that When still reports the
// instant t was scheduled for.
func (t *Timer[T]) release() {
	t.next, t.prev, t.w = nil, nil, nil
}
