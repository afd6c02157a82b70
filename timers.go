package locks

import (
	"math"
	"sync"
	"time"

	"github.com/holdline/locks/timerwheel"
)

// purpose says what a holder's timer was armed for.
type purpose uint8

const (
	forWait    purpose = iota + 1 // the waiter's wait deadline
	forMaxHold                    // the holder's maxHold
)

const maxInstant = time.Duration(math.MaxInt64)

// timers drives every deadline of a store with one hierarchical timer
// wheel and one goroutine, instead of a Go timer per waiter or lease. The
// goroutine starts with the first deadline, sleeps until the wheel's next
// bucket is due (with no timer at all while nothing is pending, so an idle
// store costs no CPU), and ends with Close.
//
// Lock order: a shard's mutex, then mu; never the other way. The goroutine
// acts on due timers (taking shard mutexes) after letting mu go.
type timers struct {
	store *Store

	mu      sync.Mutex
	wheel   *timerwheel.Wheel[*holder]
	started bool          // the goroutine runs
	stopped bool          // Close stopped it; nothing more is armed
	wakeAt  time.Duration // when the goroutine looks at the wheel next: -1 while it is awake
	kick    chan struct{} // wakes the goroutine for an earlier deadline
	quit    chan struct{} // closed by stop
	done    chan struct{} // closed when the goroutine ends
}

func (t *timers) init(s *Store, tick time.Duration) {
	t.store = s
	t.wheel = timerwheel.New[*holder](tick, 0)
	t.wakeAt = maxInstant
	t.kick = make(chan struct{}, 1)
	t.quit = make(chan struct{})
	t.done = make(chan struct{})
}

// schedule arms g's timer for p at instant at, moving it if it was armed.
// O(1); no allocation.
func (t *timers) schedule(g *holder, p purpose, at time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		return
	}
	g.armed = p
	t.wheel.Schedule(&g.slot.timer, at)
	if !t.started {
		t.started = true
		go t.run()
	}
	if at < t.wakeAt {
		select {
		case t.kick <- struct{}{}:
		default:
		}
	}
}

// cancel disarms g's timer, if it has one armed, and marks it disarmed. O(1).
func (t *timers) cancel(g *holder) {
	if g.slot == nil {
		return
	}
	t.mu.Lock()
	t.wheel.Cancel(&g.slot.timer)
	g.armed = 0
	t.mu.Unlock()
}

// disarm disarms g's timer if it is armed for p, and marks it disarmed. O(1).
func (t *timers) disarm(g *holder, p purpose) {
	t.mu.Lock()
	if g.armed == p {
		t.wheel.Cancel(&g.slot.timer)
		g.armed = 0
	}
	t.mu.Unlock()
}

// stop ends the goroutine and waits for it.
func (t *timers) stop() {
	t.mu.Lock()
	t.stopped = true
	started := t.started
	t.mu.Unlock()
	close(t.quit)
	if started {
		<-t.done
	}
}

// due is a timer handed back by the wheel, with what it was armed for,
// read while the wheel's mutex was held.
type due struct {
	g *holder
	p purpose
}

// run is the timer goroutine.
func (t *timers) run() {
	defer close(t.done)
	sleep := time.NewTimer(time.Hour)
	sleep.Stop()
	var timersDue []*timerwheel.Timer[*holder]
	var fire []due
	for {
		t.mu.Lock()
		now := time.Since(t.store.origin)
		timersDue = t.wheel.Advance(now, timersDue[:0])
		fire = fire[:0]
		for _, tm := range timersDue {
			fire = append(fire, due{tm.Value, tm.Value.armed})
		}
		next, pending := t.wheel.Next()
		switch {
		case len(fire) > 0:
			t.wakeAt = -1 // awake: it will look again after firing
		case pending:
			t.wakeAt = next
		default:
			t.wakeAt = maxInstant
		}
		t.mu.Unlock()

		for _, d := range fire {
			t.store.expire(d.g, d.p)
		}
		clear(fire) // let the holders go
		clear(timersDue)
		if len(fire) > 0 {
			continue
		}
		var ring <-chan time.Time
		if pending {
			sleep.Reset(next - now)
			ring = sleep.C
		}
		select {
		case <-ring:
		case <-t.kick:
			sleep.Stop()
		case <-t.quit:
			sleep.Stop()
			return
		}
	}
}
