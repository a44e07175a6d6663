package wal

import (
	"fmt"
	"math"

	"github.com/durawal/durawal/wal/internal/format"
	"github.com/durawal/durawal/wal/vfs"
)

// epochName is the file recording the log's current epoch: a number that
// every writable Open and every TruncateFrom raises, and the LSN from which
// the frames of that epoch start. It is written (temporary name, sync,
// rename, directory sync) before any frame of the new epoch, and every
// frame of a format-6 segment carries the epoch it was written in.
//
// The epoch rule: a frame at or after the start must carry the current
// epoch; one before it must carry another. So a frame that a cut dropped,
// or that followed the end Open recovered (a torn tail), can never come
// back, even where the zeros written over it never reached the disk:
// whatever new frames are written at those LSNs, the old ones there carry an
// older epoch. PostgreSQL refuses WAL pages of an abandoned timeline by the
// timeline ID in each page header for the same reason, and InnoDB's redo
// blocks carry an epoch number.
const epochName = format.EpochName

// epochRule is the recorded epoch and where it starts (format.Epoch: its
// Admits is the epoch rule).
type epochRule = format.Epoch

// readEpoch reads the epoch record of the log in dir. A missing record is
// an unknown rule and no error; a damaged one a *CorruptionError; a read
// that fails the filesystem's error.
func readEpoch(fsys vfs.FS, dir string) (epochRule, error) {
	b, present, _, err := readRecordFile(fsys, dir, epochName, format.EpochRecordSize)
	if err != nil || !present {
		return epochRule{}, err
	}
	e, ok := format.DecodeEpoch(b)
	if !ok {
		return epochRule{}, &CorruptionError{Segment: epochName, Offset: 0,
			Reason: fmt.Sprintf("the epoch recorded in %s is damaged (%d bytes read)", epochName, len(b))}
	}
	return e, nil
}

// beginEpoch makes the epoch after the current one, starting at start,
// durable, and makes it the one new frames carry. The caller holds every
// writer off (Open before it returns, TruncateFrom with appends held).
func (l *Log) beginEpoch(start LSN) error {
	if l.app.epoch.N == math.MaxUint64 {
		return &CorruptionError{Segment: epochName, Offset: 0,
			Reason: fmt.Sprintf("%s records epoch %d, the last there can be", epochName, l.app.epoch.N)}
	}
	next := epochRule{N: l.app.epoch.N + 1, Start: uint64(start), Known: true}
	if err := l.writeRecordFile(epochName, format.EncodeEpoch(next)); err != nil {
		return fmt.Errorf("recording epoch %d from LSN %d: %w", next.N, start, err)
	}
	l.app.epoch = next
	return nil
}
