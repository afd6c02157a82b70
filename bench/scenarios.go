package main

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Sample is the figures of one repetition of one scenario for one peer,
// by metric name ("ns/op", "B/op", "allocs/op", and the scenario's own).
type Sample map[string]float64

// Column is one metric a scenario's table shows.
type Column struct {
	Key    string // the metric's name in a Sample
	Header string // the table's heading
	Format string // fmt verb for the value
}

// Scenario is one of the situations in which the peers are measured. Throughput scenarios have Load, experiments have Once; both
// can run under go test -bench (see bench_test.go).
type Scenario struct {
	// Name is the scenario's name: scenario=NAME/peer=... in the output.
	Name string
	// Title says what the scenario does, in one line.
	Title string
	// Columns are the metrics its table shows; the first is the one ratios
	// are taken of (lower is better).
	Columns []Column
	// Notes are printed under the table.
	Notes []string
	// Peers take part, in table order.
	Peers []Peer
	// Load prepares a throughput scenario's work on one instance of a
	// peer. go run ./bench runs the loads of every peer in alternating
	// phases (interleave.go); go test -bench runs one peer's under
	// b.RunParallel. Nil for experiments.
	Load func(env *Env, l Locker) Load
	// PerP is how many workers per P run a Load (1 when 0).
	PerP int
	// Once runs one repetition (or trial) of an experiment. Nil for
	// benchmarks.
	Once func(env *Env, p Peer) Sample
	// Trials is how many times a repetition of an experiment runs Once
	// for each peer, the peers interleaved: an experiment of a few
	// milliseconds per peer is otherwise at the mercy of one stall of the
	// machine. Its figures are the median trial's, but for Totals.
	Trials int
	// Totals are the metrics summed over the trials rather than their
	// median: counts of events that must not happen at all.
	Totals []string
	// AtScale marks an experiment over Env.Scale deadlines or keys: its
	// figures are totals over them, so one repetition per GOMAXPROCS is
	// enough.
	AtScale bool
	// OneCPU marks figures that do not depend on GOMAXPROCS: measured at
	// the last value of -cpu only.
	OneCPU bool
	// Isolated experiments run in a child process each (see child.go).
	Isolated bool
	// Versus, where set, names the peer every other one is compared with
	// instead of the best correct peer: the table's ×NAME column is each
	// row's first figure over that peer's, and the lines under it say how
	// many times that peer's figure each other peer's is, in every column.
	Versus string
}

// Load is a throughput scenario's work on one instance of a peer.
type Load struct {
	// Op returns worker w's operation, made before the clock starts: each
	// call holds one key once. Workers are numbered 0 to
	// GOMAXPROCS×PerP-1.
	Op func(w int) func()
	// Check returns the figures of a broken run (lost-updates, timeouts)
	// once n operations ran in all; nil where there is nothing to check.
	Check func(n int64) Sample
}

// combine returns the figures of a repetition made of trials: the median
// of each metric, but the sum of each of sc.Totals.
func (sc Scenario) combine(trials []Sample) Sample {
	out := Median(trials)
	for _, k := range sc.Totals {
		sum := 0.0
		for _, t := range trials {
			sum += t[k]
		}
		out[k] = sum
	}
	return out
}

// perP returns the workers per P of sc.
func (sc Scenario) perP() int { return max(sc.PerP, 1) }

// Env is what every scenario draws from: the keys and the sizes.
type Env struct {
	// Keys are the invoice ids invoice-000000 ... of the throughput
	// scenarios.
	Keys KeyList
	// Scale is how many deadlines are pending, or keys held, at once in the
	// experiments at scale (deadlines, memory).
	Scale int
	// Grants is how many grants the fairness scenario makes.
	Grants int
	// Reps is how many times an experiment repeats a benchmark inside one
	// repetition, for a median (the deadlines scenario's arm+cancel).
	Reps int
	// BenchTime is how long the experiments' own timing loops run (see
	// pairedLoop).
	BenchTime time.Duration
	// Zipf draws ranks of Keys with θ = 0.99.
	Zipf *Zipf

	clock clock // what the interleaved runs time with: realClock when nil

	mu     sync.Mutex
	draws  [][]uint32   // per worker, replayed by the zipf scenario
	spare  KeyList      // keys no pending hold uses (deadlines scenario)
	base   *heldFigures // the memory scenario's baseline
	warmed bool         // warmGoroutines(Scale + warmSpare) ran
}

