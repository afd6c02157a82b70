package locks

import "weak"

// Internals the tests of leases and closing observe, and nothing more.

// KeyEntries returns how many keys of s have an entry: a holder or a line
// of waiters (memory for a key is reclaimed when it has neither).
func KeyEntries(s *Store) int {
	n := 0
	for i := 0; i < s.table.Len(); i++ {
		sh := s.table.At(i)
		sh.Lock()
		n += sh.LenLocked()
		sh.Unlock()
	}
	return n
}

// DeadlineLists returns how many deadline lists s keeps, over all its
// shards, and how many timers its wheel holds.
func DeadlineLists(s *Store) (lists, timers int) {
	for i := range s.local {
		sd := &s.local[i]
		sd.sh.Lock()
		lists += len(sd.lists) + len(sd.more)
		sd.sh.Unlock()
	}
	s.timers.mu.Lock()
	defer s.timers.mu.Unlock()
	return lists, s.timers.wheel.Len()
}

// PendingTimers returns how many deadlines (waits and maxHolds) s has
// pending, and whether its timer wheel expects nothing at all, so that its
// goroutine sleeps with no timer (no ticker runs while no deadline is
// set, and no timer outlives its use). A deadline that left
// its list early leaves the list's timer in the wheel until its old
// instant: one wake-up, then the wheel is idle.
func PendingTimers(s *Store) (n int, idle bool) {
	for i := range s.local {
		sd := &s.local[i]
		sd.sh.Lock()
		n += sd.pendingLocked()
		sd.sh.Unlock()
	}
	s.timers.mu.Lock()
	defer s.timers.mu.Unlock()
	_, pending := s.timers.wheel.Next()
	return n, !pending
}

// StoreFreed returns a function that reports whether the state of s was
// freed.
func StoreFreed(s *Store) func() bool {
	wp := weak.Make(s.store)
	return func() bool { return wp.Value() == nil }
}
