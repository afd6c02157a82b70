package locks

import (
	"math"
	"runtime"
	"slices"
	"sync"
	"time"
	"unsafe"

	"github.com/holdline/locks/timerwheel"
)

// purpose says what a pending deadline bounds.
type purpose uint8

const (
	forWait    purpose = iota + 1 // a waiter's time in line
	forMaxHold                    // a holder's lease, from its grant
	forTTL                        // a session's holds under locks of one ttl
)

const maxInstant = time.Duration(math.MaxInt64)

// Deadlines in arrival order.
//
// Waiters of one shard with the same wait, and holders with the same
// maxHold, reach their deadlines in the order they joined: a FIFO list per
// (shard, purpose, duration) is already sorted by due instant. Arming is an
// append and disarming an unlink (for a maxHold, a count down; below),
// both O(1) under the shard's mutex, which the hold takes anyway. The
// store's one timer wheel holds a timer per list, for its head, not one
// per deadline; it is re-armed lazily when it fires: a head that left
// early costs one wake-up at its old instant, never an early one. So no mutex shared by all shards is taken on a hold, a
// release, a wait or a maxHold, except when a list that had no timer gets
// its first deadline: about once per duration per shard.
//
// An instant is read from the clock just before the shard's mutex is taken
// (a wait counts from the call), so a list may be out of order by the time
// a goroutine took to get the mutex. Firing stops at the first deadline not
// yet due, so one behind it fires late by at most that much, never early.
//
// A program whose durations all differ (computed from each request's own
// deadline, say) would need a list, and a timer, per deadline. Past a
// shard's first eight durations, deadlines are kept instead by the tick
// they fall due in, one list per tick whatever their durations, fired
// whole at the tick's end: when the wheel would have fired each of them.
// Such a list serves one tick only, so one left empty before its tick (its
// holds let go early) is dropped at once, its timer taken out of the wheel
// under the wheel's mutex: once per list, as when it was armed; otherwise
// a program would keep a list and a timer for every tick of its longest
// duration.
//
// A maxHold's deadline is not a ticket but a slot of its list's queue,
// dueHold: the key's entry, the holder's context and the instant, appended
// at the grant. A release does not look for its slot: it counts the list's
// live deadlines down, takes its slot off the queue if it is the last or
// the first (where most are), and leaves the rest. A slot whose entry no
// longer has that holder is stale (a context is never reused, and is
// compared by its address: the holder's function can write to its lease,
// fence included, but not change which context holds), found so and
// skipped when it comes due, or when the queue is full and at least half
// stale. A slot taken off the queue is cleared, so that a released hold's
// context, and the caller's context it keeps, are not kept from the
// collector by a queue: only a stale slot between live ones keeps its
// context, until it comes due, an end of the queue reaches it, or the
// queue, more than two thirds stale, is compacted. A list
// whose live count reaches zero empties its queue at once, without a
// look. So arming a maxHold writes a slot and disarming it counts down,
// with no record of its own (a free key's hold took a bare ticket, 48
// bytes, and linked it), and a hold that lets go before its maxHold costs
// a read later only if its slot was neither end of the queue and its list
// was never empty in between. A pending maxHold costs 24 bytes, not 48,
// and arming and cancelling one with a million pending, 51 ns, not 73 (a
// run of each); a hold with a maxHold on a walk over a million keys, 36
// instructions fewer than with a ticket linked and unlinked, but about
// the same time: its cost is the lines it touches, which local.own cuts
// (bench/MEASUREMENTS.md, "maxHold").

