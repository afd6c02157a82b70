package lease

import "context"

// markKey is the one context key under which both marks of this package
// answer: a transaction mark, or the *Context of an enclosing hold. One key
// for both means one walk up a context chain checks both.
type markKey struct{}

// txMark marks a context as running inside a write transaction.
type txMark struct{}

// InTransaction returns a copy of ctx marked as running inside a write
// transaction. It allocates one context.
func InTransaction(ctx context.Context) context.Context {
	return context.WithValue(ctx, markKey{}, txMark{})
}

// Conflict is what Check found on a context chain.
type Conflict uint8

const (
	// None: neither a transaction nor a hold of the same key encloses the
	// context.
	None Conflict = iota
	// Transaction: the context runs inside a write transaction.
	Transaction
	// Nested: the context descends from the Context of a hold of the same
	// lock and key.
	Nested
)

// Check walks ctx's chain of marks, nearest first, and reports the first
// conflict for a hold of key in lock: a transaction mark, or an enclosing
// hold of the same lock and key that has not ended (a context kept past its
// hold, with context.WithoutCancel say, encloses nothing). Holds of other
// keys, and ended ones, are walked through.
// Cost: one ctx.Value lookup per enclosing mark, one in all when there is
// none; no allocation.
func Check(ctx context.Context, lock, key string) Conflict {
	v := ctx.Value(markKey{})
	for v != nil {
		switch m := v.(type) {
		case txMark:
			return Transaction
		case *Context:
			if m.Lease.Lock == lock && m.Lease.Key == key && !m.isEnded() {
				return Nested
			}
			v = m.parent.Value(markKey{})
		default:
			return None
		}
	}
	return None
}
