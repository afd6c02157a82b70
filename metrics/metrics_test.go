package metrics_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/holdline/locks"
	"github.com/holdline/locks/metrics"
)

// TestMain fails the run if a test leaves a goroutine behind.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// held is a hold running in a goroutine of its own, its function holding
// the key until let go.
type held struct {
	granted chan struct{}
	letGo   chan struct{}
	done    chan error
}

// holdInBackground starts a Hold of key on l whose function holds it
// until h.letGo is closed or the lease is lost.
func holdInBackground(ctx context.Context, l *locks.Lock, key any) *held {
	h := &held{granted: make(chan struct{}), letGo: make(chan struct{}), done: make(chan error, 1)}
	go func() {
		h.done <- l.Hold(ctx, key, func(ctx context.Context, _ *locks.Lease) error {
			close(h.granted)
			select {
			case <-h.letGo:
			case <-ctx.Done():
			}
			return nil
		})
	}()
	return h
}

// inLine starts a Hold of key on l that stands in line; its error comes
// on the returned channel, and fn runs holding the key if granted.
func inLine(ctx context.Context, l *locks.Lock, key any, fn locks.HoldFunc, opts ...locks.Option) <-chan error {
	done := make(chan error, 1)
	go func() { done <- l.Hold(ctx, key, fn, opts...) }()
	synctest.Wait() // it stands in line
	return done
}

// nop is a HoldFunc that lets its key go at once.
func nop(context.Context, *locks.Lease) error { return nil }

// sleeping returns a HoldFunc that holds its key for d.
func sleeping(d time.Duration) locks.HoldFunc {
	return func(context.Context, *locks.Lease) error {
		time.Sleep(d)
		return nil
	}
}

// openLock opens the lock called name in st, failing the test on an error.
func openLock(t *testing.T, st *locks.Store, name string, opts ...locks.Option) *locks.Lock {
	t.Helper()
	l, err := locks.OpenLock(st, name, opts...)
	require.NoError(t, err)
	return l
}

// gauges is the exposition of the three gauges at the given values.
func gauges(keys, running, waiters int) string {
	return strings.NewReplacer("KEYS", strconv.Itoa(keys), "RUNNING", strconv.Itoa(running), "WAITERS", strconv.Itoa(waiters)).Replace(`
# HELP locks_functions_running Keys held by running functions now, one per key of a HoldAll, revoked ones included.
# TYPE locks_functions_running gauge
locks_functions_running RUNNING
# HELP locks_keys Keys with a holder or a waiter now.
# TYPE locks_keys gauge
locks_keys KEYS
# HELP locks_waiters Waiters standing in the keys' lines now.
# TYPE locks_waiters gauge
locks_waiters WAITERS
`)
}

var gaugeNames = []string{"locks_keys", "locks_functions_running", "locks_waiters"}

