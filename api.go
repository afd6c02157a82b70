package locks

import (
	"context"
	"reflect"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unique"
	"weak"

	"github.com/holdline/locks/lease"
	"github.com/holdline/locks/shard"
)

// Lease describes one grant of one key to one holder: the lock, the key,
// the fence, when it was granted and when its maxHold will revoke it. A
// Hold's function gets a *Lease (a Grant has one too). The store fills it
// before the holder's function runs and never changes it afterwards, so it
// is safe to read from any goroutine, and it may be kept and read after
// the function returns.
//
// A Lease is a description, not a handle: the store knows the key, its
// holder and the holder's maxHold from records of its own. Treat it as
// read-only all the same. A function that writes to its lease lets no
// other holder in and changes nothing of when it is revoked, but it
// changes what it, and what reads the lease, learn of the grant: its own
// errors name what it wrote, holds made inside it are checked for nesting
// against its Lock and Key, and the store's reads of it (a waiter's error
// naming the holder's fence, Holders' fence and times) race with the
// write.
type Lease struct {
	// Lock is the name of the lock the key belongs to.
	Lock string
	// Key is the key's text form: the string itself for text keys (and a
	// copy of a []byte key), the decimal form for integer keys, the text
	// of MarshalText for others.
	Key string
	// Fence is the fencing token of this grant: higher than every fence
	// given before for this key of this lock, by this store and by an
	// earlier store in the same place whose wall clock did not go back.
	// It is 64-bit: a JSON client should carry it as a string.
	Fence uint64
	// Granted is when the key was given to this holder (wall clock, with
	// the monotonic reading). A Hold or HoldAll that took a free key
	// without a maxHold reads the clock just before taking the shard's
	// lock, so its Granted may precede the grant by that lock's wait; for
	// one with a maxHold, a TryHold, a session's grant, and a waiter handed
	// the key, it is read at the grant itself, under the shard's lock.
	Granted time.Time
	// Deadline is Granted plus the hold's maxHold, when the lease will be
	// revoked; the zero Time when maxHold is off.
	Deadline time.Time
}

// HoldFunc is the function Hold runs while holding a key. ctx derives from
// the caller's context (its values and deadline; a maxHold is not a
// deadline of ctx) and also ends when the lease is lost (then
// context.Cause(ctx) is the *Error of kind Lost) or when the function has
// returned. lease describes the grant.
type HoldFunc func(ctx context.Context, lease *Lease) error

// InTransaction returns a copy of ctx marked as running inside a write
// transaction: a database layer that embeds this store calls it when it
// begins one (and a program can, around its own transactions). A Hold given such a context fails Invalid at once: the
// transaction would keep its writer while the key is waited for, so hold
// first, then begin the transaction. TryHold is allowed. It allocates one
// context.
func InTransaction(ctx context.Context) context.Context {
	return context.WithValue(ctx, markKey{}, txMark{})
}

// Store owns every lock, lease and waiter of a process's keyed locks; they
// live in its memory. Make one with NewStore (the zero Store is not usable)
// and Close it when done: from its first deadline (a wait, a maxHold) until
// Close it owns one goroutine, parked while nothing is pending; a store
// that becomes unreachable without Close (no Store, Lock or hold of it
// left) is closed by the garbage collector, which ends that goroutine. A
// store keeps nothing per lock name: a Lock is a handle, and memory for a
// key lives only while it has a holder or a waiter. Safe for concurrent
// use.
type Store struct {
	*store // nil in the zero Store
}

// store is a Store's state. The timer goroutine refers to it, not to the
// Store, so that an unreachable Store can be cleaned up.
type store struct {
	table     *keyTable
	local     []shardLocal  // beside the table's shards, one each
	origin    time.Time     // the zero of the monotonic instants the timer wheel uses
	tick      time.Duration // the timer wheel's
	profile   int           // see ProfileHolds; 0: off
	times     bool          // see RecordTimes
	closed    atomic.Bool
	closeOnce sync.Once

	// cleanup closes the store once its Store is unreachable, if Close was
	// not called. Close stops it: a queued cleanup keeps the store alive
	// until it has run, one collection later than the store could go.
	cleanup runtime.Cleanup

	cyclesMu sync.Mutex
	blocked  map[*holdContext][]edge // waiters made inside these holds (cycles.go)

	sessionsMu sync.Mutex
	sessions   map[weak.Pointer[Session]]struct{} // open ones, closed with the store; an abandoned one is not kept

	drainMu sync.Mutex
	drained chan struct{} // closed and replaced when a closed store's shard has no function left running

	timers timers
}

