package locks

import (
	"context"
	"runtime"
	"slices"
	"strings"
)

// HoldAll holds every key of keys in l at once and runs fn holding them
// all, as Hold does for one key. The keys are taken in one order, sorted
// by their text, whatever order they are given in, so two callers naming
// the same keys never hold one each and wait for the other's. It is all or
// nothing within the hold's wait, counted once from the call: when a key
// does not come in time, or ctx ends, the keys taken so far are let go and
// HoldAll fails as Hold would (InUse, Canceled, ...), fn not run.
//
// fn's context ends when any of the leases is lost; leases are one per key
// in the sorted order. When a lease was lost before fn returned, HoldAll
// fails Lost (the first key's in that order, wrapping fn's error). No key,
// a key named twice, a bad key or option are Invalid at once. Cost: one
// Hold per key, and a sort. Safe for concurrent use.
func (l *Lock) HoldAll(ctx context.Context, keys []any, fn func(ctx context.Context, leases []*Lease) error, opts ...Option) (err error) {
	name := l.state.name
	if len(keys) == 0 {
		return newError(Invalid, name, "", "no key to hold")
	}
	texts := make([]string, len(keys))
	for i, key := range keys {
		text, why := keyText(key)
		if why != "" {
			return newError(Invalid, name, "", why)
		}
		texts[i] = text
	}
	slices.Sort(texts)
	for i := 1; i < len(texts); i++ {
		if texts[i] == texts[i-1] {
			return newError(Invalid, name, texts[i], "the key is named twice")
		}
	}
	if fn == nil {
		return newError(Invalid, name, strings.Join(texts, ","), "the function to run is nil")
	}
	_, set, err := l.check(ctx, texts[0], opts, ignore)
	if err != nil {
		return err
	}
	for _, text := range texts {
		conflict, inside := enclosingHold(ctx, name, text)
		switch conflict {
		case inTransaction:
			return newError(Invalid, name, text, "held inside a transaction")
		case nested:
			return newError(Invalid, name, text, "held inside a hold of the same key")
		}
		set.inside = set.inside || inside
	}
	if p := l.store.profileHold(); p != nil {
		defer unprofile(p)
	}
	holds, err := l.acquireAll(ctx, texts, set)
	if err != nil {
		return err
	}
	defer func() { err = l.store.releaseAll(holds, err) }() // also when fn panics
	leases := make([]*Lease, len(holds))
	for i := range holds {
		leases[i] = &holds[i].c.lease
	}
	err = fn(holds[len(holds)-1].c, leases)
	runtime.KeepAlive(l)
	return err
}

// ignore is a HoldFunc for checks that need one.
func ignore(context.Context, *Lease) error { return nil }

// acquireAll takes the keys texts in order, each within what is left of
// set's wait, each lease's context derived from the one before, so that
// the last one ends when any is lost. On a failure it lets go of what it
// took.
func (l *Lock) acquireAll(ctx context.Context, texts []string, set settings) ([]hold, error) {
	s := l.store
	start := s.since()
	holds := make([]hold, 0, len(texts))
	parent := ctx
	for _, text := range texts {
		each := set
		each.inside = set.inside || len(holds) > 0 // the keys held so far wait with it
		if set.wait != Forever {
			now := s.since()
			each.wait = max(set.wait-(now-start), 0)
		}
		h, err := l.acquire(parent, text, each, nil)
		if err != nil {
			if lost := s.releaseAll(holds, nil); lost != nil && ctx.Err() == nil {
				// The wait ended because a lease taken before was lost,
				// not because the caller's context did.
				return nil, lost
			}
			return nil, err
		}
		holds = append(holds, h)
		parent = h.c
	}
	return holds, nil
}

// releaseAll lets every hold go, last first, and returns what HoldAll
// answers: the first lost lease's error (in key order) wrapping fnErr, or
// fnErr.
func (s *store) releaseAll(holds []hold, fnErr error) error {
	first := -1
	var why loss
	for i := len(holds) - 1; i >= 0; i-- {
		if lost := s.letGo(holds[i], true); lost != notLost {
			first, why = i, lost
		}
	}
	if first < 0 {
		return fnErr
	}
	c := holds[first].c
	err := lostError(c.lease.Lock, c.lease.Key, why)
	err.Cause = fnErr
	return err
}
