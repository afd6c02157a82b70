package main

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/moby/locker"
	"k8s.io/utils/keymutex"

	"github.com/holdline/locks"
)

// Class says how a peer's figures are used in the tables.
type Class uint8

const (
	// Correct peers keep keys independent: holding one key never makes an
	// unrelated key wait. Only they can be the reference of a ratio.
	Correct Class = iota
	// SharesKeys peers let unrelated keys wait on each other (keymutex
	// hashes keys onto a few mutexes). Shown, marked, never the reference.
	SharesKeys
	// Floor rows are not keyed locks at all but the bare primitive every
	// key shares: the cost below which no keyed lock can go. Shown, marked,
	// never the reference.
	Floor
	// Contract peers are floors of the contract: keyed locks doing only
	// the work no implementation of the contract can skip (peers_contract.go).
	// Nobody would pick one, so they are never the best correct peer;
	// floor-contract is the reference of the ×floor ratio.
	Contract
	// Variant rows are locks with another option, shown beside it to say
	// what the option costs. Never a reference.
	Variant
)

// Mark returns the note a table prints beside a row of class c.
func (c Class) Mark() string {
	switch c {
	case SharesKeys:
		return "marked: unrelated keys wait on each other"
	case Floor:
		return "floor: one lock for every key"
	case Contract:
		return "floor of the contract"
	case Variant:
		return "locks with another option: what the option costs"
	}
	return ""
}

// KeysApart reports whether peers of class c keep keys independent:
// correct peers and the floors of the contract. Only they can hold many
// keys at once (the memory scenario).
func (c Class) KeysApart() bool { return c == Correct || c == Contract }

// Locker is the interface every peer implements: the ways a scenario
// holds a key. fn runs holding the key. Scenarios build fn once per
// goroutine, so passing it allocates nothing per hold.
type Locker interface {
	// Hold runs fn holding key, waiting as long as it takes (locks: its
	// default 10 s wait; locks+Forever: Wait(Forever)).
	Hold(key string, fn func())
	// HoldMax runs fn holding key with a maxHold armed from the grant and
	// disarmed when fn returns (the lock/unlock peers: armed, a
	// time.AfterFunc and its Stop).
	HoldMax(key string, maxHold time.Duration, fn func())
	// Close releases what the instance owns.
	Close()
}

// Waiter is a Locker that can bound a wait. A peer whose instances
// implement it takes part in the scenarios of bounded waits (Peer.Waits);
// the others do not implement it.
type Waiter interface {
	Locker
	// HoldWait runs fn holding key if the key comes within wait, and
	// reports whether it did.
	HoldWait(key string, wait time.Duration, fn func()) bool
}

// Peer is one keyed-lock implementation under test.
type Peer struct {
	// Name is the peer's name in tables and benchmark names (no '/').
	Name string
	// Class says whether the peer can be the reference of a ratio.
	Class Class
	// FIFO reports whether waiters are served in the order they came.
	FIFO bool
	// Waits reports whether the peer can bound a wait: Peers sets it from
	// whether an instance implements Waiter.
	Waits bool
	// About says what the peer is, in a few words.
	About string
	// New makes a fresh instance; nil for rows that are not Lockers (the
	// timer mechanisms of the deadlines scenario).
	New func() Locker
}

// Peers returns every peer, locks first, then the correct peers, then the
// marked ones, then the floors of the contract.
func Peers() []Peer {
	ps := []Peer{
		{Name: "locks", Class: Correct, FIFO: true, About: "this library (default 10 s wait always armed)", New: newLocksPeer},
		{Name: "mutexmap", Class: Correct, About: "map of refcounted sync.Mutex under one sync.Mutex", New: newMutexMap},
		{Name: "chanmap", Class: Correct, FIFO: true, About: "map of refcounted 1-slot channels; waits: context.WithTimeout", New: newChanMap},
		{Name: "moby-locker", Class: Correct, About: "github.com/moby/locker", New: func() Locker { return adapt(mobyKeys{locker.New()}) }},
		{Name: "semaphore", Class: Correct, FIFO: true, About: "map of x/sync semaphore.Weighted(1), context.Background", New: newSemMap},
		{Name: "semaphore-timeout", Class: Correct, FIFO: true, About: "the same, context.WithTimeout(10 s) per hold", New: newSemTimeoutMap},
		{Name: "keymutex", Class: SharesKeys, About: "k8s.io/utils/keymutex.NewHashed(0): NumCPU mutexes", New: func() Locker { return adapt(hashedKeys{keymutex.NewHashed(0)}) }},
		{Name: "floor-mutex", Class: Floor, About: "one sync.Mutex Lock/Unlock, keys ignored", New: func() Locker { return adapt(new(mutexFloor)) }},
		{Name: "floor-cas", Class: Floor, About: "one atomic CompareAndSwap/Store pair, keys ignored", New: func() Locker { return adapt(new(casFloor)) }},
		{Name: contractName, Class: Contract, FIFO: true, About: "only what the contract needs: hash, shard, entry, 112 B record, clock, fence; maxHold not armed", New: func() Locker { return newContractFloor(recordDeadline) }},
		{Name: waitFloorName, Class: Contract, FIFO: true, About: "the same, a waiter standing as a bounded wait must (hot key scenarios only)", New: newWaitFloor},
		{Name: checkedFloorName, Class: Contract, FIFO: true, About: "the same, with the rest of Hold's per-call work: checks, context, limits, deferred release (hot key scenarios only)", New: newCheckedFloor},
		{Name: contractAfterFuncName, Class: Contract, FIFO: true, About: "the same, a time.AfterFunc armed and stopped per maxHold", New: func() Locker { return newContractFloor(withAfterFunc) }},
		{Name: listFloorName, Class: Contract, FIFO: true, About: "the same, each maxHold's deadline linked in its shard's list, no timer (maxhold only)", New: func() Locker { return newContractFloor(linkDeadline) }},
	}
	for i := range ps {
		l := ps[i].New()
		_, ps[i].Waits = l.(Waiter)
		l.Close()
	}
	return ps
}

