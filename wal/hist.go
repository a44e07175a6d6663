package wal

import (
	"math"
	"math/bits"
	"sync/atomic"
	"time"
)

// Histogram layout: log-linear (HDR-style) buckets over nanoseconds. Below
// 2^histSubBits ns each nanosecond has its own bucket; above, every power of
// two [2^e, 2^(e+1)) is split into histSub equal buckets, so a bucket is at
// most 1/histSub (6.25 %) of its lower bound wide. Values from 2^histMaxExp
// ns (about 68.7 s) up go to one overflow bucket.
const (
	histSubBits = 4
	histSub     = 1 << histSubBits
	histMaxExp  = 36
	// HistogramBuckets is the number of buckets of a [Histogram]: 16 per
	// power of two of nanoseconds up to 2^36 ns (about 68.7 s), the first
	// 16 one nanosecond wide, and a last, overflow bucket for everything
	// from 2^36 ns up.
	HistogramBuckets = (histMaxExp-histSubBits+1)*histSub + 1
)

// histIndex returns the bucket of a duration of ns nanoseconds.
func histIndex(ns uint64) int {
	if ns < histSub {
		return int(ns)
	}
	e := bits.Len64(ns) - 1 // 2^e <= ns < 2^(e+1)
	if e >= histMaxExp {
		return HistogramBuckets - 1
	}
	sub := int(ns>>(e-histSubBits)) & (histSub - 1)
	return (e-histSubBits+1)*histSub + sub
}

// histLower returns the smallest duration in nanoseconds that falls into
// bucket i.
func histLower(i int) uint64 {
	if i < histSub {
		return uint64(i)
	}
	if i >= HistogramBuckets-1 {
		return 1 << histMaxExp
	}
	e := i/histSub + histSubBits - 1
	sub := uint64(i % histSub)
	return 1<<e + sub<<(e-histSubBits)
}

// latencyHist is the live, atomically updated form of a [Histogram]. record
// never allocates and never blocks.
type latencyHist struct {
	sum     atomic.Uint64
	buckets [HistogramBuckets]atomic.Uint64 // their sum is the count
}

// record counts one duration d (negative durations count as 0): two atomic
// adds, one for 0 (an untimed commit's).
func (h *latencyHist) record(d time.Duration) {
	ns := uint64(max(d, 0))
	h.buckets[histIndex(ns)].Add(1)
	if ns > 0 {
		h.sum.Add(ns)
	}
}

// snapshot copies h into a Histogram. Concurrent records may be seen in
// the buckets and not yet in the sum, or the reverse; Count is the sum of
// the buckets, so the two agree.
func (h *latencyHist) snapshot() Histogram {
	var s Histogram
	h.snapshotInto(&s)
	return s
}

// snapshotInto fills *s with h's counts (snapshot without a copy).
func (h *latencyHist) snapshotInto(s *Histogram) {
	s.Count = 0
	for i := range h.buckets {
		c := h.buckets[i].Load()
		s.Buckets[i] = c
		s.Count += c
	}
	s.Sum = time.Duration(h.sum.Load())
}

// A Histogram is a snapshot of a latency distribution: how many durations
// fell into each of [HistogramBuckets] fixed log-linear buckets, counted
// since [Open]. Bucket i holds the durations in [BucketBounds](i); a bucket
// is at most 1/16 of its lower bound wide (1 ns below 16 ns), so a quantile
// read from it is within 6.25 % of the exact one. A Histogram is a plain
// value: copy it, compare it, subtract an earlier one ([Histogram.Sub]) to
// get the distribution of an interval. Its methods are safe for concurrent
// use as long as nothing writes the value.
type Histogram struct {
	// Count is the number of durations recorded: the sum of Buckets.
	Count uint64
	// Sum is the total of the durations recorded. Read with the buckets
	// one by one while records go on, it may include a few durations the
	// buckets do not, or miss a few they include.
	Sum time.Duration
	// Buckets holds the count of each bucket, in order of duration.
	Buckets [HistogramBuckets]uint64
}

