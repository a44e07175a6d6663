// Package promwal exports a [wal.Log]'s statistics to Prometheus: a
// [prometheus.Collector] that reads [wal.Log.Stats] once per scrape and
// turns it into counters, gauges and histograms named by Prometheus
// conventions — durawal_wal_fsync_duration_seconds (the disk alarm etcd
// users know as etcd_disk_wal_fsync_duration_seconds),
// durawal_wal_commits_total, durawal_wal_segments, and so on (see
// [Collector] for the list).
//
// It is its own module (github.com/durawal/durawal/promwal), so that a
// program using durawal without Prometheus does not download
// client_golang.
//
//	reg.MustRegister(promwal.NewCollector(l, promwal.Options{}))
package promwal

import (
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/durawal/durawal/groupcommit"
	"github.com/durawal/durawal/wal"
	"github.com/prometheus/client_golang/prometheus"
)

// Options configures [NewCollector]. The zero value is valid.
type Options struct {
	// Namespace and Subsystem prefix every metric name. Defaults "durawal"
	// and "wal": durawal_wal_fsync_duration_seconds.
	Namespace, Subsystem string
	// ConstLabels are added to every metric, to tell logs apart when a
	// process has several. Default (nil): {"dir": the log's directory}.
	// Pass an empty, non-nil map for no labels.
	ConstLabels prometheus.Labels
}

// DurationBuckets are the upper bounds of the duration histograms' buckets
// in seconds: every power of two of nanoseconds from 2^10 ns (1.024 µs) to
// 2^35 ns (34.4 s). They are bounds of [wal.Histogram]'s own buckets, so
// each cumulative count is exact (the count of durations below the bound;
// a duration exactly on a bound, a one-in-a-million event at nanosecond
// resolution, is counted in the next bucket up).
var DurationBuckets = func() []float64 {
	b := make([]float64, 0, 26)
	for e := 10; e <= 35; e++ {
		b = append(b, float64(int64(1)<<e)/1e9)
	}
	return b
}()

// Collector is a [prometheus.Collector] for one [wal.Log]. Each Collect
// calls Log.Stats once and reports, with the prefix durawal_wal_ (see
// Options) and the constant labels:
//
//   - histograms: fsync_duration_seconds (Stats.FsyncDuration),
//     write_duration_seconds (WriteDuration), commit_duration_seconds with
//     label wait="none"|"written"|"synced" (CommitWaitNone, ...Written,
//     ...Synced), group_size (Group.GroupSizeHist, commits per group),
//     unsynced_wait_seconds (UnsyncedWait);
//   - counters: commits_total, records_appended_total,
//     appended_bytes_total, writes_total, written_bytes_total,
//     write_errors_total, padding_bytes_total, full_block_writes_total,
//     partial_block_writes_total, fsyncs_total, dir_syncs_total,
//     fsync_errors_total, slow_syncs_total, unsynced_over_bound_total,
//     background_syncs_total,
//     rolls_total, buffer_full_waits_total, segment_create_stalls_total,
//     postponed_writes_total, delayed_writes_total, fsync_seconds_total,
//     write_seconds_total, reader_bytes_total, reader_records_total,
//     groups_total, sync_groups_total, group_waits_total (Group.Commits),
//     group_delay_trigger_count_total, group_delay_trigger_timeout_total,
//     group_delay_sleeps_total, group_adaptive_waits_total,
//     group_adaptive_merges_total;
//   - gauges: fsyncs_pending, fsync_max_duration_seconds,
//     unsynced_wait_max_seconds, unsynced_age_seconds, poisoned (0/1),
//     appended_lsn, written_lsn, synced_lsn (bytes), first_lsn, segments,
//     segment_bytes, commits_active (Group.Active),
//     group_flush_ewma_seconds, recovery_duration_seconds,
//     recovery_torn_bytes, recovery_unvouched_bytes, recovery_clean (0/1),
//     recovery_quarantined_files, and info (value 1) with labels
//     policy (wal.Stats.Policy), sync_method and sync_method_fallback.
//
// A Collector is safe for concurrent use; scrapes do not stop appends.
// Register it once per Log; after the Log is closed it keeps reporting the
// last values.
type Collector struct {
	l           *wal.Log
	scalars     []scalar
	fsync, writ *prometheus.Desc
	unsynced    *prometheus.Desc
	commit      *prometheus.Desc
	groupSize   *prometheus.Desc
	info        *prometheus.Desc
}

