package fuzz

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/holdline/locks"
)

// The driver runs a script against a real store inside a synctest bubble,
// where the clock is fake and moves only when every goroutine is blocked, so
// every run of a script is the same run. Each call of Hold or TryHold runs
// in its own goroutine; its fn records the grant and then waits for a
// command (let go, panic, Goexit, close the store, hold again) or, for an
// obedient fn, for its context to end. After each op the driver waits for
// the bubble to settle, applies the op to the model, and compares: who
// holds, who waits, who ended how and when, the fences' order; and it checks
// the store's invariants on the store's side alone.

// Lock handles of every script: two handles of "inv" with different
// defaults (they share keys), and "other", whose keys are other keys.
var handleNames = [3]string{"inv", "inv", "other"}

const (
	h1MaxHold = 7 * time.Millisecond
	h1Wait    = 15 * time.Millisecond
)

// Key texts; key 3 is invalid.
var keyTexts = [3]string{"9", "x", "700"}

type (
	invoiceID string
	code      int16
	keyBytes  []byte
)

// keyValue returns the Go value standing for key in representation repr:
// each valid key has four, all with the same text.
func keyValue(key, repr uint8) any {
	switch key {
	case 0:
		return [4]any{9, int64(9), "9", invoiceID("9")}[repr&3]
	case 1:
		return [4]any{"x", []byte("x"), invoiceID("x"), keyBytes("x")}[repr&3]
	case 2:
		return [4]any{uint16(700), "700", code(700), uint64(700)}[repr&3]
	}
	return [4]any{nil, 1.5, "", struct{}{}}[repr&3]
}

var errFn = errors.New("fn failed")

type panicVal struct{ id int }

type cmd uint8

const (
	cmdRelease cmd = iota
	cmdPanic
	cmdGoexit
	cmdClose
	cmdNested
)

// rcall is one call of Hold or TryHold on the real store. Its fields below
// the line are guarded by the driver's mu.
type rcall struct {
	id     int
	lock   *locks.Lock
	key    Key
	keyVal any
	try    bool
	obey   bool
	fnErr  bool
	opts   []locks.Option
	ctx    *watchedCtx // the caller's context
	cancel context.CancelFunc
	cmds   chan cmd
	// raced: made as its key's holder let go, so that it may have stood
	// in line for an instant where the model, letting go first, has it
	// granted at once.
	raced bool

	granted     bool
	grantAt     time.Duration
	seq         int
	lease       locks.Lease
	fnCtx       context.Context
	ended       bool
	endAt       time.Duration
	out         Outcome
	err         error
	reason      string // the reason of a Lost error
	nested      [2]Res
	nestedAsked bool
	problems    []string
}

type driver struct {
	t      *testing.T
	script Script
	store  *locks.Store
	origin time.Time
	locks  [3]*locks.Lock
	model  *Model
	failed bool
	step   string
	flip   bool

	mu    sync.Mutex
	calls []*rcall
	seq   int
}

// runScript runs s against a store and the model in a bubble of its own.
func runScript(t *testing.T, s Script) {
	t.Helper()
	synctest.Test(t, func(t *testing.T) {
		d := newDriver(t, s)
		for i, op := range s.Ops {
			d.step = fmt.Sprintf("op %d (%s)", i, op)
			d.apply(op)
			if d.failed {
				break
			}
		}
		d.finish()
	})
}

func newDriver(t *testing.T, s Script) *driver {
	opts := []locks.StoreOption{locks.TimerTick(s.Tick)}
	if s.OneShard {
		opts = append(opts, locks.Shards(1))
	}
	d := &driver{t: t, script: s, store: locks.NewStore(opts...), origin: time.Now(),
		model: NewModel(s.Tick, locks.MaxWaiters)}
	var err error
	for i, n := range handleNames {
		var o []locks.Option
		if i == 1 {
			o = []locks.Option{locks.MaxHold(h1MaxHold), locks.Wait(h1Wait)}
		}
		if d.locks[i], err = locks.OpenLock(d.store, n, o...); err != nil {
			t.Fatalf("OpenLock(%q): %v", n, err)
		}
	}
	return d
}

func (d *driver) since() time.Duration { return time.Since(d.origin) }

// back returns the call an op refers to, counting back from the latest, or
// -1 if there is none.
func (d *driver) back(b uint8) int {
	n := len(d.calls)
	if n == 0 {
		return -1
	}
	return n - 1 - int(b)%n
}

// running reports whether the model says call id's fn runs.
func (d *driver) running(id int) bool {
	if id < 0 {
		return false
	}
	p := d.model.Calls()[id].Phase
	return p == Holding || p == Revoked
}

// holderOf returns the model's holder of key k of handle l, or -1.
func (d *driver) holderOf(key, l uint8) int {
	if key > 2 {
		return -1
	}
	if h := d.model.Holder(Key{handleNames[l%3], keyTexts[key]}); h != nil {
		return h.ID
	}
	return -1
}

// send gives call id's fn a command without ever blocking the driver.
func (d *driver) send(id int, c cmd) {
	select {
	case d.calls[id].cmds <- c:
	default:
		d.fail("the command queue of call %d is full", id)
	}
}

