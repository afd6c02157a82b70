package locks

import (
	"context"
	"time"

	"github.com/holdline/locks/lease"
	"github.com/holdline/locks/shard"
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
// reused, so a pointer to it identifies that call for good: a wake-up meant
// for an earlier call can never reach a later one. It is also what the
// call's function gets: its context, and its Lease.
type holder struct {
	lease.Context // fn's context; its Lease is fn's lease

	shard *shard.Shard[*holder]
	entry *shard.Entry[*holder] // the key's entry while waiting or holding; guarded by shard
	slot  *slot                 // set while the hold waits or has a maxHold; guarded by shard until release, then the holder's own
	state state                 // guarded by shard
	lost  loss                  // why the lease was revoked; guarded by shard
}

// slot is the part of a hold that only a waiter or a holder with a maxHold
// needs: its place in the key's line, its pending deadline, and its
// wake-up. Slots are internal (no user code ever sees one), so unlike
// holders they are pooled: a hold that waits or has a maxHold allocates
// nothing for it in the steady state. Guarded by the holder's shard.
type slot struct {
	wait    waitq.Element[*holder] // place in the key's line
	due     waitq.Element[*holder] // place in a deadline list
	at      time.Duration          // when the pending deadline is due, on the timer clock
	list    *deadlineList          // the list due stands in; nil when no deadline is pending
	sd      *shardDeadlines        // the deadline lists of the holder's shard
	ready   chan state             // a waiter's wake-up: one send of its settled state
	maxHold time.Duration          // the waiter's maxHold, armed at its grant
}

// takeSlot gives g a slot from s's pool, if it has none.
func (s *Store) takeSlot(g *holder, sd *shardDeadlines) *slot {
	if g.slot == nil {
		sl := s.slots.Get().(*slot)
		sl.wait.Value, sl.due.Value, sl.sd = g, g, sd
		g.slot = sl
	}
	return g.slot
}

// putSlot returns g's slot to the pool, once nothing can reach it any
// more: it is out of the line and of every deadline list, and its wake-up
// was received.
func (s *Store) putSlot(g *holder) {
	if sl := g.slot; sl != nil {
		g.slot = nil
		sl.wait.Value, sl.due.Value, sl.sd = nil, nil, nil
		s.slots.Put(sl)
	}
}

// hold is Hold: check, grant or wait, run.
func (l *Lock) hold(ctx context.Context, key any, opts []Option, fn HoldFunc) error {
	text, st, err := l.check(ctx, key, opts, fn)
	if err != nil {
		return err
	}
	name := l.state.name
	switch lease.Check(ctx, name, text) {
	case lease.Transaction:
		return newError(Invalid, name, text, "held inside a transaction")
	case lease.Nested:
		return newError(Invalid, name, text, "held inside a hold of the same key")
	}
	g, err := l.acquire(ctx, text, st)
	if err != nil {
		return err
	}
	return l.store.run(g, fn)
}

// check validates a hold's arguments and returns the key's text and the
// hold's settings, or the Invalid (or Canceled) error that ends it at once.
func (l *Lock) check(ctx context.Context, key any, opts []Option, fn HoldFunc) (string, settings, error) {
	name := l.state.name
	text, why := keyText(key)
	if why != "" {
		return "", settings{}, newError(Invalid, name, "", why)
	}
	if fn == nil {
		return "", settings{}, newError(Invalid, name, text, "the function to run is nil")
	}
	st := l.opts
	if len(opts) > 0 {
		if why := st.apply(opts, true); why != "" {
			return "", settings{}, newError(Invalid, name, text, why)
		}
	}
	if err := ctx.Err(); err != nil {
		return "", settings{}, canceledError(name, text, err)
	}
	return text, st, nil
}

// acquire grants key text to a new holder at once if it is free, or puts
// it in the key's line and waits until it is granted (nil error), its wait
// passes, its ctx ends, or the store closes.
//
// The clock is read once: before the shard's lock for a hold without a
// maxHold (a wait counts from the call, and a free key's Granted may
// precede the grant by the lock's wait), and under it when a maxHold is
// to count from the grant itself, never from before it.
func (l *Lock) acquire(ctx context.Context, text string, st settings) (*holder, error) {
	s, name := l.store, l.state.name
	h := shard.Hash(l.state.hash, text)
	i := s.table.Index(h)
	sh, sd := s.table.At(i), &s.deadlines[i]
	g := newHolder(ctx, sh, name, text)
	var now time.Time
	var at time.Duration
	if st.maxHold == 0 {
		now, at = s.now()
	}

	sh.Lock()
	if s.closed.Load() {
		sh.Unlock()
		return nil, newError(Closed, name, text, "the store is closed")
	}
	e := sh.LookupLocked(h, name, text)
	if e == nil {
		if st.maxHold > 0 {
			now, at = s.now()
		}
		e = sh.InsertLocked(h, name, text)
		s.grantLocked(e, g, sd, st.maxHold, now, at)
		sh.Unlock()
		return g, nil
	}
	switch {
	case st.wait == 0:
		sh.Unlock()
		return nil, newError(InUse, name, text, "held past the hold's wait")
	case e.Line.Len() >= MaxWaiters:
		sh.Counts.Refused++
		sh.Unlock()
		return nil, newError(Limit, name, text, "the line of waiters is full")
	}
	if st.maxHold > 0 {
		_, at = s.now()
	}
	s.joinLocked(e, g, sd, st, at)
	sh.Unlock()
	if err := s.await(ctx, g); err != nil {
		return nil, err
	}
	return g, nil
}

// tryHold is TryHold: it runs fn if the key is free, and never waits.
func (l *Lock) tryHold(ctx context.Context, key any, fn HoldFunc) (bool, error) {
	text, st, err := l.check(ctx, key, nil, fn)
	if err != nil {
		return false, err
	}
	s, name := l.store, l.state.name
	h := shard.Hash(l.state.hash, text)
	i := s.table.Index(h)
	sh := s.table.At(i)
	sh.Lock()
	if s.closed.Load() {
		sh.Unlock()
		return false, newError(Closed, name, text, "the store is closed")
	}
	if sh.LookupLocked(h, name, text) != nil {
		sh.Unlock()
		return false, nil
	}
	g := newHolder(ctx, sh, name, text) // only for a free key
	now, at := s.now()
	e := sh.InsertLocked(h, name, text)
	s.grantLocked(e, g, &s.deadlines[i], st.maxHold, now, at)
	sh.Unlock()
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
func (s *Store) joinLocked(e *shard.Entry[*holder], g *holder, sd *shardDeadlines, st settings, at time.Duration) {
	g.state, g.entry = waiting, e
	g.shard.Counts.Waits++
	sl := s.takeSlot(g, sd)
	sl.maxHold = st.maxHold
	if sl.ready == nil { // a slot that only ever had a maxHold has none yet
		sl.ready = make(chan state, 1)
	}
	e.Line.PushBack(&sl.wait)
	s.armLocked(g, forWait, st.wait, after(at, st.wait))
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
		if settled == holding && ctx.Err() != nil {
			// Granted, but ctx ended too, perhaps first, while the select
			// took the grant: the context's end wins, as in x/sync's
			// semaphore (go.dev/issue/63615). The key goes on.
			s.giveBack(g)
			return canceledError(g.Lease.Lock, g.Lease.Key, ctx.Err())
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
		disarmLocked(g)
		g.state, g.entry = left, nil
		sh.Counts.Left++
		sh.Unlock()
		s.putSlot(g)
		return canceledError(g.Lease.Lock, g.Lease.Key, ctx.Err())
	}
	sh.Unlock()
	settled := <-sl.ready
	if settled == holding {
		s.giveBack(g)
		return canceledError(g.Lease.Lock, g.Lease.Key, ctx.Err())
	}
	return s.settled(g, settled)
}

// settled returns what a waiter woken in the state st answers: nil when it
// holds the key.
func (s *Store) settled(g *holder, st state) error {
	switch st {
	case holding:
		if g.Lease.Granted.IsZero() {
			// Handed off without a maxHold: the grant left the clock to
			// the woken waiter, to keep it out of the shard's lock. This
			// instant is after the grant and before fn runs.
			g.Lease.Granted = time.Now()
		}
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
// gives g its fence and grant time and arms its maxHold. A zero now
// leaves Granted for the woken waiter to read (see settled); it is only
// zero without a maxHold.
func (s *Store) grantLocked(e *shard.Entry[*holder], g *holder, sd *shardDeadlines, maxHold time.Duration, now time.Time, at time.Duration) {
	sh := g.shard
	g.state, g.entry = holding, e
	e.Holder = g
	sh.Busy++
	sh.Counts.Grants++
	g.Lease.Fence = sh.Fences.Next()
	g.Lease.Granted = now
	if maxHold > 0 {
		g.Lease.Deadline = now.Add(maxHold)
		s.takeSlot(g, sd)
		s.armLocked(g, forMaxHold, maxHold, after(at, maxHold))
	}
}

// passLocked gives e to the head of its line and returns the new holder's
// wake-up, on which to send holding once sh is unlocked; if nobody waits,
// it frees e and returns nil. The key is never free while someone is in
// line, so no newcomer can take it in between (strict FIFO, no barging).
func (s *Store) passLocked(sh *shard.Shard[*holder], e *shard.Entry[*holder]) chan<- state {
	el := e.Line.PopFront()
	if el == nil {
		e.Holder = nil
		sh.DeleteLocked(e)
		return nil
	}
	next := el.Value
	sl := next.slot
	disarmLocked(next) // its wait
	var now time.Time
	var at time.Duration
	if sl.maxHold > 0 {
		now, at = s.now()
	}
	s.grantLocked(e, next, sl.sd, sl.maxHold, now, at)
	return sl.ready
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
		disarmLocked(g) // its maxHold
		wake = s.passLocked(sh, g.entry)
		g.entry = nil
	}
	lost := g.lost
	drained := sh.Busy == 0 && s.closed.Load()
	sh.Unlock()
	if wake != nil {
		wake <- holding
	}
	s.putSlot(g) // out of every line and list now
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

// giveBack lets go a key that g was granted as its context ended, before
// its function ran: the key goes on as at a release, and the hold counts
// as a waiter that left, not as a grant.
func (s *Store) giveBack(g *holder) {
	sh := g.shard
	sh.Lock()
	sh.Counts.Grants--
	sh.Counts.Left++
	sh.Unlock()
	s.release(g, nil)
}
