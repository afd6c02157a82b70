package etcdlocks_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/holdline/locks"
	etcdlocks "github.com/holdline/locks/etcd"
)

// childEnv names the endpoints and prefix (endpoints;prefix) a child
// process of TestKilledHolder holds a key under.
const childEnv = "ETCDLOCKS_TEST_CHILD"

// childTTL is the ttl of the child's lease: the least etcd grants with
// the tests' election timeout.
const childTTL = time.Second

// childHold holds key 9 of lock invoices in etcd, says so on stdout, and
// waits to be killed.
func childHold() {
	endpoints, prefix, _ := strings.Cut(os.Getenv(childEnv), ";")
	fail := func(err error) {
		fmt.Println("error", err)
		os.Exit(2)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: strings.Split(endpoints, ","), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		fail(err)
	}
	s, err := etcdlocks.Open(cli, prefix)
	if err != nil {
		fail(err)
	}
	l, err := s.OpenLock("invoices", locks.TTL(childTTL))
	if err != nil {
		fail(err)
	}
	err = l.Hold(context.Background(), 9, func(ctx context.Context, ls *locks.Lease) error {
		fmt.Printf("held %d\n", ls.Fence)
		time.Sleep(time.Hour)
		return nil
	})
	fail(err)
}

// A holder process killed with SIGKILL: its lease is no longer renewed,
// and the key goes on within its ttl, to a waiter of another process,
// with a higher fence.
func TestKilledHolder(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child process")
	}
	prefix := newPrefix(t)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+strings.Join(shared.endpoints, ",")+";"+prefix)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var fence uint64
	select {
	case line := <-lines:
		if _, err := fmt.Sscanf(line, "held %d", &fence); err != nil {
			t.Fatalf("the child said %q", line)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the child did not hold the key")
	}
	cli := newClient(t, shared.endpoints)
	o := openLock(t, open(t, cli, prefix), "invoices", locks.TTL(childTTL))
	w := start(context.Background(), o, 9, locks.Wait(time.Minute))
	eventually(t, "a waiter", func() bool { return count(t, cli, prefix) == 2 })
	killed := time.Now()
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	ls, _ := w.held(t)
	after := ls.Granted.Sub(killed)
	t.Logf("the key went on %v after the kill (ttl %v)", after, childTTL)
	// etcd checks for lapsed leases every 500 ms, and revokes them
	// through raft: the key goes on past the ttl by up to that.
	if after > childTTL+time.Second {
		t.Fatalf("the key went on %v after the kill, ttl %v", after, childTTL)
	}
	if ls.Fence <= fence {
		t.Fatalf("fence %d after %d", ls.Fence, fence)
	}
	if err := w.result(t, nil); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	if !strings.Contains(cmd.ProcessState.String(), "killed") {
		t.Fatalf("the child ended: %v", cmd.ProcessState)
	}
}

// A process cut from etcd (its client closed under it) while it holds a
// key: its function's context ends, "its ttl ran out", before the ttl
// from its last renewal, and so before etcd lets the lease lapse; a
// waiter of another process then gets the key, with a higher fence, and
// the cut holder's Hold fails lost.
func TestCutFromEtcd(t *testing.T) {
	prefix := newPrefix(t)
	cut := newClient(t, shared.endpoints)
	l := openLock(t, open(t, cut, prefix), "invoices", locks.TTL(time.Second))
	cli := newClient(t, shared.endpoints)
	o := openLock(t, open(t, cli, prefix), "invoices")

	r := start(context.Background(), l, 9)
	ls, fctx := r.held(t)
	w := start(context.Background(), o, 9, locks.Wait(time.Minute))
	eventually(t, "a waiter", func() bool { return count(t, cli, prefix) == 2 })

	cutAt := time.Now()
	cut.Close()
	<-fctx.Done()
	ended := time.Since(cutAt)
	wantMessage(t, context.Cause(fctx), `lock invoices: key "9": the lease was lost: its ttl ran out`)
	wls, _ := w.held(t)
	granted := wls.Granted.Sub(cutAt)
	t.Logf("cut: the function's context ended after %v, the waiter got the key after %v (ttl 1s)", ended, granted)
	if ended >= time.Second {
		t.Fatalf("the cut holder's context ended %v after the cut, at or past the ttl", ended)
	}
	if granted <= ended {
		t.Fatalf("the waiter got the key %v after the cut, before the cut holder's context ended (%v)", granted, ended)
	}
	if wls.Fence <= ls.Fence {
		t.Fatalf("fence %d after %d", wls.Fence, ls.Fence)
	}
	err := r.result(t, nil)
	wantMessage(t, err, `lock invoices: key "9": the lease was lost: its ttl ran out`)
	if !errors.Is(err, locks.ErrLost) {
		t.Fatal(err)
	}
	if err := w.result(t, nil); err != nil {
		t.Fatal(err)
	}
	// The cut process's later holds fail, naming etcd's error.
	err = l.Hold(context.Background(), 9, noop)
	if err == nil || !strings.HasPrefix(err.Error(), `lock invoices: key "9": etcd: `) {
		t.Fatalf("a hold through a closed client: %v", err)
	}
}