func (d *driver) apply(op Op) {
	switch op.Kind {
	case OpHold, OpTryHold:
		d.hold(op, -1)
	case OpHoldRace:
		d.hold(op, d.holderOf(op.Key, op.Lock))
	case OpRelease:
		d.release(d.back(op.Back), Return)
	case OpPanic:
		d.release(d.back(op.Back), Panic)
	case OpGoexit:
		d.release(d.back(op.Back), Goexit)
	case OpReleaseKey:
		d.release(d.holderOf(op.Key, op.Lock), Return)
	case OpCancel:
		d.cancel(d.back(op.Back))
	case OpAdvance:
		d.advance(Advance(op.Ms), 0, 0, false)
	case OpRaceAdvance:
		span := time.Duration(0)
		if next := d.model.Next(); next-d.model.Now() <= time.Hour {
			span = next - d.model.Now()
		}
		d.advance(span, op.Key, op.Lock, true)
	case OpClose:
		if err := d.store.Close(); err != nil {
			d.fail("Close: %v", err)
		}
		synctest.Wait()
		d.model.Close()
		d.check()
	case OpCloseInside:
		d.command(d.back(op.Back), cmdClose, d.model.Close)
	case OpNested:
		id := d.back(op.Back)
		d.command(id, cmdNested, func() { d.model.Nested(id) })
	case OpRaceCancel:
		w := d.back(op.Back)
		if w < 0 {
			return
		}
		h := d.model.RaceTarget(w)
		if h < 0 {
			d.cancel(w)
			return
		}
		// Two goroutines, started in turn in either order, so that either
		// may come first.
		d.flip = !d.flip
		if d.flip {
			go d.calls[w].cancel()
			go d.send(h, cmdRelease)
		} else {
			go d.send(h, cmdRelease)
			go d.calls[w].cancel()
		}
		synctest.Wait()
		d.model.RaceCancel(w, h, d)
		d.check()
	}
}

// hold starts a call of Hold or TryHold; race, if not -1, is a holder let
// go at the same moment.
func (d *driver) hold(op Op, race int) {
	l := op.Lock % 3
	req := Request{Try: op.Kind == OpTryHold, Obey: op.Obey, FnErr: op.FnErr, PreCanceled: op.Pre}
	c := &rcall{id: len(d.calls), lock: d.locks[l], keyVal: keyValue(op.Key, op.Repr),
		try: req.Try, obey: op.Obey, fnErr: op.FnErr, cmds: make(chan cmd, 4)}
	if op.Key > 2 {
		req.InvalidKey = true
		c.key = Key{handleNames[l], ""}
	} else {
		c.key = Key{handleNames[l], keyTexts[op.Key]}
	}
	req.Key = c.key
	req.Wait, req.MaxHold = locks.DefaultWait, 0
	if l == 1 {
		req.Wait, req.MaxHold = h1Wait, h1MaxHold
	}
	if !req.Try {
		if w, ok := Duration(op.Wait); ok {
			req.Wait = w
			c.opts = append(c.opts, locks.Wait(w))
		}
		if m, ok := Duration(op.MaxHold); ok {
			req.MaxHold = m
			c.opts = append(c.opts, locks.MaxHold(m))
		}
	}
	if req.Try || req.Wait == 0 || !d.running(race) {
		race = -1 // no race: a call that does not wait would see which came first
	}
	ctx, cancel := context.WithCancel(context.Background())
	if op.Pre {
		cancel()
	}
	c.ctx, c.cancel, c.raced = &watchedCtx{Context: ctx}, cancel, race >= 0
	d.mu.Lock()
	d.calls = append(d.calls, c)
	d.mu.Unlock()
	go d.run(c)
	if race >= 0 {
		d.send(race, cmdRelease)
	}
	synctest.Wait()
	if race >= 0 {
		d.model.Release(race, Return)
	}
	d.model.Hold(req)
	d.check()
}

func (d *driver) release(id int, how How) {
	d.command(id, [...]cmd{cmdRelease, cmdPanic, cmdGoexit}[how], func() { d.model.Release(id, how) })
}

// command gives call id's fn c, if it runs, lets the bubble settle, applies
// the same to the model with apply, and compares.
func (d *driver) command(id int, c cmd, apply func()) {
	if !d.running(id) {
		return
	}
	d.send(id, c)
	synctest.Wait()
	apply()
	d.check()
}

func (d *driver) cancel(id int) {
	if id < 0 {
		return
	}
	d.calls[id].cancel()
	synctest.Wait()
	d.model.Cancel(id)
	d.check()
}

// advance lets span pass, stopping at every instant the model expects a
// deadline to fire and comparing there. With race, the holder of the key
// (as the model has it just before the end) lets go at the last instant,
// racing with that instant's deadlines.
func (d *driver) advance(span time.Duration, key, l uint8, race bool) {
	to := d.model.Now() + span
	for {
		next := d.model.Next()
		if next >= to {
			break
		}
		time.Sleep(next - d.since())
		synctest.Wait()
		d.model.Advance(next, -1, d)
		if d.check(); d.failed {
			return
		}
	}
	time.Sleep(to - d.since())
	r := -1
	if race {
		if r = d.holderOf(key, l); r >= 0 {
			d.send(r, cmdRelease)
		}
	}
	synctest.Wait()
	d.model.Advance(to, r, d)
	d.check()
}
