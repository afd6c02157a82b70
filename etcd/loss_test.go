package etcdlocks_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/holdline/locks"
	etcdlocks "github.com/holdline/locks/etcd"
	"github.com/holdline/locks/internal/lockertest"
)

// childEnv names the endpoints and prefix (endpoints;prefix) a child
// process of TestKilledHolder holds a key under.
const childEnv = "ETCDLOCKS_TEST_CHILD"

// childTTL is the ttl of the child's lease: the least etcd grants with
// the tests' election timeout.
const childTTL = time.Second

// childHold holds key 9 of lock invoices in etcd until killed.
func childHold() {
	endpoints, prefix, _ := strings.Cut(os.Getenv(childEnv), ";")
	lockertest.ChildHold(func() (locks.Locker, error) {
		cli, err := clientv3.New(clientv3.Config{Endpoints: strings.Split(endpoints, ","), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			return nil, err
		}
		s, err := etcdlocks.Open(cli, prefix)
		if err != nil {
			return nil, err
		}
		return s.OpenLock("invoices", locks.TTL(childTTL))
	})
}

// A holder process killed with SIGKILL: its lease is no longer renewed,
// and the key goes on within its ttl, to a waiter of another process,
// with a higher fence.
func TestKilledHolder(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child process")
	}
	prefix := newPrefix(t)
	child := lockertest.StartChild(t, childEnv+"="+strings.Join(shared.endpoints, ",")+";"+prefix, 60*time.Second)
	cli := newClient(t, shared.endpoints)
	o := openLock(t, open(t, cli, prefix), "invoices", locks.TTL(childTTL))
	after := child.Killed(t, o, func() {
		lockertest.Eventually(t, "a waiter", func() bool { return count(t, cli, prefix) == 2 })
	})
	t.Logf("the key went on %v after the kill (ttl %v)", after, childTTL)
	// etcd checks for lapsed leases every 500 ms, and revokes them
	// through raft: the key goes on past the ttl by up to that.
	if after > childTTL+time.Second {
		t.Fatalf("the key went on %v after the kill, ttl %v", after, childTTL)
	}
}

// A process cut from etcd (its client closed under it) while it holds a
// key: its function's context ends, "its ttl ran out", before the ttl
// from its last renewal, and so before etcd lets the lease lapse; a
// waiter of another process then gets the key, with a higher fence, and
// the cut holder's Hold fails lost.
func TestCutFromEtcd(t *testing.T) {
	prefix := newPrefix(t)
	cut := newClient(t, shared.endpoints)
	l := openLock(t, open(t, cut, prefix), "invoices", locks.TTL(time.Second))
	cli := newClient(t, shared.endpoints)
	o := openLock(t, open(t, cli, prefix), "invoices")

	r := lockertest.Start(context.Background(), l, 9)
	ls, fctx := r.Held(t)
	w := lockertest.Start(context.Background(), o, 9, locks.Wait(time.Minute))
	lockertest.Eventually(t, "a waiter", func() bool { return count(t, cli, prefix) == 2 })

	cutAt := time.Now()
	cut.Close()
	<-fctx.Done()
	ended := time.Since(cutAt)
	lockertest.WantMessage(t, context.Cause(fctx), `lock invoices: key "9": the lease was lost: its ttl ran out`)
	wls, _ := w.Held(t)
	granted := wls.Granted.Sub(cutAt)
	t.Logf("cut: the function's context ended after %v, the waiter got the key after %v (ttl 1s)", ended, granted)
	if ended >= time.Second {
		t.Fatalf("the cut holder's context ended %v after the cut, at or past the ttl", ended)
	}
	if granted <= ended {
		t.Fatalf("the waiter got the key %v after the cut, before the cut holder's context ended (%v)", granted, ended)
	}
	if wls.Fence <= ls.Fence {
		t.Fatalf("fence %d after %d", wls.Fence, ls.Fence)
	}
	err := r.Result(t, nil)
	lockertest.WantMessage(t, err, `lock invoices: key "9": the lease was lost: its ttl ran out`)
	if !errors.Is(err, locks.ErrLost) {
		t.Fatal(err)
	}
	if err := w.Result(t, nil); err != nil {
		t.Fatal(err)
	}
	// The cut process's later holds fail, naming etcd's error.
	err = l.Hold(context.Background(), 9, lockertest.Noop)
	if err == nil || !strings.HasPrefix(err.Error(), `lock invoices: key "9": etcd: `) {
		t.Fatalf("a hold through a closed client: %v", err)
	}
}

// A waiter whose process is cut from etcd fails closed when its lease is
// given up ("the session expired"), and leaves the line with it.
func TestCutWaiterExpires(t *testing.T) {
	prefix := newPrefix(t)
	cli := newClient(t, shared.endpoints)
	l := openLock(t, open(t, cli, prefix), "invoices")
	cut := newClient(t, shared.endpoints)
	o := openLock(t, open(t, cut, prefix), "invoices", locks.TTL(time.Second))
	r := lockertest.Start(context.Background(), l, 9)
	r.Held(t)
	w := lockertest.Start(context.Background(), o, 9, locks.Wait(time.Minute))
	lockertest.Eventually(t, "a waiter", func() bool { return count(t, cli, prefix) == 2 })
	cut.Close()
	lockertest.WantMessage(t, w.Wait(t), `lock invoices: key "9": the session expired: closed`)
	lockertest.Eventually(t, "the waiter's key gone with its lease", func() bool { return count(t, cli, prefix) == 1 })
	if err := r.Result(t, nil); err != nil {
		t.Fatal(err)
	}
}

