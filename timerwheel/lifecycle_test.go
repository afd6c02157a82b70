package timerwheel_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/holdline/locks/timerwheel"
)

// TestMain checks that nothing in the package leaves a goroutine behind:
// the wheel starts none.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// requireEmpty checks that w holds nothing at all.
func requireEmpty(t *testing.T, w *wheel) {
	t.Helper()
	require.Equal(t, 0, w.Len())
	_, ok := w.Next()
	require.False(t, ok)
	require.NoError(t, w.CheckInvariants())
}

func TestCancelBeforeAdvance(t *testing.T) {
	w := timerwheel.New[int](time.Nanosecond, 0)
	var zero timer
	assert.False(t, w.Cancel(&zero), "never scheduled")
	assert.Equal(t, time.Duration(0), zero.When())

	timers := make([]timer, 3*timerwheel.NumLevels)
	for i := range timers {
		// Three timers per level, sharing buckets and not.
		at := time.Duration(pow64(i/3) + int64(i%2))
		if i/3 == timerwheel.NumLevels-1 {
			at = time.Duration(1<<62 + i)
		}
		w.Schedule(&timers[i], at)
		require.Equal(t, i/3, timers[i].Where())
	}
	require.Equal(t, len(timers), w.Len())
	require.NoError(t, w.CheckInvariants())
	for i := range timers {
		require.True(t, w.Cancel(&timers[i]))
		require.False(t, timers[i].Scheduled())
		require.False(t, w.Cancel(&timers[i]), "double cancel")
		require.Equal(t, len(timers)-i-1, w.Len())
		require.NoError(t, w.CheckInvariants())
	}
	requireEmpty(t, w)
	assert.Empty(t, advance(t, w, 1<<62+100))
}

func TestCancelAfterCascade(t *testing.T) {
	w := timerwheel.New[int](time.Millisecond, 0)
	a, b := &timer{Value: 1}, &timer{Value: 2}
	w.Schedule(a, 5000*time.Millisecond) // level 2: 5000 >= 64*64
	w.Schedule(b, 5001*time.Millisecond)
	require.Equal(t, 2, a.Where())
	// 4096 starts a's level-2 bucket: both cascade down, nothing fires.
	assert.Empty(t, advance(t, w, 4096*time.Millisecond))
	require.Less(t, a.Where(), 2)
	require.GreaterOrEqual(t, a.Where(), 0)
	require.True(t, w.Cancel(a))
	require.False(t, w.Cancel(a))
	require.Equal(t, 1, w.Len())
	assert.Empty(t, advance(t, w, 5000*time.Millisecond), "a is gone")
	assert.Equal(t, []int{2}, advance(t, w, 5001*time.Millisecond))
	requireEmpty(t, w)
}

func TestCancelAfterHandedBack(t *testing.T) {
	w := timerwheel.New[int](time.Millisecond, 0)
	a := &timer{Value: 1}
	w.Schedule(a, 3*time.Millisecond)
	due := w.Advance(3*time.Millisecond, nil)
	require.Len(t, due, 1)
	assert.Same(t, a, due[0])
	assert.False(t, a.Scheduled())
	assert.Equal(t, 3*time.Millisecond, a.When(), "When survives firing")
	assert.False(t, w.Cancel(a))
	requireEmpty(t, w)
}

func TestCancelDueNow(t *testing.T) {
	w := timerwheel.New[int](time.Millisecond, time.Second)
	a, b := &timer{Value: 1}, &timer{Value: 2}
	w.Schedule(a, 0)
	w.Schedule(b, time.Second)
	require.True(t, w.Cancel(a))
	assert.Equal(t, []int{2}, advance(t, w, time.Second))
	require.False(t, w.Cancel(b))
	requireEmpty(t, w)
}

