package fuzz

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/holdline/locks"
)

// TestStress hammers a store in real time: hundreds of goroutines holding
// a few keys (several on one shard) with random waits and maxHolds, their
// contexts cancelled or timing out, their functions returning, erring,
// stalling past their maxHold, panicking or calling runtime.Goexit; and the
// store closed (or shut down) in the middle of it. It checks, with the
// clock on the wall:
//
//   - mutual exclusion: two functions run for one key at once only when the
//     one with the lower fence had its lease revoked;
//   - fences: unique per key, and a function that starts after one with a
//     higher fence must have lost its lease (granted, then revoked, before
//     it started);
//   - deadlines: no in use before the wait, no revocation before the
//     maxHold;
//   - no lost grant: every call ends (a key left held by nobody would keep
//     its line waiting until its wait);
//   - after Close: no function starts with a live lease, every call fails
//     closed (or canceled); nothing is left behind (goleak in TestMain);
//   - the store's Stats agree with what the callers saw (see seen):
//     grants, waits, waits that timed out or were cancelled, refusals.
//
// -short skips it. It runs for about two seconds, also under -race.
func TestStress(t *testing.T) {
	if testing.Short() {
		t.Skip("stress test")
	}
	for round := range 4 {
		stressRound(t, round, 400*time.Millisecond+time.Duration(round)*100*time.Millisecond)
	}
}

// keyLog is what the stress test saw of one key.
type keyLog struct {
	mu        sync.Mutex
	active    map[*stressCall]bool
	fences    map[uint64]bool
	maxFence  uint64
	mustLoose []*stressCall // calls that must have lost their lease
}

// stressCall is one call's record.
type stressCall struct {
	lease    locks.Lease
	maxHold  time.Duration
	revoked  atomic.Bool // fn saw its lease lost, or Hold returned Lost
	left     time.Time   // when fn returned (or unwound)
	unwound  bool        // fn panicked or called Goexit: Hold's result is not seen
	deadline bool        // maxHold was reached when fn left
}

type stress struct {
	t       *testing.T
	store   *locks.Store
	locks   [2]*locks.Lock
	keys    map[string]*keyLog
	closed  atomic.Bool // Close has returned
	errs    chan string
	counts  sync.Map // outcome -> *atomic.Int64
	started time.Time

	seenMu sync.Mutex
	seen   locks.Stats // what the callers saw, in the store's terms
}

// saw adds a finished call to what the callers saw.
func (s *stress) saw(c seen) {
	s.seenMu.Lock()
	why := c.count(&s.seen)
	s.seenMu.Unlock()
	if why != "" {
		s.failf("%s", why)
	}
}

func (s *stress) failf(format string, args ...any) {
	select {
	case s.errs <- fmt.Sprintf(format, args...):
	default:
	}
}

func (s *stress) count(what string) {
	v, _ := s.counts.LoadOrStore(what, new(atomic.Int64))
	v.(*atomic.Int64).Add(1)
}

func stressRound(t *testing.T, round int, span time.Duration) {
	st := &stress{t: t, store: locks.NewStore(locks.Shards(2)), keys: map[string]*keyLog{},
		errs: make(chan string, 16), started: time.Now()}
	for i, n := range []string{"inv", "other"} {
		var err error
		if st.locks[i], err = locks.OpenLock(st.store, n); err != nil {
			t.Fatal(err)
		}
		for k := range 4 {
			st.keys[fmt.Sprint(n, "/", k)] = &keyLog{active: map[*stressCall]bool{}, fences: map[uint64]bool{}}
		}
	}
	const workers = 300
	stop := time.Now().Add(span)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(round), uint64(w)))
			for time.Now().Before(stop) || r.IntN(4) != 0 {
				st.once(r)
				if st.closed.Load() && r.IntN(3) == 0 {
					return
				}
			}
		})
	}
	// Close (or Shut down) in the middle.
	time.Sleep(span * 2 / 3)
	if round%2 == 0 {
		st.store.Close()
	} else {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := st.store.Shutdown(ctx); err != nil {
			st.failf("Shutdown: %v (a function stuck, or the store's count of running functions went wrong)", err)
		}
		cancel()
	}
	st.closed.Store(true)

	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		buf := make([]byte, 1<<20)
		t.Fatalf("round %d: calls still running 30 s after Close (a lost grant or a deadlock):\n%s",
			round, buf[:runtime.Stack(buf, true)])
	}
	close(st.errs)
	for e := range st.errs {
		t.Errorf("round %d: %s", round, e)
	}
	// Every call has returned: nothing is held or running (zero Keys and
	// Running in st.seen).
	if diff := statsDiff(st.store.Stats(), st.seen, false); diff != "" {
		t.Errorf("round %d: %s", round, diff)
	}
	for k, kl := range st.keys {
		for _, c := range kl.mustLoose {
			if !c.revoked.Load() && !(c.unwound && c.deadline) {
				t.Errorf("round %d: key %s: call with fence %d ran beside (or after) a higher fence, but its lease was never lost",
					round, k, c.lease.Fence)
			}
		}
	}
	var summary []string
	st.counts.Range(func(k, v any) bool {
		summary = append(summary, fmt.Sprintf("%v=%d", k, v.(*atomic.Int64).Load()))
		return true
	})
	t.Logf("round %d (%v): %v", round, time.Since(st.started).Round(time.Millisecond), summary)
}

