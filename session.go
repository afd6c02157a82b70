package locks

import (
	"context"
	"runtime"
	"sync"
	"time"
	"weak"

	"github.com/holdline/locks/waitq"
)

// Session is one holder identity that is not a function call: code that
// takes keys in one place and lets them go in another, or a client of this
// store over a connection. Its grants and waits live while it renews them:
// each lapses when the session has not called Renew within its lock's ttl
// of the later of its start (the grant, or the Acquire call for a wait)
// and the session's last renewal. An abandoned session is so reclaimed at
// its ttl: nothing waits forever on a holder nobody renews.
//
// Make one with Store.NewSession. Safe for concurrent use.
type Session struct {
	store *store
	owner *Store // keeps the Store reachable while the session is

	self weak.Pointer[Session] // its key among the store's sessions

	mu      sync.Mutex
	closed  bool
	renewed time.Duration       // the last renewal, on the store's timer clock
	groups  []*ttlGroup         // one per ttl in use
	grants  map[*Grant]struct{} // granted and not released
}

// ttlGroup is a session's holds under locks of one ttl, in the order their
// ttl started counting (a wait's from its call, a grant's from the grant),
// so that the first one lapses first: one deadline per session and ttl,
// not one per lease. Its fields are guarded by the session's mutex.
type ttlGroup struct {
	sess    *Session
	ttl     time.Duration
	members waitq.List[*waiter] // in the order their ttl started
	lapsed  []*waiter           // lapsed at a Renew that came too late, not yet acted on
	timer   deadlineList        // its timer in the store's wheel (p is forTTL)
}

// NewSession returns a new session of s, renewed now. On a closed store it
// returns a closed session, whose Acquire fails Closed.
func (s *Store) NewSession() *Session {
	sess := &Session{store: s.store, owner: s, grants: make(map[*Grant]struct{})}
	if s.store == nil || s.closed.Load() {
		sess.closed = true
		return sess
	}
	sess.renewed = s.since()
	sess.self = weak.Make(sess)
	s.sessionsMu.Lock()
	if s.closed.Load() {
		sess.closed = true
	} else {
		s.sessions[sess.self] = struct{}{}
		// An abandoned session is reclaimed: once it has nothing left (its
		// grants and waits lapsed at their ttl), nothing refers to it.
		in := s.store
		runtime.AddCleanup(sess, func(wp weak.Pointer[Session]) {
			in.sessionsMu.Lock()
			delete(in.sessions, wp)
			in.sessionsMu.Unlock()
		}, sess.self)
	}
	s.sessionsMu.Unlock()
	return sess
}

// Renew renews every grant and wait of the session that has not lapsed:
// each lapses next a ttl from now, or from its own start if that is later.
// One that lapsed before the call stays lapsed, even if the store has not
// acted on it yet. It fails Closed once the session is closed. Cost:
// O(grants and waits of the session). Safe for concurrent use.
func (sess *Session) Renew() error {
	sess.mu.Lock()
	defer sess.mu.Unlock()
	if sess.closed {
		return newError(Closed, "", "", "the session is closed")
	}
	s := sess.store
	now := s.since()
	for _, g := range sess.groups {
		// Those that lapsed by now keep their lapse, and fire at once. They
		// are nearly a prefix of the group, but a start read just before a
		// shard's lock can stand behind a later one: all are looked at.
		for el := g.members.Front(); el != nil; {
			w, next := el.Value, el.Next()
			if at := g.lapseLocked(w); at <= now {
				g.unlinkLocked(w)
				w.lapseAt = at
				g.lapsed = append(g.lapsed, w)
				w.grp = g // still a member until acted on
			}
			el = next
		}
		if len(g.lapsed) > 0 {
			s.timers.schedule(&g.timer, now)
			g.timer.armed = true
		}
	}
	sess.renewed = now
	return nil
}

