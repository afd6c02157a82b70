// Command bench measures package locks against what a Go programmer would
// otherwise use for keyed locks, side by side in one run, and prints a
// table per scenario with the ratio of locks to the best correct peer
// (×best) and to the floor of the contract (×floor), and the project's
// speed and memory targets beside them.
//
// Run it from the module's root:
//
//	go run ./bench -quick          # everything, smaller counts, under a minute
//	go run ./bench                 # the full run, a few minutes on 2 cores
//	go run ./bench -run 'scenario=hotkey/peer=(locks|chanmap)$' -cpu 2
//	go run ./bench -json bench/results.json
//	go run ./bench -run 'peer=locks$' -cpuprofile cpu.pprof   # writes pprof/cpu.pprof
//
// The peers (peers*.go) sit behind one interface, Locker, and implement
// Waiter where they can bound a wait; those that are a lock and unlock
// pair share one generic adapter (peers_adapter.go). They are the library; a
// hand-written map of refcounted sync.Mutex; the same with one-slot
// channels (a FIFO lock); github.com/moby/locker; k8s.io/utils/keymutex
// (NewHashed, marked: unrelated keys wait on each other); a map of
// x/sync semaphore.Weighted(1), with and without a context.WithTimeout
// per hold; two floors, one sync.Mutex and one CAS word for all keys; and
// the floors of the contract (peers_contract*.go): keyed locks doing only
// the work no implementation of the contract can skip, never the best:
// floor-contract, the reference of ×floor; with a time.AfterFunc per
// maxHold, or its deadline linked in a list (maxhold); and with a waiter
// standing as a bounded wait needs, and with Hold's checks besides (the
// hot key scenarios).
//
// The scenarios (scenarios.go, fairness.go, deadlines.go, lateness.go,
// memory.go) are the project's eight: uncontended, zipf, hotkey,
// hotkey-deadline, maxhold, fairness, deadlines, memory. A ninth, remote
// (remote.go), holds keys through a locksd server on loopback (package
// server and package client, both in this process) beside the same holds
// of an in-process lock, figures only, no target. Each is named
// scenario=NAME/peer=PEER and runs at every GOMAXPROCS of -cpu. The
// throughput scenarios run every peer in one run, in alternating phases
// of 2 ms in a random order per round (interleave.go), so that machine
// noise hits them alike; each peer runs -benchtime per repetition, and
// the median over -count repetitions is reported; a ratio of two peers is
// the median of each repetition's ratio, as a repetition's peers met the
// same noise (PairedRatio). The fairness scenario
// runs 5 trials of each peer, interleaved. The experiments at scale
// (deadlines, memory) run once per GOMAXPROCS (memory only at the last),
// as their figures are totals over a million deadlines or keys; the
// deadlines scenario takes medians of several timings and windows inside
// that one run, and runs in a child process per peer and GOMAXPROCS, so
// that no experiment inherits another's million goroutines.
//
// Each scenario's table ends with the project's targets for locks
// (targets.go), each checked against the run's medians and paired
// ratios. A target of cost
// names a floor of the contract, a peer doing only what any
// implementation must for it; its verdict gives the floor's figure
// beside locks', and says "out of reach in this run" where locks and the
// floor both missed. A summary of the verdicts closes the run.
//
// The same scenarios are go test benchmarks (bench_test.go), for
// benchstat; they run one peer at a time, the throughput scenarios under
// b.RunParallel, the experiments once per b.N:
//
//	go test -run '^$' -bench . -count 6 ./bench > new.txt
//
// The library's own benchmarks, without peers, are in the module's root:
// go test -run '^$' -bench . (see README.md).
//
// Profiles (-cpuprofile, -memprofile, -mutexprofile) go into pprof/ when
// given a bare file name (a deadlines experiment, run in a child process,
// writes its own, named after it); pprof/README.md says how to read them.
// CPU profiles carry the labels scenario and peer on the throughput
// scenarios' workers (go tool pprof -tagfocus peer=locks). The machine is
// usually shared and noisy: compare figures as ratios within one run,
// never across runs.
package main

