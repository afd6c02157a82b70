package timerwheel_test

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/holdline/locks/timerwheel"
)

type wheel = timerwheel.Wheel[int]
type timer = timerwheel.Timer[int]

// advance calls w.Advance(now) with a fresh slice, checks the wheel's
// invariants afterwards and returns the Values of the timers handed back.
func advance(t *testing.T, w *wheel, now time.Duration) []int {
	t.Helper()
	var vals []int
	for _, tm := range w.Advance(now, nil) {
		require.False(t, tm.Scheduled(), "handed-back timer %d still scheduled", tm.Value)
		vals = append(vals, tm.Value)
	}
	require.NoError(t, w.CheckInvariants())
	return vals
}

// pow64 returns 64^n.
func pow64(n int) int64 { return 1 << (6 * n) }

func TestLevelFor(t *testing.T) {
	// From cur = 0, a level's 64 slots end just before 64^(L+1).
	for l := range timerwheel.NumLevels - 1 {
		span := pow64(l + 1)
		assert.Equal(t, l, timerwheel.LevelFor(span-1, 0), "span-1 of level %d", l)
		assert.Equal(t, l+1, timerwheel.LevelFor(span, 0), "span of level %d", l)
	}
	// The window starts at cur's slot, not at cur: with cur = 63, tick 64+62
	// is still level 0 only if it is less than 64 slots ahead of slot 63.
	assert.Equal(t, 0, timerwheel.LevelFor(126, 63))
	assert.Equal(t, 1, timerwheel.LevelFor(127, 63))
	assert.Equal(t, 1, timerwheel.LevelFor(64*64+63, 64))
	assert.Equal(t, 2, timerwheel.LevelFor(64*64+64, 64))
	// Near the top no difference overflows and everything fits.
	assert.Equal(t, timerwheel.NumLevels-1, timerwheel.LevelFor(math.MaxInt64, 0))
	assert.Equal(t, 0, timerwheel.LevelFor(math.MaxInt64, math.MaxInt64-1))
	assert.Equal(t, 1, timerwheel.LevelFor(math.MaxInt64, math.MaxInt64-64))
}

// boundaryTicks returns, for every level, distances in ticks from cur at
// and around the level's span.
func boundaryTicks() []int64 {
	var ds []int64
	for l := range timerwheel.NumLevels - 1 {
		span := pow64(l + 1)
		ds = append(ds, span-1, span, span+1, span+pow64(l)-1, span+pow64(l))
	}
	return append(ds, 1, 2, 63, math.MaxInt64/2)
}

func TestLevelBoundariesFireExactly(t *testing.T) {
	for _, tick := range []time.Duration{1, 7, 3 * time.Millisecond} {
		for _, start := range []int64{0, 12345, pow64(3) - 1} {
			for _, d := range boundaryTicks() {
				e := start + d
				if e >= int64(math.MaxInt64/tick) {
					continue
				}
				name := fmt.Sprintf("tick=%v/start=%d/d=%d", tick, start, d)
				t.Run(name, func(t *testing.T) {
					w := timerwheel.New[int](tick, time.Duration(start)*tick)
					tm := &timer{Value: 1}
					w.Schedule(tm, time.Duration(e)*tick)
					require.NoError(t, w.CheckInvariants())
					next, ok := w.Next()
					require.True(t, ok)
					require.LessOrEqual(t, next, time.Duration(e)*tick)
					require.Empty(t, advance(t, w, time.Duration(e-1)*tick))
					require.True(t, tm.Scheduled())
					require.Equal(t, []int{1}, advance(t, w, time.Duration(e)*tick))
					require.Empty(t, advance(t, w, time.Duration(e+1)*tick))
					require.Equal(t, 0, w.Len())
					_, ok = w.Next()
					require.False(t, ok)
				})
			}
		}
	}
}