// NewStore returns an open store. Its fences start from the wall clock, so
// a store opened later in the same place gives every key higher fences
// than this one did. It panics on an invalid StoreOption (Shards or
// TimerTick of a non-positive value). NewStore starts no goroutine: the
// store's timer goroutine starts with its first deadline.
func NewStore(opts ...StoreOption) *Store {
	c := newStoreConfig(opts)
	s := &store{
		table:    shard.NewTable[*holdContext, *ticket](c.shards, lease.Seed()),
		origin:   time.Now(),
		tick:     c.tick,
		profile:  c.profile,
		times:    c.times,
		drained:  make(chan struct{}),
		sessions: make(map[weak.Pointer[Session]]struct{}),
		blocked:  make(map[*holdContext][]edge),
	}
	s.local = make([]shardLocal, s.table.Len())
	for i := range s.local {
		s.local[i].sh = s.table.At(i)
		s.local[i].lists = s.local[i].listArr[:0]
	}
	s.timers.init(s, c.tick)
	if c.profile > 0 {
		holdsProfile() // registered from now on, for pprof.Lookup and net/http/pprof
	}
	S := &Store{s}
	s.cleanup = runtime.AddCleanup(S, func(s *store) { s.close() }, s)
	return S
}

// Close closes the store: every waiter fails Closed; every lease is lost
// (its function's context is cancelled with a Lost error, reason "its store
// closed", and its Hold fails Lost once the function returns); every later
// OpenLock, Hold and TryHold fails Closed. Close does not wait for running
// functions (Shutdown does); it waits for the store's timer goroutine to
// end. It may be called from inside a held function. Every call returns
// once the store is closed: one that meets a Close in progress waits for
// it, and closing a closed store does nothing more. It always returns nil.
func (s *Store) Close() error {
	if s.store == nil {
		return nil // a zero Store has nothing to close; OpenLock refuses it
	}
	s.closeAndForget()
	return nil
}

// closeAndForget closes the store and stops its cleanup, which has
// nothing left to do.
func (s *Store) closeAndForget() {
	s.close()
	s.cleanup.Stop()
	runtime.KeepAlive(s) // reachable across Stop, as Stop asks
}

func (s *store) close() {
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		for i := range s.local {
			s.closeShard(&s.local[i])
		}
		s.sessionsMu.Lock()
		sessions := s.sessions
		s.sessions = nil
		s.sessionsMu.Unlock()
		for wp := range sessions {
			if sess := wp.Value(); sess != nil {
				sess.Close() // its leases were lost, its waiters shut: it lets its grants go
			}
		}
		s.timers.stop()
	})
}

// Shutdown closes the store as Close does, then waits until every function
// that was running under one of its keys has returned, or until ctx ends.
// It returns nil when they all returned, and otherwise ctx's error (which
// errors.Is matches to both ctx.Err() and context.Cause(ctx)). Called
// from inside a held function, it waits for that function too, so only
// until ctx ends. A nil ctx fails Invalid, and closes nothing.
func (s *Store) Shutdown(ctx context.Context) error {
	if ctx == nil {
		return newError(Invalid, "", "", "the context is nil")
	}
	if s.store == nil {
		return nil
	}
	s.closeAndForget()
	for {
		s.drainMu.Lock()
		drained := s.drained
		s.drainMu.Unlock()
		if !s.busy() {
			return nil
		}
		select {
		case <-drained:
		case <-ctx.Done():
			return endedError(ctx)
		}
	}
}

// Stats are a store's figures: running totals since it was made, and what
// is held and running now.
type Stats struct {
	Grants   uint64 // keys given to a holder, at once or from a line
	Waits    uint64 // holds that stood in a line
	TimedOut uint64 // waits that passed (Hold failed InUse after waiting)
	Canceled uint64 // waiters whose context ended in line
	Revoked  uint64 // leases revoked: the three below together
	Limited  uint64 // holds refused because the key's line was full
	Keys     int    // keys with a holder or a waiter now
	Running  int    // keys held by running functions now (a HoldAll: one per key), revoked ones too
	Waiting  int    // waiters in the keys' lines now

	RevokedMaxHold uint64 // leases revoked at their maxHold
	RevokedTTL     uint64 // sessions' leases lost at their ttl, unrenewed
	RevokedClosed  uint64 // leases lost when the store closed

	// TimesRecorded reports whether the store was made with RecordTimes:
	// then WaitTimes and HoldTimes count how long the waiters that were
	// granted stood in line, and how long keys were held (from the grant
	// until the holder let go, or its function returned). They are empty
	// otherwise.
	TimesRecorded        bool
	WaitTimes, HoldTimes Histogram
}