import (
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// fullScale is -size unless told: the N of the experiments at scale that
// the targets are stated for.
const fullScale = 1_000_000

// config is what the flags ask for.
type config struct {
	cpus      []int
	count     int
	benchtime time.Duration
	keys      int
	scale     int
	grants    int
	quick     bool
	run       *regexp.Regexp
	json      string
	markdown  string
	cpuprof   string
	memprof   string
	mutexprof string
	memrate   int
	child     string // run this one experiment and print its figures (see child.go)
}

func parseFlags(args []string) (config, error) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	cpu := fs.String("cpu", "1,2", "comma-separated list of GOMAXPROCS values to run every scenario at")
	count := fs.Int("count", 3, "repetitions of each throughput scenario (median reported); -quick: 1")
	benchtime := fs.Duration("benchtime", 200*time.Millisecond, "time each peer runs in a throughput scenario per repetition; -quick: 150ms")
	scale := fs.Int("size", fullScale, "deadlines pending and keys held at once in the experiments at scale; -quick: 100,000")
	grants := fs.Int("grants", 10_000, "grants of the fairness scenario")
	quick := fs.Bool("quick", false, "run everything in under a minute: -count 1, -benchtime 150ms, -size 100000 unless given")
	run := fs.String("run", "", "run only the scenario=NAME/peer=PEER names matching this regexp")
	js := fs.String("json", "", "write every figure and verdict to this JSON file")
	md := fs.String("markdown", "", "write the README's comparison table (locks and the peers as ratios to floor-contract) to this file")
	cpuprof := fs.String("cpuprofile", "", "write a CPU profile of the whole run to this file (a bare name goes into pprof/)")
	memprof := fs.String("memprofile", "", "write an allocation profile at the end to this file (a bare name goes into pprof/)")
	mutexprof := fs.String("mutexprofile", "", "write a mutex contention profile at the end to this file (a bare name goes into pprof/)")
	memrate := fs.Int("memprofilerate", 0, "runtime.MemProfileRate while profiling memory (0: the runtime's default, 512 KiB; 1: every allocation)")
	child := fs.String("child", "", "internal: run the one experiment scenario=NAME/peer=PEER at the one -cpu and print its figures as JSON")
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	if fs.NArg() > 0 {
		return config{}, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	c := config{count: *count, benchtime: *benchtime, keys: 1_000_000, scale: *scale, grants: *grants, quick: *quick,
		json: *js, markdown: *md, cpuprof: profPath(*cpuprof), memprof: profPath(*memprof), mutexprof: profPath(*mutexprof), memrate: *memrate, child: *child}
	if c.quick {
		if !set["count"] {
			c.count = 1
		}
		if !set["benchtime"] {
			c.benchtime = 150 * time.Millisecond
		}
		if !set["size"] {
			c.scale = 100_000
		}
	}
	for _, f := range strings.Split(*cpu, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return config{}, fmt.Errorf("-cpu %q: want a list of positive numbers", *cpu)
		}
		c.cpus = append(c.cpus, n)
	}
	var err error
	if c.run, err = regexp.Compile(*run); err != nil {
		return config{}, fmt.Errorf("-run: %v", err)
	}
	switch {
	case c.count < 1 || c.benchtime <= 0 || c.grants < 1:
		return config{}, fmt.Errorf("-count, -benchtime and -grants must be positive")
	case c.scale < 1 || c.scale > c.keys:
		return config{}, fmt.Errorf("-size must be 1 to %d", c.keys)
	}
	return c, nil
}

