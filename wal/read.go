package wal

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"slices"
	"sort"

	"github.com/cespare/xxhash/v2"
	"github.com/durawal/durawal/groupcommit"
	"github.com/durawal/durawal/wal/vfs"
)

// FirstLSN returns the LSN of the oldest record kept: the first LSN of the
// oldest segment, which RemoveBefore raises and TruncateFrom may set. It
// is current at any time, unlike RecoveryInfo.FirstLSN, which says what
// Open found. Safe for concurrent use; valid after Close (the last value).
func (l *Log) FirstLSN() LSN {
	l.segs.Lock()
	defer l.segs.Unlock()
	return l.segs.firsts[0]
}

// ReadRecord returns the record whose frame is at lsn, copied into dst's
// storage (grown if too small; dst may be nil), with O(1) I/O: it finds the
// segment holding lsn, reads the frame header, then the payload, and checks
// the frame's LSN-seeded checksum. Reading the record of n bytes costs two
// reads, of 24 and n bytes, on a read-only handle per segment that the Log
// opens on first use and keeps until the segment is removed or the Log
// closed.
//
// A record not yet written to the OS is served too: from the log buffer if
// it is still there (no I/O), and otherwise (its group is being written)
// after waiting for that write to end. ReadRecord never waits for a sync:
// it may return a record that a later failed sync loses (see
// ErrDurabilityUnknown).
//
// ReadRecord is safe for concurrent use, with appends, with other reads,
// and with RemoveBefore and TruncateFrom (which it waits for). Errors:
// ErrNotFound if lsn is below FirstLSN, at or above the appended LSN, or
// not a multiple of 8; a *CorruptionError (ErrCorrupt) if no valid frame is
// at lsn (damage, or lsn is not where a record starts); ErrClosed; the
// filesystem's error.
func (l *Log) ReadRecord(lsn LSN, dst []byte) ([]byte, error) {
	if lsn%frameAlign != 0 {
		return nil, fmt.Errorf("%w: LSN %d is not a frame boundary (a multiple of %d)", ErrNotFound, lsn, frameAlign)
	}
	for {
		rec, done, err := l.readBuffered(lsn, dst)
		if done || err != nil {
			return rec, err
		}
		l.reads.RLock()
		if l.reads.closed { // Close ran since readBuffered looked: a handle opened now would never be closed
			l.reads.RUnlock()
			return nil, ErrClosed
		}
		if LSN(l.written.Load()) <= lsn { // written again since: a truncation and new appends
			l.reads.RUnlock()
			continue
		}
		rec, err = l.readFile(lsn, dst)
		l.reads.RUnlock()
		return rec, err
	}
}

// readBuffered serves lsn from the log buffer if it is there (done), waits
// for the write of the group holding it if one is in flight, and checks
// that lsn is in the log. done false with a nil error: read the file.
func (l *Log) readBuffered(lsn LSN, dst []byte) (rec []byte, done bool, err error) {
	l.app.Lock()
	if l.app.closed {
		l.app.Unlock()
		return nil, true, ErrClosed
	}
	if lsn >= l.app.next {
		next := l.app.next
		l.app.Unlock()
		return nil, true, fmt.Errorf("%w: LSN %d is at or beyond the appended LSN %d", ErrNotFound, lsn, next)
	}
	if lsn < LSN(l.written.Load()) {
		l.app.Unlock()
		return nil, false, nil
	}
	if b := l.app.active; lsn >= b.start {
		p, ok := b.record(lsn, l.opts.MaxRecordSize)
		if !ok {
			l.app.Unlock()
			return nil, true, fmt.Errorf("%w: LSN %d is not the LSN of a record in the log buffer", ErrNotFound, lsn)
		}
		rec = append(dst[:0], p...)
		l.app.Unlock()
		return rec, true, nil
	}
	// In the group a leader is writing now: wait for that write.
	target := uint64(lsn) + 1 + l.qbase
	l.app.Unlock()
	if err := l.q.Wait(context.Background(), target, groupcommit.Written); err != nil {
		return nil, true, err
	}
	return nil, false, nil
}

// segIndexLocked returns the index in l.segs.firsts of the segment whose
// LSNs hold lsn (the last starting at or before it), or -1 if lsn is below
// the first. The caller holds l.segs.
func (l *Log) segIndexLocked(lsn LSN) int {
	return sort.Search(len(l.segs.firsts), func(i int) bool { return l.segs.firsts[i] > lsn }) - 1
}

