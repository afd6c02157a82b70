package etcdlocks

import (
	"context"
	"errors"
	"strconv"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/holdline/locks"
	"github.com/holdline/locks/internal/remote"
)

// how says what a hold does when the key is held.
type how uint8

const (
	standInLine how = iota // Hold: wait in line, up to its Wait
	noWait                 // Hold with Wait(0): fail InUse
	try                    // TryHold: answer (false, nil)
)

// lastCall bounds the call a hold makes as its wait ends.
const lastCall = time.Second

// reachLine is the least time a hold that waits has to get into line: a
// few round trips to an etcd that is slow or electing a leader, however
// short the wait.
const reachLine = locks.DefaultWait

// errGone says a waiter's key is no longer in etcd: its lease lapsed, or
// another hand deleted it.
var errGone = errors.New("the waiter's key is gone")

// acquire joins the line of key text of lock and returns the hold once it
// holds the key, or nil and the error of the hold; TryHold's nil, nil
// means the key was held.
func (s *Store) acquire(ctx context.Context, lock, text string, st locks.Settings, how how) (*hold, error) {
	begin := time.Now() // the wait counts from the call
	// A hold that waits stands in line within its wait (or reachLine,
	// for a shorter wait), or fails with etcd's error: the lease's grant
	// and the join are bounded by that, not only by a call's timeout (the
	// lock's ttl, an hour for some).
	lctx, until := ctx, time.Time{}
	if how == standInLine && st.Wait < locks.Forever {
		until = begin.Add(max(st.Wait, reachLine))
		var cancel context.CancelFunc
		lctx, cancel = context.WithDeadline(ctx, until)
		defer cancel()
	}
	for attempt := 0; ; attempt++ {
		ss, err := s.session(lctx, st.TTL)
		if err != nil {
			return nil, s.callFailed(ctx, ctx, lock, text, err)
		}
		h := &hold{s: s, sess: ss, lock: lock, key: text, dir: dir(s.prefix, lock, text), maxHold: st.MaxHold, until: until}
		h.name = h.dir + ss.name + "." + strconv.FormatUint(s.seq.Add(1), 16)
		// A session's loss ends the wait under the session's mutex: a
		// context that follows ctx, whose cancel calls nothing of ctx's.
		wctx, cancel, stop := remote.Follow(ctx)
		h.cancelWait = cancel
		if !ss.join(h) { // lost as it was found: a new lease, once or twice
			stop()
			cancel(nil)
			if attempt < 2 {
				continue
			}
			return nil, endedError(lock, text, lostTTL)
		}
		got, err := s.enter(ctx, wctx, h, st, how, begin)
		stop()
		cancel(nil)
		if got == nil {
			ss.leave(h)
		}
		if errors.Is(err, rpctypes.ErrLeaseNotFound) && attempt < 2 && ctx.Err() == nil {
			// etcd let the lease lapse before the session saw it: the
			// session is lost, and the hold joins under a new one.
			ss.lose(lostTTL)
			continue
		}
		return got, err
	}
}

