package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The ratios of one run hold against noise that hits every peer alike,
// not against a machine that another job keeps busy part of the time. So
// each scenario says how much of the machine's CPU time went elsewhere
// while it ran: to other processes, or stolen by the hypervisor. A run
// where that share is more than a few percent is a run to repeat.

// userHZ is the unit of /proc/stat: Linux reports CPU time in 1/100 s on
// every architecture.
const userHZ = 100

// cpuSample is the machine's CPU time and this process's at one moment.
type cpuSample struct {
	busy, steal, total float64       // seconds, all CPUs, from /proc/stat
	own                time.Duration // this process and its waited-for children
	ok                 bool
}

// sampleCPU reads the machine's and this process's CPU time; ok is false
// where /proc/stat cannot be read (not Linux).
func sampleCPU() cpuSample {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuSample{}
	}
	line, _, _ := strings.Cut(string(b), "\n")
	s, ok := parseCPULine(line)
	if !ok {
		return cpuSample{}
	}
	for _, who := range []int{syscall.RUSAGE_SELF, syscall.RUSAGE_CHILDREN} {
		var ru syscall.Rusage
		if syscall.Getrusage(who, &ru) == nil {
			s.own += time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		}
	}
	return s
}

// parseCPULine reads the "cpu" line of /proc/stat: user nice system idle
// iowait irq softirq steal ..., in 1/userHZ s.
func parseCPULine(line string) (cpuSample, bool) {
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return cpuSample{}, false
	}
	var v [8]float64
	for i := range v {
		n, err := strconv.ParseFloat(f[i+1], 64)
		if err != nil {
			return cpuSample{}, false
		}
		v[i] = n / userHZ
	}
	idle := v[3] + v[4]
	s := cpuSample{steal: v[7], ok: true}
	for _, x := range v {
		s.total += x
	}
	s.busy = s.total - idle - s.steal
	return s, true
}

// elsewhere returns the share of the machine's CPU time between a and b
// that went to other processes, and the share the hypervisor stole; ok is
// false where either sample is missing or no time passed.
func elsewhere(a, b cpuSample) (others, stolen float64, ok bool) {
	total := b.total - a.total
	if !a.ok || !b.ok || total <= 0 {
		return 0, 0, false
	}
	others = (b.busy - a.busy - (b.own - a.own).Seconds()) / total
	return max(others, 0), (b.steal - a.steal) / total, true
}

// loadNote says in words what elsewhere found, or "" where it found
// nothing.
func loadNote(a, b cpuSample) string {
	others, stolen, ok := elsewhere(a, b)
	if !ok {
		return ""
	}
	note := fmt.Sprintf("machine: other processes took %.0f%% of the CPU time while this ran, the hypervisor %.0f%%", 100*others, 100*stolen)
	if others+stolen > 0.05 {
		note += " (a busy machine: repeat the run)"
	}
	return note
}
