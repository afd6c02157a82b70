package main

import (
	"context"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"sync"
	"time"

	"github.com/holdline/locks"
)

const (
	// fireWindow is the window in which the deadlines of the lateness test
	// all fall due.
	fireWindow = 100 * time.Millisecond
	// fireTrials is how many windows the lateness test runs; the median
	// is reported. Below fullScale, where no lateness target is checked,
	// it runs one.
	fireTrials = 3
	// armTimings is the fewest timings of arm+cancel whose median is
	// reported.
	armTimings = 5
)

// timerMech is a deadline mechanism of the deadlines scenario: the
// library's maxHold, time.AfterFunc, context.WithTimeout.
type timerMech struct {
	// arm arms n deadlines d from now and returns them; with d == 0 it
	// builds the same thing without deadlines (the library: n holds without
	// a maxHold; the timers: nothing), the baseline that arm(n, d) is
	// compared with. It arms the first few, calls between (if not nil),
	// then arms the rest.
	arm func(env *Env, n int, d time.Duration, few int, between func()) pendingSet
	// fire arms n deadlines due evenly within one fireWindow that starts
	// after lead, and returns how late each one fired, and how many could
	// not be armed before they were due.
	fire func(env *Env, n int, lead time.Duration) (late []time.Duration, overran int)
}

// pendingSet is a set of pending deadlines made by timerMech.arm.
type pendingSet interface {
	// ops returns the operations the arm+cancel figure compares, as
	// worker w's i-th call: with arms one deadline of d and cancels it;
	// without does the same work without a deadline (for the timers,
	// nothing).
	ops(env *Env, d time.Duration) (with, without func(w, i int))
	// cancel cancels every deadline of the set and lets go of it.
	cancel()
}

var mechs = map[string]timerMech{
	"locks":               {arm: armLocks, fire: fireLocks},
	"time.AfterFunc":      {arm: armAfterFunc, fire: fireAfterFunc},
	"context.WithTimeout": {arm: armWithTimeout, fire: fireWithTimeout},
}

func deadlinesScenario() Scenario {
	return Scenario{
		Name:  "deadlines",
		Title: "deadlines at scale: arm+cancel with N pending, heap per pending deadline, lateness of N due in one 100 ms window",
		Columns: []Column{
			{"arm+cancel-ns", "arm+cancel ns", "%.1f"},
			{"arm+cancel-B", "B/op", "%.0f"},
			{"arm+cancel-allocs", "allocs/op", "%.2f"},
			{"B/pending", "B/pending", "%.2f"},
			{"fixed-KiB", "fixed KiB", "%.1f"},
			{"B/cancelled", "B/cancelled", "%.2f"},
			{"late-max-ms", "last late ms", "%.1f"},
			{"late-p50-ms", "p50 late ms", "%.2f"},
			{"overran", "unarmed", "%.0f"},
		},
		Notes: []string{
			"locks: a deadline is a maxHold; its arm+cancel is a hold of a free key with MaxHold(1m) minus the same hold without,",
			"timed in alternating batches of 32 (so that noise hits both alike) with N maxHolds of 1 h pending (N goroutines holding",
			"keys), the median of at least 5 timings; the heap of holds with a maxHold minus as many without: B/pending, what one",
			"more pending deadline adds (the slope from the set's first N/10 to all N); fixed KiB, what they add besides (locks: each",
			"shard's list for the duration, and its queue's room to grow); B/cancelled, per deadline of N, after release.",
			"time.AfterFunc, context.WithTimeout: arm then Stop (cancel), N armed for 1 h over the Ps; B/op, allocs/op on one goroutine.",
			"heap figures after three runtime.GC, waiting after the first until the cleanups it queued have run (the last frees what sync.Pools cached).",
			"the garbage collector is off during the experiment (but for the collections that measure the heap): at this scale",
			"one costs seconds (N parked goroutines to scan, for locks) and would drown the timings; B/op and allocs/op are counted.",
			"lateness: see lateness.go: N deadlines due evenly within 100 ms; late = when the deadline's action was seen done - its",
			"due time. locks: the revocation (the hold's context reports Err), context.WithTimeout: the cancellation, both seen by",
			"one goroutine polling the deadlines in due order; time.AfterFunc: when its function ran (the runtime starts a goroutine",
			"per fire). The median of 3 windows (one below N = 1,000,000, where no target checks it). 'unarmed' counts deadlines",
			"whose setup ran past their due time (the figure is then not valid).",
		},
		Peers: []Peer{
			{Name: "locks", Class: Correct, About: "MaxHold, one timer wheel per store"},
			{Name: "time.AfterFunc", Class: Correct, About: "runtime timers"},
			{Name: "context.WithTimeout", Class: Correct, About: "runtime timers, a context each"},
		},
		Once:     deadlines,
		AtScale:  true,
		Isolated: true,
	}
}