// deadlineList is a shard's line of pending deadlines of one purpose and
// duration, first due first, or (byTick) of one purpose due within one
// tick: waits as linked tickets, maxHolds as a queue of slots (due). Its
// fields but timer are guarded by its shard's mutex, or, for a session's
// ttl group (forTTL, no shard), by the session's.
type deadlineList struct {
	// What arming and disarming a maxHold read and write comes first: for
	// a shard's own list (local.own), in one cache line with the shard's
	// pointer, and its inline slots in the next.
	p      purpose
	byTick bool // a list of the deadlines due within one tick, of any duration
	// armed: the wheel holds a timer for this list, or the timer goroutine
	// has taken it from the wheel and will look at the list (and re-arm it)
	// under the shard's mutex. Cleared under the shard's mutex: when the
	// list is found empty, and for a list by tick once its timer is out of
	// the wheel (taken to fire, or cancelled as the list empties). A list
	// of waits of Forever is armed with no timer: it never fires.
	armed bool
	d     time.Duration // the duration; for a list byTick, the end of its tick
	n     int           // deadlines pending: tickets linked, or due's live slots
	// forMaxHold: due[first:] in arrival order, the n live among stale
	// ones; empty whenever n is 0. A queue of two is inline.
	due    []dueHold
	first  int
	inline [2]dueHold

	sd         *shardLocal
	head, tail *ticket                         // forWait: in arrival order
	timer      timerwheel.Timer[*deadlineList] // guarded by the store's timers mutex
	grp        *ttlGroup                       // for forTTL: the session's group whose timer this is
	tm         *timers                         // for a list byTick: the wheel's, to take its timer out when it empties
}

// dueHold is a holder's maxHold in its list's queue: due at instant at,
// on the timer clock, if e's holder is still c.
type dueHold struct {
	e  *keyEntry
	c  *holdContext
	at time.Duration
}

// liveLocked reports whether d's hold still holds its key.
func (d *dueHold) liveLocked() bool { return d.e.Holder == d.c }

// minQueue is the fewest slots a maxHold list's queue outside the list is
// made with; a queue past keepQueue slots is let go when its list
// empties, for the inline one, so that a burst of maxHolds leaves nothing
// behind once released.
const (
	minQueue  = 8
	keepQueue = 64
)

// maxLists is how many deadline lists a shard looks through before it
// keeps the rest in a map: programs use a handful of durations.
const maxLists = 8

// shardLocal is the store's own state of one shard, beside the table's
// (the same index), padded so that two shards' never share a cache line.
// The padding is written out: unsafe.Sizeof(local{}) here would make the
// type refer to itself (local's own list points back at its shardLocal),
// which Go refuses. TestSizes checks it on 64-bit platforms.
type shardLocal struct {
	local
	_ [localPad]byte
}

// localPad makes a shardLocal 640 bytes on 64-bit platforms, whose local
// is 568, five pairs of cache lines (a processor may fetch lines in
// pairs).
const localPad = 72

// local is guarded by its shard's mutex, but for the histograms, which
// are atomic and written outside it (see times.go).
type local struct {
	sh *keyShard
	// own is one of the shard's lists by duration, while ownUsed (the
	// first made, and after it is dropped the next): in the line of sh,
	// which a hold reads anyway, and the next, not in lines
	// of its own: a maxHold on a walk over a million keys 3-8 % cheaper
	// at GOMAXPROCS 1 and 4-13 % at 2 (three alternated runs,
	// bench/MEASUREMENTS.md, "maxHold").
	own     deadlineList
	ownUsed bool
	lists   []*deadlineList          // the first maxLists deadline lists, in listArr
	listArr [maxLists]*deadlineList  // lists' array, in the shard's own lines: a deadline armed reads one line fewer
	more    map[uint64]*deadlineList // the rest, by purpose and tick (moreKey); rarely any
	revoked [lostClosed + 1]uint64   // leases revoked, by reason

	// Durations, recorded with RecordTimes: time in line of the waiters
	// granted, and time held.
	waited, held histogram
}

// firstListLocked returns sd's list for deadlines of p and d if it is
// one of the shard's lists by duration (sd.lists, at most maxLists), or
// nil: where the deadlines a shard arms mostly find theirs. Inlined into
// armLocked, for the look costs about what a call would.
func (sd *shardLocal) firstListLocked(p purpose, d time.Duration) *deadlineList {
	for _, l := range sd.lists {
		if l.d == d && l.p == p {
			return l
		}
	}
	return nil
}