// BucketBounds returns the durations bucket i holds: lower ≤ d < upper. The
// last bucket's upper bound is math.MaxInt64 ns. It panics if i is not in
// 0..HistogramBuckets-1.
func BucketBounds(i int) (lower, upper time.Duration) {
	if i < 0 || i >= HistogramBuckets {
		panic("wal: histogram bucket index out of range")
	}
	if i == HistogramBuckets-1 {
		return time.Duration(histLower(i)), time.Duration(math.MaxInt64)
	}
	return time.Duration(histLower(i)), time.Duration(histLower(i + 1))
}

// Quantile returns an estimate of the q-quantile (0 ≤ q ≤ 1) of the
// recorded durations: it finds the bucket holding the sample of rank
// ⌈q·Count⌉ (the nearest-rank quantile, at least rank 1) and interpolates
// linearly inside it, so the exact quantile and the estimate lie in the same
// bucket. It returns 0 for an empty histogram, and the overflow bucket's
// lower bound (2^36 ns) for a quantile that fell into it. A q outside 0..1
// is clamped.
func (h Histogram) Quantile(q float64) time.Duration {
	if h.Count == 0 {
		return 0
	}
	q = min(max(q, 0), 1)
	rank := max(uint64(math.Ceil(q*float64(h.Count))), 1)
	var seen uint64
	for i, c := range h.Buckets {
		if c == 0 || seen+c < rank {
			seen += c
			continue
		}
		lo, hi := BucketBounds(i)
		if i == HistogramBuckets-1 {
			return lo
		}
		// rank is the k-th of the c samples in [lo, hi): place it at
		// lo + (k - ½)/c of the width, which stays inside the bucket.
		k := float64(rank - seen)
		return lo + time.Duration((k-0.5)/float64(c)*float64(hi-lo))
	}
	lo, _ := BucketBounds(HistogramBuckets - 1)
	return lo // not reached unless Count disagrees with Buckets
}

// P50, P99 and P999 return Quantile(0.5), Quantile(0.99) and
// Quantile(0.999).
func (h Histogram) P50() time.Duration  { return h.Quantile(0.5) }
func (h Histogram) P99() time.Duration  { return h.Quantile(0.99) }
func (h Histogram) P999() time.Duration { return h.Quantile(0.999) }

// Mean returns Sum / Count, or 0 for an empty histogram.
func (h Histogram) Mean() time.Duration {
	if h.Count == 0 {
		return 0
	}
	return h.Sum / time.Duration(h.Count)
}

// CountBelow returns how many recorded durations lie in buckets whose upper
// bound is at most d: exactly the durations < d when d is a bucket bound
// (every power of two of nanoseconds is one, as are the bounds
// [BucketBounds] returns), and a lower bound on them otherwise. Exporters
// use it for cumulative buckets ("le" in Prometheus).
func (h Histogram) CountBelow(d time.Duration) uint64 {
	var n uint64
	for i, c := range h.Buckets {
		if _, hi := BucketBounds(i); hi > d {
			break
		}
		n += c
	}
	return n
}

// Sub returns h minus an earlier snapshot of the same histogram: the
// distribution of the durations recorded between the two, e.g. since the
// previous scrape, so that one slow sync long ago does not pin a quantile.
// Counts that would go negative (earlier is not an earlier snapshot of h)
// are 0.
func (h Histogram) Sub(earlier Histogram) Histogram {
	var d Histogram
	for i := range h.Buckets {
		if h.Buckets[i] > earlier.Buckets[i] {
			d.Buckets[i] = h.Buckets[i] - earlier.Buckets[i]
			d.Count += d.Buckets[i]
		}
	}
	d.Sum = max(h.Sum-earlier.Sum, 0)
	return d
}