// deadlines runs the three measurements of the deadlines scenario for one
// mechanism.
//
// The garbage collector is off for the whole experiment but for the
// collections heapAlloc asks for: at this scale a collection costs
// seconds (a million goroutines to scan, for the library), which would
// wreck both the arm+cancel timings and the lateness window, and says
// nothing about the deadlines.
func deadlines(env *Env, p Peer) Sample {
	m := mechs[p.Name]
	n := env.Scale
	s := Sample{}
	if p.Name == "locks" {
		env.warm() // its sets are goroutines; the timers' are not
	}
	env.spareKeys() // made before the heap is measured
	defer debug.SetGCPercent(debug.SetGCPercent(-1))

	// What a mechanism keeps once per store, shard or duration (locks: a
	// shard's list for the duration, made with its first deadline of it)
	// is not a pending deadline's cost: B/pending is the slope between the
	// heap of the set's first tenth and that of the whole set, and the
	// intercept is reported as fixed-KiB. Both points come from one set,
	// so that what one set leaves to the next (the runtime's timer heaps
	// keep their capacity) cannot tilt the slope.
	few := n / 10
	h0 := heapAlloc()
	var baseFew float64
	set := m.arm(env, n, 0, few, func() { baseFew = heapAlloc() - h0 })
	baseHeld := heapAlloc() - h0
	set.cancel()
	baseLeft := heapAlloc() - h0

	h0 = heapAlloc()
	var heldFew float64
	var measuring time.Duration
	start := time.Now()
	set = m.arm(env, n, time.Hour, few, func() {
		t := time.Now()
		heldFew = heapAlloc() - h0
		measuring = time.Since(t)
	})
	armed := time.Since(start) - measuring
	held := heapAlloc() - h0
	with, without := set.ops(env, time.Minute)
	// At least armTimings timings, each a share of the benchmark time: the
	// median of several resists a stall of the machine better than one
	// long timing does.
	var timings []Sample
	reps := max(env.Reps, armTimings)
	for range reps {
		a, b := pairedLoop(env.BenchTime*time.Duration(env.Reps)/time.Duration(reps), with, without)
		timings = append(timings, Sample{"arm+cancel-ns": a - b, "with-ns": a, "without-ns": b})
	}
	bytesA, allocsA := allocsPer(10_000, with)
	bytesB, allocsB := allocsPer(10_000, without)
	set.cancel()
	left := heapAlloc() - h0

	t := Median(timings)
	s["arm+cancel-ns"], s["with-ns"], s["without-ns"] = t["arm+cancel-ns"], t["with-ns"], t["without-ns"]
	s["arm+cancel-B"] = bytesA - bytesB
	s["arm+cancel-allocs"] = allocsA - allocsB
	perPending := (held - baseHeld - (heldFew - baseFew)) / float64(n-few)
	s["B/pending"] = perPending
	s["fixed-KiB"] = (held - baseHeld - perPending*float64(n)) / 1024
	s["B/cancelled"] = (left - baseLeft) / float64(n)

	// The window starts 100 ms plus three times the arming just measured
	// ahead; if a deadline was still due before it could be armed (a busy
	// machine), once more with four times the lead. The lateness of the
	// last deadline is one figure of one window, at the mercy of one stall
	// of the machine: the median of fireTrials windows is reported.
	lead := 100*time.Millisecond + 3*armed
	trials := fireTrials
	if n < fullScale {
		trials = 1 // the figure is printed, not checked (see Check): -quick stays under a minute
	}
	var lasts, p50s []float64
	for range trials {
		var late []time.Duration
		var overran int
		// Labelled, so that a CPU profile can be narrowed to the lateness
		// test: go tool pprof -tagfocus phase=fire (goroutines started inside
		// inherit the label).
		pprof.Do(context.Background(), pprof.Labels("phase", "fire"), func(context.Context) {
			late, overran = m.fire(env, n, lead)
			if overran > 0 {
				late, overran = m.fire(env, n, 4*lead)
			}
		})
		slices.Sort(late)
		lasts = append(lasts, float64(late[len(late)-1])/1e6)
		p50s = append(p50s, float64(late[len(late)/2])/1e6)
		s["overran"] += float64(overran)
	}
	s["late-max-ms"], s["late-p50-ms"] = median(lasts), median(p50s)
	return s
}

