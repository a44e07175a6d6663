package wal

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestHistIndexBounds: every duration falls into the bucket whose bounds
// hold it, buckets tile the line without gaps, and no bucket is wider than
// 1/16 of its lower bound (1 ns below 16 ns).
func TestHistIndexBounds(t *testing.T) {
	for i := 0; i < HistogramBuckets-1; i++ {
		lo, hi := BucketBounds(i)
		require.Less(t, lo, hi, "bucket %d", i)
		nextLo, _ := BucketBounds(i + 1)
		require.Equal(t, hi, nextLo, "bucket %d ends where %d begins", i, i+1)
		require.LessOrEqual(t, hi-lo, max(lo/histSub, 1), "bucket %d [%d, %d) too wide", i, lo, hi)
		require.Equal(t, i, histIndex(uint64(lo)), "lower bound of %d", i)
		require.Equal(t, i, histIndex(uint64(hi-1)), "last value of %d", i)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 100000 {
		ns := r.Uint64() >> r.IntN(64)
		i := histIndex(ns)
		lo, hi := BucketBounds(i)
		require.True(t, uint64(lo) <= ns && (i == HistogramBuckets-1 || ns < uint64(hi)), "%d ns in bucket %d [%d, %d)", ns, i, lo, hi)
	}
	require.Equal(t, HistogramBuckets-1, histIndex(1<<histMaxExp))
	require.Equal(t, HistogramBuckets-1, histIndex(^uint64(0)))
	h := &latencyHist{}
	h.record(-time.Second)
	require.Equal(t, uint64(1), h.snapshot().Buckets[0], "a negative duration counts as 0")
}

// TestHistRecordAllocs: recording allocates nothing.
func TestHistRecordAllocs(t *testing.T) {
	h := &latencyHist{}
	require.Zero(t, testing.AllocsPerRun(1000, func() { h.record(1234 * time.Microsecond) }))
}

// BenchmarkHistRecord measures what timing one commit adds to it: two
// monotonic clock reads and a record (two atomic adds), alone and from
// every P at once (contended cache lines).
func BenchmarkHistRecord(b *testing.B) {
	origin := time.Now()
	var h latencyHist
	b.Run("serial", func(b *testing.B) {
		for b.Loop() {
			start := time.Since(origin)
			h.record(time.Since(origin) - start)
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				start := time.Since(origin)
				h.record(time.Since(origin) - start)
			}
		})
	})
}
