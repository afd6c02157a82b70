package fuzz

import (
	"math/rand/v2"
	"testing"
)

// FuzzStore decodes the fuzzer's bytes into a script (see Decode) and runs
// it against a store and the model, failing on any difference or broken
// invariant. Its seeds, in testdata/fuzz/FuzzStore, are the failure modes
// seen in the field, written as scripts (see README.md).
func FuzzStore(f *testing.F) {
	for seed := range uint64(4) {
		f.Add(Encode(Generate(rand.New(rand.NewPCG(seed, 0xf022)), 40)))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		runScript(t, Decode(data))
	})
}
