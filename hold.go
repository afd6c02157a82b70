package locks

import (
	"context"
	"runtime"
	"time"

	"github.com/holdline/locks/shard"
	"github.com/holdline/locks/waitq"
)

// The store's instances of the shard package's table.
type (
	keyTable = shard.Table[*holdContext, *ticket]
	keyShard = shard.Shard[*holdContext, *ticket]
	keyEntry = shard.Entry[*holdContext, *ticket]
)

// state is where a waiter stands. Guarded by its shard's mutex.
type state uint8

const (
	waiting   state = iota // in the key's line
	holding                // granted the key
	timedOut               // left the line when its wait passed
	left                   // left the line when its context ended
	shut                   // left the line when the store closed
	expired                // a session's waiter that lapsed at its ttl
	dismissed              // a session's waiter whose session closed
)

// ticket is a waiter's place in its key's line and, while it waits, its
// wait's deadline, standing in its shard's deadline list for waits of
// that duration (a maxHold is a slot of a list's queue instead, dueHold).
// It is part of the waiter record every hold that waited, and every hold
// of a session, has. Tickets are internal (no user code ever sees one),
// so unlike the hold's context they are reused: a waiter's goes back to
// its shard with its record, and what may still point at a record then (a
// cycle check's edges, a ttl group's members being acted on) keeps the
// hold's context beside it to tell a reused one. Guarded by the shard's
// mutex.
type ticket struct {
	next, prev *ticket       // in list
	list       *deadlineList // nil when no deadline is pending
	at         time.Duration // when the pending deadline is due, on the timer clock
	entry      *keyEntry     // the key the hold waits for or holds
	w          *waiter       // the waiter whose ticket this is
}

// waiter is the record of a hold that stood in a key's line: its place in
// the line, its ticket (its wait), its maxHold's list once granted, and
// its wake-up. It keeps it until it lets the key go, or leaves the line,
// and gives it back to its shard under the shard's mutex.
type waiter struct {
	ticket
	c       *holdContext
	line    waitq.Element[*ticket] // place in the key's line; Value is &ticket
	ready   chan state             // one send of the settled state
	state   state
	maxHold time.Duration // armed at its grant
	due     *deadlineList // once granted with a maxHold: its list, which counts it until it lets go

	// What a waiter whose wait passed learns of the holder, for its error.
	heldFor     time.Duration
	holderFence uint64

	sd    *shardLocal
	since time.Duration // when it joined the line, on the timer clock

	// A session's hold is a member of its session's ttl group from the
	// call to the release. sess is guarded by the shard's mutex (set in
	// Session.joinLocked, which holds both); the rest by the session's
	// (see session.go).
	sess    *Session
	grp     *ttlGroup              // nil while not in the group
	member  waitq.Element[*waiter] // its place among the group's members
	start   time.Duration          // when its ttl starts counting: the call, then the grant
	lapseAt time.Duration          // once lapsed: when
}

// keepWaiters is how many given-back waiters a shard keeps for reuse:
// enough for the waiters of a hot key or two (at most 255: keyShard.NKept
// is a byte).
const keepWaiters = 32

// takeWaiterLocked returns a waiter of sd's for c's hold of e.
func (sd *shardLocal) takeWaiterLocked(c *holdContext, e *keyEntry) *waiter {
	var w *waiter
	if t := sd.sh.Kept; t != nil {
		sd.sh.Kept, t.next = t.next, nil
		sd.sh.NKept--
		w = t.w
	} else {
		w = &waiter{ready: make(chan state, 1), sd: sd}
		w.w, w.line.Value, w.member.Value = w, &w.ticket, w
	}
	w.c, w.entry = c, e
	return w
}

// putLocked gives h's waiter back to sd, if it has one, once it is out of
// every line and list and its wake-up, if one was sent, was received.
// Inlined: a hold that did not wait gives nothing back, and one that
// waited gives one word, not the hold's five, to a call.
func (sd *shardLocal) putLocked(h hold) {
	if h.w != nil {
		sd.putWaiterLocked(h.w)
	}
}

