package main

import (
	"slices"
	"testing"
	"unsafe"
)

// TestCursorHasABlockOfItsOwn checks that a worker's cursor fills a
// 128-byte block, starts one, and counts and wraps as walk needs.
func TestCursorHasABlockOfItsOwn(t *testing.T) {
	if size := unsafe.Sizeof(cursor{}); size != 128 {
		t.Fatalf("a cursor is %d bytes, want 128", size)
	}
	for range 4 {
		c := new(cursor)
		cursorSink = append(cursorSink, c) // on the heap, as walk's
		if addr := uintptr(unsafe.Pointer(c)); addr%128 != 0 {
			t.Fatalf("a cursor at %#x does not start a 128-byte block", addr)
		}
	}
	c := new(cursor)
	var got []int
	for range 4 {
		got = append(got, c.next(3))
		c.count()
	}
	if want := []int{1, 2, 0, 1}; !slices.Equal(got, want) || c.n != 4 {
		t.Errorf("next(3) gave %v and count %d, want %v and 4", got, c.n, want)
	}
}

var cursorSink []*cursor

// TestEveryHotKeyDeadlinePeerHolds runs one operation of hotkey-deadline's
// load for each of its peers: each bounds its wait (a Waiter, or a wait
// floor whose Hold does), and none loses an update or times out.
func TestEveryHotKeyDeadlinePeerHolds(t *testing.T) {
	var sc Scenario
	for _, s := range Scenarios() {
		if s.Name == "hotkey-deadline" {
			sc = s
		}
	}
	env := &Env{Keys: invoiceIDs(1)}
	for _, p := range sc.Peers {
		l := p.New()
		load := sc.Load(env, l)
		load.Op(0)()
		if s := load.Check(1); len(s) != 0 {
			t.Errorf("%s: one hold reported %v", p.Name, s)
		}
		l.Close()
	}
	// A peer that cannot bound a wait is refused, not run unbounded.
	defer func() {
		if recover() == nil {
			t.Error("hotkey-deadline's load ran a peer that cannot bound a wait")
		}
	}()
	sc.Load(env, newContractFloor(recordDeadline)).Op(0)
}

// TestKeyList: a list's keys are the format's, in order, of one width, and
// its slices hold the same keys.
func TestKeyList(t *testing.T) {
	k := invoiceIDs(1000)
	if k.Len() != 1000 || k.At(0) != "invoice-000000" || k.At(999) != "invoice-000999" {
		t.Fatalf("invoiceIDs(1000): %d keys, first %q, last %q", k.Len(), k.At(0), k.At(999))
	}
	s := k.Slice(10, 20)
	if s.Len() != 10 || s.At(0) != "invoice-000010" || s.At(9) != "invoice-000019" {
		t.Errorf("Slice(10, 20): %d keys, first %q, last %q", s.Len(), s.At(0), s.At(9))
	}
	if (KeyList{}).Len() != 0 {
		t.Error("the zero KeyList is not empty")
	}
	if testing.AllocsPerRun(100, func() { _ = k.At(500) }) != 0 {
		t.Error("At allocates")
	}
}
