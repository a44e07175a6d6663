package wal

import (
	"sync/atomic"
	"time"

	"github.com/durawal/durawal/groupcommit"
	"github.com/durawal/durawal/policy"
	"github.com/durawal/durawal/wal/vfs"
)

// counters are the log's own counters, updated with atomics so Stats can be
// read at any time without stopping writers.
type counters struct {
	appendRequests, bytesAppended                 atomic.Uint64
	writeCalls, bytesWritten, writeErrors         atomic.Uint64
	paddingBytes                                  atomic.Uint64
	fullBlockWrites, partialBlockWrites           atomic.Uint64
	fsyncs, dirSyncs, fsyncErrors                 atomic.Uint64
	backgroundSyncs, rolls, sealWaits             atomic.Uint64
	bufferFullWaits, segmentCreateStalls          atomic.Uint64
	postponedWrites, delayedWrites                atomic.Uint64
	fsyncTime, fsyncMax, writeTime, fsyncsPending atomic.Int64
	slowSyncs                                     atomic.Uint64
	readerBytes, readerRecords                    atomic.Uint64

	// Gauges of the installed segments, set under Log.segs.
	segments, segmentBytes atomic.Int64
	firstLSN               atomic.Uint64

	// The oldest write not yet synced (ns since Open, 0: none), the
	// longest such wait, the waits over the policy's bound, and the waits
	// (Log.noteSynced).
	unsyncedSince, unsyncedMax atomic.Int64
	unsyncedOver               atomic.Uint64
	unsyncedHist               latencyHist

	fsyncHist, writeHist latencyHist
	commitHist           [3]latencyHist // by policy.Wait: none, write, sync
	seg                  segCounters
}

// segCounters count the segment lifecycle (PrepareStats).
type segCounters struct {
	prepared, prepareBytes atomic.Uint64
	recycled, recycledKept atomic.Uint64
	allocated, zeroedAhead atomic.Uint64
	prepareTime            atomic.Int64
	waitTime, waitMax      atomic.Int64
}

// PrepareStats counts the segment lifecycle: preparing a new log's first
// segment inside Open, and each next segment in the background once the
// current one is an eighth full (reusing a file RemoveBefore kept, or making
// a new one: zero-filled, its zeros handed to the device in steps of
// Options.WritebackAfter where commits sync, or allocated with fallocate
// where commits return before their write and for a new log's first
// segment, where the filesystem can; synced either way), and the appends
// that had to wait for one. Counts are since Open (a reopened log starts
// from zero); durations are totals of wall time.
type PrepareStats struct {
	// Prepared counts segments prepared, the one a new log starts with
	// included; Recycled counts those of them that reused a file
	// (Options.RecycleSegments) instead of making a new one; Allocated
	// those made new by reserving their blocks (fallocate) instead of
	// writing zeros. The rest, Prepared-Recycled-Allocated, were
	// zero-filled.
	Prepared, Recycled, Allocated uint64
	// Kept counts segment files RemoveBefore kept for reuse instead of
	// removing them (PostgreSQL wal_recycle).
	Kept uint64
	// PrepareTime is the time spent preparing them (zero-fill or
	// allocation, and sync; for a new log's first segment, whose sync
	// Open does with its header, without that sync).
	PrepareTime time.Duration
	// PrepareBytes counts the bytes written to prepare them (zeros; none
	// for a recycled or allocated file).
	PrepareBytes uint64
	// ZeroedAhead counts the zeros written into allocated segments just
	// ahead of their frames, a MiB at a time, where commits sync
	// (SyncEveryCommit, SyncEveryN; buffered sync methods): each MiB's
	// blocks are then written once, and one sync converts them from
	// unwritten, instead of every commit's sync converting the blocks its
	// frames reached. With PrepareBytes, the zeros the log wrote.
	ZeroedAhead uint64
	// Waits counts appends that waited for a segment to be prepared, those
	// that found a preparation already running included (InnoDB waiting
	// for the next redo file).
	Waits uint64
	// WaitTime is the total time appends spent in those waits, and WaitMax
	// the longest one: what the worst commits of a roll waited on.
	WaitTime, WaitMax time.Duration
}

