package wal

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/durawal/durawal/groupcommit"
	"github.com/durawal/durawal/policy"
	"github.com/durawal/durawal/wal/vfs"
)

// Defaults for the zero fields of [Options].
const (
	// DefaultSegmentSize is the default segment file size in bytes.
	DefaultSegmentSize int64 = 64 << 20
	// DefaultMaxRecordSize is the default largest record in bytes.
	DefaultMaxRecordSize = 4 << 20
	// DefaultBufferSize is the default log buffer size in bytes (each of
	// its two halves), like innodb_log_buffer_size: small enough that one
	// write() of a full half into new page-cache pages does not stall the
	// appends waiting for the other half (docs/design.md, Measurements
	// behind the defaults).
	DefaultBufferSize = 2 << 20
	// DefaultNoSpaceTimeout is how long Append waits for a new segment
	// while the disk is full before it returns ErrNoSpace.
	DefaultNoSpaceTimeout = 5 * time.Second
	// DefaultWritebackAfter is the default Options.WritebackAfter in
	// bytes: writeback is started every 1 MiB written.
	DefaultWritebackAfter int64 = 1 << 20
	// DefaultRecycleSegments is the default Options.RecycleSegments: two
	// segment files freed by RemoveBefore are kept for reuse.
	DefaultRecycleSegments = 2
)

// Limits on Options fields.
const (
	// MinSegmentSize is the smallest accepted segment size in bytes.
	MinSegmentSize int64 = 4 << 10
	// MaxSegmentSize is the largest accepted segment size in bytes.
	MaxSegmentSize int64 = 4 << 30
)

