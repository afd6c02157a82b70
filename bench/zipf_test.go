package main

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestZipfDistribution draws a million ranks of 1,000 with θ = 0.99 and
// checks them against the exact Zipf law: the exact ranks 0 and 1 within
// 2% of their probability, and the CDF at a few points within 2 points.
func TestZipfDistribution(t *testing.T) {
	const n, draws = 1000, 1_000_000
	z := NewZipf(n, 0.99)
	r := rand.New(rand.NewPCG(1, 2))
	counts := make([]int, n)
	for range draws {
		k := z.Next(r)
		if k >= n {
			t.Fatalf("rank %d out of 0..%d", k, n-1)
		}
		counts[k]++
	}
	for _, k := range []uint64{0, 1} {
		got, want := float64(counts[k])/draws, z.Prob(k)
		if math.Abs(got-want) > 0.02*want {
			t.Errorf("P(rank %d) = %.4f, want %.4f ± 2%%", k, got, want)
		}
	}
	var cum, want float64
	next := 0
	for _, at := range []int{2, 10, 100, 500} {
		for ; next < at; next++ {
			cum += float64(counts[next]) / draws
			want += z.Prob(uint64(next))
		}
		if math.Abs(cum-want) > 0.02 {
			t.Errorf("P(rank < %d) = %.4f, want %.4f ± 0.02", at, cum, want)
		}
	}
	if counts[0] <= counts[1] || counts[1] <= counts[10] || counts[10] <= counts[900] {
		t.Errorf("ranks not hottest first: counts[0,1,10,900] = %d %d %d %d", counts[0], counts[1], counts[10], counts[900])
	}
}

// TestZipfHotKey checks the figure the zipf scenario relies on: over a
// million keys with θ = 0.99, the hottest key takes about 1/ζ(10⁶, 0.99)
// ≈ 6.5% of the draws and most keys are cold.
func TestZipfHotKey(t *testing.T) {
	if testing.Short() {
		t.Skip("sums a million terms")
	}
	z := NewZipf(1_000_000, 0.99)
	if p := z.Prob(0); p < 0.06 || p > 0.08 {
		t.Errorf("P(rank 0) = %.4f, want about 0.065", p)
	}
	draws := z.Draws(100_000, 7)
	top := 0
	for _, d := range draws {
		if d < 1000 {
			top++
		}
	}
	// ζ(1000)/ζ(10⁶) ≈ 0.50: about half the draws hit the 0.1% hottest keys.
	if f := float64(top) / float64(len(draws)); f < 0.45 || f > 0.6 {
		t.Errorf("share of draws on the 1,000 hottest keys = %.3f, want about 0.50", f)
	}
}

func TestZipfRankEdges(t *testing.T) {
	z := NewZipf(100, 0.5)
	if got := z.Rank(0); got != 0 {
		t.Errorf("Rank(0) = %d, want 0", got)
	}
	if got := z.Rank(math.Nextafter(1, 0)); got != 99 {
		t.Errorf("Rank(1-ε) = %d, want 99", got)
	}
	for _, bad := range []float64{0, 1, 1.5} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("NewZipf(100, %v) did not panic", bad)
				}
			}()
			NewZipf(100, bad)
		}()
	}
}
