package locks

import (
	"cmp"
	"slices"
	"time"

	"github.com/holdline/locks/shard"
)

// Holder describes a held key as Store.Holders saw it: who holds it, since
// when, and who stands in line behind.
type Holder struct {
	// Lease is the holder's lease, copied.
	Lease Lease
	// HeldFor is how long the holder had held the key.
	HeldFor time.Duration
	// Session reports whether the holder is a Session's grant, not the
	// function of a Hold.
	Session bool
	// Waiters is the length of the key's line.
	Waiters int
	// OldestWait is how long the head of the line had waited; zero with
	// nobody in line.
	OldestWait time.Duration
}

// Holders returns the keys held now, with their holders and lines: every
// key of the lock named lock, or of every lock for "", or only the given
// keys of lock (a key not held is left out). The result is sorted by lock
// name, then key text. Each shard is read under its mutex in turn, never
// two at once, so the result is each key's exact state but not one
// instant's snapshot across keys. Cost: O(shards + held keys), or O(1) per
// key given. It fails Invalid for a bad name or key (or keys without a
// lock), Closed for a closed store. Safe for concurrent use.
func (s *Store) Holders(lock string, keys ...any) ([]Holder, error) {
	if s.store == nil {
		return nil, newError(Invalid, lock, "", "the store was not made by NewStore")
	}
	if lock != "" {
		if why := checkName(lock); why != "" {
			return nil, newError(Invalid, lock, "", why)
		}
	} else if len(keys) > 0 {
		return nil, newError(Invalid, lock, "", "keys are looked up in one lock: name it")
	}
	if s.closed.Load() {
		return nil, newError(Closed, lock, "", "the store is closed")
	}
	var out []Holder
	if len(keys) > 0 {
		ls := newLockState(lock)
		for _, key := range keys {
			text, why := keyText(key)
			if why != "" {
				return nil, newError(Invalid, lock, "", why)
			}
			hash := shard.Hash(ls.hash, text)
			sd, _ := s.shardOf(hash)
			sd.sh.Lock()
			now := s.since()
			if e := sd.sh.LookupLocked(hash, ls.id, text); e != nil {
				out = append(out, s.holderLocked(e, now))
			}
			sd.sh.Unlock()
		}
	} else {
		for i := range s.local {
			sh := s.local[i].sh
			sh.Lock()
			now := s.since()
			sh.AllLocked(func(e *keyEntry) bool {
				if e.Holder != nil && (lock == "" || e.LockName() == lock) {
					out = append(out, s.holderLocked(e, now))
				}
				return true
			})
			sh.Unlock()
		}
	}
	slices.SortFunc(out, func(a, b Holder) int {
		return cmp.Or(cmp.Compare(a.Lease.Lock, b.Lease.Lock), cmp.Compare(a.Lease.Key, b.Lease.Key))
	})
	out = slices.CompactFunc(out, func(a, b Holder) bool { // a key named twice
		return a.Lease.Lock == b.Lease.Lock && a.Lease.Key == b.Lease.Key
	})
	return out, nil
}

// holderLocked describes e's holder at instant now, read under the shard's
// lock (so no earlier than the grant).
func (s *store) holderLocked(e *keyEntry, now time.Duration) Holder {
	// The key as its entry names it, the rest from the lease: a function
	// may have written to its lease (Lease's doc says what that races
	// with), and the view lists every holder under the key it holds.
	ls := &e.Holder.lease
	h := Holder{
		Lease:   Lease{Lock: e.LockName(), Key: e.Key(), Fence: ls.Fence, Granted: ls.Granted, Deadline: ls.Deadline},
		HeldFor: s.heldForLocked(e, now),
		Waiters: e.Line.Len(),
	}
	_, h.Session = e.Holder.parent.(sessionParent)
	if head := e.Line.Front(); head != nil {
		h.OldestWait = max(now-head.Value.w.since, 0)
	}
	return h
}
