package etcdlocks_test

import (
	"context"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/holdline/locks"
)

// loadScale returns how many clients and holds each the load test runs:
// 20 × 200, unless ETCDLOCKS_LOAD_HOLDS says otherwise; 20 × 20 with
// -short.
func loadScale() (clients, holds int) {
	clients, holds = 20, 200
	if s := os.Getenv("ETCDLOCKS_LOAD_HOLDS"); s != "" {
		if n, err := strconv.Atoi(s); err == nil && n > 0 {
			holds = n
		}
	}
	if testing.Short() {
		holds = min(holds, 20)
	}
	return clients, holds
}

// 20 processes (a client and a Store each) hold 10 keys over and over:
// every grant is exclusive, fences rise per key, and nothing is left
// under the prefix after.
func TestLoad(t *testing.T) {
	clients, holds := loadScale()
	const keys = 10
	prefix := newPrefix(t)
	var x exclusive
	var total atomic.Int64
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	begin := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	var cli *clientv3.Client
	for i := range clients {
		cli = newClient(t, shared.endpoints)
		l := openLock(t, open(t, cli, prefix), "load")
		wg.Go(func() {
			for j := range holds {
				k := (i*7 + j*13) % keys
				err := l.Hold(ctx, k, func(ctx context.Context, ls *locks.Lease) error {
					x.enter(t, ls)
					x.leave(ls)
					total.Add(1)
					return nil
				}, locks.Wait(time.Minute))
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	d := time.Since(begin)
	if n := total.Load(); n != int64(clients*holds) {
		t.Fatalf("%d holds, want %d", n, clients*holds)
	}
	t.Logf("%d clients × %d holds on %d keys: %v, %.0f holds/s", clients, holds, keys, d, float64(clients*holds)/d.Seconds())
	if n := count(t, cli, prefix); n != 0 {
		t.Fatalf("%d keys left under the prefix", n)
	}
}
