package timerwheel_test

import (
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
	exp  map[int]int64         // scheduled timer index -> expiry tick, or dueNow
	when map[int]time.Duration // timer index -> the instant it was last scheduled for
}

func (m *model) schedule(i int, at time.Duration) {
	m.when[i] = at
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

// earliest returns the first instant a timer fires at (now, if one is due
// now), saturated at math.MaxInt64, or ok == false if there is none.
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

// addSat returns a+b saturated at math.MaxInt64 and math.MinInt64.
func addSat(a, b time.Duration) time.Duration {
	switch {
	case b > 0 && a > math.MaxInt64-b:
		return math.MaxInt64
	case b < 0 && a < math.MinInt64-b:
		return math.MinInt64
	}
	return a + b
}

// pair is a wheel of n timers (timer i has Value i) and the model, driven by
// the same operations: TestModelRandom's and FuzzTimerWheel's.
type pair struct {
	w      *wheel
	m      *model
	timers []timer
	due    []*timer // Advance's slice, reused
}

func newPair(tick, start time.Duration, n int) *pair {
	p := &pair{
		w:      timerwheel.New[int](tick, start),
		m:      &model{tick: tick, now: start, exp: map[int]int64{}, when: map[int]time.Duration{}},
		timers: make([]timer, n),
	}
	for i := range p.timers {
		p.timers[i].Value = i
	}
	return p
}

func (p *pair) schedule(i int, at time.Duration) {
	p.w.Schedule(&p.timers[i], at)
	p.m.schedule(i, at)
}

func (p *pair) cancel(i int) error {
	if want, got := p.m.cancel(i), p.w.Cancel(&p.timers[i]); got != want {
		return fmt.Errorf("Cancel(%d) = %v, want %v", i, got, want)
	}
	return nil
}

// advance moves both to now, checks that the wheel hands back exactly the
// model's due timers, each unscheduled, and returns how many fired.
func (p *pair) advance(now time.Duration) (fired int, err error) {
	p.due = p.w.Advance(now, p.due[:0])
	var got []int
	for _, tm := range p.due {
		if tm.Scheduled() {
			return 0, fmt.Errorf("Advance(%v) handed back timer %d still scheduled", now, tm.Value)
		}
		got = append(got, tm.Value)
	}
	slices.Sort(got)
	if want := p.m.advance(now); !slices.Equal(got, want) {
		return 0, fmt.Errorf("Advance(%v) handed back %v, want %v", now, got, want)
	}
	return len(got), nil
}

// check compares the wheel with the model after an operation: the wheel's
// own invariants (export_test.go), Len, Now, every timer's Scheduled and
// When, and Next: Now while a timer is due now, else after Now and never
// later than the earliest timer.
func (p *pair) check() error {
	w, m := p.w, p.m
	if err := w.CheckInvariants(); err != nil {
		return err
	}
	if w.Len() != len(m.exp) {
		return fmt.Errorf("Len() = %d, want %d", w.Len(), len(m.exp))
	}
	if w.Now() != m.now {
		return fmt.Errorf("Now() = %v, want %v", w.Now(), m.now)
	}
	for i := range p.timers {
		_, want := m.exp[i]
		if got := p.timers[i].Scheduled(); got != want {
			return fmt.Errorf("timer %d Scheduled() = %v, want %v", i, got, want)
		}
		if got := p.timers[i].When(); got != m.when[i] {
			return fmt.Errorf("timer %d When() = %v, want %v", i, got, m.when[i])
		}
	}
	next, ok := w.Next()
	first, wantOK := m.earliest()
	switch {
	case ok != wantOK:
		return fmt.Errorf("Next() ok = %v with %d timers", ok, len(m.exp))
	case !ok:
	case first == m.now && next != m.now:
		return fmt.Errorf("Next() = %v with a timer due now, want Now %v", next, m.now)
	case first > m.now && (next > first || next <= m.now):
		return fmt.Errorf("Next() = %v, want in (%v, %v]: never later than the earliest timer, never already past",
			next, m.now, first)
	}
	return nil
}

// runModel drives a wheel and the model with the same operations, drawn
// from rnd (rnd(n) is in [0, n)), and checks that they agree after each.
// It returns how many timers fired and which levels (bit L+1; bit 0 for
// the due-now list) timers were filed at, so callers can check coverage.
func runModel(t *testing.T, tick time.Duration, ops int, rnd func(n uint64) uint64) (fired int, levels uint) {
	const pool = 64
	p := newPair(tick, time.Duration(rnd(1<<40)), pool)
	w := p.w
	// magnitude returns a random duration of about 2^k for a random k < bits.
	magnitude := func(bits uint64) time.Duration {
		return time.Duration(rnd(1 << rnd(bits)))
	}
	for op := range ops {
		var err error
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
			p.schedule(i, at)
			levels |= 1 << (p.timers[i].Where() + 1)
		case r < 13: // cancel
			err = p.cancel(int(rnd(pool)))
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
			var n int
			n, err = p.advance(now)
			fired += n
		}
		if err == nil {
			err = p.check()
		}
		require.NoError(t, err, "op %d", op)
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
