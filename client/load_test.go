package client_test

import (
	"context"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/holdline/locks"
)

// loadScale returns how many clients and holds each the load test runs:
// 100 × 1,000 without the race detector; under it (ten times slower on a
// small machine) 100 × 100, unless LOCKS_LOAD_HOLDS says otherwise.
func loadScale() (clients, holds int) {
	clients, holds = 100, 1000
	if raceEnabled {
		holds = 100
	}
	if s := os.Getenv("LOCKS_LOAD_HOLDS"); s != "" {
		if n, err := strconv.Atoi(s); err == nil && n > 0 {
			holds = n
		}
	}
	if testing.Short() {
		holds = min(holds, 20)
	}
	return clients, holds
}

// 100 clients hold 50 keys of one server over and over: every grant is
// exclusive, fences rise per key, and nothing is left running after.
func TestLoad(t *testing.T) {
	clients, holds := loadScale()
	const keys = 50
	s := serve(t)
	var (
		inside [keys]atomic.Int32
		mu     sync.Mutex
		fences [keys]uint64
		total  atomic.Int64
	)
	begin := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for i := range clients {
		c := dial(t, s.addr)
		l := openLock(t, c, "load", locks.TTL(10*time.Second))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range holds {
				k := (i*7 + j*13) % keys
				err := l.Hold(ctx, k, func(ctx context.Context, ls *locks.Lease) error {
					if n := inside[k].Add(1); n != 1 {
						t.Errorf("key %d: %d holders at once", k, n)
					}
					mu.Lock()
					if ls.Fence <= fences[k] {
						t.Errorf("key %d: fence %d after %d", k, ls.Fence, fences[k])
					}
					fences[k] = ls.Fence
					mu.Unlock()
					inside[k].Add(-1)
					total.Add(1)
					return nil
				}, locks.Wait(time.Minute))
				if err != nil {
					errs <- err
					return
				}
			}
		}()
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
	st := s.store.Stats()
	t.Logf("%d clients × %d holds on %d keys: %v, %.0f holds/s; %d waited", clients, holds, keys, d,
		float64(clients*holds)/d.Seconds(), st.Waits)
	if st.Keys != 0 || st.Running != 0 {
		t.Fatalf("left behind: %+v", st)
	}
}