// scalar is one counter or gauge read from Stats or the recovery info.
type scalar struct {
	desc *prometheus.Desc
	kind prometheus.ValueType
	get  func(*wal.Stats, *wal.RecoveryInfo) float64
}

// NewCollector returns a Collector for l. It does not read l until scraped.
func NewCollector(l *wal.Log, opts Options) *Collector {
	if opts.Namespace == "" {
		opts.Namespace = "durawal"
	}
	if opts.Subsystem == "" {
		opts.Subsystem = "wal"
	}
	labels := opts.ConstLabels
	if labels == nil {
		labels = prometheus.Labels{"dir": l.Dir()}
	}
	desc := func(name, help string, varLabels ...string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName(opts.Namespace, opts.Subsystem, name), help, varLabels, labels)
	}
	c := &Collector{
		l:         l,
		fsync:     desc("fsync_duration_seconds", "Duration of the segment syncs (fdatasync or fsync) that succeeded."),
		writ:      desc("write_duration_seconds", "Duration of the write calls to segment files."),
		commit:    desc("commit_duration_seconds", "Time from an Append call to its successful return, by what the commit waited for.", "wait"),
		unsynced:  desc("unsynced_wait_seconds", "How long written records waited to become durable: at each sync, the time since the oldest write it covered."),
		groupSize: desc("group_size", "Commits (waits) covered by one group-commit flush."),
		info:      desc("info", "Constant 1; labels tell the durability policy and the sync method in use, and whether the sync method is a fallback.", "policy", "sync_method", "sync_method_fallback"),
	}
	counter := func(name, help string, get func(*wal.Stats) uint64) {
		c.scalars = append(c.scalars, scalar{desc(name, help), prometheus.CounterValue,
			func(s *wal.Stats, _ *wal.RecoveryInfo) float64 { return float64(get(s)) }})
	}
	gauge := func(name, help string, get func(*wal.Stats, *wal.RecoveryInfo) float64) {
		c.scalars = append(c.scalars, scalar{desc(name, help), prometheus.GaugeValue, get})
	}
	seconds := func(d time.Duration) float64 { return d.Seconds() }
	counter("commits_total", "Append, AppendContext and AppendBatch calls that returned nil.", func(s *wal.Stats) uint64 { return s.Commits })
	counter("records_appended_total", "Records appended.", func(s *wal.Stats) uint64 { return s.AppendRequests })
	counter("appended_bytes_total", "Record payload bytes appended.", func(s *wal.Stats) uint64 { return s.BytesAppended })
	counter("writes_total", "Write calls to segment files.", func(s *wal.Stats) uint64 { return s.WriteCalls })
	counter("written_bytes_total", "Frame bytes written to segment files.", func(s *wal.Stats) uint64 { return s.BytesWritten })
	counter("write_errors_total", "Failed writes.", func(s *wal.Stats) uint64 { return s.WriteErrors })
	counter("padding_bytes_total", "Zero bytes written to fill the last block of direct-I/O writes.", func(s *wal.Stats) uint64 { return s.PaddingBytes })
	counter("full_block_writes_total", "Writes that completed at least one block.", func(s *wal.Stats) uint64 { return s.FullBlockWrites })
	counter("partial_block_writes_total", "Writes that only extended the incomplete last block.", func(s *wal.Stats) uint64 { return s.PartialBlockWrites })
	counter("fsyncs_total", "Successful segment syncs (fdatasync or fsync).", func(s *wal.Stats) uint64 { return s.Fsyncs })
	counter("dir_syncs_total", "Successful syncs of the log directory.", func(s *wal.Stats) uint64 { return s.DirSyncs })
	counter("fsync_errors_total", "Failed segment syncs; the first poisons the log.", func(s *wal.Stats) uint64 { return s.FsyncErrors })
	counter("slow_syncs_total", "Segment syncs slower than Options.SlowSyncThreshold.", func(s *wal.Stats) uint64 { return s.SlowSyncs })
	counter("unsynced_over_bound_total", "Waits for durability over an interval policy's bound (the flusher ran late).", func(s *wal.Stats) uint64 { return s.UnsyncedOverBound })
	counter("background_syncs_total", "Syncs issued by the background flusher.", func(s *wal.Stats) uint64 { return s.BackgroundSyncs })
	counter("rolls_total", "Segment rolls.", func(s *wal.Stats) uint64 { return s.Rolls })
	counter("seal_waits_total", "Rolls that waited for the previous roll's segment to be synced and linked in the background.", func(s *wal.Stats) uint64 { return s.SealWaits })
	counter("buffer_full_waits_total", "Appends that waited for the log buffer to be written.", func(s *wal.Stats) uint64 { return s.BufferFullWaits })
	counter("segment_create_stalls_total", "Appends that waited for a new segment to be prepared.", func(s *wal.Stats) uint64 { return s.Prepare.Waits })
	counter("segments_prepared_total", "Segments prepared for use (allocated, zero-filled, or reused), the first one included.", func(s *wal.Stats) uint64 { return s.Prepare.Prepared })
	counter("segments_recycled_total", "Segments prepared by reusing a file RemoveBefore kept (Options.RecycleSegments).", func(s *wal.Stats) uint64 { return s.Prepare.Recycled })
	counter("segments_allocated_total", "Segments prepared by allocating their blocks (fallocate) instead of writing zeros.", func(s *wal.Stats) uint64 { return s.Prepare.Allocated })
	counter("segments_kept_total", "Segment files RemoveBefore kept for reuse instead of removing them.", func(s *wal.Stats) uint64 { return s.Prepare.Kept })
	counter("segment_prepare_bytes_total", "Bytes written to prepare segments (zeros).", func(s *wal.Stats) uint64 { return s.Prepare.PrepareBytes })
	counter("segment_zeroed_ahead_bytes_total", "Zeros written into allocated segments just ahead of their frames, where commits sync.", func(s *wal.Stats) uint64 { return s.Prepare.ZeroedAhead })
	counter("postponed_writes_total", "Writes postponed while a background sync ran.", func(s *wal.Stats) uint64 { return s.PostponedWrites })
	counter("delayed_writes_total", "Postponed writes forced after the maximum postponement.", func(s *wal.Stats) uint64 { return s.DelayedWrites })
	counter("reader_bytes_total", "Bytes Readers read from segment files.", func(s *wal.Stats) uint64 { return s.ReaderBytes })
	counter("reader_records_total", "Records Readers returned.", func(s *wal.Stats) uint64 { return s.ReaderRecords })
	counter("groups_total", "Group-commit flushes.", func(s *wal.Stats) uint64 { return s.Group.Groups })
	counter("sync_groups_total", "Group-commit flushes that synced.", func(s *wal.Stats) uint64 { return s.Group.SyncGroups })
	counter("group_waits_total", "Successful waits on the group-commit queue (commits that wait, Sync, WaitDurable, log-buffer waits).", func(s *wal.Stats) uint64 { return s.Group.Commits })
	counter("group_delay_trigger_count_total", "Group delays ended early by MaxBatch.", func(s *wal.Stats) uint64 { return s.Group.TriggerCount })
	counter("group_delay_trigger_timeout_total", "Group delays that ran their full length.", func(s *wal.Stats) uint64 { return s.Group.TriggerTimeout })
	counter("group_delay_sleeps_total", "Leaders that slept for the group delay.", func(s *wal.Stats) uint64 { return s.Group.DelaySleeps })
	counter("group_adaptive_waits_total", "Leaders that waited for the previous group's committers (adaptive merge wait).", func(s *wal.Stats) uint64 { return s.Group.AdaptiveWaits })
	counter("group_adaptive_merges_total", "Adaptive merge waits that paid off.", func(s *wal.Stats) uint64 { return s.Group.AdaptiveMerges })
	c.scalars = append(c.scalars,
		scalar{desc("fsync_seconds_total", "Total time spent in segment syncs, failed ones included."), prometheus.CounterValue,
			func(s *wal.Stats, _ *wal.RecoveryInfo) float64 { return seconds(s.FsyncTimeTotal) }},
		scalar{desc("write_seconds_total", "Total time spent in write calls."), prometheus.CounterValue,
			func(s *wal.Stats, _ *wal.RecoveryInfo) float64 { return seconds(s.WriteTimeTotal) }},
		scalar{desc("segment_prepare_seconds_total", "Total time spent preparing segments."), prometheus.CounterValue,
			func(s *wal.Stats, _ *wal.RecoveryInfo) float64 { return seconds(s.Prepare.PrepareTime) }},
		scalar{desc("segment_wait_seconds_total", "Total time appends waited for a segment to be prepared."), prometheus.CounterValue,
			func(s *wal.Stats, _ *wal.RecoveryInfo) float64 { return seconds(s.Prepare.WaitTime) }})
	gauge("fsyncs_pending", "Segment syncs running now.", func(s *wal.Stats, _ *wal.RecoveryInfo) float64 { return float64(s.FsyncsPending) })
	gauge("fsync_max_duration_seconds", "Longest segment sync since Open.", func(s *wal.Stats, _ *wal.RecoveryInfo) float64 { return seconds(s.FsyncMaxDuration) })
	gauge("unsynced_wait_max_seconds", "Longest wait of a written record to become durable since Open.", func(s *wal.Stats, _ *wal.RecoveryInfo) float64 { return seconds(s.UnsyncedWaitMax) })
	gauge("unsynced_age_seconds", "Age of the oldest write not yet durable, 0 if none.", func(s *wal.Stats, _ *wal.RecoveryInfo) float64 { return seconds(s.UnsyncedAge) })
	gauge("poisoned", "1 once a write or sync failed and the log fails closed, else 0.", func(s *wal.Stats, _ *wal.RecoveryInfo) float64 { return bool01(s.Poisoned) })
	gauge("appended_lsn", "Appended LSN: bytes appended to the logical log.", func(s *wal.Stats, _ *wal.RecoveryInfo) float64 { return float64(s.AppendedLSN) })
	gauge("written_lsn", "Written LSN: bytes handed to the OS (survive a process crash).", func(s *wal.Stats, _ *wal.RecoveryInfo) float64 { return float64(s.WrittenLSN) })
	gauge("synced_lsn", "Synced LSN: bytes made durable (survive a power loss).", func(s *wal.Stats, _ *wal.RecoveryInfo) float64 { return float64(s.SyncedLSN) })
	gauge("first_lsn", "First LSN of the oldest segment.", func(s *wal.Stats, _ *wal.RecoveryInfo) float64 { return float64(s.FirstLSN) })
	gauge("segments", "Segment files the log consists of.", func(s *wal.Stats, _ *wal.RecoveryInfo) float64 { return float64(s.Segments) })
	gauge("segment_bytes", "Total size of the segment files in bytes.", func(s *wal.Stats, _ *wal.RecoveryInfo) float64 { return float64(s.SegmentBytes) })
	gauge("commits_active", "Committers waiting on the group-commit queue now.", func(s *wal.Stats, _ *wal.RecoveryInfo) float64 { return float64(s.Group.Active) })
	gauge("group_flush_ewma_seconds", "Moving average of a syncing group flush.", func(s *wal.Stats, _ *wal.RecoveryInfo) float64 { return seconds(s.Group.FlushTime) })
	gauge("recovery_duration_seconds", "How long Open took to recover the log.", func(s *wal.Stats, _ *wal.RecoveryInfo) float64 { return seconds(s.RecoveryDuration) })
	gauge("recovery_torn_bytes", "Bytes of torn tail Open removed.", func(_ *wal.Stats, r *wal.RecoveryInfo) float64 { return float64(r.TornBytes) })
	gauge("recovery_unvouched_bytes", "Bytes of recovered frames no watermark vouched for.", func(_ *wal.Stats, r *wal.RecoveryInfo) float64 { return float64(r.Unvouched) })
	gauge("recovery_clean", "1 if the log had been closed cleanly when Open recovered it, else 0.", func(_ *wal.Stats, r *wal.RecoveryInfo) float64 { return bool01(r.Clean) })
	gauge("recovery_quarantined_files", "Files holding torn tails Open removed, kept for inspection.", func(_ *wal.Stats, r *wal.RecoveryInfo) float64 { return float64(len(r.Quarantined)) })
	return c
}