// NewEnv returns an environment of nkeys invoice ids, experiments of the
// given scale, and the fairness run's number of grants.
func NewEnv(nkeys, scale, grants int) *Env {
	if scale > nkeys {
		panic("bench: the scale cannot exceed the number of keys")
	}
	return &Env{Keys: invoiceIDs(nkeys), Scale: scale, Grants: grants, Reps: 1, BenchTime: 200 * time.Millisecond, Zipf: NewZipf(uint64(nkeys), 0.99)}
}

// KeyList is a list of keys of one width, each sliced on demand from one
// string that holds them all. A []string of a million keys would be a
// million pointers for every garbage collection to scan: 15 ms a
// collection on the 2-core machine of the README, time the interleaved
// runs charge to the peers by the bytes they allocate, which then reads
// as a cost of a hold (bench/MEASUREMENTS.md, "The floor's own costs").
// A KeyList holds one pointer, however many keys it has.
type KeyList struct {
	all   string
	width int
}

// Len returns the number of keys.
func (k KeyList) Len() int {
	if k.width == 0 {
		return 0
	}
	return len(k.all) / k.width
}

// At returns the i-th key; it allocates nothing.
func (k KeyList) At(i int) string { return k.all[i*k.width : (i+1)*k.width] }

// Slice returns the keys i to j-1.
func (k KeyList) Slice(i, j int) KeyList {
	return KeyList{all: k.all[i*k.width : j*k.width], width: k.width}
}

// keyList returns n keys, fmt.Sprintf(format, i) for i from 0 to n-1,
// which must all be of one width.
func keyList(format string, n int) KeyList {
	width := len(fmt.Sprintf(format, 0))
	var b strings.Builder
	b.Grow(n * width)
	for i := range n {
		fmt.Fprintf(&b, format, i)
	}
	k := KeyList{all: b.String(), width: width}
	if len(k.all) != n*width {
		panic("bench: keys of " + format + " differ in width")
	}
	return k
}

// invoiceIDs returns invoice-000000 ... invoice-(n-1).
func invoiceIDs(n int) KeyList { return keyList("invoice-%06d", n) }

// zipfDraws returns worker w's replayable sequence of Zipf ranks.
func (env *Env) zipfDraws(w int) []uint32 {
	env.mu.Lock()
	defer env.mu.Unlock()
	for len(env.draws) <= w {
		env.draws = append(env.draws, env.Zipf.Draws(1<<16, uint64(len(env.draws))+1))
	}
	return env.draws[w]
}

// spareKeys returns 1<<16 keys that no invoice id equals.
func (env *Env) spareKeys() KeyList {
	env.mu.Lock()
	defer env.mu.Unlock()
	if env.spare.Len() == 0 {
		env.spare = keyList("spare-%08d", 1<<16)
	}
	return env.spare
}

// part returns worker w's share of keys when n workers split them.
func part(keys KeyList, w, n int) KeyList {
	w %= n
	return keys.Slice(w*keys.Len()/n, (w+1)*keys.Len()/n)
}

var nsCols = []Column{
	{"ns/op", "ns/op", "%.1f"},
	{"B/op", "B/op", "%.0f"},
	{"allocs/op", "allocs/op", "%.2f"},
	{"gc-ns/op", "gc-ns/op", "%.1f"},
}

