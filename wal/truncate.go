package wal

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"path/filepath"

	"github.com/durawal/durawal/groupcommit"
	"github.com/durawal/durawal/wal/internal/format"
	"github.com/durawal/durawal/wal/vfs"
)

// truncateName is the file recording a TruncateFrom in progress: the LSN
// of the cut. It exists only between the moment the cut is decided and the
// moment the log's files reflect it; Open finishes a truncation it finds.
const truncateName = format.TruncateName

// TruncateFrom drops every record at or after lsn, which must be the LSN
// of a record or the appended LSN (then nothing is dropped): the log then
// ends at lsn, and the next append gets LSN lsn. TruncateFrom(FirstLSN())
// empties the log (Raft restoring a snapshot onto an empty log); it keeps
// the LSN space where it is.
//
// It first makes every appended record durable, then records the cut in the
// file "truncate-lsn" (synced, renamed, directory synced), zeroes and syncs
// the dropped frames of the segment holding lsn (the link frame to a later
// segment included), removes the later segments (directory synced) and
// removes the record. After it returns nil no crash brings a dropped record
// back, and a crash at any step before leaves either the old log or the cut
// one: Open finishes a cut it finds recorded. New frames carry lsn as their
// watermark, so none vouches for a dropped byte; the group-commit queue's
// positions keep growing (commits of dropped records already waited return,
// none can be covered by a frame written after the cut).
//
// Appends, syncs and ReadRecord wait while it runs; it is safe for
// concurrent use. A Reader positioned past lsn returns ErrTruncated from
// then on; one at or before it reads the records appended after the cut.
// Commits of dropped records that had returned nil stay reported as
// committed: dropping them is the caller's decision.
//
// Errors: ErrNotFound if lsn is below FirstLSN or beyond the appended LSN,
// ErrInvalidArgument if lsn falls inside a record (then TruncateFrom has
// read the frames of lsn's segment up to it to tell so), a
// *CorruptionError if the frame at lsn is damaged, ErrClosed, ErrPoisoned,
// ErrReadOnly (OpenReadOnly),
// or the filesystem's error. A failure once the cut was being recorded
// poisons the log (ErrPoisoned): reopen it, and Open either finds the old
// log (the record never became durable) or finishes the cut.
func (l *Log) TruncateFrom(lsn LSN) error {
	if l.readOnly {
		return ErrReadOnly
	}
	l.truncMu.Lock()
	defer l.truncMu.Unlock()
	l.removal.Lock() // RemoveBefore relies on the front of the segment list staying put
	defer l.removal.Unlock()
	// Make everything appended written and durable, then hold appends,
	// flushes and reads off: the log buffer is empty and nothing is in
	// flight.
	for {
		l.app.Lock()
		if err := l.usableLocked(); err != nil {
			l.app.Unlock()
			return err
		}
		qend := uint64(l.app.next) + l.qbase
		l.app.Unlock()
		if err := l.q.Wait(context.Background(), qend, groupcommit.Synced); err != nil {
			return err
		}
		l.reads.Lock()
		l.flushing.Lock()
		// No roll can start while the flush lock (l.flushing) is held: let the last one's
		// sealing finish writing its link, which the cut may zero.
		if err := l.awaitSeal(false); err != nil {
			l.flushing.Unlock()
			l.reads.Unlock()
			return fmt.Errorf("%w: %w", ErrPoisoned, err)
		}
		l.app.Lock()
		if err := l.usableLocked(); err != nil {
			l.app.Unlock()
			l.flushing.Unlock()
			l.reads.Unlock()
			return err
		}
		if len(l.app.active.buf) == 0 && LSN(l.synced.Load()) == l.app.next {
			break
		}
		l.app.Unlock() // appends came in between: flush them too
		l.flushing.Unlock()
		l.reads.Unlock()
	}
	defer l.reads.Unlock()
	defer l.flushing.Unlock()
	defer l.app.Unlock()

	l.segs.Lock()
	first := l.segs.firsts[0]
	l.segs.Unlock()
	if lsn < first || lsn > l.app.next {
		return fmt.Errorf("%w: cannot truncate at LSN %d: the log holds LSNs %d to %d", ErrNotFound, lsn, first, l.app.next)
	}
	if lsn == l.app.next {
		return nil
	}
	if _, err := l.readFile(lsn, nil); err != nil { // lsn must start a record
		var ce *CorruptionError
		if errors.As(err, &ce) {
			if start, ok := l.recordAround(lsn); ok {
				return fmt.Errorf("%w: cannot truncate at LSN %d: it is inside the record at LSN %d, not the start of a record", ErrInvalidArgument, lsn, start)
			}
		}
		return fmt.Errorf("wal: truncating at LSN %d: %w", lsn, err)
	}

	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	l.segs.Lock()
	defer l.segs.Unlock()
	err := l.cutLocked(lsn)
	if err != nil {
		l.poison(err)
		return fmt.Errorf("%w: truncating at LSN %d: %w", ErrPoisoned, lsn, err)
	}
	return nil
}

