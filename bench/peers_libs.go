package main

import (
	"github.com/moby/locker"
	"k8s.io/utils/keymutex"
)

// The peers from other libraries, as their users call them: each a
// keyLock of the library's own lock and unlock.

// mobyKeys is github.com/moby/locker: a refcounted map of mutexes, as
// mutexMap, written by others.
type mobyKeys struct{ l *locker.Locker }

func (p mobyKeys) Lock(key string) struct{}      { p.l.Lock(key); return struct{}{} }
func (p mobyKeys) Unlock(key string, _ struct{}) { p.l.Unlock(key) }

// hashedKeys is k8s.io/utils/keymutex.NewHashed(0): runtime.NumCPU
// mutexes, each key hashed onto one, so unrelated keys share a mutex.
type hashedKeys struct{ km keymutex.KeyMutex }

func (p hashedKeys) Lock(key string) struct{}      { p.km.LockKey(key); return struct{}{} }
func (p hashedKeys) Unlock(key string, _ struct{}) { p.km.UnlockKey(key) }