func bool01(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// Describe sends the descriptors of every metric Collect sends.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, s := range c.scalars {
		ch <- s.desc
	}
	ch <- c.fsync
	ch <- c.writ
	ch <- c.commit
	ch <- c.groupSize
	ch <- c.info
	ch <- c.unsynced
}

// statsPool holds the Stats that Collect fills (wal.Log.StatsInto): about
// 26 KB each, not copied by value on each scrape.
var statsPool = sync.Pool{New: func() any { return new(wal.Stats) }}

// Collect reads the log's Stats once and sends every metric.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	sp := statsPool.Get().(*wal.Stats)
	defer statsPool.Put(sp)
	c.l.StatsInto(sp)
	s := sp
	rec := c.l.Recovered()
	for _, m := range c.scalars {
		ch <- prometheus.MustNewConstMetric(m.desc, m.kind, m.get(s, &rec))
	}
	ch <- durationHistogram(c.fsync, s.FsyncDuration)
	ch <- durationHistogram(c.writ, s.WriteDuration)
	ch <- durationHistogram(c.unsynced, s.UnsyncedWait)
	ch <- durationHistogram(c.commit, s.CommitWaitNone, "none")
	ch <- durationHistogram(c.commit, s.CommitWaitWritten, "written")
	ch <- durationHistogram(c.commit, s.CommitWaitSynced, "synced")
	ch <- groupSizeHistogram(c.groupSize, s.Group)
	ch <- prometheus.MustNewConstMetric(c.info, prometheus.GaugeValue, 1, s.Policy, s.SyncMethod.String(), strconv.FormatBool(s.SyncMethodFallback))
}

