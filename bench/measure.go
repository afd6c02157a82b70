package main

import (
	"runtime"
	"runtime/metrics"
	"slices"
	"sync"
	"time"
)

// heapAlloc returns the bytes of live heap objects once what is
// unreachable is freed: after a collection it waits for the cleanups and
// finalizers that collection queued (what they hold stays alive until
// they have run), then collects twice more: the first moves what
// sync.Pools cache to their victim caches, the second frees it.
func heapAlloc() float64 {
	runtime.GC()
	awaitCleanups()
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return float64(m.HeapAlloc)
}

// awaitCleanups yields until every cleanup and finalizer queued so far has
// run, or a second has passed.
func awaitCleanups() {
	counts := []metrics.Sample{
		{Name: "/gc/cleanups/queued:cleanups"},
		{Name: "/gc/cleanups/executed:cleanups"},
		{Name: "/gc/finalizers/queued:finalizers"},
		{Name: "/gc/finalizers/executed:finalizers"},
	}
	for end := time.Now().Add(time.Second); time.Now().Before(end); runtime.Gosched() {
		metrics.Read(counts)
		if counts[1].Value.Uint64() >= counts[0].Value.Uint64() && counts[3].Value.Uint64() >= counts[2].Value.Uint64() {
			return
		}
	}
}

// Median returns the median of each metric over samples (the mean of the
// middle two for an even count). A metric missing from some samples is
// the median of those that have it.
func Median(samples []Sample) Sample {
	out := Sample{}
	vals := map[string][]float64{}
	for _, s := range samples {
		for k, v := range s {
			vals[k] = append(vals[k], v)
		}
	}
	for k, vs := range vals {
		out[k] = median(vs)
	}
	return out
}

// PairedRatio returns the median, over repetitions, of a's figure for
// metric divided by b's in the same repetition (a[i] and b[i]). The peers
// of a repetition run interleaved (interleave.go), so its two figures met
// the same noise, where the two medians may come from different
// repetitions: the ratio of a pair is steadier than the ratio of the
// medians. A repetition is left out where either figure is missing or
// failed (see failed) or b's is not positive; ok is false when none is
// left.
func PairedRatio(a, b []Sample, metric string) (ratio float64, ok bool) {
	var rs []float64
	for i := range min(len(a), len(b)) {
		v, hasV := a[i][metric]
		ref, hasRef := b[i][metric]
		if !hasV || !hasRef || ref <= 0 || failed(a[i]) || failed(b[i]) {
			continue
		}
		rs = append(rs, v/ref)
	}
	if len(rs) == 0 {
		return 0, false
	}
	return median(rs), true
}

// median returns the median of vs (the mean of the middle two for an even
// count); vs is sorted in place.
func median(vs []float64) float64 {
	slices.Sort(vs)
	m := len(vs) / 2
	if len(vs)%2 == 1 {
		return vs[m]
	}
	return (vs[m-1] + vs[m]) / 2
}

// pairBatch is how many calls of one op pairedLoop times at a go.
const pairBatch = 32

// pairedLoop times two ops against each other over GOMAXPROCS goroutines:
// each worker alternates batches of pairBatch calls of a and of b, timing
// each batch, for benchtime. Worker w's calls are a(w, i) and b(w, i) for
// i = 0, 1, .... It returns the ns per call of each, as wall-clock time
// (summed over workers, divided by GOMAXPROCS, as RunParallel reports).
// Alternating batches lets drift and noise hit both alike, so that their
// difference holds where each figure alone is noisier than it. Both
// batches of a round take the same i, so the second finds what the first
// brought into the cache (a key's bucket and entry among a million): the
// rounds take turns at going first. It
// collects no garbage (a collection costs seconds with a million
// goroutines parked).
func pairedLoop(benchtime time.Duration, a, b func(w, i int)) (nsA, nsB float64) {
	procs := runtime.GOMAXPROCS(0)
	var mu sync.Mutex
	var sumA, sumB time.Duration
	var calls int
	var wg sync.WaitGroup
	start := time.Now()
	for w := range procs {
		wg.Go(func() {
			var ta, tb time.Duration
			i := 0
			batch := func(op func(w, i int), i int) time.Duration {
				t0 := time.Now()
				for k := range pairBatch {
					op(w, i+k)
				}
				return time.Since(t0)
			}
			for round := 0; time.Since(start) < benchtime; round++ {
				if round%2 == 0 {
					ta += batch(a, i)
					tb += batch(b, i)
				} else {
					tb += batch(b, i)
					ta += batch(a, i)
				}
				i += pairBatch
			}
			mu.Lock()
			sumA, sumB, calls = sumA+ta, sumB+tb, calls+i
			mu.Unlock()
		})
	}
	wg.Wait()
	wall := float64(procs) * float64(calls) // summed worker time per call, times procs: wall time per call
	return float64(sumA) / wall, float64(sumB) / wall
}

// allocsPer returns the bytes and allocations per call of op(0, i), over
// n calls on this goroutine.
func allocsPer(n int, op func(w, i int)) (bytes, allocs float64) {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := range n {
		op(0, i)
	}
	runtime.ReadMemStats(&after)
	return float64(after.TotalAlloc-before.TotalAlloc) / float64(n), float64(after.Mallocs-before.Mallocs) / float64(n)
}