func main() {
	c, err := parseFlags(os.Args[1:])
	if err == flag.ErrHelp {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	if err := run(c); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(c config) error {
	if c.child != "" {
		return runChild(c)
	}
	scs := Scenarios()
	if err := checkRun(c.run, scs); err != nil {
		return err
	}
	stop, err := startProfiles(c)
	if err != nil {
		return err
	}
	procs := runtime.GOMAXPROCS(0)
	defer runtime.GOMAXPROCS(procs)

	res := NewResults(Meta{
		Command: strings.Join(append([]string{"go run ./bench"}, os.Args[1:]...), " "),
		Go:      runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH,
		CPU: cpuModel(), Cores: runtime.NumCPU(), Started: time.Now(),
		Quick: c.quick, CPUs: c.cpus, Count: c.count, BenchTime: c.benchtime.String(),
		Keys: c.keys, Scale: c.scale, Grants: c.grants,
	})
	res.Header(os.Stdout)
	env := newEnv(c)
	verdicts := map[string][]Verdict{}
	for _, sc := range scs {
		ran := false
		before := sampleCPU()
		cpus := c.cpus
		if sc.OneCPU {
			cpus = cpus[len(cpus)-1:]
		}
		for _, cpu := range cpus {
			runtime.GOMAXPROCS(cpu)
			reps := c.count
			if sc.AtScale {
				reps = 1
			}
			for rep := range reps {
				var peers []Peer
				for _, p := range sc.Peers {
					if c.run.MatchString("scenario=" + sc.Name + "/peer=" + p.Name) {
						peers = append(peers, p)
					}
				}
				if len(peers) == 0 {
					continue
				}
				samples, err := repetition(c, sc, env, peers, cpu, rep)
				if err != nil {
					return err
				}
				for i, s := range samples {
					res.Add(sc.Name, peers[i].Name, cpu, s)
					fmt.Fprintf(os.Stderr, "scenario=%s/peer=%s cpu=%d rep %d/%d: %s=%.4g\n", sc.Name, peers[i].Name, cpu, rep+1, reps, sc.Columns[0].Key, s[sc.Columns[0].Key])
				}
				ran = true
			}
		}
		if ran {
			res.SetLoad(sc.Name, loadNote(before, sampleCPU()))
			verdicts[sc.Name] = res.Table(os.Stdout, sc)
		}
	}
	runtime.GOMAXPROCS(procs)
	summarize(os.Stdout, scs, verdicts)
	if err := stop(); err != nil {
		return err
	}
	if c.json != "" {
		if err := res.WriteJSON(c.json, scs, verdicts); err != nil {
			return err
		}
		fmt.Println("\nfigures written to", c.json)
	}
	if c.markdown != "" {
		if err := os.WriteFile(c.markdown, []byte(res.Markdown(scs, verdicts)), 0o644); err != nil {
			return err
		}
		fmt.Println("comparison table written to", c.markdown)
	}
	return nil
}

// newEnv returns the environment c asks for.
func newEnv(c config) *Env {
	env := NewEnv(c.keys, c.scale, c.grants)
	env.Reps, env.BenchTime = c.count, c.benchtime
	return env
}

// repetition runs one repetition of sc for peers at GOMAXPROCS cpu and
// returns their figures in order. A throughput scenario runs every peer
// at once, in alternating phases (interleave.go); an experiment with
// Trials runs that many trials of each peer, the peers in a fresh random
// order each trial; the others run each peer once, in turn, isolated ones
// in a child process each (see child.go).
func repetition(c config, sc Scenario, env *Env, peers []Peer, cpu, rep int) ([]Sample, error) {
	seed := uint64(rep)
	if sc.Load != nil {
		return interleave(env, sc, peers, c.benchtime, seed), nil
	}
	out := make([]Sample, len(peers))
	if sc.Trials > 1 {
		trials := make([][]Sample, len(peers))
		order := make([]int, len(peers))
		for i := range order {
			order[i] = i
		}
		rng := rand.New(rand.NewPCG(seed, uint64(cpu)))
		for range sc.Trials {
			rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
			for _, i := range order {
				trials[i] = append(trials[i], sc.Once(env, peers[i]))
			}
		}
		for i := range out {
			out[i] = sc.combine(trials[i])
		}
		return out, nil
	}
	for i, p := range peers {
		var err error
		if sc.Isolated {
			out[i], err = inChild(c, sc, p, cpu)
		} else {
			out[i] = sc.Once(env, p)
		}
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// summarize closes the run with one line per scenario: how many of the
// project's targets for locks were met, missed (and of those, how many
// the floor of the contract missed too), or not measured.
func summarize(w io.Writer, scs []Scenario, verdicts map[string][]Verdict) {
	fmt.Fprintln(w, "\n== summary: the project's targets for locks (figures and gaps above)")
	for _, sc := range scs {
		vs, ok := verdicts[sc.Name]
		if !ok {
			continue
		}
		if len(vs) == 0 {
			fmt.Fprintf(w, "  %-16s figures only, no target\n", sc.Name)
			continue
		}
		var met, missed, unreached, unmeasured, unchecked int
		for _, v := range vs {
			switch {
			case v.Unchecked:
				unchecked++
			case !v.Measured:
				unmeasured++
			case v.Met:
				met++
			default:
				missed++
				if v.OutOfReach {
					unreached++
				}
			}
		}
		fmt.Fprintf(w, "  %-16s %d met, %d missed", sc.Name, met, missed)
		if unreached > 0 {
			fmt.Fprintf(w, " (%d out of reach: the floor missed too)", unreached)
		}
		if unmeasured > 0 {
			fmt.Fprintf(w, ", %d not measured", unmeasured)
		}
		if unchecked > 0 {
			fmt.Fprintf(w, ", %d not checked at this -size", unchecked)
		}
		fmt.Fprintln(w)
	}
}

// checkRun returns an error, naming the scenarios and peers there are, if
// the -run regexp re matches none of the names scenario=NAME/peer=PEER of
// scs: a misspelt peer would otherwise run nothing and say nothing.
func checkRun(re *regexp.Regexp, scs []Scenario) error {
	var scenarios, peers []string
	for _, sc := range scs {
		scenarios = append(scenarios, sc.Name)
		for _, p := range sc.Peers {
			if re.MatchString("scenario=" + sc.Name + "/peer=" + p.Name) {
				return nil
			}
			if !slices.Contains(peers, p.Name) {
				peers = append(peers, p.Name)
			}
		}
	}
	hint := ""
	if strings.Contains(strings.ReplaceAll(re.String(), `\+`, ""), "+") {
		hint = ` (-run is a regular expression: write a peer's + as \+)`
	}
	return fmt.Errorf("-run %q matches no scenario=NAME/peer=PEER%s; scenarios: %s; peers: %s",
		re, hint, strings.Join(scenarios, ", "), strings.Join(peers, ", "))
}
