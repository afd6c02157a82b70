package server_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/holdline/locks"
	"github.com/holdline/locks/internal/servertest"
	pb "github.com/holdline/locks/proto/locksv1"
	"github.com/holdline/locks/server"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const (
	goodToken    = "token-of-everything-0123456789"
	limitedToken = "token-of-invoices-only-0123456"
)

var tokensFile = "# tokens\n" + goodToken + "\n\n" + limitedToken + " invoices/,refunds\n"

// serve serves a new store on 127.0.0.1:0 until the test ends.
func serve(t *testing.T, opts ...server.Option) (*locks.Store, *server.Server, string) {
	t.Helper()
	s := servertest.Serve(t, opts...)
	return s.Store, s.Server, s.Addr
}

// wire is a raw connection to a server, speaking the protocol by hand.
type wire struct {
	t     *testing.T
	conn  *grpc.ClientConn
	rpc   pb.LocksClient
	token string
}

func connect(t *testing.T, addr, token string) *wire {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &wire{t: t, conn: conn, rpc: pb.NewLocksClient(conn), token: token}
}

func (w *wire) ctx() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	if w.token != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+w.token)
	}
	return ctx, cancel
}

// session is a session opened by hand: it sends keepalives only when
// told to.
type session struct {
	w          *wire
	stream     pb.Locks_SessionClient
	cancel     context.CancelFunc
	id, secret []byte
}

func (w *wire) open(ttl time.Duration) (*session, error) {
	ctx, cancel := context.WithCancel(context.Background())
	if w.token != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+w.token)
	}
	st, err := w.rpc.Session(ctx)
	if err != nil {
		cancel()
		return nil, err
	}
	if err := st.Send(&pb.SessionRequest{Msg: &pb.SessionRequest_Open{Open: &pb.Open{TtlNs: int64(ttl)}}}); err != nil {
		_, err = st.Recv() // io.EOF from Send: the stream's status is Recv's
		cancel()
		return nil, err
	}
	ev, err := st.Recv()
	if err != nil {
		cancel()
		return nil, err
	}
	s := &session{w: w, stream: st, cancel: cancel, id: ev.GetOpened().GetSessionId(), secret: ev.GetOpened().GetSecret()}
	w.t.Cleanup(cancel)
	return s, nil
}

func (w *wire) mustOpen(ttl time.Duration) *session {
	w.t.Helper()
	s, err := w.open(ttl)
	if err != nil {
		w.t.Fatal(err)
	}
	return s
}

func (s *session) acquire(id uint64, lock, key string, ttl, wait time.Duration) (*pb.AcquireResponse, error) {
	ctx, cancel := s.w.ctx()
	defer cancel()
	return s.w.rpc.Acquire(ctx, &pb.AcquireRequest{SessionId: s.id, Secret: s.secret, AcquireId: id,
		Lock: []byte(lock), Key: []byte(key), TtlNs: int64(ttl), WaitNs: int64(wait)})
}

func (s *session) release(id uint64) (*pb.ReleaseResponse, error) {
	ctx, cancel := s.w.ctx()
	defer cancel()
	return s.w.rpc.Release(ctx, &pb.ReleaseRequest{SessionId: s.id, Secret: s.secret, AcquireId: id})
}

func (s *session) keepalive(seq uint64) {
	s.w.t.Helper()
	if err := s.stream.Send(&pb.SessionRequest{Msg: &pb.SessionRequest_Keepalive{Keepalive: &pb.Keepalive{Seq: seq}}}); err != nil {
		s.w.t.Fatal(err)
	}
}

// next returns the next event of the session's stream.
func (s *session) next() *pb.SessionEvent {
	s.w.t.Helper()
	ev, err := s.stream.Recv()
	if err != nil {
		s.w.t.Fatal(err)
	}
	return ev
}

func wantCode(t *testing.T, err error, code codes.Code) {
	t.Helper()
	if status.Code(err) != code {
		t.Fatalf("error %v, want code %v", err, code)
	}
}

func wantError(t *testing.T, err error, code codes.Code, msg string) {
	t.Helper()
	wantCode(t, err, code)
	le := pb.ErrorOf(err)
	if le == nil || le.Error() != msg {
		t.Fatalf("error %v carries %v, want %q", err, le, msg)
	}
}