// recordAround reports the LSN of the record whose frame holds lsn, found
// by reading the frames of lsn's segment from its first, and false if those
// frames do not all verify up to lsn (then the error at lsn is damage, not
// a caller's LSN inside a record). TruncateFrom calls it only on its error
// path: it reads every frame of the segment before lsn.
func (l *Log) recordAround(lsn LSN) (LSN, bool) {
	l.segs.Lock()
	i := l.segIndexLocked(lsn)
	if i < 0 {
		l.segs.Unlock()
		return 0, false
	}
	at := l.segs.firsts[i]
	l.segs.Unlock()
	var buf []byte
	for at < lsn {
		rec, err := l.readFile(at, buf)
		if err != nil {
			return 0, false
		}
		next := at + LSN(frameSize(len(rec)))
		if next > lsn {
			return at, true
		}
		at, buf = next, rec
	}
	return 0, false
}

// cutLocked carries out TruncateFrom's steps at lsn, a record's LSN, with
// every lock held and everything appended durable: first on the disk
// (cutFiles), then in the Log (adoptCutLocked).
func (l *Log) cutLocked(lsn LSN) error {
	k := l.segIndexLocked(lsn) // ≥ 0: TruncateFrom checked lsn ≥ FirstLSN
	s, rf, err := l.cutFiles(lsn, k)
	if err != nil {
		return err
	}
	return l.adoptCutLocked(lsn, k, s, rf)
}

// cutFiles makes the cut at lsn, inside the k-th segment, on the disk:
// record it (truncate-lsn), begin the new epoch there, zero the dropped
// frames of the segment kept and remove the later segments, then remove
// the record. A crash between any two steps leaves either the old log or
// one Open finishes cutting. It returns the kept segment (without a file
// for writing) and its read handle.
func (l *Log) cutFiles(lsn LSN, k int) (*segment, vfs.File, error) {
	keep := l.segs.firsts[k]
	zeroEnd := l.app.next
	if k+1 < len(l.segs.firsts) {
		zeroEnd = l.segs.firsts[k+1]
	}
	zeroEnd += endFrameSize // the end or link frame after the last frame

	if err := l.writeLSNFile(truncateName, lsn); err != nil {
		return nil, nil, fmt.Errorf("recording the cut: %w", err)
	}
	// The new epoch, from the cut on, before anything is zeroed: from here
	// on no frame of the dropped ones validates at its LSN, whether or not
	// the zeros below reach the disk (a failed sync may leave them only in
	// the page cache, marked clean).
	if err := l.beginEpoch(lsn); err != nil {
		return nil, nil, err
	}
	s, rf, err := l.keptSegment(keep)
	if err != nil {
		return nil, nil, err
	}
	if err := l.zeroRange(s, lsn, min(s.offset(zeroEnd), s.size)); err != nil {
		return nil, nil, fmt.Errorf("zeroing the dropped frames of %s: %w", segmentName(keep), err)
	}
	for _, f := range l.segs.firsts[k+1:] {
		if err := l.fs.Remove(filepath.Join(l.dir, segmentName(f))); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, nil, fmt.Errorf("removing %s: %w", segmentName(f), err)
		}
	}
	if k+1 < len(l.segs.firsts) {
		if err := l.syncDir(); err != nil {
			return nil, nil, err
		}
	}
	if err := l.fs.Remove(filepath.Join(l.dir, truncateName)); err != nil {
		return nil, nil, fmt.Errorf("removing %s: %w", truncateName, err)
	}
	if err := l.syncDir(); err != nil {
		return nil, nil, err
	}
	return s, rf, nil
}

// keptSegment describes the installed segment whose first LSN is keep, from
// its header read through its read handle, which it also returns.
func (l *Log) keptSegment(keep LSN) (*segment, vfs.File, error) {
	h, err := l.readHandle(keep)
	if err != nil {
		return nil, nil, err
	}
	rf := h.f
	hdr := make([]byte, headerSize(h.ff.Version))
	if err := readFull(rf, hdr, 0, keep); err != nil {
		return nil, nil, err
	}
	s := &segment{first: keep, version: h.ff.Version, use: h.ff.Use,
		size: int64(binary.LittleEndian.Uint32(hdr[12:16])) * frameAlign, path: filepath.Join(l.dir, segmentName(keep))}
	if s.size == 0 { // a header written before sizes were recorded
		if s.size, err = rf.Size(); err != nil {
			return nil, nil, err
		}
	}
	return s, rf, nil
}

