package wal

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/durawal/durawal/wal/vfs"
)

// RecoveryInfo says what Open found and repaired.
type RecoveryInfo struct {
	// Segments is the number of segment files found.
	Segments int
	// FirstLSN is the LSN of the oldest record kept (the first segment's
	// first LSN); EndLSN is where the next frame goes.
	FirstLSN, EndLSN LSN
	// TornBytes is the number of bytes past EndLSN in the last segment that
	// held a torn tail (a partial frame, or frames after a hole that were
	// never synced) and were zeroed, synced, before any new append. 0 after a
	// clean close.
	TornBytes int64
	// RemovedTemp counts leftover temporary files of interrupted segment
	// preparations that Open removed.
	RemovedTemp int
}

// recover scans the log directory at Open and applies the watermark rule
// (DESIGN "Failure model"). On return l.next, l.writeSeg, l.appendSeg and
// l.segFirsts describe the log, and any torn tail is zeroed and synced.
func (l *Log) recover() error {
	names, err := l.fs.List(l.dir)
	if err != nil {
		return fmt.Errorf("wal: open: listing %s: %w", l.dir, err)
	}
	var firsts []LSN
	for _, name := range names {
		if first, ok := parseSegmentName(name); ok {
			firsts = append(firsts, first)
			continue
		}
		switch {
		case name == lockName:
		case strings.HasSuffix(name, tmpSuffix):
			if err := l.fs.Remove(filepath.Join(l.dir, name)); err != nil {
				return fmt.Errorf("wal: open: removing leftover %s: %w", name, err)
			}
			l.info.RemovedTemp++
		default:
			return fmt.Errorf("%w: %s in %s (only segments %s and %s belong there)",
				ErrForeignFile, name, l.dir, segmentName(0), lockName)
		}
	}
	if l.info.RemovedTemp > 0 {
		if err := l.syncDir(); err != nil {
			return fmt.Errorf("wal: open: %w", err)
		}
	}
	l.info.Segments = len(firsts)
	if len(firsts) == 0 {
		s, err := l.prepareSegment()
		if err != nil {
			return fmt.Errorf("wal: open: creating the first segment: %w", noSpace(err))
		}
		if err := l.installSegment(s); err != nil {
			s.f.Close()
			return fmt.Errorf("wal: open: installing the first segment: %w", err)
		}
		l.writeSeg, l.appendSeg, l.segFirsts = s, s, []LSN{0}
		return nil
	}
	if err := l.checkSegmentHeaders(firsts); err != nil {
		return err
	}
	var buf []byte
	for i, first := range firsts {
		last := i == len(firsts)-1
		name := segmentName(first)
		path := filepath.Join(l.dir, name)
		buf, err = l.readSegment(path, buf)
		if err != nil {
			return err
		}
		if err := checkSegmentHeader(buf, name, first); err != nil {
			return err
		}
		if !last {
			if err := l.checkSealed(buf, name, first, firsts[i+1]); err != nil {
				return err
			}
			continue
		}
		end, err := l.recoverTail(buf, name, first)
		if err != nil {
			return err
		}
		f, err := l.openFile(path, l.fs.OpenReadWrite)
		if err != nil {
			if f != nil {
				f.Close()
			}
			return fmt.Errorf("wal: open: %w", err)
		}
		s := &segment{first: first, size: int64(len(buf)), limit: int64(len(buf)), path: path, f: f}
		if l.method.Direct() {
			// The partial block at the end of the frames is rewritten by
			// the next write: keep its bytes. An unaligned end of a
			// segment written by another method is left unused.
			s.limit = alignDown(s.size, l.dio.align)
			if endOff := s.offset(end); endOff <= s.limit {
				blk := alignDown(endOff, l.dio.align)
				l.dio.setTail(blk, buf[blk:endOff])
			}
		}
		l.writeSeg, l.appendSeg, l.next = s, s, end
		// After a process crash what was recovered may be only in the page
		// cache (frames and segment names alike), yet every new frame will
		// carry end as its watermark: make it durable first, or a later
		// power loss would turn a lost unsynced frame into "damaged synced
		// data" and an acknowledged record could vanish with its name.
		if err := l.syncDir(); err != nil {
			return fmt.Errorf("wal: open: %w", err)
		}
		if l.info.TornBytes > 0 {
			if err := l.zeroTail(s, end); err != nil {
				return fmt.Errorf("wal: open: truncating the torn tail of %s: %w", name, err)
			}
		} else if err := l.syncFile(f); err != nil { // makes the recovered frames durable
			return fmt.Errorf("wal: open: syncing %s: %w", name, err)
		}
	}
	l.segFirsts = firsts
	l.info.FirstLSN, l.info.EndLSN = firsts[0], l.next
	return nil
}

// readSegment reads the whole file at path into buf (grown as needed).
func (l *Log) readSegment(path string, buf []byte) ([]byte, error) {
	f, err := l.fs.Open(path)
	if err != nil {
		return buf, fmt.Errorf("wal: open: %w", err)
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return buf, fmt.Errorf("wal: open: %s: %w", path, err)
	}
	if int64(cap(buf)) < size {
		buf = make([]byte, size)
	}
	buf = buf[:size]
	if n, err := f.ReadAt(buf, 0); int64(n) < size {
		if err == nil {
			err = io.ErrUnexpectedEOF
		}
		return buf, fmt.Errorf("wal: open: reading %s: read %d of %d bytes: %w", path, n, size, err)
	}
	return buf, nil
}

