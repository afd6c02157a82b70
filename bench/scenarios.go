package main

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
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

// Scenario is one of the eight situations in which the peers are
// measured. Throughput scenarios have Bench, experiments have Once; both
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
	// Bench measures one peer as a benchmark; extra metrics go through
	// b.ReportMetric. Nil for experiments.
	Bench func(b *testing.B, env *Env, p Peer)
	// Once runs one repetition of an experiment. Nil for benchmarks.
	Once func(env *Env, p Peer) Sample
	// AtScale marks an experiment over Env.Scale deadlines or keys: its
	// figures are totals over them, so one repetition per GOMAXPROCS is
	// enough.
	AtScale bool
	// OneCPU marks figures that do not depend on GOMAXPROCS: measured at
	// the last value of -cpu only.
	OneCPU bool
	// Isolated experiments run in a child process each (see child.go).
	Isolated bool
}

// Env is what every scenario draws from: the keys and the sizes.
type Env struct {
	// Keys are the invoice ids invoice-000000 ... of the throughput
	// scenarios.
	Keys []string
	// Scale is how many deadlines are pending, or keys held, at once in the
	// experiments at scale (deadlines, memory).
	Scale int
	// Grants is how many grants the fairness scenario makes.
	Grants int
	// Reps is how many times an experiment repeats a benchmark inside one
	// repetition, for a median (the deadlines scenario's arm+cancel).
	Reps int
	// BenchTime is how long the experiments' own timing loops run (see
	// parallelLoop).
	BenchTime time.Duration
	// Zipf draws ranks of Keys with θ = 0.99.
	Zipf *Zipf

	mu     sync.Mutex
	draws  [][]uint32   // per worker, replayed by the zipf scenario
	spare  []string     // keys no pending hold uses (deadlines scenario)
	base   *heldFigures // the memory scenario's baseline
	warmed bool         // warmGoroutines(Scale) ran
}

// NewEnv returns an environment of nkeys invoice ids, experiments of the
// given scale, and the fairness run's number of grants.
func NewEnv(nkeys, scale, grants int) *Env {
	keys := make([]string, nkeys)
	for i := range keys {
		keys[i] = fmt.Sprintf("invoice-%06d", i)
	}
	if scale > nkeys {
		panic("bench: the scale cannot exceed the number of keys")
	}
	return &Env{Keys: keys, Scale: scale, Grants: grants, Reps: 1, BenchTime: 200 * time.Millisecond, Zipf: NewZipf(uint64(nkeys), 0.99)}
}

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
func (env *Env) spareKeys() []string {
	env.mu.Lock()
	defer env.mu.Unlock()
	if env.spare == nil {
		env.spare = make([]string, 1<<16)
		for i := range env.spare {
			env.spare[i] = fmt.Sprintf("spare-%08d", i)
		}
	}
	return env.spare
}

// part returns worker w's share of keys when n workers split them.
func part(keys []string, w, n int) []string {
	w %= n
	return keys[w*len(keys)/n : (w+1)*len(keys)/n]
}

var nsCols = []Column{
	{"ns/op", "ns/op", "%.1f"},
	{"B/op", "B/op", "%.0f"},
	{"allocs/op", "allocs/op", "%.2f"},
}