// putWaiterLocked is putLocked for a hold that waited: it gives w back.
func (sd *shardLocal) putWaiterLocked(w *waiter) {
	if w.sess != nil {
		w.sess.leaveLocked(w)
	}
	w.c, w.entry, w.maxHold, w.due, w.sess = nil, nil, 0, nil, nil
	// Kept in the shard's stack (keyShard.Kept), by its ticket, linked
	// through the ticket's next, which is free while the ticket is out of
	// every deadline list.
	if sh := sd.sh; sh.NKept < keepWaiters {
		w.ticket.next, sh.Kept = sh.Kept, &w.ticket
		sh.NKept++
	}
}

// hold is what a call of Hold keeps on its goroutine from the grant to the
// release: the key's entry and shard, the function's context, and its
// maxHold's list or its waiter record if it has one.
type hold struct {
	c   *holdContext
	sd  *shardLocal
	e   *keyEntry
	due *deadlineList // its maxHold's list, granted without a wait; for a waiter, w.due
	w   *waiter       // nil unless the hold waited, or is a session's
}

// hold is Hold: check, grant or wait, run.
func (l *Lock) hold(ctx context.Context, key any, opts []Option, fn HoldFunc) (err error) {
	// Most holds: a string key, a function, a live context, checked here
	// and run with the lock's own settings, read in place (a Lock's never
	// change) or, with options, copied once and changed by them, rather
	// than copied out of check and back; the rest go through check, which
	// names what is wrong. 29 instructions fewer a hold at a hot key
	// (bench/MEASUREMENTS.md, "Instructions").
	set, own := &l.opts, settings{}
	text, ok := key.(string)
	if !ok || len(text) == 0 || len(text) > MaxKeyLen || fn == nil || ctx == nil || ctx.Err() != nil {
		if text, own, err = l.check(ctx, key, opts, fn); err != nil {
			return err
		}
		set = &own
	} else if len(opts) == 1 && opts[0].kind == optMaxHold && opts[0].d >= 0 {
		// One MaxHold, the option most holds given one pass: no loop.
		own, set = l.opts, &own
		own.maxHold = opts[0].d
	} else if len(opts) > 0 { // the only checks left
		own, set = l.opts, &own
		if i := own.applyValid(opts, true); i >= 0 {
			return newError(Invalid, l.state.name, text, badOption(opts[i], true))
		}
	}
	name := l.state.name
	if v := ctx.Value(markKey{}); v != nil { // most holds are made outside any other
		if set != &own {
			own, set = *set, &own
		}
		var conflict conflict
		conflict, set.inside = enclosingMarks(v, name, text)
		switch conflict {
		case inTransaction:
			return newError(Invalid, name, text, "held inside a transaction")
		case nested:
			return newError(Invalid, name, text, "held inside a hold of the same key")
		}
	}
	if p := l.store.profileHold(); p != nil {
		defer unprofile(p)
	}
	var h hold
	// The key's hash before the function's context: on a walk over many
	// keys the key's bytes are a cache miss, which the context's
	// allocation then overlaps instead of the shard's lock waiting on it.
	// A maxHold 10 % cheaper at GOMAXPROCS 1, a free key 6 %
	// (bench/MEASUREMENTS.md, "maxHold").
	hash := shard.Hash(l.state.hash, text)
	joined, err := l.enter(&h, hash, newHoldContext(ctx, name, text), set, nil)
	if joined {
		// The wait is made in this frame, not in a function of its own:
		// a waiter woken returns through every frame above its park, and
		// after the switch of goroutines each of those returns is
		// mispredicted. Two frames fewer (acquire and await) made a hot
		// key's hold 3-4 % cheaper at GOMAXPROCS 1 and 5-8 % at 2 (go run
		// ./bench -run hotkey, five alternated runs); one fewer, half that.
		if set.inside {
			err = l.store.awaitInside(ctx, h)
		} else if done := ctx.Done(); done == nil {
			if got := <-h.w.ready; got != holding || l.store.times {
				err = l.store.settled(h, got)
			}
		} else {
			select {
			case got := <-h.w.ready:
				err = l.store.settledOrEnded(ctx, h, got)
			case <-done:
				err = l.store.leave(ctx, h)
			}
		}
	}
	if err != nil {
		return err
	}
	// run, in this frame: a frame fewer between a waiter's park and its
	// function. The deferred release keeps l, and so its Store, open until
	// the hold is over.
	defer func() {
		if lost := l.store.letGo(h, true); lost != notLost {
			err = lostRelease(h.c, lost, err)
		}
	}()
	return fn(h.c, &h.c.lease)
}