// newListLocked returns sd's list for a deadline of p and d due at at (on
// the timer clock) that firstListLocked did not find, making it if there
// is none: the shard's own if it is free. The first maxLists durations of
// a shard get a list each; past
// them, in a program whose durations all differ (computed from a
// request's own deadline, say), the deadlines due within one tick share a
// list, keyed by the tick's end, whatever their durations: its timer
// fires them all at that end, so a deadline there fires up to a tick
// late, never early, and however many durations are pending, a tick's
// deadlines cost one list and one timer.
func (sd *shardLocal) newListLocked(p purpose, d, at, tick time.Duration, tm *timers) *deadlineList {
	if len(sd.lists) < maxLists {
		var l *deadlineList
		if !sd.ownUsed {
			l, sd.ownUsed = &sd.own, true
		} else {
			l = new(deadlineList)
		}
		*l = deadlineList{sd: sd, p: p, d: d}
		l.due = l.inline[:0:len(l.inline)]
		l.timer.Value = l
		sd.lists = append(sd.lists, l)
		return l
	}
	end := maxInstant // a wait of Forever, or one as far: one list, never due
	if at <= maxInstant-tick {
		end = (at + tick - 1) / tick * tick // rounded up, as the wheel rounds
	}
	k := moreKey(p, end)
	if l := sd.more[k]; l != nil {
		return l
	}
	l := &deadlineList{sd: sd, p: p, byTick: true, d: end, tm: tm}
	l.timer.Value = l
	if sd.more == nil {
		sd.more = make(map[uint64]*deadlineList)
	}
	sd.more[k] = l
	return l
}

// moreKey is the key of a list byTick in a shard's map: the end of its
// tick (non-negative, so below 2^63: shifted by one, it cannot wrap onto
// another's) and its purpose, a wait or a maxHold (a session's ttl has no
// list here), in one word.
func moreKey(p purpose, end time.Duration) uint64 {
	return uint64(end)<<1 | uint64(p-forWait)
}

// dropLocked forgets l, an empty list whose timer is not armed, so that a
// program that used many durations once does not keep their lists.
func (sd *shardLocal) dropLocked(l *deadlineList) {
	if l.byTick {
		delete(sd.more, moreKey(l.p, l.d))
		return
	}
	if l == &sd.own {
		sd.ownUsed = false
	}
	for i, m := range sd.lists {
		if m == l {
			last := len(sd.lists) - 1
			sd.lists[i] = sd.lists[last]
			sd.lists[last] = nil
			sd.lists = sd.lists[:last]
			return
		}
	}
}

// pendingLocked returns how many deadlines sd holds.
func (sd *shardLocal) pendingLocked() int {
	n := 0
	for _, l := range sd.lists {
		n += l.n
	}
	for _, l := range sd.more {
		n += l.n
	}
	return n
}

// armLocked makes t's deadline for p (a wait), of duration d, due at
// instant at on the timer clock. t has no pending deadline. O(1); the
// wheel's mutex is taken only when the list had no timer.
func (s *store) armLocked(sd *shardLocal, t *ticket, p purpose, d, at time.Duration) {
	l := sd.firstListLocked(p, d)
	if l == nil {
		l = sd.newListLocked(p, d, at, s.tick, &s.timers)
	}
	t.at, t.list = at, l
	// Pointers are written only where they change: while the garbage
	// collector marks, each write costs a write barrier, and most lists
	// hold one deadline at a time, so a ticket's links are mostly nil
	// before and after.
	if t.next != nil {
		t.next = nil
	}
	if t.prev != l.tail {
		t.prev = l.tail
	}
	if l.tail != nil {
		l.tail.next = t
	} else {
		l.head = t
	}
	l.tail = t
	l.n++
	if !l.armed {
		l.armed = true
		if due := l.dueLocked(); due != maxInstant { // a wait of Forever never fires: no timer for it
			s.timers.schedule(l, due)
		}
	}
}

