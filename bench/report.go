package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"strings"
	"text/tabwriter"
	"time"
)

// Meta says how and where a run was made.
type Meta struct {
	Command   string    `json:"command"`
	Go        string    `json:"go"`
	Platform  string    `json:"platform"`
	CPU       string    `json:"cpu"`
	Cores     int       `json:"cores"`
	Started   time.Time `json:"started"`
	Quick     bool      `json:"quick"`
	CPUs      []int     `json:"gomaxprocs"`
	Count     int       `json:"count"`
	BenchTime string    `json:"benchtime"`
	Keys      int       `json:"keys"`
	Scale     int       `json:"scale"`
	Grants    int       `json:"grants"`
}

// cpuModel returns the processor's model name from /proc/cpuinfo, or
// GOARCH where there is none.
func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				return strings.TrimSpace(v)
			}
		}
	}
	return runtime.GOARCH
}

// Results holds every sample of a run, by scenario, peer and GOMAXPROCS.
type Results struct {
	Meta    Meta
	samples map[rowKey][]Sample
	load    map[string]string // by scenario: how busy the machine was otherwise (loadNote)
}

type rowKey struct {
	scenario, peer string
	cpu            int
}

// NewResults returns an empty set of results for a run described by m.
func NewResults(m Meta) *Results {
	return &Results{Meta: m, samples: map[rowKey][]Sample{}, load: map[string]string{}}
}

// SetLoad records what the machine did otherwise while a scenario ran.
func (r *Results) SetLoad(scenario, note string) { r.load[scenario] = note }

// Add records one sample.
func (r *Results) Add(scenario, peer string, cpu int, s Sample) {
	k := rowKey{scenario, peer, cpu}
	r.samples[k] = append(r.samples[k], s)
}

// Reps returns the samples of a scenario at one GOMAXPROCS, by peer name,
// each peer's in the order of the run's repetitions: the pairs that
// PairedRatio takes ratios of.
func (r *Results) Reps(scenario string, cpu int) map[string][]Sample {
	out := map[string][]Sample{}
	for k, ss := range r.samples {
		if k.scenario == scenario && k.cpu == cpu {
			out[k.peer] = ss
		}
	}
	return out
}

// ratioOf returns peer's figure for metric over ref's, paired by
// repetition (PairedRatio), or, where no repetition pairs them, the ratio
// of the medians in rows; ok is false where peer has no figure or ref no
// valid one (see valid).
func ratioOf(rows map[string]Sample, reps map[string][]Sample, peer, ref, metric string) (float64, bool) {
	v, hasV := rows[peer][metric]
	fig, hasRef := valid(rows[ref], metric)
	if !hasV || !hasRef {
		return 0, false
	}
	if r, ok := PairedRatio(reps[peer], reps[ref], metric); ok {
		return r, true
	}
	return v / fig, true
}

// Medians returns the median figures of a scenario at one GOMAXPROCS, by
// peer name.
func (r *Results) Medians(scenario string, cpu int) map[string]Sample {
	out := map[string]Sample{}
	for k, ss := range r.samples {
		if k.scenario == scenario && k.cpu == cpu {
			out[k.peer] = Median(ss)
		}
	}
	return out
}

// Header writes what the run was, where.
func (r *Results) Header(w io.Writer) {
	m := r.Meta
	fmt.Fprintf(w, "$ %s\n", m.Command)
	fmt.Fprintf(w, "%s %s, %s (%d cores), %s\n", m.Go, m.Platform, m.CPU, m.Cores, m.Started.Format(time.RFC3339))
	scale := ""
	if m.Scale < fullScale {
		scale = fmt.Sprintf(" (scaled down from %d: the lateness targets are not checked)", fullScale)
	}
	fmt.Fprintf(w, "GOMAXPROCS %v; median of %d; benchtime %s; %d keys walked; %d deadlines or keys held at scale%s; fairness %d grants\n",
		m.CPUs, m.Count, m.BenchTime, m.Keys, m.Scale, scale, m.Grants)
	fmt.Fprintln(w, "ratios: ×best = figure / best correct peer's figure in the same run and GOMAXPROCS (lower is better);")
	fmt.Fprintln(w, "        ×floor = figure / floor-contract's, a keyed lock doing only the work no implementation of the contract can skip;")
	fmt.Fprintln(w, "        each the median over repetitions of one repetition's ratio (its peers ran side by side)")
	fmt.Fprintln(w, "throughput scenarios: every peer in one run, in alternating 2 ms phases in a random order per round (interleave.go)")
	fmt.Fprintln(w, "        their ns/op includes gc-ns/op, the peer's share of the collections, charged by the bytes it allocated")
}