// check validates a hold's arguments and returns the key's text and the
// hold's settings, or the Invalid (or Canceled) error that ends it at once.
// Hold's own frame repeats its conditions for a string key (see hold), so
// that most holds make no call to pass them: a check added here goes
// there too.
func (l *Lock) check(ctx context.Context, key any, opts []Option, fn HoldFunc) (string, settings, error) {
	name := l.state.name
	text, ok := key.(string) // most keys: no call to make
	if !ok || len(text) == 0 || len(text) > MaxKeyLen {
		var why string
		if text, why = keyText(key); why != "" {
			return "", settings{}, newError(Invalid, name, "", why)
		}
	}
	if fn == nil {
		return "", settings{}, newError(Invalid, name, text, "the function to run is nil")
	}
	set := l.opts
	if len(opts) > 0 {
		if why := set.apply(opts, true); why != "" {
			return "", settings{}, newError(Invalid, name, text, why)
		}
	}
	if ctx == nil {
		return "", settings{}, newError(Invalid, name, text, "the context is nil")
	}
	if ctx.Err() != nil {
		return "", settings{}, canceledError(name, text, ctx)
	}
	return text, set, nil
}

// acquire grants key text to a new hold at once if it is free, or puts it
// in the key's line and waits until it is granted (nil error), its wait
// passes, its ctx ends, or the store closes. A hold of a session (sess not
// nil) always has a waiter record, its membership of the session's ttl
// group, and its context derives from ctx's values only.
func (l *Lock) acquire(ctx context.Context, text string, set settings, sess *Session) (hold, error) {
	parent := ctx
	if sess != nil {
		parent = sessionParent{context.WithoutCancel(ctx)} // the grant outlives the call
	}
	var h hold
	hash := shard.Hash(l.state.hash, text) // before the context, as in hold
	joined, err := l.enter(&h, hash, newHoldContext(parent, l.state.name, text), &set, sess)
	if joined {
		if set.inside {
			err = l.store.awaitInside(ctx, h)
		} else {
			err = l.store.await(ctx, h)
		}
	}
	if err != nil {
		return hold{}, err
	}
	return h, nil
}

