package main

import (
	"fmt"
	"math"
	"strings"
)

// Target is one of the project's targets for the locks peer: a bound on the
// ratio of locks' figure to a named peer's, or on locks' own figure.
type Target struct {
	// Scenario and Metric say which figure is bounded.
	Scenario string `json:"scenario"`
	Metric   string `json:"metric"`
	// Ref is the peer whose figure divides locks'; "" bounds locks' own
	// figure.
	Ref string `json:"ref,omitempty"`
	// Max is the bound: the target is met when the ratio (or the figure) is
	// at most Max.
	Max float64 `json:"max"`
	// Text is the target in words.
	Text string `json:"text"`
	// Size, where not 0, is the N of the experiment at scale (-size) the
	// target is stated for; a run at a smaller N does not check it.
	Size int `json:"size,omitempty"`
	// Floor, where not "", is the peer that does only what every
	// implementation of the contract must do in this scenario: its own
	// figure, taken as locks' is, says whether any implementation could
	// meet the target in this run.
	Floor string `json:"floor,omitempty"`
}

// Targets are the project's speed and memory targets, by scenario. They
// are bounds a correct implementation of the contract can meet: the floor
// of the contract (floor-contract) allocates a record per hold and takes
// its shard's mutex twice, so no target asks for fewer allocations than
// one per hold, or for a hold cheaper than a mutex map on one core.
//
// The hot key's floor is floor-contract+wait+checks, not floor-contract:
// a call of Hold that waits must also stand in line as a bounded wait
// needs and do the checks and the context the contract asks of every
// call (README, "Why the floor is where it is"). A maxHold's is
// floor-contract+list: a deadline that can be revoked stands where it can
// be found. A floor bounds what a hold costs, so only targets of cost have
// one: the fairness scenario's counts and worst waits follow the
// scheduler's timing more than any work (floor-contract, which does the
// least, passed over waiters thousands of times in some runs). A free
// key's targets are against floor-contract itself; the deadlines' and
// memory's against the peers, or in bytes and milliseconds.
var Targets = []Target{
	{"uncontended", "ns/op", contractName, 1.10, "≤ 1.10 × floor-contract ns/op", 0, ""},
	{"uncontended", "allocs/op", "", 1, "1 allocation per hold", 0, ""},
	{"uncontended", "B/op", "", 112, "≤ 112 B per hold", 0, ""},
	{"hotkey", "ns/op", contractName, 1.15, "≤ 1.15 × floor-contract ns/op", 0, checkedFloorName},
	{"hotkey", "ns/op", "chanmap", 1.5, "≤ 1.5 × chanmap ns/op", 0, checkedFloorName},
	{"hotkey-deadline", "ns/op", "chanmap", 0.35, "≤ 0.35 × chanmap+WithTimeout ns/op", 0, checkedFloorName},
	{"maxhold", "ns/op", contractName, 1.10, "≤ 1.10 × floor-contract (no timer) ns/op", 0, listFloorName},
	{"maxhold", "ns/op", "mutexmap", 1.0, "≤ 1.0 × mutexmap+AfterFunc ns/op", 0, listFloorName},
	{"fairness", "out-of-order-10us", "", 0, "0 grants out of line order by > 10 µs", 0, ""},
	{"fairness", "worst/mean", "chanmap", 1.0, "worst/mean wait ≤ chanmap's", 0, ""},
	{"deadlines", "arm+cancel-ns", "time.AfterFunc", 0.3, "arm+cancel ≤ 0.3 × time.AfterFunc+Stop", 0, ""},
	// The bound was set when a pending deadline was one 48-byte ticket;
	// a maxHold is now a 24-byte slot of its list's queue, which full
	// runs read as 24.10 (the queues' room to grow is in fixed-KiB). The
	// slope of four heap readings resolves a deadline to a few KiB over
	// the set: the ticket read 47.99998 at GOMAXPROCS 1 and 47.994-48.006
	// at 2, -quick's 100,000 up to 48.06; hence the 0.1 B.
	{"deadlines", "B/pending", "", 48.1, "≤ 48 B per pending deadline (+0.1 B: heap noise)", 0, ""},
	{"deadlines", "B/cancelled", "", 1, "0 B per cancelled deadline (≤ 1 B: heap noise)", 0, ""},
	{"deadlines", "late-max-ms", "", 250, "the last of 1,000,000 due in one 100 ms window ≤ 250 ms late", fullScale, ""},
	{"deadlines", "late-max-ms", "time.AfterFunc", 0.25, "... and ≤ 0.25 × time.AfterFunc's lateness", fullScale, ""},
	{"memory", "B/held", "", 200, "≤ 200 B per held key", 0, ""},
	{"memory", "B/after", "", 2, "≤ 2 B per key after release", 0, ""},
}