// Options configures [Open]. The zero value is valid: each zero field takes
// its documented default, and a negative number (bytes, a count or a
// duration) turns its feature off (WritebackAfter, RecycleSegments,
// SlowSyncThreshold, NoSpaceTimeout, IncrementalSync, which is off by
// default). Open copies Options and never modifies them.
type Options struct {
	// Policy decides what Append waits for and what the background flusher
	// does. Default [policy.SyncEveryCommit].
	Policy policy.Policy
	// GroupCommit tunes the leader/follower queue that lets concurrent
	// commits share one write and one sync (group delay, MySQL or
	// PostgreSQL style). Default: no delay, adaptive merge wait on. A Delay
	// outside 0..[groupcommit.MaxDelay] (1 s, as MySQL caps
	// binlog_group_commit_sync_delay) makes Open fail with ErrInvalidOptions.
	GroupCommit groupcommit.Options
	// SegmentSize is the size in bytes of each segment file; the active
	// segment is rolled when the next frame does not fit. Segments are
	// made this size before use, reading as zeros: zero-filled, so that
	// fdatasyncs find written blocks, or allocated (fallocate) for a new
	// log's first segment and where commits return before their write
	// (BufferedInterval, AsyncCommit), where the filesystem can (Linux;
	// not under O_DSYNC); or they are recycled files of this size (see
	// RecycleSegments). MinSegmentSize..MaxSegmentSize,
	// default DefaultSegmentSize (64 MiB). A log reopened with another
	// SegmentSize keeps its existing segments as they are.
	SegmentSize int64
	// MaxRecordSize is the largest record in bytes that Append accepts; it
	// must fit a segment (SegmentSize minus the segment header and two
	// frame headers). Default DefaultMaxRecordSize (4 MiB), capped to what
	// fits a segment. Recovery and readers do not use it: they bound a frame
	// by the segment that holds it, so a log reopened with a smaller
	// MaxRecordSize still reads its larger records.
	MaxRecordSize int
	// BufferSize is the size in bytes of the log buffer: when more than this
	// is appended but not yet written, Append writes before copying more (a
	// log-buffer wait, InnoDB's Innodb_log_waits). Default DefaultBufferSize.
	// It mirrors innodb_log_buffer_size. Open allocates the buffer's two
	// halves at BufferSize each (each capped at 2×SegmentSize), so memory is
	// about 2×BufferSize per open log from the start; a half grows past that
	// only to take one frame larger than BufferSize.
	BufferSize int
	// NoSpaceTimeout is how long Append retries creating a new segment while
	// the filesystem reports ENOSPC before it returns ErrNoSpace.
	// Default DefaultNoSpaceTimeout (5 s); negative turns the wait off: the
	// first ENOSPC makes the Append that needs the segment return
	// ErrNoSpace.
	NoSpaceTimeout time.Duration
	// SyncMethod says how segment files reach stable storage, like
	// innodb_flush_method and wal_sync_method; it is independent of the
	// Policy, which says when. Default [vfs.Fdatasync] (write, then
	// fdatasync). [vfs.Fsync] syncs with fsync. [vfs.ODsync] opens segments
	// with O_DSYNC: every write is durable on return, the log issues no
	// sync for commits or rolls (Stats.Fsyncs stays 0 for them) and the
	// synced LSN advances with each write, so every policy that writes at
	// commit becomes as durable as SyncEveryCommit. [vfs.ODirect] adds
	// O_DIRECT to fdatasync: writes are padded to whole blocks of the
	// queried alignment (Stats.PaddingBytes) and the partial last block is
	// rewritten by the next write. [vfs.ODirectODsync] is O_DIRECT|O_DSYNC.
	// Under O_DIRECT, SegmentSize must be a multiple of the alignment. A
	// log written with one method can be reopened with any other.
	SyncMethod vfs.SyncMethod
	// AllowSyncMethodFallback lets Open fall back when the filesystem or
	// the platform refuses SyncMethod, instead of failing with
	// ErrSyncMethodUnsupported: O_DIRECT is dropped and the durability kept
	// (ODirect → Fdatasync, ODirectODsync → ODsync, then ODsync →
	// Fdatasync). The fallback is logged and reported in Stats.SyncMethod
	// and Stats.SyncMethodFallback; it never weakens what a commit waits
	// for. Default false.
	AllowSyncMethodFallback bool
	// WritebackAfter is, in bytes, how much the log lets accumulate in the
	// page cache before it asks the kernel to start writing it to the device
	// (Linux sync_file_range with SYNC_FILE_RANGE_WRITE, as PostgreSQL's
	// backend_flush_after and RocksDB's wal_bytes_per_sync do): frames
	// written to a segment since the last request, and, under a policy whose
	// commits sync (SyncEveryCommit, SyncEveryN), the zeros of a segment
	// being prepared, which then also waits for each step before writing
	// the next, so that preparation proceeds at the device's pace with at
	// most two steps queued ahead of the commits' syncs (elsewhere it runs
	// at full speed: a fast buffered log needs its next segment soon). A later fdatasync (a
	// commit's, a roll's sealing's, an interval's) then finds little left to write,
	// and does not stall the commits behind it. It never makes anything
	// durable and changes no policy's promise. It applies to the buffered
	// methods (Fdatasync, Fsync) on Linux; elsewhere it does nothing.
	// Default DefaultWritebackAfter (1 MiB); negative turns it off.
	WritebackAfter int64
	// IncrementalSync, in bytes, makes the background flusher of the
	// interval and async policies (SyncInterval, BufferedInterval,
	// SyncIntervalPostponed, AsyncCommit) sync as soon as this much has
	// been written since the last sync, besides its interval, as Redis's
	// aof-rewrite-incremental-fsync syncs every 4 MB. A sync must also
	// flush the device's cache, whose cost grows with what was written
	// since the last one: under innodb=2 the interval's sync, and the
	// sealing of a segment a roll finished, otherwise flush up to a
	// second's worth of writes, and a commit that needs durability then
	// waits for that (Log.Sync, AppendContext with ForceSync). It only adds syncs, in the background: no
	// promise weakens, and Stats.Fsyncs and BackgroundSyncs count them.
	// Default 0: off (the policies sync exactly as their settings say);
	// negative is off too.
	IncrementalSync int64
	// RecycleSegments is how many segment files freed by RemoveBefore are
	// kept, renamed, for reuse as the next segments instead of being
	// removed, as PostgreSQL recycles WAL files (wal_recycle) and Pebble
	// its logs: a reused file is neither zero-filled nor synced again, so
	// a log checkpointed by RemoveBefore writes each byte about once, and
	// its fdatasyncs find every block allocated. Kept files are named
	// "recycle-<n>.wal.tmp" and survive Close, as PostgreSQL keeps its
	// recycled files: after a clean Close, Open adopts up to
	// RecycleSegments of them whose header names an LSN below the log's
	// start, and removes the rest (another SegmentSize, a log recreated in
	// the directory, a smaller pool; counted in RecoveryInfo.RemovedTemp).
	// After a crash it removes them all: a roll undone by the crash may
	// have left frames of the LSNs the log writes next in a kept file. Builds that do not reuse
	// them remove them as temporary files. Default DefaultRecycleSegments
	// (2); negative: none (Open removes any).
	RecycleSegments int
	// VerifyOnOpen makes Open read and check every frame of every segment.
	// By default Open reads, of each sealed (non-last) segment, only its
	// header and the link frame its roll wrote after the segment and its
	// successor were durable, and checks the last segment frame by frame:
	// Open then costs O(last segment), and damage inside a sealed segment is
	// reported when a Reader or ReadRecord reaches it (a *CorruptionError,
	// ErrCorrupt), as raft-wal trusts its sealed segments. With
	// VerifyOnOpen, such damage fails Open itself. Sealed segments without
	// a link (written by format version 1, or a roll a crash interrupted)
	// are always checked frame by frame, through a window of 1 MiB (or one
	// frame, if larger). Default false.
	VerifyOnOpen bool
	// FS is the filesystem the log lives on. Default [vfs.OS].
	FS vfs.FS
	// Logger receives lifecycle events (recovery, rolls, poisoning) and
	// slow-sync warnings, never per-commit events. Default: silent.
	Logger *slog.Logger
	// SlowSyncThreshold is the duration above which a segment sync is
	// logged at warning level through Logger ("wal: slow sync", with the
	// duration and the threshold) and counted in Stats.SlowSyncs, as etcd
	// warns of a slow fdatasync. Default [DefaultSlowSyncThreshold] (1 s);
	// a negative value turns the warning and the count off.
	SlowSyncThreshold time.Duration
	// Observer receives every sync, group, commit, roll and poisoning as it
	// happens, on the commit path (see [Observer] for what it may do).
	// Default nil: nothing is called.
	Observer Observer
	// scanWindow, if positive, replaces scanWindow for this Log's recovery
	// scans: tests set it (export_test.go) so that frames straddle windows.
	scanWindow int64
	// unsafeRetrySync retries a failed sync and, if the retry succeeds,
	// acknowledges the commits as durable: the fsyncgate mistake
	// (PostgreSQL data_sync_retry=on). Only a test sets it
	// (export_test.go), to show the data it loses.
	unsafeRetrySync bool
}

