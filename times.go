package locks

import (
	"sync/atomic"
	"time"
)

// HistogramBounds are the upper bounds of the buckets of a Histogram:
// Prometheus's default buckets, from 5 ms to 10 s.
var HistogramBounds = [...]time.Duration{
	5 * time.Millisecond, 10 * time.Millisecond, 25 * time.Millisecond, 50 * time.Millisecond,
	100 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond,
	time.Second, 2500 * time.Millisecond, 5 * time.Second, 10 * time.Second,
}

// Histogram counts durations in buckets: Counts[i] those above the bound
// before HistogramBounds[i] and at most it, the last count those above
// every bound. Sum is the total of the durations counted, in seconds: a
// float, since the time held by thousands of holders adds up past what a
// time.Duration holds within weeks.
type Histogram struct {
	Counts [len(HistogramBounds) + 1]uint64
	Sum    float64
}

// Count returns how many durations h counted.
func (h Histogram) Count() uint64 {
	var n uint64
	for _, c := range h.Counts {
		n += c
	}
	return n
}

// histogram is a shard's Histogram as it is recorded: with atomics, since
// a waiter records its time in line after waking, outside the shard's
// mutex. Each shard has its own, so no counter is shared by all shards.
type histogram struct {
	counts [len(HistogramBounds) + 1]atomic.Uint64
	// The sum in whole microseconds (enough for millennia of holds), and
	// the nanoseconds each duration had past its last microsecond: so
	// short holds add what they took, not nothing.
	sumMicros, sumRestNanos atomic.Uint64
}

// record counts d. O(buckets).
func (h *histogram) record(d time.Duration) {
	i := 0
	for i < len(HistogramBounds) && d > HistogramBounds[i] {
		i++
	}
	h.counts[i].Add(1)
	h.sumMicros.Add(uint64(d / time.Microsecond))
	h.sumRestNanos.Add(uint64(d % time.Microsecond))
}

// addTo adds what h counted to out.
func (h *histogram) addTo(out *Histogram) {
	for i := range h.counts {
		out.Counts[i] += h.counts[i].Load()
	}
	out.Sum += float64(h.sumMicros.Load())/1e6 + float64(h.sumRestNanos.Load())/1e9
}
