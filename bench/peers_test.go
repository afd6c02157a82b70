package main

import (
	"hash/fnv"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/cespare/xxhash/v2"
)

// holdInGoroutine holds key in l from a new goroutine and returns once it
// is held; letGo lets it go and waits until that Hold has returned.
func holdInGoroutine(l Locker, key string) (letGo func()) {
	held, release, gone := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() { l.Hold(key, func() { close(held); <-release }); close(gone) }()
	<-held
	return func() {
		close(release)
		<-gone
	}
}

// holdsWhile reports whether l.Hold(other) completes within 300 ms while
// another goroutine holds key.
func holdsWhile(l Locker, key, other string) bool {
	letGo := holdInGoroutine(l, key)
	done := make(chan struct{})
	go func() { l.Hold(other, func() {}); close(done) }()
	ok := true
	select {
	case <-done:
	case <-time.After(300 * time.Millisecond):
		ok = false
	}
	letGo()
	<-done
	return ok
}

// TestPeerClasses checks each peer's class: a correct peer, and a floor of
// the contract, lets an unrelated key be held while one is held; keymutex
// does not for two keys on one of its mutexes; the floors do not at all.
func TestPeerClasses(t *testing.T) {
	for _, p := range Peers() {
		t.Run(p.Name, func(t *testing.T) {
			l := p.New()
			defer l.Close()
			other := "invoice-000001"
			if p.Name == "keymutex" {
				other = collidingKey("invoice-000000", runtime.NumCPU())
			}
			independent := holdsWhile(l, "invoice-000000", other)
			if want := p.Class == Correct || p.Class == Contract; independent != want {
				t.Errorf("class %v, but holding another key while one is held: %v", p.Class, independent)
			}
		})
	}
}

// collidingKey returns a key that keymutex.NewHashed(n) puts on key's
// mutex (it hashes with FNV-32a).
func collidingKey(key string, n int) string {
	h := func(s string) uint32 { f := fnv.New32a(); f.Write([]byte(s)); return f.Sum32() % uint32(n) }
	for i := 1; ; i++ {
		k := "invoice-" + string(rune('a'+i%26)) + string(rune('a'+i/26%26)) + string(rune('a'+i/676%26))
		if h(k) == h(key) {
			return k
		}
	}
}

// TestPeersExclude checks mutual exclusion on one key, through Hold,
// HoldMax and (where it exists) HoldWait.
func TestPeersExclude(t *testing.T) {
	for _, p := range Peers() {
		t.Run(p.Name, func(t *testing.T) {
			l := p.New()
			defer l.Close()
			count := 0
			var wg sync.WaitGroup
			for g := range 8 {
				wg.Go(func() {
					fn := func() { count++ }
					for range 200 {
						switch {
						case g%3 == 1:
							l.HoldMax("k", time.Minute, fn)
						case g%3 == 2 && p.Waits:
							if !l.HoldWait("k", time.Minute, fn) {
								t.Error("HoldWait timed out")
							}
						default:
							l.Hold("k", fn)
						}
					}
				})
			}
			wg.Wait()
			if count != 8*200 {
				t.Errorf("count = %d, want %d", count, 8*200)
			}
		})
	}
}

// TestHoldWaitTimesOut checks that peers with Waits give up on a held key.
func TestHoldWaitTimesOut(t *testing.T) {
	for _, p := range Peers() {
		if !p.Waits {
			continue
		}
		t.Run(p.Name, func(t *testing.T) {
			l := p.New()
			defer l.Close()
			letGo := holdInGoroutine(l, "k")
			if l.HoldWait("k", 10*time.Millisecond, func() { t.Error("ran fn on a held key") }) {
				t.Error("HoldWait on a held key reported success")
			}
			letGo()
		})
	}
}

// TestFairnessSmall runs the fairness experiment briefly for a FIFO peer
// and the mutex floor: every grant is counted, and the figures are sane.
func TestFairnessSmall(t *testing.T) {
	env := &Env{Keys: []string{"invoice-000000"}, Grants: 500}
	for _, p := range Peers() {
		if p.Name != "locks" && p.Name != "chanmap" && p.Name != "floor-mutex" {
			continue
		}
		s := fairness(env, p)
		if s["worst/mean"] < 1 || s["ns/grant"] <= 0 || s["out-of-order"] < s["out-of-order-10us"] {
			t.Errorf("%s: implausible figures %v", p.Name, s)
		}
	}
}

// TestMemorySmall runs the memory experiment on a few thousand keys: the
// locks peer must cost something per held key and the baseline must be
// subtracted.
func TestMemorySmall(t *testing.T) {
	if testing.Short() {
		t.Skip("starts thousands of goroutines")
	}
	env := NewEnv(4000, 4000, 1)
	s := memory(env, Peers()[0])
	if s["B/held"] <= 0 || s["B/held"] > 10_000 {
		t.Errorf("locks: B/held = %.1f, want a plausible positive figure", s["B/held"])
	}
}

// TestContractFloorLayout checks what the floor of the contract claims:
// shards padded to whole 128-byte blocks, and a 128-byte record per grant.
func TestContractFloorLayout(t *testing.T) {
	if size := unsafe.Sizeof(contractShard{}); size%contractPad != 0 {
		t.Errorf("a shard is %d bytes, not a multiple of %d", size, contractPad)
	}
	if size := unsafe.Sizeof(contractRecord{}); size != 128 {
		t.Errorf("the record is %d bytes, want 128", size)
	}
	if n := len(newContractFloor(false).(*contractFloor).shards); n != 256 {
		t.Errorf("%d shards, want 256", n)
	}
}

