//go:build race

package locks_test

// raceEnabled reports whether the tests run under the race detector.
const raceEnabled = true