// armMaxHoldLocked makes the maxHold d of e's holder, c, due
// at instant at on the timer clock, and returns its list, whose leaveLocked
// the release calls. O(1) amortized; the wheel's mutex is taken only when
// the list had no timer. A grant whose list has room and a timer appends
// to it inline (appendLocked) and calls this only for the rest.
func (s *store) armMaxHoldLocked(sd *shardLocal, e *keyEntry, c *holdContext, d, at time.Duration) *deadlineList {
	l := sd.firstListLocked(forMaxHold, d)
	if l == nil {
		l = sd.newListLocked(forMaxHold, d, at, s.tick, &s.timers)
	}
	if len(l.due) == cap(l.due) {
		l.makeRoomLocked()
	}
	l.pushLocked(e, c, at)
	if !l.armed {
		l.armed = true
		if due := l.dueLocked(); due != maxInstant { // as far as a wait of Forever: never fires
			s.timers.schedule(l, due)
		}
	}
	return l
}

// appendLocked is armMaxHoldLocked where most maxHolds find their list:
// it appends the maxHold of e's holder, c, due at at, to l,
// and reports whether it could: l is not nil, has room in its queue and
// has its timer. Inlined into the grant, which calls armMaxHoldLocked
// only when it could not: a call fewer made a maxHold about 3 % cheaper
// (bench/MEASUREMENTS.md, "maxHold").
func (l *deadlineList) appendLocked(e *keyEntry, c *holdContext, at time.Duration) bool {
	if l == nil || !l.armed || len(l.due) == cap(l.due) {
		return false
	}
	l.pushLocked(e, c, at)
	return true
}

// pushLocked appends the maxHold of e's holder, c, due at at, to l's
// queue, which has room for it, and counts it.
func (l *deadlineList) pushLocked(e *keyEntry, c *holdContext, at time.Duration) {
	l.due = append(l.due, dueHold{e, c, at})
	l.n++
}

// leaveLocked takes the maxHold of e's holder c, a live slot of l, out of
// l's count, and out of its queue if it is the last or the first slot,
// with the stale slots that this leaves at that end; elsewhere it is
// left, stale, until more than twice as many slots as are live are stale,
// when the queue keeps its live ones only. So a queue keeps at most twice
// as many released holds' contexts as it has live holds. O(1) amortized:
// a slot goes stale, and is read for it, at most once.
func (l *deadlineList) leaveLocked(e *keyEntry, c *holdContext) {
	l.n--
	if l.n == 0 {
		l.emptyLocked()
		return
	}
	if last := len(l.due) - 1; l.due[last].c == c {
		// The slots before it that are stale go too: released behind it,
		// they would keep their contexts until a compaction.
		for l.due[last] = (dueHold{}); !l.due[last-1].liveLocked(); last-- {
			l.due[last-1] = dueHold{}
		}
		l.due = l.due[:last]
	} else if d := &l.due[l.first]; d.c == c {
		for *d = (dueHold{}); !l.due[l.first+1].liveLocked(); l.first++ {
			l.due[l.first+1] = dueHold{}
		}
		l.first++
	} else if stale := len(l.due) - l.first - l.n; stale > 2*l.n {
		// Released behind a hold that stays (oldest first, say): keep
		// the queue within a few times what is live, not as long as the
		// longest hold.
		l.compactLocked(c)
	}
}

// leaveLastLocked is leaveLocked for the release most are on a walk of
// many keys, and reports whether it applied: l's last live slot, in a
// queue of at most keepQueue slots of a list by duration, which empties
// with no look and no call. Inlined into the release, where leaveLocked
// (cost 90) is not: a maxHold 5 % cheaper at GOMAXPROCS 1
// (bench/MEASUREMENTS.md, "maxHold").
func (l *deadlineList) leaveLastLocked() bool {
	if l.n != 1 || len(l.due) != l.first+1 || cap(l.due) > keepQueue || l.byTick {
		return false
	}
	// emptyLocked's small case, for a queue of the one live slot
	l.due[l.first] = dueHold{}
	l.n, l.due, l.first = 0, l.due[:0], 0
	return true
}