// adoptCutLocked makes the Log say what cutFiles made of the disk: the log
// ends at lsn in s, the k-th segment, which takes the next writes; the
// queue positions move past every dropped byte, and Readers past the cut
// are told.
func (l *Log) adoptCutLocked(lsn LSN, k int, s *segment, rf vfs.File) error {
	oldNext := l.app.next
	if k+1 < len(l.segs.firsts) {
		old := l.write.seg
		f, err := l.openFile(s.path, l.fs.OpenReadWrite)
		if err != nil {
			return fmt.Errorf("reopening %s for writing: %w", s.path, err)
		}
		s.f = f
		if old.f != nil {
			old.f.Close() // removed: nothing in it is needed any more
			old.f = nil
		}
		l.write.Lock()
		l.write.seg = s
		l.write.Unlock()
		l.app.seg = s
	}
	ws := l.write.seg
	ws.limit = ws.size
	if l.method.Direct() {
		ws.limit = alignDown(ws.size, l.write.dio.align)
		endOff := ws.offset(lsn)
		blk := alignDown(endOff, l.write.dio.align)
		tail := make([]byte, endOff-blk)
		if err := readFull(rf, tail, blk, s.first); err != nil {
			return err
		}
		l.write.dio.setTail(blk, tail)
	}
	l.segs.firsts = l.segs.firsts[:k+1]
	l.closeReadHandles(l.segs.firsts[0], s.first)
	l.app.next = lsn
	l.app.active.reset(lsn)
	l.app.active.seg = l.app.seg
	l.qbase += uint64(oldNext - lsn)
	l.appended.Store(uint64(lsn))
	l.written.Store(uint64(lsn))
	l.synced.Store(uint64(lsn))
	l.leader.groupsSinceSync.Store(0)
	l.readers.Lock()
	for r := range l.readers.m {
		for c := r.cut.Load(); uint64(lsn) < c && !r.cut.CompareAndSwap(c, uint64(lsn)); c = r.cut.Load() {
		}
	}
	l.readers.Unlock()
	l.notifyTail() // a Reader waiting at the old tail sees the cut (ErrTruncated) now, not at the next write
	l.opts.Logger.Info("wal: truncated", "dir", l.dir, "lsn", lsn, "dropped_bytes", oldNext-lsn)
	return nil
}

// zeroRange overwrites the bytes of segment s from the frame at lsn up to
// file offset stop with zeros, through a buffered handle, and makes them
// durable.
func (l *Log) zeroRange(s *segment, lsn LSN, stop int64) error {
	off := s.offset(lsn)
	if off >= stop {
		return nil
	}
	return l.writeFile(s.path, l.bufferedMethod(), false, func(f vfs.File) error {
		return writeZeros(f, off, stop)
	})
}

// writeLSNFile makes name (first-lsn, truncate-lsn) record lsn: written
// under a temporary name, synced, renamed over the old file and the
// directory synced.
func (l *Log) writeLSNFile(name string, lsn LSN) error {
	return l.writeRecordFile(name, encodeLSNRecord(lsn))
}

// writeRecordFile makes the small record file name (first-lsn,
// truncate-lsn, epoch) hold rec: written under a temporary name, synced,
// renamed over the old file and the directory synced.
func (l *Log) writeRecordFile(name string, rec []byte) error {
	tmp := filepath.Join(l.dir, name+tmpSuffix)
	// A leftover of a failed earlier call (Open removed any from a crash).
	if err := l.fs.Remove(tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := l.writeFile(tmp, l.bufferedMethod(), true, func(f vfs.File) error {
		_, err := f.WriteAt(rec, 0)
		return err
	}); err != nil {
		return err
	}
	if err := l.fs.Rename(tmp, filepath.Join(l.dir, name)); err != nil {
		return err
	}
	return l.syncDir()
}

// encodeLSNRecord returns the 16-byte record of lsn that first-lsn and
// truncate-lsn hold (format.EncodeLSNRecord).
func encodeLSNRecord(lsn LSN) []byte { return format.EncodeLSNRecord(uint64(lsn)) }

// readLSNFile reads the LSN recorded in name; ok is false if there is no
// such file. A damaged record is a *CorruptionError.
func (l *Log) readLSNFile(name string) (lsn LSN, ok bool, err error) {
	return readLSNRecord(l.fs, l.dir, name)
}

// readLSNRecord reads the LSN recorded in the file name of dir on fsys;
// ok is false if there is no such file. A damaged record is a
// *CorruptionError.
func readLSNRecord(fsys vfs.FS, dir, name string) (lsn LSN, ok bool, err error) {
	b, present, rerr, err := readRecordFile(fsys, dir, name, format.LSNRecordSize)
	if err != nil || !present {
		return 0, false, err
	}
	lsn64, ok := format.DecodeLSNRecord(b)
	if !ok {
		return 0, false, &CorruptionError{Segment: name, Offset: int64(len(b)),
			Reason: fmt.Sprintf("the LSN recorded in %s is damaged (%d bytes read, %v)", name, len(b), rerr)}
	}
	return LSN(lsn64), true, nil
}

// readRecordFile reads up to size bytes of the small record file name in
// dir (first-lsn, truncate-lsn, epoch). present is false, with no error, if
// there is no such file. A read that fails before size bytes is the
// filesystem's error, not damage (the record may be intact); a short file
// is returned as read, with the end-of-file error in readErr, for the
// caller's decoder to judge.
func readRecordFile(fsys vfs.FS, dir, name string, size int) (b []byte, present bool, readErr, err error) {
	f, err := fsys.Open(filepath.Join(dir, name))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil, nil
	}
	if err != nil {
		return nil, false, nil, fmt.Errorf("wal: open: %w", err)
	}
	b = make([]byte, size)
	n, rerr := f.ReadAt(b, 0)
	f.Close()
	if n < len(b) && rerr != nil && !errors.Is(rerr, io.EOF) {
		return nil, false, nil, fmt.Errorf("wal: open: reading %s: %w", name, rerr)
	}
	return b[:n], true, rerr, nil
}

