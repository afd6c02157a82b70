package client_test

import (
	"context"
	"testing"
	"time"

	"github.com/holdline/locks"
	"github.com/holdline/locks/client"
	"github.com/holdline/locks/internal/lockertest"
	"github.com/holdline/locks/internal/servertest"
)

// childEnv names the server a child process of TestKilledHolder holds a
// key of.
const childEnv = "LOCKS_TEST_CHILD_ADDR"

const childTTL = 600 * time.Millisecond

// childHold holds key 9 of lock invoices through addr until killed.
func childHold(addr string) {
	lockertest.ChildHold(func() (locks.Locker, error) {
		c, err := client.Dial(context.Background(), addr)
		if err != nil {
			return nil, err
		}
		return c.OpenLock("invoices", locks.TTL(childTTL))
	})
}

// A client process killed with SIGKILL while it holds a key: the key is
// free at the ttl after the session's last renewal, never before, and a
// waiter gets it with a higher fence.
func TestKilledHolder(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child process")
	}
	s := servertest.Serve(t)
	child := lockertest.StartChild(t, childEnv+"="+s.Addr, 30*time.Second)
	o := openLock(t, dial(t, s.Addr), "invoices", locks.TTL(childTTL))
	after := child.Killed(t, o, func() { lockertest.Queued(t, s.Store, 1) })
	t.Logf("the key went on %v after the kill (ttl %v)", after, childTTL)
	// The session's last renewal came at most a third of a ttl (and a
	// round trip) before the kill; the lapse fires within a tick or so.
	if after < childTTL-childTTL/3-20*time.Millisecond || after > childTTL+100*time.Millisecond {
		t.Fatalf("the key went on %v after the kill, ttl %v", after, childTTL)
	}
}
