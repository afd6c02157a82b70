// Package client holds keys of a store in another process, through its
// server (package server, the locksd daemon): a *client.Lock is a
// locks.Locker, so code written against Locker (Hold, TryHold,
// locks.HoldValue) runs unchanged against a server. HoldAll, sessions and
// Store.Holders are the in-process store's.
//
//	c, err := client.Dial(ctx, "127.0.0.1:7411", client.WithToken(token))
//	if err != nil {
//		return err
//	}
//	defer c.Close()
//	invoices, err := c.OpenLock("invoices", locks.TTL(15*time.Second))
//	...
//	err = invoices.Hold(ctx, invoice.ID, func(ctx context.Context, lease *locks.Lease) error {
//		return charge(ctx, invoice, lease.Fence) // ctx ends when the lease is lost
//	})
//
// One Client is one session of the server's store. It renews the session
// in the background with keepalives, at a third of the shortest ttl of its
// locks, or of locks.DefaultTTL if that is shorter. A function holding a
// key runs under a context that ends when the lease is lost: at once when
// the server says so (its maxHold, the store closing); at its maxHold on
// the client's own clock, if no word came, counted from when it sent the
// Acquire plus the wait the server reports (no later than the server's
// revocation, earlier by the request's time in transit); and, when the
// client could not renew the session in time, before the server could
// give the key to anyone else: at the lease's ttl after the last renewal
// the server answered, less a margin (a fifth of the ttl, at most 2 s),
// on the client's own clock. A broken connection is opened again and the session
// resumed with what it still holds; a session that expired meanwhile is
// replaced by a new one, and what the old one held is lost.
//
// Errors are the *locks.Error values a *locks.Lock returns, with the same
// kinds and messages: errors.Is(err, locks.ErrInUse) works, and a lost
// lease wraps the function's error. A call the server refused for want of
// a token (Unauthenticated), outside the token's prefixes
// (PermissionDenied), or that failed in the transport returns an error
// naming the lock and the key that wraps the gRPC status (status.Code
// reads it).
package client

import (
	"context"
	"crypto/tls"
	"strconv"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/holdline/locks"
	"github.com/holdline/locks/internal/remote"
	pb "github.com/holdline/locks/proto/locksv1"
)

// Option is a setting of a Client, given to Dial.
type Option func(*config)

type config struct {
	token string
	tls   *tls.Config
	dial  []grpc.DialOption
}

// WithToken sends token as the bearer token of every call, for a server
// that lets in only known tokens.
func WithToken(token string) Option { return func(c *config) { c.token = token } }

// WithTLS speaks TLS with cfg to the server instead of plaintext (which a
// server refuses on anything but a loopback address).
func WithTLS(cfg *tls.Config) Option { return func(c *config) { c.tls = cfg } }

// WithDialOptions adds gRPC dial options (a custom dialer, say) after the
// client's own.
func WithDialOptions(opts ...grpc.DialOption) Option {
	return func(c *config) { c.dial = append(c.dial, opts...) }
}

// closeWait bounds how long Close waits for the server to confirm that
// the session is closed.
const closeWait = 5 * time.Second

// Client is one session of a server's store: every Lock it opens holds
// keys for that session. Make one with Dial and Close it when done. Safe
// for concurrent use.
type Client struct {
	conn *grpc.ClientConn
	rpc  pb.LocksClient
	md   metadata.MD

	bg       context.Context // for calls of the client's own: cancelled at the end of Close
	bgCancel context.CancelFunc

	mu       sync.Mutex
	sess     sessionRef
	minTTL   time.Duration // the shortest of its locks' ttls and DefaultTTL
	renewed  time.Time     // when the last renewal the server answered was sent
	entries  map[uint64]*entry
	nextID   uint64
	releases map[uint64]uint64 // releases to send again on a new stream: id → session generation
	closed   bool

	kick     chan struct{} // the keepalive interval changed
	closeReq chan struct{} // closed by Close
	done     chan struct{} // closed when the session's goroutine has ended
	bgWG     sync.WaitGroup
}

