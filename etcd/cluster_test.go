package etcdlocks_test

import (
	"context"
	"testing"
	"time"

	"github.com/holdline/locks"
	"github.com/holdline/locks/internal/lockertest"
)

// Three members, and the leader stopped while a key is held and waited
// for: the holder's lease outlives the election, no two hold the key at
// once, the waiter gets it when the holder lets go, and the line goes on
// with the two members left.
func TestMemberStopped(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three etcd members")
	}
	c, err := startCluster(t.TempDir(), 3)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.stop) // after the Stores' and clients' cleanups, which are registered later
	prefix := newPrefix(t)
	// A ttl well past an election's few hundred milliseconds.
	const ttl = 5 * time.Second
	cli1, cli2 := newClient(t, c.endpoints), newClient(t, c.endpoints)
	l := openLock(t, open(t, cli1, prefix), "invoices", locks.TTL(ttl))
	o := openLock(t, open(t, cli2, prefix), "invoices", locks.TTL(ttl))

	var x lockertest.Exclusive
	hold := func(l locks.Locker, release <-chan struct{}, held chan<- *locks.Lease) <-chan error {
		done := make(chan error, 1)
		go func() {
			done <- l.Hold(context.Background(), 9, func(ctx context.Context, ls *locks.Lease) error {
				x.Enter(t, ls)
				defer x.Leave(ls)
				held <- ls
				select {
				case <-release:
					return nil
				case <-ctx.Done():
					return context.Cause(ctx)
				}
			}, locks.Wait(time.Minute))
		}()
		return done
	}
	release1, held1 := make(chan struct{}), make(chan *locks.Lease, 1)
	done1 := hold(l, release1, held1)
	first := <-held1
	release2, held2 := make(chan struct{}), make(chan *locks.Lease, 1)
	done2 := hold(o, release2, held2)
	lockertest.Eventually(t, "a waiter", func() bool { return count(t, cli1, prefix) == 2 })

	leader := -1
	for i, e := range c.members {
		if e.Server.Leader() == e.Server.MemberID() {
			leader = i
		}
	}
	if leader < 0 {
		t.Fatal("no leader")
	}
	c.stopMember(leader)
	t.Logf("stopped the leader, member %d", leader)

	// Through the election and past it: the holder keeps the key, the
	// waiter keeps waiting.
	time.Sleep(2 * time.Second)
	select {
	case ls := <-held2:
		t.Fatalf("the waiter got the key (fence %d) while it was held", ls.Fence)
	case err := <-done1:
		t.Fatalf("the holder's hold ended: %v", err)
	case err := <-done2:
		t.Fatalf("the waiter's hold ended: %v", err)
	default:
	}
	close(release1)
	released := time.Now()
	if err := <-done1; err != nil {
		t.Fatalf("the holder: %v", err)
	}
	var second *locks.Lease
	select {
	case second = <-held2:
	case <-time.After(20 * time.Second):
		t.Fatal("the waiter did not get the key")
	}
	t.Logf("the waiter got the key %v after the holder let it go", time.Since(released))
	if second.Fence <= first.Fence {
		t.Fatalf("fence %d after %d", second.Fence, first.Fence)
	}
	close(release2)
	if err := <-done2; err != nil {
		t.Fatalf("the waiter: %v", err)
	}
	if err := l.Hold(context.Background(), 9, func(ctx context.Context, ls *locks.Lease) error {
		if ls.Fence <= second.Fence {
			t.Errorf("fence %d after %d", ls.Fence, second.Fence)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if n := count(t, cli1, prefix); n != 0 {
		t.Fatalf("%d keys left under the prefix", n)
	}
}
