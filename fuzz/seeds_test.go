package fuzz

import (
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// The seed corpora in testdata/fuzz/<Target>/ are written from the
// definitions below: one named file per failure mode seen in the field (README.md
// maps them). TestSeedCorpus checks that the files match; after changing a
// seed or the script format, rewrite them with
//
//	go test ./fuzz -run TestSeedCorpus -update-seeds
//
// Plain go test runs every seed file as a subtest of its fuzz target
// (go test ./fuzz -run FuzzStore/head-waiter-cancelled runs one).

var updateSeeds = flag.Bool("update-seeds", false, "rewrite the seed corpora in testdata/fuzz")

// sb builds a script, naming calls by their number (0, 1, ...) rather than
// by the script's back-references.
type sb struct {
	s     Script
	calls int
}

func newScript() *sb { return &sb{s: Script{Header: Header{Tick: time.Millisecond}}} }

// flags of a hold op
const (
	obey  = 1 << iota // fn returns when its context ends
	fnErr             // fn returns its own error
	pre               // the caller's context ended before the call
	repr1             // another Go value for the key
	repr2
)

func (b *sb) add(op Op) *sb { b.s.Ops = append(b.s.Ops, canon(op)); return b }

func (b *sb) holdOp(k OpKind, key, lock, wait, maxHold uint8, f int) *sb {
	b.calls++
	return b.add(Op{Kind: k, Key: key, Lock: lock, Wait: wait, MaxHold: maxHold,
		Obey: f&obey != 0, FnErr: f&fnErr != 0, Pre: f&pre != 0, Repr: uint8(f/repr1) & 3})
}

// hold: Hold(key) on handle lock; wait and maxHold are selectors (0: the
// lock's default; see ms and dur).
func (b *sb) hold(key, lock, wait, maxHold uint8, f int) *sb {
	return b.holdOp(OpHold, key, lock, wait, maxHold, f)
}
func (b *sb) try(key, lock uint8, f int) *sb { return b.holdOp(OpTryHold, key, lock, 0, 0, f) }
func (b *sb) holdRace(key, lock, wait uint8, f int) *sb {
	return b.holdOp(OpHoldRace, key, lock, wait, 0, f)
}
func (b *sb) ref(k OpKind, id int) *sb { return b.add(Op{Kind: k, Back: uint8(b.calls - 1 - id)}) }
func (b *sb) release(id int) *sb       { return b.ref(OpRelease, id) }
func (b *sb) panicFn(id int) *sb       { return b.ref(OpPanic, id) }
func (b *sb) goexit(id int) *sb        { return b.ref(OpGoexit, id) }
func (b *sb) cancel(id int) *sb        { return b.ref(OpCancel, id) }
func (b *sb) closeIn(id int) *sb       { return b.ref(OpCloseInside, id) }
func (b *sb) nested(id int) *sb        { return b.ref(OpNested, id) }
func (b *sb) raceCancel(id int) *sb    { return b.ref(OpRaceCancel, id) }
func (b *sb) releaseKey(key, lock uint8) *sb {
	return b.add(Op{Kind: OpReleaseKey, Key: key, Lock: lock})
}
func (b *sb) raceAdvance(key, lock uint8) *sb {
	return b.add(Op{Kind: OpRaceAdvance, Key: key, Lock: lock})
}
func (b *sb) close() *sb { return b.add(Op{Kind: OpClose}) }

// advance lets n ms pass (n < 200), or a long named span.
func (b *sb) advance(n int) *sb { return b.add(Op{Kind: OpAdvance, Ms: uint8(n)}) }
func (b *sb) advanceLong(d time.Duration) *sb {
	for i, l := range long {
		if l == d {
			return b.add(Op{Kind: OpAdvance, Ms: uint8(200 + i)})
		}
	}
	panic("no such long span: " + d.String())
}

// ms is the duration selector of n milliseconds, 1 to 228.
func ms(n int) uint8 { return uint8(durMs + n - 1) }

// dur is the duration selector of a named duration.
func dur(d time.Duration) uint8 {
	for i, x := range durations {
		if x == d {
			return uint8(durTable + i)
		}
	}
	panic("no such named duration: " + d.String())
}

// storeSeeds are FuzzStore's seeds: keys 0, 1, 2 ("9", "x", "700"; 3 is
// invalid), handles 0 ("inv"), 1 ("inv" with MaxHold 7ms, Wait 15ms), 2
// ("other").
func storeSeeds() map[string]Script {
	seeds := map[string]*sb{
		// A waiter cancelled, or timed out, at the head of the line: the one
		// behind it is woken at the next release.
		"head-waiter-cancelled": newScript().hold(0, 0, 0, 0, 0).hold(0, 0, 0, 0, 0).hold(0, 0, 0, 0, repr1).
			cancel(1).release(0).release(2),
		"head-waiter-timed-out": newScript().hold(0, 0, 0, 0, 0).hold(0, 0, ms(10), 0, 0).hold(0, 0, ms(100), 0, 0).
			advance(10).release(0).release(2),
		// A release landing between a waiter's check and its park.
		"lost-wakeup": newScript().hold(0, 0, 0, 0, 0).holdRace(0, 0, dur(time.Hour), 0).
			hold(0, 0, 0, 0, 0).holdRace(0, 0, ms(5), obey).advance(5).releaseKey(0, 0).advance(20),
		// Cancellation, or a wait deadline, racing the handoff.
		"cancel-racing-handoff": newScript().hold(0, 0, 0, 0, 0).hold(0, 0, 0, 0, 0).hold(0, 0, 0, 0, obey).
			hold(0, 0, 0, 0, 0).raceCancel(1).releaseKey(0, 0).raceCancel(2).releaseKey(0, 0).releaseKey(0, 0),
		"deadline-racing-handoff": newScript().hold(0, 0, 0, 0, 0).hold(0, 0, ms(10), 0, 0).
			hold(0, 0, ms(10), 0, 0).hold(0, 0, ms(100), 0, 0).raceAdvance(0, 0).releaseKey(0, 0).releaseKey(0, 0),
		"maxhold-racing-wait-deadline": newScript().hold(0, 0, 0, ms(10), 0).hold(0, 0, ms(10), 0, 0).
			hold(0, 0, ms(10), 0, 0).hold(0, 0, ms(50), 0, 0).advance(10).releaseKey(0, 0).
			hold(1, 0, 0, ms(10), obey).hold(1, 0, ms(10), 0, 0).raceAdvance(1, 0).advance(50),
		// Two adjacent waiters leaving at the same instant.
		"adjacent-waiters-cancelled": newScript().hold(0, 0, 0, 0, 0).hold(0, 0, 0, 0, 0).hold(0, 0, 0, 0, 0).
			hold(0, 0, 0, 0, 0).cancel(1).cancel(2).release(0).release(3).try(0, 0, 0).release(4),
		"adjacent-waiters-timed-out": newScript().hold(0, 0, 0, 0, 0).hold(0, 0, ms(5), 0, 0).
			hold(0, 0, ms(5), 0, 0).hold(0, 0, 0, 0, 0).advance(5).release(0).release(3).try(0, 1, 0),
		// A deadline counted once from the call, not re-armed.
		"wait-counted-once": newScript().hold(0, 0, 0, ms(12), 0).hold(0, 0, 0, ms(100), 0).advance(5).
			hold(0, 0, ms(30), 0, 0).hold(0, 0, dur(time.Hour), 0, 0).advance(7).advance(22).advance(1).
			advance(77).advance(1).release(0).release(1).release(3),
		// A release-and-hold loop must not starve a queued waiter.
		"release-hold-loop": newScript().hold(0, 0, 0, 0, 0).hold(0, 0, 0, 0, 0).release(0).hold(0, 0, 0, 0, 0).
			try(0, 0, 0).release(1).release(2).hold(0, 0, 0, 0, 0).try(0, 0, 0).release(3),
		// A revoked holder's late release; a double release.
		"revoked-late-release": newScript().hold(0, 0, 0, ms(5), 0).hold(0, 0, 0, 0, 0).hold(0, 0, 0, 0, 0).
			advance(5).release(0).try(0, 0, 0).release(1).release(2),
		"revoked-release-after-successor": newScript().hold(0, 0, 0, ms(5), fnErr).hold(0, 0, 0, 0, 0).
			hold(0, 0, 0, 0, 0).advance(5).release(1).release(0).release(2),
		// A timer from an earlier grant or wait ending the current one.
		"stale-timer": newScript().hold(0, 0, 0, ms(10), 0).hold(0, 0, ms(10), 0, 0).
			hold(1, 0, 0, 0, 0).hold(1, 0, ms(10), ms(20), 0).advance(5).release(0).release(2).
			advance(10).advance(15).advanceLong(time.Hour).release(1).release(3),
		// Durations at a wheel level's span, one tick either side; sub-tick.
		"wheel-level-boundaries": newScript().hold(0, 0, 0, 0, 0).hold(0, 0, ms(63), 0, 0).
			hold(0, 0, dur(64*time.Millisecond), 0, 0).hold(0, 0, dur(65*time.Millisecond), 0, 0).
			hold(1, 0, 0, dur(4096*time.Millisecond), 0).hold(1, 0, dur(4095*time.Millisecond), 0, 0).
			hold(1, 0, dur(4097*time.Millisecond), 0, 0).hold(2, 2, 0, 0, 0).
			hold(2, 2, dur(time.Nanosecond), 0, 0).hold(2, 2, dur(999*time.Microsecond), 0, 0).
			hold(2, 2, dur(time.Millisecond+time.Nanosecond), 0, 0).hold(2, 2, dur(1500*time.Microsecond), 0, 0).
			advance(1).advance(1).advance(61).advance(1).advance(1).advance(1).
			advanceLong(4096 * time.Millisecond).advance(1).advanceLong(262144 * time.Millisecond),
		"wheel-level-boundaries-maxhold": newScript().hold(0, 0, 0, dur(64*time.Millisecond), 0).
			hold(0, 0, dur(time.Hour), dur(63*time.Millisecond), 0).hold(0, 0, dur(time.Hour), dur(65*time.Millisecond), 0).
			hold(1, 0, 0, dur(262143*time.Millisecond), obey).hold(1, 0, dur(time.Hour), dur(time.Nanosecond), 0).
			advance(63).advance(1).advance(63).advance(1).advanceLong(262144 * time.Millisecond).advance(1),
		"tick-3ms-rounding": func() *sb {
			b := newScript()
			b.s.Tick = 3 * time.Millisecond
			return b.hold(0, 0, 0, ms(4), 0).hold(0, 0, ms(1), 0, 0).hold(0, 0, ms(3), 0, 0).
				hold(0, 0, ms(4), 0, 0).hold(0, 0, ms(7), 0, 0).advance(1).advance(1).advance(1).advance(1).
				advance(1).advance(1).advance(1)
		}(),
		// A timer added while its bucket is being expired; an idle wheel
		// then a short deadline.
		"timer-armed-during-expiry": newScript().hold(0, 0, 0, ms(1), 0).hold(0, 0, 0, ms(1), 0).
			hold(0, 0, 0, dur(time.Nanosecond), 0).hold(0, 0, 0, ms(1), obey).hold(0, 0, 0, 0, 0).
			advance(1).advance(1).advance(1).advance(5).release(0).release(1).release(2).release(4),
		"idle-then-short-deadline": newScript().advanceLong(time.Hour).advanceLong(64*64*64*64*time.Millisecond).
			hold(0, 0, 0, 0, 0).hold(1, 0, 0, 0, 0).hold(1, 0, dur(10*time.Second), 0, 0).
			advanceLong(time.Hour).hold(0, 0, ms(1), 0, 0).advance(1).hold(0, 0, dur(time.Nanosecond), 0, 0).advance(1),
		"max-int64-durations": newScript().hold(0, 0, 0, dur(1<<63-1), 0).hold(0, 0, dur(1<<63-1), dur(1<<63-2), 0).
			advanceLong(time.Hour).advanceLong(64 * 64 * 64 * 64 * time.Millisecond).release(0).advanceLong(time.Hour),
		"zero-and-negative-durations": newScript().hold(0, 0, 0, durZero, 0).hold(0, 0, durZero, 0, 0).
			hold(0, 0, durNegative, 0, 0).hold(0, 0, 0, durNegative, 0).hold(0, 1, 0, durZero, 0).
			hold(0, 1, durZero, durZero, 0).release(0).hold(0, 1, 0, durZero, 0).advance(20),
		// Close racing holders, from inside fn, twice.
		"close-inside-fn": newScript().hold(0, 0, 0, dur(time.Hour), 0).hold(0, 0, 0, 0, 0).hold(1, 0, 0, 0, obey).
			closeIn(0).close().hold(0, 0, 0, 0, 0).release(0).release(2),
		"close-with-revoked-holder": newScript().hold(0, 0, 0, ms(5), 0).hold(0, 0, 0, 0, 0).hold(0, 0, 0, 0, 0).
			advance(5).close().release(0).release(1).try(0, 0, 0),
		"close-twice": newScript().hold(0, 0, 0, 0, 0).hold(0, 0, 0, 0, 0).close().close().release(0).
			hold(1, 2, 0, 0, 0).try(1, 2, 0),
		// Panics and runtime.Goexit let the key go; keys of the same shard
		// carry on.
		"panic-lets-key-go": func() *sb {
			b := newScript()
			b.s.OneShard = true
			// 2 is granted by 0's end, then revoked at its maxHold and ends
			// the same way while 3 holds.
			return b.hold(0, 0, 0, 0, 0).hold(1, 0, 0, 0, 0).hold(0, 0, 0, ms(5), 0).panicFn(0).
				hold(0, 0, 0, 0, 0).advance(5).panicFn(2).release(3).release(1)
		}(),
		"goexit-lets-key-go": func() *sb {
			b := newScript()
			b.s.OneShard = true
			// 2 is granted by 0's end, then revoked at its maxHold and ends
			// the same way while 3 holds.
			return b.hold(0, 0, 0, 0, 0).hold(1, 0, 0, 0, 0).hold(0, 0, 0, ms(5), 0).goexit(0).
				hold(0, 0, 0, 0, 0).advance(5).goexit(2).release(3).release(1)
		}(),
		// No barging, nesting, contexts, keys.
		"tryhold-never-barges": newScript().hold(0, 0, 0, 0, 0).hold(0, 0, 0, 0, 0).release(0).try(0, 0, 0).
			try(0, 1, repr1).release(1).try(0, 2, 0).try(0, 0, 0),
		"nested-hold-same-key": newScript().hold(0, 0, 0, ms(5), 0).nested(0).hold(0, 0, 0, 0, 0).
			advance(5).nested(0).nested(1).cancel(1).nested(1).release(0).release(1),
		"precanceled-context": newScript().hold(0, 0, 0, 0, pre).try(0, 0, pre).hold(0, 0, 0, 0, 0).
			hold(0, 0, 0, 0, pre).try(0, 0, pre).release(2),
		"caller-canceled-while-holding": newScript().hold(0, 0, 0, 0, 0).hold(0, 0, 0, 0, obey|fnErr).
			cancel(0).release(0).cancel(1).hold(0, 0, 0, 0, 0).release(2),
		"handles-share-keys": newScript().hold(0, 0, 0, 0, 0).hold(0, 1, 0, 0, repr1|repr2).
			hold(0, 2, 0, 0, repr1).hold(0, 1, 0, 0, repr1).advance(15).release(0).advance(7).releaseKey(0, 2),
		"invalid-keys": newScript().hold(3, 0, 0, 0, 0).hold(3, 1, 0, 0, repr1).try(3, 2, repr2).
			hold(3, 0, 0, 0, repr1|repr2).hold(0, 0, 0, 0, 0).release(4),
	}
	out := map[string]Script{}
	for name, b := range seeds {
		out[name] = b.s
	}
	return out
}

// queueSeeds are FuzzWaitQueue's seeds: pairs (op%3: push, pop, remove;
// arg: list<<7 | element).
func queueSeeds() map[string][]byte {
	return map[string][]byte{
		"remove-head":          {0, 0, 0, 1, 0, 2, 2, 0, 1, 0, 1, 0},
		"remove-adjacent":      {0, 0, 0, 1, 0, 2, 0, 3, 2, 1, 2, 2, 1, 0, 1, 0},
		"double-remove":        {0, 0, 0, 1, 2, 1, 2, 1, 1, 0, 1, 0},
		"remove-from-other":    {0, 0, 0, 0x81, 2, 0x80, 2, 1, 2, 0x81, 1, 0x80},
		"push-twice-panics":    {0, 0, 0, 0, 0, 0x80, 2, 0, 0, 0x80},
		"pop-empty-then-reuse": {1, 0, 1, 0x80, 0, 5, 1, 0, 0, 5, 1, 0},
	}
}

func seedFile(data []byte) string {
	return "go test fuzz v1\n[]byte(" + strconv.Quote(string(data)) + ")\n"
}

// TestSeedCorpus checks (or, with -update-seeds, writes) the seed files.
func TestSeedCorpus(t *testing.T) {
	files := map[string][]byte{}
	for name, s := range storeSeeds() {
		files[filepath.Join("FuzzStore", name)] = Encode(s)
	}
	for name, data := range queueSeeds() {
		files[filepath.Join("FuzzWaitQueue", name)] = data
	}
	for name, data := range files {
		path := filepath.Join("testdata", "fuzz", name)
		want := seedFile(data)
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
	for name, s := range storeSeeds() {
		if d := Decode(Encode(s)); d.String() != s.String() {
			t.Errorf("seed %s does not survive Encode/Decode:\n%v\nwant\n%v", name, d, s)
		}
	}
}
