package etcdlocks

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/holdline/locks"
	"github.com/holdline/locks/internal/remote"
)

// session is one etcd lease of a Store, for the locks of one ttl (in
// whole seconds), and the holds whose keys are attached to it. It is
// granted at the first hold that needs it and renewed by a goroutine of
// its own with KeepAliveOnce, a third of a ttl apart, so that the
// session knows when each renewal etcd answered was sent: etcd renewed
// the lease after that, so it lives at least a ttl from then. When no
// renewal has been answered for a ttl less a margin, or etcd says the
// lease is gone, the session is lost: every function it holds a key for
// is cancelled first (before etcd can let the lease lapse and give the
// key to anyone else), every waiter fails, and the Store grants a new
// lease for the next hold.
type session struct {
	s     *Store
	secs  int64         // the ttl asked for, in seconds: the Store's map key
	ready chan struct{} // closed once granted or failed
	err   error         // the grant's error; set before ready is closed

	// Set before ready is closed, then read-only.
	id   clientv3.LeaseID
	ttl  time.Duration // as etcd granted it, never less than asked
	name string        // the lease id in hex, in the keys' names

	mu      sync.Mutex
	renewed time.Time          // when the last renewal etcd answered (or the grant) was sent
	lost    loss               // notLost while alive
	holds   map[*hold]struct{} // waiting or held, with keys attached to the lease
	timer   *time.Timer        // fires at the due time, or later
	stop    chan struct{}      // closed when lost: ends the keepalive goroutine
}

// loss is why a lease was lost, or why a session ended.
type loss uint8

const (
	notLost     loss = iota
	lostTTL          // the etcd lease lapsed, or was given up before it could
	lostClosed       // the Store closed
	lostMaxHold      // revoked at its maxHold (a hold's own, never a session's)
)

// lostError is the error of a lease of key text of lock lost for why,
// with package locks' message.
func lostError(lock, text string, why loss) *locks.Error {
	reason := remote.LostTTL
	switch why {
	case lostClosed:
		reason = remote.LostClosed
	case lostMaxHold:
		reason = remote.LostMaxHold
	}
	return &locks.Error{Kind: locks.Lost, Lock: lock, Key: text, Reason: reason}
}

// endedError is the error of a hold still waiting when its session ended
// for why: a lapsed lease took its place in line with it.
func endedError(lock, text string, why loss) *locks.Error {
	if why == lostClosed {
		return errStoreClosed(lock, text)
	}
	return &locks.Error{Kind: locks.Closed, Lock: lock, Key: text, Reason: remote.Expired}
}

func errStoreClosed(lock, text string) *locks.Error {
	return &locks.Error{Kind: locks.Closed, Lock: lock, Key: text, Reason: remote.StoreClosed}
}

// margin is how long before etcd could let a lease lapse the session
// gives it up: a fifth of the ttl, at most 2 s. The session counts from
// when it sent the renewal etcd answered, which is before etcd renewed,
// so only the two clocks' rates differ, and the margin covers them and
// the time it takes to cancel the functions.
func margin(ttl time.Duration) time.Duration { return min(ttl/5, 2*time.Second) }

// callTimeout bounds one call to etcd made for a hold of a lock of ttl:
// a cluster that cannot answer within a ttl could not keep a lease
// either.
func callTimeout(ttl time.Duration) time.Duration { return max(ttl, time.Second) }

// maxLeaseSecs is the longest lease etcd grants, in seconds (its
// lease.MaxLeaseTTL, about 285 years).
const maxLeaseSecs = 9_000_000_000

// leaseSecs returns the ttl of the etcd lease of locks of ttl (positive):
// ttl in whole seconds, rounded up, and at most etcd's longest, which a
// longer ttl (locks.Forever, say) gets.
func leaseSecs(ttl time.Duration) int64 {
	secs := int64(ttl / time.Second)
	if ttl%time.Second != 0 {
		secs++
	}
	return min(secs, maxLeaseSecs)
}

// session returns the Store's live session for locks of ttl, granting
// its lease if there is none, waiting for the grant until ctx ends. It
// fails Closed once the Store is closed, with ctx's error when ctx ends
// first, and with etcd's when the grant failed.
func (s *Store) session(ctx context.Context, ttl time.Duration) (*session, error) {
	secs := leaseSecs(ttl)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, errStoreClosed("", "")
	}
	ss := s.sessions[secs]
	if ss == nil {
		ss = &session{s: s, secs: secs, ready: make(chan struct{}), holds: make(map[*hold]struct{}), stop: make(chan struct{})}
		s.sessions[secs] = ss
		s.wg.Add(1) // s.quiet is false while s.closed is
		go func() {
			defer s.wg.Done()
			ss.run()
		}()
	}
	s.mu.Unlock()
	select {
	case <-ss.ready:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if ss.err != nil {
		return nil, ss.err
	}
	return ss, nil
}

