package server

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"errors"
	"strconv"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/holdline/locks"
	"github.com/holdline/locks/internal/remote"
	pb "github.com/holdline/locks/proto/locksv1"
)

// session is a client's session: a locks.Session of the store, what it
// holds and waits for by acquire id, and the stream it is attached to.
type session struct {
	srv    *Server
	id     string // 16 random bytes
	secret []byte // 32 random bytes, shown by every call naming the session
	owner  *token // the token it was opened with; nil without tokens
	core   *locks.Session

	mu        sync.Mutex
	ttl       time.Duration // how long it outlives its last renewal holding nothing
	renewed   time.Time     // the last renewal
	grants    map[uint64]*grant
	pending   map[uint64]*pending // Acquires waiting in line
	released  map[uint64]struct{} // Releases that came before their Acquire
	relOrder  []uint64            // released's ids, oldest first (some taken up since)
	lost      []*pb.SessionEvent  // losses not yet sent
	att       *attachment         // its stream; nil while it has none
	closed    bool
	reapTimer *time.Timer
}

// grant is a key the session holds.
type grant struct {
	g      *locks.Grant
	stop   func() bool // stops watching its context; nil until set
	pushed bool        // its loss was queued
}

// pending is an Acquire of the session waiting in line.
type pending struct {
	cancel   context.CancelFunc
	released bool // a Release came for it: leave the line, or give the grant back
}

// attachment is one stream of a session, from its Open to its end.
type attachment struct {
	notify chan struct{} // something to send; cap 1
	end    chan struct{} // closed when the stream is to end
	ending bool
	endErr error // what the stream's handler returns
	// The last keepalive of this stream not yet answered, if ackDue: one
	// answer says that one and every one before renewed the session, so
	// a client that sends and never reads makes the server keep no more.
	ackSeq uint64
	ackDue bool
	final  *pb.SessionEvent // sent last, then the stream ends
}

func newAttachment() *attachment {
	return &attachment{notify: make(chan struct{}, 1), end: make(chan struct{})}
}

// poke wakes the stream's sender. Called under the session's mutex.
func (a *attachment) poke() {
	select {
	case a.notify <- struct{}{}:
	default:
	}
}

// finish makes the stream end once what is queued is sent. Called under
// the session's mutex.
func (a *attachment) finish(final *pb.SessionEvent, err error) {
	if a.ending {
		return
	}
	a.ending, a.final, a.endErr = true, final, err
	close(a.end)
}

// service is the Locks service of a Server.
type service struct {
	pb.UnimplementedLocksServer
	s *Server
}

// errExpired is the answer to a call naming a session the server does
// not have (it expired, was closed, or never was) or one that is not the
// caller's: the same answer for all, so that a call learns nothing of
// another token's sessions.
func errExpired(lock string, key []byte) *locks.Error {
	return &locks.Error{Kind: locks.Closed, Lock: lock, Key: string(key), Reason: "the session expired"}
}

// lookup returns the session named by id and secret, if the server still
// has it (it may be closed: callers look) and it is ctx's caller's.
func (s *Server) lookup(ctx context.Context, id, secret []byte) *session {
	s.mu.Lock()
	sess := s.sessions[string(id)]
	s.mu.Unlock()
	if sess == nil || subtle.ConstantTimeCompare(sess.secret, secret) != 1 || sess.owner != principal(ctx) {
		return nil
	}
	return sess
}

// Session opens or resumes a session and serves its stream.
func (v *service) Session(stream pb.Locks_SessionServer) error {
	s := v.s
	ctx := stream.Context()
	req, err := s.first(stream)
	if err != nil {
		return err
	}
	open := req.GetOpen()
	if open == nil {
		return invalid("", nil, "a session stream starts with an Open")
	}
	ttl := time.Duration(open.GetTtlNs())
	if ttl <= 0 {
		return invalid("", nil, "the session's ttl must be positive, not "+ttl.String())
	}
	var sess *session
	resumed := len(open.GetSessionId()) > 0
	if resumed {
		sess = s.lookup(ctx, open.GetSessionId(), open.GetSecret())
		if sess == nil {
			return pb.Status(codes.NotFound, errExpired("", nil)).Err()
		}
	} else if sess, err = s.newSession(ctx, ttl); err != nil {
		return err
	}
	a, err := sess.attach(ttl)
	if err != nil {
		return err
	}
	if resumed {
		s.log.Debug("session resumed", "session", sess.name(), "peer", peerAddr(ctx))
	} else {
		s.log.Debug("session opened", "session", sess.name(), "ttl", ttl, "peer", peerAddr(ctx))
	}
	opened := &pb.SessionEvent{Event: &pb.SessionEvent_Opened{Opened: &pb.Opened{
		SessionId: []byte(sess.id), Secret: sess.secret, Resumed: resumed}}}
	if err := stream.Send(opened); err != nil {
		sess.detach(a)
		return err
	}
	if !s.goRecv(func() { sess.receive(stream, a) }) {
		sess.detach(a)
		return errShuttingDown
	}
	for {
		select {
		case <-a.notify:
		case <-a.end:
		case <-ctx.Done():
			sess.detach(a)
			return ctx.Err()
		}
		evs, end, endErr := sess.outbox(a)
		for _, ev := range evs {
			if err := stream.Send(ev); err != nil {
				sess.detach(a)
				return err
			}
		}
		if end {
			sess.detach(a)
			return endErr
		}
	}
}

