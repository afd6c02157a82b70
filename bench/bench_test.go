package main

import (
	"flag"
	"sync"
	"sync/atomic"
	"testing"
)

// The scenarios as go test benchmarks, for benchstat:
//
//	go test -run '^$' -bench . -cpu 1,2 -count 6 ./bench > old.txt
//	(change the library)
//	go test -run '^$' -bench . -cpu 1,2 -count 6 ./bench > new.txt
//	benchstat old.txt new.txt
//
// Names are BenchmarkUncontended/peer=locks and so on. The experiments
// (fairness, deadlines, memory, remote) report their figures as extra metrics;
// their ns/op is the time of one whole experiment. Deadlines and memory
// run at -size (default 10,000, so that the default run stays short; the
// full run's figure is -size 1000000).

var benchSize = flag.Int("size", 10_000, "deadlines pending and keys held at once in BenchmarkDeadlines and BenchmarkMemory")

var testEnv = sync.OnceValue(func() *Env { return NewEnv(1_000_000, *benchSize, 10_000) })

func BenchmarkUncontended(b *testing.B)    { benchScenario(b, "uncontended") }
func BenchmarkZipf(b *testing.B)           { benchScenario(b, "zipf") }
func BenchmarkHotKey(b *testing.B)         { benchScenario(b, "hotkey") }
func BenchmarkHotKeyDeadline(b *testing.B) { benchScenario(b, "hotkey-deadline") }
func BenchmarkMaxHold(b *testing.B)        { benchScenario(b, "maxhold") }
func BenchmarkFairness(b *testing.B)       { benchScenario(b, "fairness") }
func BenchmarkDeadlines(b *testing.B)      { benchScenario(b, "deadlines") }
func BenchmarkMemory(b *testing.B)         { benchScenario(b, "memory") }
func BenchmarkRemote(b *testing.B)         { benchScenario(b, "remote") }

// benchScenario runs the named scenario for every one of its peers as a
// sub-benchmark peer=NAME.
func benchScenario(b *testing.B, name string) {
	sc, ok := scenarioNamed(name)
	if !ok {
		b.Fatalf("no scenario %q", name)
	}
	env := testEnv()
	for _, p := range sc.Peers {
		b.Run("peer="+p.Name, func(b *testing.B) {
			if sc.Load != nil {
				benchLoad(b, env, sc, p)
				return
			}
			var s Sample
			for range b.N {
				s = sc.Once(env, p)
			}
			for _, c := range sc.Columns {
				b.ReportMetric(s[c.Key], c.Key)
			}
		})
	}
}

// benchLoad runs sc's load for p under b.RunParallel, sc.PerP goroutines
// per P, and reports the load's checks as metrics.
func benchLoad(b *testing.B, env *Env, sc Scenario, p Peer) {
	l := p.New()
	defer l.Close()
	load := sc.Load(env, l)
	var workers atomic.Int64
	b.SetParallelism(sc.perP())
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		op := load.Op(int(workers.Add(1) - 1))
		for pb.Next() {
			op()
		}
	})
	b.StopTimer()
	if load.Check != nil {
		for k, v := range load.Check(int64(b.N)) {
			b.ReportMetric(v, k)
		}
	}
}

func scenarioNamed(name string) (Scenario, bool) {
	for _, sc := range Scenarios() {
		if sc.Name == name {
			return sc, true
		}
	}
	return Scenario{}, false
}
