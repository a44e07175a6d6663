package wal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"

	"github.com/cespare/xxhash/v2"
	"github.com/durawal/durawal/wal/vfs"
)

// epochName is the file recording the log's current epoch: a number that
// every writable Open and every TruncateAfter raises, and the LSN from which
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
const epochName = "epoch"

// epochRecordSize is the size of the epoch file: [0:8) the epoch, [8:16)
// its start LSN, [16:24) the xxhash64 of bytes [0:16), little-endian.
const epochRecordSize = 24

// epochRule is the recorded epoch and where it starts. A log without the
// record (written by an older build, or whose creation a crash cut short
// before it was written) has none, and every frame is admitted.
type epochRule struct {
	n     uint64
	start LSN
	known bool
}

// word returns the epoch as frames record it (modulo 2^30).
func (e epochRule) word() uint32 { return uint32(e.n % (1 << epochBits)) }

// admits reports whether a valid frame at lsn, of a segment of format ff,
// whose kind word (bytes [12:16)) is word, belongs to the log under the
// epoch rule. Frames of segments older than format 6 carry no epoch: they
// were written before any epoch this build records, so they belong only
// before its start (a writable Open never appends to such a segment: it
// rolls first). An end or link frame exactly at the start is admitted
// whatever its epoch: it is where the log ended when the epoch began (a
// clean Close's end frame), and nothing was written at or after it since.
func (e epochRule) admits(ff frameFormat, lsn LSN, word uint32) bool {
	ep := word >> 2
	switch {
	case !e.known:
		return true
	case lsn == e.start && word&kindMask != 0:
		return true
	case ff.version < 6:
		return lsn < e.start
	case lsn >= e.start:
		return ep == e.word()
	default:
		return ep != e.word()
	}
}

func encodeEpochRecord(e epochRule) []byte {
	b := make([]byte, epochRecordSize)
	binary.LittleEndian.PutUint64(b[0:8], e.n)
	binary.LittleEndian.PutUint64(b[8:16], uint64(e.start))
	binary.LittleEndian.PutUint64(b[16:24], xxhash.Sum64(b[0:16]))
	return b
}

// readEpoch reads the epoch record of the log in dir. A missing record is
// an unknown rule and no error; a damaged one a *CorruptionError; a read
// that fails the filesystem's error.
func readEpoch(fsys vfs.FS, dir string) (epochRule, error) {
	f, err := fsys.Open(filepath.Join(dir, epochName))
	if errors.Is(err, fs.ErrNotExist) {
		return epochRule{}, nil
	}
	if err != nil {
		return epochRule{}, fmt.Errorf("wal: open: %w", err)
	}
	b := make([]byte, epochRecordSize)
	n, rerr := f.ReadAt(b, 0)
	f.Close()
	if n < len(b) && rerr != nil && !errors.Is(rerr, io.EOF) {
		return epochRule{}, fmt.Errorf("wal: open: reading %s: %w", epochName, rerr)
	}
	if n < len(b) || xxhash.Sum64(b[0:16]) != binary.LittleEndian.Uint64(b[16:24]) {
		return epochRule{}, &CorruptionError{Segment: epochName, Offset: 0,
			Reason: fmt.Sprintf("the epoch recorded in %s is damaged (%d bytes read)", epochName, n)}
	}
	return epochRule{n: binary.LittleEndian.Uint64(b[0:8]), start: LSN(binary.LittleEndian.Uint64(b[8:16])), known: true}, nil
}

// beginEpoch makes the epoch after the current one, starting at start,
// durable, and makes it the one new frames carry. The caller holds every
// writer off (Open before it returns, TruncateAfter with appends held).
func (l *Log) beginEpoch(start LSN) error {
	next := epochRule{n: l.epoch.n + 1, start: start, known: true}
	if err := l.writeRecordFile(epochName, encodeEpochRecord(next)); err != nil {
		return fmt.Errorf("recording epoch %d from LSN %d: %w", next.n, start, err)
	}
	l.epoch = next
	return nil
}
