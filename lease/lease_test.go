package lease_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"go.uber.org/goleak"

	"github.com/holdline/locks/lease"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestFences(t *testing.T) {
	f := lease.NewFences(41)
	assert.Equal(t, uint64(41), f.Last())
	assert.Equal(t, uint64(42), f.Next())
	assert.Equal(t, uint64(43), f.Next())
	assert.Equal(t, uint64(43), f.Last())
}

func TestSeedFollowsTheWallClock(t *testing.T) {
	before := uint64(time.Now().UnixNano())
	assert.GreaterOrEqual(t, lease.Seed(), before, "never below the wall clock (it may be above: see Retire)")
}

func TestRetireRaisesTheSeed(t *testing.T) {
	f := lease.NewFences(lease.Seed() + 1_000_000) // a millisecond ahead of the wall clock
	f.Next()
	f.Retire()
	assert.Greater(t, lease.Seed(), uint64(0))
	assert.GreaterOrEqual(t, lease.Seed(), f.Last(), "a later store starts above a retired store's last fence")
}
