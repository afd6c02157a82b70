// Command locksd serves a store's keyed locks over gRPC (package server),
// for clients of other processes (package client).
//
//	locksd                                   # 127.0.0.1:7411, plaintext, no tokens
//	locksd --listen :7411 --tls-cert c.pem --tls-key k.pem --tokens tokens.txt
//
// Flags:
//
//	--listen ADDR        where to serve (default 127.0.0.1:7411); plaintext is
//	                     refused on an address that is not loopback
//	--tokens FILE        let in only these bearer tokens, one a line, each
//	                     optionally followed by lock-name prefixes it is limited to
//	--tls-cert FILE      serve TLS with this certificate (PEM) ...
//	--tls-key FILE       ... and its key
//	--admin ADDR         serve /debug/pprof/ and /metrics (Prometheus: the store's
//	                     figures with histograms of time in line and held, sessions,
//	                     the Go runtime's) on this loopback address
//	--profile-holds N    record the stack of one hold in N, for the
//	                     holdline.locks.holds profile under /debug/pprof/
//	--max-sessions N     sessions kept at once (default 10000)
//	--max-per-session N  grants and waits of one session at once (default 1000)
//	--log-level LEVEL    debug, info, warn or error (default info)
//	--shutdown-timeout D how long calls get to end at shutdown (default 10s)
//
// It logs with log/slog to stderr, serves the gRPC health service, and
// on SIGINT or SIGTERM shuts down gracefully: health answers NOT_SERVING,
// every waiter fails closed, every lease is lost ("its store closed"),
// every client is told, and calls get up to --shutdown-timeout to end.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/holdline/locks"
	"github.com/holdline/locks/metrics"
	"github.com/holdline/locks/server"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stderr, nil); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "locksd:", err)
		os.Exit(1)
	}
}

// run serves until ctx ends, then shuts down. It tells ready, if not
// nil, the addresses it serves on (the gRPC one, then the admin one or
// nil) once it listens.
func run(ctx context.Context, args []string, stderr io.Writer, ready func(grpcAddr, adminAddr net.Addr)) error {
	fs := flag.NewFlagSet("locksd", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:7411", "address to serve gRPC on; plaintext only on loopback")
	tokensFile := fs.String("tokens", "", "file of bearer tokens, one a line: TOKEN [PREFIX,PREFIX...]")
	certFile := fs.String("tls-cert", "", "TLS certificate (PEM)")
	keyFile := fs.String("tls-key", "", "TLS key (PEM)")
	admin := fs.String("admin", "", "loopback address to serve /debug/pprof/ and /metrics on")
	maxSessions := fs.Int("max-sessions", server.DefaultMaxSessions, "sessions kept at once")
	maxPerSession := fs.Int("max-per-session", server.DefaultMaxPerSession, "grants and waits of one session at once")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	shutdownTimeout := fs.Duration("shutdown-timeout", 10*time.Second, "how long calls get to end at shutdown")
	profileHolds := fs.Int("profile-holds", 0, "record the stack of one hold in N in the holdline.locks.holds profile (0: off)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	switch {
	case *maxSessions <= 0:
		return fmt.Errorf("--max-sessions %d: must be positive", *maxSessions)
	case *maxPerSession <= 0:
		return fmt.Errorf("--max-per-session %d: must be positive", *maxPerSession)
	case *profileHolds < 0:
		return fmt.Errorf("--profile-holds %d: must be 0 (off) or positive", *profileHolds)
	case *shutdownTimeout < 0:
		return fmt.Errorf("--shutdown-timeout %v: must not be negative", *shutdownTimeout)
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))

	opts := []server.Option{server.WithLogger(log), server.MaxSessions(*maxSessions), server.MaxPerSession(*maxPerSession)}
	var tlsCfg *tls.Config
	switch {
	case *certFile != "" && *keyFile != "":
		cert, err := tls.LoadX509KeyPair(*certFile, *keyFile)
		if err != nil {
			return fmt.Errorf("--tls-cert, --tls-key: %w", err)
		}
		tlsCfg = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
		opts = append(opts, server.WithTLS(tlsCfg))
	case *certFile != "" || *keyFile != "":
		return errors.New("--tls-cert and --tls-key go together")
	}
	if err := server.CheckListen(*listen, tlsCfg != nil); err != nil {
		return fmt.Errorf("--listen %s: %w", *listen, err)
	}
	if *tokensFile != "" {
		tokens, err := server.LoadTokens(*tokensFile)
		if err != nil {
			return fmt.Errorf("--tokens: %w", err)
		}
		opts = append(opts, server.WithTokens(tokens))
		log.Info("tokens loaded", "count", tokens.Len())
	}
	if *admin != "" {
		// The admin listener has neither TLS nor tokens: loopback only.
		if err := server.CheckListen(*admin, false); err != nil {
			return fmt.Errorf("--admin %s: the admin listener serves loopback only: %w", *admin, err)
		}
	}

	storeOpts := []locks.StoreOption{locks.RecordTimes()}
	if *profileHolds > 0 {
		storeOpts = append(storeOpts, locks.ProfileHolds(*profileHolds))
	}
	store := locks.NewStore(storeOpts...)
	srv, err := server.New(store, opts...)
	if err != nil {
		store.Close()
		return err
	}
	lis, err := net.Listen("tcp", *listen)
	if err != nil {
		store.Close()
		return fmt.Errorf("--listen: %w", err)
	}
	var adminSrv *http.Server
	var adminAddr net.Addr
	if *admin != "" {
		alis, err := net.Listen("tcp", *admin)
		if err == nil && !alis.Addr().(*net.TCPAddr).IP.IsLoopback() { // "localhost" the resolver made another address
			alis.Close()
			err = fmt.Errorf("%v is not loopback: the admin listener serves loopback only", alis.Addr())
		}
		if err != nil {
			lis.Close()
			store.Close()
			return fmt.Errorf("--admin: %w", err)
		}
		adminAddr = alis.Addr()
		adminSrv = &http.Server{Handler: adminMux(srv, store), ReadHeaderTimeout: 10 * time.Second}
		go func() {
			if err := adminSrv.Serve(alis); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error("admin", "err", err)
			}
		}()
		log.Info("admin serving", "addr", adminAddr.String())
	}
	if ready != nil {
		ready(lis.Addr(), adminAddr)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()

	var serveErr error
	select {
	case <-ctx.Done():
		log.Info("shutting down", "cause", context.Cause(ctx))
	case serveErr = <-served:
		log.Error("serving failed", "err", serveErr)
	}
	sctx, cancel := context.WithTimeout(context.Background(), *shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		log.Warn("calls cut at the shutdown timeout", "err", err)
	}
	if adminSrv != nil {
		adminSrv.Shutdown(sctx)
	}
	if serveErr == nil {
		serveErr = <-served
	}
	return serveErr
}

// adminMux serves pprof's pages and the figures of the server and its
// store, with the Go runtime's and the process's, in Prometheus's format.
func adminMux(srv *server.Server, store *locks.Store) *http.ServeMux {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		metrics.NewCollector(store),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "locksd_sessions", Help: "Open sessions, with a stream or waiting to be resumed."},
			func() float64 { return float64(srv.Stats().Sessions) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "locksd_streams", Help: "Sessions with a stream."},
			func() float64 { return float64(srv.Stats().Streams) }),
	)
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	return mux
}
