package metrics_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/holdline/locks"
	"github.com/holdline/locks/metrics"
)

// Register a store's collector on a registry and serve it at /metrics
// with promhttp. A program with one store can prometheus.MustRegister it
// on the default registry instead; one with several gives each collector
// a label of its own.
func Example() {
	store := locks.NewStore(locks.RecordTimes()) // RecordTimes: the two histograms too
	defer store.Close()

	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics.NewCollector(store, metrics.ConstLabels(prometheus.Labels{"store": "billing"})))

	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := httptest.NewServer(mux) // in a program: http.ListenAndServe(addr, mux)
	defer srv.Close()

	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for line := range strings.Lines(string(body)) {
		if strings.HasPrefix(line, "locks_grants_total") {
			fmt.Print(line)
		}
	}
	// Output:
	// locks_grants_total{store="billing"} 0
}