// enter joins the line for h's key in one transaction: if the key's
// directory is empty, h's key goes in as the holder's; otherwise a
// waiting hold puts its key in as a waiter's, learning in the same
// transaction how many stand in line and who is just ahead, and a hold
// that does not wait reads the holder.
func (s *Store) enter(ctx, wctx context.Context, h *hold, st locks.Settings, how how, begin time.Time) (*hold, error) {
	ss := h.sess
	free := clientv3.Compare(clientv3.CreateRevision(h.dir), "=", 0).WithPrefix()
	var orElse []clientv3.Op
	if how == standInLine {
		orElse = []clientv3.Op{
			clientv3.OpGet(h.dir, clientv3.WithPrefix(), clientv3.WithCountOnly()),
			clientv3.OpGet(h.dir, clientv3.WithLastCreate()...),
			clientv3.OpPut(h.name, waitingValue, clientv3.WithLease(ss.id)),
		}
	} else {
		orElse = []clientv3.Op{clientv3.OpGet(h.dir, clientv3.WithFirstCreate()...)}
	}
	// A holder past its maxHold found by a hold that does not wait is
	// revoked and the key tried again; twice at most, each a revocation
	// another hold may have beaten it to.
	for revoked := 0; ; revoked++ {
		// Read before the call, so that the grant's time and deadline are
		// never later than the holder's real ones.
		now := time.Now()
		deadline := deadlineOf(now, st.MaxHold)
		put := clientv3.OpPut(h.name, heldValue(now, deadline), clientv3.WithLease(ss.id))
		bound := callTimeout(ss.ttl)
		if !h.until.IsZero() {
			bound = min(bound, time.Until(h.until))
		}
		cctx, stop := s.callCtx(wctx, bound)
		resp, err := s.client.Txn(cctx).If(free).Then(put).Else(orElse...).Commit()
		stop()
		if err != nil {
			if !errors.Is(err, rpctypes.ErrLeaseNotFound) { // then nothing went in
				s.deleteLater(ss, h.name, 0) // it may have gone in unseen
			}
			return nil, s.callFailed(ctx, wctx, h.lock, h.key, err)
		}
		if resp.Succeeded {
			h.rev = resp.Header.Revision
			if err := s.granted(ctx, wctx, h, now, deadline, resp.Header.Revision); err != nil {
				return nil, err
			}
			return h, nil
		}
		if how == standInLine {
			return s.join(ctx, wctx, h, st, resp, begin)
		}
		holder := resp.Responses[0].GetResponseRange().Kvs
		if len(holder) == 1 && revoked < 2 && revocable(parseRecord(holder[0].Value).revocableAt(s.skew)) {
			if err := s.revoke(wctx, holder[0]); err != nil {
				return nil, s.callFailed(ctx, wctx, h.lock, h.key, err)
			}
			continue
		}
		if how == try {
			return nil, nil
		}
		return nil, &locks.Error{Kind: locks.InUse, Lock: h.lock, Key: h.key, Reason: "held past the hold's wait"}
	}
}

// join follows the transaction that put h's key in line as a waiter's:
// past the line's limit it takes the key out again and fails Limit, and
// otherwise waits for its turn.
func (s *Store) join(ctx, wctx context.Context, h *hold, st locks.Settings, resp *clientv3.TxnResponse, begin time.Time) (*hold, error) {
	h.rev = resp.Header.Revision
	inLine := resp.Responses[0].GetResponseRange().Count // the holder and the waiters before h
	ahead := resp.Responses[1].GetResponseRange().Kvs
	if inLine-1 >= locks.MaxWaiters || len(ahead) == 0 {
		s.takeOut(h)
		if len(ahead) == 0 { // cannot be: the directory was not empty
			return nil, &etcdError{lock: h.lock, key: h.key, err: errors.New("the line was empty and not empty in one transaction")}
		}
		return nil, &locks.Error{Kind: locks.Limit, Lock: h.lock, Key: h.key, Reason: "the line of waiters is full"}
	}
	if err := s.await(ctx, wctx, h, st, ahead[0], resp.Header.Revision, begin); err != nil {
		return nil, err
	}
	return h, nil
}

// await waits in line until h holds its key (nil), its wait passes, its
// ctx ends or its session does. It watches the key just ahead of h's:
// when that one goes, h checks whether it is first, in the transaction
// that records its grant if so, or finds the next one ahead. The key
// ahead, once it holds, carries its maxHold deadline: past it and the
// clocks' skew, h revokes it.
func (s *Store) await(ctx, wctx context.Context, h *hold, st locks.Settings, ahead *mvccpb.KeyValue, rev int64, begin time.Time) error {
	var expired <-chan time.Time
	if st.Wait < locks.Forever {
		t := time.NewTimer(st.Wait - time.Since(begin))
		defer t.Stop()
		expired = t.C
	}
	retry := time.NewTimer(0)
	<-retry.C
	defer retry.Stop()
	backoff := 10 * time.Millisecond
	for {
		if ahead == nil {
			granted, next, at, err := s.check(ctx, wctx, h)
			switch {
			case granted:
				return err
			case errors.Is(err, errGone):
				return endedError(h.lock, h.key, lostTTL)
			case err != nil:
				// etcd did not answer: try again, while the wait lasts.
				retry.Reset(backoff)
				backoff = min(2*backoff, time.Second)
				select {
				case <-retry.C:
					continue
				case <-expired:
					return s.timedOut(ctx, wctx, h)
				case <-wctx.Done():
					return s.leaveLine(ctx, wctx, h)
				}
			}
			ahead, rev = next, at
			backoff = 10 * time.Millisecond
		}
		var err error
		if ahead, err = s.watchAhead(ctx, wctx, h, ahead, rev, expired); err != nil {
			return err
		}
	}
}