// Verdict is a target checked against the medians of one run at one
// GOMAXPROCS.
type Verdict struct {
	Target
	CPU int `json:"gomaxprocs"`
	// Value is the ratio (Ref set) or locks' own figure.
	Value float64 `json:"value"`
	// Measured reports whether the figures the target needs were there.
	Measured bool `json:"measured"`
	// Unchecked reports that the run's N was smaller than the target's
	// Size: Value is the run's figure, but says nothing about the target.
	Unchecked bool `json:"unchecked,omitempty"`
	// Met reports whether Value is within the target.
	Met bool `json:"met"`
	// FloorMeasured reports whether the target has a Floor and the run has
	// a valid figure for it; FloorValue is then its figure, or its ratio
	// to Ref's, taken as Value is.
	FloorMeasured bool    `json:"floorMeasured,omitempty"`
	FloorValue    float64 `json:"floorValue,omitempty"`
	// OutOfReach reports that locks missed the target and the Floor missed
	// it too in this run: no implementation of the contract could have met
	// it here. The target still counts as missed.
	OutOfReach bool `json:"outOfReach,omitempty"`
	// Gap says in words how far Value is from the target, and where the
	// Floor stands.
	Gap string `json:"gap"`
}

// Check checks t against rows, the median figures of one scenario at one
// GOMAXPROCS by peer name, from a run whose experiments at scale had n
// items. A ratio to t.Ref is taken repetition by repetition from reps,
// each peer's samples in the order of the run's repetitions (see
// PairedRatio), where reps has both peers, and between rows' medians
// otherwise.
func Check(t Target, cpu, n int, rows map[string]Sample, reps map[string][]Sample) Verdict {
	v := Verdict{Target: t, CPU: cpu}
	value, why := figureOf(t, rows, reps, "locks")
	if why != "" {
		v.Gap = "not measured (" + why + ")"
		return v
	}
	v.Value = value
	if n < t.Size {
		// At -quick's 100,000 locks' last deadline comes within about
		// 10 ms, the peers' up to a few hundred, and a ratio of two such
		// figures swings tenfold from run to run.
		v.Unchecked = true
		v.Gap = fmt.Sprintf("not checked: stated for -size %d, this run has %d", t.Size, n)
		return v
	}
	v.Measured = true
	v.Met = within(t, v.Value)
	v.Gap = gap(t, v.Value, v.Met)
	if t.Floor == "" {
		return v
	}
	if f, why := figureOf(t, rows, reps, t.Floor); why == "" {
		v.FloorMeasured, v.FloorValue = true, f
		v.OutOfReach = !v.Met && !within(t, f)
		if v.OutOfReach {
			v.Gap += fmt.Sprintf("; out of reach in this run: the floor, %s, reads %s itself", t.Floor, figure(t, f))
		} else {
			v.Gap += fmt.Sprintf(" (the floor, %s: %s)", t.Floor, figure(t, f))
		}
	}
	return v
}

// within reports whether value meets t. A relative tolerance of 1e-9
// keeps 0.6000000001 from missing 0.6.
func within(t Target, value float64) bool {
	return value <= t.Max+1e-9*math.Max(1, math.Abs(t.Max))
}

