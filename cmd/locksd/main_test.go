package main

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/holdline/locks"
	"github.com/holdline/locks/client"
)

// mainEnv makes the test binary run main with the arguments after "--":
// the daemon as a process, for TestSIGTERM.
const mainEnv = "LOCKSD_TEST_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(mainEnv) != "" {
		for i, a := range os.Args {
			if a == "--" {
				os.Args = append([]string{"locksd"}, os.Args[i+1:]...)
				break
			}
		}
		main()
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

const token = "token-of-the-daemon-test-0123456789"

func TestServeHoldAndShutDown(t *testing.T) {
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens")
	if err := os.WriteFile(tokens, []byte(token+" invoices\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	addrs := make(chan [2]net.Addr, 1)
	done := make(chan error, 1)
	var logs strings.Builder
	go func() {
		done <- run(ctx, []string{"--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0", "--tokens", tokens, "--log-level", "debug", "--profile-holds", "1"},
			&syncWriter{w: &logs}, func(g, a net.Addr) { addrs <- [2]net.Addr{g, a} })
	}()
	var grpcAddr, adminAddr string
	select {
	case a := <-addrs:
		grpcAddr, adminAddr = a[0].String(), a[1].String()
	case err := <-done:
		t.Fatal(err)
	}

	c, err := client.Dial(ctx, grpcAddr, client.WithToken(token))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	l, err := c.OpenLock("invoices")
	if err != nil {
		t.Fatal(err)
	}
	fence, err := locks.HoldValue(ctx, l, 9, func(ctx context.Context, ls *locks.Lease) (uint64, error) { return ls.Fence, nil })
	if err != nil || fence == 0 {
		t.Fatalf("HoldValue: %d, %v", fence, err)
	}

	for path, want := range map[string]string{
		"/metrics":      "locks_grants_total 1\n",
		"/metrics#":     "locksd_sessions 1\n",
		"/debug/pprof/": "holdline.locks.holds",
	} {
		path = strings.TrimSuffix(path, "#")
		resp, err := http.Get("http://" + adminAddr + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(body), want) {
			t.Fatalf("%s: no %q in %s", path, want, body)
		}
	}
	conn, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	h, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil || h.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health: %v, %v", h, err)
	}

	// Shutting down while a function holds a key: its lease is lost.
	held := make(chan struct{})
	holdErr := make(chan error, 1)
	go func() {
		holdErr <- l.Hold(context.Background(), 10, func(ctx context.Context, _ *locks.Lease) error {
			close(held)
			<-ctx.Done()
			return nil
		})
	}()
	<-held
	stop()
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
	err = <-holdErr
	if !errors.Is(err, locks.ErrLost) || err.Error() != `lock invoices: key "10": the lease was lost: its store closed` {
		t.Fatalf("Hold: %v", err)
	}
	for _, want := range []string{"msg=serving", "msg=\"shutting down\"", "msg=stopped"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("no %s in the logs:\n%s", want, logs.String())
		}
	}
}

func TestRefusedSettings(t *testing.T) {
	for _, args := range [][]string{
		{"--listen", "0.0.0.0:0"},
		{"--listen", ":0"},
		{"--tls-cert", "c.pem"},
		{"--admin", "0.0.0.0:0"},
		{"--tokens", filepath.Join(t.TempDir(), "none")},
		{"--log-level", "loud"},
		{"--profile-holds", "-1"},
		{"--shutdown-timeout", "-5s"},
		{"--max-sessions", "0"},
		{"--max-per-session", "-1"},
		{"extra"},
	} {
		if err := run(context.Background(), args, io.Discard, nil); err == nil {
			t.Errorf("%q: no error", args)
		}
	}
}

// TestShutDownAtOnce: told to stop as soon as it is ready, before its
// server may have begun to serve, the daemon stops cleanly.
func TestShutDownAtOnce(t *testing.T) {
	for range 20 {
		ctx, cancel := context.WithCancel(context.Background())
		err := run(ctx, []string{"--listen", "127.0.0.1:0"}, io.Discard, func(net.Addr, net.Addr) { cancel() })
		cancel()
		if err != nil {
			t.Fatal(err)
		}
	}
}

// The daemon as a process: SIGTERM shuts it down gracefully, exit 0.
func TestSIGTERM(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child process")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$", "--", "--listen", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), mainEnv+"=1")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	addrRE := regexp.MustCompile(`msg=serving addr=(\S+)`)
	sc := bufio.NewScanner(stderr)
	var addr string
	var logs []string
	for addr == "" && sc.Scan() {
		logs = append(logs, sc.Text())
		if m := addrRE.FindStringSubmatch(sc.Text()); m != nil {
			addr = m[1]
		}
	}
	if addr == "" {
		t.Fatalf("no address in %q", logs)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	l, _ := c.OpenLock("invoices")
	if err := l.Hold(ctx, 9, func(context.Context, *locks.Lease) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for sc.Scan() {
		logs = append(logs, sc.Text())
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("locksd: %v\n%s", err, strings.Join(logs, "\n"))
	}
	if !strings.Contains(strings.Join(logs, "\n"), "msg=stopped") {
		t.Fatalf("no stop in the logs:\n%s", strings.Join(logs, "\n"))
	}
}

// syncWriter is a writer safe for the daemon's goroutines.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}
