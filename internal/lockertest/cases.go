package lockertest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/holdline/locks"
)

// invoiceID is a key type of the caller's own: a named string.
type invoiceID string

// point is a key of no type a key may be.
type point struct{ x, y int }

// Case is one rule of the contract, checked against a Target.
type Case struct {
	// Name says the rule, as the case's subtest is named.
	Name string
	// Run checks the rule against tg, failing t where it does not hold.
	Run func(t *testing.T, tg *Target)
}

// Cases are the rules of the contract that hold for any Locker, with
// package locks' messages to the letter: each runs against a lock of
// this process and the Locker under test (Run).
var Cases = []Case{
	{"hold runs fn and returns its error", func(t *testing.T, tg *Target) {
		l := tg.Open(t, "invoices")
		ctx := context.Background()
		var got *locks.Lease
		err := l.Hold(ctx, 9, func(ctx context.Context, ls *locks.Lease) error {
			got = ls
			return ErrBoom
		})
		if err != ErrBoom {
			t.Fatalf("Hold: %v, want fn's own error as it is", err)
		}
		if got == nil || got.Lock != "invoices" || got.Key != "9" || got.Fence == 0 || got.Granted.IsZero() || !got.Deadline.IsZero() {
			t.Fatalf("lease %+v", got)
		}
		if d := time.Since(got.Granted); d < 0 || d > 10*time.Second {
			t.Fatalf("granted %v ago", d)
		}
		if err := l.Hold(ctx, 9, Noop); err != nil {
			t.Fatal(err)
		}
	}},
	{"a key is its text", func(t *testing.T, tg *Target) {
		l, o := tg.Open(t, "invoices"), tg.Other(t, "invoices")
		r := Start(context.Background(), l, 9)
		r.Held(t)
		for _, k := range []any{9, int64(9), "9", invoiceID("9"), []byte("9"), uint8(9)} {
			ok, err := o.TryHold(context.Background(), k, Noop)
			if ok || err != nil {
				t.Fatalf("TryHold(%T %v) = %v, %v while 9 is held", k, k, ok, err)
			}
		}
		if ok, err := o.TryHold(context.Background(), 10, Noop); !ok || err != nil {
			t.Fatalf("TryHold(10) = %v, %v", ok, err)
		}
		if ok, err := o.TryHold(context.Background(), "9/x", Noop); !ok || err != nil {
			t.Fatalf(`TryHold("9/x") = %v, %v: a key whose text begins with another's is another key`, ok, err)
		}
		other := tg.Other(t, "payments")
		if ok, err := other.TryHold(context.Background(), 9, Noop); !ok || err != nil {
			t.Fatalf("another lock's 9: %v, %v", ok, err)
		}
		if err := r.Result(t, nil); err != nil {
			t.Fatal(err)
		}
	}},
	{"waiters are served first come first served, fences rising", func(t *testing.T, tg *Target) {
		l, o := tg.Open(t, "invoices"), tg.Other(t, "invoices")
		ctx := context.Background()
		holder := Start(ctx, l, "k")
		first, _ := holder.Held(t)
		const n = 5
		waiters := make([]*Running, n)
		for i := range waiters {
			lk := o
			if i%2 == 1 {
				lk = l
			}
			waiters[i] = Start(ctx, lk, "k", locks.Wait(20*time.Second))
			tg.Queued(t, i+1)
		}
		if ok, err := o.TryHold(ctx, "k", Noop); ok || err != nil {
			t.Fatalf("TryHold with a line: %v, %v", ok, err)
		}
		holder.Let(nil)
		last := first.Fence
		for i, w := range waiters {
			ls, _ := w.Held(t)
			if ls.Fence <= last {
				t.Fatalf("waiter %d: fence %d after %d", i, ls.Fence, last)
			}
			last = ls.Fence
			for j := i + 1; j < n; j++ {
				if waiters[j].Started() {
					t.Fatalf("waiter %d ran while %d held the key", j, i)
				}
			}
			if err := w.Result(t, nil); err != nil {
				t.Fatal(err)
			}
		}
		if err := holder.Wait(t); err != nil {
			t.Fatal(err)
		}
	}},
	{"the wait passes: in use", func(t *testing.T, tg *Target) {
		l, o := tg.Open(t, "invoices"), tg.Other(t, "invoices")
		r := Start(context.Background(), l, 9)
		ls, _ := r.Held(t)
		begin := time.Now()
		err := o.Hold(context.Background(), 9, Noop, locks.Wait(100*time.Millisecond))
		if d := time.Since(begin); d < 100*time.Millisecond {
			t.Fatalf("in use after %v", d)
		}
		WantMessage(t, err, `lock invoices: key "9": held past the hold's wait: in use`)
		var le *locks.Error
		if !errors.Is(err, locks.ErrInUse) || !errors.As(err, &le) || le.Kind != locks.InUse || le.Lock != "invoices" || le.Key != "9" {
			t.Fatalf("%#v", err)
		}
		if le.HolderFence != ls.Fence || le.HeldFor < 100*time.Millisecond {
			t.Fatalf("holder fence %d (want %d), held for %v", le.HolderFence, ls.Fence, le.HeldFor)
		}
		err = o.Hold(context.Background(), 9, Noop, locks.Wait(0))
		WantMessage(t, err, `lock invoices: key "9": held past the hold's wait: in use`)
		if err := r.Result(t, nil); err != nil {
			t.Fatal(err)
		}
		// The waiter that timed out left the line: the key is free.
		if ok, err := o.TryHold(context.Background(), 9, Noop); !ok || err != nil {
			t.Fatalf("after the timeout and the release: %v, %v", ok, err)
		}
	}},
	{"Wait(Forever) waits until the key comes", func(t *testing.T, tg *Target) {
		l, o := tg.Open(t, "invoices"), tg.Other(t, "invoices")
		r := Start(context.Background(), l, 9)
		r.Held(t)
		w := Start(context.Background(), o, 9, locks.Wait(locks.Forever))
		tg.Queued(t, 1)
		time.Sleep(50 * time.Millisecond)
		if err := r.Result(t, nil); err != nil {
			t.Fatal(err)
		}
		w.Held(t)
		if err := w.Result(t, nil); err != nil {
			t.Fatal(err)
		}
	}},
	{"try hold", func(t *testing.T, tg *Target) {
		l, o := tg.Open(t, "invoices"), tg.Other(t, "invoices")
		ok, err := l.TryHold(context.Background(), "a", func(ctx context.Context, ls *locks.Lease) error {
			if ok, err := o.TryHold(context.Background(), "a", Noop); ok || err != nil {
				t.Errorf("TryHold of a held key: %v, %v", ok, err)
			}
			return ErrBoom
		})
		if !ok || err != ErrBoom {
			t.Fatalf("TryHold = %v, %v", ok, err)
		}
		_, err = l.TryHold(context.Background(), "a", Noop, locks.Wait(time.Second))
		WantMessage(t, err, `lock invoices: key "a": TryHold never waits: Wait is not one of its options: invalid`)
		// A bad option is found before the Wait, as package locks checks them.
		_, err = l.TryHold(context.Background(), "a", Noop, locks.Wait(time.Second), locks.MaxHold(-time.Second))
		WantMessage(t, err, `lock invoices: key "a": the maxHold is negative (-1s): invalid`)
	}},
	{"a waiter whose ctx ends leaves the line", func(t *testing.T, tg *Target) {
		l, o := tg.Open(t, "invoices"), tg.Other(t, "invoices")
		r := Start(context.Background(), l, 9)
		r.Held(t)
		why := errors.New("the user went away")
		ctx, cancel := context.WithCancelCause(context.Background())
		w := Start(ctx, o, 9, locks.Wait(time.Minute))
		tg.Queued(t, 1)
		next := Start(context.Background(), o, 9, locks.Wait(time.Minute))
		tg.Queued(t, 2)
		cancel(why)
		err := w.Wait(t)
		if !errors.Is(err, context.Canceled) || !errors.Is(err, why) {
			t.Fatalf("%v: want context.Canceled and its cause", err)
		}
		WantMessage(t, err, `lock invoices: key "9": the hold's context ended: context canceled: the user went away`)
		if err := r.Result(t, nil); err != nil {
			t.Fatal(err)
		}
		next.Held(t)
		if err := next.Result(t, nil); err != nil {
			t.Fatal(err)
		}
		ended, stop := context.WithCancel(context.Background())
		stop()
		ran := false
		err = l.Hold(ended, 9, func(context.Context, *locks.Lease) error { ran = true; return nil })
		if ran || !errors.Is(err, context.Canceled) {
			t.Fatalf("an ended ctx: ran %v, %v", ran, err)
		}
		WantMessage(t, err, `lock invoices: key "9": the hold's context ended: context canceled`)
	}},
	{"bad calls fail invalid at once, with in-process messages", func(t *testing.T, tg *Target) {
		l := tg.Open(t, "invoices")
		ctx := context.Background()
		long := strings.Repeat("k", locks.MaxKeyLen+1)
		for _, c := range []struct {
			key  any
			fn   locks.HoldFunc
			ctx  context.Context
			opts []locks.Option
			want string
		}{
			{key: 1.5, want: `lock invoices: a key is a string, an integer, a []byte, a [N]byte or an encoding.TextMarshaler, not a float64: invalid`},
			{key: point{1, 2}, want: `lock invoices: a key is a string, an integer, a []byte, a [N]byte or an encoding.TextMarshaler, not a lockertest.point: invalid`},
			{key: nil, want: `lock invoices: the key is nil: invalid`},
			{key: "", want: `lock invoices: the key is empty: invalid`},
			{key: long, want: `lock invoices: the key is 1025 bytes long, more than 1024: invalid`},
			{key: 9, fn: nil, want: `lock invoices: key "9": the function to run is nil: invalid`},
			{key: 9, opts: []locks.Option{locks.Wait(-time.Second)}, want: `lock invoices: key "9": the wait is negative (-1s): invalid`},
			{key: 9, opts: []locks.Option{locks.MaxHold(-time.Second)}, want: `lock invoices: key "9": the maxHold is negative (-1s): invalid`},
			{key: 9, opts: []locks.Option{locks.TTL(time.Second)}, want: `lock invoices: key "9": a ttl is set when the lock is opened, not per hold: invalid`},
			{key: 9, opts: []locks.Option{{}}, want: `lock invoices: key "9": an Option must be made by TTL, MaxHold or Wait: invalid`},
			{key: 9, ctx: nil, want: `lock invoices: key "9": the context is nil: invalid`},
			{key: 9, ctx: locks.InTransaction(ctx), want: `lock invoices: key "9": held inside a transaction: invalid`},
		} {
			fn := c.fn
			if c.want != `lock invoices: key "9": the function to run is nil: invalid` {
				fn = Noop
			}
			cctx := c.ctx
			if cctx == nil && c.want != `lock invoices: key "9": the context is nil: invalid` {
				cctx = ctx
			}
			err := l.Hold(cctx, c.key, fn, c.opts...)
			WantMessage(t, err, c.want)
			if !errors.Is(err, locks.ErrInvalid) {
				t.Fatalf("%v is not ErrInvalid", err)
			}
		}
		tg.Untouched(t)
		if ok, err := l.TryHold(locks.InTransaction(ctx), 9, Noop); !ok || err != nil {
			t.Fatalf("TryHold in a transaction: %v, %v", ok, err)
		}
	}},
	{"bad locks fail invalid, with in-process messages", func(t *testing.T, tg *Target) {
		_, err := tryOpen(tg, "in voices")
		WantMessage(t, err, `lock "in voices": a name is made of A-Z a-z 0-9 _ - . : /, not " " (byte 2): invalid`)
		_, err = tryOpen(tg, "invoices", locks.TTL(0))
		WantMessage(t, err, `lock invoices: the ttl must be positive, not 0s: invalid`)
	}},
	{"a hold inside a hold of the same key fails invalid", func(t *testing.T, tg *Target) {
		l, o := tg.Open(t, "invoices"), tg.Other(t, "invoices")
		same := tg.Open(t, "invoices")
		err := l.Hold(context.Background(), 9, func(ctx context.Context, _ *locks.Lease) error {
			WantMessage(t, same.Hold(ctx, "9", Noop), `lock invoices: key "9": held inside a hold of the same key: invalid`)
			WantMessage(t, o.Hold(context.WithValue(ctx, "k", 1), 9, Noop), `lock invoices: key "9": held inside a hold of the same key: invalid`)
			if ok, err := l.TryHold(ctx, 9, Noop); ok || err != nil {
				t.Errorf("nested TryHold: %v, %v", ok, err)
			}
			if err := l.Hold(ctx, 10, Noop); err != nil {
				t.Errorf("a hold of another key inside: %v", err)
			}
			// Detached, it is another holder, and waits in line.
			WantMessage(t, l.Hold(locks.Detach(ctx), 9, Noop, locks.Wait(20*time.Millisecond)),
				`lock invoices: key "9": held past the hold's wait: in use`)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		// Once the hold has returned, its context no longer marks one.
		var kept context.Context
		l.Hold(context.Background(), 9, func(ctx context.Context, _ *locks.Lease) error { kept = ctx; return nil })
		if err := l.Hold(context.WithoutCancel(kept), 9, Noop); err != nil {
			t.Fatalf("a hold under the context of a hold that returned: %v", err)
		}
	}},
	{"the caller's ctx ending ends fn's, not the lease", func(t *testing.T, tg *Target) {
		l, o := tg.Open(t, "invoices"), tg.Other(t, "invoices")
		ctx, cancel := context.WithCancel(context.Background())
		r := Start(ctx, l, 9)
		_, fctx := r.Held(t)
		cancel()
		<-fctx.Done()
		if ok, err := o.TryHold(context.Background(), 9, Noop); ok || err != nil {
			t.Fatalf("the key was let go as the caller's ctx ended: %v, %v", ok, err)
		}
		if err := r.Result(t, ErrBoom); err != ErrBoom {
			t.Fatalf("Hold: %v, want fn's error", err)
		}
	}},
	{"fn's ctx says at once that the caller's ended, with its error and cause", func(t *testing.T, tg *Target) {
		l := tg.Open(t, "invoices")
		why := errors.New("the caller gave up")
		ctx, cancel := context.WithCancelCause(context.Background())
		var fctx context.Context
		err := l.Hold(ctx, 9, func(c context.Context, _ *locks.Lease) error {
			fctx = c
			cancel(why)
			if c.Err() == nil {
				t.Error("fn's ctx.Err() is nil right after the caller's ctx ended")
			}
			select {
			case <-c.Done():
			default:
				t.Error("fn's ctx.Done() is not closed right after the caller's ctx ended")
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if fctx.Err() != context.Canceled || !errors.Is(context.Cause(fctx), why) {
			t.Fatalf("after Hold: fn's ctx %v, cause %v; want the caller's", fctx.Err(), context.Cause(fctx))
		}
		dctx, stop := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer stop()
		err = l.Hold(dctx, 9, func(c context.Context, _ *locks.Lease) error {
			<-c.Done()
			if c.Err() != context.DeadlineExceeded || context.Cause(c) != context.DeadlineExceeded {
				t.Errorf("fn's ctx %v, cause %v; want the caller's deadline", c.Err(), context.Cause(c))
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}},
	{"maxHold revokes: fn's ctx ends, the next gets the key, Hold fails lost", func(t *testing.T, tg *Target) {
		l := tg.Open(t, "invoices", locks.MaxHold(100*time.Millisecond))
		o := tg.Other(t, "invoices")
		r := Start(context.Background(), l, "m")
		ls, fctx := r.Held(t)
		if d := ls.Deadline.Sub(ls.Granted); d != 100*time.Millisecond {
			t.Fatalf("deadline %v after the grant", d)
		}
		w := Start(context.Background(), o, "m", locks.Wait(10*time.Second))
		wls, _ := w.Held(t) // before r's function returns
		if wls.Fence <= ls.Fence {
			t.Fatalf("fence %d after %d", wls.Fence, ls.Fence)
		}
		if tg.RevokesFirst {
			select {
			case <-fctx.Done():
			default:
				t.Fatal("the next holder got the key before the revoked one's ctx ended")
			}
		} else {
			<-fctx.Done()
		}
		cause := context.Cause(fctx)
		WantMessage(t, cause, `lock invoices: key "m": the lease was lost: it was revoked at its maxHold`)
		if !errors.Is(cause, locks.ErrLost) {
			t.Fatalf("cause %v", cause)
		}
		err := r.Result(t, ErrBoom)
		WantMessage(t, err, `lock invoices: key "m": the lease was lost: it was revoked at its maxHold; the function returned: boom`)
		if !errors.Is(err, locks.ErrLost) || !errors.Is(err, ErrBoom) {
			t.Fatalf("%v: want ErrLost wrapping fn's error", err)
		}
		if err := w.Result(t, nil); err != nil {
			t.Fatal(err)
		}
	}},
	{"a caller's context that stalls holds up no other hold", func(t *testing.T, tg *Target) {
		// SPEC §5: the caller's context's methods run on no goroutine of
		// the store's and under none of its locks. One holder's context
		// stalls once its function runs; its lease is revoked at its
		// maxHold; another key's, revoked later, still reaches its
		// function, and the next in line gets that key.
		l, o := tg.Open(t, "invoices"), tg.Other(t, "invoices")
		stalling := NewStallingCtx()
		t.Cleanup(stalling.LetGo) // before tg's cleanups, should the case fail
		held, stalled := make(chan struct{}), make(chan error, 1)
		go func() {
			stalled <- l.Hold(stalling, "stalls", func(ctx context.Context, _ *locks.Lease) error {
				done := ctx.Done() // taken before the caller's context stalls
				stalling.Arm()
				close(held)
				<-done
				return nil
			}, locks.MaxHold(200*time.Millisecond))
		}()
		select {
		case <-held:
		case err := <-stalled:
			t.Fatalf("Hold returned %v before its function ran", err)
		}
		r := Start(context.Background(), l, "other", locks.MaxHold(400*time.Millisecond))
		_, fctx := r.Held(t)
		w := Start(context.Background(), o, "other", locks.Wait(patience))
		w.Held(t)
		select {
		case <-fctx.Done():
		case <-time.After(patience):
			t.Fatal("the other key's holder was not told of its revocation: held up by a stalling caller's context")
		}
		WantMessage(t, context.Cause(fctx), `lock invoices: key "other": the lease was lost: it was revoked at its maxHold`)
		if err := w.Result(t, nil); err != nil {
			t.Fatal(err)
		}
		if err := r.Result(t, nil); !errors.Is(err, locks.ErrLost) {
			t.Fatalf("the revoked Hold returned %v", err)
		}
		stalling.LetGo() // the stalling caller's own goroutine may ask its context as its hold ends
		select {
		case err := <-stalled:
			if !errors.Is(err, locks.ErrLost) {
				t.Fatalf("the stalling caller's Hold returned %v", err)
			}
		case <-time.After(patience):
			t.Fatal("the stalling caller's Hold did not return")
		}
	}},
	{"a panic lets the key go and goes on", func(t *testing.T, tg *Target) {
		l := tg.Open(t, "invoices")
		func() {
			defer func() {
				if r := recover(); r != "oops" {
					t.Fatalf("recovered %v", r)
				}
			}()
			l.Hold(context.Background(), 9, func(context.Context, *locks.Lease) error { panic("oops") })
		}()
		if ok, err := tg.Other(t, "invoices").TryHold(context.Background(), 9, Noop); !ok || err != nil {
			t.Fatalf("after a panic: %v, %v", ok, err)
		}
	}},
	{"HoldValue and TryHoldValue through Locker", func(t *testing.T, tg *Target) {
		l := tg.Open(t, "invoices")
		v, err := locks.HoldValue(context.Background(), l, 9, func(ctx context.Context, ls *locks.Lease) (string, error) {
			return "receipt " + ls.Key, nil
		})
		if v != "receipt 9" || err != nil {
			t.Fatalf("HoldValue = %q, %v", v, err)
		}
		n, ok, err := locks.TryHoldValue(context.Background(), l, 9, func(ctx context.Context, ls *locks.Lease) (int, error) {
			return 42, nil
		})
		if n != 42 || !ok || err != nil {
			t.Fatalf("TryHoldValue = %v, %v, %v", n, ok, err)
		}
	}},
	{"closing the store: waiters closed, leases lost, later calls closed", func(t *testing.T, tg *Target) {
		l, o := tg.Open(t, "invoices"), tg.Other(t, "invoices")
		r := Start(context.Background(), l, 9)
		_, fctx := r.Held(t)
		w := Start(context.Background(), o, 9, locks.Wait(time.Minute))
		tg.Queued(t, 1)
		tg.CloseStore()
		WantMessage(t, w.Wait(t), `lock invoices: key "9": the store is closed: closed`)
		<-fctx.Done()
		WantMessage(t, context.Cause(fctx), `lock invoices: key "9": the lease was lost: its store closed`)
		err := r.Result(t, nil)
		WantMessage(t, err, `lock invoices: key "9": the lease was lost: its store closed`)
		if !errors.Is(err, locks.ErrLost) {
			t.Fatal(err)
		}
		if !tg.ClosedAfter {
			return
		}
		WantMessage(t, l.Hold(context.Background(), 9, Noop), `lock invoices: key "9": the store is closed: closed`)
		_, err = l.TryHold(context.Background(), 9, Noop)
		WantMessage(t, err, `lock invoices: key "9": the store is closed: closed`)
		_, err = tryOpen(tg, "invoices")
		WantMessage(t, err, `lock invoices: the store is closed: closed`)
	}},
}

// tryOpen opens a lock where tg's holder would, returning the error.
func tryOpen(tg *Target, name string, opts ...locks.Option) (locks.Locker, error) {
	var l locks.Locker
	ft := &fatalCatcher{}
	func() {
		defer func() { recover() }()
		l = tg.Open(ft, name, opts...)
	}()
	return l, ft.err
}

// fatalCatcher is a testing.TB whose Fatal records the error and stops
// the call.
type fatalCatcher struct {
	testing.TB
	err error
}

// Helper does nothing: a fatalCatcher reports nothing itself.
func (f *fatalCatcher) Helper() {}

// Fatal records its first argument, if an error, and stops the call.
func (f *fatalCatcher) Fatal(args ...any) {
	if e, ok := args[0].(error); ok {
		f.err = e
	}
	panic(f)
}
