// Package fuzz attacks the store of package locks with generated sequences
// of events and checks them against a reference model: the model-based test,
// the fuzz targets, the stress test and the regression tests of the failure
// modes seen in the field. See README.md for which test covers what.
//
// This file is the reference model: what a store must do, written as plainly
// as it can be. One mutex over everything, a slice per key for its line, a
// holder per key, and a counter per key for the fences, which are compared
// with the store's only by their order. Time is a number the caller moves:
// a deadline at instant x fires at the first tick at or after x, never
// before, and exactly once.
package fuzz

import (
	"slices"
	"strings"
	"sync"
	"time"
)

// Model is the reference store. Safe for concurrent use (one mutex), though
// the tests drive it from one goroutine.
type Model struct {
	mu     sync.Mutex
	tick   time.Duration
	limit  int
	now    time.Duration
	closed bool
	calls  []*Call
	holder map[Key]*Call
	line   map[Key][]*Call
	fence  map[Key]uint64
}

// NewModel returns a model store whose deadlines fire on ticks of tick and
// whose lines hold at most limit waiters.
func NewModel(tick time.Duration, limit int) *Model {
	return &Model{tick: tick, limit: limit,
		holder: map[Key]*Call{}, line: map[Key][]*Call{}, fence: map[Key]uint64{}}
}

// Now returns the model's clock.
func (m *Model) Now() time.Duration { m.mu.Lock(); defer m.mu.Unlock(); return m.now }

// Closed reports whether the model store is closed.
func (m *Model) Closed() bool { m.mu.Lock(); defer m.mu.Unlock(); return m.closed }

// Calls returns every call so far, by ID.
func (m *Model) Calls() []*Call { m.mu.Lock(); defer m.mu.Unlock(); return slices.Clone(m.calls) }

// Holder returns the holder of k, or nil.
func (m *Model) Holder(k Key) *Call { m.mu.Lock(); defer m.mu.Unlock(); return m.holder[k] }

// Line returns the line of k, first come first.
func (m *Model) Line(k Key) []*Call { m.mu.Lock(); defer m.mu.Unlock(); return slices.Clone(m.line[k]) }

// Keys returns every key with a holder or a waiter, sorted.
func (m *Model) Keys() []Key {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.keysLocked()
}

func (m *Model) keysLocked() []Key {
	var ks []Key
	for k := range m.holder {
		ks = append(ks, k)
	}
	slices.SortFunc(ks, func(a, b Key) int { return strings.Compare(a.String(), b.String()) })
	return ks
}

// Hold makes a call of Hold (or TryHold) at the model's now and returns it.
func (m *Model) Hold(r Request) *Call {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := &Call{ID: len(m.calls), Key: r.Key, Try: r.Try, Obey: r.Obey, FnErr: r.FnErr,
		MaxHold: r.MaxHold, Called: m.now, WaitAt: Never, HoldAt: Never}
	m.calls = append(m.calls, c)
	switch {
	case r.InvalidKey, !r.Try && (r.Wait < 0 || r.MaxHold < 0):
		m.endLocked(c, Outcome{Res: Invalid})
	case r.PreCanceled:
		c.CallerCanceled = true
		m.endLocked(c, Outcome{Res: Canceled})
	case m.closed:
		m.endLocked(c, Outcome{Res: Closed})
	case m.holder[r.Key] == nil:
		m.grantLocked(c)
	case r.Try:
		m.endLocked(c, Outcome{Res: NotAcquired})
	case r.Wait == 0:
		m.endLocked(c, Outcome{Res: InUse})
	case len(m.line[r.Key]) >= m.limit:
		m.endLocked(c, Outcome{Res: Limit})
	default:
		c.Phase, c.Waited = Waiting, true
		c.WaitAt = m.fire(m.now, r.Wait)
		m.line[r.Key] = append(m.line[r.Key], c)
	}
	return c
}

// Release ends the function of call id as how says. A holder's key goes to
// the head of its line.
func (m *Model) Release(id int, how How) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.releaseLocked(m.calls[id], how)
}

func (m *Model) releaseLocked(c *Call, how How) {
	out := Outcome{Res: [...]Res{OK, Panicked, Goexited}[how]}
	switch c.Phase {
	case Holding:
		if how == Return && c.FnErr {
			out.Res = FnErr
		}
		m.endLocked(c, out)
		m.passLocked(c.Key)
	case Revoked:
		if how == Return {
			out = Outcome{Res: Lost, Wrap: WrapNone}
			if c.FnErr {
				out.Wrap = WrapFnErr
			}
		}
		m.endLocked(c, out)
	}
}

