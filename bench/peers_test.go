package main

import (
	"context"
	"errors"
	"hash/fnv"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/cespare/xxhash/v2"

	"github.com/holdline/locks"
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

// otherRunsWhileHeld holds key in l from one goroutine and, while it is
// held, holds other from a second, and reports whether that second hold's
// function ran while key was still held. With wait, key is held until the
// second hold has run, however long that takes: a peer that makes it wait
// hangs the test, a slow machine only slows it. Without, key is let go
// after the second goroutine has had a moment to run: a peer that shares
// the keys then reports false whatever the machine's speed (its second
// hold cannot run before key is let go); one that keeps them apart reports
// true only if the machine was quick enough to run it in that moment.
func otherRunsWhileHeld(l Locker, key, other string, wait bool) bool {
	var held atomic.Bool
	held.Store(true)
	letGo := holdInGoroutine(l, key)
	var whileHeld bool
	ran, done := make(chan struct{}), make(chan struct{})
	go func() {
		l.Hold(other, func() { whileHeld = held.Load(); close(ran) })
		close(done)
	}()
	if wait {
		<-ran
	} else {
		time.Sleep(20 * time.Millisecond) // a chance to run, not a bound: nothing depends on its length
		held.Store(false)
	}
	letGo()
	<-done
	return whileHeld
}

// eachPeer runs test for every peer that keep accepts, as a subtest, on a
// fresh instance closed after it.
func eachPeer(t *testing.T, keep func(Peer) bool, test func(t *testing.T, p Peer, l Locker)) {
	for _, p := range Peers() {
		if !keep(p) {
			continue
		}
		t.Run(p.Name, func(t *testing.T) {
			l := p.New()
			defer l.Close()
			test(t, p, l)
		})
	}
}

func allPeers(Peer) bool { return true }

// TestPeerClasses checks each peer's class: a correct peer, and a floor of
// the contract, lets an unrelated key be held while one is held; keymutex
// does not for two keys on one of its mutexes; the floors do not at all.
func TestPeerClasses(t *testing.T) {
	eachPeer(t, allPeers, func(t *testing.T, p Peer, l Locker) {
		other := "invoice-000001"
		if p.Name == "keymutex" {
			other = collidingKey("invoice-000000", runtime.NumCPU())
		}
		apart := p.Class.KeysApart()
		if got := otherRunsWhileHeld(l, "invoice-000000", other, apart); got != apart {
			t.Errorf("class %v, but another key held while one is held: %v", p.Class, got)
		}
	})
}

// TestWaiters checks which peers can bound a wait through HoldWait: those
// whose instances implement Waiter. They, and the wait floors, whose Hold
// stands in line for a bounded wait, take part in hotkey-deadline.
func TestWaiters(t *testing.T) {
	waits := filter(Peers(), func(p Peer) bool { return p.Waits })
	if got, want := names(waits), "locks, chanmap, semaphore-timeout"; got != want {
		t.Errorf("the peers that bound a wait are %s, want %s", got, want)
	}
}

// TestNotesNameThePeers checks that the generated notes name the FIFO
// peers, and the peers a scenario does not show.
func TestNotesNameThePeers(t *testing.T) {
	notes := map[string]string{}
	for _, sc := range Scenarios() {
		notes[sc.Name] = strings.Join(sc.Notes, "\n")
	}
	for _, want := range []struct{ scenario, text string }{
		{"hotkey", "FIFO peers: locks, chanmap, semaphore, semaphore-timeout, floor-contract, floor-contract+wait, floor-contract+wait+checks;"},
		{"hotkey-deadline", "mutexmap, moby-locker, semaphore, keymutex, floor-mutex, floor-cas, floor-contract, floor-contract+AfterFunc, floor-contract+list cannot bound a wait"},
		{"memory", "keymutex, floor-mutex, floor-cas cannot hold N keys at once"},
	} {
		if !strings.Contains(notes[want.scenario], want.text) {
			t.Errorf("scenario %s: notes lack %q:\n%s", want.scenario, want.text, notes[want.scenario])
		}
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
	eachPeer(t, allPeers, func(t *testing.T, p Peer, l Locker) {
		count := 0
		var wg sync.WaitGroup
		w, waits := l.(Waiter)
		for g := range 8 {
			wg.Go(func() {
				fn := func() { count++ }
				for range 200 {
					switch {
					case g%3 == 1:
						l.HoldMax("k", time.Hour, fn)
					case g%3 == 2 && waits:
						// A bound longer than go test lets a test run: only a broken
						// bound can run out.
						if !w.HoldWait("k", time.Hour, fn) {
							t.Error("HoldWait gave up within its hour")
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

// TestHoldWaitTimesOut checks that peers that bound a wait give up on a
// key held all the while.
func TestHoldWaitTimesOut(t *testing.T) {
	eachPeer(t, func(p Peer) bool { return p.Waits }, func(t *testing.T, _ Peer, l Locker) {
		letGo := holdInGoroutine(l, "k")
		if l.(Waiter).HoldWait("k", 10*time.Millisecond, func() { t.Error("ran fn on a held key") }) {
			t.Error("HoldWait on a held key reported success")
		}
		letGo()
	})
}

// TestFairnessSmall runs the fairness experiment briefly for a FIFO peer
// and the mutex floor: every grant is counted, and the figures are sane.
func TestFairnessSmall(t *testing.T) {
	env := &Env{Keys: invoiceIDs(1), Grants: 500}
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

// TestContractFloorLayout checks what the floors of the contract claim:
// shards padded to whole 128-byte blocks, and a 112-byte record per grant.
func TestContractFloorLayout(t *testing.T) {
	if size := unsafe.Sizeof(contractShard{}); size%contractPad != 0 {
		t.Errorf("a shard is %d bytes, not a multiple of %d", size, contractPad)
	}
	if size := unsafe.Sizeof(waitFloorShard{}); size%contractPad != 0 {
		t.Errorf("a shard of the wait floor is %d bytes, not a multiple of %d", size, contractPad)
	}
	if size := unsafe.Sizeof(contractRecord{}); size != 112 {
		t.Errorf("the record is %d bytes, want 112", size)
	}
	if n := len(newContractFloor(recordDeadline).(*contractFloor).shards); n != 256 {
		t.Errorf("%d shards, want 256", n)
	}
	if n := len(newWaitFloor().(*waitFloor).shards); n != 256 {
		t.Errorf("the wait floor has %d shards, want 256", n)
	}
}

// contractFloors are the floors of the contract whose lines the tests
// below look into: the record of key's grant (read by its holder), and how
// many wait for key, read under the key's shard's mutex (-1: no entry; -2:
// the wait floor's line or list of deadlines is broken, walked either way,
// or the list does not hold exactly the line's waiters).
var contractFloors = []struct {
	name    string
	new     func() Locker
	rec     func(l Locker, key string) *contractRecord
	waiters func(l Locker, key string) int
}{
	{
		contractName, func() Locker { return newContractFloor(recordDeadline) },
		func(l Locker, key string) *contractRecord {
			f := l.(*contractFloor)
			h := xxhash.Sum64String(key) ^ f.nameHash
			return f.shards[h%contractShards].lookup(h, key).rec // under the holder's own function
		},
		func(l Locker, key string) int {
			f := l.(*contractFloor)
			h := xxhash.Sum64String(key) ^ f.nameHash
			sh := &f.shards[h%contractShards]
			sh.mu.Lock()
			defer sh.mu.Unlock()
			if e := sh.lookup(h, key); e != nil {
				return e.waiters
			}
			return -1
		},
	},
	{waitFloorName, newWaitFloor, waitFloorRec, waitFloorWaiters},
	{checkedFloorName, newCheckedFloor, waitFloorRec, waitFloorWaiters},
}

// waitFloorOf returns the wait floor of l, floor-contract+wait or the
// checked floor built on it.
func waitFloorOf(l Locker) *waitFloor {
	if c, ok := l.(*checkedFloor); ok {
		return &c.waitFloor
	}
	return l.(*waitFloor)
}

// waitFloorRec is contractFloors' rec for the wait floors.
func waitFloorRec(l Locker, key string) *contractRecord {
	f := waitFloorOf(l)
	h := xxhash.Sum64String(key) ^ f.nameHash
	return f.shards[h%contractShards].lookup(h, key).rec
}

// waitFloorWaiters is contractFloors' waiters for the wait floors.
func waitFloorWaiters(l Locker, key string) int {
	f := waitFloorOf(l)
	h := xxhash.Sum64String(key) ^ f.nameHash
	sh := &f.shards[h%contractShards]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	count := func(from *waitFloorWaiter, next func(*waitFloorWaiter) *waitFloorWaiter) (n int) {
		for w := from; w != nil; w = next(w) {
			n++
		}
		return n
	}
	deadlines := count(sh.dhead, func(w *waitFloorWaiter) *waitFloorWaiter { return w.dnext })
	if deadlines != count(sh.dtail, func(w *waitFloorWaiter) *waitFloorWaiter { return w.dprev }) {
		return -2 // the list of deadlines is broken
	}
	e := sh.lookup(h, key)
	if e == nil {
		if deadlines != 0 {
			return -2
		}
		return -1
	}
	n := count(e.head, func(w *waitFloorWaiter) *waitFloorWaiter { return w.next })
	if n != count(e.tail, func(w *waitFloorWaiter) *waitFloorWaiter { return w.prev }) || deadlines != n { // one key of the shard is waited for
		return -2
	}
	return n
}

// TestContractFloorAllocatesTheRecord checks that a hold of a free key
// allocates the record on the heap, and nothing else once its shard has a
// free entry: one allocation, of as many bytes as a hold of locks.
func TestContractFloorAllocatesTheRecord(t *testing.T) {
	keys := []string{"invoice-000000", "invoice-000001", "invoice-000002"}
	perHold := func(l Locker) (allocs, bytes float64) {
		for _, k := range keys { // entries made, maps grown
			l.Hold(k, func() {})
		}
		i := 0
		allocs = testing.AllocsPerRun(1000, func() { l.Hold(keys[i%len(keys)], func() {}); i++ })
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for i := range 1000 {
			l.Hold(keys[i%len(keys)], func() {})
		}
		runtime.ReadMemStats(&after)
		return allocs, float64(after.TotalAlloc-before.TotalAlloc) / 1000
	}
	lp := newLocksPeer()
	defer lp.Close()
	_, want := perHold(lp)
	if want < 111 || want > 113 {
		t.Fatalf("locks allocates %.1f bytes per hold, want 112", want)
	}
	for _, floor := range contractFloors {
		t.Run(floor.name, func(t *testing.T) {
			allocs, bytes := perHold(floor.new())
			if allocs != 1 {
				t.Errorf("%.2f allocations per hold, want 1", allocs)
			}
			if bytes < want-1 || bytes > want+1 {
				t.Errorf("%.1f bytes per hold, want locks' %.1f", bytes, want)
			}
		})
	}
}

// TestContractFloorLineAndFences checks the floors' line: waiters get the
// key in the order they joined, each grant's fence is higher than the one
// before, and the entry is gone once the key is let go.
func TestContractFloorLineAndFences(t *testing.T) {
	for _, floor := range contractFloors {
		t.Run(floor.name, func(t *testing.T) {
			l := floor.new()
			const key = "invoice-000042"
			var order []int
			var fences []uint64
			note := func(i int) func() {
				return func() {
					order = append(order, i)
					fences = append(fences, floor.rec(l, key).fence)
				}
			}
			letGo := holdInGoroutine(l, key)
			var wg sync.WaitGroup
			for i := range 5 {
				wg.Go(func() { l.Hold(key, note(i)) })
				for n := floor.waiters(l, key); n != i+1; n = floor.waiters(l, key) { // the next joins the line only after this one
					if n == -2 {
						t.Fatalf("the list of deadlines and the line disagree")
					}
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
			if w := floor.waiters(l, key); w != -1 {
				t.Errorf("the key's entry is left with %d waiters after its last hold (-2: a list left broken)", w)
			}
		})
	}
}

// TestInterleaveRatios runs two peers whose holds take 2 and 4 µs of a
// fake clock, one that moves only when they hold, in alternating phases:
// the figures must say exactly that, and each peer must have run its whole
// share and no more: as many phases as the other, each one phaseLen long
// (checked every checkEvery holds), until both ran benchtime.
func TestInterleaveRatios(t *testing.T) {
	clk := new(fakeClock)
	one, two := &tickLock{clock: clk, d: 2 * time.Microsecond}, &tickLock{clock: clk, d: 4 * time.Microsecond}
	peers := []Peer{{Name: "one", New: func() Locker { return one }}, {Name: "two", New: func() Locker { return two }}}
	sc := Scenario{Name: "test", Load: func(env *Env, l Locker) Load { return walk(env, l, 0) }}
	env := NewEnv(1000, 10, 10)
	env.clock = clk
	const benchtime = 60 * time.Millisecond
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1)) // one worker
	s := interleave(env, sc, peers, benchtime, 1)

	for i, l := range []*tickLock{one, two} {
		if ns := s[i]["ns/op"]; ns != float64(l.d) {
			t.Errorf("%s: a hold of %v measured %v ns/op", peers[i].Name, l.d, ns)
		}
		if gc := s[i]["gc-ns/op"]; gc != 0 {
			t.Errorf("%s: %v ns/op charged for collections that took no time", peers[i].Name, gc)
		}
	}
	// A phase ends at the first multiple of checkEvery holds that reaches
	// phaseLen; the first round is the warm-up.
	perPhase := func(d time.Duration) int64 {
		n := int64(checkEvery)
		for time.Duration(n)*d < phaseLen {
			n += checkEvery
		}
		return n
	}
	p1, p2 := perPhase(one.d), perPhase(two.d)
	if one.holds%p1 != 0 || two.holds%p2 != 0 || one.holds/p1 != two.holds/p2 {
		t.Fatalf("%d and %d holds: not the same number of whole phases of %d and %d", one.holds, two.holds, p1, p2)
	}
	timed := one.holds/p1 - 1
	if least := min(time.Duration(timed*p1)*one.d, time.Duration(timed*p2)*two.d); least < benchtime {
		t.Errorf("%d timed rounds: the least a peer ran is %v, short of %v", timed, least, benchtime)
	}
	if least := min(time.Duration((timed-1)*p1)*one.d, time.Duration((timed-1)*p2)*two.d); least >= benchtime {
		t.Errorf("%d timed rounds: one fewer was enough (%v)", timed, least)
	}
}

// fakeClock is a clock that moves only when a tickLock holds.
type fakeClock struct{ ns atomic.Int64 }

func (c *fakeClock) Now() time.Time                  { return time.Unix(0, c.ns.Load()) }
func (c *fakeClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

// tickLock is a Locker whose holds take d of its clock; it counts them.
type tickLock struct {
	clock *fakeClock
	d     time.Duration
	holds int64
}

func (l *tickLock) Hold(_ string, fn func()) {
	l.clock.ns.Add(int64(l.d))
	l.holds++
	fn()
}
func (l *tickLock) HoldMax(k string, _ time.Duration, fn func()) { l.Hold(k, fn) }
func (*tickLock) Close()                                         {}

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

// TestCheckedFloorDoesWhatHoldMust checks that the checked floor does the
// work it stands for: it refuses what Hold refuses, at once and leaving no
// entry; it finds a hold of the same key enclosing its caller's context,
// and not once that hold is over; its function's context ends with the
// hold, and its Err never changes once it is not nil; a panicking function
// lets the key go; the line's limit holds; a closed floor counts a shard
// drained when its last hold ends, and holds nothing more.
func TestCheckedFloorDoesWhatHoldMust(t *testing.T) {
	f := newCheckedFloor().(*checkedFloor)
	const key = "invoice-000042"
	ran := false
	run := func(context.Context, *contractRecord) error { ran = true; return nil }
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	for _, c := range []struct {
		name string
		ctx  context.Context
		key  any
		fn   checkedFunc
		want error
	}{
		{"a key not a string", context.Background(), 42, run, errCheckedKey},
		{"an empty key", context.Background(), "", run, errCheckedKey},
		{"a key too long", context.Background(), strings.Repeat("k", locks.MaxKeyLen+1), run, errCheckedKey},
		{"a nil function", context.Background(), key, nil, errCheckedFn},
		{"a nil context", nil, key, run, errCheckedCtx},
		{"an ended context", ended, key, run, context.Canceled},
	} {
		if err := f.hold(c.ctx, c.key, 0, c.fn); !errors.Is(err, c.want) || ran {
			t.Errorf("%s: err %v, ran %v; want %v, not run", c.name, err, ran, c.want)
		}
		if n := waitFloorWaiters(f, key); n != -1 {
			t.Errorf("%s: left the key's entry (%d)", c.name, n)
		}
	}

	var inner, other error
	var leaked context.Context
	err := f.hold(context.Background(), key, 0, func(ctx context.Context, rec *contractRecord) error {
		if ctx.Err() != nil || rec.fence == 0 {
			t.Errorf("inside the hold: context's Err %v, fence %d", ctx.Err(), rec.fence)
		}
		inner = f.hold(ctx, key, 0, run)
		other = f.hold(ctx, "invoice-000043", 0, run)
		leaked = ctx
		return nil
	})
	if err != nil || !errors.Is(inner, errCheckedNested) || other != nil {
		t.Errorf("a hold of the key inside its hold: %v, of another key: %v (the outer: %v); want %v, nil", inner, other, err, errCheckedNested)
	}
	if !errors.Is(leaked.Err(), context.Canceled) {
		t.Errorf("after the hold, its function's context answers Err %v, want %v", leaked.Err(), context.Canceled)
	}
	ran = false
	if err := f.hold(context.WithoutCancel(leaked), key, 0, run); err != nil || !ran {
		t.Errorf("a hold with the values of a hold that is over: %v (ran %v), want nil", err, ran)
	}

	parent, cancelParent := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancelParent()
	var during error
	f.hold(parent, key, 0, func(ctx context.Context, _ *contractRecord) error {
		<-parent.Done()
		during, leaked = ctx.Err(), ctx
		return nil
	})
	if during != context.DeadlineExceeded || leaked.Err() != during {
		t.Errorf("the caller's context passed its deadline during the hold: Err %v, then %v after it; want %v both", during, leaked.Err(), context.DeadlineExceeded)
	}

	func() {
		defer func() { _ = recover() }()
		f.hold(context.Background(), key, 0, func(context.Context, *contractRecord) error { panic("boom") })
	}()
	if n := waitFloorWaiters(f, key); n != -1 {
		t.Errorf("the key is still held after its function panicked (%d)", n)
	}

	letGo := holdInGoroutine(f, key)
	h := xxhash.Sum64String(key) ^ f.nameHash
	sh := &f.shards[h%contractShards]
	sh.mu.Lock()
	sh.lookup(h, key).waiters = locks.MaxWaiters
	sh.mu.Unlock()
	if err := f.hold(context.Background(), key, 0, run); !errors.Is(err, errCheckedLimit) {
		t.Errorf("a hold with the line full: %v, want %v", err, errCheckedLimit)
	}
	sh.mu.Lock()
	sh.lookup(h, key).waiters = 0
	sh.mu.Unlock()
	letGo()

	letGo = holdInGoroutine(f, key)
	f.Close()
	letGo()
	if n := f.drained.Load(); n != 1 {
		t.Errorf("%d shards counted drained after the last hold of a closed floor, want 1", n)
	}
	ran = false
	if err := f.hold(context.Background(), key, 0, run); !errors.Is(err, errCheckedClosed) || ran {
		t.Errorf("a hold after Close: %v (ran %v), want %v", err, ran, errCheckedClosed)
	}
}

// TestCheckedFloorWaiterLeaves checks the checked floor's waits that end
// with their context: one in the middle of the line leaves it, and the
// others are served in order; one granted as its context ended runs
// nothing and lets the key go on; however such ends race the handoffs,
// one holder at a time, and the key and the lists end empty.
func TestCheckedFloorWaiterLeaves(t *testing.T) {
	f := newCheckedFloor().(*checkedFloor)
	const key = "invoice-000042"

	letGo := holdInGoroutine(f, key)
	var order []int
	errs := make([]error, 3)
	cancels := make([]context.CancelFunc, 3)
	var wg sync.WaitGroup
	for i := range 3 {
		ctx, cancel := context.WithCancel(context.Background())
		cancels[i] = cancel
		wg.Go(func() {
			errs[i] = f.hold(ctx, key, 0, func(context.Context, *contractRecord) error { order = append(order, i); return nil })
		})
		for waitFloorWaiters(f, key) != i+1 {
			runtime.Gosched()
		}
	}
	cancels[1]()
	for waitFloorWaiters(f, key) != 2 {
		runtime.Gosched()
	}
	letGo()
	wg.Wait()
	if !slices.Equal(order, []int{0, 2}) || errs[0] != nil || !errors.Is(errs[1], context.Canceled) || errs[2] != nil {
		t.Errorf("the middle one of three left: served %v, errors %v; want [0 2], and only the middle one canceled", order, errs)
	}

	// Granted, then its context ended before it ran: the holder ends the
	// waiter's context right after letting the key go, on one processor.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	ctx, cancel := context.WithCancel(context.Background())
	release, holderDone := make(chan struct{}), make(chan struct{})
	held := make(chan struct{})
	go func() {
		f.hold(context.Background(), key, 0, func(context.Context, *contractRecord) error { close(held); <-release; return nil })
		cancel()
		close(holderDone)
	}()
	<-held
	ranEnded := false
	res := make(chan error)
	go func() {
		res <- f.hold(ctx, key, 0, func(context.Context, *contractRecord) error { ranEnded = true; return nil })
	}()
	for waitFloorWaiters(f, key) != 1 {
		runtime.Gosched()
	}
	close(release)
	if err := <-res; !errors.Is(err, context.Canceled) || ranEnded {
		t.Errorf("granted as its context ended: %v (ran %v), want %v, not run", err, ranEnded, context.Canceled)
	}
	<-holderDone
	if n := waitFloorWaiters(f, key); n != -1 {
		t.Errorf("the key's entry is left after a grant given back (%d)", n)
	}

	runtime.GOMAXPROCS(2)
	var inside atomic.Int32
	for range 8 {
		wg.Go(func() {
			for i := range 500 {
				ctx, cancel := context.WithCancel(context.Background())
				if i%2 == 0 {
					go cancel()
				}
				f.hold(ctx, key, 0, func(context.Context, *contractRecord) error {
					if inside.Add(1) != 1 {
						t.Error("two holders at once")
					}
					inside.Add(-1)
					return nil
				})
				cancel()
			}
		})
	}
	wg.Wait()
	if n := waitFloorWaiters(f, key); n != -1 {
		t.Errorf("the key's entry is left after racing ends (%d: -2 is a broken list)", n)
	}
}

// listFloorLinked counts the entries in the maxHold lists of
// floor-contract+list's shards, walking each list both ways; -1 if a list
// is broken.
func listFloorLinked(f *contractFloor) int {
	n := 0
	for i := range f.shards {
		sh := &f.shards[i]
		sh.mu.Lock()
		fwd, back := 0, 0
		for e := sh.dhead; e != nil; e = e.dnext {
			fwd++
		}
		for e := sh.dtail; e != nil; e = e.dprev {
			back++
		}
		sh.mu.Unlock()
		if fwd != back {
			return -1
		}
		n += fwd
	}
	return n
}

// TestListFloorLinksWhileHeld checks that floor-contract+list keeps a
// hold with a maxHold in its shard's list exactly while it holds, whether
// it took a free key or waited, and a hold without one out of it.
func TestListFloorLinksWhileHeld(t *testing.T) {
	f := newContractFloor(linkDeadline).(*contractFloor)
	var inside []int
	f.HoldMax("a", time.Hour, func() {
		inside = append(inside, listFloorLinked(f))
		f.HoldMax("b", time.Hour, func() { inside = append(inside, listFloorLinked(f)) })
		f.Hold("c", func() { inside = append(inside, listFloorLinked(f)) })
	})
	if want := []int{1, 2, 1}; !slices.Equal(inside, want) {
		t.Errorf("entries linked inside the holds: %v, want %v", inside, want)
	}

	// A waiter granted the key links it itself; the holder it follows
	// unlinked it at its release.
	held, release, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() { f.HoldMax("a", time.Hour, func() { close(held); <-release }); close(done) }()
	<-held
	got := make(chan int)
	go f.HoldMax("a", time.Hour, func() { got <- listFloorLinked(f) })
	for contractFloors[0].waiters(f, "a") < 1 {
		runtime.Gosched()
	}
	if n := listFloorLinked(f); n != 1 {
		t.Errorf("a holder with a maxHold and its waiter: %d entries linked, want 1", n)
	}
	close(release)
	<-done
	if n := <-got; n != 1 {
		t.Errorf("a waiter granted with a maxHold: %d entries linked, want 1", n)
	}
	for listFloorLinked(f) != 0 { // the waiter's release is under way
		runtime.Gosched()
	}
}

// TestContractFloorsHoldMax drives each floor of the contract through
// HoldMax, whose hold is its mode's own: a holder and five waiters served
// in line order with fences rising by one, each record's deadline its
// grant plus the maxHold, and the key's entry gone after the last, with
// nothing left linked or armed on the entries kept for reuse.
func TestContractFloorsHoldMax(t *testing.T) {
	const maxHold = time.Hour
	for _, tc := range []struct {
		name   string
		mode   contractMode
		allocs float64 // per hold of a free key: the record, and the timer where one is armed
	}{
		{contractName, recordDeadline, 1},
		{contractAfterFuncName, withAfterFunc, 2},
		{listFloorName, linkDeadline, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newContractFloor(tc.mode).(*contractFloor)
			rec, waiters := contractFloors[0].rec, contractFloors[0].waiters
			const key = "invoice-000042"
			var order []int
			type grant struct {
				fence             uint64
				granted, deadline time.Time
			}
			var grants []grant
			note := func(i int) func() {
				return func() {
					order = append(order, i)
					r := rec(f, key)
					grants = append(grants, grant{r.fence, r.granted, r.deadline})
				}
			}
			held, release, gone := make(chan struct{}), make(chan struct{}), make(chan struct{})
			go func() { f.HoldMax(key, maxHold, func() { note(-1)(); close(held); <-release }); close(gone) }()
			<-held
			var wg sync.WaitGroup
			for i := range 5 {
				wg.Go(func() { f.HoldMax(key, maxHold, note(i)) })
				for waiters(f, key) != i+1 { // the next joins the line only after this one
					runtime.Gosched()
				}
			}
			close(release)
			<-gone
			wg.Wait()
			if !slices.Equal(order, []int{-1, 0, 1, 2, 3, 4}) {
				t.Errorf("served in the order %v, want the line's", order)
			}
			for i, r := range grants {
				if i > 0 && r.fence != grants[i-1].fence+1 {
					t.Errorf("fence %d after %d, want the next", r.fence, grants[i-1].fence)
				}
				if !r.deadline.Equal(r.granted.Add(maxHold)) {
					t.Errorf("deadline %v, want its grant %v plus %v", r.deadline, r.granted, maxHold)
				}
			}
			if w := waiters(f, key); w != -1 {
				t.Errorf("the key's entry is left with %d waiters after its last hold", w)
			}
			if n := listFloorLinked(f); n != 0 {
				t.Errorf("%d entries left linked", n)
			}
			for i := range f.shards {
				for e := f.shards[i].free; e != nil; e = e.next {
					if e.timer != nil || e.linked || e.rec != nil || e.dnext != nil || e.dprev != nil || e.key != "" || e.waiters != 0 {
						t.Errorf("an entry kept for reuse is not clean: %+v", *e)
					}
				}
			}
			i := 0
			keys := []string{"invoice-000000", "invoice-000001"}
			if got := testing.AllocsPerRun(1000, func() { f.HoldMax(keys[i%2], maxHold, func() {}); i++ }); got != tc.allocs {
				t.Errorf("%.2f allocations per hold of a free key, want %v", got, tc.allocs)
			}
		})
	}
}