// watchAhead watches the key ahead of h's, revision rev seen, until it is
// gone (nil, nil: look again), or h's wait passes or its ctx ends (the
// hold's error).
func (s *Store) watchAhead(ctx, wctx context.Context, h *hold, ahead *mvccpb.KeyValue, rev int64, expired <-chan time.Time) (*mvccpb.KeyValue, error) {
	watchCtx, unwatch := context.WithCancel(clientv3.WithRequireLeader(s.bg))
	defer unwatch()
	events := s.client.Watch(watchCtx, string(ahead.Key), clientv3.WithRev(rev+1))
	var revokeAt <-chan time.Time
	var revokeTimer *time.Timer
	defer func() {
		if revokeTimer != nil {
			revokeTimer.Stop()
		}
	}()
	arm := func() {
		if revokeTimer != nil {
			revokeTimer.Stop()
			revokeTimer, revokeAt = nil, nil
		}
		if at := parseRecord(ahead.Value).revocableAt(s.skew); !at.IsZero() {
			revokeTimer = time.NewTimer(time.Until(at))
			revokeAt = revokeTimer.C
		}
	}
	arm()
	for {
		select {
		case wr, ok := <-events:
			if !ok || wr.Err() != nil {
				return nil, nil // the watch ended (etcd lost its leader, compacted): look again
			}
			for _, ev := range wr.Events {
				if ev.Type == mvccpb.DELETE {
					return nil, nil
				}
				ahead = ev.Kv // it holds now, and says until when
			}
			arm()
		case <-revokeAt:
			// Its holder's function was cancelled on its own clock at its
			// deadline: at least the skew ago.
			if err := s.revoke(wctx, ahead); err != nil && wctx.Err() == nil {
				// Not answered: look again, which tries again if still due.
				revokeAt = time.After(50 * time.Millisecond)
				continue
			}
			return nil, nil
		case <-expired:
			return nil, s.timedOut(ctx, wctx, h)
		case <-wctx.Done():
			return nil, s.leaveLine(ctx, wctx, h)
		}
	}
}

// check asks etcd, in one transaction, whether h's key is first in its
// line, and if so records h's grant with it. If not, it returns the key
// just ahead and the revision it was read at; errGone if h's key is gone.
func (s *Store) check(ctx, wctx context.Context, h *hold) (granted bool, ahead *mvccpb.KeyValue, rev int64, err error) {
	now := time.Now()
	deadline := deadlineOf(now, h.maxHold)
	cctx, stop := s.callCtx(wctx, callTimeout(h.sess.ttl))
	resp, err := s.client.Txn(cctx).If(h.mine(), h.first()).
		Then(clientv3.OpPut(h.name, heldValue(now, deadline), clientv3.WithIgnoreLease())).
		Else(
			clientv3.OpGet(h.name, clientv3.WithCountOnly()),
			clientv3.OpGet(h.dir, append(clientv3.WithLastCreate(), clientv3.WithMaxCreateRev(h.rev-1))...),
		).Commit()
	stop()
	if err != nil {
		return false, nil, 0, err
	}
	if resp.Succeeded {
		return true, nil, 0, s.granted(ctx, wctx, h, now, deadline, resp.Header.Revision)
	}
	if resp.Responses[0].GetResponseRange().Count == 0 {
		return false, nil, 0, errGone
	}
	kvs := resp.Responses[1].GetResponseRange().Kvs
	if len(kvs) == 0 { // cannot be: h was not first
		return false, nil, 0, errors.New("no key ahead of a key that is not first")
	}
	return false, kvs[0], resp.Header.Revision, nil
}

