package locks

import (
	"time"

	"github.com/holdline/locks/shard"
)

// expire acts on a timer the wheel handed back, if it still means
// something: a waiter whose wait passed leaves the line; a holder at its
// maxHold is revoked. A timer armed for a state g has left since (granted
// while its wait deadline was being fired, say) is dropped.
func (s *Store) expire(g *holder, p purpose) {
	switch p {
	case forWait:
		sh := g.shard
		sh.Lock()
		if g.state != waiting {
			sh.Unlock()
			return
		}
		g.entry.Line.Remove(&g.wait)
		g.state, g.entry = timedOut, nil
		sh.Unlock()
		g.ready <- struct{}{}
	case forMaxHold:
		s.revoke(g, reasonMaxHold)
	}
}

// revoke takes the key from its holder g for reason and gives it to the
// next in line at once; g's function learns it through its context, and
// its Hold fails Lost when it returns.
func (s *Store) revoke(g *holder, reason string) {
	sh := g.shard
	sh.Lock()
	if g.state != holding {
		sh.Unlock()
		return
	}
	g.state, g.reason = revoked, reason
	next := s.passLocked(sh, g.entry)
	g.entry = nil
	sh.Unlock()
	if next != nil {
		next.ready <- struct{}{}
	}
	g.Lose(lostError(g.Lease.Lock, g.Lease.Key, reason))
}

// closeShard fails every waiter of sh Closed, revokes every holder with
// reason "its store closed", and frees every entry.
func (s *Store) closeShard(sh *shard.Shard[*holder]) {
	var wake, lose []*holder
	sh.Lock()
	sh.AllLocked(func(e *shard.Entry[*holder]) bool {
		for el := e.Line.PopFront(); el != nil; el = e.Line.PopFront() {
			w := el.Value
			w.state, w.entry = shut, nil
			s.timers.cancel(w)
			wake = append(wake, w)
		}
		if g := e.Holder; g != nil {
			g.state, g.reason, g.entry = revoked, reasonClosed, nil
			s.timers.cancel(g)
			lose = append(lose, g)
			e.Holder = nil
		}
		sh.DeleteLocked(e)
		return true
	})
	sh.Unlock()
	for _, w := range wake {
		w.ready <- struct{}{}
	}
	for _, g := range lose {
		g.Lose(lostError(g.Lease.Lock, g.Lease.Key, reasonClosed))
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

// instant returns the instant on s's timer clock that lies d after now,
// saturating instead of overflowing for very long d.
func (s *Store) instant(now time.Time, d time.Duration) time.Duration {
	at := now.Sub(s.origin)
	if d > 0 && at > maxInstant-d {
		return maxInstant
	}
	return at + d
}