// Stats is a snapshot of the log's counters. Each mirrors a counter people
// already watch (docs/design.md, Counters). Counts are since Open; LSNs are
// byte positions.
type Stats struct {
	// Commits counts Append, AppendContext and AppendBatch calls that
	// returned nil (MariaDB Binlog_commits, MySQL Com_commit).
	Commits uint64
	// AppendRequests counts records appended (Innodb_log_write_requests).
	AppendRequests uint64
	// BytesAppended counts record payload bytes accepted (pg_stat_wal.wal_bytes).
	BytesAppended uint64
	// WriteCalls counts write calls that moved the written LSN
	// (Innodb_log_writes, pg_stat_wal.wal_write).
	WriteCalls uint64
	// BytesWritten counts frame bytes written to segments, frame headers
	// and the frames' own 8-byte padding included, direct-I/O block padding
	// and rewritten partial blocks excluded (Innodb_os_log_written).
	BytesWritten uint64
	// PaddingBytes counts the zeros written after the last frame to fill
	// the last block of a direct-I/O write (INNODB_METRICS log_padded). 0
	// without O_DIRECT.
	PaddingBytes uint64
	// FullBlockWrites counts writes that completed at least one block, and
	// PartialBlockWrites writes that only extended the incomplete last
	// block (INNODB_METRICS log_full_block_writes /
	// log_partial_block_writes). The block is the direct-I/O alignment
	// under O_DIRECT, else 512 bytes.
	FullBlockWrites, PartialBlockWrites uint64
	// WriteErrors counts failed writes.
	WriteErrors uint64
	// Fsyncs counts successful fdatasync (or fsync) calls on segment files:
	// commit syncs, background syncs, roll syncs and the syncs that prepare
	// and install new segments (Innodb_os_log_fsyncs, pg_stat_wal.wal_sync).
	// Under a write-through SyncMethod (O_DSYNC) none of these is issued,
	// as InnoDB and PostgreSQL report it; only the one sync Open does on a
	// recovered segment is counted.
	Fsyncs uint64
	// DirSyncs counts successful fsyncs of the log directory.
	DirSyncs uint64
	// FsyncErrors counts failed syncs; the first one poisons the log.
	FsyncErrors uint64
	// FsyncsPending is the number of syncs running now
	// (Innodb_os_log_pending_fsyncs, Redis aof_pending_bio_fsync).
	FsyncsPending int64
	// FsyncTimeTotal and FsyncMaxDuration time every segment sync counted
	// in Fsyncs (pg_stat_wal.wal_sync_time, log_flush_max_time).
	FsyncTimeTotal, FsyncMaxDuration time.Duration
	// WriteTimeTotal times the write calls (pg_stat_wal.wal_write_time).
	WriteTimeTotal time.Duration
	// BackgroundSyncs counts syncs issued by the background flusher.
	BackgroundSyncs uint64
	// Rolls counts segment rolls.
	Rolls uint64
	// SealWaits counts rolls that waited for the previous roll's segment
	// to be sealed (synced and linked in the background) before they could
	// start: a log that fills a segment faster than one fdatasync of it.
	SealWaits uint64
	// BufferFullWaits counts appends that found the log buffer full while
	// its other half was still being written, and so waited for that
	// write before copying their record (Innodb_log_waits,
	// wal_buffers_full). A full half whose other half is free is handed to
	// a writer without a wait and is not counted.
	BufferFullWaits uint64
	// Prepare counts the segment lifecycle: preparations of the next
	// segment and the appends that waited for one (Prepare.Waits).
	Prepare PrepareStats
	// PostponedWrites counts writes postponed because a background sync was
	// running (Redis latency event aof-write-pending-fsync).
	PostponedWrites uint64
	// DelayedWrites counts postponed writes forced after the policy's
	// maximum postponement (Redis aof_delayed_fsync).
	DelayedWrites uint64
	// SlowSyncs counts segment syncs that took longer than
	// Options.SlowSyncThreshold (each also logged as a warning); 0 when the
	// threshold is negative.
	SlowSyncs uint64
	// Poisoned reports that a write or sync failed and the log fails closed.
	Poisoned bool

	// FsyncDuration is the distribution of the durations of the syncs
	// counted in Fsyncs (FsyncDuration.Count == Fsyncs, up to syncs
	// finishing while Stats reads; failed syncs are in FsyncTimeTotal, not
	// here): etcd's
	// etcd_disk_wal_fsync_duration_seconds, Pebble's WAL fsync latency.
	FsyncDuration Histogram
	// WriteDuration is the distribution of the durations of the write
	// calls counted in WriteCalls, failed ones included
	// (WriteDuration.Count == WriteCalls).
	WriteDuration Histogram
	// CommitWaitNone, CommitWaitWritten and CommitWaitSynced are the
	// distributions of commit latency — from the Append, AppendContext or
	// AppendBatch call to the return of the write or sync that covered it
	// (one clock reading for a whole group; the moments the committer's
	// goroutine then takes to run are not counted) — of the commits counted in Commits,
	// by what each waited for: nothing (the log buffer), the write, or the
	// sync (policy.WaitNone, WaitWrite, WaitSync; ForceSync counts as a
	// sync). Their Counts add up to Commits. A commit's latency runs from
	// its first wait (for the log's lock, log-buffer space, a segment, the
	// write or the sync), not from the call: a WaitNone commit that waited
	// for nothing reads no clock and counts as 0 (it returns in the time of
	// a copy, a fraction of a microsecond, and two clock reads cost a third
	// of that).
	CommitWaitNone, CommitWaitWritten, CommitWaitSynced Histogram

	// Segments is the number of segment files the log consists of now, and
	// SegmentBytes their total size in bytes (segments are preallocated, so
	// this is what they take on disk, not the bytes appended). A segment
	// being prepared for the next roll is not counted until it is
	// installed. Both go down after RemoveBefore.
	Segments     int
	SegmentBytes int64
	// FirstLSN is the first LSN of the oldest segment: the oldest record a
	// Reader can return. It goes up after RemoveBefore.
	FirstLSN LSN
	// RecoveryDuration is how long Open took to recover the log (to read,
	// check and repair every segment); Recovered tells what it found.
	RecoveryDuration time.Duration
	// ReaderBytes counts the bytes Readers read from segment files, and
	// ReaderRecords the records they returned, over every Reader of this
	// Log (pg_stat_wal has no equivalent; Kafka's log-flush and fetch
	// metrics do).
	ReaderBytes, ReaderRecords uint64
	// AppendedLSN, WrittenLSN and SyncedLSN are the watermarks (InnoDB lsn,
	// write_lsn, flushed_to_disk_lsn).
	AppendedLSN, WrittenLSN, SyncedLSN LSN
	// Group holds the group-commit queue's counters: groups, group sizes,
	// delay triggers. They count waits on the queue, not log operations:
	// Group.Commits counts every wait that returned nil — commits whose
	// policy makes them wait (write or sync), Sync, WaitDurable when the
	// record was not yet durable, appends waiting for log-buffer space, and
	// Close's final flush — so it can exceed Commits by those, and falls
	// short of it by the commits acknowledged from the log buffer, which do
	// not wait. Group.SyncGroups counts the groups that synced, whether a
	// committer asked or the policy chose to (every nth group under
	// policy.SyncEveryN); Fsyncs also counts background, roll and segment
	// syncs, which are not groups.
	Group groupcommit.Stats
	// UnsyncedWait is the distribution of how long written records
	// waited to become durable: at each sync of the log's current segment
	// (a commit's, Sync's or the background flusher's) that made written
	// records durable, the time since the oldest of their writes. Under
	// the interval policies it shows whether the flusher keeps the
	// policy's promise; under BufferedInterval and AsyncCommit add the
	// time a record spent in the log buffer before its write. Syncs of a
	// roll's sealing are not samples: the records they cover count with
	// the next sync's. UnsyncedWaitMax is its largest value since Open,
	// and UnsyncedAge the age of the oldest write not yet synced now (0 if
	// none; not under an O_DSYNC sync method, which syncs every write).
	UnsyncedWait                 Histogram
	UnsyncedWaitMax, UnsyncedAge time.Duration
	// UnsyncedOverBound counts the samples of UnsyncedWait above the
	// bound of an interval policy (SyncInterval, SyncIntervalPostponed,
	// BufferedInterval, AsyncCommit): its interval plus twice the duration
	// of the sync that ended the wait. Each is also logged as a warning
	// through Options.Logger. The policies' loss bounds assume the
	// flusher runs on time; a count here means it did not (a starved
	// scheduler, a paused process, a stalled disk).
	UnsyncedOverBound uint64
	// Policy is the durability policy in use, in the text policy.Parse
	// reads (Options.Policy.String(): "sync-every-commit" by default). The
	// policy is not recorded in the log: a log may be reopened with
	// another one, and Policy then says the new one.
	Policy string
	// SyncMethod is the sync method in use; SyncMethodFallback reports that
	// it is a fallback from Options.SyncMethod, which the filesystem
	// refused (Options.AllowSyncMethodFallback).
	SyncMethod         vfs.SyncMethod
	SyncMethodFallback bool
	// DirectIOAlignment is the alignment in bytes of direct-I/O writes (1
	// without O_DIRECT), and DirectIOAlignmentSource where it came from:
	// "statx STATX_DIOALIGN", "sysfs logical_block_size of MAJ:MIN",
	// "default 4096", "MemFS", or "none".
	DirectIOAlignment       int
	DirectIOAlignmentSource string
}

