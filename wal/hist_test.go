package wal_test

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/durawal/durawal/wal"
	"github.com/stretchr/testify/require"
)

// histogramOf builds a Histogram from samples the way the log records them.
func histogramOf(samples []time.Duration) wal.Histogram {
	var h wal.Histogram
	for _, d := range samples {
		i := bucketOf(d)
		h.Buckets[i]++
		h.Count++
		h.Sum += d
	}
	return h
}

// bucketOf finds d's bucket from the public bounds alone.
func bucketOf(d time.Duration) int {
	lo, hi := 0, wal.HistogramBuckets-1
	for lo < hi { // first bucket whose upper bound exceeds d
		mid := (lo + hi) / 2
		if _, up := wal.BucketBounds(mid); up > d {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo
}

// exactQuantile is the nearest-rank quantile: the ⌈q·n⌉-th smallest sample.
func exactQuantile(sorted []time.Duration, q float64) time.Duration {
	return sorted[max(int(math.Ceil(q*float64(len(sorted)))), 1)-1]
}

// TestHistogramQuantileWithinBucket: p50, p99 and p999 read from the
// histogram agree with the exact quantiles of the same samples within one
// bucket's width, for log-normal samples like fsync latencies (median
// ~100 µs, a long tail) and for a few fixed shapes.
func TestHistogramQuantileWithinBucket(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	shapes := map[string]func() time.Duration{
		"lognormal-100us": func() time.Duration { return time.Duration(math.Exp(math.Log(100e3) + 1.2*r.NormFloat64())) },
		"uniform-1ms":     func() time.Duration { return time.Duration(r.Int64N(int64(time.Millisecond))) },
		"bimodal": func() time.Duration {
			return []time.Duration{80 * time.Microsecond, 40 * time.Millisecond}[r.IntN(100)/98]
		},
		"tiny": func() time.Duration { return time.Duration(r.IntN(40)) },
	}
	for name, gen := range shapes {
		t.Run("shape="+name, func(t *testing.T) {
			for _, n := range []int{1, 7, 1000, 100000} {
				samples := make([]time.Duration, n)
				for i := range samples {
					samples[i] = gen()
				}
				h := histogramOf(samples)
				slices.Sort(samples)
				for _, q := range []float64{0, 0.5, 0.99, 0.999, 1} {
					exact, est := exactQuantile(samples, q), h.Quantile(q)
					lo, hi := wal.BucketBounds(bucketOf(exact))
					require.True(t, est >= lo && est < hi, "n=%d q=%v: estimate %v outside the exact value %v's bucket [%v, %v)", n, q, est, exact, lo, hi)
					require.LessOrEqual(t, (est - exact).Abs(), hi-lo, "n=%d q=%v", n, q)
				}
			}
		})
	}
}

// TestHistogramValueMethods covers Mean, CountBelow, Sub and the empty and
// overflow cases.
func TestHistogramValueMethods(t *testing.T) {
	var empty wal.Histogram
	require.Zero(t, empty.P99())
	require.Zero(t, empty.Mean())

	a := histogramOf([]time.Duration{time.Microsecond, 3 * time.Microsecond, time.Millisecond})
	require.Equal(t, (time.Microsecond+3*time.Microsecond+time.Millisecond)/3, a.Mean())
	require.Equal(t, uint64(0), a.CountBelow(1<<9))  // 2^9 ns is a bound; 1 µs = 1000 ns lies above it
	require.Equal(t, uint64(1), a.CountBelow(1<<10)) // and below 2^10 ns
	require.Equal(t, uint64(2), a.CountBelow(1<<12))
	require.Equal(t, uint64(3), a.CountBelow(1<<20))

	b := histogramOf([]time.Duration{time.Microsecond, 3 * time.Microsecond, time.Millisecond, 2 * time.Second, 2 * time.Second})
	d := b.Sub(a)
	require.Equal(t, uint64(2), d.Count)
	require.Equal(t, 4*time.Second, d.Sum)
	require.InDelta(t, float64(2*time.Second), float64(d.P50()), float64(2*time.Second)/16)

	huge := histogramOf([]time.Duration{100 * time.Second})
	lo, hi := wal.BucketBounds(wal.HistogramBuckets - 1)
	require.Equal(t, time.Duration(1<<36), lo)
	require.Equal(t, time.Duration(math.MaxInt64), hi)
	require.Equal(t, lo, huge.P99(), "a quantile in the overflow bucket reads as its lower bound")
	require.Panics(t, func() { wal.BucketBounds(wal.HistogramBuckets) })
}
