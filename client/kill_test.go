package client_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/holdline/locks"
	"github.com/holdline/locks/client"
)

// childEnv names the server a child process of TestKilledHolder holds a
// key of.
const childEnv = "LOCKS_TEST_CHILD_ADDR"

const childTTL = 600 * time.Millisecond

// childHold holds key 9 of lock invoices through addr, says so on stdout,
// and waits to be killed.
func childHold(addr string) {
	ctx := context.Background()
	c, err := client.Dial(ctx, addr)
	if err != nil {
		fmt.Println("error", err)
		os.Exit(2)
	}
	l, err := c.OpenLock("invoices", locks.TTL(childTTL))
	if err != nil {
		fmt.Println("error", err)
		os.Exit(2)
	}
	err = l.Hold(ctx, 9, func(ctx context.Context, ls *locks.Lease) error {
		fmt.Printf("held %d\n", ls.Fence)
		<-ctx.Done()
		time.Sleep(time.Hour)
		return nil
	})
	fmt.Println("error", err)
	os.Exit(2)
}

// A client process killed with SIGKILL while it holds a key: the key is
// free at the ttl after the session's last renewal, never before, and a
// waiter gets it with a higher fence.
func TestKilledHolder(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child process")
	}
	s := serve(t)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+s.addr)
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
	case <-time.After(30 * time.Second):
		t.Fatal("the child did not hold the key")
	}
	o := openLock(t, dial(t, s.addr), "invoices", locks.TTL(childTTL))
	w := start(context.Background(), o, 9, locks.Wait(time.Minute))
	queued(t, s.store, 1)
	killed := time.Now()
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	ls, _ := w.held(t)
	after := ls.Granted.Sub(killed)
	t.Logf("the key went on %v after the kill (ttl %v)", after, childTTL)
	// The session's last renewal came at most a third of a ttl (and a
	// round trip) before the kill; the lapse fires within a tick or so.
	if after < childTTL-childTTL/3-20*time.Millisecond || after > childTTL+100*time.Millisecond {
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
