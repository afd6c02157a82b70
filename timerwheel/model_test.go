package timerwheel_test

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/holdline/locks/timerwheel"
)

// dueNow marks a model timer scheduled for an instant not after the clock.
const dueNow = math.MinInt64

// model is the obviously correct reference: a map from timer to the tick it
// fires at, scanned in full on every call.
type model struct {
	tick time.Duration
	now  time.Duration
	exp  map[int]int64 // timer index -> expiry tick, or dueNow
}

func (m *model) schedule(i int, at time.Duration) {
	if at <= m.now {
		m.exp[i] = dueNow
		return
	}
	e := int64(at / m.tick)
	if at%m.tick != 0 {
		e++
	}
	m.exp[i] = e
}

func (m *model) cancel(i int) bool {
	_, ok := m.exp[i]
	delete(m.exp, i)
	return ok
}

// advance returns, sorted, the timers due at now, and forgets them.
func (m *model) advance(now time.Duration) []int {
	m.now = max(m.now, now)
	target := int64(m.now / m.tick)
	var fired []int
	for i, e := range m.exp {
		if e <= target {
			fired = append(fired, i)
			delete(m.exp, i)
		}
	}
	slices.Sort(fired)
	return fired
}

// earliest returns the first instant a timer fires at, saturated at
// math.MaxInt64, or ok == false if there is none.
func (m *model) earliest() (at time.Duration, ok bool) {
	first := int64(math.MaxInt64)
	for _, e := range m.exp {
		first, ok = min(first, e), true
	}
	switch {
	case !ok:
		return 0, false
	case first == dueNow:
		return m.now, true
	case first > int64(math.MaxInt64/m.tick):
		return math.MaxInt64, true
	}
	return time.Duration(first) * m.tick, true
}

// addSat returns a+b saturated at math.MaxInt64 (b may be negative).
func addSat(a, b time.Duration) time.Duration {
	if b > 0 && a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// runModel drives a wheel and the model with the same operations, drawn
// from rnd (rnd(n) is in [0, n)), and checks that they agree after each.
// It returns how many timers fired and which levels (bit L+1; bit 0 for
// the due-now list) timers were filed at, so callers can check coverage.
func runModel(t *testing.T, tick time.Duration, ops int, rnd func(n uint64) uint64) (fired int, levels uint) {
	const pool = 64
	w := timerwheel.New[int](tick, time.Duration(rnd(1<<40)))
	m := &model{tick: tick, now: w.Now(), exp: map[int]int64{}}
	timers := make([]timer, pool)
	for i := range timers {
		timers[i].Value = i
	}
	// magnitude returns a random duration of about 2^k for a random k < bits.
	magnitude := func(bits uint64) time.Duration {
		return time.Duration(rnd(1 << rnd(bits)))
	}
	var due []*timer
	for op := range ops {
		switch r := rnd(20); {
		case r < 9: // schedule, anywhere from the past to the end of time
			i := int(rnd(pool))
			var at time.Duration
			switch rnd(4) {
			case 0: // around a level boundary ahead of cur
				e := int64(addSat(w.Now()/tick, time.Duration(pow64(int(rnd(11))))))
				e = min(e-1+int64(rnd(3)), int64(math.MaxInt64/tick))
				at = time.Duration(e) * tick
			case 1: // past or due soon
				at = w.Now() - magnitude(40) + magnitude(20)
			case 2:
				at = math.MaxInt64 - magnitude(64)
			default:
				at = addSat(w.Now(), magnitude(63))
			}
			w.Schedule(&timers[i], at)
			m.schedule(i, at)
			levels |= 1 << (timers[i].Where() + 1)
		case r < 13: // cancel
			i := int(rnd(pool))
			require.Equal(t, m.cancel(i), w.Cancel(&timers[i]), "op %d: cancel %d", op, i)
		default: // advance: mostly forward by up to ~2^56, now and then back
			now := addSat(w.Now(), magnitude(57))
			if rnd(10) == 0 {
				now = w.Now() - magnitude(30)
			}
			if rnd(4) == 0 { // to the wheel's next instant, or one before
				if at, ok := w.Next(); ok && at-w.Now() < 1<<50 {
					now = at - time.Duration(rnd(2))
				}
			}
			due = w.Advance(now, due[:0])
			var got []int
			for _, tm := range due {
				require.False(t, tm.Scheduled())
				got = append(got, tm.Value)
			}
			slices.Sort(got)
			fired += len(got)
			require.Equal(t, m.advance(now), got, "op %d: advance to %d", op, now)
		}
		require.NoError(t, w.CheckInvariants(), "op %d", op)
		require.Equal(t, len(m.exp), w.Len(), "op %d", op)
		want, wantOK := m.earliest()
		next, ok := w.Next()
		require.Equal(t, wantOK, ok, "op %d", op)
		require.LessOrEqual(t, next, want, "op %d: Next later than the earliest timer", op)
		if ok && want > m.now {
			require.Greater(t, next, w.Now(), "op %d: nothing is due now", op)
		}
	}
	return fired, levels
}

var modelTicks = []time.Duration{1, 7, time.Microsecond, 3 * time.Millisecond, time.Second}

func TestModelRandom(t *testing.T) {
	for _, tick := range modelTicks {
		for seed := range uint64(8) {
			t.Run(fmt.Sprintf("tick=%v/seed=%d", tick, seed), func(t *testing.T) {
				r := rand.New(rand.NewPCG(seed, uint64(tick)))
				fired, levels := runModel(t, tick, 3000, func(n uint64) uint64 { return r.Uint64N(max(n, 1)) })
				t.Logf("fired %d, levels %b", fired, levels)
				require.Greater(t, fired, 500)
				// Every level an int64 instant can reach at this tick, and due-now.
				top := (bits.Len64(uint64(math.MaxInt64/tick)) - 1) / 6
				require.Equal(t, uint(1<<(top+2)-1), levels, "levels used")
			})
		}
	}
}

// FuzzModel is TestModelRandom with the choices taken from the fuzzer's
// bytes; once they run out every choice is 0.
func FuzzModel(f *testing.F) {
	f.Add(uint8(0), []byte{})
	f.Add(uint8(1), []byte("\x00\x01\x02\x03\x13\x13\x13\x0b\x0b\xff\xfe\x11\x12\x13"))
	f.Add(uint8(3), binary.LittleEndian.AppendUint64(nil, 0x0123456789abcdef))
	f.Fuzz(func(t *testing.T, tickSel uint8, data []byte) {
		tick := modelTicks[int(tickSel)%len(modelTicks)]
		rnd := func(n uint64) uint64 {
			if n <= 1 || len(data) == 0 {
				return 0
			}
			var buf [8]byte
			k := copy(buf[:], data)
			data = data[min(k, 2):] // consume two bytes, reuse the rest as entropy
			return binary.LittleEndian.Uint64(buf[:]) % n
		}
		runModel(t, tick, len(data)/2+1, rnd)
	})
}