func TestLeaseLapsesUnrenewedAndALateRenewalSavesNothing(t *testing.T) {
	store, _, addr := serve(t)
	w := connect(t, addr, "")
	a, b := w.mustOpen(time.Second), w.mustOpen(time.Second)
	const ttl = 200 * time.Millisecond
	first, err := a.acquire(1, "invoices", "9", ttl, 0)
	if err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	ev := a.next() // no keepalive: lost at the ttl
	if d := time.Since(begin); d > ttl+100*time.Millisecond {
		t.Fatalf("lost after %v", d)
	}
	lost := ev.GetLost()
	if lost.GetAcquireId() != 1 || lost.GetError().LocksError().Error() != `lock invoices: key "9": the lease was lost: its ttl ran out` {
		t.Fatalf("event %v", ev)
	}
	a.keepalive(1) // late: renews nothing lost
	if got := a.next().GetKeepaliveAck().GetSeq(); got != 1 {
		t.Fatalf("ack %d", got)
	}
	second, err := b.acquire(1, "invoices", "9", ttl, 0)
	if err != nil {
		t.Fatalf("the key after the lapse: %v", err)
	}
	if second.GetFence() <= first.GetFence() {
		t.Fatalf("fence %d after %d", second.GetFence(), first.GetFence())
	}
	// The old grant's release says it was lost, and touches not the new
	// holder; a second release and another session's change nothing.
	resp, err := a.release(1)
	if err != nil || resp.GetLost().LocksError().Kind != locks.Lost {
		t.Fatalf("release of a lost grant: %v, %v", resp, err)
	}
	if _, err := a.release(1); err != nil {
		t.Fatal(err)
	}
	if _, err := a.acquire(2, "invoices", "9", ttl, 0); !errors.Is(pb.ErrorOf(err), locks.ErrInUse) {
		t.Fatalf("the new holder lost the key: %v", err)
	}
	c := w.mustOpen(time.Second)
	if _, err := c.release(1); err != nil {
		t.Fatal(err)
	}
	if _, err := a.acquire(3, "invoices", "9", ttl, 0); !errors.Is(pb.ErrorOf(err), locks.ErrInUse) {
		t.Fatalf("another session's release let the key go: %v", err)
	}
	if st := store.Stats(); st.Keys != 1 {
		t.Fatalf("keys %d", st.Keys)
	}
}

func TestKeepalivesKeepALease(t *testing.T) {
	_, _, addr := serve(t)
	w := connect(t, addr, "")
	a, b := w.mustOpen(time.Second), w.mustOpen(time.Second)
	const ttl = 200 * time.Millisecond
	if _, err := a.acquire(1, "invoices", "9", ttl, 0); err != nil {
		t.Fatal(err)
	}
	for i := uint64(1); i <= 6; i++ { // 600 ms, three ttls
		time.Sleep(ttl / 2)
		a.keepalive(i)
		if ev := a.next(); ev.GetKeepaliveAck().GetSeq() != i {
			t.Fatalf("event %v", ev)
		}
	}
	if _, err := b.acquire(1, "invoices", "9", ttl, 0); !errors.Is(pb.ErrorOf(err), locks.ErrInUse) {
		t.Fatalf("a renewed lease was let go: %v", err)
	}
	if _, err := a.release(1); err != nil {
		t.Fatal(err)
	}
	if _, err := b.acquire(1, "invoices", "9", ttl, 0); err != nil {
		t.Fatal(err)
	}
}

