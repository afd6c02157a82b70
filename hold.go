package locks

import (
	"context"
	"time"

	"github.com/holdline/locks/lease"
	"github.com/holdline/locks/shard"
	"github.com/holdline/locks/timerwheel"
	"github.com/holdline/locks/waitq"
)

// state is where a holder stands. Guarded by its shard's mutex.
type state uint8

const (
	waiting  state = iota // in the key's line
	holding               // the key's holder
	timedOut              // left the line when its wait passed
	left                  // left the line when its context ended
	shut                  // left the line when the store closed
	revoked               // lost the key (maxHold, store closed) while fn ran
	released              // let the key go
)

// holder is one call of Hold: first a waiter in the key's line (if the key
// was held), then the key's holder. It is allocated once per call and never
// reused, so a pointer to it identifies that call for good: a timer or a
// wake-up meant for an earlier call can never reach a later one. It is also
// what the call's function gets: its context, and its Lease.
type holder struct {
	lease.Context // fn's context; its Lease is fn's lease

	shard *shard.Shard[*holder]
	entry *shard.Entry[*holder] // the key's entry while waiting or holding; guarded by shard
	slot  *slot                 // set while the hold waits or has a maxHold armed; guarded by shard until release, then g's own
	state state                 // guarded by shard
	lost  loss                  // why the lease was revoked; guarded by shard
	armed purpose               // what the slot's timer is armed for, 0 once disarmed: written under the timers' mutex, read there or by g's own goroutine
}

// slot is the part of a hold that only a waiter or an armed maxHold needs:
// its place in the key's line, its timer, and its wake-up. Slots are
// internal (no user code ever sees one), so unlike holders they are pooled:
// a hold that waits or arms a maxHold allocates nothing for it in the
// steady state.
type slot struct {
	wait    waitq.Element[*holder]    // place in the key's line; guarded by the shard
	timer   timerwheel.Timer[*holder] // the wait deadline, then the maxHold; guarded by the store's timers
	ready   chan state                // a waiter's wake-up: one send of its settled state
	maxHold time.Duration             // the waiter's maxHold, armed at its grant
}

// takeSlot gives g a slot from s's pool, if it has none.
func (s *Store) takeSlot(g *holder) *slot {
	if g.slot == nil {
		g.slot = s.slots.Get().(*slot)
		g.slot.wait.Value, g.slot.timer.Value = g, g
	}
	return g.slot
}

// putSlot returns g's slot to the pool, once nothing can reach it any
// more: it is out of the line, its timer is disarmed or fired, and its
// wake-up was received.
func (s *Store) putSlot(g *holder) {
	if sl := g.slot; sl != nil {
		g.slot = nil
		sl.wait.Value, sl.timer.Value = nil, nil
		s.slots.Put(sl)
	}
}

// hold is Hold and TryHold: try never waits and skips the checks of
// nesting and transactions.
func (l *Lock) hold(ctx context.Context, key any, opts []Option, try bool, fn HoldFunc) (bool, error) {
	name := l.state.name
	text, why := keyText(key)
	if why != "" {
		return false, newError(Invalid, name, "", why)
	}
	if fn == nil {
		return false, newError(Invalid, name, text, "the function to run is nil")
	}
	st := l.opts
	if len(opts) > 0 {
		if why := st.apply(opts, true); why != "" {
			return false, newError(Invalid, name, text, why)
		}
	}
	if err := ctx.Err(); err != nil {
		return false, canceledError(name, text, err)
	}
	if !try {
		switch lease.Check(ctx, name, text) {
		case lease.Transaction:
			return false, newError(Invalid, name, text, "held inside a transaction")
		case lease.Nested:
			return false, newError(Invalid, name, text, "held inside a hold of the same key")
		}
	}
	s := l.store
	h := shard.Hash(l.state.hash, text)
	sh := s.table.Shard(h)
	// The clock is read once: before the lock for a plain Hold (the call's
	// instant, from which a wait counts); under it when a maxHold is to
	// count from the grant itself, never from before it; and by TryHold
	// only for a free key, which is also the only one it allocates for.
	var g *holder
	var now time.Time
	var at time.Duration
	timed := false
	if !try {
		g = newHolder(ctx, sh, name, text)
		if st.maxHold == 0 {
			now, at = s.now()
			timed = true
		}
	}

	sh.Lock()
	if s.closed.Load() {
		sh.Unlock()
		return false, newError(Closed, name, text, "the store is closed")
	}
	e := sh.LookupLocked(h, name, text)
	if e == nil {
		if g == nil {
			g = newHolder(ctx, sh, name, text)
		}
		if !timed {
			now, at = s.now()
		}
		e = sh.InsertLocked(h, name, text)
		s.grantLocked(e, g, st.maxHold, now, at)
		sh.Unlock()
	} else {
		switch {
		case try:
			sh.Unlock()
			return false, nil
		case st.wait == 0:
			sh.Unlock()
			return false, newError(InUse, name, text, "held past the hold's wait")
		case e.Line.Len() >= MaxWaiters:
			sh.Counts.Refused++
			sh.Unlock()
			return false, newError(Limit, name, text, "the line of waiters is full")
		}
		if !timed {
			_, at = s.now()
		}
		s.joinLocked(e, g, st, at)
		sh.Unlock()
		if err := s.await(ctx, g); err != nil {
			return false, err
		}
	}
	return true, s.run(g, fn)
}

// newHolder returns the record of one call of Hold on sh's key text of
// lock name, whose function's context derives from ctx.
func newHolder(ctx context.Context, sh *shard.Shard[*holder], name, text string) *holder {
	g := &holder{shard: sh}
	g.Bind(ctx)
	g.Lease.Lock, g.Lease.Key = name, text
	return g
}