// locksSet is n goroutines each holding one invoice id of a fresh store,
// with or without a maxHold.
type locksSet struct {
	store   *locks.Store
	lock    *locks.Lock
	release chan struct{}
	done    sync.WaitGroup
}

func armLocks(env *Env, n int, d time.Duration, few int, between func()) pendingSet {
	p := newLocksPeer().(*locksPeer)
	s := &locksSet{store: p.store, lock: p.lock, release: make(chan struct{})}
	var in sync.WaitGroup
	fn := func(context.Context, *locks.Lease) error { in.Done(); <-s.release; return nil }
	var opts []locks.Option
	if d > 0 {
		opts = append(opts, locks.MaxHold(d))
	}
	s.done.Add(n)
	inSteps(n, few, between, func(lo, hi int) {
		in.Add(hi - lo)
		for i := lo; i < hi; i++ {
			key := env.Keys.At(i)
			go func() {
				mustHold(s.lock.Hold(context.Background(), key, fn, opts...))
				s.done.Done()
			}()
		}
		in.Wait()
	})
	return s
}

// inSteps calls arm with the first few of n places (arm(0, few)), then
// between (if not nil), then arm with the rest (arm(few, n)).
func inSteps(n, few int, between func(), arm func(lo, hi int)) {
	arm(0, few)
	if between != nil {
		between()
	}
	arm(few, n)
}

func (s *locksSet) ops(env *Env, d time.Duration) (with, without func(w, i int)) {
	procs := runtime.GOMAXPROCS(0)
	parts, lens := make([]KeyList, procs), make([]int, procs)
	for w := range parts {
		parts[w] = part(env.spareKeys(), w, procs)
		lens[w] = parts[w].Len()
	}
	fn := func(context.Context, *locks.Lease) error { return nil }
	with = func(w, i int) {
		mustHold(s.lock.Hold(context.Background(), parts[w].At(i%lens[w]), fn, locks.MaxHold(d)))
	}
	without = func(w, i int) {
		mustHold(s.lock.Hold(context.Background(), parts[w].At(i%lens[w]), fn))
	}
	return with, without
}

func (s *locksSet) cancel() {
	close(s.release)
	s.done.Wait()
	s.store.Close()
}

func errString(err error) string {
	if err == nil {
		return "nil"
	}
	return err.Error()
}

// timerSet is n runtime timers armed from GOMAXPROCS goroutines, so that
// they spread over the Ps' timer heaps as a server's would.
type timerSet struct {
	stops []func() bool
}

func armTimers(n int, d time.Duration, few int, between func(), arm func(time.Duration) func() bool) *timerSet {
	s := &timerSet{stops: make([]func() bool, n)}
	procs := runtime.GOMAXPROCS(0)
	inSteps(n, few, between, func(lo, hi int) {
		stops := s.stops[lo:hi]
		if d == 0 {
			return
		}
		var wg sync.WaitGroup
		for w := range procs {
			wg.Go(func() {
				for i := w * len(stops) / procs; i < (w+1)*len(stops)/procs; i++ {
					stops[i] = arm(d)
				}
			})
		}
		wg.Wait()
	})
	return s
}

func (s *timerSet) cancel() {
	for i, stop := range s.stops {
		if stop != nil {
			stop()
		}
		s.stops[i] = nil
	}
}

func armAfterFunc(_ *Env, n int, d time.Duration, few int, between func()) pendingSet {
	return &afterFuncSet{armTimers(n, d, few, between, func(d time.Duration) func() bool { return time.AfterFunc(d, expired).Stop })}
}

type afterFuncSet struct{ *timerSet }

func (afterFuncSet) ops(_ *Env, d time.Duration) (with, without func(w, i int)) {
	return func(int, int) { time.AfterFunc(d, expired).Stop() }, func(int, int) {}
}

func armWithTimeout(_ *Env, n int, d time.Duration, few int, between func()) pendingSet {
	return &withTimeoutSet{armTimers(n, d, few, between, func(d time.Duration) func() bool {
		_, cancel := context.WithTimeout(context.Background(), d)
		return func() bool { cancel(); return true }
	})}
}

type withTimeoutSet struct{ *timerSet }

func (withTimeoutSet) ops(_ *Env, d time.Duration) (with, without func(w, i int)) {
	return func(int, int) {
		_, cancel := context.WithTimeout(context.Background(), d)
		cancel()
	}, func(int, int) {}
}
