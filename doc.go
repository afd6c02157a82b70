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
// Closed, and Canceled for a caller's context that ended first), reported
// at once where waiting cannot help, each naming the lock and the key:
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
// A call of Hold allocates one thing: the function's context, which is also
// its Lease (112 bytes on amd64), never reused. Under the mutex of its
// key's shard it either finds the key free, and is granted at once (a
// fence from the shard's counter, the grant time, its maxHold armed), or
// joins the back of the key's line with a waiter record taken from the
// shard (its place in the line, its wait's deadline, its wake-up channel)
// and parks on that channel. The key's entry names its holder's context;
// a holder that did not wait has no record of its own beyond it, and a
// maxHold is a 24-byte slot (entry, fence, instant) in its list's queue.
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
// A grant and a context ending can race: a waiter whose context has ended
// when it wakes granted passes the key on at once and fails with its
// context's error, so the key is never left held by nobody and a function
// never starts under an ended context. On release the key goes straight to
// the head of the line, never through a free state, so no newcomer
// (TryHold included) can take it in between.
//
// # Deadlines
//
// Deadlines of one shard with the same purpose (a wait, a maxHold) and the
// same duration come due in the order they were armed, so each such group
// is a FIFO list under the shard's mutex: arming is an append and
// disarming an unlink, or, for a maxHold, a count down that leaves its
// slot to be found stale by its fence when it comes due; no lock is shared
// by all shards. The wheel holds
// one timer per list, for its head, re-armed when it fires: a head that
// left early costs one wake-up at its old instant, never an early one.
// Past a shard's first eight durations, its deadlines share a list per
// tick they fall due in, fired whole at the tick's end. The timer
// goroutine takes the due lists from the wheel under the wheel's mutex,
// lets it go, and fires the lists of waits and maxHolds up to eight at a
// time under their shards' mutexes (a session's ttl group alone), acting
// on their deadlines due by then, in each list's order, up to the first
// not yet due; many due lists are shared with helper goroutines.
//
// Lock order: a shard's mutex, then a session's, then the wheel's, never
// the other way. Only the goroutines that fire hold several shards'
// mutexes at once, and they take all but the first with TryLock, never
// waiting for a shard while they hold one. No code of the caller runs
// under any of them, nor on the timer goroutine: not fn, and not the
// methods of the caller's context. Revoking a lease settles its context
// under the shard's mutex (no allocation unless fn built a real context)
// and cancels the real context, if any, afterwards; that real context
// derives from context.WithoutCancel of the caller's, following it with
// context.AfterFunc, so cancelling it calls nothing of the caller's.
//
// Costs: a hold of a free key is one hash, one insert into and one delete
// from its shard's hash table (a bucket's chain of about one entry), the
// shard's mutex taken twice, one clock reading and one allocation. A wait
// adds a reused waiter record, O(1) appends and unlinks under the same
// mutex, a second clock reading (the grant's, under that mutex) and a
// channel wake-up. Memory for a key exists only while it has a holder or
// a waiter; a store keeps nothing per lock name.
package locks
