package main

import (
	"math"
	"math/rand/v2"
)

// Zipf draws ranks 0..n-1 with probability proportional to 1/(rank+1)^θ,
// for 0 < θ < 1: rank 0 is the hottest key. math/rand's Zipf needs s > 1,
// so it cannot give YCSB's default θ = 0.99; this is YCSB's
// ZipfianGenerator, the method of Gray et al., "Quickly generating
// billion-record synthetic databases" (SIGMOD 1994): ranks 0 and 1 are
// exact, the rest follow a closed-form approximation of the inverse CDF.
//
// Cost: New is O(n) (it sums the zeta series once); Rank is O(1), one
// math.Pow. A Zipf is read-only after New and safe for concurrent use; the
// random source is the caller's.
type Zipf struct {
	n     uint64
	theta float64
	alpha float64 // 1/(1-θ)
	zetan float64 // ζ(n, θ) = Σ_{i=1..n} 1/i^θ
	eta   float64 // (1 - (2/n)^(1-θ)) / (1 - ζ(2,θ)/ζ(n,θ))
	half  float64 // 1 + 0.5^θ = ζ(2, θ)
}

// NewZipf returns a generator of ranks 0..n-1 with exponent theta. It
// panics unless n >= 2 and 0 < theta < 1.
func NewZipf(n uint64, theta float64) *Zipf {
	if n < 2 || !(theta > 0 && theta < 1) {
		panic("bench: NewZipf needs n >= 2 and 0 < theta < 1")
	}
	z := &Zipf{n: n, theta: theta, alpha: 1 / (1 - theta), half: 1 + math.Pow(0.5, theta)}
	z.zetan = zeta(n, theta)
	z.eta = (1 - math.Pow(2/float64(n), 1-theta)) / (1 - z.half/z.zetan)
	return z
}

// zeta returns Σ_{i=1..n} 1/i^θ, summed from the small terms up for
// accuracy.
func zeta(n uint64, theta float64) float64 {
	var sum float64
	for i := n; i >= 1; i-- {
		sum += 1 / math.Pow(float64(i), theta)
	}
	return sum
}

// Rank maps u, uniform in [0, 1), to a rank in 0..n-1.
func (z *Zipf) Rank(u float64) uint64 {
	uz := u * z.zetan
	switch {
	case uz < 1:
		return 0
	case uz < z.half:
		return 1
	}
	r := uint64(float64(z.n) * math.Pow(z.eta*u-z.eta+1, z.alpha))
	if r >= z.n {
		r = z.n - 1
	}
	return r
}

// Next draws a rank with r.
func (z *Zipf) Next(r *rand.Rand) uint64 { return z.Rank(r.Float64()) }

// Prob returns the exact probability of rank under the Zipf law the
// generator approximates.
func (z *Zipf) Prob(rank uint64) float64 {
	return 1 / (math.Pow(float64(rank+1), z.theta) * z.zetan)
}

// Draws returns k ranks drawn with a generator seeded by seed, to be
// replayed by a benchmark loop so that drawing costs nothing while timed.
func (z *Zipf) Draws(k int, seed uint64) []uint32 {
	r := rand.New(rand.NewPCG(seed, 0x9E3779B97F4A7C15))
	out := make([]uint32, k)
	for i := range out {
		out[i] = uint32(z.Next(r))
	}
	return out
}
