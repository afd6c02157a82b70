package locks

import (
	"maps"
	"slices"
	"time"
)

// revokeLocked takes e from its holder for the reason r and gives it to
// the next in line at once, returning the new holder's wake-up (nil if
// nobody waited) and the revoked context, whose real context the caller
// cancels (cancelLost) once the shard's lock is let go. The revoked hold
// learns it at its release, and its Hold fails Lost. The caller has taken
// the holder's maxHold, if it has one, out of its list's count.
func (s *store) revokeLocked(sd *shardLocal, e *keyEntry, r loss) (chan<- state, *holdContext) {
	c := e.Holder
	c.loseLocked(r)
	sd.sh.Counts.Revoked++
	sd.revoked[r]++
	return s.passLocked(sd, e), c
}

// closeShard fails every waiter of sd's shard Closed, revokes every holder
// with reason "its store closed", and frees every entry.
func (s *store) closeShard(sd *shardLocal) {
	var wake []chan<- state
	var lose []*holdContext
	sh := sd.sh
	sh.Lock()
	sh.AllLocked(func(e *keyEntry) bool {
		for el := e.Line.PopFront(); el != nil; el = e.Line.PopFront() {
			sh.Waiting--
			w := el.Value.w
			w.state = shut
			disarmLocked(&w.ticket)
			wake = append(wake, w.ready)
		}
		if c := e.Holder; c != nil {
			c.loseLocked(lostClosed)
			sh.Counts.Revoked++
			sd.revoked[lostClosed]++
			lose = append(lose, c)
			e.Holder = nil
		}
		sh.DeleteLocked(e)
		return true
	})
	// Every maxHold's holder is gone: empty their lists.
	for _, l := range slices.Concat(sd.lists, slices.Collect(maps.Values(sd.more))) {
		if l.p == forMaxHold && l.n > 0 {
			l.n = 0
			l.emptyLocked()
		}
	}
	sh.Fences.Retire()
	sh.Unlock()
	for _, w := range wake {
		w <- shut
	}
	for _, c := range lose {
		c.cancelLost()
	}
}

// busy reports whether a function still runs under a key of s.
func (s *store) busy() bool {
	for i := range s.local {
		sh := s.local[i].sh
		sh.Lock()
		n := sh.Running
		sh.Unlock()
		if n > 0 {
			return true
		}
	}
	return false
}

// signalDrained wakes every Shutdown waiting for functions to return.
func (s *store) signalDrained() {
	s.drainMu.Lock()
	close(s.drained)
	s.drained = make(chan struct{})
	s.drainMu.Unlock()
}

// since returns the instant on s's timer clock (time since s's origin),
// from one reading of the monotonic clock; instant gives its time.Time.
func (s *store) since() time.Duration { return time.Since(s.origin) }

// instant returns the time of instant at on s's timer clock.
func (s *store) instant(at time.Duration) time.Time { return s.origin.Add(at) }

// after returns the instant d after at on the timer clock, saturating
// instead of overflowing for very long d.
func after(at, d time.Duration) time.Duration {
	if d > 0 && at > maxInstant-d {
		return maxInstant
	}
	return at + d
}
