package client_test

import (
	"testing"
	"time"

	"github.com/holdline/locks"
	"github.com/holdline/locks/internal/lockertest"
	"github.com/holdline/locks/internal/servertest"
)

// loadScale returns how many clients and holds each the load test runs:
// 100 × 1,000 without the race detector; under it (ten times slower on a
// small machine) 100 × 100, unless LOCKS_LOAD_HOLDS says otherwise.
func loadScale() (clients, holds int) {
	holds = 1000
	if raceEnabled {
		holds = 100
	}
	return 100, lockertest.LoadHolds("LOCKS_LOAD_HOLDS", holds)
}

// 100 clients hold 50 keys of one server over and over: every grant is
// exclusive, fences rise per key, and nothing is left running after.
func TestLoad(t *testing.T) {
	clients, holds := loadScale()
	s := servertest.Serve(t)
	lockers := make([]locks.Locker, clients)
	for i := range lockers {
		lockers[i] = openLock(t, dial(t, s.Addr), "load", locks.TTL(10*time.Second))
	}
	lockertest.Load(t, lockers, holds, 50)
	st := s.Store.Stats()
	t.Logf("%d waited", st.Waits)
	if st.Keys != 0 || st.Running != 0 {
		t.Fatalf("left behind: %+v", st)
	}
}