// Close releases every grant of the session and takes its waiters out of
// their lines at once: their Acquire fails Closed ("the session is
// closed"). A grant or wait that had lapsed (its ttl ran out unrenewed),
// whether or not the store had acted on it yet, ends as at its lapse: the
// lease lost ("its ttl ran out"), the Acquire failing Closed ("the session
// expired"). Release of a grant afterwards returns nil, or the grant's
// lost error if it was lost before. Idempotent; it always returns nil.
func (sess *Session) Close() error {
	sess.mu.Lock()
	if sess.closed {
		sess.mu.Unlock()
		return nil
	}
	sess.closed = true
	grants := sess.grants
	sess.grants = nil
	var members, lapsed []member
	var now time.Duration
	if sess.store != nil {
		now = sess.store.since()
	}
	for _, g := range sess.groups {
		members, lapsed = g.takeAllLocked(members, lapsed, now)
		// Its timer goes too, rather than wake the store at its old
		// instant and keep the session until then; one the timer
		// goroutine has taken finds the group empty.
		if g.timer.armed && sess.store.timers.cancel(&g.timer) {
			g.timer.armed = false
		}
	}
	sess.mu.Unlock()
	if s := sess.store; s != nil {
		s.sessionsMu.Lock()
		delete(s.sessions, sess.self)
		s.sessionsMu.Unlock()
		s.lapse(lapsed, new(firing))
		s.dismiss(members, dismissed)
	}
	for g := range grants {
		g.Release()
	}
	return nil
}

// member is a waiter record taken out of a ttl group to be acted on under
// its shard's mutex, with what identifies its hold: the record may be
// reused by then, its context never is.
type member struct {
	w *waiter
	c *holdContext
}

// lapseLocked returns when w lapses: a ttl after the later of its start
// and the session's last renewal.
func (g *ttlGroup) lapseLocked(w *waiter) time.Duration {
	return after(max(w.start, g.sess.renewed), g.ttl)
}

func (g *ttlGroup) unlinkLocked(w *waiter) {
	g.members.Remove(&w.member)
	w.grp = nil
}

func (g *ttlGroup) pushLocked(w *waiter, start time.Duration) {
	w.start, w.grp = start, g
	g.members.PushBack(&w.member)
}

// headLocked returns the member of g whose ttl started first, or nil.
func (g *ttlGroup) headLocked() *waiter {
	if el := g.members.Front(); el != nil {
		return el.Value
	}
	return nil
}

// takeAllLocked empties g: it appends to lapsed its members that lapsed
// by instant now (at a Renew that came too late, or since), marked so
// (lapseAt), and the others to ms.
func (g *ttlGroup) takeAllLocked(ms, lapsed []member, now time.Duration) ([]member, []member) {
	for w := g.headLocked(); w != nil; w = g.headLocked() {
		if at := g.lapseLocked(w); at <= now {
			g.unlinkLocked(w)
			w.lapseAt = at
			lapsed = append(lapsed, member{w, w.c})
			continue
		}
		g.unlinkLocked(w)
		ms = append(ms, member{w, w.c})
	}
	for _, w := range g.lapsed {
		w.grp = nil
		lapsed = append(lapsed, member{w, w.c})
	}
	clear(g.lapsed)
	g.lapsed = g.lapsed[:0]
	return ms, lapsed
}

// joinLocked makes w, a hold of a lock of the given ttl starting at
// instant start, a member of the session, and reports whether it could
// (not once the session is closed). Called under w's shard's mutex.
func (sess *Session) joinLocked(w *waiter, ttl, start time.Duration) bool {
	sess.mu.Lock()
	defer sess.mu.Unlock()
	if sess.closed {
		return false
	}
	w.sess, w.lapseAt = sess, 0 // a record's last session may have left it marked
	g := sess.groupLocked(ttl)
	g.pushLocked(w, start)
	if !g.timer.armed {
		g.timer.armed = true
		sess.store.timers.schedule(&g.timer, g.lapseLocked(g.headLocked()))
	}
	return true
}

// regrantLocked restarts w's ttl at its grant, instant at, and answers
// holding; or, if its wait has lapsed (by at, or at a Renew that came too
// late) or its session closed, takes it out of the group and answers how
// the wait ends instead (expired, dismissed): it must not be granted.
// Called under w's shard's mutex.
func (sess *Session) regrantLocked(w *waiter, at time.Duration) state {
	sess.mu.Lock()
	defer sess.mu.Unlock()
	g := w.grp
	// A lapse first: a wait that lapsed before its session closed ends as
	// lapsed (Close marks it so, as the store's timer does).
	if w.lapseAt != 0 || g != nil && g.lapseLocked(w) <= at {
		sess.leaveGroupLocked(w)
		return expired
	}
	if sess.closed {
		sess.leaveGroupLocked(w)
		return dismissed
	}
	if g == nil {
		return expired // taken out by its lapse, which finds it gone
	}
	g.unlinkLocked(w)
	g.pushLocked(w, at) // the latest start: the group stays in order
	if !g.timer.armed {
		g.timer.armed = true
		sess.store.timers.schedule(&g.timer, g.lapseLocked(g.headLocked()))
	}
	return holding
}

