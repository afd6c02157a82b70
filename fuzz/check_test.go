package fuzz

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing/synctest"
	"time"

	"github.com/holdline/locks"
)

// How the driver compares the store with the model and checks the
// the store's invariants, and how a run ends. The store's lines are not
// exposed, so their order is checked through what it decides: every grant
// of a key goes to the earliest call still in line (FIFO), at the instant
// the model says.

// GrantedAt, LostRace and Ran make the driver the model's Resolver: they
// read what the store did.
func (d *driver) GrantedAt(c *Call, t time.Duration) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	r := d.calls[c.ID]
	return r.granted && r.grantAt == t
}

func (d *driver) LostRace(c *Call) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	r := d.calls[c.ID]
	return r.ended && r.out.Res == Lost
}

func (d *driver) Ran(c *Call) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.calls[c.ID].granted
}

// phaseLocked returns where a real call stands: ended; running fn with its
// lease (Holding) or without (Revoked, its fn's context ended with a Lost
// cause); or in line. It reads the lease's context without building it
// unless that context has ended.
func (d *driver) phaseLocked(c *rcall) Phase {
	switch {
	case c.ended:
		return Done
	case !c.granted:
		return Waiting
	case c.fnCtx.Err() == nil:
		return Holding
	}
	var e *locks.Error
	if errors.As(context.Cause(c.fnCtx), &e) && e.Kind == locks.Lost {
		return Revoked
	}
	// The caller's context ended first; its outcome stands.
	return Unseen
}