// Table writes a scenario's table: one row per GOMAXPROCS and peer with
// its median figures, its ratio to the best correct peer and to the floor
// of the contract (where the scenario has it), and its marks; then the
// notes, locks' ratios in words, and the scenario's targets with their
// verdicts.
func (r *Results) Table(w io.Writer, sc Scenario) []Verdict {
	primary := sc.Columns[0].Key
	fmt.Fprintf(w, "\n== scenario=%s: %s\n", sc.Name, sc.Title)
	width := 0
	var floors []string // the floors of the contract
	hasRef := false     // whether floor-contract, the ×floor reference, is among them
	for _, p := range sc.Peers {
		width = max(width, len(p.Name))
		if p.Class == Contract {
			floors = append(floors, p.Name)
			hasRef = hasRef || p.Name == contractName
		}
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "cpu\t%-*s\t", width, "peer")
	for _, c := range sc.Columns {
		fmt.Fprint(tw, c.Header, "\t")
	}
	if sc.Versus != "" {
		fmt.Fprint(tw, "×"+sc.Versus+"\t")
	} else {
		fmt.Fprint(tw, "×best\t")
	}
	if hasRef {
		fmt.Fprint(tw, "×floor\t")
	}
	fmt.Fprint(tw, " \n")
	var verdicts []Verdict
	var lines []string
	for _, cpu := range r.Meta.CPUs {
		rows, reps := r.Medians(sc.Name, cpu), r.Reps(sc.Name, cpu)
		if len(rows) == 0 {
			continue
		}
		best, _, ok := Best(sc.Peers, rows, primary)
		if sc.Versus != "" {
			best = sc.Versus
			_, ok = valid(rows[sc.Versus], primary)
			lines = append(lines, versusLines(sc, cpu, rows, reps)...)
		}
		for _, p := range sc.Peers {
			s, has := rows[p.Name]
			if !has {
				continue
			}
			fmt.Fprintf(tw, "%d\t%-*s\t", cpu, width, p.Name)
			for _, c := range sc.Columns {
				if v, has := s[c.Key]; has {
					fmt.Fprintf(tw, c.Format+"\t", v)
				} else {
					fmt.Fprint(tw, "-\t")
				}
			}
			fmt.Fprint(tw, ratio(rows, reps, p.Name, best, primary, ok))
			if hasRef {
				fmt.Fprint(tw, ratio(rows, reps, p.Name, contractName, primary, true))
			}
			fmt.Fprintf(tw, " %s\n", marks(p, s, p.Name == best && sc.Versus == ""))
		}
		if _, has := valid(rows["locks"], primary); has {
			if mine, has := ratioOf(rows, reps, "locks", best, primary); ok && has && sc.Versus == "" {
				lines = append(lines, fmt.Sprintf("cpu=%d: locks is %.2f× %s (the best correct peer)", cpu, mine, best))
			}
			for _, f := range floors {
				if mine, has := ratioOf(rows, reps, "locks", f, primary); has {
					lines = append(lines, fmt.Sprintf("cpu=%d: locks is %.2f× %s", cpu, mine, f))
				}
			}
		}
		for _, t := range Targets {
			if t.Scenario == sc.Name {
				verdicts = append(verdicts, Check(t, cpu, r.Meta.Scale, rows, reps))
			}
		}
	}
	tw.Flush()
	for _, n := range sc.Notes {
		fmt.Fprintln(w, "  note:", n)
	}
	for _, l := range lines {
		fmt.Fprintln(w, "  "+l)
	}
	if n := r.load[sc.Name]; n != "" {
		fmt.Fprintln(w, "  "+n)
	}
	for _, v := range verdicts {
		fmt.Fprintf(w, "  target cpu=%d %-60s %s\n", v.CPU, v.Text, v.Gap)
	}
	return verdicts
}