// durationHistogram converts h to a Prometheus histogram in seconds with
// the DurationBuckets bounds.
func durationHistogram(d *prometheus.Desc, h wal.Histogram, labels ...string) prometheus.Metric {
	buckets := make(map[float64]uint64, len(DurationBuckets))
	for _, le := range DurationBuckets {
		buckets[le] = h.CountBelow(time.Duration(math.Round(le * 1e9)))
	}
	return prometheus.MustNewConstHistogram(d, h.Count, h.Sum.Seconds(), buckets, labels...)
}

// groupSizeHistogram converts the queue's power-of-two group-size buckets:
// bucket i holds sizes 2^i .. 2^(i+1)-1, so its upper bound is 2^(i+1)-1.
// The sum is the mean times the count.
func groupSizeHistogram(d *prometheus.Desc, g groupcommit.Stats) prometheus.Metric {
	buckets := make(map[float64]uint64, groupcommit.GroupSizeBuckets-1)
	var cum uint64
	for i, n := range g.GroupSizeHist[:groupcommit.GroupSizeBuckets-1] { // the last bucket is open-ended: +Inf
		cum += n
		buckets[float64(uint64(1)<<(i+1)-1)] = cum
	}
	total := g.GroupSizeHistTotal()
	return prometheus.MustNewConstHistogram(d, total, math.Round(g.GroupSizeMean*float64(total)), buckets)
}
