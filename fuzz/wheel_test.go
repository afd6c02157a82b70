package fuzz

import (
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/holdline/locks/timerwheel"
)

// FuzzTimerWheel runs the fuzzer's bytes as operations on a timer wheel
// and on a model that keeps each timer's instant in a plain map and sorts
// what is due: every Advance hands back exactly the timers whose rounded
// instant has come (or that were scheduled for an instant not after the
// clock), never one early, each once; Cancel reports and frees at once;
// Len, Scheduled, When and Next agree.
//
// Input: byte 0 picks the tick, bytes 1-2 the starting clock; then four
// bytes per op: kind, timer, and an instant selector (see wheelInstant).
func FuzzTimerWheel(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 1, 1, 5, 3, 0, 0, 9})
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := runWheel(data); err != nil {
			t.Fatal(err)
		}
	})
}

const wheelTimers = 16

var wheelTicks = [8]time.Duration{time.Millisecond, time.Millisecond, time.Nanosecond, 2,
	3 * time.Millisecond, time.Microsecond, 7, time.Second}

// wheelModel is the sorted-list model of a timer wheel.
type wheelModel struct {
	tick time.Duration
	now  time.Duration
	at   map[int]time.Duration // scheduled timers and their instants
	due  map[int]bool          // scheduled for an instant not after now: due at the next Advance
}

// expiry returns the tick a timer scheduled at at fires on.
func (m *wheelModel) expiry(at time.Duration) int64 {
	e := int64(at / m.tick)
	if at%m.tick != 0 {
		e++
	}
	return e
}

// advance returns, sorted, what is due at now.
func (m *wheelModel) advance(now time.Duration) []int {
	var out []int
	moved := now > m.now
	if moved {
		m.now = now
	}
	target := int64(m.now / m.tick)
	for i, at := range m.at {
		if m.due[i] || (moved && m.expiry(at) <= target) {
			out = append(out, i)
		}
	}
	for _, i := range out {
		delete(m.at, i)
		delete(m.due, i)
	}
	slices.Sort(out)
	return out
}

// earliest returns the earliest rounded instant of a scheduled timer
// (saturated), whether one is due now, and whether any is scheduled.
func (m *wheelModel) earliest() (at time.Duration, dueNow, ok bool) {
	first := int64(math.MaxInt64)
	for i, a := range m.at {
		ok = true
		if m.due[i] {
			dueNow = true
		}
		first = min(first, m.expiry(a))
	}
	if first > int64(math.MaxInt64/m.tick) {
		return math.MaxInt64, dueNow, ok
	}
	return time.Duration(first) * m.tick, dueNow, ok
}

// wheelInstant decodes an instant from two bytes, relative to now: a few
// ticks ahead (or behind), the span of a level (64^L ticks) one tick
// either side, the start of the next bucket of a level, sub-tick offsets,
// and the extremes.
func wheelInstant(now, tick time.Duration, c, v byte) time.Duration {
	add := func(a, b time.Duration) time.Duration { // saturating
		switch {
		case b > 0 && a > math.MaxInt64-b:
			return math.MaxInt64
		case b < 0 && a < math.MinInt64-b:
			return math.MinInt64
		}
		return a + b
	}
	mul := func(n int64, d time.Duration) time.Duration { // saturating, n >= 0
		if n != 0 && d > math.MaxInt64/time.Duration(n) {
			return math.MaxInt64
		}
		return time.Duration(n) * d
	}
	level := int(c>>3) % 11 // 11 levels of 64 slots cover every int64 tick
	span := int64(1) << (6 * level)
	switch c & 7 {
	case 0:
		return add(now, mul(int64(v), tick))
	case 1:
		return add(add(now, mul(span, tick)), time.Duration(int8(v))*tick)
	case 2: // the start of the next bucket of the level, and around it
		b := int64(now/tick)/span + 1
		if b > math.MaxInt64/span {
			return math.MaxInt64
		}
		return add(mul(b*span, tick), time.Duration(int8(v))*tick)
	case 3:
		return [...]time.Duration{0, -1, math.MinInt64, now, now - 1, add(now, 1), math.MaxInt64,
			math.MaxInt64 - tick, math.MaxInt64 / 2, add(now, tick-1), add(now, tick+1)}[int(v)%11]
	case 4: // sub-tick
		return add(now, mul(int64(v), tick/7+1))
	default:
		return add(now, mul(int64(v)*int64(c>>3+1), tick))
	}
}

