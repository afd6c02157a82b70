// Package metrics exports the figures of a locks.Store to Prometheus: a
// prometheus.Collector that reads Store.Stats once per scrape.
//
// Nothing on the hold path calls into Prometheus. A store counts its
// grants, waits and revocations itself, per shard, under the mutex a hold
// takes anyway (see locks.Store.Stats); the Collector only reads those
// figures when it is scraped, so registering it costs a hold nothing.
//
// With the default namespace a Collector reports:
//
//	locks_grants_total                      counter    keys given to a holder, at once or from a line
//	locks_waits_total                       counter    holds that stood in a line
//	locks_waits_timed_out_total             counter    waits that passed with the key still held (in use)
//	locks_waits_canceled_total              counter    waiters whose context ended in line
//	locks_revocations_total{reason}         counter    leases revoked: reason "maxhold", "ttl" or "close"
//	locks_line_full_total                   counter    holds refused because the key's line was full
//	locks_keys                              gauge      keys with a holder or a waiter now
//	locks_functions_running                 gauge      keys held by running functions now, one per key (revoked ones too)
//	locks_waiters                           gauge      waiters in the keys' lines now
//	locks_wait_duration_seconds             histogram  time in line of the waiters that were granted
//	locks_hold_duration_seconds             histogram  time from a grant until the holder let go
//
// The two histograms are counted only by a store made with
// locks.RecordTimes(), which costs each hold one more clock reading; see
// NewCollector for when they are reported. A hold's time held runs from
// its grant until its function returns (or, for a session's grant, until
// Release), so a lease revoked at its maxHold or at Close counts the time
// its function went on running after the revocation: the figure a hung
// holder shows up in. A waiter's time in line is counted only when it is
// granted; waits that time out or are canceled show in their counters.
package metrics

import (
	"maps"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/holdline/locks"
)

// DefaultNamespace is the first part of every metric's name unless
// Namespace says otherwise: locks_grants_total, and so on.
const DefaultNamespace = "locks"

// The values of the reason label of the revocations counter, one per
// reason a lease is revoked.
const (
	ReasonMaxHold = "maxhold" // the lease reached its maxHold (locks.MaxHold)
	ReasonTTL     = "ttl"     // a session's lease ran past its ttl unrenewed (locks.TTL)
	ReasonClose   = "close"   // the store closed under the holder
)

// Option is a setting of a Collector, given to NewCollector: Namespace,
// Subsystem or ConstLabels.
type Option func(*config)

type config struct {
	namespace, subsystem string
	labels               prometheus.Labels
}

// Namespace sets the first part of every metric's name; the default is
// DefaultNamespace. Namespace("billing") with Subsystem("locks") names
// billing_locks_grants_total, and so on; an empty namespace leaves the
// part out. Keep to letters, digits and underscores, which every scraper
// and Prometheus's lint accept; a name that is not valid UTF-8 makes the
// Collector's registration fail.
func Namespace(ns string) Option { return func(c *config) { c.namespace = ns } }

// Subsystem sets the part of every metric's name between the namespace
// and the metric's own name; the default is none.
func Subsystem(s string) Option { return func(c *config) { c.subsystem = s } }

// ConstLabels adds labels with fixed values to every metric, such as
// {"store": "invoices"}: two collectors over two stores of one process,
// registered on one registry, must differ by one. The map is copied;
// later calls add to the labels given before. A label named "reason"
// clashes with the revocations counter's own and makes the Collector's
// registration fail.
func ConstLabels(labels prometheus.Labels) Option {
	return func(c *config) {
		if c.labels == nil {
			c.labels = prometheus.Labels{}
		}
		maps.Copy(c.labels, labels)
	}
}

// Collector is a prometheus.Collector over one store. Register it on a
// prometheus.Registry (or prometheus.MustRegister it); every scrape then
// calls Collect, which reads the store's Stats. A registered Collector
// keeps its store reachable, and goes on reporting a closed store's last
// figures: unregister it when the store is closed for good. Safe for
// concurrent use.
type Collector struct {
	store *locks.Store

	grants, waits, timedOut, canceled, revoked, lineFull *prometheus.Desc
	keys, running, waiters                               *prometheus.Desc
	waitTimes, holdTimes                                 *prometheus.Desc
}

var _ prometheus.Collector = (*Collector)(nil)