// FsyncsPerCommit returns Fsyncs / Commits, or 0 with no commits.
func (s Stats) FsyncsPerCommit() float64 {
	if s.Commits == 0 {
		return 0
	}
	return float64(s.Fsyncs) / float64(s.Commits)
}

// CommitsPerFsync returns Commits / Fsyncs, or 0 with no fsyncs.
func (s Stats) CommitsPerFsync() float64 {
	if s.Fsyncs == 0 {
		return 0
	}
	return float64(s.Commits) / float64(s.Fsyncs)
}

// Stats returns a snapshot of the counters. It is safe to call at any time,
// concurrently with appends, and does not stop them; the fields are read one
// by one, so they may be mutually off by the operations in flight. A Stats
// is about 26 KB, most of it its six histograms: a caller that reads it
// often (a metrics scrape) can fill one it keeps with StatsInto instead.
func (l *Log) Stats() Stats {
	var s Stats
	l.StatsInto(&s)
	return s
}

// StatsInto fills *s with what Stats returns, every field overwritten,
// without copying a Stats by value (a scraper keeps one and refills it).
// A nil s is filled with nothing. Safe for concurrent use, as Stats, with
// distinct s.
func (l *Log) StatsInto(s *Stats) {
	if s == nil {
		return // nothing to fill
	}
	c := &l.stats
	*s = Stats{
		AppendRequests:   c.appendRequests.Load(),
		BytesAppended:    c.bytesAppended.Load(),
		WriteCalls:       c.writeCalls.Load(),
		BytesWritten:     c.bytesWritten.Load(),
		WriteErrors:      c.writeErrors.Load(),
		Fsyncs:           c.fsyncs.Load(),
		DirSyncs:         c.dirSyncs.Load(),
		FsyncErrors:      c.fsyncErrors.Load(),
		FsyncsPending:    c.fsyncsPending.Load(),
		FsyncTimeTotal:   time.Duration(c.fsyncTime.Load()),
		FsyncMaxDuration: time.Duration(c.fsyncMax.Load()),
		WriteTimeTotal:   time.Duration(c.writeTime.Load()),
		BackgroundSyncs:  c.backgroundSyncs.Load(),
		Rolls:            c.rolls.Load(),
		SealWaits:        c.sealWaits.Load(),
		BufferFullWaits:  c.bufferFullWaits.Load(),
		Prepare: PrepareStats{
			Prepared:     c.seg.prepared.Load(),
			Recycled:     c.seg.recycled.Load(),
			Allocated:    c.seg.allocated.Load(),
			Kept:         c.seg.recycledKept.Load(),
			PrepareTime:  time.Duration(c.seg.prepareTime.Load()),
			PrepareBytes: c.seg.prepareBytes.Load(),
			ZeroedAhead:  c.seg.zeroedAhead.Load(),
			Waits:        c.segmentCreateStalls.Load(),
			WaitTime:     time.Duration(c.seg.waitTime.Load()),
			WaitMax:      time.Duration(c.seg.waitMax.Load()),
		},
		PostponedWrites: c.postponedWrites.Load(),
		DelayedWrites:   c.delayedWrites.Load(),
		Poisoned:        l.poisonErr.Load() != nil, // what every entry point checks: set once any returned ErrPoisoned
		AppendedLSN:     LSN(l.appended.Load()),
		WrittenLSN:      LSN(l.written.Load()),
		SyncedLSN:       LSN(l.synced.Load()),
		Group:           l.q.Stats(),

		PaddingBytes:            c.paddingBytes.Load(),
		FullBlockWrites:         c.fullBlockWrites.Load(),
		PartialBlockWrites:      c.partialBlockWrites.Load(),
		Policy:                  l.opts.Policy.String(),
		UnsyncedWaitMax:         time.Duration(c.unsyncedMax.Load()),
		UnsyncedAge:             l.unsyncedAge(),
		UnsyncedOverBound:       c.unsyncedOver.Load(),
		SyncMethod:              l.method,
		SyncMethodFallback:      l.fellBack,
		DirectIOAlignment:       l.write.dio.align,
		DirectIOAlignmentSource: l.write.dio.source,

		SlowSyncs:        c.slowSyncs.Load(),
		Segments:         int(c.segments.Load()),
		SegmentBytes:     c.segmentBytes.Load(),
		FirstLSN:         LSN(c.firstLSN.Load()),
		RecoveryDuration: l.info.Duration,
		ReaderBytes:      c.readerBytes.Load(),
		ReaderRecords:    c.readerRecords.Load(),
	}
	c.fsyncHist.snapshotInto(&s.FsyncDuration)
	c.writeHist.snapshotInto(&s.WriteDuration)
	c.unsyncedHist.snapshotInto(&s.UnsyncedWait)
	// Every commit counted is one duration in exactly one of the commit
	// histograms: their counts are Commits (no counter of its own, one
	// atomic add less per commit).
	c.commitHist[policy.WaitNone].snapshotInto(&s.CommitWaitNone)
	c.commitHist[policy.WaitWrite].snapshotInto(&s.CommitWaitWritten)
	c.commitHist[policy.WaitSync].snapshotInto(&s.CommitWaitSynced)
	s.Commits = s.CommitWaitNone.Count + s.CommitWaitWritten.Count + s.CommitWaitSynced.Count
}

// unsyncedAge returns the age of the oldest write not yet synced, 0 if none.
func (l *Log) unsyncedAge() time.Duration {
	if since := l.stats.unsyncedSince.Load(); since != 0 && l.synced.Load() < l.written.Load() {
		return max(time.Since(l.opened)-time.Duration(since), 0)
	}
	return 0
}

// Options returns the options the log runs with: those given to Open or
// OpenReadOnly, every zero field set to its default. SyncMethod is the one
// asked for; Stats.SyncMethod is the one in use (they differ after a
// fallback, Options.AllowSyncMethodFallback). Nothing of it is recorded in
// the log's files but the segment size, in each segment's header: a log
// may be reopened with another policy, sync method or buffer size.
// Safe for concurrent use.
func (l *Log) Options() Options { return l.opts }

// addWait records one wait for a prepared segment.
func (c *segCounters) addWait(d time.Duration) {
	c.waitTime.Add(int64(d))
	raiseMax(&c.waitMax, int64(d))
}

// raiseMax makes a hold at least v: the gauges of a maximum that any
// goroutine may raise, without a lock.
func raiseMax(a *atomic.Int64, v int64) {
	for m := a.Load(); v > m && !a.CompareAndSwap(m, v); m = a.Load() {
	}
}