// check compares the store with the model, and the store with the
// the store's invariants.
func (d *driver) check() {
	if d.failed {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	var p []string
	if now, want := d.since(), d.model.Now(); now != want {
		p = append(p, fmt.Sprintf("clock at %v, model at %v", now, want))
	}
	mcalls := d.model.Calls()
	phase := make([]Phase, len(d.calls))
	for i, rc := range d.calls {
		p = append(p, rc.problems...)
		rc.problems = nil
		mc := mcalls[i]
		phase[i] = d.phaseLocked(rc)
		if phase[i] != mc.Phase && !(phase[i] == Unseen && (mc.Phase == Holding || mc.Phase == Revoked)) {
			p = append(p, fmt.Sprintf("call %d is %v, model: %v", i, phase[i], mc.Phase))
		}
		if rc.granted != (mc.Fence > 0) {
			p = append(p, fmt.Sprintf("call %d granted=%v, model: %v", i, rc.granted, mc.Fence > 0))
		} else if rc.granted && rc.grantAt != mc.Granted {
			p = append(p, fmt.Sprintf("call %d granted at %v, model: at %v", i, rc.grantAt, mc.Granted))
		}
		if mc.Phase == Done && phase[i] == Done {
			if !mc.Out.Match(rc.out) || rc.endAt != mc.Ended {
				p = append(p, fmt.Sprintf("call %d ended %v at %v (%v), model: %v at %v",
					i, rc.out, rc.endAt, rc.err, mc.Out, mc.Ended))
			}
			if mc.Out.Res == Lost && rc.reason != mc.Reason {
				p = append(p, fmt.Sprintf("call %d lost for %q, model: %q", i, rc.reason, mc.Reason))
			}
		}
		if mc.NestedAsked && (!rc.nestedAsked || rc.nested != mc.Nested) {
			p = append(p, fmt.Sprintf("call %d: inside fn, Hold/TryHold of its key answered %v, model: %v",
				i, rc.nested, mc.Nested))
		}
		if rc.granted {
			p = append(p, d.checkLease(rc, mc)...)
		}
	}
	p = append(p, d.invariantsLocked(phase, mcalls)...)
	p = append(p, d.statsLocked(mcalls)...)
	if len(p) > 0 {
		d.failLocked(strings.Join(p, "\n"))
	}
}

// checkLease checks the lease fn was given: its lock and key, its grant
// instant, and its Deadline (Granted+maxHold, zero without one).
func (d *driver) checkLease(rc *rcall, mc *Call) []string {
	var p []string
	l := rc.lease
	if l.Lock != rc.key.Lock || l.Key != rc.key.Text {
		p = append(p, fmt.Sprintf("call %d: lease of %s/%s, want %v", rc.id, l.Lock, l.Key, rc.key))
	}
	if g := l.Granted.Sub(d.origin); g != rc.grantAt {
		p = append(p, fmt.Sprintf("call %d: lease granted at %v, fn ran at %v", rc.id, g, rc.grantAt))
	}
	switch {
	case mc.MaxHold > 0 && !l.Deadline.Equal(l.Granted.Add(mc.MaxHold)):
		p = append(p, fmt.Sprintf("call %d: lease deadline %v after its grant, want the maxHold %v",
			rc.id, l.Deadline.Sub(l.Granted), mc.MaxHold))
	case mc.MaxHold == 0 && !l.Deadline.IsZero():
		p = append(p, fmt.Sprintf("call %d: lease deadline %v without a maxHold", rc.id, l.Deadline))
	}
	return p
}

// invariantsLocked checks the store's invariants on the store alone.
func (d *driver) invariantsLocked(phase []Phase, mcalls []*Call) []string {
	var p []string
	byKey := map[Key][]*rcall{}
	for _, rc := range d.calls {
		if rc.key.Text != "" {
			byKey[rc.key] = append(byKey[rc.key], rc)
		}
	}
	for k, cs := range byKey {
		var holder *rcall
		var zombies, waiting, granted []*rcall
		unseen := false
		for _, rc := range cs {
			switch phase[rc.id] {
			case Holding:
				if holder != nil {
					p = append(p, fmt.Sprintf("mutual exclusion: calls %d and %d both hold %v", holder.id, rc.id, k))
				}
				holder = rc
			case Revoked:
				zombies = append(zombies, rc)
			case Waiting:
				waiting = append(waiting, rc)
			case Unseen:
				unseen = true // the holder, or a zombie: its end tells
			}
			if rc.granted {
				granted = append(granted, rc)
			}
		}
		for _, z := range zombies {
			if holder != nil && z.lease.Fence >= holder.lease.Fence {
				p = append(p, fmt.Sprintf("revoked call %d (fence %d) still runs beside holder %d with a fence not higher (%d)",
					z.id, z.lease.Fence, holder.id, holder.lease.Fence))
			}
		}
		if len(waiting) > 0 && holder == nil && !unseen {
			p = append(p, fmt.Sprintf("lost grant: call %d waits for %v, which nobody holds", waiting[0].id, k))
		}
		slices.SortFunc(granted, func(a, b *rcall) int { return a.seq - b.seq })
		for i := 1; i < len(granted); i++ {
			a, b := granted[i-1], granted[i]
			if b.lease.Fence <= a.lease.Fence {
				p = append(p, fmt.Sprintf("fences of %v do not increase: call %d got %d after call %d got %d",
					k, b.id, b.lease.Fence, a.id, a.lease.Fence))
			}
			if b.id < a.id {
				p = append(p, fmt.Sprintf("FIFO: call %d was given %v before call %d, which came first", a.id, k, b.id))
			}
			if mcalls[b.id].Fence <= mcalls[a.id].Fence {
				p = append(p, fmt.Sprintf("fence order of %v: call %d after call %d, model: before", k, b.id, a.id))
			}
		}
	}
	return p
}

// statsLocked checks the store's Stats against what the calls saw (see
// seen) and, for what they cannot see, the model: the leases revoked, the
// keys with a holder or a waiter now; and which calls stood in line
// against the model.
func (d *driver) statsLocked(mcalls []*Call) []string {
	var p []string
	want := locks.Stats{Keys: len(d.model.Keys())}
	for i, rc := range d.calls {
		returned := rc.ended && rc.out.Res != Panicked && rc.out.Res != Goexited
		s := seenOf(rc.ctx, returned, rc.err)
		if why := s.count(&want); why != "" {
			p = append(p, fmt.Sprintf("call %d: %s", i, why))
		}
		mc := mcalls[i]
		if s.waited != mc.Waited && !(rc.raced && s.waited) {
			p = append(p, fmt.Sprintf("call %d stood in line: %v, model: %v", i, s.waited, mc.Waited))
		}
		if rc.granted && !rc.ended {
			want.Running++
		}
		switch mc.Reason {
		case "maxHold":
			want.Revoked++
			want.RevokedMaxHold++
		case "closed":
			want.Revoked++
			want.RevokedClosed++
		case "":
		default:
			p = append(p, fmt.Sprintf("call %d lost for %q, a reason the checks do not count", i, mc.Reason))
		}
		if mc.Phase == Waiting {
			want.Waiting++
		}
	}
	if diff := statsDiff(d.store.Stats(), want, true); diff != "" {
		p = append(p, diff)
	}
	return p
}

func (d *driver) fail(format string, args ...any) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.failLocked(fmt.Sprintf(format, args...))
}