func TestLevelBoundariesTogether(t *testing.T) {
	// All boundary timers in one wheel, stepped through their ticks in order:
	// each fires at its own tick, once.
	const tick = time.Microsecond
	w := timerwheel.New[int](tick, 0)
	ds := boundaryTicks()
	timers := make([]timer, len(ds))
	fired := map[int64][]int{}
	for i, d := range ds {
		if d >= int64(math.MaxInt64/tick) {
			continue // its instant is past the clock's end
		}
		timers[i].Value = i
		w.Schedule(&timers[i], time.Duration(d)*tick)
		fired[d] = append(fired[d], i)
	}
	want := w.Len()
	var got int
	for _, d := range slices.Sorted(maps.Keys(fired)) {
		require.Empty(t, advance(t, w, time.Duration(d-1)*tick), "tick %d", d-1)
		vals := advance(t, w, time.Duration(d)*tick)
		require.ElementsMatch(t, fired[d], vals, "tick %d", d)
		got += len(vals)
	}
	require.Equal(t, want, got)
	require.Greater(t, got, 40)
	require.Equal(t, 0, w.Len())
}

func TestDriveByNext(t *testing.T) {
	// A driver sleeping until Next reaches each boundary timer at exactly its
	// tick, and needs at most one wake-up per level on the way.
	for _, d := range boundaryTicks() {
		w := timerwheel.New[int](time.Nanosecond, 5)
		tm := &timer{Value: 7}
		w.Schedule(tm, time.Duration(5+d))
		var wakeups int
		for tm.Scheduled() {
			next, ok := w.Next()
			require.True(t, ok)
			require.LessOrEqual(t, next, time.Duration(5+d))
			vals := advance(t, w, next)
			wakeups++
			if len(vals) > 0 {
				require.Equal(t, []int{7}, vals)
				require.Equal(t, time.Duration(5+d), next, "fired late or early")
			}
		}
		require.LessOrEqual(t, wakeups, timerwheel.NumLevels, "d=%d", d)
	}
}

func TestSubTickRoundsUp(t *testing.T) {
	const tick = 10 * time.Millisecond
	w := timerwheel.New[int](tick, 0)
	a, b, c := &timer{Value: 1}, &timer{Value: 2}, &timer{Value: 3}
	w.Schedule(a, time.Nanosecond)      // -> 10ms
	w.Schedule(b, tick)                 // -> 10ms exactly
	w.Schedule(c, tick+time.Nanosecond) // -> 20ms
	assert.Equal(t, time.Nanosecond, a.When(), "When is not rounded")
	next, _ := w.Next()
	assert.Equal(t, tick, next)
	assert.Empty(t, advance(t, w, tick-time.Nanosecond))
	assert.ElementsMatch(t, []int{1, 2}, advance(t, w, tick))
	assert.Empty(t, advance(t, w, 2*tick-1))
	assert.Equal(t, []int{3}, advance(t, w, 2*tick))
}

func TestScheduleNotAfterNowIsDueAtNextAdvance(t *testing.T) {
	const tick = 10 * time.Millisecond
	w := timerwheel.New[int](tick, 105*time.Millisecond)
	ats := []time.Duration{0, -1, math.MinInt64, 50 * time.Millisecond, 105 * time.Millisecond}
	timers := make([]timer, len(ats))
	for i, at := range ats {
		timers[i].Value = i
		w.Schedule(&timers[i], at)
		assert.Equal(t, at, timers[i].When())
	}
	later := &timer{Value: 99}
	w.Schedule(later, 106*time.Millisecond) // after now: rounds to 110ms
	next, ok := w.Next()
	require.True(t, ok)
	assert.Equal(t, 105*time.Millisecond, next, "Next is Now while something is due")
	// Even an Advance to an earlier instant hands them back, and moves nothing.
	assert.ElementsMatch(t, []int{0, 1, 2, 3, 4}, advance(t, w, 0))
	assert.Equal(t, 105*time.Millisecond, w.Now())
	next, _ = w.Next()
	assert.Equal(t, 110*time.Millisecond, next)
	assert.Empty(t, advance(t, w, 109*time.Millisecond))
	assert.Equal(t, []int{99}, advance(t, w, 110*time.Millisecond))
}

