package lockertest

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
)

// Child is a holder process for the tests of a holder that dies: this
// test binary run again, holding key 9 of a lock (ChildHold) until it is
// killed.
type Child struct {
	cmd *exec.Cmd
	// Fence is the fence of the key it holds.
	Fence uint64
}

// StartChild runs this test binary again, running no test, with env
// (NAME=VALUE) added: its TestMain sees env and calls ChildHold. It waits
// up to within for the child to hold its key. The child is killed when
// the test ends, if still running.
func StartChild(t *testing.T, env string, within time.Duration) *Child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	c := &Child{cmd: cmd}
	select {
	case line := <-lines:
		if _, err := fmt.Sscanf(line, "held %d", &c.Fence); err != nil {
			t.Fatalf("the child said %q", line)
		}
	case <-time.After(within):
		t.Fatal("the child did not hold the key")
	}
	return c
}

// Killed has a hold of o wait in line for the child's key, waits for it
// to stand there (queued), then kills the child with SIGKILL. It fails t
// unless the waiter gets the key with a higher fence and SIGKILL ended
// the child, and returns how long after the kill the key was granted
// (for the caller to bound: when a dead holder's key may go on is the
// Locker's own).
func (c *Child) Killed(t testing.TB, o locks.Locker, queued func()) time.Duration {
	t.Helper()
	w := Start(context.Background(), o, 9, locks.Wait(time.Minute))
	queued()
	killed := time.Now()
	if err := c.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	ls, _ := w.Held(t)
	if ls.Fence <= c.Fence {
		t.Fatalf("fence %d after %d", ls.Fence, c.Fence)
	}
	if err := w.Result(t, nil); err != nil {
		t.Fatal(err)
	}
	c.cmd.Wait()
	if !strings.Contains(c.cmd.ProcessState.String(), "killed") {
		t.Fatalf("the child ended: %v", c.cmd.ProcessState) // of itself: it did not hold on
	}
	return ls.Granted.Sub(killed)
}

// ChildHold is the child's side of StartChild: it opens its lock with
// open, holds key 9 of it, says so on stdout with the lease's fence, and
// waits to be killed. It exits 2, saying why, if it cannot.
func ChildHold(open func() (locks.Locker, error)) {
	l, err := open()
	if err == nil {
		err = l.Hold(context.Background(), 9, func(ctx context.Context, ls *locks.Lease) error {
			fmt.Printf("held %d\n", ls.Fence)
			time.Sleep(time.Hour)
			return nil
		})
	}
	fmt.Println("error", err)
	os.Exit(2)
}
