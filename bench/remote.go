package main

import (
	"context"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/holdline/locks"
	"github.com/holdline/locks/client"
	"github.com/holdline/locks/server"
)

// The remote scenario: a hold's round trips through a locksd server on
// loopback, beside the same holds of a lock of this process. The server
// (package server over a fresh store, on 127.0.0.1:0, plaintext, no
// tokens) and its client (package client) both run in the bench's
// process, made and shut down with each instance of the locksd peer.
// Figures only: the project sets no target for a remote hold.

const (
	// remoteWarm is how many holds each worker makes, untimed, before a
	// load of the remote scenario is timed: the connection's first
	// streams, the server's first sessions' entries.
	remoteWarm = 32
	// remoteHotPerP is how many workers per P hold the hot key, as in the
	// hotkey scenario.
	remoteHotPerP = 8
)

func remoteScenario() Scenario {
	return Scenario{
		Name:  "remote",
		Title: "hold round trips through a loopback locksd against the same holds of an in-process store: distinct keys, then one hot key",
		Columns: []Column{
			{"us/op", "µs/op", "%.3f"},
			{"B/op", "B/op", "%.0f"},
			{"allocs/op", "allocs/op", "%.1f"},
			{"hot-us/op", "hot key µs/op", "%.3f"},
		},
		Notes: []string{
			"figures only: the project sets no target for a remote hold; ×locks is the row's µs/op over locks' in the same run.",
			"locksd: server.New over a fresh store on 127.0.0.1:0 in this process (plaintext, no tokens), held through one client.Dial",
			"session: a hold is two gRPC calls (Acquire, Release), a loopback round trip each. Server and client are shut down after",
			"each repetition; B/op and allocs/op are theirs together (one process).",
			"µs/op: wall-clock time per hold, all workers together (as b.RunParallel reports); GOMAXPROCS goroutines on distinct keys,",
			"each walking its own invoice ids; hot key: 8 goroutines a P on one key (every 32nd holder yields, as in scenario hotkey);",
			"each worker makes 32 holds untimed first, then runs for -benchtime.",
			"etcd's figure is in etcd/'s own benchmark (etcd/bench_test.go, BenchmarkHold: cd etcd && go test -run '^$' -bench Hold):",
			"the etcd module is separate, so that the core's users never download etcd.",
		},
		Peers: []Peer{
			{Name: "locks", Class: Correct, FIFO: true, About: "this library, in-process: a *locks.Lock", New: newLocksPeer},
			{Name: "locksd", Class: Correct, FIFO: true, About: "a *client.Lock through a loopback locksd (package server) in this process", New: newLocksdPeer},
		},
		Once:   remote,
		Versus: "locks",
	}
}

// remote runs one repetition of the remote scenario for p: on one fresh
// instance, the distinct keys of the uncontended scenario by GOMAXPROCS
// workers, then the hot key by remoteHotPerP workers a P.
func remote(env *Env, p Peer) Sample {
	l := p.New()
	defer l.Close()
	procs := runtime.GOMAXPROCS(0)
	s := timedLoad(walk(env, l, 0), procs, env.BenchTime)
	hot := timedLoad(hotKey(env, l, false), procs*remoteHotPerP, env.BenchTime)
	s["hot-us/op"] = hot["us/op"]
	for _, k := range []string{"lost-updates", "timeouts"} {
		if v, has := hot[k]; has {
			s[k] = v
		}
	}
	return s
}

// timedLoad runs load's operation on workers goroutines, remoteWarm times
// each untimed, then all together until d has passed, and returns µs per
// operation (wall-clock time over all workers, as b.RunParallel reports),
// bytes and allocations per operation (the whole process's), and the
// load's checks.
func timedLoad(load Load, workers int, d time.Duration) Sample {
	ops := make([]func(), workers)
	for w := range ops {
		ops[w] = load.Op(w)
	}
	var wg sync.WaitGroup
	for _, op := range ops {
		wg.Go(func() {
			for range remoteWarm {
				op()
			}
		})
	}
	wg.Wait()

	runtime.GC() // the warm-up's garbage, and the last peer's, is no one's
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	var stop atomic.Bool
	var n atomic.Int64
	start := time.Now()
	for _, op := range ops {
		wg.Go(func() {
			i := int64(0)
			for !stop.Load() {
				op()
				if i++; i%checkEvery == 0 && time.Since(start) >= d {
					stop.Store(true)
				}
			}
			n.Add(i)
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	runtime.ReadMemStats(&after)

	ops64 := float64(n.Load())
	s := Sample{
		"us/op":     float64(elapsed.Nanoseconds()) / 1e3 / ops64,
		"B/op":      float64(after.TotalAlloc-before.TotalAlloc) / ops64,
		"allocs/op": float64(after.Mallocs-before.Mallocs) / ops64,
	}
	if load.Check != nil {
		for k, v := range load.Check(n.Load() + int64(workers*remoteWarm)) {
			s[k] = v
		}
	}
	return s
}

// locksdPeer holds keys through a locksd server of this process on
// loopback: a server.Server over its own store, and one client session.
type locksdPeer struct {
	srv    *server.Server
	served chan error // Serve's result
	client *client.Client
	lock   *client.Lock
}

func newLocksdPeer() Locker {
	srv, err := server.New(locks.NewStore())
	if err != nil {
		panic("bench: server.New: " + err.Error())
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic("bench: listen on loopback: " + err.Error())
	}
	p := &locksdPeer{srv: srv, served: make(chan error, 1)}
	go func() { p.served <- srv.Serve(lis) }()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if p.client, err = client.Dial(ctx, lis.Addr().String()); err != nil {
		p.shutdown()
		panic("bench: client.Dial: " + err.Error())
	}
	if p.lock, err = p.client.OpenLock("invoices"); err != nil {
		p.Close()
		panic("bench: OpenLock: " + err.Error())
	}
	return p
}

func (p *locksdPeer) Hold(key string, fn func()) {
	err := p.lock.Hold(context.Background(), key, func(context.Context, *locks.Lease) error { fn(); return nil })
	mustHold(err)
}

func (p *locksdPeer) HoldMax(key string, maxHold time.Duration, fn func()) {
	err := p.lock.Hold(context.Background(), key, func(context.Context, *locks.Lease) error { fn(); return nil }, locks.MaxHold(maxHold))
	mustHold(err)
}

// Close closes the client's session, then shuts the server down (which
// closes its store) and waits for Serve to return, so that neither leaves
// a goroutine behind. A failure panics: a bench that leaks servers from
// one repetition to the next measures the leak.
func (p *locksdPeer) Close() {
	err := p.client.Close()
	if serr := p.shutdown(); err == nil {
		err = serr
	}
	if err != nil {
		panic("bench: closing locksd: " + err.Error())
	}
}

// shutdown shuts the server down and returns its error, or Serve's.
func (p *locksdPeer) shutdown() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := p.srv.Shutdown(ctx)
	if serr := <-p.served; err == nil {
		err = serr
	}
	return err
}