// Cancel ends the caller's context of call id: a waiter leaves the line; an
// obedient function returns (a holder's key goes on); a stubborn one keeps
// the key.
func (m *Model) Cancel(id int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.cancelLocked(m.calls[id])
}

func (m *Model) cancelLocked(c *Call) {
	if c.Phase == Done {
		return
	}
	c.CallerCanceled = true
	switch {
	case c.Phase == Waiting:
		m.leaveLineLocked(c)
		m.endLocked(c, Outcome{Res: Canceled})
	case c.Phase == Holding && c.Obey:
		m.endLocked(c, Outcome{Res: FnCanceled})
		m.passLocked(c.Key)
	}
}

// Close closes the model store: every waiter ends Closed; every holder loses
// its lease (an obedient one returns at once).
func (m *Model) Close() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return
	}
	m.closed = true
	for _, k := range m.keysLocked() {
		for _, w := range m.line[k] {
			w.WaitAt = Never
			m.endLocked(w, Outcome{Res: Closed})
		}
		m.revokeLocked(m.holder[k], "closed")
		delete(m.line, k)
		delete(m.holder, k)
	}
}

// Nested records what Hold and TryHold of the same key answer when called
// from inside the function of call id, if it runs.
func (m *Model) Nested(id int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := m.calls[id]
	if c.Phase != Holding && c.Phase != Revoked {
		return
	}
	c.NestedAsked = true
	if c.FnCtxDone() {
		c.Nested = [2]Res{Canceled, Canceled}
	} else {
		c.Nested = [2]Res{Invalid, NotAcquired}
	}
}

// RaceCancel is Cancel(w) racing with the release of the holder of w's key,
// h, w being the head of the line: either w left the line first and the key
// went on behind it, or w was given the key and then saw its context ended.
func (m *Model) RaceCancel(w, h int, r Resolver) {
	m.mu.Lock()
	defer m.mu.Unlock()
	cw, ch := m.calls[w], m.calls[h]
	if r == nil || !r.Ran(cw) {
		m.cancelLocked(cw)
		m.releaseLocked(ch, Return)
		return
	}
	m.releaseLocked(ch, Return) // grants cw, the head
	m.cancelLocked(cw)
}

// RaceTarget returns the holder to release in a race with cancelling w, or
// -1 when w is not the head of a held key's line (then there is no race).
func (m *Model) RaceTarget(w int) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := m.calls[w]
	l := m.line[c.Key]
	if c.Phase != Waiting || len(l) == 0 || l[0] != c {
		return -1
	}
	return m.holder[c.Key].ID
}

// revokeLocked takes the key from its holder c (without handing it on): an
// obedient fn returns at once, a stubborn one runs on.
func (m *Model) revokeLocked(c *Call, reason string) {
	c.HoldAt, c.Reason = Never, reason
	if c.Obey {
		m.endLocked(c, Outcome{Res: Lost, Wrap: WrapCtx})
		return
	}
	c.Phase = Revoked
}

// passLocked hands k on to the head of its line, or frees it.
func (m *Model) passLocked(k Key) {
	line := m.line[k]
	if len(line) == 0 {
		delete(m.holder, k)
		delete(m.line, k)
		return
	}
	w := line[0]
	m.leaveLineLocked(w)
	m.giveLocked(k, w)
}

func (m *Model) grantLocked(c *Call) { m.giveLocked(c.Key, c) }

// giveLocked makes c the holder of k at now, with the next fence.
func (m *Model) giveLocked(k Key, c *Call) {
	m.fence[k]++
	c.Phase, c.Fence, c.Granted = Holding, m.fence[k], m.now
	c.WaitAt, c.HoldAt = Never, Never
	if c.MaxHold > 0 {
		c.HoldAt = m.fire(m.now, c.MaxHold)
	}
	m.holder[k] = c
}

func (m *Model) timeoutLocked(w *Call) {
	m.leaveLineLocked(w)
	m.endLocked(w, Outcome{Res: InUse})
}

func (m *Model) leaveLineLocked(w *Call) {
	l := m.line[w.Key]
	i := slices.Index(l, w)
	if i < 0 {
		panic("model: leaving a line it is not in")
	}
	m.line[w.Key] = slices.Delete(l, i, i+1)
	w.WaitAt = Never
}

func (m *Model) endLocked(c *Call, out Outcome) {
	c.Phase, c.Out, c.Ended = Done, out, m.now
	c.WaitAt, c.HoldAt = Never, Never
}