// finishTruncate plans the end of a TruncateFrom a crash interrupted: the
// removal of the segments after the cut, the zeroing of the segment holding
// it from the cut on, syncs of both, and the removal of the record. It
// returns the segments the cut keeps and the cut's LSN, from which recovery
// reads the last kept segment as zeros (frameScanner.cut), so the log looks
// as it will once the cut is finished (noCutLSN if none was recorded).
func (l *Log) finishTruncate(firsts []LSN) (kept []LSN, cut LSN, err error) {
	cut, ok, err := l.readLSNFile(truncateName)
	if err != nil || !ok {
		return firsts, noCutLSN, err
	}
	k := len(firsts) - 1
	for k >= 0 && firsts[k] > cut {
		k--
	}
	if k < 0 {
		return nil, noCutLSN, &CorruptionError{Segment: truncateName, Offset: 0,
			Reason: fmt.Sprintf("a truncation at LSN %d was recorded, but the oldest segment starts at LSN %d", cut, firsts[0])}
	}
	for _, f := range firsts[k+1:] {
		path := filepath.Join(l.dir, segmentName(f))
		l.rec.plan.add(func() error { return l.fs.Remove(path) }, "remove %s, after the recorded cut at LSN %d (an interrupted TruncateFrom)", segmentName(f), cut)
	}
	l.rec.plan.add(l.syncDir, "sync the directory")
	path := filepath.Join(l.dir, segmentName(firsts[k]))
	first := firsts[k]
	l.rec.plan.add(func() error {
		l.opts.Logger.Warn("wal: finishing an interrupted truncation", "dir", l.dir, "lsn", cut)
		return l.zeroAfterCut(path, first, cut)
	}, "zero %s from the cut at LSN %d and sync it", segmentName(first), cut)
	l.rec.plan.add(func() error { return l.fs.Remove(filepath.Join(l.dir, truncateName)) }, "remove %s", truncateName)
	l.rec.plan.add(l.syncDir, "sync the directory")
	return firsts[:k+1], cut, nil
}

// noCut is a Reader's cut while no TruncateFrom has cut below it.
const noCut = math.MaxUint64

// noCutLSN is finishTruncate's cut when no cut is left for recovery to hide.
const noCutLSN = ^LSN(0)

// zeroAfterCut zeroes, in the segment at path (from first), every byte
// from the cut to its last non-zero one, a window at a time, and syncs (a
// real sync, as for a torn tail).
func (l *Log) zeroAfterCut(path string, first, cut LSN) error {
	f, err := l.fs.OpenReadWrite(path, vfs.Fdatasync)
	if err != nil {
		return err
	}
	err = l.zeroAfterCutIn(f, first, cut)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func (l *Log) zeroAfterCutIn(f vfs.File, first, cut LSN) error {
	size, err := f.Size()
	if err != nil {
		return err
	}
	sc := l.scanFile(f, segmentName(first), first, size)
	sc.cut = noCutLSN                        // the bytes as they are, not as the cut will leave them
	if err := checkSegment(sc); err != nil { // its format: where frames start
		l.info.BytesRead += sc.read
		return err
	}
	off := sc.s.offset(cut)
	last, err := sc.lastNonZero(off)
	l.info.BytesRead += sc.read
	if err != nil || last < 0 {
		return err
	}
	if err := writeZeros(f, off, last+1); err != nil {
		return err
	}
	return l.syncFile(f)
}