// versusLines says, for each peer of sc other than sc.Versus, how many
// times sc.Versus's figure its figure is in each column, at one
// GOMAXPROCS: the columns where both have a figure, and sc.Versus's is
// positive and valid.
func versusLines(sc Scenario, cpu int, rows map[string]Sample, reps map[string][]Sample) []string {
	ref, has := rows[sc.Versus]
	if !has || failed(ref) {
		return nil
	}
	var lines []string
	for _, p := range sc.Peers {
		s, has := rows[p.Name]
		if p.Name == sc.Versus || !has || failed(s) {
			continue
		}
		var parts []string
		for _, c := range sc.Columns {
			_, has := s[c.Key]
			r, hasRatio := ratioOf(rows, reps, p.Name, sc.Versus, c.Key)
			switch {
			case !has || ref[c.Key] <= 0 || !hasRatio:
			case len(parts) == 0:
				parts = append(parts, fmt.Sprintf("%s× %s in %s", threeDigits(r), sc.Versus, c.Header))
			default:
				parts = append(parts, fmt.Sprintf("%s× in %s", threeDigits(r), c.Header))
			}
		}
		if len(parts) > 0 {
			lines = append(lines, fmt.Sprintf("cpu=%d: %s is %s", cpu, p.Name, strings.Join(parts, ", ")))
		}
	}
	return lines
}

// valid returns s's figure for metric if s is a valid row (not failed)
// with a positive figure, the only kind a ratio can be taken to.
func valid(s Sample, metric string) (float64, bool) {
	v, has := s[metric]
	if !has || v <= 0 || failed(s) {
		return 0, false
	}
	return v, true
}

// ratio returns the table cell of peer's figure for metric over ref's
// (ratioOf), or "-" where there is no reference (ok false) or no figure.
func ratio(rows map[string]Sample, reps map[string][]Sample, peer, ref, metric string, ok bool) string {
	if rows[peer][metric] == 0 {
		return "-\t"
	}
	v, has := ratioOf(rows, reps, peer, ref, metric)
	if !ok || !has {
		return "-\t"
	}
	return fmt.Sprintf("%.2f\t", v)
}

// marks returns the notes of a row: its class, failures, and whether it is
// the reference.
func marks(p Peer, s Sample, best bool) string {
	var m []string
	if best {
		m = append(m, "<- best correct peer")
	}
	if c := p.Class.Mark(); c != "" {
		switch p.Name {
		case contractName:
			c += ": the ×floor reference"
		case contractAfterFuncName:
			c += " with the peers' timer: not a floor of a maxHold"
		}
		m = append(m, c)
	}
	for _, k := range []string{"lost-updates", "timeouts", "overran"} {
		if s[k] != 0 {
			m = append(m, fmt.Sprintf("FAILED %s=%.0f", k, s[k]))
		}
	}
	return strings.Join(m, "; ")
}

// finite drops the figures JSON cannot hold (NaN, ±Inf).
func finite(s Sample) {
	for k, v := range s {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			delete(s, k)
		}
	}
}

// jsonReport is what -json writes.
type jsonReport struct {
	Meta      Meta           `json:"meta"`
	Scenarios []jsonScenario `json:"scenarios"`
}

type jsonScenario struct {
	Name     string    `json:"name"`
	Title    string    `json:"title"`
	Machine  string    `json:"machine,omitempty"`
	Rows     []jsonRow `json:"rows"`
	Verdicts []Verdict `json:"targets"`
}

type jsonRow struct {
	Peer    string   `json:"peer"`
	Class   string   `json:"class,omitempty"`
	CPU     int      `json:"gomaxprocs"`
	Median  Sample   `json:"median"`
	Samples []Sample `json:"samples"`
}