func TestAReleaseBeforeItsAcquireCancelsIt(t *testing.T) {
	store, _, addr := serve(t)
	w := connect(t, addr, "")
	a := w.mustOpen(time.Second)
	if _, err := a.release(7); err != nil {
		t.Fatal(err)
	}
	// A bad Acquire of the id fails Invalid and leaves the Release remembered.
	_, err := a.acquire(7, "invoices", "", time.Second, 0)
	wantError(t, err, codes.InvalidArgument, `lock invoices: the key is empty: invalid`)
	_, err = a.acquire(7, "invoices", "9", time.Second, 0)
	wantError(t, err, codes.Canceled, `lock invoices: key "9": the hold's context ended: context canceled`)
	if st := store.Stats(); st.Keys != 0 || st.Grants != 0 {
		t.Fatalf("%+v", st)
	}
	// A Release while the Acquire waits takes it out of the line.
	b := w.mustOpen(time.Second)
	if _, err := b.acquire(1, "invoices", "9", time.Second, 0); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := a.acquire(8, "invoices", "9", time.Second, time.Minute); done <- err }()
	for store.Stats().Waits == 0 {
		time.Sleep(time.Millisecond)
	}
	if _, err := a.release(8); err != nil {
		t.Fatal(err)
	}
	wantCode(t, <-done, codes.Canceled)
}

// TestTheLatestReleasesAreRemembered: of the Releases that found nothing,
// a session remembers its last MaxPerSession, forgetting the oldest
// first: a Release just before its Acquire still cancels it after many
// that found nothing.
func TestTheLatestReleasesAreRemembered(t *testing.T) {
	store, _, addr := serve(t, server.MaxPerSession(2))
	a := connect(t, addr, "").mustOpen(time.Second)
	for id := uint64(100); id < 105; id++ {
		if _, err := a.release(id); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.release(7); err != nil {
		t.Fatal(err)
	}
	_, err := a.acquire(7, "invoices", "9", time.Second, 0)
	wantError(t, err, codes.Canceled, `lock invoices: key "9": the hold's context ended: context canceled`)
	if _, err := a.acquire(103, "invoices", "9", time.Second, 0); err != nil {
		t.Fatalf("id 103, its Release forgotten: %v", err)
	}
	if st := store.Stats(); st.Grants != 1 {
		t.Fatalf("grants %d", st.Grants)
	}
}

func TestBadRequestsFailInvalidAndChangeNothing(t *testing.T) {
	store, _, addr := serve(t)
	w := connect(t, addr, "")
	a := w.mustOpen(time.Second)
	if _, err := a.acquire(1, "invoices", "held", time.Second, 0); err != nil {
		t.Fatal(err)
	}
	before := store.Stats()
	ctx, cancel := w.ctx()
	defer cancel()
	good := func() *pb.AcquireRequest {
		return &pb.AcquireRequest{SessionId: a.id, Secret: a.secret, AcquireId: 5, Lock: []byte("invoices"), Key: []byte("9"),
			TtlNs: int64(time.Second), WaitNs: int64(time.Second)}
	}
	for _, c := range []struct {
		change func(*pb.AcquireRequest)
		want   string
	}{
		{func(r *pb.AcquireRequest) { r.Key = nil }, `lock invoices: the key is empty: invalid`},
		{func(r *pb.AcquireRequest) { r.Key = []byte(strings.Repeat("k", 1025)) }, `lock invoices: the key is 1025 bytes long, more than 1024: invalid`},
		{func(r *pb.AcquireRequest) { r.Lock = nil }, `the lock's name is empty: invalid`},
		{func(r *pb.AcquireRequest) { r.Lock = []byte("a b") }, `lock "a b": a name is made of A-Z a-z 0-9 _ - . : /, not " " (byte 1): invalid`},
		{func(r *pb.AcquireRequest) { r.Lock = []byte("inv\xffoices") }, `lock "inv\xffoices": a name is made of A-Z a-z 0-9 _ - . : /, not "\xff" (byte 3): invalid`},
		{func(r *pb.AcquireRequest) { r.TtlNs = 0 }, `lock invoices: the ttl must be positive, not 0s: invalid`},
		{func(r *pb.AcquireRequest) { r.WaitNs = -1 }, `lock invoices: key "9": the wait is negative (-1ns): invalid`},
		{func(r *pb.AcquireRequest) { r.MaxHoldNs = -1 }, `lock invoices: key "9": the maxHold is negative (-1ns): invalid`},
		{func(r *pb.AcquireRequest) { r.AcquireId = 0 }, `lock invoices: key "9": the acquire id is 0: invalid`},
		{func(r *pb.AcquireRequest) { r.AcquireId = 1 }, `lock invoices: key "9": the acquire id 1 is in use: invalid`},
	} {
		r := good()
		c.change(r)
		_, err := w.rpc.Acquire(ctx, r)
		wantError(t, err, codes.InvalidArgument, c.want)
	}
	_, err := a.release(0)
	wantError(t, err, codes.InvalidArgument, `the acquire id is 0: invalid`)
	// The first message of a stream must be an Open with a ttl.
	for _, req := range []*pb.SessionRequest{
		{Msg: &pb.SessionRequest_Keepalive{Keepalive: &pb.Keepalive{Seq: 1}}},
		{Msg: &pb.SessionRequest_Open{Open: &pb.Open{}}},
		{},
	} {
		st, err := w.rpc.Session(ctx)
		if err != nil {
			t.Fatal(err)
		}
		st.Send(req)
		_, err = st.Recv()
		wantCode(t, err, codes.InvalidArgument)
	}
	if after := store.Stats(); after != before {
		t.Fatalf("bad requests changed the store: %+v, then %+v", before, after)
	}
}

func TestTokens(t *testing.T) {
	tokens, err := server.ParseTokens(strings.NewReader(tokensFile))
	if err != nil {
		t.Fatal(err)
	}
	store, srv, addr := serve(t, server.WithTokens(tokens))
	for _, token := range []string{"", "wrong-token-0123456789abcdef", goodToken + "x"} {
		w := connect(t, addr, token)
		_, err := w.open(time.Second)
		wantCode(t, err, codes.Unauthenticated)
		ctx, cancel := w.ctx()
		_, err = w.rpc.Acquire(ctx, &pb.AcquireRequest{AcquireId: 1, Lock: []byte("invoices"), Key: []byte("9"), TtlNs: 1e9})
		wantCode(t, err, codes.Unauthenticated)
		_, err = w.rpc.Release(ctx, &pb.ReleaseRequest{AcquireId: 1})
		wantCode(t, err, codes.Unauthenticated)
		cancel()
	}
	limited := connect(t, addr, limitedToken).mustOpen(time.Second)
	for _, lock := range []string{"payments", "invoice", "refund"} {
		_, err := limited.acquire(1, lock, "9", time.Second, 0)
		wantCode(t, err, codes.PermissionDenied)
	}
	if st := store.Stats(); st.Grants != 0 || st.Waits != 0 || st.Keys != 0 {
		t.Fatalf("refused calls changed the store: %+v", st)
	}
	if st := srv.Stats(); st.Sessions != 1 {
		t.Fatalf("sessions %d", st.Sessions)
	}
	for i, lock := range []string{"invoices/2026", "refunds"} {
		if _, err := limited.acquire(uint64(i+1), lock, "9", time.Second, 0); err != nil {
			t.Fatalf("%s: %v", lock, err)
		}
	}
	// A session is its token's: another token cannot use it.
	other := connect(t, addr, goodToken)
	stolen := &session{w: other, id: limited.id, secret: limited.secret}
	_, err = stolen.release(1)
	wantError(t, err, codes.FailedPrecondition, `the session expired: closed`)
	if st := store.Stats(); st.Keys != 2 {
		t.Fatalf("keys %d", st.Keys)
	}
	// The health service needs no token.
	hctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := healthpb.NewHealthClient(connect(t, addr, "").conn).Check(hctx, &healthpb.HealthCheckRequest{})
	if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health: %v, %v", resp, err)
	}
}

