package main

import (
	"context"
	"math/rand/v2"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"time"
)

// The throughput scenarios measure every peer in one interleaved run:
// the same workers run the peers' loads in turn, one phase of phaseLen
// each, in a fresh random order every round, until each peer has run for
// the benchmark time. A burst of machine noise longer than a round (a
// neighbour's job, a frequency change) then hits every peer alike, and the
// ratios of one run hold where each figure alone would drift; measuring
// each peer's whole run after the other's, a noisy second doubles one
// figure and leaves the other.
//
// The garbage collector would be such noise too: a collection runs
// concurrently for milliseconds, slowing whichever peers' phases it
// overlaps, not the peers that allocated. So it is off while the phases
// run, and between phases, once the heap has grown by its live size (when
// GOGC=100 would start one), a collection runs untimed and its wall time
// is charged to the peers by the bytes each allocated since the last one:
// the share a collector pacing itself on allocation gives each.

// phaseLen is how long the workers run one peer before the next. Short, so
// that a round of ten peers spans tens of milliseconds; long enough that
// starting and stopping the workers (microseconds) is lost in it.
const phaseLen = 2 * time.Millisecond

// checkEvery is how many operations a worker runs between readings of the
// clock; a worker that sees the phase over stops the others at their next
// operation.
const checkEvery = 16

// clock is what the interleaved runs read the time from: realClock, or
// a test's, which moves only when its holds say so.
type clock interface {
	Now() time.Time
	Since(t time.Time) time.Duration
}

type realClock struct{}

func (realClock) Now() time.Time                  { return time.Now() }
func (realClock) Since(t time.Time) time.Duration { return time.Since(t) }

// phase is one peer's turn: every worker runs its operation of the peer
// until stop.
type phase struct {
	ops   [][]func() // by subject, then worker
	who   int        // the subject whose turn it is
	clock clock
	start time.Time
	stop  atomic.Bool
	n     atomic.Int64 // operations done
	end   atomic.Int64 // the last worker's end, ns after start
	done  sync.WaitGroup
	label []context.Context // by subject: the profiler's labels
}

// subjectFigures are what one peer accumulated over its phases.
type subjectFigures struct {
	wall          time.Duration // the phases' and the share of collections charged
	gc            time.Duration // of which collections
	ops, all      int64         // timed operations; all operations, warm-up included
	bytes, allocs uint64
}

