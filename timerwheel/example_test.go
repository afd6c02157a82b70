package timerwheel_test

import (
	"fmt"
	"sync"
	"time"

	"github.com/holdline/locks/timerwheel"
)

// lease is an owner's struct with an embedded timer.
type lease struct {
	name  string
	timer timerwheel.Timer[*lease]
}

// The worked example of the package documentation: a timer in level 0 and
// one in level 1, which cascades down on the way.
func Example() {
	w := timerwheel.New[*lease](time.Millisecond, 0)
	a := &lease{name: "a"}
	b := &lease{name: "b"}
	a.timer.Value, b.timer.Value = a, b
	w.Schedule(&a.timer, 5*time.Millisecond)
	w.Schedule(&b.timer, 100*time.Millisecond)

	var due []*timerwheel.Timer[*lease]
	for {
		next, ok := w.Next()
		if !ok {
			break
		}
		// A driver would sleep until next, lock, Advance, unlock, then act.
		due = w.Advance(next, due[:0])
		for _, t := range due {
			fmt.Printf("%v: %s expired (scheduled for %v)\n", w.Now(), t.Value.name, t.When())
		}
	}
	// Output:
	// 5ms: a expired (scheduled for 5ms)
	// 100ms: b expired (scheduled for 100ms)
}

// Cancelling is an O(1) unlink; a timer can be re-armed any number of times.
func ExampleWheel_Cancel() {
	w := timerwheel.New[string](time.Second, 0)
	var t timerwheel.Timer[string]
	t.Value = "session"
	w.Schedule(&t, 30*time.Second)
	w.Schedule(&t, 60*time.Second) // renewed: moved, not duplicated
	fmt.Println(w.Len(), t.Scheduled(), t.When())
	fmt.Println(w.Cancel(&t), w.Cancel(&t), w.Len())
	// Output:
	// 1 true 1m0s
	// true false 0
}

// store is a typical owner: a mutex guards the wheel and the leases.
type store struct {
	mu  sync.Mutex
	w   *timerwheel.Wheel[*lease] // guarded by mu
	due []*timerwheel.Timer[*lease]
}

// expire is one step of the store's driver: it collects the expired leases
// under the lock and acts on them after unlocking. A real driver would call
// it with time.Since(origin) after sleeping until Next.
func (s *store) expire(now time.Duration) {
	s.mu.Lock()
	s.due = s.w.Advance(now, s.due[:0])
	names := make([]string, 0, len(s.due))
	for _, t := range s.due {
		names = append(names, t.Value.name)
	}
	s.mu.Unlock()
	for _, n := range names {
		fmt.Printf("at %v: release %s\n", now, n)
	}
}

// An owner that renews one lease and lets another expire.
func ExampleWheel_Advance() {
	s := &store{w: timerwheel.New[*lease](10*time.Millisecond, 0)}
	x, y := &lease{name: "x"}, &lease{name: "y"}
	x.timer.Value, y.timer.Value = x, y
	s.mu.Lock()
	s.w.Schedule(&x.timer, time.Second)
	s.w.Schedule(&y.timer, time.Second+5*time.Millisecond) // rounds up to 1.01s
	s.mu.Unlock()

	s.expire(500 * time.Millisecond) // nothing yet
	s.mu.Lock()
	s.w.Schedule(&x.timer, 2*time.Second) // x renews
	s.mu.Unlock()
	s.expire(time.Second) // y's rounded instant is 1.01s
	s.expire(time.Second + 10*time.Millisecond)
	s.expire(3 * time.Second)
	// Output:
	// at 1.01s: release y
	// at 3s: release x
}