// once makes one random call of Hold or TryHold and checks what it saw.
func (st *stress) once(r *rand.Rand) {
	li := r.IntN(2)
	l := st.locks[li]
	k := r.IntN(4)
	kl := st.keys[fmt.Sprint(l.Name(), "/", k)]
	var opts []locks.Option
	wait := locks.DefaultWait
	switch x := r.IntN(10); {
	case x == 0:
		wait = 0
	case x < 8:
		wait = time.Duration(1+r.IntN(20)) * time.Millisecond
	}
	if wait != locks.DefaultWait {
		opts = append(opts, locks.Wait(wait))
	}
	c := &stressCall{}
	if r.IntN(3) == 0 {
		c.maxHold = time.Duration(1+r.IntN(5)) * time.Millisecond
		opts = append(opts, locks.MaxHold(c.maxHold))
	}
	ctx := context.Background()
	var cancel context.CancelFunc = func() {}
	switch r.IntN(6) {
	case 0:
		ctx, cancel = context.WithTimeout(ctx, time.Duration(r.IntN(3000))*time.Microsecond)
	case 1:
		ctx, cancel = context.WithCancel(ctx)
		time.AfterFunc(time.Duration(r.IntN(3000))*time.Microsecond, cancel)
	}
	defer cancel()
	wctx := &watchedCtx{Context: ctx}
	behave := r.IntN(20)
	try := r.IntN(8) == 0
	fn := func(fctx context.Context, lease *locks.Lease) error {
		wctx.start()
		return st.fn(kl, c, behave, fctx, lease)
	}
	if behave >= 18 { // panic or Goexit: in a goroutine of its own
		done := make(chan struct{})
		var err error
		returned := false // fn did not run, or Hold would not return
		go func() {
			defer close(done)
			defer func() { _ = recover() }()
			if try {
				_, err = l.TryHold(wctx, k, fn)
			} else {
				err = l.Hold(wctx, k, fn, opts...)
			}
			returned = true
		}()
		<-done
		st.saw(seenOf(wctx, returned, err))
		return
	}
	start := time.Now()
	closedBefore := st.closed.Load()
	var err error
	acquired := true
	if try {
		acquired, err = l.TryHold(wctx, k, fn)
	} else {
		err = l.Hold(wctx, k, fn, opts...)
	}
	elapsed := time.Since(start)
	st.saw(seenOf(wctx, true, err))
	var e *locks.Error
	switch {
	case err == nil:
		if acquired {
			st.count("ok")
		} else {
			st.count("not acquired")
		}
	case errors.As(err, &e):
		st.count(e.Kind.String())
		switch e.Kind {
		case locks.InUse:
			if elapsed < wait {
				st.failf("in use after %v, before its wait %v", elapsed, wait)
			}
		case locks.Lost:
			c.revoked.Store(true)
		case locks.Closed, locks.Canceled:
		default:
			st.failf("Hold failed %v: %v", e.Kind, err)
		}
	case errors.Is(err, errFn), errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		st.count("fn's error")
	default:
		st.failf("Hold returned %v", err)
	}
	if closedBefore && (err == nil || e == nil || (e.Kind != locks.Closed && e.Kind != locks.Canceled)) {
		st.failf("a call after Close returned %v", err)
	}
}

// fn is every stress call's function: it logs the grant, checks mutual
// exclusion and fences, then behaves as told.
func (st *stress) fn(kl *keyLog, c *stressCall, behave int, ctx context.Context, lease *locks.Lease) error {
	c.lease = *lease
	if st.closed.Load() && ctx.Err() == nil {
		st.failf("fn started with a live lease after Close returned")
	}
	kl.mu.Lock()
	if kl.fences[lease.Fence] {
		st.failf("fence %d given twice for %s/%s", lease.Fence, lease.Lock, lease.Key)
	}
	kl.fences[lease.Fence] = true
	for a := range kl.active {
		if a.lease.Fence < lease.Fence {
			kl.mustLoose = append(kl.mustLoose, a)
		} else {
			kl.mustLoose = append(kl.mustLoose, c)
		}
	}
	if lease.Fence < kl.maxFence {
		kl.mustLoose = append(kl.mustLoose, c)
	}
	kl.maxFence = max(kl.maxFence, lease.Fence)
	kl.active[c] = true
	kl.mu.Unlock()
	defer func() {
		kl.mu.Lock()
		delete(kl.active, c)
		c.left = time.Now()
		c.deadline = !lease.Deadline.IsZero() && !c.left.Before(lease.Deadline) || st.closed.Load()
		kl.mu.Unlock()
	}()
	watchLoss := func() {
		var e *locks.Error
		if errors.As(context.Cause(ctx), &e) && e.Kind == locks.Lost {
			c.revoked.Store(true)
			if e.Error() == fmt.Sprintf("lock %s: key %q: the lease was lost: it was revoked at its maxHold", lease.Lock, lease.Key) {
				if held := time.Since(lease.Granted); c.maxHold > 0 && held < c.maxHold {
					st.failf("revoked at its maxHold after %v, before its maxHold %v", held, c.maxHold)
				}
			}
		}
	}
	switch {
	case behave < 6: // return at once
		return nil
	case behave < 9: // work a little
		time.Sleep(time.Duration(rand.IntN(500)) * time.Microsecond)
		return errFn
	case behave < 14: // obey the context, for a while
		select {
		case <-ctx.Done():
			watchLoss()
			return ctx.Err()
		case <-time.After(time.Duration(rand.IntN(4000)) * time.Microsecond):
			return nil
		}
	case behave < 18: // stall past the maxHold, ignoring the context
		time.Sleep(time.Duration(rand.IntN(8000)) * time.Microsecond)
		watchLoss()
		return nil
	case behave == 18:
		c.unwound = true
		time.Sleep(time.Duration(rand.IntN(1000)) * time.Microsecond)
		watchLoss()
		panic("stress")
	default:
		c.unwound = true
		time.Sleep(time.Duration(rand.IntN(1000)) * time.Microsecond)
		watchLoss()
		runtime.Goexit()
	}
	return nil
}