// sessionRef names the client's session on the server; gen counts the
// sessions the client has had.
type sessionRef struct {
	id, secret []byte
	gen        uint64
}

// Dial connects to the server at target (host:port, or any gRPC target)
// and opens the client's session, waiting for the server's answer until
// ctx ends. It fails with the gRPC status of a refused session
// (Unauthenticated without a known token, ResourceExhausted at the
// server's limit of sessions, Unavailable when nothing answers), or
// with ctx's error when ctx ends first. Until Close the client owns two
// goroutines of its own (its session's keepalives, and their answers)
// besides its gRPC connection's.
func Dial(ctx context.Context, target string, opts ...Option) (*Client, error) {
	var cfg config
	for _, o := range opts {
		o(&cfg)
	}
	creds := insecure.NewCredentials()
	if cfg.tls != nil {
		creds = credentials.NewTLS(cfg.tls)
	}
	dopts := []grpc.DialOption{
		grpc.WithTransportCredentials(creds),
		// Reconnect fast: a session lives only a ttl without renewal.
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 20 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second},
			MinConnectTimeout: time.Second,
		}),
		// Find out a connection that went silent (the least gRPC allows).
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 10 * time.Second, Timeout: 5 * time.Second, PermitWithoutStream: true}),
	}
	conn, err := grpc.NewClient(target, append(dopts, cfg.dial...)...)
	if err != nil {
		return nil, err
	}
	c := &Client{
		conn:     conn,
		rpc:      pb.NewLocksClient(conn),
		md:       metadata.MD{},
		minTTL:   locks.DefaultTTL,
		entries:  make(map[uint64]*entry),
		releases: make(map[uint64]uint64),
		kick:     make(chan struct{}, 1),
		closeReq: make(chan struct{}),
		done:     make(chan struct{}),
	}
	if cfg.token != "" {
		c.md.Set("authorization", "Bearer "+cfg.token)
	}
	c.bg, c.bgCancel = context.WithCancel(context.Background())
	st, opened, sent, err := c.open(ctx, sessionRef{})
	if err != nil {
		c.bgCancel()
		conn.Close()
		return nil, err
	}
	c.sess = sessionRef{id: opened.GetSessionId(), secret: opened.GetSecret(), gen: 1}
	c.renewed = sent
	go c.loop(st)
	return c, nil
}

// Close closes the session: the server releases its grants and takes its
// waits out of their lines at once. Every function still running under
// one of its leases sees its context end (the lease is lost, "its
// session closed"), and every Hold still waiting fails Closed. It waits
// for the server's answer (5 s at most; without it, the session lapses at
// its ttl), and for the client's goroutines to end. Later calls of the
// client fail Closed. Idempotent; it returns nil, or the error of closing
// the connection.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		<-c.done
		return nil
	}
	c.closed = true
	lost := &locks.Error{Kind: locks.Lost, Reason: "the lease was lost: its session closed"}
	closed := &locks.Error{Kind: locks.Closed, Reason: "the client is closed"}
	for _, e := range c.entries {
		c.endLocked(e, lost, closed)
	}
	c.mu.Unlock()
	close(c.closeReq)
	<-c.done
	c.bgCancel()
	c.bgWG.Wait()
	return c.conn.Close()
}

// outgoing returns ctx carrying the client's token, and no other
// outgoing metadata of the caller's.
func (c *Client) outgoing(ctx context.Context) context.Context {
	return metadata.NewOutgoingContext(ctx, c.md)
}

// interval is how often the session is renewed: a third of the shortest
// ttl, so that two keepalives may go unanswered before a lease is in
// danger.
func (c *Client) interval() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return max(c.minTTL/3, time.Millisecond)
}

