package etcdlocks_test

import (
	"context"
	"errors"
	"log"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/holdline/locks"
	etcdlocks "github.com/holdline/locks/etcd"
)

// charge stands for work that must not run twice at once for one
// invoice, and that hands the fence to what it writes.
func charge(ctx context.Context, invoice string, fence uint64) error { return nil }

// A Locker on etcd, where one of this process (locks.OpenLock) or of a
// locksd server (client.OpenLock) would do: only the constructor changes.
func ExampleOpen() {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"127.0.0.1:2379"}, DialTimeout: 5 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	defer cli.Close()
	store, err := etcdlocks.Open(cli, "/holdline")
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close() // before cli.Close: it revokes the Store's lease

	var invoices locks.Locker
	invoices, err = store.OpenLock("invoices", locks.TTL(15*time.Second), locks.MaxHold(2*time.Minute))
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	err = invoices.Hold(ctx, "9", func(ctx context.Context, lease *locks.Lease) error {
		return charge(ctx, "9", lease.Fence) // ctx ends if the lease is lost
	}, locks.Wait(30*time.Second))
	if errors.Is(err, locks.ErrInUse) {
		log.Print(err) // lock invoices: key "9": held past the hold's wait: in use
	}
}
