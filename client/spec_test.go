package client_test

import (
	"context"
	"testing"
	"time"

	"github.com/holdline/locks"
	"github.com/holdline/locks/internal/lockertest"
	"github.com/holdline/locks/internal/servertest"
)

// The contract's cases against a lock of this process and a client's
// lock on a loopback server: the same results, the same messages.
func TestSpec(t *testing.T) {
	lockertest.Run(t, "remote", func(t *testing.T) *lockertest.Target {
		s := servertest.Serve(t)
		c1, c2 := dial(t, s.Addr), dial(t, s.Addr)
		tg := lockertest.OnStore(s.Store)
		tg.Open, tg.Other = lockertest.Opener(c1.OpenLock), lockertest.Opener(c2.OpenLock)
		tg.CloseStore = func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			s.Server.Shutdown(ctx)
		}
		// The server passes a revoked key on, then tells its holder.
		tg.RevokesFirst = false
		// A client whose server is gone fails in the transport.
		tg.ClosedAfter = false
		return tg
	})
}

// A client's hold and a hold of package locks of the same lock name and
// key are nested, either inside the other: the server's keys are named as
// package locks names its own (and here are the same store's: the inner
// hold would wait for the outer one forever).
func TestNestedAcrossLockers(t *testing.T) {
	s := servertest.Serve(t)
	remote := openLock(t, dial(t, s.Addr), "invoices")
	local := lockertest.Open(t, func(name string, opts ...locks.Option) (*locks.Lock, error) {
		return locks.OpenLock(s.Store, name, opts...)
	}, "invoices")
	const nested = `lock invoices: key "9": held inside a hold of the same key: invalid`
	err := remote.Hold(context.Background(), 9, func(ctx context.Context, _ *locks.Lease) error {
		lockertest.WantMessage(t, local.Hold(ctx, 9, lockertest.Noop), nested)
		if err := local.Hold(ctx, 10, lockertest.Noop); err != nil {
			t.Errorf("another key inside: %v", err)
		}
		// Detached, the hold is another holder's, and waits in line.
		lockertest.WantMessage(t, local.Hold(locks.Detach(ctx), 9, lockertest.Noop, locks.Wait(20*time.Millisecond)),
			`lock invoices: key "9": held past the hold's wait: in use`)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	err = local.Hold(context.Background(), 9, func(ctx context.Context, _ *locks.Lease) error {
		lockertest.WantMessage(t, remote.Hold(ctx, 9, lockertest.Noop), nested)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if st := s.Store.Stats(); st.Waits != 1 {
		t.Fatalf("waits %d: a nested hold reached the server", st.Waits)
	}
}
