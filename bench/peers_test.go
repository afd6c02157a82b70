package main

import (
	"hash/fnv"
	"runtime"
	"sync"
	"testing"
	"time"
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

// TestPeerClasses checks each peer's class: a correct peer lets an
// unrelated key be held while one is held; keymutex does not for two keys
// on one of its mutexes; the floors do not at all.
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
			if want := p.Class == Correct; independent != want {
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
