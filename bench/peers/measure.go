package main

import (
	"slices"
	"strings"
	"time"
)

// percentile returns the p-th percentile (0 < p ≤ 100) of sorted by the
// nearest-rank rule, so every figure is a latency that was observed; 0 for
// no samples. (internal/measure does the same for the main module,
// which this nested module cannot import.)
func percentile(sorted []time.Duration, p float64) time.Duration {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	rank := int(float64(n)*p/100 + 0.999999999)
	rank = min(max(rank, 1), n)
	return sorted[rank-1]
}

// median returns the median of xs (the lower middle for an even count), or
// 0 for none. It does not modify xs.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[(len(s)-1)/2]
}

func splitComma(s string) []string {
	var out []string
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