// forget takes ss out of the Store's sessions, so that the next hold
// grants a new lease.
func (s *Store) forget(ss *session) {
	s.mu.Lock()
	if s.sessions[ss.secs] == ss {
		delete(s.sessions, ss.secs)
	}
	s.mu.Unlock()
}

// run grants the session's lease, then renews it until the session is
// lost or the Store closes.
func (ss *session) run() {
	s := ss.s
	sent := time.Now()
	ctx, cancel := context.WithTimeout(s.closing, callTimeout(time.Duration(ss.secs)*time.Second))
	resp, err := s.client.Grant(ctx, ss.secs)
	cancel()
	if err == nil && resp.TTL <= 0 {
		err = errors.New("etcd granted a lease of ttl " + strconv.FormatInt(resp.TTL, 10))
	}
	if err != nil && s.closing.Err() != nil {
		err = errStoreClosed("", "") // Close ended the grant
	}
	if err != nil {
		ss.err = err
		ss.lost = lostTTL
		s.forget(ss)
		close(ss.ready)
		return
	}
	ss.id = resp.ID
	ss.ttl = time.Duration(resp.TTL) * time.Second
	ss.name = strconv.FormatInt(int64(resp.ID), 16)
	ss.mu.Lock()
	ss.renewed = sent
	ss.timer = time.AfterFunc(time.Until(ss.dueLocked()), ss.fire)
	ss.mu.Unlock()
	close(ss.ready)
	ss.keepAlive()
}

// keepAlive renews the lease a third of a ttl apart (sooner again after a
// failure) until the session is lost or the Store closes.
func (ss *session) keepAlive() {
	s := ss.s
	interval := ss.ttl / 3
	t := time.NewTimer(interval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-ss.stop:
			return
		case <-s.bg.Done():
			return
		}
		sent := time.Now()
		ctx, cancel := context.WithTimeout(s.bg, interval)
		_, err := s.client.KeepAliveOnce(ctx, ss.id)
		cancel()
		switch {
		case err == nil:
			ss.renewedAt(sent)
			t.Reset(interval)
		case errors.Is(err, rpctypes.ErrLeaseNotFound):
			ss.lose(lostTTL) // gone already: nothing to revoke
			return
		default:
			t.Reset(interval / 4)
		}
	}
}

// renewedAt records a renewal etcd answered, sent at at. The timer is
// left as it is: it finds the later due time when it fires, so that a
// renewal costs no timer operation.
func (ss *session) renewedAt(at time.Time) {
	ss.mu.Lock()
	if at.After(ss.renewed) {
		ss.renewed = at
	}
	ss.mu.Unlock()
}

// dueLocked returns when the session gives its lease up unless renewed
// first: a ttl after the last answered renewal was sent, less a margin.
func (ss *session) dueLocked() time.Time {
	return ss.renewed.Add(ss.ttl - margin(ss.ttl))
}

// fire gives the lease up if it is due, or waits again until it is.
func (ss *session) fire() {
	ss.mu.Lock()
	if ss.lost != notLost {
		ss.mu.Unlock()
		return
	}
	if left := time.Until(ss.dueLocked()); left > 0 {
		ss.timer.Reset(left)
		ss.mu.Unlock()
		return
	}
	ss.loseLocked(lostTTL)
	ss.mu.Unlock()
	s := ss.s
	s.forget(ss)
	// etcd may still have the lease (the answers were lost, not the
	// renewals): revoking it lets the next in line go on now rather than
	// at its ttl. If etcd cannot be reached, it lapses unrenewed.
	s.spawn(func() {
		ctx, cancel := context.WithTimeout(s.bg, ss.ttl)
		defer cancel()
		s.client.Revoke(ctx, ss.id)
	})
}

// lose ends the session for why, once.
func (ss *session) lose(why loss) {
	ss.mu.Lock()
	ss.loseLocked(why)
	ss.mu.Unlock()
	ss.s.forget(ss)
}

// loseLocked ends the session for why: every function holding one of
// its keys is cancelled with the Lost error, every waiter fails.
func (ss *session) loseLocked(why loss) {
	if ss.lost != notLost {
		return
	}
	ss.lost = why
	close(ss.stop)
	if ss.timer != nil {
		ss.timer.Stop()
	}
	for h := range ss.holds {
		if h.held {
			h.run.Lose(lostError(h.lock, h.key, why))
		} else if h.cancelWait != nil {
			h.cancelWait(endedError(h.lock, h.key, why))
		}
	}
}

// isLost reports whether the session has ended.
func (ss *session) isLost() bool {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.lost != notLost
}

// join adds h to the session's holds, so that its loss reaches h. It
// reports false when the session is lost already.
func (ss *session) join(h *hold) bool {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.lost != notLost {
		return false
	}
	ss.holds[h] = struct{}{}
	return true
}

// leave takes h out of the session's holds.
func (ss *session) leave(h *hold) {
	ss.mu.Lock()
	delete(ss.holds, h)
	ss.mu.Unlock()
}