func (d *driver) failLocked(msg string) {
	if d.failed {
		return
	}
	d.failed = true
	var b strings.Builder
	fmt.Fprintf(&b, "at %s, clock %v:\n%s\n\nscript:\n%s\ncalls (store | model):\n", d.step, d.since(), msg, d.script)
	for i, mc := range d.model.Calls() {
		rc := d.calls[i]
		fmt.Fprintf(&b, "%3d %-10v granted=%-5v@%-6v fence=%d ended=%v %v@%v | %v granted@%v f%d %v@%v\n",
			i, rc.key, rc.granted, rc.grantAt, rc.lease.Fence, rc.ended, rc.out, rc.endAt,
			mc.Phase, mc.Granted, mc.Fence, mc.Out, mc.Ended)
	}
	d.t.Errorf("%s", b.String())
}

// finish lets everything go and checks that the store ends clean: every
// key free (a TryHold of each gets it), Close idempotent, every call ended.
// The bubble then checks that no goroutine is left.
func (d *driver) finish() {
	if d.failed {
		d.abort()
		return
	}
	d.step = "finish"
	for _, c := range d.model.Calls() {
		if c.Phase == Waiting {
			d.cancel(c.ID)
		}
	}
	for _, c := range d.model.Calls() {
		if c.Phase == Holding || c.Phase == Revoked {
			d.release(c.ID, Return)
		}
	}
	if !d.model.Closed() {
		for _, l := range []uint8{0, 2} {
			for k := uint8(0); k < 3; k++ {
				d.hold(Op{Kind: OpTryHold, Key: k, Lock: l}, -1)
				if c := d.model.Calls(); len(c) > 0 && !d.failed {
					if last := c[len(c)-1]; last.Phase != Holding {
						d.fail("key %v is not free once all is let go", last.Key)
					}
					d.release(len(c)-1, Return)
				}
			}
		}
	}
	d.apply(Op{Kind: OpClose})
	d.apply(Op{Kind: OpClose})
	d.hold(Op{Kind: OpHold, Key: 0, Lock: 0}, -1)
	d.hold(Op{Kind: OpTryHold, Key: 1, Lock: 2}, -1)
	if _, err := locks.OpenLock(d.store, "inv"); !errors.Is(err, locks.ErrClosed) {
		d.fail("OpenLock on a closed store: %v, want closed", err)
	}
	for _, c := range d.model.Calls() {
		if c.Phase != Done {
			d.fail("call %d is %v at the end", c.ID, c.Phase)
		}
	}
	if d.failed {
		d.abort()
	}
}

// abort ends every goroutine of a failed run, so that the bubble can end.
func (d *driver) abort() {
	d.store.Close()
	for _, c := range d.calls {
		c.cancel()
		select {
		case c.cmds <- cmdRelease:
		default:
		}
	}
	synctest.Wait()
}