// Scenarios returns the eight scenarios, in order.
func Scenarios() []Scenario {
	all := Peers()
	waits := filter(all, func(p Peer) bool { return p.Waits })
	correct := filter(all, func(p Peer) bool { return p.Class == Correct })
	return []Scenario{
		{Name: "uncontended", Title: "GOMAXPROCS goroutines hold and release invoice ids, each walking its own slice (never colliding)",
			Columns: nsCols, Peers: all, Bench: func(b *testing.B, env *Env, p Peer) { walk(b, env, p, 0) }},
		{Name: "zipf", Title: "GOMAXPROCS goroutines hold invoice ids drawn with Zipf θ=0.99 (hot and cold keys, some collisions)",
			Columns: nsCols, Peers: all, Bench: benchZipf},
		{Name: "hotkey", Title: "8 goroutines per P hold one key (waiters park)",
			Columns: nsCols, Peers: all, Bench: func(b *testing.B, env *Env, p Peer) { hotKey(b, env, p, false) },
			Notes: []string{
				"FIFO peers: locks, chanmap, semaphore, semaphore-timeout; the others let a releasing goroutine take the key again.",
				"locks arms its wait deadline (default 10 s) for every waiter: for it, hotkey and hotkey-deadline are the same work.",
			}},
		{Name: "hotkey-deadline", Title: "the same, every hold bounded by a 10 s wait (peers: context.WithTimeout)",
			Columns: nsCols, Peers: waits, Bench: func(b *testing.B, env *Env, p Peer) { hotKey(b, env, p, true) },
			Notes: []string{"chanmap selects on its channel and a context.WithTimeout; mutexmap, moby-locker, keymutex and the floors cannot bound a wait: not shown."}},
		{Name: "maxhold", Title: "uncontended holds with a 1-minute maxHold armed (peers: time.AfterFunc, then Stop)",
			Columns: nsCols, Peers: all, Bench: func(b *testing.B, env *Env, p Peer) { walk(b, env, p, time.Minute) }},
		fairnessScenario(all),
		deadlinesScenario(),
		memoryScenario(correct),
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
// one): each of the GOMAXPROCS goroutines holds the keys of its own slice
// of env.Keys in turn, so no two ever want one key.
func walk(b *testing.B, env *Env, p Peer, maxHold time.Duration) {
	l := p.New()
	defer l.Close()
	procs := runtime.GOMAXPROCS(0)
	var workers atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		mine := part(env.Keys, int(workers.Add(1)-1), procs)
		n := 0
		fn := func() { n++ }
		for i := 0; pb.Next(); i++ {
			if i == len(mine) {
				i = 0
			}
			if maxHold > 0 {
				l.HoldMax(mine[i], maxHold, fn)
			} else {
				l.Hold(mine[i], fn)
			}
		}
	})
}

// benchZipf is the zipf scenario: each goroutine replays its own
// pre-drawn sequence of Zipf ranks, so drawing costs nothing while timed.
func benchZipf(b *testing.B, env *Env, p Peer) {
	l := p.New()
	defer l.Close()
	procs := runtime.GOMAXPROCS(0)
	for w := range procs {
		env.zipfDraws(w) // drawn before the clock starts
	}
	var workers atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		draws := env.zipfDraws(int(workers.Add(1)-1) % procs)
		n := 0
		fn := func() { n++ }
		for i := 0; pb.Next(); i++ {
			if i == len(draws) {
				i = 0
			}
			l.Hold(env.Keys[draws[i]], fn)
		}
	})
}

// hotKey is the hot-key scenario: 8 goroutines per P hold one key, each
// incrementing a plain counter under it. The counter must end at the
// number of grants: a lost update is reported as "lost-updates". With
// wait, every hold is bounded by deadlineWait; a wait that ran out is
// reported as "timeouts".
func hotKey(b *testing.B, env *Env, p Peer, wait bool) {
	l := p.New()
	defer l.Close()
	key := env.Keys[0]
	count := 0 // guarded by the key
	var timeouts atomic.Int64
	b.SetParallelism(8)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		fn := func() { count++ }
		for pb.Next() {
			if !wait {
				l.Hold(key, fn)
			} else if !l.HoldWait(key, deadlineWait, fn) {
				timeouts.Add(1)
			}
		}
	})
	b.StopTimer()
	if t := timeouts.Load(); t > 0 {
		b.ReportMetric(float64(t), "timeouts")
	}
	if lost := int64(b.N) - timeouts.Load() - int64(count); lost != 0 {
		b.ReportMetric(float64(lost), "lost-updates")
	}
}