// TestCollectorAfterScript runs a script of holds on a store made with
// RecordTimes, on synctest's clock, and reads the whole exposition
// through a pedantic registry (which also checks Collect against
// Describe): every figure is what the script did, to the nanosecond.
func TestCollectorAfterScript(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := locks.NewStore(locks.RecordTimes())
		defer st.Close()
		reg := prometheus.NewPedanticRegistry()
		c := metrics.NewCollector(st)
		require.NoError(t, reg.Register(c))
		require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(gauges(0, 0, 0)), gaugeNames...), "a new store")
		require.Equal(t, 2, testutil.CollectAndCount(c, "locks_wait_duration_seconds", "locks_hold_duration_seconds"),
			"the histograms of a store that records times, empty from the first scrape")

		ctx := context.Background()
		l := openLock(t, st, "invoices")

		// 1. A free key held 30 ms: grant 1, held 30 ms.
		require.NoError(t, l.Hold(ctx, "a", sleeping(30*time.Millisecond)))

		// 2. Key 9 held 2 s by h, while three waiters come.
		h := holdInBackground(ctx, l, 9)
		<-h.granted // grant 2
		// A waiter whose wait passes after 1 s: wait 1, timed out 1.
		require.ErrorIs(t, l.Hold(ctx, 9, nop, locks.Wait(time.Second)), locks.ErrInUse)
		// A waiter whose context ends after 100 ms in line: wait 2, canceled 1.
		wctx, cancel := context.WithCancel(ctx)
		w2 := inLine(wctx, l, 9, nop)
		time.Sleep(100 * time.Millisecond)
		cancel()
		require.ErrorIs(t, <-w2, context.Canceled)
		// A waiter that joins at 1.1 s and is granted when h lets go at
		// 2 s: wait 3, 900 ms in line, grant 3, then held 300 ms.
		w3 := inLine(ctx, l, 9, sleeping(300*time.Millisecond), locks.Wait(locks.Forever))
		require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(gauges(1, 1, 1)), gaugeNames...),
			"key 9 held, one in its line")
		time.Sleep(900 * time.Millisecond)
		close(h.letGo) // h held 2 s
		require.NoError(t, <-h.done)
		require.NoError(t, <-w3)

		// 3. A lease revoked at its 5 s maxHold: grant 4, held 5 s.
		require.ErrorIs(t, l.Hold(ctx, "m", func(ctx context.Context, _ *locks.Lease) error {
			<-ctx.Done()
			return nil
		}, locks.MaxHold(5*time.Second)), locks.ErrLost)

		// 4. A session's grant that lapses at its 2 s ttl, released at
		// 3 s: grant 5, revoked at its ttl, held 3 s (to its release).
		sess := st.NewSession()
		sl := openLock(t, st, "sessions", locks.TTL(2*time.Second))
		g, err := sl.Acquire(ctx, sess, "s")
		require.NoError(t, err)
		time.Sleep(3 * time.Second)
		require.ErrorIs(t, g.Release(), locks.ErrLost)
		require.NoError(t, sess.Close())

		// 5. A line filled to its limit, MaxWaiters waiters who all wait
		// 1 s and time out, and one more refused at once; the key's
		// holder holds it 8 s: grant 6, MaxWaiters waits and timeouts,
		// one refused.
		f := holdInBackground(ctx, l, "full")
		<-f.granted
		var line sync.WaitGroup
		for range locks.MaxWaiters {
			line.Go(func() {
				if err := l.Hold(ctx, "full", nop, locks.Wait(time.Second)); !errors.Is(err, locks.ErrInUse) {
					t.Errorf("a waiter of the full line: %v", err)
				}
			})
		}
		synctest.Wait()
		require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(gauges(1, 1, locks.MaxWaiters)), gaugeNames...),
			"a full line")
		require.ErrorIs(t, l.Hold(ctx, "full", nop), locks.ErrLimit)
		line.Wait()
		time.Sleep(7 * time.Second)
		close(f.letGo)
		require.NoError(t, <-f.done)

		// 6. A key held 20 s when the store closes, with a waiter in line:
		// grant 7, wait MaxWaiters+4, revoked at close, held 20 s.
		cl := holdInBackground(ctx, l, "c")
		<-cl.granted
		w := inLine(ctx, l, "c", nop, locks.Wait(locks.Forever))
		time.Sleep(20 * time.Second)
		require.NoError(t, st.Close())
		require.ErrorIs(t, <-cl.done, locks.ErrLost)
		require.ErrorIs(t, <-w, locks.ErrClosed)

		require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP locks_functions_running Keys held by running functions now, one per key of a HoldAll, revoked ones included.
