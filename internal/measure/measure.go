// Package measure holds the latency arithmetic and number formatting shared
// by the benchmarks in package bench, bench/cmd/walbench and the teaching
// programs in examples/: percentiles of commit latencies, their summary, the
// points of a latency CDF, and thousands separators. It is tooling, not part
// of the library: wal, policy and groupcommit never import it. Percentiles use the
// nearest-rank rule on the sorted samples, so every reported figure is a
// latency that was really observed.
package measure

import (
	"slices"
	"strconv"
	"strings"
	"time"
)

// Summary describes a set of latency samples. The zero value describes no
// samples. Durations are JSON-encoded in nanoseconds.
type Summary struct {
	N    int           `json:"n"`
	Min  time.Duration `json:"min_ns"`
	P50  time.Duration `json:"p50_ns"`
	P95  time.Duration `json:"p95_ns"`
	P99  time.Duration `json:"p99_ns"`
	P999 time.Duration `json:"p999_ns"`
	Max  time.Duration `json:"max_ns"`
	Mean time.Duration `json:"mean_ns"`
}

// Summarize sorts samples in place and returns their summary.
func Summarize(samples []time.Duration) Summary {
	if len(samples) == 0 {
		return Summary{}
	}
	slices.Sort(samples)
	var sum time.Duration
	for _, d := range samples {
		sum += d
	}
	return Summary{
		N:    len(samples),
		Min:  samples[0],
		P50:  Percentile(samples, 50),
		P95:  Percentile(samples, 95),
		P99:  Percentile(samples, 99),
		P999: Percentile(samples, 99.9),
		Max:  samples[len(samples)-1],
		Mean: sum / time.Duration(len(samples)),
	}
}

// Percentile returns the p-th percentile (0 < p ≤ 100) of sorted by the
// nearest-rank rule: the smallest sample with at least p% of the samples at
// or below it. It returns 0 for no samples.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	rank := int(float64(n)*p/100 + 0.999999999) // ceil, tolerant of float error
	rank = min(max(rank, 1), n)
	return sorted[rank-1]
}

// Point is one point of a cumulative distribution: the fraction of samples
// at or below Latency.
type Point struct {
	Latency  time.Duration `json:"latency_ns"`
	Fraction float64       `json:"fraction"`
}

// CDF returns at most max points of the cumulative distribution of sorted
// (ascending) samples, evenly spaced in rank, always including the largest
// sample.
func CDF(sorted []time.Duration, max int) []Point {
	n := len(sorted)
	if n == 0 || max < 1 {
		return nil
	}
	step := (n + max - 1) / max
	pts := make([]Point, 0, n/step+1)
	for i := step - 1; i < n; i += step {
		pts = append(pts, Point{sorted[i], float64(i+1) / float64(n)})
	}
	if pts[len(pts)-1].Fraction < 1 {
		pts = append(pts, Point{sorted[n-1], 1})
	}
	return pts
}

// Recorder collects the latency samples of one goroutine; give each
// committer its own and [Merge] them afterwards. It is not safe for
// concurrent use.
type Recorder struct {
	samples []time.Duration
}

// NewRecorder returns a Recorder with room for n samples before it grows.
func NewRecorder(n int) *Recorder {
	return &Recorder{samples: make([]time.Duration, 0, n)}
}

// Time runs f, records how long it took, and returns f's error.
func (r *Recorder) Time(f func() error) error {
	start := time.Now()
	err := f()
	r.samples = append(r.samples, time.Since(start))
	return err
}

// Add records one sample.
func (r *Recorder) Add(d time.Duration) { r.samples = append(r.samples, d) }

// Merge returns the samples of every recorder in one new slice.
func Merge(rs ...*Recorder) []time.Duration {
	n := 0
	for _, r := range rs {
		n += len(r.samples)
	}
	all := make([]time.Duration, 0, n)
	for _, r := range rs {
		all = append(all, r.samples...)
	}
	return all
}

// Thousands formats n with comma separators, e.g. "10,209".
func Thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// Median returns the median of xs (the lower middle for an even count), or 0
// for none, without modifying xs: the figure the tools report over repeated
// rounds.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[(len(s)-1)/2]
}