// first returns the first message of a session stream, waiting for it
// OpenWait at most, and not past the start of a Shutdown: a stream that
// says nothing holds nothing but a goroutine, and not for long.
func (s *Server) first(stream pb.Locks_SessionServer) (*pb.SessionRequest, error) {
	type received struct {
		req *pb.SessionRequest
		err error
	}
	got := make(chan received, 1)
	if !s.goRecv(func() { // ends when the stream does, at the latest
		req, err := stream.Recv()
		got <- received{req, err}
	}) {
		return nil, errShuttingDown
	}
	t := time.NewTimer(OpenWait)
	defer t.Stop()
	select {
	case r := <-got:
		return r.req, r.err
	case <-t.C:
		return nil, status.Error(codes.DeadlineExceeded, "no Open within "+OpenWait.String())
	case <-s.stopping:
		return nil, errShuttingDown
	case <-stream.Context().Done():
		return nil, stream.Context().Err()
	}
}

// errShuttingDown answers a stream that Shutdown overtook.
var errShuttingDown = status.Error(codes.Unavailable, "the server is shutting down")

// goRecv runs f, which receives from a stream, on a goroutine Shutdown
// waits for, unless Shutdown has begun: then it reports false. Checked
// under s.mu, so that no goroutine is added once Shutdown may wait.
func (s *Server) goRecv(f func()) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return false
	}
	s.recv.Add(1)
	go func() {
		defer s.recv.Done()
		f()
	}()
	return true
}

// newSession makes a session owned by ctx's caller, if the server is
// below its limit and open.
func (s *Server) newSession(ctx context.Context, ttl time.Duration) (*session, error) {
	id, secret := make([]byte, 16), make([]byte, 32)
	rand.Read(id)
	rand.Read(secret)
	sess := &session{
		srv: s, id: string(id), secret: secret, owner: principal(ctx), ttl: ttl,
		grants:   make(map[uint64]*grant),
		pending:  make(map[uint64]*pending),
		released: make(map[uint64]struct{}),
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closing:
		return nil, pb.Status(codes.Unavailable, &locks.Error{Kind: locks.Closed, Reason: "the store is closed"}).Err()
	case len(s.sessions) >= s.cfg.maxSessions:
		s.log.Warn("refused: too many sessions", "limit", s.cfg.maxSessions, "peer", peerAddr(ctx))
		return nil, statusOf(&locks.Error{Kind: locks.Limit,
			Reason: "the server has " + strconv.Itoa(s.cfg.maxSessions) + " sessions, its limit"})
	}
	sess.core = s.store.NewSession()
	s.sessions[sess.id] = sess
	return sess, nil
}

// attach makes a the session's stream, ending the one it had (a client
// that resumed before the server saw its old stream break), and renews
// the session.
func (sess *session) attach(ttl time.Duration) (*attachment, error) {
	a := newAttachment()
	sess.mu.Lock()
	defer sess.mu.Unlock()
	if sess.closed {
		return nil, pb.Status(codes.NotFound, errExpired("", nil)).Err()
	}
	if err := sess.core.Renew(); err != nil {
		return nil, statusOf(err)
	}
	sess.renewed = time.Now()
	sess.ttl = ttl
	if old := sess.att; old != nil {
		old.finish(nil, status.Error(codes.Aborted, "the session was resumed on another stream"))
	}
	sess.att = a
	if sess.reapTimer != nil {
		sess.reapTimer.Stop()
		sess.reapTimer = nil
	}
	// A loss sent on an earlier stream may never have reached the client
	// (a Send returns once the transport has the event), which would then
	// run its function on until its ttl: every loss not yet released goes
	// again. The client takes a repeat for nothing.
	clear(sess.lost)
	sess.lost = sess.lost[:0]
	for id, gr := range sess.grants {
		gr.pushed = false
		sess.pushLostLocked(id, gr)
	}
	if len(sess.lost) > 0 {
		a.poke()
	}
	return a, nil
}