// Scenarios returns the project's eight scenarios, in order, and remote
// (remote.go): figures only, no target.
func Scenarios() []Scenario {
	// floor-contract+wait and floor-contract+wait+checks differ from
	// floor-contract only in how a hold waits and in Hold's per-call work:
	// they are shown where holds wait, in hotkey and hotkey-deadline.
	isWaitFloor := func(p Peer) bool { return p.Name == waitFloorName || p.Name == checkedFloorName }
	all := filter(Peers(), func(p Peer) bool { return !isWaitFloor(p) })
	waitFloors := filter(Peers(), isWaitFloor)
	// floor-contract+AfterFunc and floor-contract+list differ from
	// floor-contract only in HoldMax: they are shown in maxhold.
	holds := filter(all, func(p Peer) bool { return p.Name != contractAfterFuncName && p.Name != listFloorName })
	waits := filter(all, func(p Peer) bool { return p.Waits })
	fifo := filter(append(slices.Clone(holds), waitFloors...), func(p Peer) bool { return p.FIFO })
	unbounded := filter(all, func(p Peer) bool { return !p.Waits })
	return []Scenario{
		{Name: "uncontended", Title: "GOMAXPROCS goroutines hold and release invoice ids, each walking its own slice (never colliding)",
			Columns: nsCols, Peers: holds, Load: func(env *Env, l Locker) Load { return walk(env, l, 0) }},
		{Name: "zipf", Title: "GOMAXPROCS goroutines hold invoice ids drawn with Zipf θ=0.99 (hot and cold keys, some collisions)",
			Columns: nsCols, Peers: holds, Load: zipfLoad},
		{Name: "hotkey", Title: "8 goroutines per P hold one key (waiters park; every 32nd holder yields the processor while holding)",
			Columns: nsCols, Peers: append(append(slices.Clone(holds), waitFloors...), locksForever), PerP: 8, Load: func(env *Env, l Locker) Load { return hotKey(env, l, false) },
			Notes: []string{
				"FIFO peers: " + names(fifo) + "; the others let a releasing goroutine take the key again.",
				"locks arms its wait deadline (default 10 s) for every waiter: for it, hotkey and hotkey-deadline are the same work.",
				"floor-contract+wait is floor-contract with its waiters standing as the contract's bounded wait needs: a clock reading at the call,",
				"a line and a list of deadlines each waiter can leave in O(1), a wake-up of its own (peers_contract_wait.go): locks over it is",
				"what locks adds to the floor of a hold that waits.",
				"floor-contract+wait+checks is floor-contract+wait with the rest of what Hold's contract asks of every call: its arguments",
				"and the holds enclosing its context checked; under the shard's lock the store's closed flag, the line's limit, a count of",
				"running holds; the function's context (Err, Value); a wait that watches the caller's context; a deferred release that",
				"checks the lease; the context ended at the release (peers_contract_checked.go): locks over it is what locks adds to the",
				"floor of a call of Hold that waits.",
				"locks+Forever waits with Wait(Forever), arming no deadline: locks over it is what the default bound costs a hot key",
				"(the runtime timer locks' wheel keeps pending is the process's: every peer of this run shares its cost alike).",
			}},
		{Name: "hotkey-deadline", Title: "the same, every hold bounded by a 10 s wait (peers: context.WithTimeout)",
			Columns: nsCols, Peers: append(slices.Clone(waits), waitFloors...), PerP: 8, Load: func(env *Env, l Locker) Load { return hotKey(env, l, true) },
			Notes: []string{
				"chanmap selects on its channel and a context.WithTimeout (chanmap+WithTimeout); " + names(unbounded) + " cannot bound a wait: not shown.",
				"floor-contract bounds no wait; locks arms its 10 s wait in hotkey too, so its ×floor there covers the bounded wait.",
				"floor-contract+wait and floor-contract+wait+checks run their Hold, as in hotkey: each waiter already stands in its shard's",
				"list of deadlines for a 10 s wait (they fire none: on a hot key none comes due). They are here so that the target's floor",
				"(floor-contract+wait+checks) is measured in the same run as the target's figures.",
			}},
		{Name: "maxhold", Title: "uncontended holds with a 1-minute maxHold armed (peers: time.AfterFunc, then Stop)",
			Columns: nsCols, Peers: all, Load: func(env *Env, l Locker) Load { return walk(env, l, time.Minute) },
			Notes: []string{
				"floor-contract arms no timer here (it only records the deadline): ×floor says what a maxHold adds to a hold;",
				"floor-contract+AfterFunc arms and stops one time.AfterFunc per hold, as the other peers do;",
				"floor-contract+list links each deadline in its shard's list, as a revocable maxHold needs, and arms no timer",
				"(one per list, armed once, tends to nothing a hold): locks over it is what locks adds to the floor of a maxHold.",
			}},
		fairnessScenario(append(slices.Clone(holds), waitFloors...)),
		deadlinesScenario(),
		memoryScenario(holds),
		remoteScenario(),
	}
}

func filter(ps []Peer, keep func(Peer) bool) []Peer {
	var out []Peer
	for _, p := range ps {
		if keep(p) {
			out = append(out, p)
		}
	}
	return out
}