// A held key deleted by another hand (an operator, a revoker whose clock
// runs ahead): the holder's function's context ends at once, and its Hold
// fails lost.
func TestKeyDeletedUnderHolder(t *testing.T) {
	prefix := newPrefix(t)
	cli := newClient(t, shared.endpoints)
	l := openLock(t, open(t, cli, prefix), "invoices")
	r := lockertest.Start(context.Background(), l, 9)
	_, fctx := r.Held(t)
	if _, err := cli.Delete(context.Background(), prefix+"/", clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-fctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the function's context did not end")
	}
	lockertest.WantMessage(t, context.Cause(fctx), `lock invoices: key "9": the lease was lost: its ttl ran out`)
	lockertest.WantMessage(t, r.Result(t, nil), `lock invoices: key "9": the lease was lost: its ttl ran out`)
}

// A Store's lease revoked by another hand: a function running under it
// sees its context end; a hold after it finds it gone and joins under a
// new lease.
func TestLeaseRevokedByAnotherHand(t *testing.T) {
	prefix := newPrefix(t)
	cli := newClient(t, shared.endpoints)
	l := openLock(t, open(t, cli, prefix), "invoices")
	ctx := context.Background()
	// leaseOf returns the lease of the one key under the prefix.
	leaseOf := func() clientv3.LeaseID {
		t.Helper()
		resp, err := cli.Get(ctx, prefix+"/", clientv3.WithPrefix())
		if err != nil || len(resp.Kvs) != 1 {
			t.Fatalf("the keys under the prefix: %v, %v", resp, err)
		}
		return clientv3.LeaseID(resp.Kvs[0].Lease)
	}
	r := lockertest.Start(ctx, l, 9)
	_, fctx := r.Held(t)
	if _, err := cli.Revoke(ctx, leaseOf()); err != nil {
		t.Fatal(err)
	}
	<-fctx.Done()
	lockertest.WantMessage(t, r.Result(t, nil), `lock invoices: key "9": the lease was lost: its ttl ran out`)
	for range 3 {
		var id clientv3.LeaseID
		if err := l.Hold(ctx, 9, func(context.Context, *locks.Lease) error { id = leaseOf(); return nil }); err != nil {
			t.Fatal(err)
		}
		if _, err := cli.Revoke(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
}

// TestCloseWithAGrantInFlight: Close while a lease's grant waits for an
// etcd that does not answer returns at once, not at the grant's own
// timeout (the lock's ttl, here 30 s), and the hold waiting for that
// grant fails Closed.
func TestCloseWithAGrantInFlight(t *testing.T) {
	ports, err := freePorts(1) // nothing listens there
	if err != nil {
		t.Fatal(err)
	}
	s := open(t, newClient(t, []string{fmt.Sprintf("http://127.0.0.1:%d", ports[0])}), newPrefix(t))
	l := openLock(t, s, "invoices", locks.TTL(30*time.Second))
	held := make(chan error, 1)
	go func() { held <- l.Hold(context.Background(), 9, lockertest.Noop, locks.Wait(time.Hour)) }()
	lockertest.Eventually(t, "the grant in flight", func() bool { return etcdlocks.Granting(s) })
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close waits for the grant in flight")
	}
	lockertest.WantMessage(t, <-held, `lock invoices: key "9": the store is closed: closed`)
}

// TestLongTTLs: a lock's ttl past what etcd grants (locks.Forever, 290
// years) holds under etcd's longest lease, where it asked for a negative
// one or one etcd refused.
func TestLongTTLs(t *testing.T) {
	cli := newClient(t, shared.endpoints)
	prefix := newPrefix(t)
	s := open(t, cli, prefix)
	for _, ttl := range []time.Duration{locks.Forever, 290 * 365 * 24 * time.Hour} {
		l := openLock(t, s, "invoices", locks.TTL(ttl))
		err := l.Hold(context.Background(), 9, func(ctx context.Context, _ *locks.Lease) error {
			resp, err := cli.Get(ctx, prefix, clientv3.WithPrefix())
			if err != nil || len(resp.Kvs) != 1 {
				t.Fatalf("%v, %v", resp, err)
			}
			ttl, err := cli.TimeToLive(ctx, clientv3.LeaseID(resp.Kvs[0].Lease))
			if err != nil {
				return err
			}
			if ttl.GrantedTTL != 9_000_000_000 {
				t.Errorf("the lease's ttl is %d s, want etcd's longest", ttl.GrantedTTL)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("TTL(%v): %v", ttl, err)
		}
	}
}

// TestWaitBoundsAHoldWithEtcdAway: with etcd out of reach, a Hold whose
// wait is shorter than its lock's ttl fails within its wait (or
// locks.DefaultWait) with etcd's error, not at a call's timeout (the ttl).
func TestWaitBoundsAHoldWithEtcdAway(t *testing.T) {
	ports, err := freePorts(1) // nothing listens there
	if err != nil {
		t.Fatal(err)
	}
	s := open(t, newClient(t, []string{fmt.Sprintf("http://127.0.0.1:%d", ports[0])}), newPrefix(t))
	l := openLock(t, s, "invoices", locks.TTL(time.Minute))
	start := time.Now()
	err = l.Hold(context.Background(), 9, lockertest.Noop, locks.Wait(200*time.Millisecond))
	if took := time.Since(start); took < locks.DefaultWait || took > 40*time.Second {
		t.Fatalf("Hold returned after %v", took)
	}
	lockertest.WantMessage(t, err, `lock invoices: key "9": etcd: context deadline exceeded`)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("%v does not wrap etcd's error", err)
	}
}
