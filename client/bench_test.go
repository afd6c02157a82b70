package client_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/holdline/locks"
	"github.com/holdline/locks/internal/lockertest"
	"github.com/holdline/locks/internal/servertest"
)

// BenchmarkHold measures a hold's round trips through a loopback server
// against the same hold of an in-process store: one goroutine, and
// parallel goroutines on distinct keys.
func BenchmarkHold(b *testing.B) {
	for _, tgt := range []struct {
		name string
		open func(b *testing.B) locks.Locker
	}{
		{"in-process", func(b *testing.B) locks.Locker {
			store := locks.NewStore()
			b.Cleanup(func() { store.Close() })
			l, err := locks.OpenLock(store, "bench")
			if err != nil {
				b.Fatal(err)
			}
			return l
		}},
		{"remote", func(b *testing.B) locks.Locker {
			s := servertest.Serve(b)
			return openLock(b, dial(b, s.Addr), "bench")
		}},
	} {
		b.Run(tgt.name, func(b *testing.B) {
			l := tgt.open(b)
			ctx := context.Background()
			b.Run("serial", func(b *testing.B) {
				for i := 0; b.Loop(); i++ {
					if err := l.Hold(ctx, i, lockertest.Noop); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("parallel", func(b *testing.B) {
				var n atomic.Int64
				b.RunParallel(func(pb *testing.PB) {
					key := strconv.FormatInt(n.Add(1), 10)
					for pb.Next() {
						if err := l.Hold(ctx, key, lockertest.Noop); err != nil {
							b.Error(err)
							return
						}
					}
				})
			})
		})
	}
}