// walk is the uncontended scenario (and, with maxHold > 0, the maxHold
// one): each of the GOMAXPROCS workers holds the keys of its own slice of
// env.Keys in turn, so no two ever want one key.
func walk(env *Env, l Locker, maxHold time.Duration) Load {
	procs := runtime.GOMAXPROCS(0)
	return Load{Op: func(w int) func() {
		mine := part(env.Keys, w, procs)
		n := mine.Len()
		c := new(cursor)
		fn := c.count
		if maxHold > 0 {
			return func() { l.HoldMax(mine.At(c.next(n)), maxHold, fn) }
		}
		return func() { l.Hold(mine.At(c.next(n)), fn) }
	}}
}

// cursor is one worker's place in its sequence of keys and its count of
// holds, in a 128-byte block of its own (two cache lines, as the
// processor's adjacent-line prefetch pairs them). The workers' cursors are
// made one after the other: as two variables each, they shared a block,
// and every hold of one worker took the other's cache line away from its
// core. At GOMAXPROCS 2 that added 30-65 ns to each walk hold, to every
// peer, in some processes and not others, by where the variables landed.
// A cursor comes from the allocator's 128-byte size class, whose objects
// start at multiples of 128 in their span.
type cursor struct {
	i, n int
	_    [128 - 2*8]byte
}

// next moves to the next of n places, from the last back to the first,
// and returns it.
func (c *cursor) next(n int) int {
	if c.i++; c.i == n {
		c.i = 0
	}
	return c.i
}

// count is a hold's function: it counts the hold.
func (c *cursor) count() { c.n++ }

// zipfLoad is the zipf scenario: each worker replays its own pre-drawn
// sequence of Zipf ranks, so drawing costs nothing while timed.
func zipfLoad(env *Env, l Locker) Load {
	procs := runtime.GOMAXPROCS(0)
	for w := range procs {
		env.zipfDraws(w) // drawn before the clock starts
	}
	return Load{Op: func(w int) func() {
		draws := env.zipfDraws(w % procs)
		c := new(cursor)
		fn := c.count
		return func() { l.Hold(env.Keys.At(int(draws[c.next(len(draws))])), fn) }
	}}
}

// hotYield: in the hot-key scenarios, every hotYield-th holder yields the
// processor while it holds the key, as a holder doing I/O would, so that
// the other workers come and wait in line. Without it nothing would ever
// wait at GOMAXPROCS 1, where a worker runs until it is preempted; with
// it, a line forms in every phase for every peer alike (a FIFO lock's
// line then lasts: each release hands the key to a parked waiter).
const hotYield = 32

// hotKey is the hot-key scenario: every worker (8 per P) holds one key,
// incrementing a plain counter under it. The counter must end at the
// number of grants: a lost update is reported as "lost-updates". With
// wait, every hold is bounded by deadlineWait, through HoldWait, or, for
// the wait floors, which are not Waiters, through Hold, which stands in
// line for deadlineWait; a wait that ran out is reported as "timeouts".
func hotKey(env *Env, l Locker, wait bool) Load {
	key := env.Keys.At(0)
	count := 0 // guarded by the key
	var timeouts atomic.Int64
	fn := func() {
		if count++; count%hotYield == 0 {
			runtime.Gosched()
		}
	}
	return Load{
		Op: func(int) func() {
			if !wait {
				return func() { l.Hold(key, fn) }
			}
			w, ok := l.(Waiter)
			if !ok {
				switch l.(type) {
				case *waitFloor, *checkedFloor:
					// Their Hold stands in line as a wait of deadlineWait
					// does (see hotkey-deadline's notes).
					return func() { l.Hold(key, fn) }
				}
				panic(fmt.Sprintf("bench: %T cannot bound a wait", l))
			}
			return func() {
				if !w.HoldWait(key, deadlineWait, fn) {
					timeouts.Add(1)
				}
			}
		},
		Check: func(n int64) Sample {
			s := Sample{}
			if t := timeouts.Load(); t > 0 {
				s["timeouts"] = float64(t)
			}
			if lost := n - timeouts.Load() - int64(count); lost != 0 {
				s["lost-updates"] = float64(lost)
			}
			return s
		},
	}
}