// margin is how long before the server's lapse of a lease the client
// cancels its function: a fifth of the ttl, at most 2 s. The client
// counts from when it sent the renewal the server answered, which is
// before the server renewed, so only the two clocks' rates differ.
func margin(ttl time.Duration) time.Duration { return min(ttl/5, 2*time.Second) }

// stream is one session stream, with the goroutine that receives on it.
type stream struct {
	s      pb.Locks_SessionClient
	cancel context.CancelFunc
	events chan *pb.SessionEvent // closed when receiving fails
	gone   chan struct{}         // closed when the receiver has ended
}

// open opens a session stream: a new session, or ref's resumed. It
// returns the stream, the server's Opened, and when the Open was sent
// (the renewal the Opened answers).
func (c *Client) open(ctx context.Context, ref sessionRef) (*stream, *pb.Opened, time.Time, error) {
	sctx, cancel := context.WithCancel(c.bg)
	stop := context.AfterFunc(ctx, cancel) // bounds the opening by ctx
	defer stop()
	s, err := c.rpc.Session(c.outgoing(sctx))
	if err != nil {
		cancel()
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return nil, nil, time.Time{}, err
	}
	c.mu.Lock()
	ttl := c.minTTL
	c.mu.Unlock()
	sent := time.Now()
	if err := s.Send(&pb.SessionRequest{Msg: &pb.SessionRequest_Open{Open: &pb.Open{
		SessionId: ref.id, Secret: ref.secret, TtlNs: int64(ttl)}}}); err != nil {
		_, err = s.Recv() // the status the stream ended with
		cancel()
		return nil, nil, time.Time{}, err
	}
	ev, err := s.Recv()
	if err != nil {
		cancel()
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return nil, nil, time.Time{}, err
	}
	opened := ev.GetOpened()
	if opened == nil {
		cancel()
		return nil, nil, time.Time{}, status.Error(codes.Internal, "the server answered an Open with something else")
	}
	st := &stream{s: s, cancel: cancel, events: make(chan *pb.SessionEvent), gone: make(chan struct{})}
	go st.receive(sctx)
	return st, opened, sent, nil
}

func (st *stream) receive(ctx context.Context) {
	defer close(st.gone)
	defer close(st.events)
	for {
		ev, err := st.s.Recv()
		if err != nil {
			return
		}
		select {
		case st.events <- ev:
		case <-ctx.Done():
			return
		}
	}
}

// end stops the stream and waits for its receiver.
func (st *stream) end() {
	st.cancel()
	<-st.gone
}

// How a stream ended.
type ending uint8

const (
	broken   ending = iota // the connection or the stream failed: resume the session
	finished               // the session was closed by Close
	ended                  // the server ended the session: open a new one
)

// loop serves the session until Close: it drives each stream, and opens
// the next when one breaks.
func (c *Client) loop(st *stream) {
	defer close(c.done)
	for {
		how := c.drive(st)
		st.end()
		if how == finished {
			return
		}
		if st = c.reopen(); st == nil {
			return
		}
	}
}

