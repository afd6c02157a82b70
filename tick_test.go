package locks_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/holdline/locks"
)

// TestMaxHoldsOfOneTickBucketFireOnTime: deadlines of different durations
// that round up to the same number of ticks each fire at their own
// instant rounded up to the tick, not at the later one's.
func TestMaxHoldsOfOneTickBucketFireOnTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, l := newLock(t, locks.Shards(1))
		start := time.Now()
		time.Sleep(500 * time.Microsecond)
		long := holding(t, l, "long", locks.MaxHold(1900*time.Microsecond))
		short := holding(t, l, "short", locks.MaxHold(1100*time.Microsecond))
		<-short.ctx.Done()
		require.Equal(t, 2*time.Millisecond, time.Since(start), "the 1.1 ms maxHold granted at 0.5 ms")
		<-long.ctx.Done()
		require.Equal(t, 3*time.Millisecond, time.Since(start), "the 1.9 ms maxHold granted at 0.5 ms")
	})
}