// NewCollector returns a Collector of store's figures. It panics if store
// is nil, a programming error that a scrape would otherwise meet much
// later.
//
// The histograms of time in line and time held are counted only by a
// store made with locks.RecordTimes(). Without it the store's histograms
// stay empty, and reporting them would tell a dashboard that no hold ever
// waited or was held, so the Collector leaves them out (Stats'
// TimesRecorded says which store it is). The counters and gauges are
// always reported.
func NewCollector(store *locks.Store, opts ...Option) *Collector {
	if store == nil {
		panic("metrics: NewCollector: the store is nil")
	}
	cfg := config{namespace: DefaultNamespace}
	for _, o := range opts {
		o(&cfg)
	}
	desc := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName(cfg.namespace, cfg.subsystem, name), help, labels, cfg.labels)
	}
	return &Collector{
		store: store,

		grants:   desc("grants_total", "Keys given to a holder, at once or from the key's line."),
		waits:    desc("waits_total", "Holds that stood in a key's line, however they left it."),
		timedOut: desc("waits_timed_out_total", "Waits that passed with the key still held: holds that failed in use after waiting."),
		canceled: desc("waits_canceled_total", "Waiters whose context ended while they stood in line."),
		revoked: desc("revocations_total", "Leases revoked, by reason: maxhold (the lease reached its maxHold), "+
			"ttl (a session's lease ran past its ttl unrenewed), close (the store closed).", "reason"),
		lineFull: desc("line_full_total", "Holds refused at once because the key's line of waiters was full."),

		keys:    desc("keys", "Keys with a holder or a waiter now."),
		running: desc("functions_running", "Keys held by running functions now, one per key of a HoldAll, revoked ones included."),
		waiters: desc("waiters", "Waiters standing in the keys' lines now."),

		waitTimes: desc("wait_duration_seconds", "Time in line of the waiters that were granted the key, in seconds "+
			"(only with RecordTimes)."),
		holdTimes: desc("hold_duration_seconds", "Time from a grant until the holder let the key go or its function "+
			"returned, in seconds (only with RecordTimes)."),
	}
}

// Describe sends the descriptions of every metric the Collector reports,
// the histograms included, whether or not they are reported yet.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range [...]*prometheus.Desc{
		c.grants, c.waits, c.timedOut, c.canceled, c.revoked, c.lineFull,
		c.keys, c.running, c.waiters, c.waitTimes, c.holdTimes,
	} {
		ch <- d
	}
}

// Collect reads the store's Stats once and sends its figures. The
// figures are each exact, but read shard by shard, not at one instant
// across shards (see locks.Store.Stats). Cost: O(shards) mutexes taken in
// turn, one at a time, each briefly, and 11 metrics made (13 for a store
// made with locks.RecordTimes: the two histograms); nothing is kept
// between scrapes.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	s := c.store.Stats()

	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		send(ch, d, prometheus.CounterValue, float64(v), labels...)
	}
	counter(c.grants, s.Grants)
	counter(c.waits, s.Waits)
	counter(c.timedOut, s.TimedOut)
	counter(c.canceled, s.Canceled)
	counter(c.revoked, s.RevokedMaxHold, ReasonMaxHold)
	counter(c.revoked, s.RevokedTTL, ReasonTTL)
	counter(c.revoked, s.RevokedClosed, ReasonClose)
	counter(c.lineFull, s.Limited)

	send(ch, c.keys, prometheus.GaugeValue, float64(s.Keys))
	send(ch, c.running, prometheus.GaugeValue, float64(s.Running))
	send(ch, c.waiters, prometheus.GaugeValue, float64(s.Waiting))

	if s.TimesRecorded {
		sendHistogram(ch, c.waitTimes, s.WaitTimes)
		sendHistogram(ch, c.holdTimes, s.HoldTimes)
	}
}

// send sends one counter or gauge, or, for a description Prometheus
// refused (a bad namespace or label), an invalid metric that fails the
// scrape with the reason, rather than a panic in the scraping goroutine.
func send(ch chan<- prometheus.Metric, d *prometheus.Desc, t prometheus.ValueType, v float64, labels ...string) {
	m, err := prometheus.NewConstMetric(d, t, v, labels...)
	if err != nil {
		m = prometheus.NewInvalidMetric(d, err)
	}
	ch <- m
}

// bounds are locks.HistogramBounds in seconds, Prometheus's unit of time.
var bounds = func() []float64 {
	b := make([]float64, len(locks.HistogramBounds))
	for i, d := range locks.HistogramBounds {
		b[i] = d.Seconds()
	}
	return b
}()

// sendHistogram sends h as a Prometheus histogram. h counts each bucket
// on its own; Prometheus wants each bucket to count every duration at
// most its bound, so the counts are summed up the bounds. h's last count,
// above every bound, falls in Prometheus's implicit +Inf bucket, which is
// the total count.
func sendHistogram(ch chan<- prometheus.Metric, d *prometheus.Desc, h locks.Histogram) {
	buckets := make(map[float64]uint64, len(bounds))
	var cum uint64
	for i, b := range bounds {
		cum += h.Counts[i]
		buckets[b] = cum
	}
	count := cum + h.Counts[len(bounds)]
	m, err := prometheus.NewConstHistogram(d, count, h.Sum, buckets)
	if err != nil {
		m = prometheus.NewInvalidMetric(d, err)
	}
	ch <- m
}
