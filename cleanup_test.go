package locks_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/holdline/locks"
)

// TestUnreachableStoreEndsItsGoroutine: a store dropped without Close,
// whose timer goroutine a deadline started, is closed once unreachable, and
// its goroutine ends.
func TestUnreachableStoreEndsItsGoroutine(t *testing.T) {
	before := goleak.IgnoreCurrent()
	func() {
		st := locks.NewStore()
		l, err := locks.OpenLock(st, "invoices")
		require.NoError(t, err)
		require.NoError(t, l.Hold(context.Background(), 9, nop, locks.MaxHold(time.Hour)))
		require.Error(t, goleak.Find(before), "the timer goroutine runs")
		runtime.KeepAlive(st) // unreachable only from here on
	}()
	var err error
	for range 200 { // a collection finds it unreachable, then its cleanup runs
		runtime.GC()
		if err = goleak.Find(before); err == nil {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("the timer goroutine of an unreachable store still runs: %v", err)
}

// TestClosedStoreIsFreedByOneCollection: a store closed and then dropped
// goes at the next collection. Close stops the cleanup that closes a
// dropped store; a queued cleanup would keep the store's state alive until
// it had run.
func TestClosedStoreIsFreedByOneCollection(t *testing.T) {
	freed := func() func() bool {
		st := locks.NewStore()
		l, err := locks.OpenLock(st, "invoices")
		require.NoError(t, err)
		require.NoError(t, l.Hold(context.Background(), 9, nop, locks.MaxHold(time.Hour)))
		freed := locks.StoreFreed(st)
		require.NoError(t, st.Close())
		return freed
	}()
	runtime.GC()
	require.True(t, freed(), "the state of a closed, unreachable store is freed by one collection")
}
