// Package wal is an embedded write-ahead log whose durability is a choice
// the caller makes explicitly, through a [policy.Policy]: sync at every
// commit, write at commit and sync once a second, leave it to the OS, or
// buffer in memory — the choices InnoDB (innodb_flush_log_at_trx_commit) and
// Redis (appendfsync) offer. Concurrent commits share one write and one
// fdatasync through a leader/follower group-commit queue (package
// groupcommit), and [Log.Stats] shows what the choice costs.
//
// # Words
//
// A record is one payload appended by a caller; its frame is its on-disk
// form. An [LSN] is the byte position of a frame in the logical log,
// monotonic across segments. A segment is one file of the log, named by the
// LSN of its first frame. The log buffer holds appended frames until a
// leader writes them. The appended, written and synced LSNs say how far the
// log has been copied into the log buffer, handed to the OS, and made
// durable ([Log.AppendedLSN], [Log.WrittenLSN], [Log.SyncedLSN]).
//
// # Durability
//
// [Log.Append] returns when the policy is satisfied: at once (the record is
// in the log buffer), after the write (it survives a process crash), or
// after the sync that covers it (it survives a power loss). [Log.Sync], the
// [ForceSync] option and [Log.Close] make everything appended durable under
// any policy. The policy constructors document what each loses on a process
// crash and on a power loss.
//
// How bytes reach stable storage is chosen separately by Options.SyncMethod
// (innodb_flush_method, wal_sync_method): fdatasync after the write (the
// default), fsync, O_DSYNC writes (no sync calls; Stats.Fsyncs stays 0 while
// the synced LSN advances), or O_DIRECT with either, from aligned buffers
// padded to whole blocks. The padding is zeros after the last frame, so the
// on-disk format and recovery do not depend on the method.
//
// # Concurrency
//
// A [Log] is safe for concurrent use. Appends take a mutex only to reserve
// an LSN and copy the frame into the active half of the double-buffered log
// buffer; no I/O happens under it. A [Reader] is not safe for concurrent use.
// At most one background goroutine (the flusher of interval and async
// policies) runs per Log, plus short-lived ones that prepare the next
// segment and seal the one a roll finished; Close stops or waits for each.
//
// # Recovery
//
// Every frame carries the synced LSN known when it was appended (its
// watermark). When Open finds a bad frame at LSN x in the last segment it
// looks at every later valid frame: if one has a watermark above x, x had
// been synced and is now damaged, and Open fails with a [*CorruptionError]
// naming the segment and offset. Otherwise x cannot be proven synced, and
// the tail from x is a torn tail: its bytes are first copied to a quarantine
// file in the log directory ("<from>-<end>.torn", listed in
// [RecoveryInfo].Quarantined at this and every later Open), then zeroed and
// synced before any new append. A bad frame in any other (sealed) segment
// is damage too, reported as a [*CorruptionError] by the Reader or
// ReadRecord that reaches it; Open itself trusts a sealed segment by its
// header and the link frame its roll wrote, so Open costs O(last segment),
// unless [Options].VerifyOnOpen makes it check every frame of every segment
// and fail on such damage. A sealed segment without a link (format version
// 1, or a roll a crash interrupted) is always checked frame by frame, through
// a bounded window. A missing segment fails Open: a roll writes a link frame
// (like the end frame, with flags 2) into the finished segment once its
// successor is durable, so a missing last segment is noticed, and the file
// "first-lsn" records where the log starts (written when the log is created
// and by RemoveBefore before it removes anything), so a missing oldest
// segment is too. Open finishes a RemoveBefore a crash interrupted.
//
// A roll takes no sync on the commit path: it writes the new segment's
// header and renames it, and a goroutine seals the segment it finished
// (syncs it, makes the new segment's name and header durable, then writes
// the link). A sync of the log does what the sealing has not done yet
// first, so the synced LSN still advances in order. A crash can therefore
// leave the finished segment's tail torn, with no link, while the new
// segment (format version 4 or 5) holds frames, or the new segment's
// header unwritten. Open ends the log at the torn point (or at the new
// segment) unless a frame of either segment vouches past it
// ([*CorruptionError]): the new segment's frames, none of them acknowledged
// as durable, are quarantined and the segment removed
// ([RecoveryInfo].DroppedSegment).
//
// [Log.TruncateFrom] cuts the end of the log at a record's LSN. It records
// the cut in the file "truncate-lsn" (16 bytes: the LSN and its xxhash64;
// written under a temporary name, synced, renamed, directory synced), begins
// a new epoch at the cut (below), then zeroes and syncs the dropped frames of
// the segment holding the cut, removes the later segments and removes the
// record. Open finishes a cut it finds recorded, so a crash leaves the old
// log or the cut one, never a dropped record with the ones after the cut.
// Frames appended after a cut carry the cut as their watermark: none vouches
// for a dropped byte.
//
// Stale frames. The same bytes of a segment file are written more than once
// (a recycled file; a cut or a torn tail overwritten with zeros that a crash
// or a failed sync may lose), and each old frame has a valid checksum at its
// own LSN. From format version 6 none can pass for a live one: every use of
// a segment file draws a random use ID, written in its header, that seeds
// every frame's checksum with the LSN; and the file "epoch" records the
// log's epoch and the LSN it starts at, which every writable Open (at the
// recovered end) and every TruncateFrom (at the cut) raise, durably, before
// any frame of the new epoch. Every frame carries its epoch; one at or
// after the epoch's start must carry the current one, so a dropped or torn
// frame that a crash kept ends the log there, like a torn tail, instead of
// following new records. ([RecoveryInfo].Epoch; PostgreSQL's timeline IDs
// and Pebble's recyclable log chunks serve the same purpose.)
//
// Recovery is a plan, then its application: Open reads the directory (the
// records, the headers, the last segment's frames), decides where the log
// ends and lists every write that makes the directory hold exactly that log
// ([RecoveryInfo].Steps: leftovers removed, a cut or removal finished, a
// header, link or unvouched frames written again, a torn tail quarantined
// and zeroed, the new epoch recorded), and only then carries the steps out
// in order. OpenReadOnly stops before the first.
//
// Open never repairs damage: it fails with ErrCorrupt and leaves the
// directory as it was. Salvage then reads the longest verifiable prefix of
// the damaged log (and says at which LSN and why it stops), PlanRepair says
// what Repair would do, and Repair, called explicitly, keeps that prefix
// and moves every byte it drops into evidence files named like the
// quarantined torn tails. docs/damaged-log.md is the runbook.
//
// What each ending leaves verifiable:
//
//   - A clean Close: everything. After its final sync Close writes an end
//     frame whose watermark is its own LSN and syncs it, so damage anywhere
//     in the last segment, the last group included, fails Open with
//     ErrCorrupt ([RecoveryInfo].Clean reports it), and damage in a sealed
//     segment is ErrCorrupt from the Reader or ReadRecord that reaches it
//     (from Open itself with VerifyOnOpen), as long as the end frame itself
//     survives: damage that also zeroes it looks like a crash, and the bound
//     below holds. Sync does not write one (it would cost a second fsync
//     per Sync): after Sync alone, the bound below holds.
//   - A crash (process, OS or power): every frame up to the highest
//     watermark found in the last segment is verified. The frames after it —
//     at most the groups written since the last sync completed, whose size
//     Open reports in [RecoveryInfo].Unvouched — cannot be told apart from
//     a torn write if damaged, exactly as for the end of PostgreSQL's WAL and
//     InnoDB's redo log. Their bytes are quarantined, never destroyed.
//
// Open also writes the unvouched frames again from what it read before the
// sync that makes them durable: after a failed fsync Linux marks the lost
// pages clean, so a sync alone would not write them, and a later frame's
// watermark would vouch for bytes that never reached the disk.
//
// # Reading without repairing
//
// [OpenReadOnly] opens a log without its directory lock and runs the same
// recovery scan as Open, reaching the same verdict, but repairs nothing: no
// file is written, removed, renamed or synced, and [Log.Recovered] reports
// what Open would do. It serves to inspect a damaged log and to read a log
// while its writer runs (up to the end found at OpenReadOnly); every
// writing method returns [ErrReadOnly]. [InspectDir] and [InspectSegment]
// describe a log's files and frames one by one, damaged ones included;
// the command cmd/waldump prints both.
//
// # On-disk format
//
// A segment file has a fixed size (Options.SegmentSize), is made under a
// temporary name to read as zeros and synced (zero-filled, or allocated with
// fallocate: a new log's first segment, and every new one under policies
// whose commits return before their write; or it is a recycled file), then
// given its 64-byte header and renamed to "%020d.wal" (its first LSN); the
// header and the name are made durable by syncs before use for a new log's
// first segment and under O_DSYNC, and by the roll's sealing otherwise (see
// Recovery). Frames
// follow the header back to back; a frame that does not fit starts a new
// segment, and the unused tail of the old one holds zeros and no LSNs. A
// segment file whose size differs from its header's is damage (Open fails):
// no crash can shrink or grow a file created and synced at full size.
//
// A recycled segment (format version 3, or 5) is a file RemoveBefore kept
// ([Options].RecycleSegments, as PostgreSQL's wal_recycle) instead of
// removing it: the next preparation renames it, and it gets a new header,
// without being zero-filled again. After its frames it holds what its
// earlier use left: frames of LSNs below the log's start, which no checksum
// seeded with a current LSN accepts, and which carry watermarks below
// those of every frame of its current use (the file was kept only once the
// LSNs after them were synced). Its first frames may still carry watermarks
// below its first LSN: they were appended before the segment before it
// was synced. Recovery therefore takes those bytes for stale, not torn:
// it cuts (quarantines and zeroes) only the frames of the current use found
// after the end of the valid ones, and a clean Close still reopens clean.
//
// Segment header (little endian), format version 6 (7 for a recycled file):
//
//	offset  size  field
//	0       8     magic "durawal\x00"
//	8       4     version (6, or 7 for a recycled file; Open fails with ErrUnsupportedVersion for one above 7, ErrCorrupt if the checksum shows it a damaged 1 to 7)
//	12      4     file size in bytes / 8, as created (a segment is never resized)
//	16      8     first LSN
//	24      8     use ID: random, non-zero, drawn for this use of the file
//	32      24    zero (reserved)
//	56      8     xxhash64 of bytes 0..55
//
// Versions 1 to 5, written by older builds and still read, have a 32-byte
// header: the first 24 bytes as above, then the xxhash64 of bytes 0..23, and
// no use ID. Version 1 has no end or link frames; 3 and 5 are recycled
// files; 4 and 5 were written by rolls that seal in the background. Open
// never appends to a segment older than version 6: the first append after
// Open rolls to a new one.
//
// Frame (little endian), 8-byte aligned:
//
//	offset  size  field
//	0       8     checksum: xxhash64 seeded with the frame's LSN XOR the segment's use ID (0 below version 6), over bytes 8..24+length
//	8       4     length of the payload in bytes, 1..what the segment can hold (0: end or link frame)
//	12      4     kind word: bits 0-1 the flags (0 a record; 1 an end frame; 2 a link frame); bits 2-31 the epoch modulo 2^30 (version 6 on; zero below)
//	16      8     watermark: the synced LSN when the frame was appended
//	24      n     payload, then zeros up to the next multiple of 8
//
// Because the checksum is seeded with the LSN and the use ID, a stale frame
// left at another position, or by another use of the file, can never pass
// as a live one; the epoch rule above refuses one left at the same position
// in the same use.
//
// Record files (little endian): "first-lsn" and "truncate-lsn" hold an LSN
// and its xxhash64 (16 bytes); "epoch" holds the epoch, the LSN it starts at
// and the xxhash64 of both (24 bytes). The layout is package
// wal/internal/format, which does no I/O. An all-zero header marks the end
// of the written frames. An end frame (version 2) has length 0, flags 1, no
// payload and a watermark equal to its own LSN; it takes no LSN space: the
// log ends at its LSN and the next append overwrites it. Readers never
// return it.
//
// # Observability
//
// [Log.Stats] returns counters, gauges and latency distributions
// ([Histogram]: fsync, write and commit latency by wait level), read with
// atomics at any time. [Options.Observer] receives each sync, group,
// commit, roll and the poisoning as it happens, on the commit path; a sync
// slower than Options.SlowSyncThreshold is logged as a warning. Package
// wal/walexpvar publishes Stats through expvar; the module
// github.com/durawal/durawal/promwal exports them to Prometheus.
//
// # Reading by LSN
//
// [Log.ReadRecord] reads one record by its LSN with two reads (header,
// payload) on a cached read-only handle and checks its LSN-seeded
// checksum; [Log.AppendBatchLSNs] reports every record's LSN, [FrameSize]
// how much LSN space a record takes, and [Log.FirstLSN] where the log
// starts now.
//
// # Errors
//
// Errors match these sentinels with errors.Is: [ErrClosed],
// [ErrEmptyRecord], [ErrRecordTooLarge], [ErrCorrupt] (a *CorruptionError),
// [ErrUnsupportedVersion] for a segment of another format version (not
// damage: it does not match ErrCorrupt),
// [ErrPoisoned] after a failed write or sync (the log fails closed and never
// retries a sync), [ErrDurabilityUnknown] for the commits of the failed
// group, [ErrNoSpace] when no new segment can be created (not poisoned),
// [ErrInvalidOptions], [ErrForeignFile], [ErrNotFound], [ErrTruncated] (a
// Reader past a TruncateFrom's cut), [ErrReadOnly] (a writing method on a
// Log opened with OpenReadOnly), and [ErrNotAppended]
// (with a context error) when a context ended before a record got an LSN.
package wal
