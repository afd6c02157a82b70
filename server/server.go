// Package server serves the sessions of a *locks.Store over gRPC
// (holdline.locks.v1, see package locksv1), so that a client of another
// process (package client) holds keys of the store as a *locks.Lock of
// this process does: in the same FIFO lines, with the same fences, waits,
// limits and errors.
//
// A client is one session of the store (locks.Session). It opens the
// session on a bidirectional stream and renews it there with keepalives;
// the server pushes the loss of any of its leases on that stream at once.
// Acquire and Release are unary calls naming the session: an Acquire
// waits in line as locks.Lock.Acquire does, and its caller going away (its
// context ending, its connection dropping) takes it out of the line. A
// stream broken without a Close leaves the session until its ttl: every
// lease and wait of it lapses at its lock's ttl unrenewed, and a client
// that opens a stream again in time resumes the session with what it
// still holds. A Close releases everything at once.
//
// Nobody holds without being let in: with WithTokens, a call without a
// known bearer token is refused Unauthenticated and holds or queues
// nothing, and a token limited to lock-name prefixes is refused
// PermissionDenied outside them. Serve refuses plaintext on an address
// that is not loopback unless WithTLS is given. Each session holds and
// waits for at most MaxPerSession keys, and the server keeps at most
// MaxSessions sessions. A bad request fails InvalidArgument (the Invalid
// *locks.Error in its details) and changes nothing.
package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/holdline/locks"
	pb "github.com/holdline/locks/proto/locksv1"
)

// Defaults and limits.
const (
	// DefaultMaxSessions is the most sessions a server keeps open (with a
	// stream or waiting for one to resume them) unless MaxSessions says
	// otherwise; the next Open fails ResourceExhausted.
	DefaultMaxSessions = 10000
	// DefaultMaxPerSession is the most grants and waits one session has
	// at once unless MaxPerSession says otherwise; the next Acquire
	// fails Limit (ResourceExhausted).
	DefaultMaxPerSession = 1000
	// MaxMessageSize is the largest request a server reads, in bytes: a
	// key is at most locks.MaxKeyLen bytes, so no good request comes near.
	MaxMessageSize = 64 << 10
	// OpenWait is how long a session stream may go without its Open
	// before the server ends it (DeadlineExceeded).
	OpenWait = 10 * time.Second
)

// ErrPlaintext is what Serve returns for a listener on an address that is
// not loopback when the server has no TLS: a bearer token, and every key,
// would cross the network in clear.
var ErrPlaintext = errors.New("server: plaintext is refused on an address that is not loopback; configure TLS")

// Option is a setting of a Server, given to New.
type Option func(*config)

type config struct {
	tokens        *Tokens
	tls           *tls.Config
	log           *slog.Logger
	maxSessions   int
	maxPerSession int
}

// WithTokens lets in only calls that carry one of tokens as a bearer
// token ("authorization: Bearer TOKEN"); a token limited to lock-name
// prefixes holds keys of those locks only. Without it every call is let
// in. The health service is let in without a token.
func WithTokens(tokens *Tokens) Option { return func(c *config) { c.tokens = tokens } }

// WithTLS serves TLS with cfg (which must hold a certificate) instead of
// plaintext.
func WithTLS(cfg *tls.Config) Option { return func(c *config) { c.tls = cfg } }

// WithLogger logs sessions opened, resumed, expired and closed, and
// refused calls, to l. The default discards them.
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.log = l } }

// MaxSessions sets the most sessions the server keeps at once (default
// DefaultMaxSessions); n must be positive.
func MaxSessions(n int) Option { return func(c *config) { c.maxSessions = n } }

// MaxPerSession sets the most grants and waits a session has at once
// (default DefaultMaxPerSession); n must be positive.
func MaxPerSession(n int) Option { return func(c *config) { c.maxPerSession = n } }

// Server is the gRPC service of one store's sessions, with the gRPC
// health service beside it. Make one with New, run it with Serve, stop it
// with Shutdown. Safe for concurrent use.
type Server struct {
	store  *locks.Store
	cfg    config
	log    *slog.Logger
	grpc   *grpc.Server
	health *health.Server

	mu       sync.Mutex
	sessions map[string]*session // by id
	closing  bool
	stopping chan struct{} // closed when Shutdown begins

	recv     sync.WaitGroup // the receiving goroutines of session streams; added to under mu while !closing
	shutOnce sync.Once
	shutErr  error
}

// New returns a server of store's sessions. It fails for a nil store and
// for a non-positive limit. The server owns no goroutine until Serve.
func New(store *locks.Store, opts ...Option) (*Server, error) {
	if store == nil {
		return nil, errors.New("server: the store is nil")
	}
	c := config{maxSessions: DefaultMaxSessions, maxPerSession: DefaultMaxPerSession}
	for _, o := range opts {
		o(&c)
	}
	if c.maxSessions <= 0 || c.maxPerSession <= 0 {
		return nil, fmt.Errorf("server: limits must be positive (sessions %d, per session %d)", c.maxSessions, c.maxPerSession)
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	s := &Server{store: store, cfg: c, log: c.log, sessions: make(map[string]*session), stopping: make(chan struct{})}
	gopts := []grpc.ServerOption{
		grpc.MaxRecvMsgSize(MaxMessageSize),
		grpc.ChainUnaryInterceptor(s.authUnary),
		grpc.ChainStreamInterceptor(s.authStream),
		// Clients ping every 10 s at most (the least gRPC lets them), so
		// that a connection that went silent is found out and replaced.
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 5 * time.Second, PermitWithoutStream: true}),
		// Find out a client that vanished with its stream attached, so
		// that its session is left to lapse and be reaped.
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: 15 * time.Second, Timeout: 5 * time.Second}),
	}
	if c.tls != nil {
		gopts = append(gopts, grpc.Creds(credentials.NewTLS(c.tls)))
	}
	s.grpc = grpc.NewServer(gopts...)
	pb.RegisterLocksServer(s.grpc, &service{s: s})
	s.health = health.NewServer()
	healthpb.RegisterHealthServer(s.grpc, s.health)
	s.health.SetServingStatus(pb.Locks_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	return s, nil
}

