package main

import (
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

const (
	// fairGoroutines stand in line for one key in the fairness scenario.
	fairGoroutines = 64
	// fairGrace: a grant counts as "out of order, by far" when it passes
	// over a waiter that arrived this much earlier than the one served,
	// longer than any path from taking a ticket to joining a lock's line.
	fairGrace = 10 * time.Microsecond
	// fairTrials is how many trials of each peer a repetition runs.
	fairTrials = 5
)

func fairnessScenario(peers []Peer) Scenario {
	return Scenario{
		Name:  "fairness",
		Title: "64 goroutines hold one key for 10,000 grants; 5 trials, the peers interleaved",
		Columns: []Column{
			{"ns/grant", "ns/grant", "%.0f"},
			{"out-of-order", "out-of-order", "%.0f"},
			{"out-of-order-10us", "by >10µs", "%.0f"},
			{"worst/mean", "worst/mean wait", "%.1f"},
			{"worst-ms", "worst ms", "%.2f"},
		},
		Notes: []string{
			"arrival order: each goroutine takes a ticket from an atomic counter (and stamps the time) just before calling Hold;",
			"a grant is out of order when it serves a ticket while an earlier ticket still waits; 'by >10µs' counts only those",
			"where that earlier ticket was stamped more than 10 µs before the one served (so not a race between taking a ticket and joining the line).",
			"each holder yields the processor once (runtime.Gosched) while holding, so that the others come and queue behind it,",
			"as behind a holder doing I/O; wait = grant time - stamp; worst/mean is over every grant of a trial.",
			"5 trials of each peer, in a fresh random order each: out-of-order counts are totals over the trials (50,000 grants),",
			"the other figures the median trial's (a trial takes milliseconds: one stall of the machine would make its figures).",
			"floor-contract+wait and floor-contract+wait+checks (see hotkey) show where a line that does what the contract asks stands:",
			"the goroutines are new in each trial, and a hold whose frames outgrow a new goroutine's first stack (2 KiB) copies it",
			"to a larger one in its first hold, which delays the trial's first round (bench/MEASUREMENTS.md, \"Worst wait\").",
		},
		Peers:  peers,
		Once:   fairness,
		Trials: fairTrials,
		Totals: []string{"out-of-order", "out-of-order-10us"},
	}
}

// fairness runs env.Grants grants of one key among fairGoroutines
// goroutines, each taking a ticket before every Hold, and measures the
// order and the waits of the grants. Goroutines stop taking tickets once
// env.Grants grants were made; the tickets already taken are still served
// and counted.
func fairness(env *Env, p Peer) Sample {
	l := p.New()
	defer l.Close()
	key := env.Keys.At(0)
	size := env.Grants + fairGoroutines
	stamps := make([]atomic.Int64, size) // ns since start, +1 so that 0 means "not stamped yet"
	start := time.Now()

	// Guarded by the key: only the goroutine holding it touches these.
	granted := make([]bool, size)
	waits := make([]int64, 0, size)
	nextDue := 0 // the lowest ticket not granted yet
	strict, far := 0, 0

	var tickets atomic.Int64
	var stop atomic.Bool
	var wg sync.WaitGroup
	for range fairGoroutines {
		wg.Go(func() {
			var t int
			fn := func() {
				now := int64(time.Since(start)) + 1
				mine := stamps[t].Load()
				waits = append(waits, now-mine)
				granted[t] = true
				if t != nextDue {
					strict++
					if s := stamps[nextDue].Load(); s != 0 && mine-s > int64(fairGrace) {
						far++
					}
				}
				for nextDue < size && granted[nextDue] {
					nextDue++
				}
				if len(waits) >= env.Grants {
					stop.Store(true)
				}
				runtime.Gosched() // let the others come and queue, as behind a holder doing I/O
			}
			for !stop.Load() {
				t = int(tickets.Add(1) - 1)
				if t >= size {
					return
				}
				stamps[t].Store(int64(time.Since(start)) + 1)
				l.Hold(key, fn)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)

	var sum int64
	for _, w := range waits {
		sum += w
	}
	worst := slices.Max(waits)
	mean := float64(sum) / float64(len(waits))
	return Sample{
		"ns/grant":          float64(elapsed) / float64(len(waits)),
		"out-of-order":      float64(strict),
		"out-of-order-10us": float64(far),
		"worst/mean":        float64(worst) / mean,
		"worst-ms":          float64(worst) / 1e6,
	}
}
