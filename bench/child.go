package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
)

// The isolated experiments (deadlines) each run in a process of their
// own: the runtime keeps every goroutine record it ever made, so after a
// million goroutines each later collection scans a million records, and
// the runtime's timer heaps keep their size; figures taken in a process
// that ran another experiment before would carry its leftovers. (The
// memory scenario runs in this process, after every other but remote: it
// starts its million goroutines once before measuring, and subtracts what
// they cost.) The child is this same program, given -child and the
// experiment's name; it prints the experiment's figures as JSON.

// inChild runs one repetition of sc for p at GOMAXPROCS cpu in a child
// process and returns its figures.
func inChild(c config, sc Scenario, p Peer, cpu int) (Sample, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("cannot start a child process: %v", err)
	}
	args := []string{
		"-child", "scenario=" + sc.Name + "/peer=" + p.Name,
		"-cpu", strconv.Itoa(cpu),
		"-size", strconv.Itoa(c.scale),
		"-count", strconv.Itoa(c.count),
		"-benchtime", c.benchtime.String(),
		"-grants", strconv.Itoa(c.grants),
		"-memprofilerate", strconv.Itoa(c.memrate),
	}
	for _, prof := range []struct{ flag, path string }{
		{"-cpuprofile", c.cpuprof}, {"-memprofile", c.memprof}, {"-mutexprofile", c.mutexprof},
	} {
		if prof.path != "" {
			args = append(args, prof.flag, childProfPath(prof.path, sc.Name, p.Name, cpu))
		}
	}
	cmd := exec.Command(exe, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, os.Stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("scenario=%s/peer=%s cpu=%d: child process: %v", sc.Name, p.Name, cpu, err)
	}
	var s Sample
	if err := json.Unmarshal(out.Bytes(), &s); err != nil {
		return nil, fmt.Errorf("scenario=%s/peer=%s cpu=%d: child's figures: %v", sc.Name, p.Name, cpu, err)
	}
	return s, nil
}

// runChild is the child process: it runs the experiment c.child names
// once, at the one GOMAXPROCS of c.cpus, and prints its figures.
func runChild(c config) error {
	sc, p, ok := experimentNamed(c.child)
	if !ok || len(c.cpus) != 1 {
		return fmt.Errorf("-child %q: want scenario=NAME/peer=PEER of an experiment, and one -cpu", c.child)
	}
	runtime.GOMAXPROCS(c.cpus[0])
	stop, err := startProfiles(c)
	if err != nil {
		return err
	}
	s := sc.Once(newEnv(c), p)
	if err := stop(); err != nil {
		return err
	}
	finite(s)
	return json.NewEncoder(os.Stdout).Encode(s)
}

// experimentNamed finds the experiment and peer of a scenario=NAME/peer=PEER
// name.
func experimentNamed(name string) (Scenario, Peer, bool) {
	scName, peerName, _ := strings.Cut(strings.TrimPrefix(name, "scenario="), "/peer=")
	for _, sc := range Scenarios() {
		if sc.Name != scName || sc.Once == nil {
			continue
		}
		for _, p := range sc.Peers {
			if p.Name == peerName {
				return sc, p, true
			}
		}
	}
	return Scenario{}, Peer{}, false
}