// drive sends keepalives on st and handles what the server sends, until
// the stream ends.
func (c *Client) drive(st *stream) ending {
	tick := time.NewTicker(c.interval())
	defer tick.Stop()
	closeReq := c.closeReq
	var closeBy <-chan time.Time
	var seq uint64
	sent := make(map[uint64]time.Time)
	for {
		select {
		case ev, ok := <-st.events:
			if !ok {
				if closeBy != nil {
					return finished // the server ended the stream as it closed the session
				}
				return broken
			}
			switch ev := ev.GetEvent().(type) {
			case *pb.SessionEvent_KeepaliveAck:
				n := ev.KeepaliveAck.GetSeq()
				if at, ok := sent[n]; ok {
					c.renewedAt(at)
				}
				for k := range sent {
					if k <= n {
						delete(sent, k)
					}
				}
			case *pb.SessionEvent_Lost:
				c.lostPushed(ev.Lost.GetAcquireId(), ev.Lost.GetError().LocksError())
			case *pb.SessionEvent_Closed:
				if w := ev.Closed.GetError(); w != nil && closeBy == nil {
					c.sessionEnded(w.LocksError())
					return ended
				}
				return finished
			}
		case <-tick.C:
			if closeBy != nil {
				continue
			}
			seq++
			sent[seq] = time.Now()
			if len(sent) > 64 { // unanswered for long: keep the newest
				for k := range sent {
					if k+64 <= seq {
						delete(sent, k)
					}
				}
			}
			if err := st.s.Send(&pb.SessionRequest{Msg: &pb.SessionRequest_Keepalive{Keepalive: &pb.Keepalive{Seq: seq}}}); err != nil {
				return broken
			}
		case <-c.kick:
			tick.Reset(c.interval())
		case <-closeReq:
			closeReq = nil
			if err := st.s.Send(&pb.SessionRequest{Msg: &pb.SessionRequest_Close{Close: &pb.Close{}}}); err != nil {
				return finished // the session lapses at its ttl
			}
			closeBy = time.After(closeWait)
		case <-closeBy:
			return finished
		}
	}
}

// reopen opens a stream again after one broke, resuming the session, or,
// once the server no longer has it, opening a new one. It tries until it
// succeeds or Close is called (then it tries once, to close the session,
// and returns nil if it cannot).
func (c *Client) reopen() *stream {
	wait := 10 * time.Millisecond
	for {
		closing := isClosed(c.closeReq)
		c.mu.Lock()
		ref, ttl := c.sess, c.minTTL
		c.mu.Unlock()
		if closing && ref.id == nil {
			return nil // no session to close
		}
		ctx, cancel := context.WithTimeout(c.bg, max(ttl/2, 100*time.Millisecond))
		st, opened, sent, err := c.open(ctx, ref)
		cancel()
		if err == nil {
			c.reopened(ref, opened, sent)
			return st
		}
		if status.Code(err) == codes.NotFound && ref.id != nil {
			// The session expired: what it held is lost; a new one.
			c.sessionEnded(&locks.Error{Kind: locks.Closed, Reason: remote.Expired})
			continue
		}
		if closing {
			return nil
		}
		select {
		case <-time.After(wait):
		case <-c.closeReq:
		}
		wait = min(wait*2, max(c.interval()/2, 10*time.Millisecond))
	}
}

func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// reopened records a stream opened again for ref: a renewal at sent, a
// new session if ref had none, and the releases to send again.
func (c *Client) reopened(ref sessionRef, opened *pb.Opened, sent time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ref.id == nil {
		c.sess = sessionRef{id: opened.GetSessionId(), secret: opened.GetSecret(), gen: ref.gen + 1}
		c.renewed = sent
	} else if sent.After(c.renewed) {
		c.renewed = sent
	}
	c.retryReleasesLocked()
}

// retryReleasesLocked sends again the releases that failed in the
// transport. Until one arrives, its grant is held and renewed with the
// session, so they are retried on every renewal the server answers and
// on every new stream.
func (c *Client) retryReleasesLocked() {
	for id, gen := range c.releases {
		delete(c.releases, id)
		if gen == c.sess.gen {
			c.releaseInBackgroundLocked(id, gen, c.minTTL)
		}
	}
}

// renewedAt records a renewal the server answered, sent at at.
func (c *Client) renewedAt(at time.Time) {
	c.mu.Lock()
	if at.After(c.renewed) {
		c.renewed = at
	}
	c.retryReleasesLocked()
	c.mu.Unlock()
}

// lostPushed loses the lease of acquire id, as the server said.
func (c *Client) lostPushed(id uint64, le *locks.Error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.entries[id]; e != nil {
		e.hold.Lose(le)
	}
}

