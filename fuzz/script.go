package fuzz

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"time"
)

// A script is what the model-based test and FuzzStore run against both the
// store and the model: a header byte and then four bytes per op. Every byte
// string decodes to some script, so the fuzzer never wastes an input, and
// Encode is the inverse of Decode for the scripts Generate and the tests
// write, so that seed files are readable scripts.

// OpKind is what an op does.
type OpKind uint8

const (
	OpHold        OpKind = iota // Hold(key) with the op's wait and maxHold
	OpTryHold                   // TryHold(key)
	OpRelease                   // fn of an earlier call returns
	OpReleaseKey                // fn of the holder of a key returns
	OpPanic                     // fn of an earlier call panics
	OpGoexit                    // fn of an earlier call calls runtime.Goexit
	OpCancel                    // the caller's context of an earlier call ends
	OpAdvance                   // time passes
	OpClose                     // the store closes
	OpCloseInside               // fn of an earlier call closes the store
	OpNested                    // fn of an earlier call holds its own key again
	OpRaceCancel                // cancel an earlier waiter while its key's holder lets go
	OpRaceAdvance               // time passes to the next deadline and, at that instant, the holder of a key lets go
	OpHoldRace                  // Hold(key) while the holder of that key lets go
	numOpKinds
)

var opNames = [...]string{"hold", "try", "release", "releaseKey", "panic", "goexit", "cancel",
	"advance", "close", "closeInside", "nested", "raceCancel", "raceAdvance", "holdRace"}

// Op is one step of a script. Which fields mean something depends on Kind.
type Op struct {
	Kind    OpKind
	Key     uint8 // 0..2 valid keys, 3 an invalid one
	Lock    uint8 // handle 0..2 (see handleNames in driver_test.go)
	Obey    bool  // fn returns when its context ends
	FnErr   bool  // fn returns its own error when let go
	Pre     bool  // the caller's context ended before the call
	Repr    uint8 // which Go value stands for the key (0..3)
	Wait    uint8 // duration selector, see Duration
	MaxHold uint8 // duration selector, see Duration
	Back    uint8 // an earlier call: 0 the latest, 1 the one before, ...
	Ms      uint8 // time selector, see Advance
}

// Header holds a script's store settings.
type Header struct {
	OneShard bool // Shards(1): every key on one shard
	Tick     time.Duration
}

// Script is a header and its ops.
type Script struct {
	Header
	Ops []Op
}

// MaxOps bounds a decoded script, so a fuzz input stays quick to run.
const MaxOps = 256

var ticks = [4]time.Duration{time.Millisecond, time.Millisecond, 3 * time.Millisecond, time.Millisecond}

// durations are the named choices of Duration: sub-tick, tick boundaries,
// the spans of the wheel's levels (64^L ticks) and one tick either side,
// the defaults, and the longest.
var durations = []time.Duration{
	time.Nanosecond, 999 * time.Microsecond, time.Millisecond, time.Millisecond + time.Nanosecond,
	1500 * time.Microsecond, 2 * time.Millisecond, 3 * time.Millisecond, 5 * time.Millisecond,
	8 * time.Millisecond, 10 * time.Millisecond, 15 * time.Millisecond, 20 * time.Millisecond,
	63 * time.Millisecond, 64 * time.Millisecond, 65 * time.Millisecond,
	4095 * time.Millisecond, 4096 * time.Millisecond, 4097 * time.Millisecond,
	time.Second, 10 * time.Second, time.Hour, math.MaxInt64, math.MaxInt64 - 1,
	262143 * time.Millisecond, 262144 * time.Millisecond,
}

const (
	durAbsent   = 0 // the lock's default
	durZero     = 1
	durNegative = 2
	durTable    = 3             // durations[sel-durTable]
	durMs       = durTable + 25 // sel-durMs+1 ms; 25 is len(durations), as TestScriptRoundTrip checks
)

// Duration decodes a duration selector: absent (use the lock's default),
// zero, negative, a named one, or a number of milliseconds.
func Duration(sel uint8) (d time.Duration, given bool) {
	switch {
	case sel == durAbsent:
		return 0, false
	case sel == durZero:
		return 0, true
	case sel == durNegative:
		return -time.Millisecond, true
	case sel < durMs:
		return durations[sel-durTable], true
	}
	return time.Duration(int(sel)-durMs+1) * time.Millisecond, true
}

