package etcdlocks

import (
	"context"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/holdline/locks"
	"github.com/holdline/locks/internal/remote"
)

// hold is one call of Hold or TryHold: its key in etcd, waiting, then
// held until its function returns.
type hold struct {
	s         *Store
	sess      *session
	lock, key string        // the lock's name and the key's text
	dir       string        // the key's directory in etcd, its line
	name      string        // the hold's own key in that directory
	rev       int64         // its key's create revision: its place in line, then its fence
	maxHold   time.Duration // 0: off
	until     time.Time     // it stands in line by then, or fails; zero: a hold that does not wait, or waits Forever

	// Guarded by sess.mu.
	held       bool                    // granted, and its function's context made
	done       bool                    // its function returned
	run        remote.Hold             // its loss, and its function's context once held
	cancelWait context.CancelCauseFunc // the wait's, until held

	// Set once held, then the hold's goroutine's.
	lease   *locks.Lease
	timer   *time.Timer        // its maxHold's, on this process's clock
	unwatch context.CancelFunc // ends the watch of its own key
	watched chan struct{}      // closed when that watch's goroutine has ended
}

// mine compares true while h's key is in etcd.
func (h *hold) mine() clientv3.Cmp {
	return clientv3.Compare(clientv3.CreateRevision(h.name), "=", h.rev)
}

// first compares true while no key of h's line is older than h's: every
// key of the directory was created at h's revision or later.
func (h *hold) first() clientv3.Cmp {
	return clientv3.Compare(clientv3.CreateRevision(h.dir), ">", h.rev-1).WithPrefix()
}

// granted makes h a holder once etcd has recorded its grant (at revision
// at, its time now and deadline): its lease, its function's context, its
// maxHold's timer and the watch of its key. If h's wait ended as it was
// granted (its ctx, its session, the Store), the key is passed on and
// the wait's error returned: a function never starts under an ended
// context, and the key is never left held by nobody.
func (s *Store) granted(ctx, wctx context.Context, h *hold, now, deadline time.Time, at int64) error {
	ss := h.sess
	h.lease = &locks.Lease{Lock: h.lock, Key: h.key, Fence: uint64(h.rev), Granted: now, Deadline: deadline}
	if ctx.Err() != nil { // asked here, not under ss.mu: the caller's code (wctx follows it a moment later)
		return s.leaveLine(ctx, wctx, h)
	}
	ss.mu.Lock()
	if wctx.Err() != nil {
		ss.mu.Unlock()
		return s.leaveLine(ctx, wctx, h) // which passes the key on
	}
	h.run.Start(ctx, s.mark(h.lock), h.key)
	h.held, h.cancelWait = true, nil
	ss.mu.Unlock()
	if h.maxHold > 0 {
		h.timer = time.AfterFunc(time.Until(deadline), func() { s.expire(h) })
	}
	s.watchHeld(h, at+1)
	return nil
}

// run calls fn holding h's key, and lets the key go however fn ends: by
// returning, panicking or calling runtime.Goexit.
func (s *Store) run(h *hold, fn locks.HoldFunc) error {
	return h.run.Run(fn, h.lease, func() *locks.Error { return s.release(h) })
}

// release lets h's key go once fn has returned, and returns the loss of
// its lease if it was lost (revoked at its maxHold, its session's lease
// lapsed, its key deleted, the Store closed), for Hold to wrap fn's error
// in. A delete etcd does not answer is retried in the background until
// the session's lease is gone.
func (s *Store) release(h *hold) *locks.Error {
	ss := h.sess
	ss.mu.Lock()
	h.done = true
	delete(ss.holds, h)
	lost := h.run.Lost()
	ss.mu.Unlock()
	if h.timer != nil {
		h.timer.Stop()
	}
	h.unwatch()
	<-h.watched
	if lost == nil {
		cctx, stop := s.callCtx(nil, callTimeout(ss.ttl))
		resp, err := s.client.Txn(cctx).If(h.mine()).Then(clientv3.OpDelete(h.name)).Commit()
		stop()
		switch {
		case err != nil:
			s.deleteLater(ss, h.name, h.rev)
		case !resp.Succeeded: // gone before fn returned
			lost = lostError(h.lock, h.key, s.whyGone(h))
		}
	}
	return lost
}

// expire revokes h at its maxHold, on this process's clock: its
// function's context is cancelled first, then its key deleted, which
// gives the key to the next in line at once.
func (s *Store) expire(h *hold) {
	ss := h.sess
	ss.mu.Lock()
	if h.done || h.run.Lost() != nil {
		ss.mu.Unlock()
		return
	}
	h.run.Lose(lostError(h.lock, h.key, lostMaxHold))
	ss.mu.Unlock()
	s.deleteLater(ss, h.name, h.rev)
}

// whyGone says why h's key left etcd while h held it, if not by h: its
// session's end; a revocation by the next in line, for a hold with a
// maxHold near its deadline; otherwise its lease's lapse, or a delete by
// another hand, which ends it the same way.
func (s *Store) whyGone(h *hold) loss {
	ss := h.sess
	ss.mu.Lock()
	why := ss.lost
	ss.mu.Unlock()
	switch {
	case why != notLost:
		return why
	case h.maxHold > 0 && !time.Now().Before(h.lease.Deadline.Add(-s.skew)):
		return lostMaxHold
	}
	return lostTTL
}

// watchHeld watches h's key from revision from while h holds it, and
// loses h's lease if the key is deleted by another hand than h's: the
// next in line revoking it on a clock ahead of h's by more than the
// skew, etcd letting its lease lapse, an operator. Its goroutine ends on
// h.unwatch, or when the Store closes.
func (s *Store) watchHeld(h *hold, from int64) {
	ctx, cancel := context.WithCancel(clientv3.WithRequireLeader(s.bg))
	h.unwatch, h.watched = cancel, make(chan struct{})
	go func() {
		defer close(h.watched)
		backoff := 10 * time.Millisecond
		for {
			for wr := range s.client.Watch(ctx, h.name, clientv3.WithRev(from), clientv3.WithFilterPut()) {
				for _, ev := range wr.Events {
					if ev.Type == mvccpb.DELETE {
						s.deleted(h)
						return
					}
				}
			}
			// The watch ended: look whether the key is still there, and
			// watch again from there.
			for {
				if ctx.Err() != nil {
					return
				}
				gctx, stop := context.WithTimeout(ctx, callTimeout(h.sess.ttl))
				resp, err := s.client.Get(gctx, h.name, clientv3.WithCountOnly())
				stop()
				if err == nil {
					if resp.Count == 0 {
						s.deleted(h)
						return
					}
					from = resp.Header.Revision + 1
					backoff = 10 * time.Millisecond
					break
				}
				select {
				case <-time.After(backoff):
				case <-ctx.Done():
					return
				}
				backoff = min(2*backoff, time.Second)
			}
		}
	}()
}

// deleted loses h's lease as its key was found deleted while it held it.
func (s *Store) deleted(h *hold) {
	why := s.whyGone(h)
	ss := h.sess
	ss.mu.Lock()
	if !h.done {
		h.run.Lose(lostError(h.lock, h.key, why))
	}
	ss.mu.Unlock()
}