// Stats returns s's figures. Each shard is read under its mutex in turn,
// so the figures are each exact but not one instant's snapshot across
// shards. Counting costs a hold nothing beyond an increment under a mutex
// it holds anyway. Cost: O(shards). Safe for concurrent use.
func (s *Store) Stats() Stats {
	var c shard.Counts
	var out Stats
	if s.store == nil {
		return out
	}
	for i := range s.local {
		sh := s.local[i].sh
		sh.Lock()
		c.Add(sh.Counts)
		out.Keys += sh.LenLocked()
		out.Running += sh.Running
		out.Waiting += sh.Waiting
		sd := &s.local[i]
		out.RevokedMaxHold += sd.revoked[lostMaxHold]
		out.RevokedTTL += sd.revoked[lostTTL]
		out.RevokedClosed += sd.revoked[lostClosed]
		out.TimesRecorded = s.times
		sd.waited.addTo(&out.WaitTimes)
		sd.held.addTo(&out.HoldTimes)
		sh.Unlock()
	}
	out.Grants, out.Waits, out.TimedOut = c.Grants, c.Waits, c.TimedOut
	out.Canceled, out.Revoked, out.Limited = c.Canceled, c.Revoked, c.Limited
	return out
}

// lockState is what every handle of one lock name shares.
type lockState struct {
	name string
	id   unique.Handle[string] // name, interned: what a key's entry keeps of it
	hash uint64                // shard.LockHash(name)
}

// newLockState returns the state of the lock called name.
func newLockState(name string) lockState {
	return lockState{name: name, id: unique.Make(name), hash: shard.LockHash(name)}
}

// Lock is a named keyspace of a store. Two handles of one name share their
// keys, each with its own default options. Make one with OpenLock: a zero
// Lock, or a nil *Lock, is not usable (its methods panic; HoldValue and
// TryHoldValue fail Invalid for a nil one). Safe for concurrent use.
type Lock struct {
	owner *Store // keeps the Store reachable while the lock is
	store *store
	state lockState
	opts  settings
}

// OpenLock returns a handle on the lock called name in s. A name is 1 to
// MaxNameLen characters of A-Z a-z 0-9 _ - . : /. The options set the
// lock's TTL, and the default MaxHold and Wait of its holds. It fails
// Invalid for a bad name or option, and Closed once s is closed.
func OpenLock(s *Store, name string, opts ...Option) (*Lock, error) {
	if s == nil || s.store == nil {
		return nil, newError(Invalid, name, "", "the store was not made by NewStore")
	}
	if why := checkName(name); why != "" {
		return nil, newError(Invalid, name, "", why)
	}
	set := settings{ttl: DefaultTTL, wait: DefaultWait}
	if why := set.apply(opts, false); why != "" {
		return nil, newError(Invalid, name, "", why)
	}
	if s.closed.Load() {
		return nil, newError(Closed, name, "", "the store is closed")
	}
	return &Lock{owner: s, store: s.store, state: newLockState(name), opts: set}, nil
}

// Name returns the lock's name.
func (l *Lock) Name() string { return l.state.name }

// Locker is what a lock offers its holders, so that code can be written
// once for a lock of this process (*Lock) and for the client of a store in
// another process, which satisfies it too. Its methods behave as Lock's do.
type Locker interface {
	// Name returns the lock's name.
	Name() string
	// Hold waits in line for key and runs fn holding it; see Lock.Hold.
	Hold(ctx context.Context, key any, fn HoldFunc, opts ...Option) error
	// TryHold runs fn holding key if it is free, never waiting; see
	// Lock.TryHold.
	TryHold(ctx context.Context, key any, fn HoldFunc, opts ...Option) (acquired bool, err error)
}

var _ Locker = (*Lock)(nil)