func TestReschedule(t *testing.T) {
	w := timerwheel.New[int](time.Millisecond, 0)
	a := &timer{Value: 1}
	w.Schedule(a, time.Hour) // high level
	w.Schedule(a, 10*time.Millisecond)
	require.Equal(t, 1, w.Len(), "moved, not duplicated")
	require.Equal(t, 10*time.Millisecond, a.When())
	next, _ := w.Next()
	assert.Equal(t, 10*time.Millisecond, next)

	w.Schedule(a, 20*time.Millisecond) // later
	assert.Empty(t, advance(t, w, 19*time.Millisecond))
	w.Schedule(a, 0) // to due-now
	assert.Equal(t, -1, a.Where(), "in the due-now list")
	w.Schedule(a, 30*time.Millisecond) // out of due-now again
	assert.Empty(t, advance(t, w, 29*time.Millisecond))
	assert.Equal(t, []int{1}, advance(t, w, 30*time.Millisecond))
	assert.Empty(t, advance(t, w, time.Hour), "the first schedule left nothing behind")
	requireEmpty(t, w)
}

func TestScheduleWhileProcessingDue(t *testing.T) {
	// An owner that re-arms each timer it is handed, and arms new ones, while
	// it walks the slice: those fire later, at their own instants.
	w := timerwheel.New[int](time.Millisecond, 0)
	timers := make([]timer, 10)
	for i := range timers {
		timers[i].Value = i
		w.Schedule(&timers[i], 10*time.Millisecond)
	}
	extra := &timer{Value: 100}
	due := w.Advance(10*time.Millisecond, nil)
	require.Len(t, due, 10)
	for _, tm := range due {
		w.Schedule(tm, w.Now()+time.Duration(tm.Value+1)*time.Millisecond)
		if tm.Value == 5 {
			w.Schedule(extra, w.Now()) // not after Now: due at the next Advance
		}
	}
	require.Equal(t, 11, w.Len())
	require.NoError(t, w.CheckInvariants())
	assert.Equal(t, []int{100}, advance(t, w, 10*time.Millisecond))
	for i := range timers {
		assert.Equal(t, []int{i}, advance(t, w, time.Duration(11+i)*time.Millisecond))
	}
	requireEmpty(t, w)
}

func TestIdleYearsThenShortDeadline(t *testing.T) {
	const tick = time.Millisecond
	const year = 365 * 24 * time.Hour
	w := timerwheel.New[int](tick, 0)
	assert.Empty(t, advance(t, w, 10*year))
	assert.Zero(t, w.Visited(), "an empty wheel does no work")

	a := &timer{Value: 1}
	w.Schedule(a, w.Now()+5*tick)
	assert.Empty(t, advance(t, w, 10*year+4*tick))
	assert.Equal(t, []int{1}, advance(t, w, 10*year+5*tick))
	assert.Equal(t, 1, w.Visited())

	// A few far timers: a 20-year jump visits a handful of buckets, not
	// one per tick (6.3e11 ticks) or per slot.
	far := make([]timer, 4)
	for i := range far {
		far[i].Value = i
		w.Schedule(&far[i], w.Now()+time.Duration(i+1)*year)
	}
	before := w.Visited()
	vals := advance(t, w, w.Now()+20*year)
	assert.ElementsMatch(t, []int{0, 1, 2, 3}, vals)
	assert.LessOrEqual(t, w.Visited()-before, len(far)*timerwheel.NumLevels)
	requireEmpty(t, w)
}

func TestCascadeIsBounded(t *testing.T) {
	// However far the clock jumps, each timer is touched at most once per
	// level it descends: Visited never exceeds timers × levels.
	w := timerwheel.New[int](time.Nanosecond, 0)
	timers := make([]timer, 1000)
	for i := range timers {
		w.Schedule(&timers[i], time.Duration(int64(i+1)*int64(i+1)*int64(i+1)*977))
	}
	var n int
	for now := time.Duration(1); w.Len() > 0; now *= 3 {
		n += len(advance(t, w, now))
	}
	assert.Equal(t, len(timers), n)
	assert.LessOrEqual(t, w.Visited(), len(timers)*timerwheel.NumLevels)
}
