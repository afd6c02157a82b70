package main

import (
	"runtime"
	"runtime/debug"
	"sync"
)

// memoryScenario is the memory scenario of those of peers that keep keys
// apart: the others cannot hold N keys at once.
func memoryScenario(peers []Peer) Scenario {
	shared := filter(peers, func(p Peer) bool { return !p.Class.KeysApart() })
	return Scenario{
		Name:  "memory",
		Title: "heap bytes per key with N keys held at once (a goroutine each), and per key left after they were all released",
		Columns: []Column{
			{"B/held", "B/held key", "%.1f"},
			{"B/after", "B/key after release", "%.2f"},
		},
		Notes: []string{
			"measured once, at the last GOMAXPROCS (the figures do not depend on it).",
			"HeapAlloc after runtime.GC, minus the same N goroutines parked without a lock (peer 'none'); goroutine stacks are not heap.",
			"after: every hold returned and every goroutine ended, the peer's instance still alive.",
			names(shared) + " cannot hold N keys at once (keys share their locks): not shown; keymutex's memory is fixed, NumCPU mutexes.",
			"floor-contract's held key is its 112-byte record, its entry and a map slot; its maps never shrink (as the peers'), so its",
			"B/key after release is no floor: the contract has a key let go leave nothing behind.",
		},
		Peers:   filter(peers, func(p Peer) bool { return p.Class.KeysApart() }),
		Once:    memory,
		AtScale: true,
		OneCPU:  true,
	}
}

// heldFigures are the heap bytes per key of one run of heldBytes.
type heldFigures struct{ held, after float64 }

// memory measures p's heap per held key and per key left behind, net of
// the goroutines themselves.
func memory(env *Env, p Peer) Sample {
	base := env.baseline()
	f := heldBytes(env, p)
	return Sample{"B/held": f.held - base.held, "B/after": f.after - base.after}
}

// baseline returns heldBytes of noPeer, measured once per Env.
func (env *Env) baseline() heldFigures {
	env.mu.Lock()
	defer env.mu.Unlock()
	if env.base == nil {
		env.warmLocked()
		f := heldBytes(env, noPeer)
		env.base = &f
	}
	return *env.base
}

// heldBytes holds env.Scale invoice ids of a fresh instance of p at once,
// one goroutine each, and returns the heap bytes per key while they are
// held and after they were all released.
//
// The garbage collector is off but for heapAlloc's collections: starting a
// million goroutines would otherwise collect again and again, each time
// scanning all of them.
func heldBytes(env *Env, p Peer) heldFigures {
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	n := env.Scale
	l := p.New()
	release := make(chan struct{})
	var in, out sync.WaitGroup
	in.Add(n)
	out.Add(n)
	fn := func() { in.Done(); <-release }

	h0 := heapAlloc()
	for i := range n {
		key := env.Keys.At(i)
		go func() { l.Hold(key, fn); out.Done() }()
	}
	in.Wait()
	h1 := heapAlloc()
	close(release)
	out.Wait()
	h2 := heapAlloc()
	runtime.KeepAlive(l)
	l.Close()
	return heldFigures{held: (h1 - h0) / float64(n), after: (h2 - h0) / float64(n)}
}

// warm runs warmGoroutines(env.Scale + warmSpare) the first time it is
// called.
func (env *Env) warm() {
	env.mu.Lock()
	defer env.mu.Unlock()
	env.warmLocked()
}

func (env *Env) warmLocked() {
	if !env.warmed {
		warmGoroutines(env.Scale + warmSpare)
		env.warmed = true
	}
}

// warmSpare is how many goroutines warm starts beyond a set's: for those
// that run beside it, such as a store's timer goroutine, which starts with
// its first deadline. Warmed for the set alone, the deadlines scenario ran
// out of kept records at its last goroutine and counted one new record, a
// few hundred bytes, in the slope of the set's heap: 48.0005 B per pending
// deadline at N = 1,000,000, when a deadline was a 48-byte ticket.
const warmSpare = 1024

// warmGoroutines starts n goroutines and lets them end, so that later
// measurements reuse their runtime records (allocated on the heap once and
// never freed) instead of counting them.
func warmGoroutines(n int) {
	release := make(chan struct{})
	var in, out sync.WaitGroup
	in.Add(n)
	out.Add(n)
	for range n {
		go func() { in.Done(); <-release; out.Done() }()
	}
	in.Wait()
	close(release)
	out.Wait()
}