// checkSealed validates a non-last segment: its frames must run without a
// gap from first to next, the first LSN of the following segment. Every
// byte there was synced before the next segment was used, so any bad frame
// is damage, and a segment too short to reach next means a missing segment.
func (l *Log) checkSealed(buf []byte, name string, first, next LSN) error {
	s := segment{first: first, size: int64(len(buf))}
	if next < first || int64(next-first) > s.capacity() {
		return &CorruptionError{Segment: name, Offset: int64(len(buf)),
			Reason: fmt.Sprintf("the next segment starts at LSN %d, beyond this segment's end (LSN %d): a segment is missing", next, first+LSN(s.capacity()))}
	}
	for lsn := first; lsn < next; {
		off := s.offset(lsn)
		_, _, size, st := decodeFrame(buf[off:], lsn, int(maxRecordFor(int64(len(buf)))))
		if st == frameValid && off+size > int64(len(buf)) {
			st = frameShort
		}
		if st != frameValid {
			return &CorruptionError{Segment: name, Offset: off,
				Reason: fmt.Sprintf("%s at LSN %d in a completed segment (the log continues at LSN %d)", st, lsn, next)}
		}
		if lsn+LSN(size) > next {
			return &CorruptionError{Segment: name, Offset: off,
				Reason: fmt.Sprintf("frame at LSN %d ends past the next segment's first LSN %d", lsn, next)}
		}
		lsn += LSN(size)
	}
	return nil
}

// recoverTail scans the last segment and returns where its valid frames end.
// At the first frame that does not validate, at LSN x, it looks at every
// later position for a valid frame whose watermark is above x: such a frame
// was appended after x had been synced, so x is damaged synced data and Open
// must fail. Without one, x was never synced: the bytes from x on are a torn
// tail, counted in l.info.TornBytes for zeroing.
func (l *Log) recoverTail(buf []byte, name string, first LSN) (LSN, error) {
	s := segment{first: first, size: int64(len(buf))}
	lsn := first
	var st frameStatus
	for {
		off := s.offset(lsn)
		var size int64
		_, _, size, st = decodeFrame(buf[off:], lsn, int(maxRecordFor(int64(len(buf)))))
		if st == frameValid && off+size > int64(len(buf)) {
			st = frameShort // its padding is cut off (a file truncated to an odd size)
		}
		if st != frameValid {
			break
		}
		lsn += LSN(size)
	}
	x, xoff := lsn, s.offset(lsn)
	lastNonZero := int64(-1)
	for off := xoff; off+frameHeaderSize <= int64(len(buf)); off += frameAlign {
		at := first + LSN(off-segmentHeaderSize)
		_, wm, size, fst := decodeFrame(buf[off:], at, int(maxRecordFor(int64(len(buf)))))
		if fst != frameValid {
			continue
		}
		if wm > x {
			return 0, &CorruptionError{Segment: name, Offset: xoff,
				Reason: fmt.Sprintf("%s at LSN %d, but the frame at LSN %d records the log as synced up to LSN %d", st, x, at, wm)}
		}
		off += size - frameAlign
	}
	for i := len(buf) - 1; int64(i) >= xoff; i-- {
		if buf[i] != 0 {
			lastNonZero = int64(i)
			break
		}
	}
	if lastNonZero >= 0 {
		l.info.TornBytes = lastNonZero + 1 - xoff
	}
	return x, nil
}

// zeroTail overwrites the torn tail that starts at end with zeros and syncs,
// so no stale frame can ever be read as live and new frames follow the last
// valid one. The sync is a real one under every method: the recovered
// frames may have been written by an earlier process through the page cache.
func (l *Log) zeroTail(s *segment, end LSN) error {
	off := s.offset(end)
	stop := off + l.info.TornBytes
	f := s.f
	if l.method.Direct() {
		if stop <= s.limit {
			// Aligned: rewrite the partial block's kept bytes, then zeros
			// to the next block boundary.
			if err := l.zeroDirect(s, alignUp(stop, l.dio.align)); err != nil {
				return err
			}
			l.opts.Logger.Warn("wal: truncated a torn tail", "segment", s.path, "lsn", end, "bytes", l.info.TornBytes)
			return l.syncFile(s.f)
		}
		// The torn bytes reach an unaligned end that O_DIRECT cannot
		// write (a segment made with another SegmentSize): zero them
		// through a buffered handle.
		bf, err := l.fs.OpenReadWrite(s.path, vfs.Fdatasync)
		if err != nil {
			return err
		}
		defer bf.Close()
		f = bf
	}
	zeros := make([]byte, min(1<<20, l.info.TornBytes))
	for off < stop {
		clear(zeros)
		n := min(int64(len(zeros)), stop-off)
		if _, err := f.WriteAt(zeros[:n], off); err != nil {
			return err
		}
		off += n
	}
	l.opts.Logger.Warn("wal: truncated a torn tail", "segment", s.path, "lsn", end, "bytes", l.info.TornBytes)
	return l.syncFile(f)
}

// zeroDirect writes, through O_DIRECT, the partial block at dio.tailOff (its
// kept bytes, then zeros) and zeros after it up to stop, an aligned offset.
func (l *Log) zeroDirect(s *segment, stop int64) error {
	const chunk = 1 << 20
	d := &l.dio
	buf := alignedBuf(int(min(chunk, stop-d.tailOff)), d.align)
	for off := d.tailOff; off < stop; {
		clear(buf)
		n := min(int64(len(buf)), stop-off)
		if off == d.tailOff {
			copy(buf, d.tail)
		}
		if _, err := s.f.WriteAt(buf[:n], off); err != nil {
			return err
		}
		off += n
	}
	return nil
}

// String names a frame status for error messages.
func (st frameStatus) String() string {
	switch st {
	case frameValid:
		return "valid frame"
	case frameZero:
		return "zeroed frame header"
	case frameShort:
		return "truncated frame"
	}
	return "invalid frame (bad length, flags or checksum)"
}