// emptyLocked empties the queue of l, whose holds have all let go or been
// revoked (its n is 0), keeping a small queue for the next; a list byTick
// goes at once, as when its last ticket leaves (disarmLocked).
func (l *deadlineList) emptyLocked() {
	if cap(l.due) > keepQueue {
		l.inline = [len(l.inline)]dueHold{}
		l.due = l.inline[:0:len(l.inline)]
	} else {
		clear(l.due[l.first:]) // those before first were cleared as they left
		l.due = l.due[:0]
	}
	l.first = 0
	if l.byTick && l.armed && (l.d == maxInstant || l.tm.cancel(l)) {
		l.armed = false
		l.sd.dropLocked(l)
	}
}

// makeRoomLocked makes room for a slot in l's full queue: it keeps the
// live slots only (compactLocked) if at least half are stale, and moves
// the queue to an array twice its slots otherwise. Either way, a queue's
// slots are read or moved once per as many appends, at least.
func (l *deadlineList) makeRoomLocked() {
	if c := cap(l.due); c >= minQueue && 2*l.n <= c {
		l.compactLocked(nil)
		return
	}
	q := l.due[l.first:]
	l.due = append(make([]dueHold, 0, max(minQueue, 2*len(q))), q...)
	clear(q) // the inline queue stays l's
	l.first = 0
}

// compactLocked keeps the live slots of l's queue only, in order, reading
// each slot's holder, and moves them to an array half the size if they
// fill less than a quarter of it. The slot of gone, a hold letting go
// (still its key's holder until the key is handed on), goes too.
func (l *deadlineList) compactLocked(gone *holdContext) {
	q := l.due[l.first:]
	k := 0
	for i := range q {
		if q[i].liveLocked() && q[i].c != gone {
			l.due[k] = q[i] // k <= l.first+i: not yet read
			k++
		}
	}
	if c := cap(l.due); 4*k < c && c > keepQueue {
		l.due = append(make([]dueHold, 0, c/2), l.due[:k]...)
	} else {
		clear(l.due[k:])
		l.due = l.due[:k]
	}
	l.first = 0
}

// dueLocked returns when l's timer is to fire: when its head is due, or,
// for a list byTick, at the end of its tick, when all of them are. l is
// not empty.
func (l *deadlineList) dueLocked() time.Duration {
	switch {
	case l.byTick:
		return l.d
	case l.p == forMaxHold:
		return l.due[l.first].at
	}
	return l.head.at
}

// disarmLocked takes t's pending deadline, if it has one, out of its list.
// O(1); the list's timer is left to fire, and finds what is then at the
// head, except that a list by tick left empty goes at once, its timer taken
// out of the wheel under the wheel's mutex (see the top of this file).
func disarmLocked(t *ticket) {
	if t.list != nil { // inlined: most tickets a release looks at are unarmed
		t.unlinkLocked()
	}
}

// unlinkLocked is disarmLocked for a ticket with a pending deadline.
func (t *ticket) unlinkLocked() {
	l := t.list
	if t.prev != nil {
		t.prev.next = t.next
	} else {
		l.head = t.next
	}
	if t.next != nil {
		t.next.prev = t.prev
	} else {
		l.tail = t.prev
	}
	if t.next != nil { // written only where they change (see armLocked)
		t.next = nil
	}
	if t.prev != nil {
		t.prev = nil
	}
	t.list = nil
	l.n--
	if l.n == 0 && l.byTick && l.armed && (l.d == maxInstant || l.tm.cancel(l)) {
		l.armed = false
		l.sd.dropLocked(l)
	}
}

// timers drives the store's deadline lists with one hierarchical timer
// wheel and one goroutine, instead of a Go timer per waiter or lease. The
// goroutine starts with the first deadline, sleeps until the wheel's next
// bucket is due (with no timer at all while nothing is pending, so an idle
// store costs no CPU), and ends with Close.
//
// Lock order: a shard's mutex, then mu; never the other way. The goroutine
// takes the due lists from the wheel under mu, lets it go, and then fires
// them under their shards' mutexes, up to fireTogether shards at once, all
// but the first taken with TryLock (fire).
type timers struct {
	store *store

	mu      sync.Mutex
	wheel   *timerwheel.Wheel[*deadlineList]
	started bool          // the goroutine runs
	stopped bool          // Close stopped it; nothing more is armed
	wakeAt  time.Duration // when the goroutine looks at the wheel next: -1 while it is awake
	kick    chan struct{} // wakes the goroutine for an earlier deadline
	quit    chan struct{} // closed by stop
	done    chan struct{} // closed when the goroutine ends
}

