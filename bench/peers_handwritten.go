package main

import (
	"context"
	"sync"
	"time"

	"golang.org/x/sync/semaphore"
)

// The hand-written peers: what a Go programmer writes when no library is
// at hand, a map of per-key locks under one mutex, each entry counting
// its holders and waiters and deleted when unused. Each is a keyLock
// whose Lock returns the key's entry, so that Unlock needs no second
// lookup.

// refMap is the hand-written keyed lock: one sync.Mutex over a map of
// per-key entries, each counting the goroutines that hold or want it, and
// deleted when that count falls to zero. T is the per-key lock.
type refMap[T any] struct {
	mu      sync.Mutex
	m       map[string]*refEntry[T]
	newLock func() T // nil where T's zero value is ready to use
}

type refEntry[T any] struct {
	lock T
	refs int // guarded by the map's mutex
}

// init makes r's map; newLock makes an entry's lock (nil: its zero value).
func (r *refMap[T]) init(newLock func() T) {
	r.m = make(map[string]*refEntry[T])
	r.newLock = newLock
}

func (r *refMap[T]) ref(key string) *refEntry[T] {
	r.mu.Lock()
	e := r.m[key]
	if e == nil {
		e = new(refEntry[T])
		if r.newLock != nil {
			e.lock = r.newLock()
		}
		r.m[key] = e
	}
	e.refs++
	r.mu.Unlock()
	return e
}

func (r *refMap[T]) unref(key string, e *refEntry[T]) {
	r.mu.Lock()
	if e.refs--; e.refs == 0 {
		delete(r.m, key)
	}
	r.mu.Unlock()
}

// mutexMap is a refMap of sync.Mutex: not FIFO (a releasing goroutine may
// take the mutex again before a woken waiter runs), and no bounded wait.
type mutexMap struct{ refMap[sync.Mutex] }

func newMutexMap() Locker {
	p := new(mutexMap)
	p.init(nil)
	return adapt(p)
}

func (p *mutexMap) Lock(key string) *refEntry[sync.Mutex] {
	e := p.ref(key)
	e.lock.Lock()
	return e
}

func (p *mutexMap) Unlock(key string, e *refEntry[sync.Mutex]) {
	e.lock.Unlock()
	p.unref(key, e)
}

// chanMap is a refMap of one-slot channels, the common hand-written FIFO
// lock: a full channel's blocked senders are served in order, and a
// receive hands the slot straight to the first of them. It bounds a wait
// by selecting on the channel and a context.WithTimeout.
type chanMap struct{ refMap[chan struct{}] }

func newChanMap() Locker {
	p := new(chanMap)
	p.init(func() chan struct{} { return make(chan struct{}, 1) })
	return adapt(p)
}

func (p *chanMap) Lock(key string) *refEntry[chan struct{}] {
	e := p.ref(key)
	e.lock <- struct{}{}
	return e
}

func (p *chanMap) LockWait(key string, wait time.Duration) (*refEntry[chan struct{}], bool) {
	e := p.ref(key)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	select {
	case e.lock <- struct{}{}:
		return e, true
	case <-ctx.Done():
		p.unref(key, e)
		return nil, false
	}
}

func (p *chanMap) Unlock(key string, e *refEntry[chan struct{}]) {
	<-e.lock
	p.unref(key, e)
}

// semMap is a refMap of semaphore.Weighted(1), FIFO, each acquired with
// context.Background: no bounded wait.
type semMap struct{ refMap[*semaphore.Weighted] }

func newSemMap() Locker {
	p := new(semMap)
	p.init(newWeighted)
	return adapt(p)
}

func newWeighted() *semaphore.Weighted { return semaphore.NewWeighted(1) }

func (p *semMap) Lock(key string) *refEntry[*semaphore.Weighted] {
	e := p.ref(key)
	e.lock.Acquire(context.Background(), 1) // never fails: the context never ends
	return e
}

func (p *semMap) Unlock(key string, e *refEntry[*semaphore.Weighted]) {
	e.lock.Release(1)
	p.unref(key, e)
}

// semTimeoutMap is the same, every hold waiting under a
// context.WithTimeout of deadlineWait (or LockWait's wait): the idiomatic
// lock with a deadline.
type semTimeoutMap struct{ semMap }

func newSemTimeoutMap() Locker {
	p := new(semTimeoutMap)
	p.init(newWeighted)
	return adapt(p)
}

func (p *semTimeoutMap) Lock(key string) *refEntry[*semaphore.Weighted] {
	e, ok := p.LockWait(key, deadlineWait)
	if !ok {
		panic("bench: semaphore wait ran out")
	}
	return e
}

func (p *semTimeoutMap) LockWait(key string, wait time.Duration) (*refEntry[*semaphore.Weighted], bool) {
	e := p.ref(key)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	err := e.lock.Acquire(ctx, 1)
	cancel()
	if err != nil {
		p.unref(key, e)
		return nil, false
	}
	return e, true
}
