package etcdlocks_test

import (
	"context"
	"testing"
	"time"

	"github.com/holdline/locks"
	"github.com/holdline/locks/client"
	"github.com/holdline/locks/internal/lockertest"
	"github.com/holdline/locks/internal/servertest"
)

// BenchmarkHold times one Hold of a free key, from the call until it has
// let the key go, sequentially, through each kind of Locker on loopback:
// a lock of this process, a locksd server's (package server on
// 127.0.0.1, through package client), and etcd (the embedded member,
// fsync off: a real cluster adds its disk's fsync to every grant and
// release).
//
//	go test -run '^$' -bench Hold -benchtime 2s
func BenchmarkHold(b *testing.B) {
	ctx := context.Background()
	bench := func(b *testing.B, l locks.Locker) {
		b.Helper()
		if err := l.Hold(ctx, "warm", lockertest.Noop); err != nil { // a lease granted, a connection made
			b.Fatal(err)
		}
		b.ResetTimer()
		for b.Loop() {
			if err := l.Hold(ctx, "k", lockertest.Noop); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("where=in-process", func(b *testing.B) {
		store := locks.NewStore()
		defer store.Close()
		l, err := locks.OpenLock(store, "bench")
		if err != nil {
			b.Fatal(err)
		}
		bench(b, l)
	})
	b.Run("where=locksd", func(b *testing.B) {
		s := servertest.Serve(b)
		dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		c, err := client.Dial(dctx, s.Addr)
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		bench(b, lockertest.Open(b, c.OpenLock, "bench"))
	})
	b.Run("where=etcd", func(b *testing.B) {
		bench(b, openLock(b, open(b, newClient(b, shared.endpoints), newPrefix(b)), "bench"))
	})
}