// figureOf returns peer's figure for t in rows, as a ratio to t.Ref's
// where t has one (paired by repetition where reps has both), or, in
// words, why there is none: no figure, a failed row (see failed), or, for
// a ratio, a figure that is not positive.
func figureOf(t Target, rows map[string]Sample, reps map[string][]Sample, peer string) (value float64, why string) {
	value, ok := rows[peer][t.Metric]
	if !ok || failed(rows[peer]) {
		return 0, peer + " has no valid figure"
	}
	if t.Ref != "" {
		if value <= 0 {
			return 0, "the figure of " + peer + " is not positive: within the noise"
		}
		r, ok := ratioOf(rows, reps, peer, t.Ref, t.Metric)
		if !ok {
			return 0, "no valid figure for " + t.Ref
		}
		value = r
	}
	if strings.HasPrefix(t.Metric, "allocs") || strings.HasSuffix(t.Metric, "allocs") {
		// Allocation counts are whole per hold; the fraction is the
		// benchmark's own goroutines and map growth spread over b.N.
		value = math.Round(value*10) / 10
	}
	return value, ""
}

// figure prints a value of t's: a ratio with its × (see ratioDigits), or
// a figure with its unit.
func figure(t Target, value float64) string {
	if t.Ref != "" {
		return fmt.Sprintf("%.*f×", ratioDigits(t, value), value)
	}
	return fmt.Sprintf("%.6g %s", value, t.Metric)
}

// ratioDigits is how many digits a ratio of t's is printed with: two, or
// four for a ratio just over its bound (1.1504 against 1.15), which two
// would print as the bound itself.
func ratioDigits(t Target, value float64) int {
	if fmt.Sprintf("%.2f", value) == fmt.Sprintf("%.2f", t.Max) && !within(t, value) {
		return 4
	}
	return 2
}

// gap says how far value is from t's bound.
func gap(t Target, value float64, met bool) string {
	if t.Ref != "" {
		if met {
			return fmt.Sprintf("met: %.2f× ≤ %.2f×", value, t.Max)
		}
		digits := ratioDigits(t, value)
		return fmt.Sprintf("MISSED: %.*f× > %.2f×, locks needs %.*f× less %s", digits, value, t.Max, digits, value/t.Max, t.Metric)
	}
	if met {
		return fmt.Sprintf("met: %.4g ≤ %g %s", value, t.Max, t.Metric)
	}
	if t.Max == 0 {
		return fmt.Sprintf("MISSED by %.4g %s", value, t.Metric)
	}
	// Six digits: a figure just over its bound (48.0005 B against 48) must
	// not print as the bound itself.
	return fmt.Sprintf("MISSED: %.6g > %g %s, by %.4g (%.2f×)", value, t.Max, t.Metric, value-t.Max, value/t.Max)
}

// failed reports whether a sample records a broken run: lost updates, a
// timed-out wait, a deadline armed too late. Such a row is never the
// reference of a ratio.
func failed(s Sample) bool {
	return s["lost-updates"] != 0 || s["timeouts"] != 0 || s["overran"] != 0
}

// Best returns the correct peer, other than locks, with the lowest figure
// for metric among rows (median figures by peer name), and that figure.
// Peers that share keys, floors, failed rows and rows without the metric
// (or with a figure <= 0, which no real cost has) are passed over; ok is
// false when none is left.
func Best(peers []Peer, rows map[string]Sample, metric string) (name string, figure float64, ok bool) {
	for _, p := range peers {
		s, has := rows[p.Name]
		if p.Name == "locks" || p.Class != Correct || !has || failed(s) {
			continue
		}
		v, has := s[metric]
		if !has || v <= 0 {
			continue
		}
		if !ok || v < figure {
			name, figure, ok = p.Name, v, true
		}
	}
	return name, figure, ok
}
