package locks

import (
	"time"

	"github.com/holdline/locks/shard"
)

// revokeLocked takes the key from its holder g, for the reason r, and
// gives it to the next in line at once, returning the new holder's wake-up
// (nil if nobody waited). g's maxHold deadline, if any, is already out of
// its list. g's function learns it through its context, which the caller
// cancels once the shard's lock is let go; its Hold fails Lost when it
// returns.
func (s *Store) revokeLocked(g *holder, r loss) chan<- state {
	sh := g.shard
	g.state, g.lost = revoked, r
	sh.Counts.Revoked++
	ready := s.passLocked(sh, g.entry)
	g.entry = nil
	return ready
}

// closeShard fails every waiter of sh Closed, revokes every holder with
// reason "its store closed", and frees every entry.
func (s *Store) closeShard(sh *shard.Shard[*holder]) {
	var wake []chan<- state
	var lose []*holder
	sh.Lock()
	sh.AllLocked(func(e *shard.Entry[*holder]) bool {
		for el := e.Line.PopFront(); el != nil; el = e.Line.PopFront() {
			w := el.Value
			w.state, w.entry = shut, nil
			disarmLocked(w)
			wake = append(wake, w.slot.ready)
		}
		if g := e.Holder; g != nil {
			g.state, g.lost, g.entry = revoked, lostClosed, nil
			sh.Counts.Revoked++
			disarmLocked(g)
			lose = append(lose, g)
			e.Holder = nil
		}
		sh.DeleteLocked(e)
		return true
	})
	sh.Fences.Retire()
	sh.Unlock()
	for _, w := range wake {
		w <- shut
	}
	for _, g := range lose {
		g.Lose(lostError(g.Lease.Lock, g.Lease.Key, lostClosed))
	}
}

// busy reports whether a function still runs under a key of s.
func (s *Store) busy() bool {
	for i := 0; i < s.table.Len(); i++ {
		sh := s.table.At(i)
		sh.Lock()
		n := sh.Busy
		sh.Unlock()
		if n > 0 {
			return true
		}
	}
	return false
}

// signalDrained wakes every Shutdown waiting for functions to return.
func (s *Store) signalDrained() {
	s.drainMu.Lock()
	close(s.drained)
	s.drained = make(chan struct{})
	s.drainMu.Unlock()
}

// now returns the time, and the same instant on s's timer clock (time
// since s's origin). One reading of the monotonic clock serves both: the
// wall time is the origin's advanced by it.
func (s *Store) now() (time.Time, time.Duration) {
	at := time.Since(s.origin)
	return s.origin.Add(at), at
}

// after returns the instant d after at on the timer clock, saturating
// instead of overflowing for very long d.
func after(at, d time.Duration) time.Duration {
	if d > 0 && at > maxInstant-d {
		return maxInstant
	}
	return at + d
}