// A waiter whose process is cut from etcd fails closed when its lease is
// given up ("the session expired"), and leaves the line with it.
func TestCutWaiterExpires(t *testing.T) {
	prefix := newPrefix(t)
	cli := newClient(t, shared.endpoints)
	l := openLock(t, open(t, cli, prefix), "invoices")
	cut := newClient(t, shared.endpoints)
	o := openLock(t, open(t, cut, prefix), "invoices", locks.TTL(time.Second))
	r := start(context.Background(), l, 9)
	r.held(t)
	w := start(context.Background(), o, 9, locks.Wait(time.Minute))
	eventually(t, "a waiter", func() bool { return count(t, cli, prefix) == 2 })
	cut.Close()
	wantMessage(t, w.wait(t), `lock invoices: key "9": the session expired: closed`)
	eventually(t, "the waiter's key gone with its lease", func() bool { return count(t, cli, prefix) == 1 })
	if err := r.result(t, nil); err != nil {
		t.Fatal(err)
	}
}

// A held key deleted by another hand (an operator, a revoker whose clock
// runs ahead): the holder's function's context ends at once, and its Hold
// fails lost.
func TestKeyDeletedUnderHolder(t *testing.T) {
	prefix := newPrefix(t)
	cli := newClient(t, shared.endpoints)
	l := openLock(t, open(t, cli, prefix), "invoices")
	r := start(context.Background(), l, 9)
	_, fctx := r.held(t)
	if _, err := cli.Delete(context.Background(), prefix+"/", clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-fctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the function's context did not end")
	}
	wantMessage(t, context.Cause(fctx), `lock invoices: key "9": the lease was lost: its ttl ran out`)
	wantMessage(t, r.result(t, nil), `lock invoices: key "9": the lease was lost: its ttl ran out`)
}

// A Store's lease revoked by another hand: a function running under it
// sees its context end; a hold after it finds it gone and joins under a
// new lease.
func TestLeaseRevokedByAnotherHand(t *testing.T) {
	prefix := newPrefix(t)
	cli := newClient(t, shared.endpoints)
	l := openLock(t, open(t, cli, prefix), "invoices")
	ctx := context.Background()
	// leaseOf returns the lease of the one key under the prefix.
	leaseOf := func() clientv3.LeaseID {
		t.Helper()
		resp, err := cli.Get(ctx, prefix+"/", clientv3.WithPrefix())
		if err != nil || len(resp.Kvs) != 1 {
			t.Fatalf("the keys under the prefix: %v, %v", resp, err)
		}
		return clientv3.LeaseID(resp.Kvs[0].Lease)
	}
	r := start(ctx, l, 9)
	_, fctx := r.held(t)
	if _, err := cli.Revoke(ctx, leaseOf()); err != nil {
		t.Fatal(err)
	}
	<-fctx.Done()
	wantMessage(t, r.result(t, nil), `lock invoices: key "9": the lease was lost: its ttl ran out`)
	for range 3 {
		var id clientv3.LeaseID
		if err := l.Hold(ctx, 9, func(context.Context, *locks.Lease) error { id = leaseOf(); return nil }); err != nil {
			t.Fatal(err)
		}
		if _, err := cli.Revoke(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
}
