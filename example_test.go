package locks_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/holdline/locks"
)

// The README's quickstart: open a store and a lock, hold a key while a
// function runs.
func Example() {
	store := locks.NewStore()
	defer store.Close()

	invoices, err := locks.OpenLock(store, "invoices")
	if err != nil {
		fmt.Println(err)
		return
	}

	ctx := context.Background()
	err = invoices.Hold(ctx, InvoiceID("9"), func(ctx context.Context, lease *locks.Lease) error {
		fmt.Printf("charging invoice %s of lock %s\n", lease.Key, lease.Lock)
		return nil // ctx ends when the lease is lost
	})
	fmt.Println("held and let go:", err)
	// Output:
	// charging invoice 9 of lock invoices
	// held and let go: <nil>
}

// Stand in line for a while: past the wait, Hold fails in use.
func ExampleWait() {
	store := locks.NewStore()
	defer store.Close()
	invoices, _ := locks.OpenLock(store, "invoices")
	ctx := context.Background()

	_ = invoices.Hold(ctx, 9, func(context.Context, *locks.Lease) error {
		// Another goroutine (a fresh context: another holder) waits 10 ms
		// at most for the invoice this function holds.
		done := make(chan error)
		go func() {
			done <- invoices.Hold(context.Background(), 9, func(context.Context, *locks.Lease) error {
				return nil
			}, locks.Wait(10*time.Millisecond))
		}()
		err := <-done
		fmt.Println(errors.Is(err, locks.ErrInUse))
		fmt.Println(err)
		return nil
	})
	// Output:
	// true
	// lock invoices: key "9": held past the hold's wait: in use
}

// TryHold never waits: it answers (false, nil) for a held key.
func ExampleLock_TryHold() {
	store := locks.NewStore()
	defer store.Close()
	invoices, _ := locks.OpenLock(store, "invoices")
	ctx := context.Background()

	acquired, err := invoices.TryHold(ctx, 9, func(ctx context.Context, _ *locks.Lease) error {
		acquired, err := invoices.TryHold(ctx, 9, func(context.Context, *locks.Lease) error { return nil })
		if err == nil && !acquired {
			fmt.Println("someone is charging it already")
		}
		return nil
	})
	fmt.Println(acquired, err)
	// Output:
	// someone is charging it already
	// true <nil>
}

// HoldValue answers what the function answered.
func ExampleHoldValue() {
	store := locks.NewStore()
	defer store.Close()
	invoices, _ := locks.OpenLock(store, "invoices")

	receipt, err := locks.HoldValue(context.Background(), invoices, 9,
		func(ctx context.Context, lease *locks.Lease) (string, error) {
			return "receipt for invoice " + lease.Key, nil
		})
	fmt.Println(receipt, err)
	// Output:
	// receipt for invoice 9 <nil>
}

// MaxHold bounds a hung holder: at the bound the lease is revoked, the
// function's context ends with the reason, and Hold fails lost.
func ExampleMaxHold() {
	store := locks.NewStore()
	defer store.Close()
	invoices, _ := locks.OpenLock(store, "invoices", locks.MaxHold(20*time.Millisecond))

	err := invoices.Hold(context.Background(), "m", func(ctx context.Context, _ *locks.Lease) error {
		<-ctx.Done() // a payment provider that never answers
		fmt.Println("cause:", context.Cause(ctx))
		return ctx.Err()
	})
	fmt.Println(errors.Is(err, locks.ErrLost), errors.Is(err, context.Canceled))
	fmt.Println(err)
	// Output:
	// cause: lock invoices: key "m": the lease was lost: it was revoked at its maxHold
	// true true
	// lock invoices: key "m": the lease was lost: it was revoked at its maxHold; the function returned: context canceled
}

// Every grant's fence is higher than every fence given before for the key:
// a resource that remembers the highest refuses a stalled holder's write.
func ExampleLease_fences() {
	store := locks.NewStore()
	defer store.Close()
	invoices, _ := locks.OpenLock(store, "invoices")
	ctx := context.Background()

	var highest uint64 // what the resource remembers
	write := func(ctx context.Context, lease *locks.Lease) error {
		if lease.Fence <= highest {
			return errors.New("stale fence")
		}
		highest = lease.Fence
		return nil
	}
	fmt.Println(invoices.Hold(ctx, 9, write))
	fmt.Println(invoices.Hold(ctx, 9, write))
	// Output:
	// <nil>
	// <nil>
}

// Hold may not be called inside a transaction: it fails invalid at once.
func ExampleInTransaction() {
	store := locks.NewStore()
	defer store.Close()
	invoices, _ := locks.OpenLock(store, "invoices")

	tx := locks.InTransaction(context.Background())
	err := invoices.Hold(tx, 9, func(context.Context, *locks.Lease) error { return nil })
	fmt.Println(errors.Is(err, locks.ErrInvalid))
	// Output:
	// true
}

// Code written against Locker works with a lock of this process, and
// later with a remote store's client.
func ExampleLocker() {
	store := locks.NewStore()
	defer store.Close()
	invoices, _ := locks.OpenLock(store, "invoices")

	charge := func(l locks.Locker, id string) error {
		return l.Hold(context.Background(), id, func(ctx context.Context, lease *locks.Lease) error {
			fmt.Println("charging", lease.Key, "under", l.Name())
			return nil
		})
	}
	fmt.Println(charge(invoices, "42"))
	// Output:
	// charging 42 under invoices
	// <nil>
}
