package main

import (
	"strings"

	"github.com/durawal/durawal/internal/measure"
)

// median is measure.Median: the median of the per-round figures.
func median(xs []float64) float64 { return measure.Median(xs) }

func splitComma(s string) []string {
	var out []string
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
