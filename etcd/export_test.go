package etcdlocks

import "time"

// HeldValue is the record a holder granted at granted, with a maxHold
// deadline unless it is zero, keeps in its key: for tests that stand in
// for a holder of another process.
func HeldValue(granted, deadline time.Time) string { return heldValue(granted, deadline) }

// WaitingValue is the record of a waiter's key.
const WaitingValue = waitingValue

// Granting reports whether s has a lease's grant under way or done: a
// session made by a hold.
func Granting(s *Store) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.sessions) > 0
}
