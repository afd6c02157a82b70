package main

import (
	"time"

	"github.com/moby/locker"
	"k8s.io/utils/keymutex"
)

// The peers from other libraries, as their users call them.

// mobyPeer adapts github.com/moby/locker: a refcounted map of mutexes, as
// mutexMap, written by others.
type mobyPeer struct{ l *locker.Locker }

func (p *mobyPeer) Hold(key string, fn func()) {
	p.l.Lock(key)
	fn()
	p.l.Unlock(key)
}

func (p *mobyPeer) HoldWait(string, time.Duration, func()) bool {
	panic("bench: moby/locker cannot bound a wait")
}

func (p *mobyPeer) HoldMax(key string, maxHold time.Duration, fn func()) {
	p.l.Lock(key)
	t := time.AfterFunc(maxHold, expired)
	fn()
	t.Stop()
	p.l.Unlock(key)
}

func (p *mobyPeer) Close() {}

// keymutexPeer adapts k8s.io/utils/keymutex.NewHashed(0): runtime.NumCPU
// mutexes, each key hashed onto one, so unrelated keys share a mutex.
type keymutexPeer struct{ km keymutex.KeyMutex }

func (p *keymutexPeer) Hold(key string, fn func()) {
	p.km.LockKey(key)
	fn()
	p.km.UnlockKey(key)
}

func (p *keymutexPeer) HoldWait(string, time.Duration, func()) bool {
	panic("bench: keymutex cannot bound a wait")
}

func (p *keymutexPeer) HoldMax(key string, maxHold time.Duration, fn func()) {
	p.km.LockKey(key)
	t := time.AfterFunc(maxHold, expired)
	fn()
	t.Stop()
	p.km.UnlockKey(key)
}

func (p *keymutexPeer) Close() {}