func TestParseTokens(t *testing.T) {
	for _, bad := range []string{
		"",
		"# nothing\n",
		"short\n",
		goodToken + "\n" + goodToken + "\n",
		goodToken + " a,,b\n",
		goodToken + " a b\n",
		"\ufeff" + goodToken + "\n" + goodToken + "\n", // a byte-order mark is no part of the first token
	} {
		if _, err := server.ParseTokens(strings.NewReader(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestLimits(t *testing.T) {
	t.Run("per session", func(t *testing.T) {
		store, _, addr := serve(t, server.MaxPerSession(2))
		a := connect(t, addr, "").mustOpen(time.Second)
		for i := uint64(1); i <= 2; i++ {
			if _, err := a.acquire(i, "invoices", string(rune('a'+i)), time.Second, 0); err != nil {
				t.Fatal(err)
			}
		}
		_, err := a.acquire(3, "invoices", "", time.Second, 0)
		wantError(t, err, codes.InvalidArgument, `lock invoices: the key is empty: invalid`) // bad input first
		_, err = a.acquire(3, "invoices", "z", time.Second, 0)
		wantError(t, err, codes.ResourceExhausted, `lock invoices: key "z": the session holds and waits for 2 keys, its limit: limit`)
		if !errors.Is(pb.ErrorOf(err), locks.ErrLimit) {
			t.Fatal(err)
		}
		if _, err := a.release(1); err != nil {
			t.Fatal(err)
		}
		if _, err := a.acquire(3, "invoices", "z", time.Second, 0); err != nil {
			t.Fatal(err)
		}
		if st := store.Stats(); st.Keys != 2 {
			t.Fatalf("keys %d", st.Keys)
		}
	})
	t.Run("sessions", func(t *testing.T) {
		_, _, addr := serve(t, server.MaxSessions(1))
		w := connect(t, addr, "")
		w.mustOpen(time.Second)
		_, err := w.open(time.Second)
		wantError(t, err, codes.ResourceExhausted, `the server has 1 sessions, its limit: limit`)
	})
}

func TestSessionCloseReleasesAtOnce(t *testing.T) {
	store, srv, addr := serve(t)
	w := connect(t, addr, "")
	a, b := w.mustOpen(time.Minute), w.mustOpen(time.Minute)
	if _, err := a.acquire(1, "invoices", "9", time.Minute, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := b.acquire(1, "invoices", "10", time.Minute, 0); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := a.acquire(2, "invoices", "10", time.Minute, time.Minute); done <- err }()
	for store.Stats().Waits == 0 {
		time.Sleep(time.Millisecond)
	}
	if err := a.stream.Send(&pb.SessionRequest{Msg: &pb.SessionRequest_Close{Close: &pb.Close{}}}); err != nil {
		t.Fatal(err)
	}
	if ev := a.next(); ev.GetClosed() == nil || ev.GetClosed().GetError() != nil {
		t.Fatalf("event %v", ev)
	}
	wantError(t, <-done, codes.FailedPrecondition, `lock invoices: key "10": the session is closed: closed`)
	if _, err := b.acquire(2, "invoices", "9", time.Minute, 0); err != nil {
		t.Fatalf("a closed session's key: %v", err)
	}
	if st := srv.Stats(); st.Sessions != 1 {
		t.Fatalf("sessions %d", st.Sessions)
	}
}

// TestALossIsSentAgainOnResume: a loss sent on a session's stream may not
// have reached its client, whose stream then broke; the session resumed
// on another stream sends it again, for as long as the grant is not
// released.
func TestALossIsSentAgainOnResume(t *testing.T) {
	_, _, addr := serve(t)
	w := connect(t, addr, "")
	a := w.mustOpen(time.Minute)
	ctx, cancel := w.ctx()
	defer cancel()
	if _, err := w.rpc.Acquire(ctx, &pb.AcquireRequest{SessionId: a.id, Secret: a.secret, AcquireId: 1,
		Lock: []byte("invoices"), Key: []byte("9"), TtlNs: int64(time.Minute), MaxHoldNs: int64(time.Millisecond)}); err != nil {
		t.Fatal(err)
	}
	const lost = `lock invoices: key "9": the lease was lost: it was revoked at its maxHold`
	if ev := a.next(); ev.GetLost().GetAcquireId() != 1 || ev.GetLost().GetError().LocksError().Error() != lost {
		t.Fatalf("first stream: %v", ev)
	}
	a.cancel() // as if that loss had not reached the client
	for range 2 {
		st, err := w.rpc.Session(ctx)
		if err != nil {
			t.Fatal(err)
		}
		st.Send(&pb.SessionRequest{Msg: &pb.SessionRequest_Open{Open: &pb.Open{SessionId: a.id, Secret: a.secret, TtlNs: int64(time.Minute)}}})
		if ev, err := st.Recv(); err != nil || !ev.GetOpened().GetResumed() {
			t.Fatalf("resume: %v, %v", ev, err)
		}
		ev, err := st.Recv()
		if err != nil || ev.GetLost().GetAcquireId() != 1 || ev.GetLost().GetError().LocksError().Error() != lost {
			t.Fatalf("resumed stream: %v, %v; want the loss again", ev, err)
		}
	}
	resp, err := a.release(1)
	if err != nil || resp.GetLost().LocksError().Error() != lost {
		t.Fatalf("release: %v, %v", resp, err)
	}
}

func TestAStreamBrokenLeavesTheSessionUntilItsTTL(t *testing.T) {
	store, srv, addr := serve(t)
	w := connect(t, addr, "")
	const ttl = 300 * time.Millisecond
	a := w.mustOpen(ttl)
	if _, err := a.acquire(1, "invoices", "9", ttl, 0); err != nil {
		t.Fatal(err)
	}
	a.cancel() // the stream breaks, without a Close
	// Resumed within the ttl, it holds what it held.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, err := w.rpc.Session(ctx)
	if err != nil {
		t.Fatal(err)
	}
	st.Send(&pb.SessionRequest{Msg: &pb.SessionRequest_Open{Open: &pb.Open{SessionId: a.id, Secret: a.secret, TtlNs: int64(ttl)}}})
	ev, err := st.Recv()
	if err != nil || !ev.GetOpened().GetResumed() {
		t.Fatalf("resume: %v, %v", ev, err)
	}
	if st := store.Stats(); st.Keys != 1 {
		t.Fatalf("keys %d", st.Keys)
	}
	cancel()
	// Left alone, it lapses at its ttl and is forgotten.
	for srv.Stats().Sessions != 0 {
		time.Sleep(time.Millisecond)
	}
	if st := store.Stats(); st.Keys != 0 {
		t.Fatalf("keys %d", st.Keys)
	}
	_, err = w.open(ttl) // a new one works
	if err != nil {
		t.Fatal(err)
	}
	st2, err := w.rpc.Session(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	st2.Send(&pb.SessionRequest{Msg: &pb.SessionRequest_Open{Open: &pb.Open{SessionId: a.id, Secret: a.secret, TtlNs: int64(ttl)}}})
	_, err = st2.Recv()
	wantError(t, err, codes.NotFound, `the session expired: closed`)
}

func TestPlaintextRefusedOffLoopback(t *testing.T) {
	store := locks.NewStore()
	defer store.Close()
	srv, err := server.New(store)
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Skip("cannot listen on 0.0.0.0:", err)
	}
	defer lis.Close()
	if err := srv.Serve(lis); !errors.Is(err, server.ErrPlaintext) {
		t.Fatalf("Serve: %v", err)
	}
	srv.Shutdown(context.Background())
	for addr, ok := range map[string]bool{
		"127.0.0.1:7411": true, "localhost:7411": true, "[::1]:7411": true, "127.0.0.2:1": true,
		"0.0.0.0:7411": false, ":7411": false, "10.0.0.1:7411": false, "example.com:7411": false,
	} {
		if err := server.CheckListen(addr, false); (err == nil) != ok {
			t.Errorf("CheckListen(%s): %v", addr, err)
		}
		if err := server.CheckListen(addr, true); err != nil {
			t.Errorf("CheckListen(%s) with TLS: %v", addr, err)
		}
	}
}

func TestAStreamWithoutOpenHoldsUpNoShutdown(t *testing.T) {
	_, srv, addr := serve(t)
	w := connect(t, addr, "")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, err := w.rpc.Session(ctx)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // the stream reaches the server, and says nothing
	begin := time.Now()
	sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer scancel()
	if err := srv.Shutdown(sctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if d := time.Since(begin); d > time.Second {
		t.Fatalf("Shutdown took %v", d)
	}
	_, err = st.Recv()
	wantCode(t, err, codes.Unavailable)
}

// TestShutdownForgetsItsSessions: once Shutdown has returned, the server
// keeps no session, nor counts one.
func TestShutdownForgetsItsSessions(t *testing.T) {
	_, srv, addr := serve(t)
	w := connect(t, addr, "")
	a := w.mustOpen(time.Minute)
	if _, err := a.acquire(1, "invoices", "9", time.Minute, 0); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if st := srv.Stats(); st.Sessions != 0 || st.Streams != 0 || st.Keys != 0 {
		t.Fatalf("after Shutdown: %+v", st)
	}
}
