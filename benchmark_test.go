package locks_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/holdline/locks"
)

// The library's own benchmarks, without peers (go run ./bench compares it
// with them). Run them and compare two runs with benchstat:
//
//	go test -run '^$' -bench . -count 10 > old.txt
//	(change the library)
//	go test -run '^$' -bench . -count 10 > new.txt
//	go run golang.org/x/perf/cmd/benchstat@latest old.txt new.txt
//
// Add -cpu 1,2 for the parallel ones at several GOMAXPROCS.

// benchmarkKeyCount is how many distinct keys the walking benchmarks hold in
// turn: enough to reach every shard many times over, so that a walk is not
// one hot cache line.
const benchmarkKeyCount = 1 << 16

// benchmarkKeys are invoice ids as keys, boxed once: converting a string to
// an interface in the loop would allocate and be counted against Hold.
var benchmarkKeys = sync.OnceValue(func() []any {
	keys := make([]any, benchmarkKeyCount)
	for i := range keys {
		keys[i] = fmt.Sprintf("invoice-%06d", i)
	}
	return keys
})

// benchmarkLock returns the lock "invoices" of a new store that is closed
// when the benchmark ends.
func benchmarkLock(b *testing.B, opts ...locks.Option) *locks.Lock {
	b.Helper()
	st := locks.NewStore()
	b.Cleanup(func() { st.Close() })
	l, err := locks.OpenLock(st, "invoices", opts...)
	if err != nil {
		b.Fatal(err)
	}
	return l
}

// benchmarkFn is a HoldFunc that does nothing and does not look at its
// context or lease.
func benchmarkFn(context.Context, *locks.Lease) error { return nil }

// BenchmarkHold holds a free key: each hold takes the next of
// benchmarkKeyCount keys, so no two holds ever want one key.
func BenchmarkHold(b *testing.B) {
	benchmarkWalk(b, func(l *locks.Lock, ctx context.Context, key any) {
		if err := l.Hold(ctx, key, benchmarkFn); err != nil {
			b.Fatal(err)
		}
	})
}

// BenchmarkTryHold is BenchmarkHold through TryHold.
func BenchmarkTryHold(b *testing.B) {
	benchmarkWalk(b, func(l *locks.Lock, ctx context.Context, key any) {
		if ok, err := l.TryHold(ctx, key, benchmarkFn); !ok || err != nil {
			b.Fatal("TryHold of a free key: ", ok, err)
		}
	})
}

// BenchmarkHoldMaxHold is BenchmarkHold with a maxHold of a minute armed
// at each grant and disarmed when the function returns.
func BenchmarkHoldMaxHold(b *testing.B) {
	opts := []locks.Option{locks.MaxHold(time.Minute)}
	benchmarkWalk(b, func(l *locks.Lock, ctx context.Context, key any) {
		if err := l.Hold(ctx, key, benchmarkFn, opts...); err != nil {
			b.Fatal(err)
		}
	})
}

// benchmarkWalk runs hold on one goroutine over the keys in turn.
func benchmarkWalk(b *testing.B, hold func(l *locks.Lock, ctx context.Context, key any)) {
	l := benchmarkLock(b)
	keys := benchmarkKeys()
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	for b.Loop() {
		hold(l, ctx, keys[i%len(keys)])
		i++
	}
}

// BenchmarkHoldParallel holds free keys from GOMAXPROCS goroutines at
// once, each walking its own keys: holds of unrelated keys must not wait
// on each other (their shards are mostly different).
func BenchmarkHoldParallel(b *testing.B) {
	l := benchmarkLock(b)
	keys := benchmarkKeys()
	var workers atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		w := int(workers.Add(1) - 1)
		for i := w * 7919; pb.Next(); i++ { // apart: the walks do not meet
			if err := l.Hold(ctx, keys[i%len(keys)], benchmarkFn); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// benchmarkHotYield: every benchmarkHotYield-th holder of the hot key yields the
// processor while holding, as a holder doing I/O would, so that the others
// stand in line even at GOMAXPROCS 1 (otherwise a goroutine runs until
// preempted, and nobody ever waits).
const benchmarkHotYield = 32

// BenchmarkHoldHotKey holds one key from 8 goroutines per P: waiters
// stand in line, and each release hands the key to the next.
func BenchmarkHoldHotKey(b *testing.B) {
	l := benchmarkLock(b)
	key := benchmarkKeys()[0]
	count := 0 // guarded by the key
	fn := func(context.Context, *locks.Lease) error {
		if count++; count%benchmarkHotYield == 0 {
			runtime.Gosched()
		}
		return nil
	}
	b.SetParallelism(8)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			if err := l.Hold(ctx, key, fn); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	if count != b.N {
		b.Errorf("%d grants counted for %d holds: a hold ran without the key", count, b.N)
	}
}
