package etcdlocks_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/holdline/locks"
	etcdlocks "github.com/holdline/locks/etcd"
	"github.com/holdline/locks/internal/lockertest"
)

// standIn puts a key into the line of key 9 of lock invoices under prefix,
// as a holder of another process would, with value v and a lease of its
// own (a process that lives on), and returns the key and its create
// revision.
func standIn(t testing.TB, cli *clientv3.Client, prefix, v string) (string, int64) {
	t.Helper()
	ctx := context.Background()
	lease, err := cli.Grant(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Revoke(context.Background(), lease.ID) })
	k := fmt.Sprintf("%s/invoices/9/stand-in.%d", prefix, lease.ID)
	resp, err := cli.Put(ctx, k, v, clientv3.WithLease(lease.ID))
	if err != nil {
		t.Fatal(err)
	}
	return k, resp.Header.Revision
}

// A holder past its maxHold that does not give its key up (its process
// stuck, its lease renewed): the next in line revokes it once its
// deadline is past by the clocks' skew, and not before; TryHold does the
// same, and leaves a holder within its deadline alone.
func TestRevokedByTheNextInLine(t *testing.T) {
	prefix := newPrefix(t)
	cli := newClient(t, shared.endpoints)
	const skew = 200 * time.Millisecond
	l := openLock(t, open(t, cli, prefix, etcdlocks.MaxClockSkew(skew)), "invoices")

	now := time.Now()
	deadline := now.Add(300 * time.Millisecond)
	stuck, rev := standIn(t, cli, prefix, etcdlocks.HeldValue(now, deadline))
	if ok, err := l.TryHold(context.Background(), 9, lockertest.Noop); ok || err != nil {
		t.Fatalf("TryHold of a key held within its deadline: %v, %v", ok, err)
	}
	w := lockertest.Start(context.Background(), l, 9, locks.Wait(10*time.Second))
	ls, _ := w.Held(t)
	if at := ls.Granted.Sub(deadline); at < skew {
		t.Fatalf("revoked %v past the deadline, less than the skew %v", at, skew)
	} else if at > skew+time.Second {
		t.Fatalf("revoked %v past the deadline", at)
	}
	if ls.Fence <= uint64(rev) {
		t.Fatalf("fence %d after the revoked holder's %d", ls.Fence, rev)
	}
	if resp, err := cli.Get(context.Background(), stuck); err != nil || resp.Count != 0 {
		t.Fatalf("the revoked holder's key: %v, %v", resp, err)
	}
	if err := w.Result(t, nil); err != nil {
		t.Fatal(err)
	}

	// TryHold revokes a holder found past its deadline and the skew.
	standIn(t, cli, prefix, etcdlocks.HeldValue(now.Add(-time.Minute), now.Add(-skew-time.Millisecond)))
	if ok, err := l.TryHold(context.Background(), 9, lockertest.Noop); !ok || err != nil {
		t.Fatalf("TryHold of a key held past its deadline: %v, %v", ok, err)
	}
	// A holder without a deadline, or one whose value nobody can read, is
	// never revoked.
	standIn(t, cli, prefix, etcdlocks.HeldValue(now.Add(-time.Hour), time.Time{}))
	lockertest.WantMessage(t, l.Hold(context.Background(), 9, lockertest.Noop, locks.Wait(50*time.Millisecond)),
		`lock invoices: key "9": held past the hold's wait: in use`)
}

// A line holds at most locks.MaxWaiters waiters: the next fails limit at
// once and leaves no key behind; one leaving makes room for one.
func TestLineLimit(t *testing.T) {
	prefix := newPrefix(t)
	cli := newClient(t, shared.endpoints)
	l := openLock(t, open(t, cli, prefix), "invoices")
	r := lockertest.Start(context.Background(), l, 9)
	r.Held(t)

	// The waiters stand in for holds of other processes: a Txn of many
	// puts is much faster than as many Holds.
	ctx := context.Background()
	lease, err := cli.Grant(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Revoke(context.Background(), lease.ID)
	const batch = 1000
	for i := 0; i < locks.MaxWaiters; i += batch {
		ops := make([]clientv3.Op, 0, batch)
		for j := i; j < i+batch; j++ {
			ops = append(ops, clientv3.OpPut(fmt.Sprintf("%s/invoices/9/stand-in.%05d", prefix, j), etcdlocks.WaitingValue, clientv3.WithLease(lease.ID)))
		}
		if _, err := cli.Txn(ctx).Then(ops...).Commit(); err != nil {
			t.Fatal(err)
		}
	}
	err = l.Hold(ctx, 9, lockertest.Noop, locks.Wait(time.Minute))
	lockertest.WantMessage(t, err, `lock invoices: key "9": the line of waiters is full: limit`)
	if n := count(t, cli, prefix); n != 1+locks.MaxWaiters {
		t.Fatalf("%d keys in line after the refusal", n)
	}
	if _, err := cli.Delete(ctx, prefix+"/invoices/9/stand-in.00000"); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	w := lockertest.Start(wctx, l, 9, locks.Wait(time.Minute))
	lockertest.Eventually(t, "the waiter in line", func() bool { return count(t, cli, prefix) == 1+locks.MaxWaiters })
	cancel()
	if err := w.Wait(t); !strings.Contains(fmt.Sprint(err), "the hold's context ended") {
		t.Fatalf("the last waiter: %v", err)
	}
	if err := r.Result(t, nil); err != nil {
		t.Fatal(err)
	}
}

// Keys, lock names and the prefix with "/" or odd bytes in them stay apart:
// each key's line is its own directory.
func TestKeysStayApart(t *testing.T) {
	prefix := newPrefix(t)
	cli := newClient(t, shared.endpoints)
	s := open(t, cli, prefix+"/") // a trailing "/" is dropped
	a, ab := openLock(t, s, "a"), openLock(t, s, "a/b")
	keys := []struct {
		l   *etcdlocks.Lock
		key string
	}{{a, "b/c"}, {ab, "c"}, {a, "b"}, {a, "b%2Fc"}, {a, "\x00\xff"}, {a, "b/"}}
	var held []*lockertest.Running
	for _, k := range keys {
		r := lockertest.Start(context.Background(), k.l, k.key, locks.Wait(0))
		r.Held(t)
		held = append(held, r)
	}
	for _, r := range held {
		if err := r.Result(t, nil); err != nil {
			t.Fatal(err)
		}
	}
	if n := count(t, cli, prefix); n != 0 {
		t.Fatalf("%d keys left", n)
	}
}

// Open's arguments.
func TestOpen(t *testing.T) {
	if _, err := etcdlocks.Open(nil, "/x"); err == nil || err.Error() != "the etcd client is nil: invalid" {
		t.Fatalf("Open(nil): %v", err)
	}
	cli := newClient(t, shared.endpoints)
	_, err := etcdlocks.Open(cli, "/x", etcdlocks.MaxClockSkew(-time.Second))
	lockertest.WantMessage(t, err, "the clock skew is negative (-1s): invalid")
	s, err := etcdlocks.Open(cli, "/x")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// A closed Store checks the name and options first, as a locks.Store does.
	_, err = s.OpenLock("a b")
	lockertest.WantMessage(t, err, `lock "a b": a name is made of A-Z a-z 0-9 _ - . : /, not " " (byte 1): invalid`)
	_, err = s.OpenLock("invoices", locks.Wait(-1))
	lockertest.WantMessage(t, err, `lock invoices: the wait is negative (-1ns): invalid`)
	_, err = s.OpenLock("invoices")
	lockertest.WantMessage(t, err, `lock invoices: the store is closed: closed`)
}