// enter is acquire without the wait, for c, the context of a new hold of
// key c.lease.Key, whose hash (shard.Hash) is hash: it grants the key at
// once if it is free, or puts the hold in the key's line and reports
// joined, and then the caller waits for h's wake-up (await). It fills h in
// either case; on an error, it leaves h as it was. The caller hashes the
// key, then makes c (see hold for why in that order), and h lives in the
// caller's frame, to keep the frames down to the line small: a
// goroutine's first hold runs on its first stack (2 KiB, or the runtime's
// average if larger), and growing that stack between the call and the
// line can cost the hold its place in a burst of holds
// (bench/MEASUREMENTS.md, "Order").
//
// The clock is read once. A plain hold reads it before the shard's lock:
// its wait counts from the call, and a free key's Granted may precede the
// grant by the lock's wait. A hold with a maxHold, or a session's, whose
// free key's maxHold or ttl counts from the grant itself, never from
// before it, reads it under the lock; if it waits instead, its wait
// counts from there, a little after the call. A waiter's maxHold counts
// from its handoff (passLocked).
//
// set is passed by pointer, here and to joinLocked, as four words fewer
// to copy and spill on every call (a hot key's hold about 1 % cheaper at
// GOMAXPROCS 1, six alternated runs); enter and joinLocked only read it.
func (l *Lock) enter(h *hold, hash uint64, c *holdContext, set *settings, sess *Session) (joined bool, err error) {
	s, name, text := l.store, l.state.name, c.lease.Key
	sd, sh := s.shardOf(hash)
	var at time.Duration
	fromGrant := set.maxHold > 0 || sess != nil
	if !fromGrant {
		at = s.since()
	}

	sh.Lock()
	if s.closed.Load() {
		sh.Unlock()
		return false, newError(Closed, name, text, "the store is closed")
	}
	if fromGrant {
		at = s.since()
	}
	e := sh.LookupLocked(hash, l.state.id, text)
	if e == nil {
		e = sh.InsertLocked(hash, l.state.id, text)
		if sess != nil {
			return false, s.grantSessionLocked(h, sd, e, c, sess, set, at)
		}
		sh.Running++
		due := s.grantLocked(sd, e, c, set.maxHold, at)
		sh.Unlock()
		h.c, h.sd, h.e, h.due = c, sd, e, due
		return false, nil
	}
	switch {
	case set.wait == 0:
		sh.Unlock()
		return false, newError(InUse, name, text, "held past the hold's wait")
	case e.Line.Len() >= MaxWaiters:
		sh.Counts.Limited++
		sh.Unlock()
		return false, newError(Limit, name, text, "the line of waiters is full")
	}
	w := s.joinLocked(sd, e, c, set, at)
	if sess != nil && !sess.joinLocked(w, set.ttl, at) {
		return false, s.unjoinLocked(sd, e, w)
	}
	sh.Unlock()
	h.c, h.sd, h.e, h.w = c, sd, e, w
	return true, nil
}

// shardOf returns the shard of the key whose hash is hash: the store's
// own state of it and the table's shard, whose sh they are. Both come from
// the shard's index, not the table's shard through sd.sh: the two cache
// lines are then fetched side by side, not one after the other (a maxHold
// on a walk over a million keys: 3 % less at GOMAXPROCS 2,
// bench/MEASUREMENTS.md).
func (s *store) shardOf(hash uint64) (*shardLocal, *keyShard) {
	i := s.table.Index(hash)
	return &s.local[i], s.table.At(i)
}

// grantSessionLocked is enter's grant of free key e to c, a hold of sess,
// at instant at on the timer clock, filling h: it unlocks the shard.
func (s *store) grantSessionLocked(h *hold, sd *shardLocal, e *keyEntry, c *holdContext, sess *Session, set *settings, at time.Duration) error {
	sh := sd.sh
	w := sd.takeWaiterLocked(c, e)
	w.state = holding
	if !sess.joinLocked(w, set.ttl, at) {
		sh.DeleteLocked(e)
		sd.putLocked(hold{w: w})
		sh.Unlock()
		return newError(Closed, c.lease.Lock, c.lease.Key, "the session is closed")
	}
	w.due = s.grantLocked(sd, e, c, set.maxHold, at)
	sh.Unlock()
	h.c, h.sd, h.e, h.w = c, sd, e, w
	return nil
}

// unjoinLocked takes w, a session's waiter whose session closed as it
// joined e's line, out again, and unlocks the shard.
func (s *store) unjoinLocked(sd *shardLocal, e *keyEntry, w *waiter) error {
	e.Line.Remove(&w.line)
	sd.sh.Waiting--
	disarmLocked(&w.ticket)
	c := w.c
	sd.putLocked(hold{w: w})
	sd.sh.Unlock()
	return newError(Closed, c.lease.Lock, c.lease.Key, "the session is closed")
}

