package locks

import (
	"context"
	"slices"
	"strconv"
)

// Cycles of holds, seen at once.
//
// A hold made inside the function of a hold of another key, waiting for a
// key whose holder (through its own nested holds) waits for a key the
// first one holds, would wait out its wait: nobody in such a cycle can let
// go. The store sees these cycles through contexts, as it sees a hold
// inside a hold of the same key (SPEC §4): a wait whose ctx descends from
// a hold's function context is taken as that hold's own, which cannot end
// before the wait does. So it is where the function makes the wait; a
// goroutine the function starts with its context counts as the function
// too, and a cycle through it is refused although the function could
// have returned and let its key go (such work takes Detach(ctx), as it
// must to hold the same key). Every waiter on the way is checked under its
// shard's mutex to stand in line still. The waiter that closes a cycle
// fails Invalid at once, naming the cycle's keys. From each hold the walk
// follows the first of its waits that still stands in line: a cycle
// through another of them is not seen, and waits out its wait.
//
// Only waits made inside holds take part, and they take one mutex of the
// store's (cyclesMu): a hold made outside every hold never touches it.

// edge is a waiter made inside holds: the holds it is made inside cannot
// let go while it waits.
type edge struct {
	w *waiter
	c *holdContext // w's hold, to tell a reused waiter record
}

// cycleCheck registers h, a waiter just put in line inside the holds
// enclosing ctx, as waiting for its key on their behalf, unless that
// closes a cycle: then it returns the Invalid error to fail with, and
// registers nothing. The returned function unregisters h.
func (s *store) cycleCheck(ctx context.Context, h hold) (func(), error) {
	holds := enclosingHolds(ctx)
	s.cyclesMu.Lock()
	defer s.cyclesMu.Unlock()
	path := []*holdContext{h.c}
	next, waiting := waitingFor(edge{h.w, h.c})
	for steps := 0; waiting && steps <= len(s.blocked); steps++ {
		if slices.Contains(holds, next) {
			return nil, newError(Invalid, h.c.lease.Lock, h.c.lease.Key,
				"waiting would close a cycle of holds waiting on each other: "+cyclePath(path))
		}
		var found bool
		for _, e := range s.blocked[next] {
			if n, ok := waitingFor(e); ok {
				path = append(path, e.c)
				next, found = n, true
				break
			}
		}
		if !found {
			break
		}
	}
	if !waiting {
		return func() {}, nil // granted (or gone) already
	}
	for _, held := range holds {
		s.blocked[held] = append(s.blocked[held], edge{h.w, h.c})
	}
	return func() {
		s.cyclesMu.Lock()
		defer s.cyclesMu.Unlock()
		for _, held := range holds {
			es := slices.DeleteFunc(s.blocked[held], func(e edge) bool { return e.c == h.c })
			if len(es) == 0 {
				delete(s.blocked, held)
			} else {
				s.blocked[held] = es
			}
		}
	}, nil
}

// waitingFor reports whether e's waiter still stands in line, and then the
// holder of the key it waits for, read under its shard's mutex.
func waitingFor(e edge) (*holdContext, bool) {
	sh := e.w.sd.sh
	sh.Lock()
	defer sh.Unlock()
	if e.w.c != e.c || e.w.state != waiting {
		return nil, false
	}
	return e.w.entry.Holder, true
}

// cyclePath names the keys a cycle's waiters wait for, in order.
func cyclePath(waits []*holdContext) string {
	b := make([]byte, 0, 64)
	for i, c := range waits {
		if i > 0 {
			b = append(b, " → "...)
		}
		b = append(b, c.lease.Lock...)
		b = append(b, ' ')
		b = strconv.AppendQuote(b, c.lease.Key)
	}
	return string(b)
}
