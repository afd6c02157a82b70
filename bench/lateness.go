package main

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/holdline/locks"
)

// The lateness test of the deadlines scenario: n deadlines due evenly
// within one fireWindow, and how late each one's action was done. A
// deadline's action is what it is for: for the library, revoking the
// hold (its context then reports Err, at once, without building
// anything); for context.WithTimeout, cancelling the context; for
// time.AfterFunc, running its function, in a goroutine the runtime starts
// for it. The first two are seen by one goroutine that polls the
// deadlines in due order, yielding while the next is not done yet; the
// third notes the time itself.

// dueTimes returns n instants spread evenly over the fireWindow starting
// at t0.
func dueTimes(n int, t0 time.Time) []time.Time {
	due := make([]time.Time, n)
	for i := range due {
		due[i] = t0.Add(fireWindow * time.Duration(i) / time.Duration(n))
	}
	return due
}

// armDue calls arm(i, d) for each due time still d > 0 ahead, and returns
// how many were already past (could not be armed before they were due).
func armDue(due []time.Time, arm func(i int, d time.Duration)) (overran int) {
	for i := range due {
		d := time.Until(due[i])
		if d <= 0 {
			overran++
			continue
		}
		arm(i, d)
	}
	return overran
}

// ctxDone is observe's done for deadlines seen as contexts: those not armed
// (nil) and those whose context reports Err.
func ctxDone(ctxs []context.Context) func(i int) bool {
	return func(i int) bool { return ctxs[i] == nil || ctxs[i].Err() != nil }
}

// observe walks deadlines 0..n-1 in due order, waiting (yielding the
// processor) until done(i), and notes in late[i] how long after at(i) it
// saw it.
func observe(n int, done func(i int) bool, at func(i int) time.Time, late []time.Duration) {
	for i := range n {
		for !done(i) {
			runtime.Gosched()
		}
		late[i] = time.Since(at(i))
	}
}

// fireLocks holds one invoice id per deadline, each in its own goroutine,
// with the MaxHold that makes its lease's deadline fall at its due time,
// and observes the revocations. The functions return once every deadline
// was seen, so that releasing competes with no deadline still to fire.
func fireLocks(env *Env, n int, lead time.Duration) ([]time.Duration, int) {
	p := newLocksPeer().(*locksPeer)
	defer p.Close()
	due := dueTimes(n, time.Now().Add(lead))
	ctxs := make([]context.Context, n)
	deadlines := make([]time.Time, n)
	finish := make(chan struct{})
	var overran atomic.Int64
	var armed, done sync.WaitGroup
	armed.Add(n)
	for i := range n {
		done.Go(func() {
			d := time.Until(due[i])
			if d <= 0 {
				overran.Add(1)
				armed.Done()
				return
			}
			err := p.lock.Hold(context.Background(), env.Keys.At(i), func(ctx context.Context, ls *locks.Lease) error {
				ctxs[i], deadlines[i] = ctx, ls.Deadline
				armed.Done()
				<-finish
				return nil
			}, locks.MaxHold(d))
			if !errors.Is(err, locks.ErrLost) {
				panic("bench: a revoked hold did not fail Lost: " + errString(err))
			}
		})
	}
	armed.Wait()
	late := make([]time.Duration, n)
	observe(n, ctxDone(ctxs), func(i int) time.Time { return deadlines[i] }, late)
	close(finish)
	done.Wait()
	return late, int(overran.Load())
}

func fireWithTimeout(_ *Env, n int, lead time.Duration) ([]time.Duration, int) {
	due := dueTimes(n, time.Now().Add(lead))
	ctxs := make([]context.Context, n)
	cancels := make([]context.CancelFunc, n)
	overran := armDue(due, func(i int, d time.Duration) {
		ctxs[i], cancels[i] = context.WithTimeout(context.Background(), d)
	})
	late := make([]time.Duration, n)
	observe(n, ctxDone(ctxs), func(i int) time.Time {
		if ctxs[i] == nil {
			return due[i]
		}
		at, _ := ctxs[i].Deadline()
		return at
	}, late)
	for _, cancel := range cancels {
		if cancel != nil {
			cancel()
		}
	}
	return late, overran
}

func fireAfterFunc(_ *Env, n int, lead time.Duration) ([]time.Duration, int) {
	due := dueTimes(n, time.Now().Add(lead))
	late := make([]time.Duration, n)
	var wg sync.WaitGroup
	overran := armDue(due, func(i int, d time.Duration) {
		wg.Add(1)
		at := time.Now().Add(d)
		time.AfterFunc(d, func() { late[i] = time.Since(at); wg.Done() })
	})
	wg.Wait()
	return late, overran
}
