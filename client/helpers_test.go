package client_test

import (
	"context"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/holdline/locks"
	"github.com/holdline/locks/client"
	"github.com/holdline/locks/internal/lockertest"
)

func TestMain(m *testing.M) {
	if addr := os.Getenv(childEnv); addr != "" {
		childHold(addr) // a holder for TestKilledHolder, until killed
	}
	goleak.VerifyTestMain(m)
}

// dial dials addr, closing the client when the test ends.
func dial(t testing.TB, addr string, opts ...client.Option) *client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, addr, opts...)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// openLock opens the lock called name of c, failing t on an error.
func openLock(t testing.TB, c *client.Client, name string, opts ...locks.Option) *client.Lock {
	t.Helper()
	return lockertest.Open(t, c.OpenLock, name, opts...)
}

// proxy is a TCP proxy in front of a server, whose connections a test
// cuts, and which it can make refuse new ones: a network that fails.
type proxy struct {
	lis    net.Listener
	target string

	mu     sync.Mutex
	thawed *sync.Cond
	conns  map[net.Conn]struct{}
	refuse bool
	frozen bool // bytes read are held until thawed: a partition
	wg     sync.WaitGroup
}

func newProxy(t testing.TB, target string) *proxy {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{lis: lis, target: target, conns: make(map[net.Conn]struct{})}
	p.thawed = sync.NewCond(&p.mu)
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *proxy) addr() string { return p.lis.Addr().String() }

func (p *proxy) accept() {
	defer p.wg.Done()
	for {
		in, err := p.lis.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		refuse := p.refuse
		p.mu.Unlock()
		if refuse {
			in.Close()
			continue
		}
		p.mu.Lock()
		target := p.target
		p.mu.Unlock()
		out, err := net.Dial("tcp", target)
		if err != nil {
			in.Close()
			continue
		}
		p.mu.Lock()
		p.conns[in], p.conns[out] = struct{}{}, struct{}{}
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(in, out)
		go p.pipe(out, in)
	}
}

func (p *proxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			for p.frozen {
				p.thawed.Wait()
			}
			p.mu.Unlock()
			if _, err := dst.Write(buf[:n]); err != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	dst.Close()
	src.Close()
	p.mu.Lock()
	delete(p.conns, dst)
	delete(p.conns, src)
	p.mu.Unlock()
}

// cut closes every connection through the proxy, and makes it refuse new
// ones while refuse is true.
func (p *proxy) cut(refuse bool) {
	p.mu.Lock()
	p.refuse = refuse
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
}

func (p *proxy) setRefuse(refuse bool) {
	p.mu.Lock()
	p.refuse = refuse
	p.mu.Unlock()
}

// retarget sends new connections to target.
func (p *proxy) retarget(target string) {
	p.mu.Lock()
	p.target = target
	p.mu.Unlock()
}

// freeze holds every byte through the proxy until it thaws, the
// connections staying open: a network partition.
func (p *proxy) freeze(frozen bool) {
	p.mu.Lock()
	p.frozen = frozen
	p.thawed.Broadcast()
	p.mu.Unlock()
}

func (p *proxy) close() {
	p.lis.Close()
	p.cut(true)
	p.freeze(false)
	p.wg.Wait()
}