func TestMaxInt64(t *testing.T) {
	t.Run("tick=1ns", func(t *testing.T) {
		w := timerwheel.New[int](1, 0)
		tm := &timer{Value: 1}
		w.Schedule(tm, math.MaxInt64)
		next, ok := w.Next()
		require.True(t, ok)
		assert.LessOrEqual(t, next, time.Duration(math.MaxInt64))
		assert.Greater(t, next, time.Duration(0))
		assert.Empty(t, advance(t, w, math.MaxInt64/2))
		assert.Empty(t, advance(t, w, math.MaxInt64-1))
		next, _ = w.Next()
		assert.Equal(t, time.Duration(math.MaxInt64), next)
		assert.Equal(t, []int{1}, advance(t, w, math.MaxInt64))
	})
	t.Run("tick=7ns divides MaxInt64", func(t *testing.T) {
		require.Zero(t, math.MaxInt64%7)
		w := timerwheel.New[int](7, 0)
		tm := &timer{Value: 1}
		w.Schedule(tm, math.MaxInt64-6) // rounds up to MaxInt64
		assert.Empty(t, advance(t, w, math.MaxInt64-1))
		assert.Equal(t, []int{1}, advance(t, w, math.MaxInt64))
	})
	t.Run("tick=3ms rounds past MaxInt64", func(t *testing.T) {
		w := timerwheel.New[int](3*time.Millisecond, 0)
		tm := &timer{Value: 1}
		w.Schedule(tm, math.MaxInt64)
		// Follow Next: it cascades the timer down and ends saturated.
		next, ok := w.Next()
		for steps := 0; ok && next < math.MaxInt64; steps++ {
			require.Less(t, steps, timerwheel.NumLevels)
			assert.Empty(t, advance(t, w, next))
			next, ok = w.Next()
		}
		require.True(t, ok)
		assert.Equal(t, time.Duration(math.MaxInt64), next, "saturated")
		assert.Empty(t, advance(t, w, math.MaxInt64), "its instant is past the clock's end")
		assert.True(t, tm.Scheduled())
		assert.True(t, w.Cancel(tm))
		assert.Equal(t, 0, w.Len())
	})
	t.Run("clock near the end", func(t *testing.T) {
		w := timerwheel.New[int](1, math.MaxInt64-200)
		a, b := &timer{Value: 1}, &timer{Value: 2}
		w.Schedule(a, math.MaxInt64-100)
		w.Schedule(b, math.MaxInt64)
		require.NoError(t, w.CheckInvariants())
		assert.Empty(t, advance(t, w, math.MaxInt64-101))
		assert.Equal(t, []int{1}, advance(t, w, math.MaxInt64-100))
		assert.Equal(t, []int{2}, advance(t, w, math.MaxInt64))
	})
}

func TestNewPanics(t *testing.T) {
	assert.PanicsWithValue(t, "timerwheel: New with non-positive tick", func() { timerwheel.New[int](0, 0) })
	assert.PanicsWithValue(t, "timerwheel: New with non-positive tick", func() { timerwheel.New[int](-1, 0) })
	assert.PanicsWithValue(t, "timerwheel: New with negative now", func() { timerwheel.New[int](1, -1) })
	w := timerwheel.New[int](time.Second, 3*time.Second)
	assert.Equal(t, time.Second, w.Tick())
	assert.Equal(t, 3*time.Second, w.Now())
	assert.Equal(t, 0, w.Len())
}

func TestOtherWheelPanics(t *testing.T) {
	w1 := timerwheel.New[int](time.Millisecond, 0)
	w2 := timerwheel.New[int](time.Millisecond, 0)
	tm := &timer{}
	w1.Schedule(tm, time.Second)
	assert.Panics(t, func() { w2.Schedule(tm, time.Second) })
	assert.Panics(t, func() { w2.Cancel(tm) })
	assert.Equal(t, 1, w1.Len())
	assert.Equal(t, 0, w2.Len())
	require.True(t, w1.Cancel(tm))
	w2.Schedule(tm, time.Second) // free again: any wheel may take it
	assert.Equal(t, 1, w2.Len())
}