// runWheel runs data against a wheel and its model; see FuzzTimerWheel.
func runWheel(data []byte) error {
	if len(data) < 3 {
		return nil
	}
	tick := wheelTicks[data[0]&7]
	start := time.Duration(data[1])<<8 | time.Duration(data[2])
	start *= tick * time.Duration(data[0]>>3+1)
	if start < 0 {
		start = 0
	}
	w := timerwheel.New[int](tick, start)
	m := &wheelModel{tick: tick, now: start, at: map[int]time.Duration{}, due: map[int]bool{}}
	var timers [wheelTimers]timerwheel.Timer[int]
	for i := range timers {
		timers[i].Value = i
	}
	when := map[int]time.Duration{}
	data = data[3:]
	for step := 0; len(data) >= 4 && step < 512; step++ {
		op := data[:4]
		data = data[4:]
		i := int(op[1]) % wheelTimers
		where := fmt.Sprintf("step %d (op %v, clock %v, tick %v)", step, op, m.now, tick)
		switch op[0] % 6 {
		case 0, 1: // schedule (or move) timer i
			at := wheelInstant(m.now, tick, op[2], op[3])
			w.Schedule(&timers[i], at)
			m.at[i], when[i] = at, at
			m.due[i] = at <= m.now
		case 2: // cancel
			_, want := m.at[i]
			if got := w.Cancel(&timers[i]); got != want {
				return fmt.Errorf("%s: Cancel(%d) = %v, want %v", where, i, got, want)
			}
			delete(m.at, i)
			delete(m.due, i)
		case 3, 4: // advance to an instant (possibly behind the clock)
			now := wheelInstant(m.now, tick, op[2], op[3])
			if now < 0 {
				now = 0
			}
			if err := wheelAdvance(w, m, now, where); err != nil {
				return err
			}
			// Timers added while the due ones are processed fire as usual.
			if op[1]&0x80 != 0 {
				at := wheelInstant(m.now, tick, op[2]^1, op[3])
				w.Schedule(&timers[i], at)
				m.at[i], when[i] = at, at
				m.due[i] = at <= m.now
			}
		case 5: // advance to Next, as the store's driver does
			if next, ok := w.Next(); ok {
				if err := wheelAdvance(w, m, next, where); err != nil {
					return err
				}
			}
		}
		if err := wheelCheck(w, m, &timers, when, where); err != nil {
			return err
		}
	}
	return nil
}

func wheelAdvance(w *timerwheel.Wheel[int], m *wheelModel, now time.Duration, where string) error {
	var got []int
	for _, tm := range w.Advance(now, nil) {
		got = append(got, tm.Value)
	}
	slices.Sort(got)
	if want := m.advance(now); !slices.Equal(got, want) {
		return fmt.Errorf("%s: Advance(%v) handed back %v, want %v", where, now, got, want)
	}
	return nil
}

func wheelCheck(w *timerwheel.Wheel[int], m *wheelModel, timers *[wheelTimers]timerwheel.Timer[int],
	when map[int]time.Duration, where string) error {
	if w.Len() != len(m.at) {
		return fmt.Errorf("%s: Len() = %d, want %d", where, w.Len(), len(m.at))
	}
	if w.Now() != m.now {
		return fmt.Errorf("%s: Now() = %v, want %v", where, w.Now(), m.now)
	}
	for i := range timers {
		_, want := m.at[i]
		if got := timers[i].Scheduled(); got != want {
			return fmt.Errorf("%s: timer %d Scheduled() = %v, want %v", where, i, got, want)
		}
		if got := timers[i].When(); got != when[i] {
			return fmt.Errorf("%s: timer %d When() = %v, want %v", where, i, got, when[i])
		}
	}
	next, ok := w.Next()
	first, dueNow, any := m.earliest()
	switch {
	case ok != any:
		return fmt.Errorf("%s: Next() ok = %v with %d timers", where, ok, len(m.at))
	case !ok:
	case dueNow && next != m.now:
		return fmt.Errorf("%s: Next() = %v with a timer due now, want Now %v", where, next, m.now)
	case !dueNow && (next > first || next <= m.now && next != math.MaxInt64):
		return fmt.Errorf("%s: Next() = %v, want in (%v, %v]: never later than the earliest timer, never already past",
			where, next, m.now, first)
	}
	return nil
}