// interleave runs sc's load for each of peers in alternating phases at
// the current GOMAXPROCS, until each has run for benchtime, and returns
// each peer's figures in order: ns/op (wall-clock time per operation over
// all workers, as b.RunParallel reports), B/op, allocs/op, gc-ns/op (the
// part of ns/op charged for collections) and its load's checks. One round
// first warms every peer up, untimed.
func interleave(env *Env, sc Scenario, peers []Peer, benchtime time.Duration, seed uint64) []Sample {
	procs := runtime.GOMAXPROCS(0)
	workers := procs * sc.perP()
	ls := make([]Locker, len(peers))
	loads := make([]Load, len(peers))
	ph := &phase{ops: make([][]func(), len(peers)), label: make([]context.Context, len(peers)), clock: env.clock}
	if ph.clock == nil {
		ph.clock = realClock{}
	}
	for i, p := range peers {
		ls[i] = p.New()
		loads[i] = sc.Load(env, ls[i])
		ph.ops[i] = make([]func(), workers)
		for w := range workers {
			ph.ops[i][w] = loads[i].Op(w)
		}
		ph.label[i] = pprof.WithLabels(context.Background(), pprof.Labels("scenario", sc.Name, "peer", p.Name))
	}
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()

	// Workers live for the whole run and take each phase from their own
	// channel, so that no goroutine is started while timing.
	cmds := make([]chan *phase, workers)
	for w := range cmds {
		cmds[w] = make(chan *phase, 1)
		go worker(w, cmds[w])
	}
	defer func() {
		for _, c := range cmds {
			close(c)
		}
	}()

	figs := make([]subjectFigures, len(peers))
	sinceGC := make([]uint64, len(peers)) // bytes each allocated since the last collection
	var mem runtime.MemStats
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	runtime.GC()
	runtime.ReadMemStats(&mem)
	goal := 2 * mem.HeapAlloc
	collect := func() {
		t := ph.clock.Now()
		runtime.GC()
		d := ph.clock.Since(t)
		var total uint64
		for _, b := range sinceGC {
			total += b
		}
		for i, b := range sinceGC {
			if total > 0 {
				share := time.Duration(float64(d) * float64(b) / float64(total))
				figs[i].wall += share
				figs[i].gc += share
			}
			sinceGC[i] = 0
		}
		runtime.ReadMemStats(&mem)
		goal = 2 * max(mem.HeapAlloc, 4<<20) // GOGC=100's goal, and its 4 MiB minimum heap
	}
	run := func(who int, timed bool) {
		runtime.ReadMemStats(&mem)
		if mem.HeapAlloc >= goal {
			collect()
		}
		bytes, allocs := mem.TotalAlloc, mem.Mallocs
		ph.who = who
		ph.stop.Store(false)
		ph.n.Store(0)
		ph.end.Store(0)
		ph.done.Add(workers)
		ph.start = ph.clock.Now()
		for _, c := range cmds {
			c <- ph
		}
		ph.done.Wait()
		runtime.ReadMemStats(&mem)
		f := &figs[who]
		f.all += ph.n.Load()
		if timed {
			f.wall += time.Duration(ph.end.Load())
			f.ops += ph.n.Load()
			f.bytes += mem.TotalAlloc - bytes
			f.allocs += mem.Mallocs - allocs
			sinceGC[who] += mem.TotalAlloc - bytes
		}
	}

	for who := range peers {
		run(who, false)
	}
	collect() // the warm-up's garbage is no one's
	rng := rand.New(rand.NewPCG(seed, uint64(procs)))
	order := make([]int, len(peers))
	for i := range order {
		order[i] = i
	}
	for {
		least := time.Duration(-1)
		for _, f := range figs {
			if least < 0 || f.wall < least {
				least = f.wall
			}
		}
		if least >= benchtime {
			break
		}
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		for _, who := range order {
			run(who, true)
		}
	}

	out := make([]Sample, len(peers))
	for i, f := range figs {
		n := float64(f.ops)
		out[i] = Sample{
			"ns/op": float64(f.wall.Nanoseconds()) / n,
			// Whole bytes and allocations, as go test -benchmem reports
			// them: the process's other allocations (the bench's own,
			// the runtime's) add a fraction of a byte per op that is no
			// hold's.
			"B/op":      float64(f.bytes / uint64(f.ops)),
			"allocs/op": float64(f.allocs / uint64(f.ops)),
			"gc-ns/op":  float64(f.gc.Nanoseconds()) / n,
		}
		if loads[i].Check != nil {
			for k, v := range loads[i].Check(f.all) {
				out[i][k] = v
			}
		}
	}
	return out
}

// worker runs worker w's operation of each phase it is given until the
// phase is over, then reports how many it ran and when it ended.
func worker(w int, cmds <-chan *phase) {
	for ph := range cmds {
		pprof.SetGoroutineLabels(ph.label[ph.who])
		op := ph.ops[ph.who][w]
		n := int64(0)
		for !ph.stop.Load() {
			op()
			if n++; n%checkEvery == 0 && ph.clock.Since(ph.start) >= phaseLen {
				ph.stop.Store(true)
			}
		}
		end := int64(ph.clock.Since(ph.start))
		for {
			old := ph.end.Load()
			if end <= old || ph.end.CompareAndSwap(old, end) {
				break
			}
		}
		ph.n.Add(n)
		ph.done.Done()
	}
}
