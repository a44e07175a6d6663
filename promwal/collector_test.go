package promwal_test

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/durawal/durawal/policy"
	"github.com/durawal/durawal/promwal"
	"github.com/durawal/durawal/wal"
	"github.com/durawal/durawal/wal/vfs"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sampleCount scrapes c in the text format, as Prometheus would, and
// returns the _count of the histogram name, summed over its series.
func sampleCount(t *testing.T, c prometheus.Collector, name string) uint64 {
	t.Helper()
	text, err := testutil.CollectAndFormat(c, expfmt.TypeTextPlain, name)
	require.NoError(t, err)
	ms := regexp.MustCompile(`(?m)^`+name+`_count(\{[^}]*\})? (\d+)$`).FindAllSubmatch(text, -1)
	require.NotEmpty(t, ms, "no %s_count in the scrape:\n%s", name, text)
	var sum uint64
	for _, m := range ms {
		n, err := strconv.ParseUint(string(m[2]), 10, 64)
		require.NoError(t, err)
		sum += n
	}
	return sum
}

// TestFsyncHistogramMovesUnderLoad: a scrape shows the fsync histogram's
// count growing with durable commits on a real directory, equal to
// Stats.Fsyncs, with cumulative buckets that never decrease.
func TestFsyncHistogramMovesUnderLoad(t *testing.T) {
	l, err := wal.Open(t.TempDir(), wal.Options{Policy: policy.SyncEveryCommit(), SegmentSize: 1 << 20})
	require.NoError(t, err)
	defer l.Close()
	c := promwal.NewCollector(l, promwal.Options{})
	before := sampleCount(t, c, "durawal_wal_fsync_duration_seconds")

	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 100 {
				_, err := l.Append([]byte(fmt.Sprintf("w%d-%d", w, i)))
				assert.NoError(t, err)
			}
		})
	}
	wg.Wait()
	after := sampleCount(t, c, "durawal_wal_fsync_duration_seconds")
	require.Greater(t, after, before, "the fsync histogram moved under load")
	require.Equal(t, l.Stats().Fsyncs, after)
	require.Equal(t, uint64(400), sampleCount(t, c, "durawal_wal_commit_duration_seconds"), "every commit waited for a sync")

	text, err := testutil.CollectAndFormat(c, expfmt.TypeTextPlain, "durawal_wal_fsync_duration_seconds")
	require.NoError(t, err)
	var prev uint64
	for _, m := range regexp.MustCompile(`(?m)^durawal_wal_fsync_duration_seconds_bucket\{[^}]*\} (\d+)$`).FindAllSubmatch(text, -1) {
		n, _ := strconv.ParseUint(string(m[1]), 10, 64)
		require.GreaterOrEqual(t, n, prev, "cumulative buckets:\n%s", text)
		prev = n
	}
	require.Equal(t, after, prev, "the +Inf bucket holds every sync")
	require.Contains(t, string(text), `dir="`+l.Dir()+`"`, "the default constant label is the directory")
}

// TestCollectorValues: counters and gauges carry Stats' values and the
// constant labels given.
func TestCollectorValues(t *testing.T) {
	l, err := wal.Open("/wal", wal.Options{FS: vfs.NewMem(), SegmentSize: 1 << 20, Policy: policy.SyncNever()})
	require.NoError(t, err)
	defer l.Close()
	for range 10 {
		_, err := l.Append([]byte("0123456789"))
		require.NoError(t, err)
	}
	c := promwal.NewCollector(l, promwal.Options{ConstLabels: prometheus.Labels{"log": "orders"}})
	want := `
# HELP durawal_wal_commits_total Append, AppendContext and AppendBatch calls that returned nil.
# TYPE durawal_wal_commits_total counter
durawal_wal_commits_total{log="orders"} 10
# HELP durawal_wal_appended_bytes_total Record payload bytes appended.
# TYPE durawal_wal_appended_bytes_total counter
durawal_wal_appended_bytes_total{log="orders"} 100
# HELP durawal_wal_segments Segment files the log consists of.
# TYPE durawal_wal_segments gauge
durawal_wal_segments{log="orders"} 1
# HELP durawal_wal_segment_bytes Total size of the segment files in bytes.
# TYPE durawal_wal_segment_bytes gauge
durawal_wal_segment_bytes{log="orders"} 1.048576e+06
# HELP durawal_wal_info Constant 1; labels tell the durability policy and the sync method in use, and whether the sync method is a fallback.
# TYPE durawal_wal_info gauge
durawal_wal_info{log="orders",policy="sync-never",sync_method="fdatasync",sync_method_fallback="false"} 1
# HELP durawal_wal_segments_prepared_total Segments prepared for use (allocated, zero-filled, or reused), the first one included.
# TYPE durawal_wal_segments_prepared_total counter
durawal_wal_segments_prepared_total{log="orders"} 1
# HELP durawal_wal_segments_allocated_total Segments prepared by allocating their blocks (fallocate) instead of writing zeros.
# TYPE durawal_wal_segments_allocated_total counter
durawal_wal_segments_allocated_total{log="orders"} 1
# HELP durawal_wal_segment_prepare_bytes_total Bytes written to prepare segments (zeros).
# TYPE durawal_wal_segment_prepare_bytes_total counter
durawal_wal_segment_prepare_bytes_total{log="orders"} 0
# HELP durawal_wal_segment_zeroed_ahead_bytes_total Zeros written into allocated segments just ahead of their frames, where commits sync.
# TYPE durawal_wal_segment_zeroed_ahead_bytes_total counter
durawal_wal_segment_zeroed_ahead_bytes_total{log="orders"} 0
`
	require.NoError(t, testutil.CollectAndCompare(c, strings.NewReader(want),
		"durawal_wal_commits_total", "durawal_wal_appended_bytes_total", "durawal_wal_segments", "durawal_wal_segment_bytes", "durawal_wal_info",
		"durawal_wal_segments_prepared_total", "durawal_wal_segments_allocated_total", "durawal_wal_segment_prepare_bytes_total",
		"durawal_wal_segment_zeroed_ahead_bytes_total"))
	require.Equal(t, uint64(10), sampleCount(t, c, "durawal_wal_commit_duration_seconds"))
	require.Equal(t, uint64(10), sampleCount(t, c, "durawal_wal_group_size"), "one group per lone commit")
	require.NoError(t, l.Sync())
	require.Equal(t, l.Stats().UnsyncedWait.Count, sampleCount(t, c, "durawal_wal_unsynced_wait_seconds"))
	require.Positive(t, sampleCount(t, c, "durawal_wal_unsynced_wait_seconds"), "Sync made the written records durable")
}

// TestCollectorLint: the metrics pass client_golang's linter (names, units,
// _total on counters), and a pedantic registry accepts the collector
// (descriptors consistent with what Collect sends).
func TestCollectorLint(t *testing.T) {
	l, err := wal.Open("/wal", wal.Options{FS: vfs.NewMem(), SegmentSize: 1 << 20})
	require.NoError(t, err)
	defer l.Close()
	_, err = l.AppendContext(context.Background(), []byte("x"))
	require.NoError(t, err)
	c := promwal.NewCollector(l, promwal.Options{})
	problems, err := testutil.CollectAndLint(c)
	require.NoError(t, err)
	require.Empty(t, problems)
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(c))
	_, err = reg.Gather()
	require.NoError(t, err)
}