// readFile reads the frame at lsn, below the written LSN, from its segment.
// l.reads is read-locked.
func (l *Log) readFile(lsn LSN, dst []byte) ([]byte, error) {
	l.segs.Lock()
	i := l.segIndexLocked(lsn)
	if i < 0 {
		first := l.segs.firsts[0]
		l.segs.Unlock()
		return nil, fmt.Errorf("%w: LSN %d is below the first LSN %d", ErrNotFound, lsn, first)
	}
	first := l.segs.firsts[i]
	limit := LSN(l.written.Load()) // where the frames readable in this segment end
	if i+1 < len(l.segs.firsts) {
		limit = l.segs.firsts[i+1]
	}
	l.segs.Unlock()
	h, err := l.readHandle(first)
	if err != nil {
		return nil, err
	}
	f := h.f
	off := headerSize(h.ff.Version) + int64(lsn-first)
	// The header is read into dst's storage (a local array would escape
	// through the File interface and cost an allocation per read).
	dst = slices.Grow(dst[:0], frameHeaderSize)[:frameHeaderSize]
	if err := readFull(f, dst, off, first); err != nil {
		return nil, err
	}
	hdr := [frameHeaderSize]byte(dst)
	n := binary.LittleEndian.Uint32(hdr[8:12])
	bad := func(reason string) error {
		if err := reused(f, first); err != nil {
			return err
		}
		return &CorruptionError{Segment: segmentName(first), Offset: off,
			Reason: fmt.Sprintf("%s at LSN %d (damage, or not the LSN of a record)", reason, lsn)}
	}
	if n == 0 || frameFlags(hdr[:]) != 0 || int64(n) > maxRecordFor(MaxSegmentSize) ||
		int64(lsn)+frameSize(int(n)) > int64(limit) {
		return nil, bad("no record frame")
	}
	dst = slices.Grow(dst[:0], int(n))[:n]
	if err := readFull(f, dst, off+frameHeaderSize, first); err != nil {
		return nil, err
	}
	var d xxhash.Digest
	d.ResetWithSeed(h.ff.Seed(uint64(lsn)))
	d.Write(hdr[8:])
	d.Write(dst)
	if d.Sum64() != binary.LittleEndian.Uint64(hdr[0:8]) {
		return nil, bad("checksum mismatch")
	}
	return dst, nil
}

// reused returns an error matching fs.ErrNotExist if the file f, opened as
// the segment starting at first, now has the header of another segment: a
// log written by another process (a reader of OpenReadOnly) removed the
// segment with RemoveBefore and reused its file (Options.RecycleSegments)
// while f was open. A bad frame read through f is then not damage. It
// returns nil otherwise.
func reused(f vfs.File, first LSN) error {
	if now, ok := headerFirst(f); ok && now != first {
		return fmt.Errorf("wal: %s was removed by RemoveBefore and its file reused for the segment at LSN %d: %w",
			segmentName(first), now, fs.ErrNotExist)
	}
	return nil
}

// readFull reads len(p) bytes at off from f, the segment starting at first.
func readFull(f vfs.File, p []byte, off int64, first LSN) error {
	n, err := f.ReadAt(p, off)
	if n == len(p) {
		return nil
	}
	if err == nil || err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return fmt.Errorf("wal: reading %s at offset %d: read %d of %d bytes: %w", segmentName(first), off, n, len(p), err)
}

// readHandle is a read-only handle of one segment file and the format of
// its frames, read from its header when opened.
type readHandle struct {
	f  vfs.File
	ff frameFormat
}

// openSegmentForRead opens the segment file starting at first and reads its
// header: a bad one is a *CorruptionError (or matches fs.ErrNotExist if the
// file is gone).
func (l *Log) openSegmentForRead(first LSN) (*readHandle, error) {
	name := segmentName(first)
	f, err := l.fs.Open(filepath.Join(l.dir, name))
	if err != nil {
		return nil, err
	}
	hdr := make([]byte, segmentHeaderSize)
	n, rerr := f.ReadAt(hdr, 0)
	if n < legacyHeaderSize && rerr != nil && !errors.Is(rerr, io.EOF) {
		f.Close()
		return nil, fmt.Errorf("reading the header of %s: %w", name, rerr)
	}
	if h, why, _ := decodeSegmentHeader(hdr[:max(n, 0)]); why == "" && LSN(h.First) != first {
		// A log written by another process (a reader of OpenReadOnly)
		// removed the segment and reused its file, as reused reports.
		f.Close()
		return nil, fmt.Errorf("wal: %s was removed by RemoveBefore and its file reused for the segment at LSN %d: %w",
			name, h.First, fs.ErrNotExist)
	}
	if err := checkHeader(hdr[:max(n, 0)], name, first); err != nil {
		f.Close()
		return nil, err
	}
	h, _, _ := decodeSegmentHeader(hdr[:n])
	return &readHandle{f: f, ff: frameFormat{Version: h.Version, Use: h.Use}}, nil
}

// readHandle returns the read-only handle of the segment starting at first,
// opening it on first use. l.reads is read-locked; a handle opened here is
// kept only if the segment is still in the log (a RemoveBefore racing with
// the open then closes it).
func (l *Log) readHandle(first LSN) (*readHandle, error) {
	l.rfiles.Lock()
	defer l.rfiles.Unlock()
	if h := l.rfiles.m[first]; h != nil {
		return h, nil
	}
	h, err := l.openSegmentForRead(first)
	if err != nil {
		return nil, fmt.Errorf("wal: reading: %w", err)
	}
	if l.rfiles.m == nil {
		l.rfiles.m = make(map[LSN]*readHandle)
	}
	l.rfiles.m[first] = h
	return h, nil
}

// closeReadHandles closes the read-only handles of segments that are no
// longer in the log: those whose first LSN is below keepFrom or above
// keepTo (Close passes an empty range: keepFrom > keepTo).
func (l *Log) closeReadHandles(keepFrom, keepTo LSN) {
	l.rfiles.Lock()
	defer l.rfiles.Unlock()
	for first, h := range l.rfiles.m {
		if first < keepFrom || first > keepTo {
			h.f.Close()
			delete(l.rfiles.m, first)
		}
	}
}