// timedOut ends h's wait as it passes: if h's key came first meanwhile,
// the grant stands; otherwise h's key leaves the line and the hold fails
// InUse, naming the holder's fence and how long it had held the key,
// both read in the same transaction.
func (s *Store) timedOut(ctx, wctx context.Context, h *hold) error {
	now := time.Now()
	deadline := deadlineOf(now, h.maxHold)
	// The wait is over: etcd gets a second to say whether the key came
	// at the end; past it, the key goes in the background, and the hold
	// fails InUse.
	cctx, stop := s.callCtx(nil, min(callTimeout(h.sess.ttl), lastCall))
	resp, err := s.client.Txn(cctx).If(h.mine(), h.first()).
		Then(clientv3.OpPut(h.name, heldValue(now, deadline), clientv3.WithIgnoreLease())).
		Else(clientv3.OpDelete(h.name), clientv3.OpGet(h.dir, clientv3.WithFirstCreate()...)).
		Commit()
	stop()
	inUse := &locks.Error{Kind: locks.InUse, Lock: h.lock, Key: h.key, Reason: "held past the hold's wait"}
	switch {
	case err != nil:
		s.deleteLater(h.sess, h.name, h.rev)
	case resp.Succeeded:
		return s.granted(ctx, wctx, h, now, deadline, resp.Header.Revision)
	default:
		if kvs := resp.Responses[1].GetResponseRange().Kvs; len(kvs) == 1 {
			inUse.HolderFence = uint64(kvs[0].CreateRevision)
			inUse.HeldFor = parseRecord(kvs[0].Value).heldFor(time.Now())
		}
	}
	return inUse
}

// leaveLine ends h's wait as wctx ends: the caller's ctx (Canceled), or
// its session or Store (the error they ended it with). When the caller
// left, h's key is deleted in the background, so that the hold returns
// at once; a grant racing with that passes to the next in line when the
// key goes. A lost session's keys go with its lease.
func (s *Store) leaveLine(ctx, wctx context.Context, h *hold) error {
	if ctx.Err() != nil {
		if !h.sess.isLost() {
			s.deleteLater(h.sess, h.name, h.rev)
		}
		return locks.ContextError(h.lock, h.key, ctx)
	}
	var le *locks.Error
	if errors.As(context.Cause(wctx), &le) {
		return le
	}
	return endedError(h.lock, h.key, lostTTL)
}

// takeOut deletes h's key at once, or in the background if etcd does not
// answer.
func (s *Store) takeOut(h *hold) {
	cctx, stop := s.callCtx(nil, callTimeout(h.sess.ttl))
	_, err := s.client.Txn(cctx).If(h.mine()).Then(clientv3.OpDelete(h.name)).Commit()
	stop()
	if err != nil {
		s.deleteLater(h.sess, h.name, h.rev)
	}
}

// revoke deletes the key of a holder past its maxHold, in a transaction
// guarded by the revision of the record it was read with: a holder that
// let go, or whose key changed since, is left alone.
func (s *Store) revoke(ctx context.Context, kv *mvccpb.KeyValue) error {
	cctx, stop := s.callCtx(ctx, 5*time.Second)
	defer stop()
	k := string(kv.Key)
	_, err := s.client.Txn(cctx).If(clientv3.Compare(clientv3.ModRevision(k), "=", kv.ModRevision)).
		Then(clientv3.OpDelete(k)).Commit()
	return err
}

// callFailed returns the error of a hold whose call to etcd failed with
// err: Canceled if the caller's ctx ended, the error its session or
// Store ended wctx with, or err named by the lock and the key.
func (s *Store) callFailed(ctx, wctx context.Context, lock, text string, err error) error {
	if ctx.Err() != nil {
		return locks.ContextError(lock, text, ctx)
	}
	var le *locks.Error
	if errors.As(context.Cause(wctx), &le) || errors.As(err, &le) {
		out := *le
		out.Lock, out.Key = lock, text
		return &out
	}
	return &etcdError{lock: lock, key: text, err: err}
}

// deadlineOf returns the deadline of a grant at now, the zero Time
// without a maxHold.
func deadlineOf(now time.Time, maxHold time.Duration) time.Time {
	if maxHold == 0 {
		return time.Time{}
	}
	return now.Add(maxHold)
}

// revocable reports whether a holder revocable at at (zero: never) is so
// now.
func revocable(at time.Time) bool { return !at.IsZero() && !time.Now().Before(at) }
