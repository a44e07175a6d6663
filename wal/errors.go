package wal

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/durawal/durawal/wal/vfs"
)

// Sentinel errors. Match them with errors.Is; the returned errors usually wrap
// one of these with context (segment, offset, cause).
var (
	// ErrClosed is returned by every call on a Log after Close.
	ErrClosed = errors.New("wal: log closed")
	// ErrEmptyRecord is returned for a nil or zero-length record.
	ErrEmptyRecord = errors.New("wal: empty record")
	// ErrRecordTooLarge is returned for a record above Options.MaxRecordSize;
	// nothing is appended.
	ErrRecordTooLarge = errors.New("wal: record too large")
	// ErrCorrupt is matched by a *CorruptionError: Open found damage where
	// the log promised valid data. What to do next (Salvage reads the
	// longest verifiable prefix, Repair keeps it and moves the rest into
	// evidence files) is in docs/damaged-log.md.
	ErrCorrupt = errors.New("wal: corrupt log")
	// ErrPoisoned is returned by every call after a write or sync failed: the
	// log fails closed and never retries a sync (docs/failure-model.md, fsync failure).
	ErrPoisoned = errors.New("wal: log poisoned by an earlier I/O failure")
	// ErrDurabilityUnknown is returned to the commits of the group whose write
	// or sync failed, or whose write ended after another failure poisoned the
	// log: their records may or may not be on disk, and must not be reported
	// as committed. Such an error also matches ErrPoisoned.
	ErrDurabilityUnknown = errors.New("wal: durability unknown")
	// ErrNoSpace is returned by Append when no new segment could be created
	// for lack of space within Options.NoSpaceTimeout. The log is not
	// poisoned: no acknowledged record was put at risk, and Append works
	// again once space is freed.
	ErrNoSpace = errors.New("wal: no space for a new segment")
	// ErrInvalidOptions is matched by every error Open returns for bad
	// Options.
	ErrInvalidOptions = errors.New("wal: invalid options")
	// ErrForeignFile is returned by Open when the directory holds a file the
	// log did not create, or an entry that is not a regular file (a
	// symbolic link, even to a segment moved elsewhere, or a device: the
	// error also matches vfs.ErrNotRegular and names it). Open, OpenReadOnly
	// and InspectDir refuse such a directory rather than skip the entry.
	ErrForeignFile = errors.New("wal: foreign file in log directory")
	// ErrNotAppended wraps the context's error when ctx ended before the
	// record got an LSN (while Append waited for log-buffer space or a new
	// segment): nothing was appended, and the returned LSN means nothing.
	// A context error without it came from the commit wait: the record is
	// in the log at the returned LSN and may still become durable.
	ErrNotAppended = errors.New("wal: not appended")
	// ErrSyncMethodUnsupported is returned by Open when the filesystem or
	// the platform refuses Options.SyncMethod (O_DIRECT on tmpfs, some
	// overlay and FUSE mounts, ext4 data=journal, or on darwin) and
	// Options.AllowSyncMethodFallback is not set. The error names the
	// method and the path, and wraps the filesystem's error.
	// It is the same value as vfs.ErrSyncMethodUnsupported, so either name
	// matches whichever layer refused.
	ErrSyncMethodUnsupported = vfs.ErrSyncMethodUnsupported
	// ErrUnsupportedVersion is returned by Open for a segment written in a
	// format version this build does not read (a newer durawal wrote it).
	// It is not damage: it does not match ErrCorrupt. The error names the
	// segment, its version and the version this build reads. A version field
	// that a damaged byte put out of range is told apart by the header's
	// checksum, which covers it: when the header checksums as a version this
	// build reads, Open reports a *CorruptionError instead, and Repair can
	// mend the log.
	ErrUnsupportedVersion = errors.New("wal: unsupported segment format version")
	// ErrNotFound is returned by NewReader, ReadRecord and TruncateFrom for
	// an LSN below the first segment kept (removed by RemoveBefore) or above
	// the appended LSN.
	ErrNotFound = errors.New("wal: LSN not in the log")
	// ErrTruncated is returned by Reader.Next once Log.TruncateFrom has
	// cut the log at or before the Reader's position: the records it was
	// about to read are gone. Open a new Reader at or before the cut.
	ErrTruncated = errors.New("wal: reader positioned past a truncation")
	// ErrReadOnly is returned by every method that would change the log
	// (Append, AppendContext, AppendBatch, AppendBatchContext, AppendBatchLSNs, Sync,
	// SyncContext, WaitDurable, RemoveBefore, TruncateFrom) on a Log
	// opened with OpenReadOnly. Nothing was appended or changed.
	ErrReadOnly = errors.New("wal: log opened read-only")
	// ErrInvalidArgument is matched by the error of a call whose arguments
	// cannot be used (AppendBatchLSNs with fewer LSN slots than records,
	// TruncateFrom at an LSN inside a record); nothing was appended or
	// changed.
	ErrInvalidArgument = errors.New("wal: invalid argument")
)

// A BatchError reports an AppendBatch that stopped after its first Appended
// records were appended: they are in the log from LSN First on, in order,
// and may still become durable; the others were not appended. Err is the
// cause (a context error, ErrNoSpace, ErrClosed, ErrPoisoned...).
type BatchError struct {
	Appended int // records appended, ≥ 1
	First    LSN // LSN of the first record
	Err      error
}

// Error returns "wal: batch stopped after N records were appended: CAUSE".
func (e *BatchError) Error() string {
	return fmt.Sprintf("wal: batch stopped after %d records were appended: %v", e.Appended, e.Err)
}

// Unwrap returns the cause.
func (e *BatchError) Unwrap() error { return e.Err }

// A CorruptionError describes a frame or segment header that failed
// validation where the log promised valid data. It matches [ErrCorrupt].
type CorruptionError struct {
	Segment string // segment file base name, e.g. "00000000000000000000.wal"
	Offset  int64  // byte offset of the damage within Segment
	Reason  string // what failed, e.g. "checksum mismatch"
}

// Error returns "wal: corrupt segment SEGMENT at offset N: REASON".
func (e *CorruptionError) Error() string {
	return fmt.Sprintf("wal: corrupt segment %s at offset %d: %s", e.Segment, e.Offset, e.Reason)
}

// Unwrap returns ErrCorrupt.
func (e *CorruptionError) Unwrap() error { return ErrCorrupt }

// noSpace wraps ENOSPC and EDQUOT in ErrNoSpace and returns other errors as
// they are.
func noSpace(err error) error {
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return fmt.Errorf("%w: %w", ErrNoSpace, err)
	}
	return err
}
