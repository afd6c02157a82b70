package main

import (
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestRemote runs the remote scenario briefly for both peers and checks
// that each has its figures, that no hold of the hot key was lost, and
// that the locksd peer's server and client leave no goroutine behind.
func TestRemote(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	sc, ok := scenarioNamed("remote")
	if !ok {
		t.Fatal("no scenario remote")
	}
	if got := names(sc.Peers); got != "locks, locksd" {
		t.Fatalf("remote's peers are %s, want locks, locksd", got)
	}
	env := NewEnv(1000, 10, 10)
	env.BenchTime = 20 * time.Millisecond
	for _, p := range sc.Peers {
		s := sc.Once(env, p)
		for _, k := range []string{"us/op", "hot-us/op", "B/op", "allocs/op"} {
			if v, has := s[k]; !has || v <= 0 {
				t.Errorf("%s: %s = %v, %v; want a positive figure", p.Name, k, v, has)
			}
		}
		if failed(s) {
			t.Errorf("%s: a broken run: %v", p.Name, s)
		}
	}
}

// TestRemoteTable checks that the remote table compares locksd with
// locks, in every column, with ratios past 1,000 written out, and names
// no best peer.
func TestRemoteTable(t *testing.T) {
	sc, _ := scenarioNamed("remote")
	r := NewResults(Meta{CPUs: []int{2}})
	r.Add("remote", "locks", 2, Sample{"us/op": 0.1, "B/op": 100, "allocs/op": 1, "hot-us/op": 0.2})
	r.Add("remote", "locksd", 2, Sample{"us/op": 127, "B/op": 9000, "allocs/op": 120, "hot-us/op": 80})
	var b strings.Builder
	if vs := r.Table(&b, sc); len(vs) != 0 {
		t.Errorf("remote has targets: %v", vs)
	}
	out := b.String()
	for _, want := range []string{
		"×locks",
		"cpu=2: locksd is 1270× locks in µs/op, 90× in B/op, 120× in allocs/op, 400× in hot key µs/op",
		"etcd/bench_test.go",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the table lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "best") {
		t.Errorf("the table names a best peer:\n%s", out)
	}
}