// detach leaves the session without a stream, if a is still its stream:
// it lives on until its ttl, for a client to resume it.
func (sess *session) detach(a *attachment) {
	sess.mu.Lock()
	defer sess.mu.Unlock()
	a.finish(nil, nil)
	if sess.att != a {
		return
	}
	sess.att = nil
	if !sess.closed {
		sess.armReapLocked(time.Until(sess.renewed.Add(sess.ttl)))
	}
}

func (sess *session) armReapLocked(d time.Duration) {
	if sess.reapTimer != nil {
		sess.reapTimer.Stop()
	}
	sess.reapTimer = time.AfterFunc(max(d, 0), sess.reap)
}

// reap closes a session left without a stream once it holds and waits
// for nothing and its ttl has passed since its last renewal. Until its
// leases lapse (each at its own lock's ttl), it looks again.
func (sess *session) reap() {
	sess.mu.Lock()
	if sess.att != nil || sess.closed {
		sess.mu.Unlock()
		return
	}
	if left := time.Until(sess.renewed.Add(sess.ttl)); left > 0 {
		sess.armReapLocked(left)
		sess.mu.Unlock()
		return
	}
	busy := len(sess.pending) > 0
	for _, gr := range sess.grants {
		if gr.g.Context().Err() == nil {
			busy = true
			break
		}
	}
	if busy {
		sess.armReapLocked(max(sess.ttl/4, 10*time.Millisecond))
		sess.mu.Unlock()
		return
	}
	sess.closeLocked() // under the mutex still: a client resuming now finds it closed
	sess.srv.log.Debug("session expired", "session", sess.name())
}

// close ends the session: its grants released, its waits dismissed
// (their Acquire fails Closed, "the session is closed"), and the server
// forgets it.
func (sess *session) close() {
	sess.mu.Lock()
	sess.closeLocked()
}

// closeLocked is close for a caller holding sess.mu, which it lets go.
func (sess *session) closeLocked() {
	if sess.closed {
		sess.mu.Unlock()
		return
	}
	sess.closed = true
	grants := sess.grants
	sess.grants = make(map[uint64]*grant)
	if sess.reapTimer != nil {
		sess.reapTimer.Stop()
		sess.reapTimer = nil
	}
	sess.mu.Unlock()
	s := sess.srv
	s.mu.Lock()
	delete(s.sessions, sess.id)
	s.mu.Unlock()
	for _, gr := range grants {
		if gr.stop != nil {
			gr.stop()
		}
	}
	sess.core.Close()
}

// shutdown tells the session's stream, if any, of every lease it lost
// and that the session is over (why), then ends the stream. The store is
// closed already.
func (sess *session) shutdown(why *locks.Error) {
	sess.mu.Lock()
	defer sess.mu.Unlock()
	sess.closed = true
	if sess.reapTimer != nil {
		sess.reapTimer.Stop()
		sess.reapTimer = nil
	}
	for id, gr := range sess.grants {
		sess.pushLostLocked(id, gr)
	}
	if a := sess.att; a != nil {
		a.finish(&pb.SessionEvent{Event: &pb.SessionEvent_Closed{Closed: &pb.Closed{Error: pb.FromError(why)}}}, nil)
	}
}

// receive reads the stream's keepalives and close until it ends.
func (sess *session) receive(stream pb.Locks_SessionServer, a *attachment) {
	for {
		req, err := stream.Recv()
		if err != nil {
			sess.detach(a)
			return
		}
		switch m := req.GetMsg().(type) {
		case *pb.SessionRequest_Keepalive:
			sess.mu.Lock()
			err := sess.core.Renew()
			if err == nil {
				sess.renewed = time.Now()
				a.ackSeq, a.ackDue = m.Keepalive.GetSeq(), true
				a.poke()
			}
			sess.mu.Unlock()
			if err != nil { // the store closed it
				sess.mu.Lock()
				a.finish(&pb.SessionEvent{Event: &pb.SessionEvent_Closed{Closed: &pb.Closed{
					Error: pb.FromError(&locks.Error{Kind: locks.Closed, Reason: "the store is closed"})}}}, nil)
				sess.mu.Unlock()
				return
			}
		case *pb.SessionRequest_Close:
			sess.close()
			sess.srv.log.Debug("session closed", "session", sess.name())
			sess.mu.Lock()
			a.finish(&pb.SessionEvent{Event: &pb.SessionEvent_Closed{Closed: &pb.Closed{}}}, nil)
			sess.mu.Unlock()
			return
		default:
			sess.mu.Lock()
			a.finish(nil, invalid("", nil, "a session stream takes an Open first, then Keepalives and a Close"))
			sess.mu.Unlock()
			sess.detach(a)
			return
		}
	}
}