// TestContractFloorAllocatesTheRecord checks that a hold of a free key
// allocates the record on the heap, and nothing else once its shard has a
// free entry: one allocation of 128 bytes.
func TestContractFloorAllocatesTheRecord(t *testing.T) {
	l := newContractFloor(false)
	keys := []string{"invoice-000000", "invoice-000001", "invoice-000002"}
	for _, k := range keys { // entries made, maps grown
		l.Hold(k, func() {})
	}
	i := 0
	allocs := testing.AllocsPerRun(1000, func() { l.Hold(keys[i%len(keys)], func() {}); i++ })
	if allocs != 1 {
		t.Errorf("%.2f allocations per hold, want 1", allocs)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := range 1000 {
		l.Hold(keys[i%len(keys)], func() {})
	}
	runtime.ReadMemStats(&after)
	if b := float64(after.TotalAlloc-before.TotalAlloc) / 1000; b < 127 || b > 129 {
		t.Errorf("%.1f bytes per hold, want 128", b)
	}
}

// TestContractFloorLineAndFences checks the floor's line: waiters get the
// key in the order they joined, each grant's fence is higher than the one
// before, and the entry is gone once the key is let go.
func TestContractFloorLineAndFences(t *testing.T) {
	f := newContractFloor(false).(*contractFloor)
	const key = "invoice-000042"
	sh := &f.shards[(xxhash.Sum64String(key)^f.nameHash)%contractShards]
	waiters := func() int {
		sh.mu.Lock()
		defer sh.mu.Unlock()
		if e := sh.lookup(xxhash.Sum64String(key)^f.nameHash, key); e != nil {
			return e.waiters
		}
		return -1
	}
	var order []int
	var fences []uint64
	note := func(i int) func() {
		return func() {
			order = append(order, i)
			fences = append(fences, sh.lookup(xxhash.Sum64String(key)^f.nameHash, key).rec.fence)
		}
	}
	letGo := holdInGoroutine(f, key)
	var wg sync.WaitGroup
	for i := range 5 {
		wg.Go(func() { f.Hold(key, note(i)) })
		for waiters() != i+1 { // the next joins the line only after this one
			runtime.Gosched()
		}
	}
	letGo()
	wg.Wait()
	if !slices.Equal(order, []int{0, 1, 2, 3, 4}) {
		t.Errorf("served in the order %v, want the line's", order)
	}
	for i := 1; i < len(fences); i++ {
		if fences[i] <= fences[i-1] {
			t.Errorf("fences %v do not rise", fences)
		}
	}
	if w := waiters(); w != -1 {
		t.Errorf("the key's entry is left with %d waiters after its last hold", w)
	}
}

// TestInterleaveRatios runs two peers whose holds cost known times, one
// twice the other, in alternating phases: the figures must say so, and
// each peer must have run its whole share.
func TestInterleaveRatios(t *testing.T) {
	if testing.Short() {
		t.Skip("spins for a few hundred milliseconds")
	}
	spin := func(d time.Duration) func() Locker {
		return func() Locker { return spinLock(d) }
	}
	peers := []Peer{{Name: "one", New: spin(2 * time.Microsecond)}, {Name: "two", New: spin(4 * time.Microsecond)}}
	sc := Scenario{Name: "test", Load: func(env *Env, l Locker) Load { return walk(env, l, 0) }}
	env := NewEnv(1000, 10, 10)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	s := interleave(env, sc, peers, 60*time.Millisecond, 1)
	if r := s[1]["ns/op"] / s[0]["ns/op"]; r < 1.6 || r > 2.4 {
		t.Errorf("a hold of 4 µs took %.2f× one of 2 µs: %v", r, s)
	}
	if ns := s[0]["ns/op"]; ns < 2000 || ns > 4000 {
		t.Errorf("a hold of 2 µs measured %.0f ns", ns)
	}
}

// spinLock is a Locker whose holds take d, spinning.
type spinLock time.Duration

func (d spinLock) Hold(_ string, fn func()) {
	for t := time.Now(); time.Since(t) < time.Duration(d); {
	}
	fn()
}
func (d spinLock) HoldWait(k string, _ time.Duration, fn func()) bool { d.Hold(k, fn); return true }
func (d spinLock) HoldMax(k string, _ time.Duration, fn func())       { d.Hold(k, fn) }
func (spinLock) Close()                                               {}

// TestHotKeyLoadsCountEveryGrant runs the hot-key load of the floor of the
// contract and of locks interleaved: no update may be lost, and the line
// must have formed (a waiter parked) at GOMAXPROCS 1.
func TestHotKeyLoadsCountEveryGrant(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for a few hundred milliseconds")
	}
	sc, _ := scenarioNamed("hotkey")
	var peers []Peer
	for _, p := range Peers() {
		if p.Name == "locks" || p.Name == contractName || p.Name == "chanmap" {
			peers = append(peers, p)
		}
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	for i, s := range interleave(NewEnv(10, 1, 1), sc, peers, 20*time.Millisecond, 1) {
		if failed(s) {
			t.Errorf("%s: %v", peers[i].Name, s)
		}
		if peers[i].Name == "chanmap" && s["allocs/op"] > 1 { // 2 per hold of a free key; none while a line stands
			t.Errorf("chanmap made %.2f allocations per hold: its key was mostly free, no line formed", s["allocs/op"])
		}
	}
}