// leaveLocked takes w out of its session's ttl group, if it is in it.
// Called under w's shard's mutex.
func (sess *Session) leaveLocked(w *waiter) {
	sess.mu.Lock()
	defer sess.mu.Unlock()
	sess.leaveGroupLocked(w)
}

func (sess *Session) leaveGroupLocked(w *waiter) {
	g := w.grp
	if g == nil {
		return
	}
	if w.lapseAt != 0 {
		for i, l := range g.lapsed {
			if l == w {
				g.lapsed = append(g.lapsed[:i], g.lapsed[i+1:]...)
				break
			}
		}
		w.grp = nil
	} else {
		g.unlinkLocked(w)
	}
	w.lapseAt = 0
}

// groupLocked returns the session's group for ttl, making it if needed.
func (sess *Session) groupLocked(ttl time.Duration) *ttlGroup {
	for _, g := range sess.groups {
		if g.ttl == ttl {
			return g
		}
	}
	g := &ttlGroup{sess: sess, ttl: ttl}
	g.timer.p, g.timer.grp = forTTL, g
	g.timer.timer.Value = &g.timer
	sess.groups = append(sess.groups, g)
	return g
}

// fireGroup acts on the members of g that lapsed by now: a waiter leaves
// its line and its Acquire fails Closed ("the session expired"); a lease
// is lost ("its ttl ran out") and its key goes to the next in line. It
// re-arms g's timer for its next lapse.
func (s *store) fireGroup(g *ttlGroup, now time.Duration, f *firing) {
	sess := g.sess
	var ms []member
	sess.mu.Lock()
	// Those taken keep their mark (lapseAt): a Release that comes before
	// the lapse below has acted still finds the lease lapsed.
	for _, w := range g.lapsed {
		w.grp = nil
		ms = append(ms, member{w, w.c})
	}
	clear(g.lapsed)
	g.lapsed = g.lapsed[:0]
	for w := g.headLocked(); w != nil; w = g.headLocked() {
		at := g.lapseLocked(w)
		if at > now {
			break
		}
		g.unlinkLocked(w)
		w.lapseAt = at
		ms = append(ms, member{w, w.c})
	}
	if g.members.Len() > 0 {
		s.timers.schedule(&g.timer, g.lapseLocked(g.headLocked()))
	} else {
		g.timer.armed = false
	}
	sess.mu.Unlock()
	s.lapse(ms, f)
}

// lapse acts on session members taken out of their group because their
// ttl ran out, each under its shard's mutex.
func (s *store) lapse(ms []member, f *firing) {
	for _, m := range ms {
		sd := m.w.sd
		sd.sh.Lock()
		if m.w.c == m.c { // not given back meanwhile
			e := m.w.entry
			switch {
			case m.w.state == waiting:
				e.Line.Remove(&m.w.line)
				sd.sh.Waiting--
				disarmLocked(&m.w.ticket)
				m.w.state = expired
				f.wake = append(f.wake, wakeup{m.w.ready, expired})
			case e.Holder == m.c:
				if m.w.due != nil {
					m.w.due.leaveLocked(e, m.c)
					m.w.due = nil
				}
				ready, c := s.revokeLocked(sd, e, lostTTL)
				if ready != nil {
					f.wake = append(f.wake, wakeup{ready, holding})
				}
				f.lose = append(f.lose, c)
			}
		}
		sd.sh.Unlock()
	}
	f.flush()
}

// dismiss takes the waiting members of a closed session out of their
// lines, each failing with why; held ones are left to their grants'
// Release.
func (s *store) dismiss(ms []member, why state) {
	var f firing
	for _, m := range ms {
		sd := m.w.sd
		sd.sh.Lock()
		if m.w.c == m.c && m.w.state == waiting {
			m.w.entry.Line.Remove(&m.w.line)
			sd.sh.Waiting--
			disarmLocked(&m.w.ticket)
			m.w.state = why
			f.wake = append(f.wake, wakeup{m.w.ready, why})
		}
		sd.sh.Unlock()
	}
	f.flush()
}