// tryHold is TryHold: it runs fn if the key is free, and never waits.
func (l *Lock) tryHold(ctx context.Context, key any, fn HoldFunc, opts []Option) (bool, error) {
	text, set, err := l.check(ctx, key, opts, fn)
	if err != nil {
		return false, err
	}
	for _, o := range opts {
		if o.kind == optWait {
			return false, newError(Invalid, l.state.name, text, tryWaitWhy)
		}
	}
	s, name := l.store, l.state.name
	hash := shard.Hash(l.state.hash, text)
	sd, sh := s.shardOf(hash)
	sh.Lock()
	if s.closed.Load() {
		sh.Unlock()
		return false, newError(Closed, name, text, "the store is closed")
	}
	if sh.LookupLocked(hash, l.state.id, text) != nil {
		sh.Unlock()
		return false, nil
	}
	c := newHoldContext(ctx, name, text) // only for a free key
	at := s.since()
	e := sh.InsertLocked(hash, l.state.id, text)
	sh.Running++
	due := s.grantLocked(sd, e, c, set.maxHold, at)
	sh.Unlock()
	err = s.run(hold{c: c, sd: sd, e: e, due: due}, fn)
	runtime.KeepAlive(l)
	return true, err
}

// joinLocked puts a waiter for c at the back of e's line, its wait counted
// from the call's instant at (on the timer clock), and returns it.
func (s *store) joinLocked(sd *shardLocal, e *keyEntry, c *holdContext, set *settings, at time.Duration) *waiter {
	sd.sh.Counts.Waits++
	w := sd.takeWaiterLocked(c, e)
	w.state, w.maxHold, w.since = waiting, set.maxHold, at
	e.Line.PushBack(&w.line)
	sd.sh.Waiting++
	s.armLocked(sd, &w.ticket, forWait, set.wait, after(at, set.wait))
	return w
}

// run calls fn holding the key, and lets the key go however fn ends: by
// returning, panicking or calling runtime.Goexit.
func (s *store) run(h hold, fn HoldFunc) (err error) {
	// release, written out as in Hold: a call fewer.
	defer func() {
		if lost := s.letGo(h, true); lost != notLost {
			err = lostRelease(h.c, lost, err)
		}
	}()
	return fn(h.c, &h.c.lease)
}

// await parks a waiter until its state is settled: granted, timed out, or
// shut by Close; or until ctx ends, when it leaves the line. The settled
// state comes over the wake-up channel. Hold makes the same wait in its own
// frame (see there).
func (s *store) await(ctx context.Context, h hold) error {
	done := ctx.Done()
	if done == nil { // a context that never ends
		return s.settled(h, <-h.w.ready)
	}
	select {
	case got := <-h.w.ready:
		return s.settledOrEnded(ctx, h, got)
	case <-done:
		return s.leave(ctx, h)
	}
}

// awaitInside is await for a hold made inside others (set.inside): while
// it waits, its wait stands in the graph of who waits for whom, which
// fails it at once if it would close a cycle (cycles.go).
func (s *store) awaitInside(ctx context.Context, h hold) error {
	done, err := s.cycleCheck(ctx, h)
	if err != nil {
		s.withdraw(h)
		return err
	}
	defer done()
	return s.await(ctx, h)
}

// settledOrEnded is settled for a waiter woken while it also watched its
// ctx: granted, but with ctx ended too, perhaps first, while the select
// took the grant, the context's end wins, as in x/sync's semaphore
// (go.dev/issue/63615), and the key goes on.
func (s *store) settledOrEnded(ctx context.Context, h hold, got state) error {
	if got == holding && ctx.Err() != nil {
		s.giveBack(h)
		return canceledError(h.c.lease.Lock, h.c.lease.Key, ctx)
	}
	return s.settled(h, got)
}

// leave takes a waiter whose ctx ended out of the line. If it was settled
// meanwhile, its wake-up is on its way: a grant is passed on to the next in
// line, never lost; a timeout or a close is reported as such.
func (s *store) leave(ctx context.Context, h hold) error {
	got, out := s.takeOut(h, true)
	switch {
	case out:
	case got == holding:
		s.giveBack(h)
	default:
		return s.settled(h, got)
	}
	return canceledError(h.c.lease.Lock, h.c.lease.Key, ctx)
}

