package main

import (
	"context"
	"sync"
	"time"

	"golang.org/x/sync/semaphore"
)

// The hand-written peers: what a Go programmer writes when no library is
// at hand, a map of per-key locks under one mutex, each entry counting
// its holders and waiters and deleted when unused.

// refMap is the hand-written keyed lock: one sync.Mutex over a map of
// per-key entries, each counting the goroutines that hold or want it, and
// deleted when that count falls to zero. T is the per-key lock.
type refMap[T any] struct {
	mu sync.Mutex
	m  map[string]*refEntry[T]
	mk func() *refEntry[T]
}

type refEntry[T any] struct {
	lock T
	refs int // guarded by the map's mutex
}

func (r *refMap[T]) ref(key string) *refEntry[T] {
	r.mu.Lock()
	e := r.m[key]
	if e == nil {
		e = r.mk()
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
	p := &mutexMap{}
	p.m = make(map[string]*refEntry[sync.Mutex])
	p.mk = func() *refEntry[sync.Mutex] { return new(refEntry[sync.Mutex]) }
	return p
}

func (p *mutexMap) Hold(key string, fn func()) {
	e := p.ref(key)
	e.lock.Lock()
	fn()
	e.lock.Unlock()
	p.unref(key, e)
}

func (p *mutexMap) HoldWait(string, time.Duration, func()) bool {
	panic("bench: mutexmap cannot bound a wait")
}

func (p *mutexMap) HoldMax(key string, maxHold time.Duration, fn func()) {
	e := p.ref(key)
	e.lock.Lock()
	t := time.AfterFunc(maxHold, expired)
	fn()
	t.Stop()
	e.lock.Unlock()
	p.unref(key, e)
}

func (p *mutexMap) Close() {}

// chanMap is a refMap of one-slot channels, the common hand-written FIFO
// lock: a full channel's blocked senders are served in order, and a
// receive hands the slot straight to the first of them.
type chanMap struct{ refMap[chan struct{}] }

func newChanMap() Locker {
	p := &chanMap{}
	p.m = make(map[string]*refEntry[chan struct{}])
	p.mk = func() *refEntry[chan struct{}] { return &refEntry[chan struct{}]{lock: make(chan struct{}, 1)} }
	return p
}

func (p *chanMap) Hold(key string, fn func()) {
	e := p.ref(key)
	e.lock <- struct{}{}
	fn()
	<-e.lock
	p.unref(key, e)
}

func (p *chanMap) HoldWait(key string, wait time.Duration, fn func()) bool {
	e := p.ref(key)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	select {
	case e.lock <- struct{}{}:
		cancel()
		fn()
		<-e.lock
		p.unref(key, e)
		return true
	case <-ctx.Done():
		cancel()
		p.unref(key, e)
		return false
	}
}

func (p *chanMap) HoldMax(key string, maxHold time.Duration, fn func()) {
	e := p.ref(key)
	e.lock <- struct{}{}
	t := time.AfterFunc(maxHold, expired)
	fn()
	t.Stop()
	<-e.lock
	p.unref(key, e)
}

func (p *chanMap) Close() {}

// semMap is a refMap of semaphore.Weighted(1), FIFO. With timeout, every
// hold waits under a context.WithTimeout of deadlineWait (or HoldWait's
// wait), the idiomatic lock with a deadline.
type semMap struct {
	refMap[*semaphore.Weighted]
	timeout bool
}

func newSemMap(timeout bool) Locker {
	p := &semMap{timeout: timeout}
	p.m = make(map[string]*refEntry[*semaphore.Weighted])
	p.mk = func() *refEntry[*semaphore.Weighted] {
		return &refEntry[*semaphore.Weighted]{lock: semaphore.NewWeighted(1)}
	}
	return p
}

// acquire takes e's semaphore, bounded by wait when the peer has timeouts.
func (p *semMap) acquire(e *refEntry[*semaphore.Weighted], wait time.Duration) bool {
	if !p.timeout {
		return e.lock.Acquire(context.Background(), 1) == nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	err := e.lock.Acquire(ctx, 1)
	cancel()
	return err == nil
}

func (p *semMap) Hold(key string, fn func()) { p.HoldWait(key, deadlineWait, fn) }

func (p *semMap) HoldWait(key string, wait time.Duration, fn func()) bool {
	e := p.ref(key)
	ok := p.acquire(e, wait)
	if ok {
		fn()
		e.lock.Release(1)
	}
	p.unref(key, e)
	return ok
}

func (p *semMap) HoldMax(key string, maxHold time.Duration, fn func()) {
	e := p.ref(key)
	if !p.acquire(e, deadlineWait) {
		panic("bench: semaphore wait ran out")
	}
	t := time.AfterFunc(maxHold, expired)
	fn()
	t.Stop()
	e.lock.Release(1)
	p.unref(key, e)
}

func (p *semMap) Close() {}
