package etcdlocks_test

import (
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/holdline/locks"
	"github.com/holdline/locks/internal/lockertest"
)

// loadScale returns how many clients and holds each the load test runs:
// 20 × 200, unless ETCDLOCKS_LOAD_HOLDS says otherwise; 20 × 20 with
// -short.
func loadScale() (clients, holds int) {
	return 20, lockertest.LoadHolds("ETCDLOCKS_LOAD_HOLDS", 200)
}

// 20 Stores, each with its own client as a process would have, hold 10
// keys over and over: every grant is exclusive, fences rise per key, and
// nothing is left under the prefix after.
func TestLoad(t *testing.T) {
	clients, holds := loadScale()
	prefix := newPrefix(t)
	lockers := make([]locks.Locker, clients)
	var cli *clientv3.Client
	for i := range lockers {
		cli = newClient(t, shared.endpoints)
		lockers[i] = openLock(t, open(t, cli, prefix), "load")
	}
	lockertest.Load(t, lockers, holds, 10)
	if n := count(t, cli, prefix); n != 0 {
		t.Fatalf("%d keys left under the prefix", n)
	}
}
