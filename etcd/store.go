package etcdlocks

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/holdline/locks"
)

// DefaultMaxClockSkew is how far apart the wall clocks of the processes
// sharing a prefix may be unless MaxClockSkew says otherwise.
const DefaultMaxClockSkew = time.Second

// closeWait bounds how long Close waits for etcd to revoke the Store's
// leases.
const closeWait = 5 * time.Second

// Option is a setting of a Store, given to Open.
type Option func(*config)

type config struct {
	skew time.Duration
	bad  string // what is wrong with an option, in words
}

// MaxClockSkew sets how far apart the wall clocks of the processes that
// share the prefix may be; the default is DefaultMaxClockSkew. A holder
// past its maxHold is revoked by the next in line only once the holder's
// deadline, stored with its key in wall-clock time, is d past on the
// reader's wall clock, so that the holder, which cancels its function on
// its own clock at the deadline, always does so first while the clocks
// are within d of each other. A live holder gives its key up itself at
// its deadline, so d delays only the revocation of a holder whose
// process is stuck or cut off. d must not be negative: Open fails
// Invalid.
func MaxClockSkew(d time.Duration) Option {
	return func(c *config) {
		if d < 0 {
			c.bad = "the clock skew is negative (" + d.String() + ")"
			return
		}
		c.skew = d
	}
}

// Store holds keyed locks in etcd, under one prefix, for the goroutines
// of this process: its Locks are locks.Lockers, and every Store on the
// same prefix of the same cluster, in this process or another, shares
// their keys. Make one with Open and Close it when done. Safe for
// concurrent use.
//
// A Store owns one etcd lease per distinct ttl of its locks (one for most
// programs), granted at the first hold that needs it and kept alive in
// the background, every key of its holds attached to it; a goroutine
// renews each lease until it is lost or the Store closed.
type Store struct {
	client *clientv3.Client
	prefix string // ends with "/"
	skew   time.Duration

	bg       context.Context // the Store's own calls': cancelled at the end of Close
	bgCancel context.CancelFunc
	closing  context.Context // a lease's grant: cancelled as Close begins
	closeNow context.CancelFunc
	seq      atomic.Uint64 // numbers each hold's key

	mu       sync.Mutex
	sessions map[int64]*session // by ttl in seconds
	closed   bool               // no hold starts
	quiet    bool               // no background work starts (Close is waiting for it)
	done     chan struct{}      // closed when Close has finished
	wg       sync.WaitGroup     // background work: keepalives, deletes, revokes
}

// Open returns a Store holding locks under prefix in the etcd cluster of
// client. Every key of its holds lives under prefix + "/", which should
// hold nothing else; a trailing "/" of prefix is dropped. client stays
// the caller's: the Store never closes it, and must be closed before it.
// Open makes no call to etcd. It fails Invalid for a nil client or a bad
// option.
func Open(client *clientv3.Client, prefix string, opts ...Option) (*Store, error) {
	if client == nil {
		return nil, &locks.Error{Kind: locks.Invalid, Reason: "the etcd client is nil"}
	}
	c := config{skew: DefaultMaxClockSkew}
	for _, o := range opts {
		if o == nil {
			return nil, &locks.Error{Kind: locks.Invalid, Reason: "an Option must be made by this package"}
		}
		o(&c)
		if c.bad != "" {
			return nil, &locks.Error{Kind: locks.Invalid, Reason: c.bad}
		}
	}
	s := &Store{
		client:   client,
		prefix:   strings.TrimSuffix(prefix, "/") + "/",
		skew:     c.skew,
		sessions: make(map[int64]*session),
		done:     make(chan struct{}),
	}
	s.bg, s.bgCancel = context.WithCancel(context.Background())
	s.closing, s.closeNow = context.WithCancel(s.bg)
	return s, nil
}

// Close closes the Store: every Hold still waiting fails Closed ("the
// store is closed"), every function still running under one of its
// leases sees its context end (the lease is lost, "its store closed",
// and its Hold fails Lost once the function returns), and every later
// OpenLock, Hold and TryHold fails Closed. A lease's grant in flight
// gives up at once, its holds failing Closed. It revokes the Store's etcd
// leases, which deletes every key of its holds at once, waiting for etcd
// 5 s at most (without it, the keys go at the leases' ttl), and waits for
// the Store's own goroutines (its leases' keepalives, its releases in the
// background) to end; the watch a running hold keeps on its key ends with
// the close too, and that Hold waits for it once its function returns. It
// does not wait for running functions,
// and does not close the etcd client. Idempotent: every call returns
// once the Store is closed; it returns nil, or the error of revoking a
// lease.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		<-s.done
		return nil
	}
	s.closed = true
	sessions := s.sessions
	s.sessions = nil
	s.mu.Unlock()
	s.closeNow() // a grant in flight gives up: its waiters fail Closed

	var first error
	ctx, cancel := context.WithTimeout(s.bg, closeWait) // for all the revokes together
	for _, ss := range sessions {
		<-ss.ready
		if ss.err != nil {
			continue
		}
		ss.lose(lostClosed)
		if _, err := s.client.Revoke(ctx, ss.id); err != nil && first == nil {
			first = err
		}
	}
	cancel()
	s.mu.Lock()
	s.quiet = true
	s.mu.Unlock()
	s.bgCancel()
	s.wg.Wait()
	close(s.done)
	return first
}

// spawn runs f on a goroutine of the Store's, unless Close has stopped
// them; f must end soon once s.bg ends.
func (s *Store) spawn(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.quiet {
		return
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		f()
	}()
}

// callCtx returns the context of one etcd call made for a caller whose
// context is ctx: the Store's own (carrying none of the caller's values,
// gRPC metadata included), ended when ctx ends or after d, whichever is
// first. stop releases it.
func (s *Store) callCtx(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	cctx, cancel := context.WithTimeout(s.bg, d)
	if ctx == nil {
		return cctx, cancel
	}
	unhook := context.AfterFunc(ctx, cancel)
	return cctx, func() {
		unhook()
		cancel()
	}
}

// deleteLater deletes key k, created at revision rev, of session ss, in
// the background: for a hold whose own delete failed in the transport,
// or whose put may have happened unseen. It retries until etcd answers,
// the session is lost (its keys go with its lease), or the Store closes.
func (s *Store) deleteLater(ss *session, k string, rev int64) {
	s.spawn(func() {
		wait := 20 * time.Millisecond
		for {
			if ss.isLost() {
				return
			}
			ctx, cancel := context.WithTimeout(s.bg, callTimeout(ss.ttl))
			var err error
			if rev > 0 {
				_, err = s.client.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(k), "=", rev)).
					Then(clientv3.OpDelete(k)).Commit()
			} else {
				_, err = s.client.Delete(ctx, k)
			}
			cancel()
			if err == nil {
				return
			}
			select {
			case <-time.After(wait):
			case <-s.bg.Done():
				return
			}
			wait = min(2*wait, time.Second)
		}
	})
}

// etcdError is the error of a hold whose call to etcd failed (etcd
// unreachable within the call's time, a request refused): it names the
// lock and the key and wraps etcd's error.
type etcdError struct {
	lock, key string
	err       error
}

// Error names the lock and the key, then etcd's error.
func (e *etcdError) Error() string {
	return "lock " + e.lock + ": key " + strconv.Quote(e.key) + ": etcd: " + e.err.Error()
}

// Unwrap returns etcd's error, for errors.Is and errors.As.
func (e *etcdError) Unwrap() error { return e.err }
