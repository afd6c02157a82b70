package main

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// The floors: one primitive for every key, the cost below which no keyed
// lock can go; and noLock, the memory scenario's baseline. Each is a
// keyLock that ignores its keys, measured through the same adapter as the
// keyed peers.

// mutexFloor is one sync.Mutex for every key: the cost of a bare
// Lock/Unlock (shared by every goroutine, so contended where they run in
// parallel).
type mutexFloor struct{ mu sync.Mutex }

func (p *mutexFloor) Lock(string) struct{}    { p.mu.Lock(); return struct{}{} }
func (p *mutexFloor) Unlock(string, struct{}) { p.mu.Unlock() }

// casFloor is one word for every key, taken with CompareAndSwap (yielding
// the processor while it fails) and given back with Store.
type casFloor struct{ state atomic.Int32 }

func (p *casFloor) Lock(string) struct{} {
	for !p.state.CompareAndSwap(0, 1) {
		runtime.Gosched()
	}
	return struct{}{}
}

func (p *casFloor) Unlock(string, struct{}) { p.state.Store(0) }

// noLock holds nothing: the memory scenario's baseline.
type noLock struct{}

func (noLock) Lock(string) struct{}    { return struct{}{} }
func (noLock) Unlock(string, struct{}) {}
