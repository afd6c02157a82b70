package etcdlocks_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/holdline/locks"
	"github.com/holdline/locks/internal/lockertest"
)

// The contract's cases against a lock of this process and a lock in etcd,
// its other holder another Store on another client (another process):
// the same results, the same messages.
func TestSpec(t *testing.T) {
	lockertest.Run(t, "etcd", func(t *testing.T) *lockertest.Target {
		prefix := newPrefix(t)
		c1, c2 := newClient(t, shared.endpoints), newClient(t, shared.endpoints)
		s1, s2 := open(t, c1, prefix), open(t, c2, prefix)
		return &lockertest.Target{
			Open:  lockertest.Opener(s1.OpenLock),
			Other: lockertest.Opener(s2.OpenLock),
			// The line stands in etcd: the holder's key and one per waiter.
			Queued: func(t testing.TB, n int) {
				lockertest.Eventually(t, fmt.Sprintf("%d waiters", n), func() bool { return count(t, c1, prefix) >= int64(n+1) })
			},
			Untouched: func(t testing.TB) {
				if n := count(t, c1, prefix); n != 0 {
					t.Fatalf("%d keys under the prefix", n)
				}
			},
			CloseStore: func() {
				// The other's first: closing the holder's Store revokes
				// its lease, which would give the key to a waiter of the
				// other's.
				s2.Close()
				s1.Close()
			},
			RevokesFirst: true,
			ClosedAfter:  true,
		}
	})
}

// Holds nest only on one prefix: a hold of the same key through another
// Store on it (another process) inside a hold fails Invalid; the same
// lock name and key on another prefix, or in a store of package locks, is
// another key, and a hold of it inside waits for nothing, either way
// round.
func TestNestedOnlyOnOnePrefix(t *testing.T) {
	prefix := newPrefix(t)
	l := openLock(t, open(t, newClient(t, shared.endpoints), prefix), "invoices")
	same := openLock(t, open(t, newClient(t, shared.endpoints), prefix), "invoices")
	elsewhere := openLock(t, open(t, newClient(t, shared.endpoints), newPrefix(t)), "invoices")
	local := lockertest.InProcess(t).Open(t, "invoices")
	ctx := context.Background()
	err := l.Hold(ctx, 9, func(ctx context.Context, _ *locks.Lease) error {
		lockertest.WantMessage(t, same.Hold(ctx, 9, lockertest.Noop), `lock invoices: key "9": held inside a hold of the same key: invalid`)
		if err := elsewhere.Hold(ctx, 9, lockertest.Noop); err != nil {
			t.Errorf("another prefix's key inside: %v", err)
		}
		if err := local.Hold(ctx, 9, lockertest.Noop); err != nil {
			t.Errorf("package locks' key inside: %v", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	err = local.Hold(ctx, 9, func(ctx context.Context, _ *locks.Lease) error { return l.Hold(ctx, 9, lockertest.Noop) })
	if err != nil {
		t.Fatalf("a key in etcd inside package locks' key of the same name: %v", err)
	}
}
