//go:build race

package fuzz

// raceEnabled reports whether the tests run under the race detector.
const raceEnabled = true
