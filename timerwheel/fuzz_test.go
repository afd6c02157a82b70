package timerwheel_test

import (
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// FuzzTimerWheel runs the fuzzer's bytes as operations on a timer wheel
// and on the model (pair, in model_test.go), which keeps each timer's
// expiry in a plain map and sorts what is due: every Advance hands back
// exactly the timers whose rounded instant has come (or that were
// scheduled for an instant not after the clock), never one early, each
// once; Cancel reports and frees at once; Len, Now, Scheduled, When and
// Next agree; and the wheel's internal invariants (CheckInvariants) hold
// after every op.
//
// Input: byte 0 picks the tick, bytes 1-2 the starting clock; then four
// bytes per op: kind, timer, and an instant selector (see wheelInstant).
// The seeds in testdata/fuzz/FuzzTimerWheel are wheelSeeds, written by
// TestSeedCorpus, and clock-at-max-int64, a regression input kept as is.
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

// wheelInstant decodes an instant from two bytes, relative to now: a few
// ticks ahead (or behind), the span of a level (64^L ticks) one tick
// either side, the start of the next bucket of a level, sub-tick offsets,
// and the extremes.
func wheelInstant(now, tick time.Duration, c, v byte) time.Duration {
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
		return addSat(now, mul(int64(v), tick))
	case 1:
		return addSat(addSat(now, mul(span, tick)), time.Duration(int8(v))*tick)
	case 2: // the start of the next bucket of the level, and around it
		b := int64(now/tick)/span + 1
		if b > math.MaxInt64/span {
			return math.MaxInt64
		}
		return addSat(mul(b*span, tick), time.Duration(int8(v))*tick)
	case 3:
		return [...]time.Duration{0, -1, math.MinInt64, now, now - 1, addSat(now, 1), math.MaxInt64,
			math.MaxInt64 - tick, math.MaxInt64 / 2, addSat(now, tick-1), addSat(now, tick+1)}[int(v)%11]
	case 4: // sub-tick
		return addSat(now, mul(int64(v), tick/7+1))
	default:
		return addSat(now, mul(int64(v)*int64(c>>3+1), tick))
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
	p := newPair(tick, start, wheelTimers)
	data = data[3:]
	for step := 0; len(data) >= 4 && step < 512; step++ {
		op := data[:4]
		data = data[4:]
		i := int(op[1]) % wheelTimers
		clock := p.m.now
		var err error
		switch op[0] % 6 {
		case 0, 1: // schedule (or move) timer i
			p.schedule(i, wheelInstant(p.m.now, tick, op[2], op[3]))
		case 2:
			err = p.cancel(i)
		case 3, 4: // advance to an instant (possibly behind the clock)
			_, err = p.advance(max(wheelInstant(p.m.now, tick, op[2], op[3]), 0))
			// Timers added while the due ones are processed fire as usual.
			if err == nil && op[1]&0x80 != 0 {
				p.schedule(i, wheelInstant(p.m.now, tick, op[2]^1, op[3]))
			}
		case 5: // advance to Next, as the store's driver does
			if next, ok := p.w.Next(); ok {
				_, err = p.advance(next)
			}
		}
		if err == nil {
			err = p.check()
		}
		if err != nil {
			return fmt.Errorf("step %d (op %v, clock %v, tick %v): %w", step, op, clock, tick, err)
		}
	}
	return nil
}

// wheelSeeds are FuzzTimerWheel's named seeds (see runWheel for the format).
func wheelSeeds() map[string][]byte {
	op := func(kind, idx, c, v byte) []byte { return []byte{kind, idx, c, v} }
	cat := func(parts ...[]byte) []byte {
		var out []byte
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	drive := func(n int) []byte { // advance to Next n times
		var out []byte
		for range n {
			out = append(out, op(5, 0, 0, 0)...)
		}
		return out
	}
	var boundaries, starts []byte
	for l := range byte(6) {
		for j, dv := range []byte{0xff, 0, 1} { // one tick before, at, after the span
			boundaries = append(boundaries, op(0, l*3+byte(j), 1|l<<3, dv)...)
			starts = append(starts, op(0, l*3+byte(j), 2|l<<3, dv)...)
		}
	}
	return map[string][]byte{
		// Durations exactly at a level's span, one tick either side.
		"level-boundaries": cat([]byte{0, 0, 7}, boundaries, drive(40)),
		// Timers at the start of the next bucket of each level, and around it.
		"level-bucket-starts": cat([]byte{0, 1, 0}, starts, drive(40)),
		// Sub-tick, zero, negative, now, math.MaxInt64.
		"sub-tick-zero-negative-max": cat([]byte{0, 0, 3},
			op(0, 0, 3, 0), op(0, 1, 3, 1), op(0, 2, 3, 2), op(0, 3, 3, 3), op(0, 4, 3, 4), op(0, 5, 3, 5),
			op(0, 6, 3, 6), op(0, 7, 3, 7), op(0, 8, 3, 8), op(0, 9, 3, 9), op(0, 10, 3, 10),
			op(0, 11, 4, 1), op(0, 12, 4, 6), op(0, 13, 4, 7), op(3, 0, 0, 0), op(3, 0, 0, 1),
			drive(10), op(3, 0, 3, 6), drive(3)),
		// A timer added while the due ones are handed back, at now and just after.
		"added-during-expiry": cat([]byte{0, 0, 0}, op(0, 0, 0, 1), op(0, 1, 0, 1), op(3, 0x80, 0, 1),
			op(3, 0x81, 3, 3), op(3, 0x82, 0, 2), drive(3), op(3, 0x80|5, 1, 0), drive(3)),
		// A wheel idle for a long time, then given a short deadline.
		"idle-then-short": cat([]byte{0, 0, 0}, op(0, 0, 1|7<<3, 0), op(3, 0, 1|6<<3, 0), op(3, 0, 1|5<<3, 3),
			op(0, 1, 0, 1), op(0, 2, 4, 1), drive(5)),
		// Cancelled timers do not keep the wheel busy or counted.
		"cancelled-timers-freed": cat([]byte{0, 0, 0}, op(0, 0, 1|3<<3, 0), op(0, 1, 1|4<<3, 0),
			op(0, 2, 0, 200), op(0, 3, 3, 1), op(2, 0, 0, 0), op(2, 1, 0, 0), op(2, 2, 0, 0), op(2, 3, 0, 0),
			op(2, 3, 0, 0), drive(2), op(3, 0, 3, 6)),
		// Rescheduling moves a timer; the clock never goes back.
		"reschedule-and-go-back": cat([]byte{1, 9, 9}, op(0, 0, 0, 10), op(0, 0, 0, 3), op(1, 0, 1|1<<3, 0),
			op(3, 0, 0, 2), op(3, 0, 3, 0), op(0, 1, 3, 4), op(3, 0, 3, 1), drive(5)),
		"coarse-tick": cat([]byte{7, 0, 1}, op(0, 0, 4, 3), op(0, 1, 0, 1), op(0, 2, 1|2<<3, 0), drive(6)),
	}
}

var updateSeeds = flag.Bool("update-seeds", false, "rewrite the seed corpus in testdata/fuzz/FuzzTimerWheel")

// TestSeedCorpus checks (or, with -update-seeds, writes) the files of
// wheelSeeds in testdata/fuzz/FuzzTimerWheel. Plain go test runs each as a
// subtest: go test ./timerwheel -run FuzzTimerWheel/level-boundaries.
func TestSeedCorpus(t *testing.T) {
	for name, data := range wheelSeeds() {
		path := filepath.Join("testdata", "fuzz", "FuzzTimerWheel", name)
		want := "go test fuzz v1\n[]byte(" + strconv.Quote(string(data)) + ")\n"
		if *updateSeeds {
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != want {
			t.Errorf("%s is missing or stale (err %v); rewrite with -update-seeds", path, err)
		}
	}
}