func (t *timers) init(s *store, tick time.Duration) {
	t.store = s
	t.wheel = timerwheel.New[*deadlineList](tick, 0)
	t.wakeAt = maxInstant
	t.kick = make(chan struct{}, 1)
	t.quit = make(chan struct{})
	t.done = make(chan struct{})
}

// schedule arms l's timer for instant at. If l's timer is in the wheel
// already (a session's Renew schedules its group's at once when members
// lapsed), the wheel moves it. O(1); no allocation.
func (t *timers) schedule(l *deadlineList, at time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		return
	}
	t.wheel.Schedule(&l.timer, at)
	if !t.started {
		t.started = true
		go t.run()
	}
	if at < t.wakeAt {
		select {
		case t.kick <- struct{}{}:
		default:
		}
	}
}

// cancel takes l's timer out of the wheel and reports whether it was
// there: false once the goroutine has taken it to fire. O(1).
func (t *timers) cancel(l *deadlineList) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.wheel.Cancel(&l.timer)
}

// stop ends the goroutine and waits for it.
func (t *timers) stop() {
	t.mu.Lock()
	t.stopped = true
	started := t.started
	t.mu.Unlock()
	close(t.quit)
	if started {
		<-t.done
	}
}

// fireAlone is the fewest due lists a goroutine fires: below twice as
// many, the timer goroutine fires them alone; past that, the work is
// shared with helpers (up to GOMAXPROCS goroutines in all), since lists of
// different shards fire independently.
const fireAlone = 32

// run is the timer goroutine.
func (t *timers) run() {
	defer close(t.done)
	sleep := time.NewTimer(time.Hour)
	sleep.Stop()
	var due []*timerwheel.Timer[*deadlineList]
	var f firing
	for {
		t.mu.Lock()
		now := time.Since(t.store.origin)
		due = t.wheel.Advance(now, due[:0])
		next, pending := t.wheel.Next()
		switch {
		case len(due) > 0:
			t.wakeAt = -1 // awake: it will look again after firing
		case pending:
			t.wakeAt = next
		default:
			t.wakeAt = maxInstant
		}
		t.mu.Unlock()

		if len(due) > 0 {
			t.fireAll(due, now, &f)
			clear(due) // let the lists go
			continue
		}
		var ring <-chan time.Time
		if pending {
			// From a fresh reading: Advance may have taken a while.
			sleep.Reset(next - time.Since(t.store.origin))
			ring = sleep.C
		}
		select {
		case <-ring:
		case <-t.kick:
			sleep.Stop()
		case <-t.quit:
			sleep.Stop()
			return
		}
	}
}

// fireAll fires the due lists, sharing them with helper goroutines when
// there are many.
func (t *timers) fireAll(due []*timerwheel.Timer[*deadlineList], now time.Duration, f *firing) {
	helpers := min(runtime.GOMAXPROCS(0), len(due)/fireAlone) - 1
	if helpers <= 0 {
		t.store.fireLists(due, now, f)
		return
	}
	var wg sync.WaitGroup
	share := (len(due) + helpers) / (helpers + 1)
	for i := 0; i < helpers; i++ {
		part := due[:share]
		due = due[share:]
		wg.Go(func() {
			var f firing
			t.store.fireLists(part, now, &f)
		})
	}
	t.store.fireLists(due, now, f)
	wg.Wait()
}

// fireTogether is how many due lists fire together, side by side. The
// walk of a list of waits is a chain of cache misses, each ticket found
// only from the one before it, and each deadline of any list a few misses
// more (its entry, holder and bucket); the lists of different shards are
// independent, their misses in flight together. On a million maxHolds due
// in 100 ms (CPU profiles of the timer goroutine), when maxHolds were
// tickets too, a ticket cost 110-154 ns walking one list at a time, 32-64
// walking four. Eight cut the goroutine's time for three such windows
// from 0.89-0.94 s to 0.70-0.88 (four and seven alternated runs at GOMAXPROCS 1; the last
// revocation 263-288 → 163-248 ms late), and sixteen read 0.86-0.90:
// past what the core keeps in flight, more chains only add work. A
// shard of the group stays locked while the group fires.
const fireTogether = 8