// long are the named choices of Advance past 200 ms.
var long = []time.Duration{250 * time.Millisecond, 500 * time.Millisecond, time.Second,
	4095 * time.Millisecond, 4096 * time.Millisecond, 10 * time.Second, 15 * time.Second,
	time.Minute, time.Hour, 262144 * time.Millisecond, 64 * 64 * 64 * 64 * time.Millisecond}

// Advance decodes a time selector: 0 to 199 ms, or a longer named span.
// Whole milliseconds only, so the clock stays on the store's ticks.
func Advance(sel uint8) time.Duration {
	if sel < 200 {
		return time.Duration(sel) * time.Millisecond
	}
	return long[int(sel-200)%len(long)]
}

// Decode turns any bytes into a script.
func Decode(data []byte) Script {
	var s Script
	if len(data) == 0 {
		s.Tick = time.Millisecond
		return s
	}
	h := data[0]
	s.OneShard = h&1 != 0
	s.Tick = ticks[(h>>1)&3]
	data = data[1:]
	for len(data) >= 4 && len(s.Ops) < MaxOps {
		b := data[:4]
		data = data[4:]
		op := Op{Kind: OpKind(b[0] % uint8(numOpKinds))}
		switch op.Kind {
		case OpHold, OpTryHold, OpHoldRace:
			op.Key, op.Lock = b[1]&3, (b[1]>>2)&3%3
			op.Obey, op.FnErr, op.Pre = b[1]&0x10 != 0, b[1]&0x20 != 0, b[1]&0x40 != 0
			op.Repr = b[0] / uint8(numOpKinds) & 3
			op.Wait, op.MaxHold = b[2], b[3]
		case OpReleaseKey:
			op.Key, op.Lock = b[1]&3%3, (b[1]>>2)&3%3
		case OpRaceAdvance:
			op.Key, op.Lock = b[1]&3%3, (b[1]>>2)&3%3
		case OpAdvance:
			op.Ms = b[1]
		case OpClose:
		default:
			op.Back = b[1]
		}
		s.Ops = append(s.Ops, op)
	}
	return s
}

// Encode is the inverse of Decode for a script whose fields are in range.
func Encode(s Script) []byte {
	h := byte(0)
	if s.OneShard {
		h |= 1
	}
	switch s.Tick {
	case 3 * time.Millisecond:
		h |= 2 << 1
	}
	out := []byte{h}
	for _, op := range s.Ops {
		b := [4]byte{byte(op.Kind)}
		switch op.Kind {
		case OpHold, OpTryHold, OpHoldRace:
			b[0] += op.Repr * uint8(numOpKinds)
			b[1] = op.Key | op.Lock<<2
			if op.Obey {
				b[1] |= 0x10
			}
			if op.FnErr {
				b[1] |= 0x20
			}
			if op.Pre {
				b[1] |= 0x40
			}
			b[2], b[3] = op.Wait, op.MaxHold
		case OpReleaseKey:
			b[1] = op.Key | op.Lock<<2
		case OpRaceAdvance:
			b[1] = op.Key | op.Lock<<2
		case OpAdvance:
			b[1] = op.Ms
		case OpClose:
		default:
			b[1] = op.Back
		}
		out = append(out, b[:]...)
	}
	return out
}

// String writes a script one op a line, for failure messages.
func (s Script) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "store: oneShard=%v tick=%v\n", s.OneShard, s.Tick)
	for i, op := range s.Ops {
		fmt.Fprintf(&b, "%3d %s\n", i, op)
	}
	return b.String()
}