// Serve accepts connections on lis until Shutdown, and returns nil then
// (at once, lis closed, when Shutdown came first), or the error that
// stopped it. It refuses (ErrPlaintext) a TCP listener
// on an address that is not loopback when the server has no TLS.
func (s *Server) Serve(lis net.Listener) error {
	if s.cfg.tls == nil {
		if a, ok := lis.Addr().(*net.TCPAddr); ok && !a.IP.IsLoopback() {
			return ErrPlaintext
		}
	}
	s.log.Info("serving", "addr", lis.Addr().String(), "tls", s.cfg.tls != nil, "tokens", s.cfg.tokens != nil)
	if err := s.grpc.Serve(lis); !errors.Is(err, grpc.ErrServerStopped) { // stopped before it served: lis is closed
		return err
	}
	return nil
}

// CheckListen returns ErrPlaintext when a listen address (host:port) is
// not a loopback one and tls is false: a daemon checks it before it
// listens. A host name other than localhost counts as not loopback.
func CheckListen(addr string, tls bool) error {
	if tls {
		return nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return ErrPlaintext
}

// Stats are a server's figures: its store's and its sessions'.
type Stats struct {
	locks.Stats
	Sessions int // open, with a stream or waiting to be resumed
	Streams  int // sessions with a stream now
}

// Stats returns the server's figures. Cost: O(sessions) and the store's
// Stats. Safe for concurrent use.
func (s *Server) Stats() Stats {
	st := Stats{Stats: s.store.Stats()}
	s.mu.Lock()
	list := make([]*session, 0, len(s.sessions))
	for _, sess := range s.sessions {
		list = append(list, sess)
	}
	s.mu.Unlock()
	st.Sessions = len(list)
	for _, sess := range list {
		sess.mu.Lock()
		if sess.att != nil {
			st.Streams++
		}
		sess.mu.Unlock()
	}
	return st
}

// Shutdown stops the server: health answers NOT_SERVING, the store is
// closed (every waiter fails Closed, every lease is lost with reason "its
// store closed"), every session's stream is told so (each loss, then
// Closed) and ended, and the server waits for its calls to end, or for
// ctx: then it cuts them and returns ctx's error. Later calls return the
// first's result. Safe for concurrent use.
func (s *Server) Shutdown(ctx context.Context) error {
	s.shutOnce.Do(func() {
		s.mu.Lock()
		s.closing = true
		close(s.stopping)
		list := make([]*session, 0, len(s.sessions))
		for _, sess := range s.sessions {
			list = append(list, sess)
		}
		clear(s.sessions) // each is told below, and ends with the store
		s.mu.Unlock()
		s.health.Shutdown()
		s.store.Close()
		closed := &locks.Error{Kind: locks.Closed, Reason: "the store is closed"}
		for _, sess := range list {
			sess.shutdown(closed)
		}
		done := make(chan struct{})
		go func() { s.grpc.GracefulStop(); close(done) }()
		select {
		case <-done:
		case <-ctx.Done():
			s.grpc.Stop()
			<-done
			s.shutErr = ctx.Err()
		}
		s.recv.Wait()
		s.log.Info("stopped", "sessions", len(list))
	})
	return s.shutErr
}

// principalKey is the context key of the token a call was let in with.
type principalKey struct{}

// principal returns the token ctx's call was let in with; nil when the
// server has no tokens.
func principal(ctx context.Context) *token {
	tk, _ := ctx.Value(principalKey{}).(*token)
	return tk
}

func (s *Server) authUnary(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	ctx, err := s.auth(ctx, info.FullMethod)
	if err != nil {
		return nil, err
	}
	return h(ctx, req)
}

func (s *Server) authStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	ctx, err := s.auth(ss.Context(), info.FullMethod)
	if err != nil {
		return err
	}
	return h(srv, &authedStream{ss, ctx})
}

type authedStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (a *authedStream) Context() context.Context { return a.ctx }

// auth lets a call in, returning its context with its token, or refuses
// it Unauthenticated. The health service needs no token.
func (s *Server) auth(ctx context.Context, method string) (context.Context, error) {
	if s.cfg.tokens == nil || strings.HasPrefix(method, "/grpc.health.v1.Health/") {
		return ctx, nil
	}
	md, _ := metadata.FromIncomingContext(ctx)
	var tk *token
	for _, v := range md.Get("authorization") {
		if t := s.cfg.tokens.lookup(bearer(v)); t != nil {
			tk = t
			break
		}
	}
	if tk == nil {
		s.log.Warn("refused: no known token", "method", method, "peer", peerAddr(ctx))
		return nil, status.Error(codes.Unauthenticated, "a known bearer token is required")
	}
	return context.WithValue(ctx, principalKey{}, tk), nil
}

// statusOf returns the status error of a failed call: a *locks.Error's
// with its fields in the details, Internal otherwise.
func statusOf(err error) error {
	var le *locks.Error
	if errors.As(err, &le) {
		return pb.Status(pb.Code(le.Kind), le).Err()
	}
	return status.Error(codes.Internal, err.Error())
}

// invalid is the status of a bad request.
func invalid(lock string, key []byte, why string) error {
	return statusOf(&locks.Error{Kind: locks.Invalid, Lock: lock, Key: string(key), Reason: why})
}