func (o Options) withDefaults() Options {
	if o.SegmentSize == 0 {
		o.SegmentSize = DefaultSegmentSize
	}
	if o.MaxRecordSize == 0 {
		o.MaxRecordSize = int(min(int64(DefaultMaxRecordSize), maxRecordFor(o.SegmentSize)-endFrameSize))
	}
	if o.BufferSize == 0 {
		o.BufferSize = DefaultBufferSize
	}
	if o.NoSpaceTimeout == 0 {
		o.NoSpaceTimeout = DefaultNoSpaceTimeout
	}
	if o.RecycleSegments == 0 {
		o.RecycleSegments = DefaultRecycleSegments
	}
	if o.WritebackAfter == 0 {
		o.WritebackAfter = DefaultWritebackAfter
	}
	if o.IncrementalSync < 0 {
		o.IncrementalSync = 0
	}
	if o.FS == nil {
		o.FS = vfs.OS()
	}
	if o.SlowSyncThreshold == 0 {
		o.SlowSyncThreshold = DefaultSlowSyncThreshold
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// maxRecordFor returns the largest payload whose frame fits an empty segment
// of size bytes.
func maxRecordFor(size int64) int64 {
	return size - segmentHeaderSize - frameHeaderSize
}

func (o Options) validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidOptions, fmt.Sprintf(format, args...))
	}
	if o.SegmentSize < MinSegmentSize || o.SegmentSize > MaxSegmentSize {
		return bad("SegmentSize %d bytes, want %d..%d", o.SegmentSize, MinSegmentSize, MaxSegmentSize)
	}
	if o.SegmentSize%frameAlign != 0 {
		return bad("SegmentSize %d bytes is not a multiple of %d", o.SegmentSize, frameAlign)
	}
	if o.MaxRecordSize < 1 || int64(o.MaxRecordSize) > maxRecordFor(o.SegmentSize)-endFrameSize {
		return bad("MaxRecordSize %d bytes, want 1..%d for SegmentSize %d", o.MaxRecordSize, maxRecordFor(o.SegmentSize)-endFrameSize, o.SegmentSize)
	}
	if o.BufferSize < 1 {
		return bad("BufferSize %d bytes, want ≥ 1", o.BufferSize)
	}
	if !o.SyncMethod.Valid() {
		return bad("SyncMethod %v", o.SyncMethod)
	}
	if err := o.Policy.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	return nil
}