// fireLists fires the lists of due, fireTogether at a time.
func (s *store) fireLists(due []*timerwheel.Timer[*deadlineList], now time.Duration, f *firing) {
	var group [fireTogether]*deadlineList
	n := 0
	for _, tm := range due {
		l := tm.Value
		if l.p == forTTL {
			s.fireGroup(l.grp, now, f)
			continue
		}
		group[n] = l
		if n++; n == fireTogether {
			s.fire(group[:n], now, f)
			n = 0
		}
	}
	if n > 0 {
		s.fire(group[:n], now, f)
	}
}

// fire acts on every deadline of the lists ls that is due at now, under
// their shards' mutexes, re-arms each list's timer for what is then at its
// head, and then sends the wake-ups and cancels the revoked leases'
// contexts.
//
// It waits for the first list's shard only, holding none. It takes the
// other lists' shards with TryLock, never waiting for a shard while it
// holds one, so holding several cannot deadlock (only the goroutines that
// fire hold two or more, each this way, and no path waits for a shard
// while it holds the wheel's mutex or a session's); a list whose shard is
// busy fires after the others, alone. A burst of deadlines keeps each
// shard of a group locked while the group's other lists are acted on too.
func (s *store) fire(ls []*deadlineList, now time.Duration, f *firing) {
	var held, busy [fireTogether]*deadlineList
	var locked [fireTogether]*keyShard
	nh, nb, nl := 0, 0, 0
	for i, l := range ls {
		if sh := l.sd.sh; !slices.Contains(locked[:nl], sh) {
			if i == 0 {
				sh.Lock()
			} else if !sh.TryLock() {
				busy[nb] = l
				nb++
				continue
			}
			locked[nl] = sh
			nl++
		}
		held[nh] = l
		nh++
	}
	s.fireLocked(held[:nh], now, f)
	for _, sh := range locked[:nl] {
		sh.Unlock()
	}
	f.flush()
	for _, l := range busy[:nb] {
		s.fire([]*deadlineList{l}, now, f)
	}
}

// fireLocked acts on the due deadlines of ls, whose shards' mutexes are
// held, and re-arms or drops each list, leaving the wake-ups and the
// cancellations to f.
func (s *store) fireLocked(ls []*deadlineList, now time.Duration, f *firing) {
	for _, l := range ls {
		if l.byTick {
			l.armed = false // its timer is out of the wheel: emptying it cancels nothing
		}
	}
	var warm [fireTogether]int
	for f.warmLocked(ls, now, &warm) {
		for i, l := range ls {
			for range warm[i] {
				if !s.expireLocked(l, now, f) {
					break
				}
			}
		}
	}
	for _, l := range ls {
		if l.n > 0 {
			l.armed = true
			s.timers.schedule(l, l.dueLocked())
		} else {
			l.armed = false
			l.sd.dropLocked(l)
		}
	}
}

// expireLocked acts on l's first deadline if it is due at now, and
// reports whether it was: a waiter's wait passed leaves the key's line, a
// holder's maxHold revokes its lease; a stale maxHold slot (its hold let
// go) is dropped.
func (s *store) expireLocked(l *deadlineList, now time.Duration, f *firing) bool {
	sd := l.sd
	if l.p == forMaxHold {
		if l.first == len(l.due) || l.due[l.first].at > now {
			return false
		}
		d := l.due[l.first]
		l.due[l.first] = dueHold{}
		l.first++
		if d.liveLocked() {
			// Counted out first: the key's next holder may join l.
			if l.n--; l.n == 0 {
				l.emptyLocked()
			}
			ready, c := s.revokeLocked(sd, d.e, lostMaxHold)
			if ready != nil {
				f.wake = append(f.wake, wakeup{ready, holding})
			}
			f.lose = append(f.lose, c)
		}
		return true
	}
	t := l.head
	if t == nil || t.at > now {
		return false
	}
	disarmLocked(t)
	w, e := t.w, t.entry
	e.Line.Remove(&w.line)
	sd.sh.Waiting--
	w.heldFor, w.holderFence = s.heldForLocked(e, now), e.Holder.lease.Fence
	w.state = timedOut
	sd.sh.Counts.TimedOut++
	f.wake = append(f.wake, wakeup{w.ready, timedOut})
	return true
}

