package main

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// The floors: one primitive for every key, the cost below which no keyed
// lock can go; and noLock, the memory scenario's baseline.

// mutexFloor is one sync.Mutex for every key: the cost of a bare
// Lock/Unlock (shared by every goroutine, so contended where they run in
// parallel).
type mutexFloor struct{ mu sync.Mutex }

func (p *mutexFloor) Hold(_ string, fn func()) {
	p.mu.Lock()
	fn()
	p.mu.Unlock()
}

func (p *mutexFloor) HoldWait(string, time.Duration, func()) bool {
	panic("bench: floor cannot bound a wait")
}

func (p *mutexFloor) HoldMax(_ string, maxHold time.Duration, fn func()) {
	p.mu.Lock()
	t := time.AfterFunc(maxHold, expired)
	fn()
	t.Stop()
	p.mu.Unlock()
}

func (p *mutexFloor) Close() {}

// casFloor is one word for every key, taken with CompareAndSwap (yielding
// the processor while it fails) and given back with Store.
type casFloor struct{ state atomic.Int32 }

func (p *casFloor) lock() {
	for !p.state.CompareAndSwap(0, 1) {
		runtime.Gosched()
	}
}

func (p *casFloor) Hold(_ string, fn func()) {
	p.lock()
	fn()
	p.state.Store(0)
}

func (p *casFloor) HoldWait(string, time.Duration, func()) bool {
	panic("bench: floor cannot bound a wait")
}

func (p *casFloor) HoldMax(_ string, maxHold time.Duration, fn func()) {
	p.lock()
	t := time.AfterFunc(maxHold, expired)
	fn()
	t.Stop()
	p.state.Store(0)
}

func (p *casFloor) Close() {}

// noLock holds nothing: the memory scenario's baseline.
type noLock struct{}

func (noLock) Hold(_ string, fn func())                           { fn() }
func (noLock) HoldWait(_ string, _ time.Duration, fn func()) bool { fn(); return true }
func (noLock) HoldMax(_ string, _ time.Duration, fn func())       { fn() }
func (noLock) Close()                                             {}