// withdraw takes a waiter out of its line for the store's own reason (it
// would close a cycle): as leave does for an ended context, but counted as
// neither a cancelled wait nor, if it was granted meanwhile, a grant.
func (s *store) withdraw(h hold) {
	got, out := s.takeOut(h, false)
	switch {
	case out:
	case got == holding:
		sh := h.sd.sh
		sh.Lock()
		sh.Counts.Grants--
		sh.Unlock()
		s.letGo(h, false)
	default:
		s.settled(h, got) // gives the record back
	}
}

// takeOut takes h's waiter out of its line if it still stands there
// (counted as a cancelled wait if canceled), giving its record back, and
// reports out. Otherwise its state was settled meanwhile and its wake-up
// is on its way: takeOut waits for it and returns it.
func (s *store) takeOut(h hold, canceled bool) (got state, out bool) {
	sh, w := h.sd.sh, h.w
	sh.Lock()
	if w.state == waiting {
		h.e.Line.Remove(&w.line)
		sh.Waiting--
		disarmLocked(&w.ticket)
		w.state = left
		if canceled {
			sh.Counts.Canceled++
		}
		h.sd.putLocked(h)
		sh.Unlock()
		return left, true
	}
	sh.Unlock()
	return <-w.ready, false
}

// settled returns what a waiter woken in the state got answers: nil when it
// holds the key.
func (s *store) settled(h hold, got state) error {
	w := h.w
	if got == holding {
		if s.times {
			w.sd.waited.record(max(h.c.lease.Granted.Sub(s.origin)-w.since, 0))
		}
		return nil
	}
	heldFor, fence := w.heldFor, w.holderFence
	sh := h.sd.sh
	sh.Lock()
	h.sd.putLocked(h)
	sh.Unlock()
	switch got {
	case shut:
		return newError(Closed, h.c.lease.Lock, h.c.lease.Key, "the store is closed")
	case expired:
		return newError(Closed, h.c.lease.Lock, h.c.lease.Key, "the session expired")
	case dismissed:
		return newError(Closed, h.c.lease.Lock, h.c.lease.Key, "the session is closed")
	}
	err := newError(InUse, h.c.lease.Lock, h.c.lease.Key, "held past the hold's wait")
	err.HeldFor, err.HolderFence = heldFor, fence
	return err
}

// heldForLocked returns how long e's holder has held it at instant now on
// the timer clock.
func (s *store) heldForLocked(e *keyEntry, now time.Duration) time.Duration {
	return max(now-e.Holder.lease.Granted.Sub(s.origin), 0)
}

// grantLocked makes c the holder of e at instant at on the timer clock:
// it gives c its fence and grant time and arms its maxHold, if it has one,
// returning the maxHold's list (nil without one). passLocked writes out
// its steps for a waiter with no maxHold: a step added here goes there
// too.
func (s *store) grantLocked(sd *shardLocal, e *keyEntry, c *holdContext, maxHold, at time.Duration) *deadlineList {
	sh := sd.sh
	e.Holder = c
	sh.Counts.Grants++
	c.lease.Fence = sh.Fences.Next()
	c.lease.Granted = s.instant(at)
	if maxHold > 0 {
		c.lease.Deadline = c.lease.Granted.Add(maxHold)
		due := after(at, maxHold)
		if l := sd.firstListLocked(forMaxHold, maxHold); l.appendLocked(e, c, due) {
			return l
		}
		return s.armMaxHoldLocked(sd, e, c, maxHold, due)
	}
	return nil
}