// names lists the names of peers, comma-separated, for a note.
func names(peers []Peer) string {
	var ns []string
	for _, p := range peers {
		ns = append(ns, p.Name)
	}
	return strings.Join(ns, ", ")
}

// The floors of the contract, by name: contractName is the reference of
// every ×floor ratio.
const (
	contractName          = "floor-contract"
	contractAfterFuncName = "floor-contract+AfterFunc"
	listFloorName         = "floor-contract+list"
	waitFloorName         = "floor-contract+wait"
	checkedFloorName      = "floor-contract+wait+checks"
)

// noPeer is the baseline of the memory scenario: Hold runs fn holding
// nothing, so its figures are what the goroutines themselves cost.
var noPeer = Peer{Name: "none", Class: Floor, About: "no lock: the goroutines alone", New: func() Locker { return adapt(noLock{}) }}

// deadlineWait is the wait of every bounded hold: the library's default.
const deadlineWait = locks.DefaultWait

// expired is what the peers' maxHold timers run: a real revocation would
// cancel the holder's context; the benchmark only needs the timer.
func expired() {}

// armed runs fn with a maxHold armed before it and disarmed after it, as
// the lock/unlock peers do it: a time.AfterFunc and its Stop.
func armed(maxHold time.Duration, fn func()) {
	t := time.AfterFunc(maxHold, expired)
	fn()
	t.Stop()
}

// locksForever is locks whose plain holds wait with Wait(Forever): no
// wait deadline armed, so no timer of its own pending. Beside locks in the
// hot-key scenario, the two say what the default 10 s bound costs a hot
// key.
var locksForever = Peer{Name: "locks+Forever", Class: Variant, FIFO: true, About: "this library, Wait(Forever): no wait bound, no timer", New: func() Locker {
	p := newLocksPeer().(*locksPeer)
	p.opts = []locks.Option{locks.Wait(locks.Forever)}
	return p
}}

// locksPeer adapts the library, a Waiter. fn's HoldFunc wrapper stays on
// the stack: Hold does not let its function escape.
type locksPeer struct {
	store *locks.Store
	lock  *locks.Lock
	opts  []locks.Option // of Hold; none but for locks+Forever
}

func newLocksPeer() Locker {
	s := locks.NewStore()
	l, err := locks.OpenLock(s, "invoices")
	if err != nil {
		panic(err)
	}
	return &locksPeer{store: s, lock: l}
}

func (p *locksPeer) Hold(key string, fn func()) {
	err := p.lock.Hold(context.Background(), key, func(context.Context, *locks.Lease) error { fn(); return nil }, p.opts...)
	mustHold(err)
}

func (p *locksPeer) HoldWait(key string, wait time.Duration, fn func()) bool {
	err := p.lock.Hold(context.Background(), key, func(context.Context, *locks.Lease) error { fn(); return nil }, locks.Wait(wait))
	if errors.Is(err, locks.ErrInUse) {
		return false
	}
	mustHold(err)
	return true
}

func (p *locksPeer) HoldMax(key string, maxHold time.Duration, fn func()) {
	err := p.lock.Hold(context.Background(), key, func(context.Context, *locks.Lease) error { fn(); return nil }, locks.MaxHold(maxHold))
	mustHold(err)
}

func (p *locksPeer) Close() { p.store.Close() }

// mustHold panics on an error no scenario expects: a broken library must
// not pass for a fast one.
func mustHold(err error) {
	if err != nil {
		panic("bench: Hold failed: " + err.Error())
	}
}