// Hold waits in line for key, runs fn holding it, and lets it go when fn
// returns or panics (the panic goes on after the key is let go). It returns
// what fn returned; nil only if fn ran and returned nil.
//
// A key is a value whose type implements encoding.TextMarshaler (a
// uuid.UUID, a netip.Addr), or whose underlying type is a string, an
// integer, a []byte or a [N]byte; its identity is its text (see KeyText),
// so 9, int64(9), "9" and InvoiceID("9") are one key. Text keys are 1 to
// MaxKeyLen bytes.
//
// Waiters are given the key strictly in the order they came: on release it
// passes straight to the head of the line. The time in line is bounded by
// the hold's Wait (the lock's, or DefaultWait): past it Hold fails InUse,
// and the *Error says how long the holder had held the key and its fence.
// A full line fails Limit. When ctx ends first, Hold leaves the line at
// once and fails Canceled, matching both ctx.Err() and context.Cause(ctx);
// a grant racing with that is passed on to the next in line, never lost,
// and a waiter whose ctx has ended never runs fn.
//
// Hold fails Invalid at once, waiting for nothing and using no fence, for a
// bad key or option, a nil ctx or fn, inside InTransaction, and inside a
// hold of the same lock and key (ctx descending from that hold's context;
// see Detach); inside another hold, when its wait would close a cycle of
// holds waiting on each other (each wait taken as made by the hold whose
// context its ctx descends from, as for nesting), it leaves the line and
// fails Invalid, naming the keys of the cycle. It fails Lost when the
// lease was lost before fn returned (see MaxHold and Close), wrapping fn's
// error: check errors.Is(err, ErrLost) before context.Canceled, since a
// function that returns its ended ctx's error makes a lost lease match
// both. Closed when the store is closed. Errors other than fn's own are
// *Error values.
//
// Cost: on a free key, one hash, one shard lock taken twice (grant and
// release), one map insert and delete, one clock reading and one
// allocation (112 bytes on amd64: fn's context, which is also its lease);
// fn's context builds a real context only if fn uses it. A wait adds a
// reused ticket, O(1) appends and unlinks under the same shard lock, a
// second clock reading (the grant's, under that lock) and a channel
// wake-up. Safe for concurrent use.
func (l *Lock) Hold(ctx context.Context, key any, fn HoldFunc, opts ...Option) error {
	return l.hold(ctx, key, opts, fn)
}

// TryHold runs fn holding key if the key is free and nobody is in line for
// it, and never waits. It returns (true, fn's error) when it ran fn, and
// (false, nil) when the key was held, without running fn, also when the
// holder is its own caller. Inside a transaction it is allowed. It fails
// (false, err) as Hold does for a bad key, a closed store or an ended ctx.
// The lock's MaxHold applies unless a MaxHold option says otherwise; a
// Wait option is Invalid, since TryHold never waits.
func (l *Lock) TryHold(ctx context.Context, key any, fn HoldFunc, opts ...Option) (acquired bool, err error) {
	return l.tryHold(ctx, key, fn, opts)
}

// HoldValue is Hold for a function that answers a value, on any Locker:
// it returns what fn returned. When fn did not run, the value is T's zero
// value. A nil l, or a nil pointer in it (a nil *Lock), fails Invalid.
func HoldValue[T any](ctx context.Context, l Locker, key any,
	fn func(ctx context.Context, lease *Lease) (T, error), opts ...Option) (T, error) {
	var v T
	if nilLocker(l) {
		return v, newError(Invalid, "", "", "the Locker is nil")
	}
	var run HoldFunc // nil for a nil fn, which Hold refuses
	if fn != nil {
		run = func(ctx context.Context, ls *Lease) error {
			var err error
			v, err = fn(ctx, ls)
			return err
		}
	}
	err := l.Hold(ctx, key, run, opts...)
	return v, err
}

// TryHoldValue is TryHold for a function that answers a value, on any
// Locker: it returns what fn returned, and whether it ran. A nil l fails
// Invalid, and so does a nil pointer in it (a nil *Lock).
func TryHoldValue[T any](ctx context.Context, l Locker, key any,
	fn func(ctx context.Context, lease *Lease) (T, error), opts ...Option) (value T, acquired bool, err error) {
	if nilLocker(l) {
		return value, false, newError(Invalid, "", "", "the Locker is nil")
	}
	var run HoldFunc // nil for a nil fn, which TryHold refuses
	if fn != nil {
		run = func(ctx context.Context, ls *Lease) error {
			var err error
			value, err = fn(ctx, ls)
			return err
		}
	}
	acquired, err = l.TryHold(ctx, key, run, opts...)
	return value, acquired, err
}

// nilLocker reports whether l is nil, or a nil pointer (a nil *Lock, a
// nil *client.Lock), whose methods would dereference it.
func nilLocker(l Locker) bool {
	if lk, ok := l.(*Lock); ok || l == nil {
		return lk == nil
	}
	v := reflect.ValueOf(l)
	return v.Kind() == reflect.Pointer && v.IsNil()
}

// Detach returns a context with ctx's values and none of its
// cancellation, deadline, hold marks or transaction mark, for work that a
// held function starts and that outlives it: a goroutine given fn's
// context, or one derived from it, is cancelled when fn returns, and its
// Hold of the same key is refused as nested while fn runs; given
// Detach(ctx), it waits in line like any other holder. It allocates
// twice (context.WithoutCancel's context, and the wrapper that hides the
// marks). Safe for concurrent use.
func Detach(ctx context.Context) context.Context {
	return detached{context.WithoutCancel(ctx)}
}

// detached hides this package's marks from the contexts below it.
type detached struct{ context.Context }

// Value answers ctx's values but this package's marks.
func (d detached) Value(key any) any {
	if key == (markKey{}) {
		return nil
	}
	return d.Context.Value(key)
}
