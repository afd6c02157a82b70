// Package etcdlocks holds keyed locks in etcd, with the API of an
// in-process lock: a *etcdlocks.Lock is a locks.Locker, so code written
// against Locker (Hold, TryHold, locks.HoldValue) runs unchanged against
// a replicated cluster that outlives any one machine.
//
//	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints})
//	...
//	store, err := etcdlocks.Open(cli, "/holdline")
//	if err != nil {
//		return err
//	}
//	defer store.Close()
//	invoices, err := store.OpenLock("invoices", locks.TTL(15*time.Second))
//	...
//	err = invoices.Hold(ctx, invoice.ID, func(ctx context.Context, lease *locks.Lease) error {
//		return charge(ctx, invoice, lease.Fence) // ctx ends when the lease is lost
//	})
//
// # The line
//
// Each key of each lock is a directory in etcd, PREFIX/LOCK/KEY/, and each
// hold puts a key of its own in it, attached to the Store's etcd lease:
// the keys' create revisions order the line, and the first key holds. A hold joins in one
// transaction, which also grants the key if the directory was empty. A
// waiter watches only the key just ahead of its own, so that a release
// wakes one waiter, not the whole line; when that key goes, the waiter
// checks in one transaction whether it is now first, and if so records
// its grant (its time and its maxHold deadline) in its key's value. A
// waiter whose wait passes, or whose ctx ends, deletes its key and so
// leaves the line; the one behind it then watches the next one ahead.
// A line holds at most locks.MaxWaiters waiters.
//
// # Leases
//
// A Store has one etcd lease per ttl of its locks, granted at the first
// hold of that ttl and renewed by a goroutine a third of a ttl apart. A
// lease's ttl is the lock's in whole seconds, rounded up, and at most
// etcd's longest (about 285 years), which a longer ttl gets.
// If etcd answers no renewal for a ttl less a margin (a fifth of the
// ttl, at most 2 s), counted on this process's clock from when the last
// answered renewal was sent, the Store gives the lease up: every
// function holding a key under it sees its context end (context.Cause is
// the Lost *locks.Error, "its ttl ran out") before etcd could let the
// lease lapse and give any of its keys to another process, and every
// hold waiting under it fails Closed ("the session expired"). The next
// hold grants a new lease. A process that dies loses its keys at its
// lease's ttl.
//
// # maxHold and fences
//
// A holder with a maxHold cancels its function's context at its
// deadline on its own clock, then deletes its key, which gives the key to
// the next in line at once. A holder that cannot (its process stuck or
// cut off from etcd while its lease lives) is revoked by the next in
// line, which reads the deadline from the holder's key and, once it is
// past by MaxClockSkew on its own wall clock, deletes the holder's key in
// a transaction guarded by the revision it read. A holder's fence is its
// key's create revision: etcd's revisions only grow, so every grant of a
// key has a higher fence than every grant of it before, whichever process
// held it.
//
// # Errors
//
// Errors are the *locks.Error values a *locks.Lock returns, with the same
// kinds and messages: errors.Is(err, locks.ErrInUse) works, and a lost
// lease wraps the function's error. A call to etcd that failed as a hold
// joined its key's line, granted the Store's lease or revoked a stuck
// holder (etcd unreachable for a ttl, a request refused) returns an error
// naming the lock and the key that wraps etcd's error. A call that fails
// while a hold waits is made again until the wait ends (in use), and a
// release that fails is made again in the background: that Hold returns
// the function's result.
//
// # Which to use
//
// One process: package locks itself (a hold costs nanoseconds). Many
// processes and one server is enough: locksd and package client (two round
// trips to one server). A lock service that must survive the loss of a
// machine: this package, at the cost of etcd's consensus on every grant
// and release.
package etcdlocks