// joinLocked puts g at the back of e's line, its wait counted from the
// call's instant at (on the timer clock).
func (s *Store) joinLocked(e *shard.Entry[*holder], g *holder, st settings, at time.Duration) {
	g.state, g.entry = waiting, e
	g.shard.Counts.Waits++
	sl := s.takeSlot(g)
	sl.maxHold = st.maxHold
	if sl.ready == nil { // a slot that only ever armed a maxHold has none yet
		sl.ready = make(chan state, 1)
	}
	e.Line.PushBack(&sl.wait)
	s.timers.schedule(g, forWait, after(at, st.wait))
}

// run calls fn holding the key, and lets the key go however fn ends: by
// returning, panicking or calling runtime.Goexit.
func (s *Store) run(g *holder, fn HoldFunc) (err error) {
	defer func() { err = s.release(g, err) }()
	return fn(&g.Context, &g.Context.Lease)
}

// await parks a waiter until its state is settled: granted, timed out, or
// shut by Close; or until ctx ends, when it leaves the line. The settled
// state comes over the wake-up channel: g.state itself may change again (a
// revocation) while this goroutine does not hold the shard's mutex.
func (s *Store) await(ctx context.Context, g *holder) error {
	sl := g.slot
	var settled state
	if done := ctx.Done(); done == nil { // a context that never ends
		settled = <-sl.ready
	} else {
		select {
		case settled = <-sl.ready:
		case <-done:
			return s.leave(ctx, g)
		}
	}
	return s.settled(g, settled)
}

// leave takes a waiter whose ctx ended out of the line. If it was settled
// meanwhile, its wake-up is on its way: a grant is passed on to the next in
// line, never lost; a timeout or a close is reported as such.
func (s *Store) leave(ctx context.Context, g *holder) error {
	sh, sl := g.shard, g.slot
	sh.Lock()
	if g.state == waiting {
		g.entry.Line.Remove(&sl.wait)
		g.state, g.entry = left, nil
		sh.Counts.Left++
		s.timers.cancel(g)
		s.putSlot(g)
		sh.Unlock()
		return canceledError(g.Lease.Lock, g.Lease.Key, ctx.Err())
	}
	sh.Unlock()
	settled := <-sl.ready
	if settled == holding {
		s.release(g, nil)
		return canceledError(g.Lease.Lock, g.Lease.Key, ctx.Err())
	}
	return s.settled(g, settled)
}

// settled returns what a waiter woken in the state st answers: nil when it
// holds the key (its wait deadline disarmed, unless the grant already
// turned it into the maxHold).
func (s *Store) settled(g *holder, st state) error {
	switch st {
	case holding:
		s.timers.disarm(g, forWait)
	case timedOut:
		s.putSlot(g)
		return newError(InUse, g.Lease.Lock, g.Lease.Key, "held past the hold's wait")
	case shut:
		s.putSlot(g)
		return newError(Closed, g.Lease.Lock, g.Lease.Key, "the store is closed")
	}
	return nil
}

// grantLocked makes g the holder of e at now (at on the timer clock): it
// gives g its fence and grant time and arms its maxHold (or disarms its
// wait deadline).
func (s *Store) grantLocked(e *shard.Entry[*holder], g *holder, maxHold time.Duration, now time.Time, at time.Duration) {
	sh := g.shard
	g.state, g.entry = holding, e
	e.Holder = g
	sh.Busy++
	sh.Counts.Grants++
	g.Lease.Fence = sh.Fences.Next()
	g.Lease.Granted = now
	if maxHold > 0 {
		g.Lease.Deadline = now.Add(maxHold)
		s.takeSlot(g)
		s.timers.schedule(g, forMaxHold, after(at, maxHold)) // moves a waiter's wait deadline
	}
	// Otherwise the woken waiter disarms its own wait deadline, outside
	// this lock; should it fire first, expire finds g no longer waiting.
}

// passLocked gives e to the head of its line and returns the new holder's
// wake-up, on which to send holding once sh is unlocked; if nobody waits,
// it frees e and returns nil. The key is never free while someone is in line, so no newcomer can
// take it in between (strict FIFO, no barging).
func (s *Store) passLocked(sh *shard.Shard[*holder], e *shard.Entry[*holder]) chan<- state {
	el := e.Line.PopFront()
	if el == nil {
		e.Holder = nil
		sh.DeleteLocked(e)
		return nil
	}
	next := el.Value
	now, at := s.now()
	s.grantLocked(e, next, next.slot.maxHold, now, at)
	return next.slot.ready
}

// release lets g's key go once fn has returned, handing it to the next in
// line, and turns fnErr into what Hold returns.
func (s *Store) release(g *holder, fnErr error) error {
	sh := g.shard
	var wake chan<- state
	sh.Lock()
	sh.Busy--
	if g.state == holding {
		g.state = released
		wake = s.passLocked(sh, g.entry)
		g.entry = nil
	}
	lost := g.lost
	drained := sh.Busy == 0 && s.closed.Load()
	sh.Unlock()
	if wake != nil {
		wake <- holding
	}
	if g.slot != nil {
		// Released or revoked, g is out of every line, and a timer of
		// its that fires now finds nothing to act on: disarm and pool the
		// slot without the shard's lock. (A wait deadline is usually
		// disarmed already, by g itself when it woke.)
		if g.armed != 0 {
			s.timers.cancel(g)
		}
		s.putSlot(g)
	}
	g.End()
	if drained {
		s.signalDrained()
	}
	if lost != notLost {
		err := lostError(g.Lease.Lock, g.Lease.Key, lost)
		err.cause = fnErr
		return err
	}
	return fnErr
}