// WriteJSON writes every figure of the run, and the verdicts, to path.
func (r *Results) WriteJSON(path string, scs []Scenario, verdicts map[string][]Verdict) error {
	rep := jsonReport{Meta: r.Meta}
	for _, sc := range scs {
		js := jsonScenario{Name: sc.Name, Title: sc.Title, Machine: r.load[sc.Name], Verdicts: verdicts[sc.Name]}
		for _, cpu := range r.Meta.CPUs {
			for _, p := range sc.Peers {
				if ss := r.samples[rowKey{sc.Name, p.Name, cpu}]; len(ss) > 0 {
					js.Rows = append(js.Rows, jsonRow{Peer: p.Name, Class: p.Class.Mark(), CPU: cpu, Median: Median(ss), Samples: ss})
				}
			}
		}
		if len(js.Rows) > 0 {
			rep.Scenarios = append(rep.Scenarios, js)
		}
	}
	for i := range rep.Scenarios {
		for j := range rep.Scenarios[i].Rows {
			row := &rep.Scenarios[i].Rows[j]
			finite(row.Median)
			for _, s := range row.Samples {
				finite(s)
			}
		}
	}
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// markdownPeers are the columns of the README's table, by peer name, with
// their headings.
var markdownPeers = []struct{ name, heading string }{
	{"locks", "locks"},
	{"mutexmap", "mutexmap"},
	{"moby-locker", "moby/locker"},
	{"chanmap", "chanmap"},
	{"semaphore", "semaphore"},
	{"semaphore-timeout", "semaphore + WithTimeout"},
	{contractAfterFuncName, "floor-contract + AfterFunc"},
	{listFloorName, "floor-contract + list"},
	{waitFloorName, "floor-contract + wait"},
	{checkedFloorName, "floor-contract + wait + checks"},
}

// markdownNames are the throughput scenarios as the README's table names
// them.
var markdownNames = map[string]string{
	"uncontended":     "uncontended, distinct keys",
	"zipf":            "zipf θ=0.99",
	"hotkey":          "hot key, 8 goroutines a P",
	"hotkey-deadline": "hot key, 10 s wait bound",
	"maxhold":         "1-minute maxHold armed",
}

// Markdown returns the README's comparison table: a row per throughput
// scenario and GOMAXPROCS, each peer's primary figure as a ratio to
// floor-contract's (or, where the scenario has no floor, to the best
// correct peer's, marked), and the targets met.
func (r *Results) Markdown(scs []Scenario, verdicts map[string][]Verdict) string {
	var b strings.Builder
	footnote := false
	b.WriteString("| scenario | GOMAXPROCS |")
	for _, p := range markdownPeers {
		b.WriteString(" " + p.heading + " |")
	}
	b.WriteString(" targets met |\n|" + strings.Repeat(" --- |", len(markdownPeers)+3) + "\n")
	for _, sc := range scs {
		if sc.Load == nil {
			continue
		}
		primary := sc.Columns[0].Key
		for _, cpu := range r.Meta.CPUs {
			rows, reps := r.Medians(sc.Name, cpu), r.Reps(sc.Name, cpu)
			if len(rows) == 0 {
				continue
			}
			mark, ref := "", contractName
			_, ok := valid(rows[contractName], primary)
			if !ok {
				ref, _, ok = Best(sc.Peers, rows, primary)
				mark, footnote = "¹", true
			}
			name := markdownNames[sc.Name]
			if name == "" {
				name = sc.Name
			}
			fmt.Fprintf(&b, "| %s | %d |", name, cpu)
			for _, p := range markdownPeers {
				_, has := valid(rows[p.name], primary)
				v, hasRatio := ratioOf(rows, reps, p.name, ref, primary)
				switch {
				case !has || !ok || !hasRatio:
					b.WriteString(" – |")
				case p.name == "locks":
					fmt.Fprintf(&b, " **%.2f**%s |", v, mark)
				default:
					fmt.Fprintf(&b, " %.2f%s |", v, mark)
				}
			}
			met, all, unreached := 0, 0, 0
			for _, v := range verdicts[sc.Name] {
				if v.CPU == cpu && !v.Unchecked {
					all++
					if v.Met {
						met++
					}
					if v.OutOfReach {
						unreached++
					}
				}
			}
			switch {
			case all == 0:
				b.WriteString(" – |\n")
			case unreached > 0:
				fmt.Fprintf(&b, " %d of %d (%d out of reach) |\n", met, all, unreached)
			default:
				fmt.Fprintf(&b, " %d of %d |\n", met, all)
			}
		}
	}
	if footnote {
		b.WriteString("\n¹ no floor-contract figure in this row (`floor-contract` bounds no wait, so the bounded hot key does not run it): ratios to the best correct peer of the row; there the `chanmap` column is `chanmap+WithTimeout`, and `semaphore + WithTimeout` is `semaphore-timeout`.\n")
	}
	return b.String()
}

// threeDigits prints r to three significant digits, as %.3g does, but
// without an exponent: a remote hold over a loopback connection costs
// about a thousand in-process ones, and 1.27e+03 reads badly in a line of
// ratios.
func threeDigits(r float64) string {
	if r >= 1000 {
		return fmt.Sprintf("%.0f", r)
	}
	return fmt.Sprintf("%.3g", r)
}
