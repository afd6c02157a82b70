// Package servertest serves a store of this process on a loopback port,
// for the tests of package server and of the Lockers that talk to it. It
// is for tests only.
package servertest

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/holdline/locks"
	"github.com/holdline/locks/server"
)

// Served is a store served on a loopback port.
type Served struct {
	// Store is the store served: a test reads its Stats to see what the
	// server did.
	Store *locks.Store
	// Server serves it.
	Server *server.Server
	// Addr is where it listens, host:port.
	Addr string
}

// Serve serves a new store on 127.0.0.1:0 until the test ends, then shuts
// the server down, failing the test if that or Serve fails.
func Serve(t testing.TB, opts ...server.Option) *Served {
	t.Helper()
	store := locks.NewStore()
	srv, err := server.New(store, opts...)
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(lis) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return &Served{Store: store, Server: srv, Addr: lis.Addr().String()}
}