// outbox takes what a's stream is to send now: losses (only while a is
// the session's stream), the answer to its last keepalive, and its final event;
// end says the stream is to end after them, with endErr.
func (sess *session) outbox(a *attachment) (evs []*pb.SessionEvent, end bool, endErr error) {
	sess.mu.Lock()
	defer sess.mu.Unlock()
	if sess.att == a {
		evs = append(evs, sess.lost...)
		clear(sess.lost)
		sess.lost = sess.lost[:0]
	}
	if a.ackDue {
		evs = append(evs, &pb.SessionEvent{Event: &pb.SessionEvent_KeepaliveAck{KeepaliveAck: &pb.KeepaliveAck{Seq: a.ackSeq}}})
		a.ackDue = false
	}
	if a.ending {
		if a.final != nil {
			evs = append(evs, a.final)
			a.final = nil
		}
		return evs, true, a.endErr
	}
	return evs, false, nil
}

// pushLostLocked queues the loss of gr, if its lease was lost and its
// loss not queued yet. Called under the session's mutex.
func (sess *session) pushLostLocked(id uint64, gr *grant) {
	if gr.pushed {
		return
	}
	var le *locks.Error
	if !errors.As(context.Cause(gr.g.Context()), &le) || le.Kind != locks.Lost {
		return // running, or released
	}
	gr.pushed = true
	sess.lost = append(sess.lost, &pb.SessionEvent{Event: &pb.SessionEvent_Lost{Lost: &pb.Lost{
		AcquireId: id, Error: pb.FromError(le)}}})
	if sess.att != nil {
		sess.att.poke()
	}
}

// name is the session's id as logs show it: its first 8 hex digits.
func (sess *session) name() string {
	const hex = "0123456789abcdef"
	b := make([]byte, 0, 8)
	for i := 0; i < 4 && i < len(sess.id); i++ {
		b = append(b, hex[sess.id[i]>>4], hex[sess.id[i]&15])
	}
	return string(b)
}

func peerAddr(ctx context.Context) string {
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		return p.Addr.String()
	}
	return ""
}

// Acquire waits in line for a key for a session.
func (v *service) Acquire(ctx context.Context, req *pb.AcquireRequest) (*pb.AcquireResponse, error) {
	arrived := time.Now() // no earlier than the client sent it (see waited_ns)
	s := v.s
	name, key := string(req.GetLock()), req.GetKey()
	lock, err := locks.OpenLock(s.store, name, locks.TTL(time.Duration(req.GetTtlNs())))
	if err != nil { // a bad name or ttl, as OpenLock says (naming no key), or a closed store
		return nil, statusOf(err)
	}
	if tk := principal(ctx); !tk.allows(name) {
		s.log.Warn("refused: lock outside the token's prefixes", "lock", name, "token_line", tk.line, "peer", peerAddr(ctx))
		return nil, status.Error(codes.PermissionDenied, "lock "+name+": not one of the token's prefixes")
	}
	sess := s.lookup(ctx, req.GetSessionId(), req.GetSecret())
	if sess == nil {
		return nil, statusOf(errExpired(name, key))
	}
	id := req.GetAcquireId()
	if id == 0 {
		return nil, invalid(name, key, "the acquire id is 0")
	}
	opts := []locks.Option{locks.Wait(time.Duration(req.GetWaitNs())), locks.MaxHold(time.Duration(req.GetMaxHoldNs()))}
	// The key and options are checked before begin, which may take up a
	// Release that came first or refuse at the session's limit: a bad
	// request fails Invalid, as Acquire would, and changes nothing.
	spec, _ := remote.Open(name, name, nil) // name was checked by OpenLock
	if _, _, err := spec.CheckHold(ctx, key, acquireFn, opts); err != nil {
		return nil, statusOf(err)
	}
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	p := &pending{cancel: cancel}
	if err := sess.begin(id, p, name, key); err != nil {
		return nil, err
	}
	g, err := lock.Acquire(pctx, sess.core, key, opts...)

	sess.mu.Lock()
	delete(sess.pending, id)
	if err != nil {
		sess.mu.Unlock()
		return nil, statusOf(err)
	}
	if closed := sess.closed; closed || p.released || ctx.Err() != nil {
		sess.mu.Unlock()
		// The session closed, or the caller went away or let it go, as it
		// was granted: the key goes on, as in-process for a waiter whose
		// ctx ended.
		g.Release()
		if closed {
			return nil, statusOf(&locks.Error{Kind: locks.Closed, Lock: name, Key: string(key), Reason: "the session is closed"})
		}
		return nil, statusOf(&locks.Error{Kind: locks.Canceled, Lock: name, Key: string(key),
			Reason: "the hold's context ended", Cause: context.Canceled})
	}
	gr := &grant{g: g}
	sess.grants[id] = gr
	sess.mu.Unlock()
	stop := context.AfterFunc(g.Context(), func() {
		sess.mu.Lock()
		if sess.grants[id] == gr {
			sess.pushLostLocked(id, gr)
		}
		sess.mu.Unlock()
	})
	sess.mu.Lock()
	gr.stop = stop
	sess.mu.Unlock()

	ls := g.Lease()
	waited := int64(max(ls.Granted.Sub(arrived), 0))
	resp := &pb.AcquireResponse{Fence: ls.Fence, GrantedUnixNs: ls.Granted.UnixNano(), WaitedNs: &waited}
	if !ls.Deadline.IsZero() {
		resp.DeadlineUnixNs = ls.Deadline.UnixNano()
	}
	return resp, nil
}