// warmAhead is how many due deadlines of a list warmLocked reads ahead of
// acting on them: with fireTogether lists, enough to keep the processor's
// outstanding cache misses busy.
const warmAhead = 16

// warmLocked reads, for up to warmAhead deadlines due at now from the
// head of each list of ls, before any is acted on, what acting on them
// misses most: the ticket or slot, the key's entry, its holder's state
// (and, for a wait, its fence) and, for a revocation, the entry's bucket. It sets warm[i] to
// how many deadlines of ls[i] it read for, and reports whether any was
// due. When many
// deadlines fall due at once (a million pending leases are far larger
// than the caches and the TLB), acting on one after another, each one's
// misses wait for the last one's: read in a loop that does nothing else,
// they are in flight together. The tickets of a list of waits are a
// chain, each found from the one before, so the lists are walked side by
// side (fireTogether); a list of maxHolds is an array, whose entries are
// read in the same loop. On a million maxHolds due in 100 ms (go run
// ./bench -run deadlines, a 2-core VM), when they were tickets too, with
// the shard's chains mostly in the order of insertion, the timer
// goroutine's time per revocation went from 600 ns to 360 reading ahead
// one list at a time, and to 200-340 with four lists side by side and
// shrinks that walk fewer chains; eight lists, in runs alternated with
// four on one day, took 230-290 ns against 300-310 (CPU profiles; this
// machine's speed varies from one process to the next).
func (f *firing) warmLocked(ls []*deadlineList, now time.Duration, warm *[fireTogether]int) bool {
	var ahead [fireTogether][warmAhead]*keyEntry
	var next [fireTogether]*ticket
	for i, l := range ls {
		next[i], warm[i] = l.head, 0
	}
	due := false
	for k := range warmAhead {
		more := false
		for i, l := range ls {
			if l.p == forMaxHold {
				if j := l.first + k; j < len(l.due) && l.due[j].at <= now {
					ahead[i][k] = l.due[j].e
					warm[i]++
					more = true
				}
				continue
			}
			if u := next[i]; u != nil && u.at <= now {
				ahead[i][k], next[i] = u.entry, u.next
				warm[i]++
				more = true
			} else {
				next[i] = nil
			}
		}
		if !more {
			break
		}
		due = true
	}
	var sum uintptr
	for i, l := range ls {
		for _, e := range ahead[i][:warm[i]] {
			if c := e.Holder; c != nil {
				sum += uintptr(unsafe.Pointer(c.st.Load()))
				if l.p != forMaxHold { // a waiter whose wait passed reads the holder's lease
					sum += uintptr(c.lease.Fence)
				}
			}
			if l.p == forMaxHold { // the revocation deletes an entry nobody waits for
				sum += l.sd.sh.WarmLocked(e)
			}
		}
	}
	f.sink = sum
	return due
}

// firing is what firing a group of lists leaves to do once their shards'
// mutexes are let go: wake-ups to send and leases to cancel. Reused from
// group to group.
type firing struct {
	wake []wakeup
	lose []*holdContext
	sink uintptr // what warmLocked read, so that its reads are not dropped
}

type wakeup struct {
	ready chan<- state
	st    state
}

// flush sends the wake-ups and cancels the revoked leases' contexts, once
// the shards' mutexes are let go.
func (f *firing) flush() {
	for _, w := range f.wake {
		w.ready <- w.st
	}
	for _, c := range f.lose {
		c.cancelLost()
	}
	clear(f.wake)
	clear(f.lose)
	f.wake, f.lose = f.wake[:0], f.lose[:0]
}
