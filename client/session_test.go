package client_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"math/big"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/holdline/locks"
	"github.com/holdline/locks/client"
	"github.com/holdline/locks/internal/lockertest"
	"github.com/holdline/locks/internal/servertest"
	"github.com/holdline/locks/server"
)

func TestReconnectWithinTTLKeepsTheSession(t *testing.T) {
	s := servertest.Serve(t)
	p := newProxy(t, s.Addr)
	c := dial(t, p.addr())
	const ttl = 600 * time.Millisecond
	l := openLock(t, c, "invoices", locks.TTL(ttl))
	o := openLock(t, dial(t, s.Addr), "invoices", locks.TTL(ttl))
	r := lockertest.Start(context.Background(), l, 9)
	_, fctx := r.Held(t)
	for range 3 { // each cut is followed by a reconnect within the ttl
		p.cut(false)
		time.Sleep(ttl / 2)
	}
	time.Sleep(ttl) // renewed since
	if fctx.Err() != nil {
		t.Fatalf("the function's context ended: %v", context.Cause(fctx))
	}
	if ok, err := o.TryHold(context.Background(), 9, lockertest.Noop); ok || err != nil {
		t.Fatalf("the key was let go: %v, %v", ok, err)
	}
	if st := s.Server.Stats(); st.Sessions != 2 {
		t.Fatalf("sessions %d: the client did not resume its own", st.Sessions)
	}
	if err := r.Result(t, nil); err != nil {
		t.Fatal(err)
	}
	if ok, err := o.TryHold(context.Background(), 9, lockertest.Noop); !ok || err != nil {
		t.Fatalf("after the release: %v, %v", ok, err)
	}
}

// A connection cut for longer than the ttl: the client gives the lease up
// before the server's ttl could hand the key on, the server loses it at
// the ttl and a waiter gets it with a higher fence; the client comes back
// with a new session.
func TestACutLongerThanTheTTLLosesTheLeaseClientFirst(t *testing.T) {
	s := servertest.Serve(t)
	p := newProxy(t, s.Addr)
	c := dial(t, p.addr())
	const ttl = 600 * time.Millisecond
	l := openLock(t, c, "invoices", locks.TTL(ttl))
	o := openLock(t, dial(t, s.Addr), "invoices", locks.TTL(ttl))
	r := lockertest.Start(context.Background(), l, 9)
	ls, fctx := r.Held(t)
	w := lockertest.Start(context.Background(), o, 9, locks.Wait(time.Minute))
	lockertest.Queued(t, s.Store, 1)
	cut := time.Now()
	p.cut(true)
	<-fctx.Done()
	fnEnded := time.Now()
	wls, _ := w.Held(t)
	granted := time.Now()
	if !fnEnded.Before(wls.Granted) {
		t.Fatalf("the function's context ended at %v, after the key went on at %v", fnEnded.Sub(cut), wls.Granted.Sub(cut))
	}
	t.Logf("after the cut: the function's context ended at %v, the key went on at %v (ttl %v)", fnEnded.Sub(cut), granted.Sub(cut), ttl)
	// The server's lapse is a ttl after its last renewal, which came at
	// most a third of a ttl (and a round trip) before the cut.
	if d := granted.Sub(cut); d < ttl-ttl/3-50*time.Millisecond || d > ttl+200*time.Millisecond {
		t.Fatalf("the key went on %v after the cut, ttl %v", d, ttl)
	}
	if wls.Fence <= ls.Fence {
		t.Fatalf("fence %d after %d", wls.Fence, ls.Fence)
	}
	lockertest.WantMessage(t, context.Cause(fctx), `lock invoices: key "9": the lease was lost: its ttl ran out`)
	if err := w.Result(t, nil); err != nil {
		t.Fatal(err)
	}
	p.setRefuse(false)
	err := r.Result(t, lockertest.ErrBoom)
	lockertest.WantMessage(t, err, `lock invoices: key "9": the lease was lost: its ttl ran out; the function returned: boom`)
	if !errors.Is(err, locks.ErrLost) || !errors.Is(err, lockertest.ErrBoom) {
		t.Fatal(err)
	}
	// Back with a new session: it holds again.
	lockertest.Eventually(t, "a hold after the session expired", func() bool {
		return l.Hold(context.Background(), 9, lockertest.Noop) == nil
	})
	lockertest.Eventually(t, "the old session reaped", func() bool { return s.Server.Stats().Sessions == 2 })
}

