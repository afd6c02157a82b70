package timerwheel

import "fmt"

// Internals the external tests need.

// NumLevels is the number of levels, so tests can reach every one.
const NumLevels = numLevels

// LevelFor exposes levelFor.
var LevelFor = levelFor

// Visited returns the number of buckets Advance has detached so far: the
// work it did, apart from the timers it handed back.
func (w *Wheel[T]) Visited() int { return w.visited }

// Cur returns the wheel's time in ticks.
func (w *Wheel[T]) Cur() int64 { return w.cur }

// Where returns the level of the bucket holding t, -1 if t is in the due-now
// list, and -2 if t is unscheduled.
func (t *Timer[T]) Where() int {
	switch {
	case t.w == nil:
		return -2
	case t.level == dueLevel:
		return -1
	default:
		return int(t.level)
	}
}

// Expiry returns the tick t fires at.
func (t *Timer[T]) Expiry() int64 { return t.expiry }

// CheckInvariants walks every list of w and returns the first inconsistency
// it finds: broken links, a timer filed in the wrong slot or too far from
// cur, a bitmap bit that disagrees with its bucket, or a wrong count.
func (w *Wheel[T]) CheckInvariants() error {
	if w.cur != int64(w.now/w.tick) {
		return fmt.Errorf("cur %d, want floor(%v/%v)", w.cur, w.now, w.tick)
	}
	n, err := w.checkList(w.due, func(t *Timer[T]) error {
		if t.level != dueLevel {
			return fmt.Errorf("due-now timer with level %d", t.level)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for l := range numLevels {
		shift := uint(slotBits * l)
		if (w.occ[l] != 0) != (w.levels&(1<<l) != 0) {
			return fmt.Errorf("level %d: occ %#x but levels %#x", l, w.occ[l], w.levels)
		}
		for s := range numSlots {
			head := w.slots[l][s]
			if (head != nil) != (w.occ[l]&(1<<s) != 0) {
				return fmt.Errorf("level %d slot %d: head %p, occ %#x", l, s, head, w.occ[l])
			}
			m, err := w.checkList(head, func(t *Timer[T]) error {
				if int(t.level) != l || int(t.slot) != s {
					return fmt.Errorf("timer filed at %d/%d claims %d/%d", l, s, t.level, t.slot)
				}
				if int(t.expiry>>shift)&(numSlots-1) != s {
					return fmt.Errorf("expiry %d in slot %d of level %d", t.expiry, s, l)
				}
				if d := t.expiry>>shift - w.cur>>shift; d < 1 || d > numSlots-1 {
					return fmt.Errorf("expiry %d is %d slots of level %d from cur %d", t.expiry, d, l, w.cur)
				}
				return nil
			})
			if err != nil {
				return err
			}
			n += m
		}
	}
	if n != w.count {
		return fmt.Errorf("found %d timers, count %d", n, w.count)
	}
	return nil
}

// checkList checks the links of the circular list at head and calls check
// on each timer, returning how many there are.
func (w *Wheel[T]) checkList(head *Timer[T], check func(*Timer[T]) error) (int, error) {
	if head == nil {
		return 0, nil
	}
	n := 0
	for t := head; ; {
		if t.w != w || t.next == nil || t.prev == nil || t.next.prev != t {
			return n, fmt.Errorf("bad links or owner at timer %p", t)
		}
		if err := check(t); err != nil {
			return n, err
		}
		n++
		if t = t.next; t == head {
			return n, nil
		}
		if n > 1<<24 {
			return n, fmt.Errorf("list does not close")
		}
	}
}
