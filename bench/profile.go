package main

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
)

// profPath puts a bare file name into pprof/.
func profPath(name string) string {
	if name == "" || strings.ContainsRune(name, os.PathSeparator) || strings.Contains(name, "/") {
		return name
	}
	return filepath.Join("pprof", name)
}

// childProfPath names the profile a child process writes for one
// experiment: path with the experiment inserted before its extension,
// pprof/cpu.pprof becoming pprof/cpu.deadlines.locks.cpu2.pprof.
func childProfPath(path, scenario, peer string, cpu int) string {
	if path == "" {
		return ""
	}
	ext := filepath.Ext(path)
	return fmt.Sprintf("%s.%s.%s.cpu%d%s", strings.TrimSuffix(path, ext), scenario, peer, cpu, ext)
}

// startProfiles starts the profiles c asks for and returns the function
// that writes them.
func startProfiles(c config) (stop func() error, err error) {
	for _, p := range []string{c.cpuprof, c.memprof, c.mutexprof} {
		if p != "" {
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return nil, err
			}
		}
	}
	var cpuFile *os.File
	if c.cpuprof != "" {
		if cpuFile, err = os.Create(c.cpuprof); err != nil {
			return nil, err
		}
		if err := pprof.StartCPUProfile(cpuFile); err != nil {
			return nil, err
		}
	}
	if c.memprof != "" && c.memrate > 0 {
		runtime.MemProfileRate = c.memrate
	}
	if c.mutexprof != "" {
		runtime.SetMutexProfileFraction(1)
	}
	return func() error {
		if cpuFile != nil {
			pprof.StopCPUProfile()
			if err := cpuFile.Close(); err != nil {
				return err
			}
			fmt.Fprintln(os.Stderr, "CPU profile written to", c.cpuprof)
		}
		if err := writeProfile("allocs", c.memprof); err != nil {
			return err
		}
		return writeProfile("mutex", c.mutexprof)
	}, nil
}

// writeProfile writes the named runtime/pprof profile to path, if path is
// set.
func writeProfile(name, path string) error {
	if path == "" {
		return nil
	}
	runtime.GC()
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.Lookup(name).WriteTo(f, 0); err != nil {
		f.Close()
		return err
	}
	fmt.Fprintf(os.Stderr, "%s profile written to %s\n", name, path)
	return f.Close()
}