# TYPE locks_functions_running gauge
locks_functions_running 0
# HELP locks_grants_total Keys given to a holder, at once or from the key's line.
# TYPE locks_grants_total counter
locks_grants_total 7
# HELP locks_hold_duration_seconds Time from a grant until the holder let the key go or its function returned, in seconds (only with RecordTimes).
# TYPE locks_hold_duration_seconds histogram
locks_hold_duration_seconds_bucket{le="0.005"} 0
locks_hold_duration_seconds_bucket{le="0.01"} 0
locks_hold_duration_seconds_bucket{le="0.025"} 0
locks_hold_duration_seconds_bucket{le="0.05"} 1
locks_hold_duration_seconds_bucket{le="0.1"} 1
locks_hold_duration_seconds_bucket{le="0.25"} 1
locks_hold_duration_seconds_bucket{le="0.5"} 2
locks_hold_duration_seconds_bucket{le="1"} 2
locks_hold_duration_seconds_bucket{le="2.5"} 3
locks_hold_duration_seconds_bucket{le="5"} 5
locks_hold_duration_seconds_bucket{le="10"} 6
locks_hold_duration_seconds_bucket{le="+Inf"} 7
locks_hold_duration_seconds_sum 38.33
locks_hold_duration_seconds_count 7
# HELP locks_keys Keys with a holder or a waiter now.
# TYPE locks_keys gauge
locks_keys 0
# HELP locks_line_full_total Holds refused at once because the key's line of waiters was full.
# TYPE locks_line_full_total counter
locks_line_full_total 1
# HELP locks_revocations_total Leases revoked, by reason: maxhold (the lease reached its maxHold), ttl (a session's lease ran past its ttl unrenewed), close (the store closed).
# TYPE locks_revocations_total counter
locks_revocations_total{reason="close"} 1
locks_revocations_total{reason="maxhold"} 1
locks_revocations_total{reason="ttl"} 1
# HELP locks_wait_duration_seconds Time in line of the waiters that were granted the key, in seconds (only with RecordTimes).
# TYPE locks_wait_duration_seconds histogram
locks_wait_duration_seconds_bucket{le="0.005"} 0
locks_wait_duration_seconds_bucket{le="0.01"} 0
locks_wait_duration_seconds_bucket{le="0.025"} 0
locks_wait_duration_seconds_bucket{le="0.05"} 0
locks_wait_duration_seconds_bucket{le="0.1"} 0
locks_wait_duration_seconds_bucket{le="0.25"} 0
locks_wait_duration_seconds_bucket{le="0.5"} 0
locks_wait_duration_seconds_bucket{le="1"} 1
locks_wait_duration_seconds_bucket{le="2.5"} 1
locks_wait_duration_seconds_bucket{le="5"} 1
locks_wait_duration_seconds_bucket{le="10"} 1
locks_wait_duration_seconds_bucket{le="+Inf"} 1
locks_wait_duration_seconds_sum 0.9
locks_wait_duration_seconds_count 1
# HELP locks_waiters Waiters standing in the keys' lines now.
# TYPE locks_waiters gauge
locks_waiters 0
# HELP locks_waits_canceled_total Waiters whose context ended while they stood in line.
# TYPE locks_waits_canceled_total counter
locks_waits_canceled_total 1
# HELP locks_waits_timed_out_total Waits that passed with the key still held: holds that failed in use after waiting.
# TYPE locks_waits_timed_out_total counter
locks_waits_timed_out_total 10001
# HELP locks_waits_total Holds that stood in a key's line, however they left it.
# TYPE locks_waits_total counter
locks_waits_total 10004
`)))
	})
}

// TestCollectorLint: the collector's metrics, histograms included, pass
// Prometheus's own lint (names, units, suffixes, help).
func TestCollectorLint(t *testing.T) {
	st := locks.NewStore(locks.RecordTimes())
	defer st.Close()
	require.NoError(t, openLock(t, st, "invoices").Hold(context.Background(), 1, nop))
	c := metrics.NewCollector(st)
	require.Equal(t, 13, testutil.CollectAndCount(c), "8 counters, 3 gauges, 2 histograms")
	problems, err := testutil.CollectAndLint(c)
	require.NoError(t, err)
	require.Empty(t, problems)
}

// TestCollectorDescribe: Describe describes every metric, the histograms
// too before they are reported, each once.
func TestCollectorDescribe(t *testing.T) {
	st := locks.NewStore()
	defer st.Close()
	ch := make(chan *prometheus.Desc, 20)
	metrics.NewCollector(st).Describe(ch)
	close(ch)
	var names []string
	for d := range ch {
		s := d.String()
		names = append(names, s[strings.Index(s, `fqName: "`)+len(`fqName: "`):strings.Index(s, `", help`)])
	}
	require.ElementsMatch(t, []string{
		"locks_grants_total", "locks_waits_total", "locks_waits_timed_out_total", "locks_waits_canceled_total",
		"locks_revocations_total", "locks_line_full_total",
		"locks_keys", "locks_functions_running", "locks_waiters",
		"locks_wait_duration_seconds", "locks_hold_duration_seconds",
	}, names)
}

