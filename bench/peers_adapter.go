package main

import "time"

// The lock/unlock peers (the hand-written maps, moby/locker, keymutex,
// the floors) are each a keyLock, a lock and unlock pair as their users
// call it; one generic adapter makes each a Locker, and a Waiter where
// the pair can also bound a wait.

// keyLock is a keyed lock as its users call it: Lock takes key, waiting
// as long as it takes, and returns what Unlock needs to let it go (the
// key's entry for the hand-written maps, nothing for the others).
type keyLock[E any] interface {
	Lock(key string) E
	Unlock(key string, held E)
}

// keyLockWait is a keyLock that can bound a wait: LockWait takes key if
// it comes within wait, and reports whether it did.
type keyLockWait[E any] interface {
	keyLock[E]
	LockWait(key string, wait time.Duration) (held E, ok bool)
}

// adapt returns the Locker of k: a Waiter where k is a keyLockWait.
func adapt[E any, K keyLock[E]](k K) Locker {
	if w, ok := any(k).(keyLockWait[E]); ok {
		return &waitPeer[E, K]{lockPeer[E, K]{k}, w}
	}
	return &lockPeer[E, K]{k}
}

// lockPeer is the Locker of a keyLock.
type lockPeer[E any, K keyLock[E]] struct{ k K }

func (p *lockPeer[E, K]) Hold(key string, fn func()) {
	held := p.k.Lock(key)
	fn()
	p.k.Unlock(key, held)
}

func (p *lockPeer[E, K]) HoldMax(key string, maxHold time.Duration, fn func()) {
	held := p.k.Lock(key)
	armed(maxHold, fn)
	p.k.Unlock(key, held)
}

func (p *lockPeer[E, K]) Close() {}

// waitPeer is the Waiter of a keyLock that is a keyLockWait.
type waitPeer[E any, K keyLock[E]] struct {
	lockPeer[E, K]
	w keyLockWait[E] // the same lock as lockPeer.k
}

func (p *waitPeer[E, K]) HoldWait(key string, wait time.Duration, fn func()) bool {
	held, ok := p.w.LockWait(key, wait)
	if ok {
		fn()
		p.k.Unlock(key, held)
	}
	return ok
}