// passLocked gives e to the head of its line and returns the new holder's
// wake-up, on which to send holding once the shard is unlocked; if nobody
// waits, it frees e and returns nil. e's holder was let go before, its
// maxHold counted out of its list. The key is never free while someone is
// in line, so no newcomer can take it in between (strict FIFO, no
// barging).
func (s *store) passLocked(sd *shardLocal, e *keyEntry) chan<- state {
	var w *waiter
	var at time.Duration
	for {
		el := e.Line.PopFront()
		if el != nil {
			sd.sh.Waiting--
		}
		if el == nil {
			e.Holder = nil
			sd.sh.DeleteLocked(e)
			return nil
		}
		w = el.Value.w
		disarmLocked(&w.ticket) // its wait
		// The grant instant is read here, under the shard's lock, not by
		// the woken holder: publishing it from there took an atomic store
		// and a flag, and a hot key's hold 2-3 % more at GOMAXPROCS 1 and
		// 0-3 % at 2 than this longer critical section (go run ./bench
		// -run hotkey, five alternated runs).
		at = s.since()
		if w.sess == nil {
			sd.sh.Running++
			break
		}
		why := w.sess.regrantLocked(w, at) // its ttl counts from the grant now
		if why == holding {
			break
		}
		// A session's waiter whose wait lapsed, or whose session closed,
		// is never granted. Its channel is empty (one send per wait), so
		// this send cannot block.
		w.state = why
		w.ready <- why
	}
	w.state = holding
	if w.maxHold > 0 {
		w.due = s.grantLocked(sd, e, w.c, w.maxHold, at)
		return w.ready
	}
	// grantLocked for a waiter with no maxHold, written out: a call fewer
	// where most waiters are granted (20 instructions of a hold at a hot
	// key, bench/MEASUREMENTS.md, "Instructions").
	c := w.c
	e.Holder = c
	sd.sh.Counts.Grants++
	c.lease.Fence = sd.sh.Fences.Next()
	c.lease.Granted = s.instant(at)
	return w.ready
}

// release lets h's key go once fn has returned, handing it to the next in
// line, and turns fnErr into what Hold returns. A hold whose key was
// revoked finds another holder, or none, in its entry (which may by now be
// another key's: the context is never reused, so it cannot be mistaken),
// and the reason in its context.
func (s *store) release(h hold, fnErr error) error {
	if lost := s.letGo(h, true); lost != notLost {
		return lostRelease(h.c, lost, fnErr)
	}
	return fnErr
}

// lostRelease is release's error for a hold whose lease was lost for
// lost, and whose function returned fnErr. Not inlined: it would make the
// frame of a deferred release larger for a case that is rare.
//
//go:noinline
func lostRelease(c *holdContext, lost loss, fnErr error) error {
	err := lostError(c.lease.Lock, c.lease.Key, lost)
	err.Cause = fnErr
	return err
}

// letGo lets h's key go, handing it to the next in line, and returns why
// h's lease was lost before, or notLost. held says h was a grant whose
// time held counts (not one given back before its function ran).
func (s *store) letGo(h hold, held bool) loss {
	sh := h.sd.sh
	var wake chan<- state
	lost := notLost
	if held && s.times {
		now := s.since()
		h.sd.held.record(max(now-h.c.lease.Granted.Sub(s.origin), 0))
	}
	sh.Lock()
	if h.w == nil || h.w.sess == nil {
		sh.Running--
	}
	if h.e.Holder == h.c {
		due := h.due
		if h.w != nil {
			due = h.w.due
		}
		if due != nil && !due.leaveLastLocked() { // its maxHold
			due.leaveLocked(h.e, h.c)
		}
		wake = s.passLocked(h.sd, h.e)
	} else {
		lost = h.c.lost()
	}
	h.sd.putLocked(h)
	drained := sh.Running == 0 && s.closed.Load()
	sh.Unlock()
	if wake != nil {
		wake <- holding
	}
	h.c.end()
	if drained {
		s.signalDrained()
	}
	return lost
}

// giveBack lets go a key that h was granted as its context ended, before
// its function ran: the key goes on as at a release, and the hold counts
// as a waiter that left, not as a grant.
func (s *store) giveBack(h hold) {
	sh := h.sd.sh
	sh.Lock()
	sh.Counts.Grants--
	sh.Counts.Canceled++
	sh.Unlock()
	s.letGo(h, false)
}
