package fuzz

import (
	"flag"
	"math/rand/v2"
	"testing"
)

var scripts = flag.Int("scripts", 0, "random scripts TestModel runs (0: 1000, 400 under -race, 60 with -short)")

// TestModel runs many random scripts through the store and the model: the
// same grants, in the same fence order, the same errors at the same
// instants, and the store's invariants after every op (the
// "model-based test"). Each script is seeded by its number, so a failure
// names the seed that reproduces it; -scripts runs more.
func TestModel(t *testing.T) {
	n := 1000
	switch {
	case *scripts > 0:
		n = *scripts
	case testing.Short():
		n = 60
	case raceEnabled:
		n = 400
	}
	for seed := range uint64(n) {
		s := Generate(rand.New(rand.NewPCG(seed, 0x10c5)), 100)
		if !t.Run("", func(t *testing.T) { runScript(t, s) }) {
			t.Fatalf("seed %d failed", seed)
		}
	}
}

// TestScriptRoundTrip checks that Encode is Decode's inverse for generated
// scripts, so seed files are the scripts the tests write.
func TestScriptRoundTrip(t *testing.T) {
	if len(durations) != durMs-durTable {
		t.Fatalf("durMs is %d, want %d", durMs, durTable+len(durations))
	}
	for seed := range uint64(200) {
		s := Generate(rand.New(rand.NewPCG(seed, 1)), 50)
		got := Decode(Encode(s))
		if got.String() != s.String() {
			t.Fatalf("seed %d: decoded\n%v\nwant\n%v", seed, got, s)
		}
	}
}
