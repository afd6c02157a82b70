// Package lockertest is the test support the Lockers of this module
// share: the cases of the contract every locks.Locker keeps (Cases), run
// against a lock of this process and the Locker under test, with the
// same messages; holds started and stepped by a test (Start); and what
// their tests wait and check with. It is for tests only.
package lockertest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/holdline/locks"
)

// patience bounds how long a helper waits for a Locker before it fails
// the test: long enough for a Locker on a loaded machine under the race
// detector, short enough that a hang fails rather than stalls.
const patience = 20 * time.Second

// ErrBoom is a function's own error, as a held function returns it.
var ErrBoom = errors.New("boom")

// Noop is a held function that does nothing.
func Noop(context.Context, *locks.Lease) error { return nil }

// Open opens the lock called name with open (a Store's or a Client's
// OpenLock), failing t on an error.
func Open[L any](t testing.TB, open func(string, ...locks.Option) (L, error), name string, opts ...locks.Option) L {
	t.Helper()
	l, err := open(name, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// Opener returns a Target's Open (or Other) of open, a Store's or a
// Client's OpenLock: its handles as Lockers.
func Opener[L locks.Locker](open func(string, ...locks.Option) (L, error)) func(t testing.TB, name string, opts ...locks.Option) locks.Locker {
	return func(t testing.TB, name string, opts ...locks.Option) locks.Locker {
		t.Helper()
		return Open(t, open, name, opts...)
	}
}

// LoadHolds returns how many holds each Locker of a load test makes:
// holds, unless the environment variable env says otherwise; at most 20
// with -short.
func LoadHolds(env string, holds int) int {
	if s := os.Getenv(env); s != "" {
		if n, err := strconv.Atoi(s); err == nil && n > 0 {
			holds = n
		}
	}
	if testing.Short() {
		holds = min(holds, 20)
	}
	return holds
}

// Eventually waits up to 10 s for cond, failing t past that.
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// WantMessage fails t unless err's message is want, to the letter.
func WantMessage(t testing.TB, err error, want string) {
	t.Helper()
	if err == nil || err.Error() != want {
		t.Fatalf("error %v, want %q", err, want)
	}
}

// Running is a Hold in progress, its function waiting to be told what to
// return.
type Running struct {
	lease   chan *locks.Lease
	ctx     chan context.Context
	release chan error
	done    chan error
}

// Start calls l.Hold(ctx, key, ...) on a goroutine of its own; the held
// function reports its lease and context (Held) and returns what Result
// tells it.
func Start(ctx context.Context, l locks.Locker, key any, opts ...locks.Option) *Running {
	r := &Running{lease: make(chan *locks.Lease, 1), ctx: make(chan context.Context, 1), release: make(chan error, 1), done: make(chan error, 1)}
	go func() {
		r.done <- l.Hold(ctx, key, func(ctx context.Context, ls *locks.Lease) error {
			r.lease <- ls
			r.ctx <- ctx
			return <-r.release
		}, opts...)
	}()
	return r
}

// Held waits for r's function to run, and returns its lease and context.
func (r *Running) Held(t testing.TB) (*locks.Lease, context.Context) {
	t.Helper()
	select {
	case ls := <-r.lease:
		return ls, <-r.ctx
	case err := <-r.done:
		t.Fatalf("Hold returned %v before its function ran", err)
	case <-time.After(patience):
		t.Fatal("the function did not run")
	}
	return nil, nil
}

// Started reports whether r's function has started, without waiting;
// once it has, Held no longer sees it.
func (r *Running) Started() bool {
	select {
	case <-r.lease:
		return true
	default:
		return false
	}
}

// Let lets r's function return fnErr, without waiting for Hold.
func (r *Running) Let(fnErr error) { r.release <- fnErr }

// Result lets r's function return fnErr and returns what Hold returned.
func (r *Running) Result(t testing.TB, fnErr error) error {
	t.Helper()
	r.Let(fnErr)
	return r.Wait(t)
}

// Wait returns what Hold returned, once it has.
func (r *Running) Wait(t testing.TB) error {
	t.Helper()
	select {
	case err := <-r.done:
		return err
	case <-time.After(patience):
		t.Fatal("Hold did not return")
	}
	return nil
}

// StallingCtx is a caller's context whose every method blocks, once
// armed, until it is let go: the worst a caller can hand a Locker, whose
// own goroutines and mutexes must never run it (SPEC §5).
type StallingCtx struct {
	context.Context
	armed   atomic.Bool
	stalls  atomic.Int32
	first   sync.Once
	stalled chan struct{}
	letGo   chan struct{}
	freed   sync.Once
}

// NewStallingCtx returns a StallingCtx over context.Background, not armed.
func NewStallingCtx() *StallingCtx {
	return &StallingCtx{Context: context.Background(), stalled: make(chan struct{}), letGo: make(chan struct{})}
}

// Arm makes every later call of c's methods block until LetGo.
func (c *StallingCtx) Arm() { c.armed.Store(true) }

// LetGo lets every blocked call go, and every later one through.
// Idempotent.
func (c *StallingCtx) LetGo() { c.freed.Do(func() { close(c.letGo) }) }

// Stalled is closed when a call first blocks.
func (c *StallingCtx) Stalled() <-chan struct{} { return c.stalled }

// Stalls returns how many calls have blocked.
func (c *StallingCtx) Stalls() int { return int(c.stalls.Load()) }

func (c *StallingCtx) stall() {
	if c.armed.Load() {
		c.stalls.Add(1)
		c.first.Do(func() { close(c.stalled) })
		<-c.letGo
	}
}

// Deadline, Done, Err and Value block once c is armed, then answer as
// context.Background does.
func (c *StallingCtx) Deadline() (time.Time, bool) { c.stall(); return c.Context.Deadline() }
func (c *StallingCtx) Done() <-chan struct{}       { c.stall(); return c.Context.Done() }
func (c *StallingCtx) Err() error                  { c.stall(); return c.Context.Err() }
func (c *StallingCtx) Value(key any) any           { c.stall(); return c.Context.Value(key) }

// Exclusive counts the holders of keys inside their functions, and fails
// the test if two hold one key at once or a key's fences do not rise.
// The zero Exclusive is ready; safe for concurrent use.
type Exclusive struct {
	mu     sync.Mutex
	inside map[string]int
	fences map[string]uint64
}

// Enter counts the holder of ls in, as its function starts.
func (x *Exclusive) Enter(t testing.TB, ls *locks.Lease) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.inside == nil {
		x.inside, x.fences = make(map[string]int), make(map[string]uint64)
	}
	k := ls.Lock + "/" + ls.Key
	x.inside[k]++
	if x.inside[k] != 1 {
		t.Errorf("key %s: %d holders at once", k, x.inside[k])
	}
	if ls.Fence <= x.fences[k] {
		t.Errorf("key %s: fence %d after %d", k, ls.Fence, x.fences[k])
	}
	x.fences[k] = ls.Fence
}

// Leave counts the holder of ls out, as its function returns.
func (x *Exclusive) Leave(ls *locks.Lease) {
	x.mu.Lock()
	x.inside[ls.Lock+"/"+ls.Key]--
	x.mu.Unlock()
}

// Load has each of lockers make holds holds, all lockers at once, spread
// over keys 0 to keys-1, and fails t if two hold one key at once, a key's
// fences do not rise, or a hold fails. It returns how long it took.
func Load(t *testing.T, lockers []locks.Locker, holds, keys int) time.Duration {
	t.Helper()
	var x Exclusive
	var total atomic.Int64
	var wg sync.WaitGroup
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	errs := make(chan error, len(lockers))
	begin := time.Now()
	for i, l := range lockers {
		wg.Go(func() {
			for j := range holds {
				k := (i*7 + j*13) % keys
				err := l.Hold(ctx, k, func(ctx context.Context, ls *locks.Lease) error {
					x.Enter(t, ls)
					x.Leave(ls)
					total.Add(1)
					return nil
				}, locks.Wait(time.Minute))
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	d := time.Since(begin)
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if got := total.Load(); got != int64(len(lockers)*holds) {
		t.Fatalf("%d holds, want %d", got, len(lockers)*holds)
	}
	t.Logf("%d Lockers × %d holds on %d keys: %v, %.0f holds/s", len(lockers), holds, keys, d, float64(len(lockers)*holds)/d.Seconds())
	return d
}

// Target is where the contract's cases run: the handles of one kind of
// Locker on one store, and what a case needs to see of that store.
type Target struct {
	// Open returns a handle on the lock called name of the case's
	// holder; Other one of another holder (another session, another
	// process) of the same keys. Both fail t on an error, with Fatal.
	Open, Other func(t testing.TB, name string, opts ...locks.Option) locks.Locker
	// Queued waits until the store has seen n holds stand in a line.
	Queued func(t testing.TB, n int)
	// Untouched fails t if anything was held or waited for.
	Untouched func(t testing.TB)
	// CloseStore closes the store the keys live in.
	CloseStore func()
	// RevokesFirst: a holder revoked at its maxHold sees its context end
	// before the next in line gets the key. A Locker told of the
	// revocation by a store that has already passed the key on cannot.
	RevokesFirst bool
	// ClosedAfter: once CloseStore has returned, the Locker's handles
	// fail Closed, "the store is closed", as a *locks.Lock's do. A client
	// whose server went away fails otherwise.
	ClosedAfter bool
}

// OnStore returns a Target on store, of this process, handles of both
// holders on it: what every Locker is held to.
func OnStore(store *locks.Store) *Target {
	open := Opener(func(name string, opts ...locks.Option) (*locks.Lock, error) {
		return locks.OpenLock(store, name, opts...)
	})
	return &Target{
		Open: open, Other: open,
		Queued: func(t testing.TB, n int) { t.Helper(); Queued(t, store, n) },
		Untouched: func(t testing.TB) {
			if st := store.Stats(); st.Grants != 0 || st.Waits != 0 || st.Keys != 0 {
				t.Fatalf("the store changed: %+v", st)
			}
		},
		CloseStore:   func() { store.Close() },
		RevokesFirst: true,
		ClosedAfter:  true,
	}
}

// Queued waits until store has seen n holds stand in a line (of any key,
// ever): for a Locker whose keys store keeps, a Target's Queued.
func Queued(t testing.TB, store *locks.Store, n int) {
	t.Helper()
	Eventually(t, fmt.Sprintf("%d waits", n), func() bool { return store.Stats().Waits >= uint64(n) })
}

// InProcess makes the Target of a new store of this process, closed when
// the test ends.
func InProcess(t *testing.T) *Target {
	store := locks.NewStore()
	t.Cleanup(func() { store.Close() })
	return OnStore(store)
}

// Run runs every case of the contract against a lock of this process
// (InProcess) and against the Locker called name, on a Target newTarget
// makes for each case: a subtest per case, and in it a subtest per
// Locker.
func Run(t *testing.T, name string, newTarget func(t *testing.T) *Target) {
	targets := []struct {
		name string
		make func(t *testing.T) *Target
	}{{"in-process", InProcess}, {name, newTarget}}
	for _, c := range Cases {
		t.Run(c.Name, func(t *testing.T) {
			for _, tg := range targets {
				t.Run(tg.name, func(t *testing.T) { c.Run(t, tg.make(t)) })
			}
		})
	}
}
