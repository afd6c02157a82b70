// Package locks gives keyed locks with leases to the goroutines of one
// process: Hold waits in a strict first-come-first-served line for a key
// (an invoice's id, a chat's), holds it while a function runs, and lets it
// go when the function returns or panics.
//
// Waits are bounded (DefaultWait unless Wait says otherwise), a hung holder
// can be bounded too (MaxHold revokes it and gives the key to the next in
// line), and every grant carries a fence, so a resource can refuse a write
// from a holder that stalled past its revocation.
//
// Failures are *Error values of a few kinds (Invalid, InUse, Lost, Limit,
// Closed), reported at once where waiting cannot help, each naming the lock
// and the key:
//
//	lock invoices: key "9": held past the hold's wait: in use
//
// Inside, keys are hashed onto cache-padded shards (package shard), each
// key's waiters stand in an intrusive FIFO line (package waitq), and one
// hierarchical timer wheel per store (package timerwheel) drives every
// wait deadline and every maxHold, instead of a Go timer each.
//
// # How a hold goes
//
// A call of Hold allocates one holder record, which is also the lease and
// the context its function gets. Under the mutex of its key's shard it
// either finds the key free, and is granted at once (a fence from the
// shard's counter, the grant time, a maxHold armed in the store's timer
// wheel), or joins the back of the key's line with a pooled slot (its
// place in the line, its timer, its wake-up channel) and its wait armed
// in the wheel. It then parks on the slot's channel.
//
// A waiter leaves the line in one of four ways, each decided under the
// shard's mutex, with one send of the settled state on its channel made
// after the mutex is let go:
//
//	granted    the holder let go (or was revoked) and the waiter was at the head
//	timed out  the timer goroutine found its wait passed while it still waited
//	shut       the store closed
//	left       its context ended (no send: the waiter took itself out)
//
// A grant and a context ending can race: the waiter that finds itself
// granted after its context ended passes the key on at once, so the key is
// never left held by nobody. On release the key goes straight to the head
// of the line, never through a free state, so no newcomer (TryHold
// included) can take it in between.
//
// Lock order: a shard's mutex, then the timers' mutex, never the other
// way. The timer goroutine takes what is due from the wheel under the
// timers' mutex, lets it go, and then acts under each shard's mutex; every
// action checks that the holder is still in the state the timer was armed
// for, and drops a stale one. No user code runs under either mutex.
//
// Costs: a hold of a free key is one hash, one map insert and delete, the
// shard's mutex taken twice, one clock reading and one allocation (160
// bytes on amd64). A wait adds a pooled slot, a timer armed and disarmed
// in O(1), and a channel wake-up. Memory for a key exists only while it
// has a holder or a waiter.
package locks