func (op Op) String() string {
	name := opNames[op.Kind]
	switch op.Kind {
	case OpHold, OpTryHold, OpHoldRace:
		s := fmt.Sprintf("%s key=%d lock=%d", name, op.Key, op.Lock)
		if d, ok := Duration(op.Wait); ok && op.Kind != OpTryHold {
			s += fmt.Sprintf(" wait=%v", d)
		}
		if d, ok := Duration(op.MaxHold); ok && op.Kind != OpTryHold {
			s += fmt.Sprintf(" maxHold=%v", d)
		}
		if op.Obey {
			s += " obey"
		}
		if op.FnErr {
			s += " fnErr"
		}
		if op.Pre {
			s += " preCanceled"
		}
		return s
	case OpReleaseKey:
		return fmt.Sprintf("%s key=%d lock=%d", name, op.Key, op.Lock)
	case OpRaceAdvance:
		return fmt.Sprintf("%s key=%d lock=%d", name, op.Key, op.Lock)
	case OpAdvance:
		return fmt.Sprintf("%s %v", name, Advance(op.Ms))
	case OpClose:
		return name
	}
	return fmt.Sprintf("%s back=%d", name, op.Back)
}

// Generate returns a random script of n ops, weighted towards contention on
// few keys, short waits and maxHolds, and small steps of time.
func Generate(r *rand.Rand, n int) Script {
	s := Script{Header: Header{OneShard: r.IntN(3) == 0, Tick: time.Millisecond}}
	if r.IntN(5) == 0 {
		s.Tick = 3 * time.Millisecond
	}
	// Round numbers of milliseconds, so that deadlines often fall on one
	// instant and race with each other.
	round := []int{5, 10, 15, 20, 25, 30, 40, 50, 60, 80, 100}
	dur := func(pAbsent int) uint8 {
		switch x := r.IntN(100); {
		case x < pAbsent:
			return durAbsent
		case x < pAbsent+4:
			return durZero
		case x < pAbsent+6:
			return durNegative
		case x < pAbsent+16:
			return uint8(durTable + r.IntN(len(durations)))
		}
		return uint8(durMs + round[r.IntN(len(round))] - 1)
	}
	kinds := []struct {
		k OpKind
		w int // per 1000
	}{{OpHold, 280}, {OpTryHold, 50}, {OpHoldRace, 50}, {OpRelease, 140}, {OpReleaseKey, 100},
		{OpPanic, 20}, {OpGoexit, 20}, {OpCancel, 60}, {OpAdvance, 150}, {OpClose, 5},
		{OpCloseInside, 5}, {OpNested, 20}, {OpRaceCancel, 40}, {OpRaceAdvance, 60}}
	for range n {
		op := Op{Back: uint8(r.IntN(6))}
		x := r.IntN(1000)
		for _, k := range kinds {
			if x -= k.w; x < 0 {
				op.Kind = k.k
				break
			}
		}
		op.Key = [10]uint8{0, 0, 0, 0, 0, 1, 1, 1, 2, 2}[r.IntN(10)] // contention on few keys
		if r.IntN(40) == 0 && op.Kind != OpReleaseKey && op.Kind != OpRaceAdvance {
			op.Key = 3
		}
		op.Lock = [5]uint8{0, 0, 1, 1, 2}[r.IntN(5)]
		op.Obey, op.FnErr, op.Pre = r.IntN(2) == 0, r.IntN(4) == 0, r.IntN(30) == 0
		op.Repr = uint8(r.IntN(4))
		op.Wait, op.MaxHold = dur(40), dur(60)
		switch y := r.IntN(10); {
		case y < 5:
			op.Ms = uint8(r.IntN(6))
		case y < 8:
			op.Ms = uint8(5 * r.IntN(7))
		case y < 9:
			op.Ms = uint8(r.IntN(200))
		default:
			op.Ms = uint8(200 + r.IntN(len(long)))
		}
		s.Ops = append(s.Ops, canon(op))
	}
	return s
}

// canon clears the fields an op's kind does not use, so that
// Decode(Encode(s)) == s.
func canon(op Op) Op {
	c := Op{Kind: op.Kind}
	switch op.Kind {
	case OpHold, OpTryHold, OpHoldRace:
		c.Key, c.Lock, c.Obey, c.FnErr, c.Pre, c.Repr, c.Wait, c.MaxHold =
			op.Key, op.Lock, op.Obey, op.FnErr, op.Pre, op.Repr, op.Wait, op.MaxHold
	case OpReleaseKey:
		c.Key, c.Lock = op.Key%3, op.Lock
	case OpRaceAdvance:
		c.Key, c.Lock = op.Key%3, op.Lock
	case OpAdvance:
		c.Ms = op.Ms
	case OpClose:
	default:
		c.Back = op.Back
	}
	return c
}
