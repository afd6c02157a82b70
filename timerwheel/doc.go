// Package timerwheel is a passive hierarchical timer wheel: a plain data
// structure that files timers by expiry and, when told what time it is, hands
// back the ones that are due.
//
// It is the hierarchical timing wheel of Varghese and Lauck, "Hashed and
// hierarchical timing wheels: data structures for the efficient
// implementation of a timer facility" (SOSP 1987), in the shape of Apache
// Kafka's TimingWheel (core/src/main/scala/kafka/utils/timer/TimingWheel.scala):
// buckets hold intrusive lists of entries, and when the start of a
// higher-level bucket arrives its entries are re-inserted ("cascaded") into
// lower levels. Unlike Kafka's wheel it has no DelayQueue: the next occupied
// bucket is found with a 64-bit occupancy bitmap per level, so a long idle gap
// costs nothing per tick skipped.
//
// # Passive
//
// A Wheel starts no goroutines, uses no Go timers and never reads a clock.
// Every call that needs the time takes it as an argument: instants are
// time.Duration values on one monotonic clock the owner chooses (for example
// time.Since(origin)). The owner — typically a store with a mutex and a
// driver goroutine that sleeps until [Wheel.Next] — calls [Wheel.Advance] and
// acts on the timers it returns after releasing its lock. A Wheel is not safe
// for concurrent use; the owner serialises access.
//
// # Driving a wheel
//
// The intended owner holds the wheel under its mutex and runs one driver
// goroutine that loops: lock; at, ok := Next(); unlock; sleep until at (or
// until woken because an earlier timer was scheduled); lock; due =
// Advance(now, due[:0]); note what to do for each timer; unlock; then act.
// Acting after unlocking keeps user work out of the critical section. A
// timer handed back is already unscheduled, so the owner may re-arm it at
// once, even while walking the slice.
//
// # Layout
//
// Time is kept in ticks of the resolution given to [New]; a timer scheduled
// for instant at expires at tick e = ceil(at/tick), so it never fires early.
// The wheel's own time is cur = floor(now/tick).
//
// There are 11 levels of 64 slots. A slot of level L spans 64^L ticks and the
// level as a whole 64^(L+1) ticks, so the top level (64^11 = 2^66 ticks)
// covers every int64 tick. A timer with expiry e > cur is filed at the lowest
// level L whose 64-slot window, starting at cur's own slot, reaches it:
//
//	(e >> 6L) - (cur >> 6L) < 64,   slot = (e >> 6L) & 63
//
// The difference is computed without overflow, and at the top level it is
// at most 7. At the lowest such level e's slot is never cur's slot (else e
// would fit one level lower), so every occupied slot lies 1..63 slots ahead
// of cur and its start tick is unambiguous. Timers scheduled for an instant
// not after Now go to a separate "due now" list and are handed back by the
// next Advance whatever instant it is given.
//
// Each bucket is a circular doubly-linked list of [Timer] values embedded in
// the owner's structs, so scheduling allocates nothing, and cancelling is an
// O(1) unlink. A uint64 per level records which slots are occupied, and a
// small mask which levels are.
//
// # Advance
//
// Advance(now) repeatedly picks the occupied bucket with the earliest start
// (per level: rotate the bitmap by cur's slot and count trailing zeros; then
// the minimum over occupied levels). If that start is after the target tick
// floor(now/tick) it stops. Otherwise cur moves to the bucket's start, the
// bucket is detached, and each of its timers is either due (expiry <= target:
// appended to the result) or re-inserted relative to the new cur, which puts
// it at a lower level. Finally cur = target. That last step never makes an
// occupied slot mean a different bucket: every bucket left starts after
// target and, having been filed when cur was smaller, less than 64 slots
// ahead of the old cur, hence 1..63 slots ahead of the new one.
//
// # Costs
//
//   - Schedule, Cancel: O(1), no allocation.
//   - Advance: O((due + cascaded) · levels + levels); each timer cascades at
//     most once per level it descends. Buckets that are empty are never
//     visited, however far the clock jumps. No allocation beyond growing the
//     caller's slice.
//   - Next: O(levels). Len, Now, Tick: O(1).
//
// # Worked example
//
// With tick = 1ms and the clock at 0 (cur = 0):
//
//	Schedule(a, 5ms)     e = 5    level 0, slot 5
//	Schedule(b, 100ms)   e = 100  level 1 (100>>6 - 0>>6 = 1), slot 1: ticks 64..127
//	Next()               = 5ms
//	Advance(70ms)        target 70. Level 0 slot 5 starts at 5: a is due.
//	                     Level 1 slot 1 starts at 64: cur = 64, b (100 > 70)
//	                     is re-inserted at level 0, slot 100&63 = 36.
//	                     Next bucket starts at 100 > 70: stop, cur = 70.
//	                     Returns [a].
//	Next()               = 100ms
//	Advance(99ms)        returns []: 100 > 99, never early.
//	Advance(100ms)       returns [b].
package timerwheel