// Grant is a key held by a session: what Acquire returns. Its lease lives
// until Release, the session's Close, its maxHold, or its ttl running out
// unrenewed. Safe for concurrent use.
type Grant struct {
	sess *Session
	h    hold
	prof *profiled // its entry in the holds profile, or nil
	once sync.Once
	err  error
}

// Lease returns the grant's lease. Its fields never change.
func (g *Grant) Lease() *Lease { return &g.h.c.lease }

// Context returns a context that carries the values of Acquire's context
// (not its cancellation or deadline: the grant outlives the call) and ends
// when the lease is lost, with the lost *Error as its cause, or with
// context.Canceled when the grant is released.
func (g *Grant) Context() context.Context { return g.h.c }

// Release lets the key go to the next in line. It acts only on what the
// grant holds: a grant that was lost, released, or closed with its
// session never touches the key's current holder. It returns the lost
// *Error if the lease was lost first, and nil otherwise; later calls
// return the same. Safe for concurrent use.
func (g *Grant) Release() error {
	g.once.Do(func() {
		sess := g.sess
		sess.mu.Lock()
		delete(sess.grants, g)
		var lapsed []member
		w := g.h.w
		if w.lapseAt != 0 || w.grp != nil && w.grp.lapseLocked(w) <= sess.store.since() {
			// It lapsed, and its group's timer has not acted on it yet, or
			// is acting on it: act now (a lapse acts once), so that Release
			// says it was lost, as Renew's doc promises a lapsed lease
			// stays lapsed.
			sess.leaveGroupLocked(w)
			lapsed = append(lapsed, member{w, w.c})
		}
		sess.mu.Unlock()
		if lapsed != nil {
			sess.store.lapse(lapsed, new(firing))
		}
		g.err = sess.store.release(g.h, nil)
		unprofile(g.prof)
	})
	return g.err
}

// Acquire waits in line for key, as Hold does (first come, first served
// with every other holder; Wait, MaxHold, the line's limit, nesting seen
// through ctx), and returns the key's Grant to sess instead of running a
// function. The grant's ttl is the lock's. A waiting Acquire lapses with
// its session too (see Session): it leaves the line and fails Closed,
// exactly "lock NAME: key "KEY": the session expired: closed". It fails
// Closed ("the session is closed") once sess is closed, and as Hold does
// otherwise. Safe for concurrent use.
func (l *Lock) Acquire(ctx context.Context, sess *Session, key any, opts ...Option) (*Grant, error) {
	run := func(context.Context, *Lease) error { return nil } // checked as Hold's fn
	text, set, err := l.check(ctx, key, opts, run)
	if err != nil {
		return nil, err
	}
	name := l.state.name
	if sess == nil {
		return nil, newError(Invalid, name, text, "the session is nil")
	}
	if sess.store != l.store {
		return nil, newError(Invalid, name, text, "the session is another store's")
	}
	switch enclosing(ctx, name, text) {
	case inTransaction:
		return nil, newError(Invalid, name, text, "held inside a transaction")
	case nested:
		return nil, newError(Invalid, name, text, "held inside a hold of the same key")
	}
	sess.mu.Lock()
	closed := sess.closed
	sess.mu.Unlock()
	if closed { // before the key is looked at: not InUse, nor a wait counted
		return nil, newError(Closed, name, text, "the session is closed")
	}
	prof := l.store.profileHold()
	h, err := l.acquire(ctx, text, set, sess)
	if err != nil {
		unprofile(prof)
		return nil, err
	}
	g := &Grant{sess: sess, h: h, prof: prof}
	sess.mu.Lock()
	if sess.closed { // closed as the grant came
		sess.mu.Unlock()
		l.store.release(h, nil)
		unprofile(prof)
		return nil, newError(Closed, name, text, "the session is closed")
	}
	sess.grants[g] = struct{}{}
	sess.mu.Unlock()
	if prof != nil {
		// A lost lease leaves the profile as it is lost: a session that
		// lapsed may never release its grants.
		context.AfterFunc(g.h.c, func() { unprofile(prof) })
	}
	return g, nil
}
