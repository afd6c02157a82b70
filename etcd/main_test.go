package etcdlocks_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/goleak"
	"go.uber.org/zap"

	"github.com/holdline/locks"
	etcdlocks "github.com/holdline/locks/etcd"
	"github.com/holdline/locks/internal/lockertest"
)

// shared is the one-member etcd most tests use, each under a prefix of
// its own; TestMain starts it before the tests and stops it after.
var shared *cluster

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		childHold() // a holder for TestKilledHolder, until killed
	}
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "etcdlocks-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer os.RemoveAll(dir)
	shared, err = startCluster(dir, 1)
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting etcd:", err)
		return 2
	}
	code := m.Run()
	shared.stop()
	if code == 0 {
		if err := noLeaks(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			return 1
		}
	}
	return code
}

// noLeaks reports the goroutines left once every Store, client and etcd
// member is closed: none may be left of this package's or of etcd's.
// etcd's members close their peers' HTTP connections as they stop, and
// the other end's goroutines see it a moment later: goleak looks again
// for up to 10 s.
func noLeaks() error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := goleak.Find()
		if err == nil || time.Now().After(deadline) {
			return err
		}
	}
}

// cluster is a running etcd of one or more members on loopback ports.
type cluster struct {
	members   []*embed.Etcd
	endpoints []string
}

// startCluster starts n members of one cluster in dir, on loopback ports
// picked free, and waits until they serve.
func startCluster(dir string, n int) (*cluster, error) {
	ports, err := freePorts(2 * n)
	if err != nil {
		return nil, err
	}
	var initial []string
	for i := range n {
		initial = append(initial, fmt.Sprintf("m%d=http://127.0.0.1:%d", i, ports[2*i+1]))
	}
	c := &cluster{}
	cfgs := make([]*embed.Config, n)
	for i := range n {
		cfg := embed.NewConfig()
		cfg.Name = fmt.Sprintf("m%d", i)
		cfg.Dir = filepath.Join(dir, cfg.Name)
		cu, _ := url.Parse(fmt.Sprintf("http://127.0.0.1:%d", ports[2*i]))
		pu, _ := url.Parse(fmt.Sprintf("http://127.0.0.1:%d", ports[2*i+1]))
		cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*cu}, []url.URL{*cu}
		cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*pu}, []url.URL{*pu}
		cfg.InitialCluster = strings.Join(initial, ",")
		cfg.InitialClusterToken = "etcdlocks-test"
		cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
		cfg.UnsafeNoFsync = true
		cfg.EnableGRPCGateway = false
		cfg.MaxTxnOps = 1024
		// A 50 ms heartbeat and a 500 ms election timeout: leases of 1 s
		// (etcd's least is 1.5 election timeouts, rounded up to seconds),
		// and an election in well under a second.
		cfg.TickMs, cfg.ElectionMs = 50, 500
		cfgs[i] = cfg
		c.endpoints = append(c.endpoints, cu.String())
	}
	// Members of more than one wait for each other as they start.
	type started struct {
		i   int
		e   *embed.Etcd
		err error
	}
	ch := make(chan started, n)
	for i, cfg := range cfgs {
		go func() {
			e, err := embed.StartEtcd(cfg)
			ch <- started{i, e, err}
		}()
	}
	c.members = make([]*embed.Etcd, n)
	var first error
	for range n {
		s := <-ch
		c.members[s.i] = s.e
		if s.err != nil && first == nil {
			first = s.err
		}
	}
	if first != nil {
		c.stop()
		return nil, first
	}
	for _, e := range c.members {
		select {
		case <-e.Server.ReadyNotify():
		case <-time.After(60 * time.Second):
			c.stop()
			return nil, errors.New("etcd was not ready in a minute")
		}
	}
	return c, nil
}

// stop stops every member still running.
func (c *cluster) stop() {
	for i := range c.members {
		c.stopMember(i)
	}
}

// stopMember stops member i, if running.
func (c *cluster) stopMember(i int) {
	if e := c.members[i]; e != nil {
		e.Close()
		c.members[i] = nil
	}
}

// freePorts returns n loopback ports nothing listened on a moment ago.
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// newClient returns a client of the cluster at endpoints, closed when the
// test ends: one "process" of the test.
func newClient(t testing.TB, endpoints []string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

var prefixes atomic.Int64

// newPrefix returns a prefix no other test uses.
func newPrefix(t testing.TB) string {
	return fmt.Sprintf("/etcdlocks-test/%s/%d", strings.ReplaceAll(t.Name(), "/", "_"), prefixes.Add(1))
}

// open opens a Store on cli under prefix, closed when the test ends.
func open(t testing.TB, cli *clientv3.Client, prefix string, opts ...etcdlocks.Option) *etcdlocks.Store {
	t.Helper()
	s, err := etcdlocks.Open(cli, prefix, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// openLock opens the lock called name of s, failing t on an error.
func openLock(t testing.TB, s *etcdlocks.Store, name string, opts ...locks.Option) *etcdlocks.Lock {
	t.Helper()
	return lockertest.Open(t, s.OpenLock, name, opts...)
}

// count returns how many keys etcd has under prefix.
func count(t testing.TB, cli *clientv3.Client, prefix string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, prefix+"/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	return resp.Count
}