// sessionEnded ends what the client's session held and waited for, once
// the server has ended the session (why: closed, or expired) and forgets
// the session: the next stream opens a new one.
func (c *Client) sessionEnded(why *locks.Error) {
	reason := remote.LostTTL
	if why.Reason == remote.StoreClosed {
		reason = remote.LostClosed
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range c.entries {
		if e.gen == c.sess.gen {
			c.endLocked(e, &locks.Error{Kind: locks.Lost, Reason: reason}, why)
		}
	}
	c.sess.id, c.sess.secret = nil, nil
}

// endLocked ends e as its session ends: a held lease is lost, a waiting
// Acquire fails with closed. The errors' lock and key are e's.
func (c *Client) endLocked(e *entry, lost, closed *locks.Error) {
	if e.held {
		le := *lost
		le.Lock, le.Key = e.lock, e.key
		e.hold.Lose(&le)
	} else if e.cancelRPC != nil {
		ce := *closed
		ce.Lock, ce.Key = e.lock, e.key
		e.cancelRPC(&ce)
	}
}

// releaseInBackgroundLocked lets grant id of session generation gen go in
// a goroutine of the client's: for an Acquire whose answer never came
// (the server may have granted it), or a release that failed in the
// transport. If it fails again it is retried (see retryReleasesLocked).
func (c *Client) releaseInBackgroundLocked(id, gen uint64, ttl time.Duration) {
	if c.closed || gen != c.sess.gen || c.sess.id == nil {
		return // a closed or ended session let everything go
	}
	ref := c.sess
	c.bgWG.Add(1)
	go func() {
		defer c.bgWG.Done()
		ctx, cancel := context.WithTimeout(c.bg, releaseTimeout(ttl))
		defer cancel()
		_, err := c.rpc.Release(c.outgoing(ctx), &pb.ReleaseRequest{SessionId: ref.id, Secret: ref.secret, AcquireId: id})
		if err != nil && !definitive(err) {
			c.mu.Lock()
			if !c.closed && gen == c.sess.gen {
				c.releases[id] = gen
			}
			c.mu.Unlock()
		}
	}()
}

// releaseTimeout bounds a Release call: a ttl, at most 10 s; past it the
// release is retried (see retryReleasesLocked).
func releaseTimeout(ttl time.Duration) time.Duration {
	return max(min(ttl, 10*time.Second), 50*time.Millisecond)
}

// definitive reports whether a failed call's error is the server's
// answer, so that the call surely changed nothing more: an error the
// server made, as opposed to one of the transport or of the call's
// cancellation, after which a grant may have been made unseen.
func definitive(err error) bool {
	if pb.ErrorOf(err) != nil {
		return true
	}
	switch status.Code(err) {
	case codes.InvalidArgument, codes.Unauthenticated, codes.PermissionDenied,
		codes.ResourceExhausted, codes.FailedPrecondition, codes.NotFound, codes.Unimplemented:
		return true
	}
	return false
}

// errClosed is the error of a call on a closed client.
func errClosed(lock, key string) *locks.Error {
	return &locks.Error{Kind: locks.Closed, Lock: lock, Key: key, Reason: "the client is closed"}
}

// rpcError is the error of a call that the server refused without a
// *locks.Error (no token, a token outside its prefixes) or that failed
// in the transport: it names the lock and the key, and wraps the gRPC
// status error, which status.Code and status.FromError read.
type rpcError struct {
	lock, key string
	err       error
}

// Error names the lock and the key, then the call's error.
func (e *rpcError) Error() string {
	return "lock " + e.lock + ": key " + strconv.Quote(e.key) + ": " + e.err.Error()
}

// Unwrap returns the gRPC status error, for errors.Is and errors.As.
func (e *rpcError) Unwrap() error { return e.err }

// GRPCStatus returns the status of the call, for status.FromError and
// status.Code.
func (e *rpcError) GRPCStatus() *status.Status {
	st, _ := status.FromError(e.err)
	return st
}
