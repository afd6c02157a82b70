package fuzz

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"time"

	"github.com/holdline/locks"
)

// What each call of a script does in its goroutine, and how what Hold
// returned is read.

// run is the goroutine of one call.
func (d *driver) run(c *rcall) {
	var (
		acquired, returned bool
		err                error
	)
	defer func() {
		r := recover()
		d.mu.Lock()
		defer d.mu.Unlock()
		c.ended, c.endAt = true, d.since()
		switch {
		case r != nil:
			if pv, ok := r.(panicVal); !ok || pv.id != c.id {
				c.problem("a panic of %v came out of Hold, not fn's own", r)
			}
			c.out = Outcome{Res: Panicked}
		case !returned:
			c.out = Outcome{Res: Goexited}
		default:
			c.err = err
			c.out = d.classify(c, acquired, err)
		}
	}()
	fn := func(fctx context.Context, l *locks.Lease) error {
		c.ctx.start()
		return d.fn(c, fctx, l)
	}
	if c.try {
		acquired, err = c.lock.TryHold(c.ctx, c.keyVal, fn)
	} else {
		err = c.lock.Hold(c.ctx, c.keyVal, fn, c.opts...)
	}
	returned = true
}

// fn is every call's function.
func (d *driver) fn(c *rcall, ctx context.Context, l *locks.Lease) error {
	d.mu.Lock()
	if c.granted {
		c.problem("fn ran twice")
	}
	d.seq++
	c.granted, c.grantAt, c.seq, c.lease, c.fnCtx = true, d.since(), d.seq, *l, ctx
	d.mu.Unlock()
	var done <-chan struct{}
	if c.obey {
		done = ctx.Done()
	}
	for {
		select {
		case m := <-c.cmds:
			switch m {
			case cmdRelease:
				if c.fnErr {
					return errFn
				}
				return nil
			case cmdPanic:
				panic(panicVal{c.id})
			case cmdGoexit:
				runtime.Goexit()
			case cmdClose:
				if err := d.store.Close(); err != nil {
					d.problem(c, "Close from inside fn: %v", err)
				}
			case cmdNested:
				d.nested(c, ctx)
			}
		case <-done:
			return ctx.Err()
		}
	}
}

// nested holds c's own key again from inside its fn: Hold must fail
// Invalid at once (or Canceled, fn's context having ended), TryHold answer
// (false, nil).
func (d *driver) nested(c *rcall, ctx context.Context) {
	nop := func(context.Context, *locks.Lease) error { return nil }
	herr := c.lock.Hold(ctx, c.keyVal, nop, locks.Wait(5*time.Millisecond))
	acq, terr := c.lock.TryHold(ctx, c.keyVal, nop)
	var r [2]Res
	r[0] = errRes(herr)
	switch {
	case acq:
		r[1] = OK
	case terr == nil:
		r[1] = NotAcquired
	default:
		r[1] = errRes(terr)
	}
	d.mu.Lock()
	c.nested, c.nestedAsked = r, true
	d.mu.Unlock()
}

func errRes(err error) Res {
	var e *locks.Error
	switch {
	case err == nil:
		return OK
	case errors.As(err, &e):
		return [...]Res{0, Invalid, InUse, Lost, Limit, Closed, Canceled}[e.Kind]
	}
	return FnErr
}

func (c *rcall) problem(format string, args ...any) {
	c.problems = append(c.problems, fmt.Sprintf("call %d: ", c.id)+fmt.Sprintf(format, args...))
}

func (d *driver) problem(c *rcall, format string, args ...any) {
	d.mu.Lock()
	c.problem(format, args...)
	d.mu.Unlock()
}

// classify turns what Hold or TryHold returned into an Outcome, checking on
// the way what every error must be: it names the lock and the key, matches
// its kind's sentinel, and reads `lock NAME: key "KEY": what happened`
// (to the letter for in use and lost).
func (d *driver) classify(c *rcall, acquired bool, err error) Outcome {
	if c.try && acquired != c.granted {
		c.problem("TryHold answered acquired=%v, but fn ran=%v", acquired, c.granted)
	}
	if err == nil && !c.granted && !(c.try && !acquired) {
		c.problem("Hold returned nil, but fn never ran")
	}
	switch {
	case c.try && !acquired && err == nil:
		return Outcome{Res: NotAcquired}
	case err == nil:
		return Outcome{Res: OK}
	case err == errFn:
		return Outcome{Res: FnErr}
	case err == context.Canceled:
		return Outcome{Res: FnCanceled}
	}
	var e *locks.Error
	if !errors.As(err, &e) {
		c.problem("Hold returned %v (%T), neither fn's error nor a *locks.Error", err, err)
		return Outcome{Res: FnErr}
	}
	if e.Lock != c.key.Lock || e.Key != c.key.Text {
		c.problem("error %q names lock %q key %q, want %q %q", err, e.Lock, e.Key, c.key.Lock, c.key.Text)
	}
	prefix := fmt.Sprintf("lock %s: ", c.key.Lock)
	if c.key.Text != "" {
		prefix += fmt.Sprintf("key %q: ", c.key.Text)
	}
	if !strings.HasPrefix(err.Error(), prefix) {
		c.problem("error %q does not start %q", err, prefix)
	}
	sentinel := map[locks.Kind]error{locks.Invalid: locks.ErrInvalid, locks.InUse: locks.ErrInUse,
		locks.Lost: locks.ErrLost, locks.Limit: locks.ErrLimit, locks.Closed: locks.ErrClosed,
		locks.Canceled: context.Canceled}[e.Kind]
	if sentinel == nil || !errors.Is(err, sentinel) {
		c.problem("error %q of kind %v is not errors.Is its sentinel", err, e.Kind)
	}
	switch e.Kind {
	case locks.InUse:
		if want := prefix + "held past the hold's wait: in use"; err.Error() != want {
			c.problem("error %q, want %q", err, want)
		}
	case locks.Lost:
		out := Outcome{Res: Lost, Wrap: WrapNone}
		switch {
		case errors.Is(err, errFn):
			out.Wrap = WrapFnErr
		case errors.Is(err, context.Canceled):
			out.Wrap = WrapCtx
		}
		// The message goes on with the function's error, if it returned one.
		var fnSaid string
		if fe := errors.Unwrap(err); fe != nil {
			fnSaid = "; the function returned: " + fe.Error()
		}
		switch err.Error() {
		case prefix + "the lease was lost: it was revoked at its maxHold" + fnSaid:
			c.reason = "maxHold"
		case prefix + "the lease was lost: its store closed" + fnSaid:
			c.reason = "closed"
		default:
			c.problem("lost error %q gives no known reason", err)
		}
		return out
	}
	return Outcome{Res: errRes(err)}
}
