package fuzz

import (
	"fmt"
	"slices"
	"time"
)

// The model's clock: deadlines fire at the first tick at or after their
// instant, in order of instants; events of one instant that the store may
// order either way are settled by asking the Resolver.

// fire returns the instant a deadline d after at fires: the first tick at or
// after at+d, or Never when that is past math.MaxInt64.
func (m *Model) fire(at, d time.Duration) time.Duration {
	if d > Never-at {
		return Never
	}
	x := at + d
	c := x / m.tick * m.tick
	if c < x {
		if c > Never-m.tick {
			return Never
		}
		c += m.tick
	}
	return c
}

// Next returns the instant of the next deadline, or Never.
func (m *Model) Next() time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.nextLocked()
}

func (m *Model) nextLocked() time.Duration {
	next := Never
	for _, c := range m.calls {
		switch c.Phase {
		case Waiting:
			next = min(next, c.WaitAt)
		case Holding:
			next = min(next, c.HoldAt)
		}
	}
	return next
}

// Advance moves the clock to to, firing every deadline up to it in order.
// race, if not -1, is a call let go at instant to, racing with the deadlines
// of that instant. r settles the order of events on one instant (nil: every
// let-go key passes before the waiters whose wait ends at that instant).
func (m *Model) Advance(to time.Duration, race int, r Resolver) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if to < m.now {
		panic(fmt.Sprintf("model: time goes back from %v to %v", m.now, to))
	}
	for {
		t := m.nextLocked()
		if t >= to {
			break
		}
		m.now = t
		m.settleLocked(t, nil, r)
	}
	m.now = to
	var rc *Call
	if race >= 0 {
		rc = m.calls[race]
	}
	if rc != nil || m.nextLocked() == to {
		m.settleLocked(to, rc, r)
	}
}

// settleLocked fires the deadlines of instant t, with rc let go at t.
func (m *Model) settleLocked(t time.Duration, rc *Call, r Resolver) {
	if rc != nil && rc.Phase == Revoked {
		m.releaseLocked(rc, Return)
		rc = nil
	}
	for _, k := range m.keysLocked() {
		m.settleKeyLocked(k, t, rc, r)
	}
}

// settleKeyLocked fires the deadlines of k at instant t. When the holder
// goes at t (its maxHold, or its release racing them), the waiters whose
// wait also ends at t may have left before the key passed or not: the new
// holder is the first of the line not timed out by then, so it is one of the
// line's head up to its first waiter whose wait does not end at t; or nobody,
// if every waiter's wait ends at t.
func (m *Model) settleKeyLocked(k Key, t time.Duration, rc *Call, r Resolver) {
	h := m.holder[k]
	hDue := h.HoldAt <= t
	hRel := rc == h
	if !hDue && !hRel {
		for _, w := range slices.Clone(m.line[k]) {
			if w.WaitAt <= t {
				m.timeoutLocked(w)
			}
		}
		return
	}
	// The holder goes without handing on yet.
	switch {
	case hDue && hRel && r != nil && r.LostRace(h):
		m.revokeLocked(h, "maxHold")
		if h.Phase == Revoked { // a stubborn fn returns on its release
			m.releaseLocked(h, Return)
		} else { // an obedient fn saw its release or its loss first
			h.Out.Wrap = WrapAny
		}
	case hRel:
		out := Outcome{Res: OK}
		if h.FnErr {
			out.Res = FnErr
		}
		m.endLocked(h, out)
	default:
		m.revokeLocked(h, "maxHold")
	}
	line := m.line[k]
	var cands []*Call
	free := true
	for _, w := range line {
		cands = append(cands, w)
		if w.WaitAt > t {
			free = false
			break
		}
	}
	var pick *Call
	switch {
	case r == nil:
		if len(cands) > 0 {
			pick = cands[0]
		}
	default:
		for _, c := range cands {
			if r.GrantedAt(c, t) {
				pick = c
				break
			}
		}
		if pick == nil && !free {
			pick = cands[len(cands)-1] // the only legal choice left; a mismatch shows
		}
	}
	for _, w := range slices.Clone(line) {
		switch {
		case w == pick:
			m.leaveLineLocked(w)
			m.giveLocked(k, w)
		case w.WaitAt <= t:
			m.timeoutLocked(w)
		}
	}
	if pick == nil {
		delete(m.holder, k)
		delete(m.line, k)
	}
}