func TestTokensThroughTheClient(t *testing.T) {
	const good, limited = "token-of-everything-0123456789", "token-of-invoices-only-0123456"
	tokens, err := server.ParseTokens(strings.NewReader(good + "\n" + limited + " invoices/\n"))
	if err != nil {
		t.Fatal(err)
	}
	s := servertest.Serve(t, server.WithTokens(tokens))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, opts := range [][]client.Option{nil, {client.WithToken("not-a-token-0123456789abcdef")}} {
		c, err := client.Dial(ctx, s.Addr, opts...)
		if status.Code(err) != codes.Unauthenticated {
			if c != nil {
				c.Close()
			}
			t.Fatalf("Dial: %v", err)
		}
	}
	lc := dial(t, s.Addr, client.WithToken(limited))
	payments := openLock(t, lc, "payments")
	err = payments.Hold(ctx, 9, lockertest.Noop)
	if status.Code(err) != codes.PermissionDenied || !strings.HasPrefix(err.Error(), `lock payments: key "9": `) {
		t.Fatalf("outside the prefixes: %v", err)
	}
	if st := s.Store.Stats(); st.Grants != 0 || st.Waits != 0 || st.Keys != 0 {
		t.Fatalf("refused holds changed the store: %+v", st)
	}
	if err := openLock(t, lc, "invoices/2026").Hold(ctx, 9, lockertest.Noop); err != nil {
		t.Fatal(err)
	}
	if err := openLock(t, dial(t, s.Addr, client.WithToken(good)), "payments").Hold(ctx, 9, lockertest.Noop); err != nil {
		t.Fatal(err)
	}
}

func TestTLS(t *testing.T) {
	cert, pool := selfSigned(t)
	s := servertest.Serve(t, server.WithTLS(&tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}))
	c := dial(t, s.Addr, client.WithTLS(&tls.Config{RootCAs: pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}))
	if err := openLock(t, c, "invoices").Hold(context.Background(), 9, lockertest.Noop); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if c, err := client.Dial(ctx, s.Addr); err == nil { // plaintext to a TLS server
		c.Close()
		t.Fatal("a plaintext client opened a session")
	}
}

// selfSigned makes a certificate for 127.0.0.1 and a pool that trusts it.
func selfSigned(t *testing.T) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "locksd test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA:         true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, pool
}