// acquireFn stands for the function of an Acquire in its checks: a grant
// has none.
func acquireFn(context.Context, *locks.Lease) error { return nil }

// begin records an Acquire of id as waiting, or refuses it: the session
// is closed, the id is in use, the session is at its limit, or a Release
// of id came first.
func (sess *session) begin(id uint64, p *pending, name string, key []byte) error {
	sess.mu.Lock()
	defer sess.mu.Unlock()
	if sess.closed {
		return statusOf(errExpired(name, key))
	}
	if _, ok := sess.released[id]; ok {
		delete(sess.released, id)
		return statusOf(&locks.Error{Kind: locks.Canceled, Lock: name, Key: string(key),
			Reason: "the hold's context ended", Cause: context.Canceled})
	}
	if _, ok := sess.grants[id]; ok {
		return invalid(name, key, "the acquire id "+strconv.FormatUint(id, 10)+" is in use")
	}
	if _, ok := sess.pending[id]; ok {
		return invalid(name, key, "the acquire id "+strconv.FormatUint(id, 10)+" is in use")
	}
	if n := len(sess.grants) + len(sess.pending); n >= sess.srv.cfg.maxPerSession {
		return statusOf(&locks.Error{Kind: locks.Limit, Lock: name, Key: string(key),
			Reason: "the session holds and waits for " + strconv.Itoa(n) + " keys, its limit"})
	}
	sess.pending[id] = p
	return nil
}

// rememberLocked remembers a Release of id that found nothing, for an
// Acquire of id that may come after it; of the session's last
// maxPerSession such Releases, the oldest is forgotten first (most are a
// client's for Acquires that ended first, whose ids never come again).
func (sess *session) rememberLocked(id uint64) {
	if len(sess.relOrder) >= sess.srv.cfg.maxPerSession {
		delete(sess.released, sess.relOrder[0])
		sess.relOrder = append(sess.relOrder[:0], sess.relOrder[1:]...)
	}
	sess.released[id] = struct{}{}
	sess.relOrder = append(sess.relOrder, id)
}

// Release lets a grant of a session go, or takes its Acquire out of line.
func (v *service) Release(ctx context.Context, req *pb.ReleaseRequest) (*pb.ReleaseResponse, error) {
	sess := v.s.lookup(ctx, req.GetSessionId(), req.GetSecret())
	if sess == nil {
		return nil, statusOf(errExpired("", nil))
	}
	id := req.GetAcquireId()
	if id == 0 {
		return nil, invalid("", nil, "the acquire id is 0")
	}
	sess.mu.Lock()
	if gr, ok := sess.grants[id]; ok {
		delete(sess.grants, id)
		stop := gr.stop
		sess.mu.Unlock()
		if stop != nil {
			stop()
		}
		resp := &pb.ReleaseResponse{}
		var le *locks.Error
		if err := gr.g.Release(); errors.As(err, &le) {
			resp.Lost = pb.FromError(le)
		}
		return resp, nil
	}
	if p, ok := sess.pending[id]; ok {
		p.released = true
		p.cancel()
	} else {
		sess.rememberLocked(id)
	}
	sess.mu.Unlock()
	return &pb.ReleaseResponse{}, nil
}