// TestCollectorWithoutTimes: a store made without RecordTimes counts no
// durations, so its collector reports no histograms, not empty ones that
// would say no hold ever waited; a store made with it reports them from
// the first scrape.
func TestCollectorWithoutTimes(t *testing.T) {
	ctx := context.Background()
	hists := []string{"locks_wait_duration_seconds", "locks_hold_duration_seconds"}

	st := locks.NewStore()
	defer st.Close()
	c := metrics.NewCollector(st)
	require.NoError(t, openLock(t, st, "invoices").Hold(ctx, 1, nop))
	require.Zero(t, testutil.CollectAndCount(c, hists...))
	require.NoError(t, testutil.CollectAndCompare(c, strings.NewReader(`
# HELP locks_grants_total Keys given to a holder, at once or from the key's line.
# TYPE locks_grants_total counter
locks_grants_total 1
`), "locks_grants_total"), "the counters are reported all the same")

	timed := locks.NewStore(locks.RecordTimes())
	defer timed.Close()
	tc := metrics.NewCollector(timed)
	require.Equal(t, 2, testutil.CollectAndCount(tc, hists...), "both, from the start, empty")
	require.NoError(t, openLock(t, timed, "invoices").Hold(ctx, 1, nop))
	require.Equal(t, 2, testutil.CollectAndCount(tc, hists...))
}

// TestCollectorOptions: a namespace, a subsystem and const labels name
// every metric, so collectors of two stores share one registry.
func TestCollectorOptions(t *testing.T) {
	a, b := locks.NewStore(), locks.NewStore()
	defer a.Close()
	defer b.Close()
	require.NoError(t, openLock(t, a, "invoices").Hold(context.Background(), 1, nop))

	reg := prometheus.NewPedanticRegistry()
	opts := []metrics.Option{metrics.Namespace("billing"), metrics.Subsystem("locks"), metrics.ConstLabels(prometheus.Labels{"app": "pay"})}
	require.NoError(t, reg.Register(metrics.NewCollector(a, append(opts, metrics.ConstLabels(prometheus.Labels{"store": "a"}))...)))
	require.NoError(t, reg.Register(metrics.NewCollector(b, append(opts, metrics.ConstLabels(prometheus.Labels{"store": "b"}))...)))
	require.Error(t, reg.Register(metrics.NewCollector(b, append(opts, metrics.ConstLabels(prometheus.Labels{"store": "b"}))...)),
		"the same labels twice")
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP billing_locks_grants_total Keys given to a holder, at once or from the key's line.
# TYPE billing_locks_grants_total counter
billing_locks_grants_total{app="pay",store="a"} 1
billing_locks_grants_total{app="pay",store="b"} 0
`), "billing_locks_grants_total"))

	for name, opt := range map[string]metrics.Option{
		"a bad namespace": metrics.Namespace("\xff"),
		"a bad label":     metrics.ConstLabels(prometheus.Labels{"\xff": "x"}),
		"a reason label":  metrics.ConstLabels(prometheus.Labels{"reason": "x"}),
		"a bad subsystem": metrics.Subsystem("\xff"),
	} {
		c := metrics.NewCollector(a, opt)
		require.Error(t, prometheus.NewRegistry().Register(c), name)
		ch := make(chan prometheus.Metric, 20)
		require.NotPanics(t, func() { c.Collect(ch) }, name)
		close(ch)
		var failed int
		for m := range ch {
			if m.Write(&dto.Metric{}) != nil {
				failed++
			}
		}
		require.NotZero(t, failed, "%s: a scrape fails with the reason", name)
	}
	require.Panics(t, func() { metrics.NewCollector(nil) })
}