func TestCloseReleasesAtOnceAndEndsHolds(t *testing.T) {
	s := servertest.Serve(t)
	ctx := context.Background()
	c, err := client.Dial(ctx, s.Addr)
	if err != nil {
		t.Fatal(err)
	}
	l, err := c.OpenLock("invoices")
	if err != nil {
		t.Fatal(err)
	}
	o := openLock(t, dial(t, s.Addr), "invoices")
	r := lockertest.Start(ctx, l, 9)
	_, fctx := r.Held(t)
	held := lockertest.Start(ctx, o, 10)
	held.Held(t)
	w := lockertest.Start(ctx, l, 10, locks.Wait(time.Minute))
	lockertest.Queued(t, s.Store, 1)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	lockertest.WantMessage(t, w.Wait(t), `lock invoices: key "10": the client is closed: closed`)
	<-fctx.Done()
	lockertest.WantMessage(t, context.Cause(fctx), `lock invoices: key "9": the lease was lost: its session closed`)
	if ok, err := o.TryHold(ctx, 9, lockertest.Noop); !ok || err != nil { // released at once
		t.Fatalf("a closed client's key: %v, %v", ok, err)
	}
	lockertest.WantMessage(t, r.Result(t, nil), `lock invoices: key "9": the lease was lost: its session closed`)
	lockertest.WantMessage(t, l.Hold(ctx, 9, lockertest.Noop), `lock invoices: key "9": the client is closed: closed`)
	if _, err := c.OpenLock("x"); err == nil {
		t.Fatal("OpenLock on a closed client")
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	held.Result(t, nil)
	lockertest.Eventually(t, "the session closed", func() bool { return s.Server.Stats().Sessions == 1 })
}

func TestAWaiterWhoseConnectionDropsLeavesTheLine(t *testing.T) {
	s := servertest.Serve(t)
	p := newProxy(t, s.Addr)
	l := openLock(t, dial(t, p.addr()), "invoices")
	o := openLock(t, dial(t, s.Addr), "invoices")
	r := lockertest.Start(context.Background(), o, 9)
	r.Held(t)
	w := lockertest.Start(context.Background(), l, 9, locks.Wait(time.Minute))
	lockertest.Queued(t, s.Store, 1)
	p.cut(true)
	err := w.Wait(t)
	if status.Code(err) != codes.Unavailable || !strings.HasPrefix(err.Error(), `lock invoices: key "9": `) {
		t.Fatalf("Hold: %v", err)
	}
	lockertest.Eventually(t, "the waiter out of the line", func() bool { return s.Store.Stats().Canceled == 1 })
	if err := r.Result(t, nil); err != nil {
		t.Fatal(err)
	}
	if ok, err := o.TryHold(context.Background(), 9, lockertest.Noop); !ok || err != nil {
		t.Fatalf("the key went to a waiter that left: %v, %v", ok, err)
	}
}

// A partition (the connection open, nothing getting through) longer than
// the ttl: the client gives the lease up before the server's ttl could
// hand the key on; once it heals, the late keepalives renew the session
// but not the lost lease, and the session holds again.
func TestAPartitionedHolderLosesItsLeaseFirst(t *testing.T) {
	s := servertest.Serve(t)
	p := newProxy(t, s.Addr)
	const ttl = 600 * time.Millisecond
	l := openLock(t, dial(t, p.addr()), "invoices", locks.TTL(ttl))
	o := openLock(t, dial(t, s.Addr), "invoices", locks.TTL(ttl))
	r := lockertest.Start(context.Background(), l, 9)
	ls, fctx := r.Held(t)
	w := lockertest.Start(context.Background(), o, 9, locks.Wait(time.Minute))
	lockertest.Queued(t, s.Store, 1)
	p.freeze(true)
	<-fctx.Done()
	fnEnded := time.Now()
	wls, _ := w.Held(t)
	if !fnEnded.Before(wls.Granted) || wls.Fence <= ls.Fence {
		t.Fatalf("the function's context ended at %v, the key went on at %v with fence %d after %d",
			fnEnded, wls.Granted, wls.Fence, ls.Fence)
	}
	p.freeze(false)
	err := r.Result(t, nil)
	lockertest.WantMessage(t, err, `lock invoices: key "9": the lease was lost: its ttl ran out`)
	if err := w.Result(t, nil); err != nil {
		t.Fatal(err)
	}
	if err := l.Hold(context.Background(), 9, lockertest.Noop); err != nil {
		t.Fatalf("after the partition: %v", err)
	}
	if st := s.Server.Stats(); st.Sessions != 2 {
		t.Fatalf("sessions %d", st.Sessions)
	}
}

// TestAPartitionedHolderEndsAtItsMaxHold: cut off from the server, a
// holder's function sees its context end at its maxHold on the client's
// own clock, not at the ttl it can no longer renew: not before its
// maxHold from the call (the client counts from when it sent the
// Acquire, plus the server's wait), and not long after the server passed
// the key on.
func TestAPartitionedHolderEndsAtItsMaxHold(t *testing.T) {
	s := servertest.Serve(t)
	p := newProxy(t, s.Addr)
	const ttl, maxHold = time.Minute, 300 * time.Millisecond
	l := openLock(t, dial(t, p.addr()), "invoices", locks.TTL(ttl))
	o := openLock(t, dial(t, s.Addr), "invoices", locks.TTL(ttl))
	called := time.Now()
	r := lockertest.Start(context.Background(), l, 9, locks.MaxHold(maxHold))
	ls, fctx := r.Held(t)
	w := lockertest.Start(context.Background(), o, 9, locks.Wait(time.Minute))
	lockertest.Queued(t, s.Store, 1)
	p.freeze(true)
	wls, _ := w.Held(t)
	select {
	case <-fctx.Done():
	case <-time.After(ttl / 4):
		t.Fatal("the partitioned holder's context still lives")
	}
	ended := time.Now()
	if ended.Before(called.Add(maxHold)) {
		t.Fatalf("ended %v after the call, before its maxHold", ended.Sub(called))
	}
	t.Logf("ended %v after the grant, %v after the key went on", ended.Sub(ls.Granted), ended.Sub(wls.Granted))
	lockertest.WantMessage(t, context.Cause(fctx), `lock invoices: key "9": the lease was lost: it was revoked at its maxHold`)
	p.freeze(false)
	if err := w.Result(t, nil); err != nil {
		t.Fatal(err)
	}
	if err := r.Result(t, nil); !errors.Is(err, locks.ErrLost) {
		t.Fatalf("the revoked Hold returned %v", err)
	}
}

// The server shuts down under a running hold, and a new one comes up at
// the same address: the hold is lost ("its store closed"), and the client
// goes on with a new session of the new server.
func TestANewServerAtTheSameAddress(t *testing.T) {
	s1 := servertest.Serve(t)
	p := newProxy(t, s1.Addr)
	l := openLock(t, dial(t, p.addr()), "invoices")
	r := lockertest.Start(context.Background(), l, 9)
	_, fctx := r.Held(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s2 := servertest.Serve(t)
	p.retarget(s2.Addr)
	if err := s1.Server.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	<-fctx.Done()
	lockertest.WantMessage(t, r.Result(t, nil), `lock invoices: key "9": the lease was lost: its store closed`)
	lockertest.Eventually(t, "a hold through the new server", func() bool { return l.Hold(context.Background(), 9, lockertest.Noop) == nil })
	if st := s2.Store.Stats(); st.Grants == 0 {
		t.Fatalf("the new server granted nothing: %+v", st)
	}
}

// TestAStallingWaiterHoldsUpNoOtherCall: a waiter whose context stalls
// once it stands in line, granted or given up by the client (cut off
// past its ttl), holds up nobody but itself: the client's mutex is never
// held while the caller's context is asked.
func TestAStallingWaiterHoldsUpNoOtherCall(t *testing.T) {
	for _, how := range []string{"granted", "given up"} {
		t.Run(how, func(t *testing.T) {
			s := servertest.Serve(t)
			p := newProxy(t, s.Addr)
			const ttl = 600 * time.Millisecond
			c := dial(t, p.addr())
			l := openLock(t, c, "invoices", locks.TTL(ttl))
			o := openLock(t, dial(t, s.Addr), "invoices", locks.TTL(ttl))
			r := lockertest.Start(context.Background(), o, 9)
			r.Held(t)
			stalling := lockertest.NewStallingCtx()
			t.Cleanup(stalling.LetGo)
			go l.Hold(stalling, 9, lockertest.Noop, locks.Wait(time.Minute))
			lockertest.Queued(t, s.Store, 1)
			stalling.Arm()
			if how == "granted" {
				r.Let(nil)
			} else {
				p.freeze(true) // the client gives the wait up at its ttl
				defer p.freeze(false)
				defer r.Let(nil)
			}
			select {
			case <-stalling.Stalled():
			case <-time.After(10 * time.Second):
				t.Fatal("the caller's context was not asked")
			}
			opened := make(chan error, 1)
			go func() { _, err := c.OpenLock("orders"); opened <- err }() // takes the client's mutex
			select {
			case err := <-opened:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(2 * time.Second):
				t.Fatal("the client's mutex is held while the caller's context stalls")
			}
		})
	}
}

// lateCtx has a deadline whose end it reports a little after the
// deadline itself, as a caller's context whose timer runs late does.
type lateCtx struct {
	context.Context
	deadline time.Time
	done     chan struct{}
}

func newLateCtx(d, late time.Duration) *lateCtx {
	c := &lateCtx{Context: context.Background(), deadline: time.Now().Add(d), done: make(chan struct{})}
	time.AfterFunc(d+late, func() { close(c.done) })
	return c
}

func (c *lateCtx) Deadline() (time.Time, bool) { return c.deadline, true }
func (c *lateCtx) Done() <-chan struct{}       { return c.done }
func (c *lateCtx) Err() error {
	select {
	case <-c.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}

// TestADeadlineSeenFirstByTheServer: the server, sent the caller's
// deadline, ends a waiting Acquire at it before the caller's own context
// says so: Hold still fails with the caller's context error, not the
// transport's.
func TestADeadlineSeenFirstByTheServer(t *testing.T) {
	s := servertest.Serve(t)
	l := openLock(t, dial(t, s.Addr), "invoices")
	o := openLock(t, dial(t, s.Addr), "invoices")
	r := lockertest.Start(context.Background(), o, 9)
	r.Held(t)
	defer r.Let(nil)
	err := l.Hold(newLateCtx(200*time.Millisecond, 5*time.Millisecond), 9, lockertest.Noop, locks.Wait(time.Minute))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Hold: %v (%T), want the caller's context error", err, err)
	}
	lockertest.WantMessage(t, err, `lock invoices: key "9": the hold's context ended: context deadline exceeded`)
}

// TestAHeldUpAnswerPastItsMaxHold: the answer to a waiting Acquire is
// held up in the network past the grant's maxHold, so the server has
// revoked the lease and given the key on by the time it comes: the
// function never runs under a live context while the next holder holds.
func TestAHeldUpAnswerPastItsMaxHold(t *testing.T) {
	s := servertest.Serve(t)
	p := newProxy(t, s.Addr)
	const maxHold = 100 * time.Millisecond
	a := openLock(t, dial(t, p.addr()), "invoices", locks.TTL(time.Minute))
	d := openLock(t, dial(t, s.Addr), "invoices", locks.TTL(time.Minute))
	first := lockertest.Start(context.Background(), d, 9)
	first.Held(t)
	ra := lockertest.Start(context.Background(), a, 9, locks.Wait(time.Minute), locks.MaxHold(maxHold))
	lockertest.Queued(t, s.Store, 1)
	rb := lockertest.Start(context.Background(), d, 9, locks.Wait(time.Minute))
	lockertest.Queued(t, s.Store, 2)
	p.freeze(true) // the grant's answer is held up
	if err := first.Result(t, nil); err != nil {
		t.Fatal(err)
	}
	bls, bctx := rb.Held(t) // A was revoked at its maxHold on the server
	p.freeze(false)
	als, actx := ra.Held(t)
	if actx.Err() == nil && bctx.Err() == nil {
		t.Fatalf("A (fence %d) runs under a live context while B (fence %d) holds", als.Fence, bls.Fence)
	}
	lockertest.WantMessage(t, context.Cause(actx), `lock invoices: key "9": the lease was lost: it was revoked at its maxHold`)
	if err := ra.Result(t, nil); !errors.Is(err, locks.ErrLost) {
		t.Fatalf("A's Hold: %v", err)
	}
	if err := rb.Result(t, nil); err != nil {
		t.Fatal(err)
	}
}
