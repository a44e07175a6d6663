package wal

import (
	"encoding/binary"
	"fmt"
	"io"

	"github.com/durawal/durawal/wal/internal/format"

	"github.com/durawal/durawal/wal/vfs"
)

// scanWindow is the most bytes a frameScanner reads at once, and so what it
// holds in memory, unless one frame is larger. Tests shrink it per Log
// (Options.scanWindow) so that frames straddle windows.
const scanWindow = 1 << 20

// frameScanner decodes the frames of one segment, in any order, through a
// bounded window of the file: recovery checks a sealed segment without a
// buffer of the segment's size. Built over a whole segment already in memory
// (scanBytes) it reads nothing. Not safe for concurrent use.
type frameScanner struct {
	f        vfs.File // nil: win holds the whole segment
	name     string   // the segment's base name, for errors
	s        segment  // first and size
	win      []byte   // bytes of the file from woff
	woff     int64
	read     int64     // bytes read from f
	zeroFrom int64     // the file's bytes from this offset read as zeros (a cut not finished); size if none
	window   int64     // scanWindow, or less in tests
	rule     epochRule // the epoch rule valid frames must also meet (frameStale)
	cut      LSN       // a recorded cut not yet finished: the bytes from it read as zeros (noCutLSN: none)
	word     uint32    // the kind word of the last valid frame read (Salvage)
}

// scanFile returns a scanner of the segment file f (of size bytes, whose
// first frame is at first), read through a window of scanWindow bytes.
func scanFile(f vfs.File, name string, first LSN, size int64) *frameScanner {
	return &frameScanner{f: f, name: name, s: segment{first: first, size: size}, zeroFrom: size, window: scanWindow, cut: noCutLSN}
}

// scanFile returns a scanner of the segment file f with the Log's window.
func (l *Log) scanFile(f vfs.File, name string, first LSN, size int64) *frameScanner {
	sc := scanFile(f, name, first, size)
	if w := l.opts.scanWindow; w > 0 {
		sc.window = max(w, 2*frameHeaderSize)
	}
	sc.rule = l.app.epoch
	sc.cut = l.rec.cut
	return sc
}

// scanBytes returns a scanner of the segment b, held whole in memory.
func scanBytes(b []byte, name string, first LSN) *frameScanner {
	return &frameScanner{name: name, s: segment{first: first, size: int64(len(b))}, win: b, zeroFrom: int64(len(b)), window: scanWindow, cut: noCutLSN}
}

// readAt fills p with the segment's bytes at off (zeros from zeroFrom on),
// through no window: for scans by position and for copying ranges.
func (sc *frameScanner) readAt(p []byte, off int64) error {
	if sc.f != nil && off >= sc.woff && off+int64(len(p)) <= sc.woff+int64(len(sc.win)) {
		copy(p, sc.win[off-sc.woff:]) // already read (and zeroed from zeroFrom on)
		return nil
	}
	if sc.f == nil {
		if off < 0 || off+int64(len(p)) > int64(len(sc.win)) {
			return fmt.Errorf("wal: open: reading %s: %d bytes at offset %d past its end (%d)", sc.name, len(p), off, len(sc.win))
		}
		copy(p, sc.win[off:])
	} else {
		got, err := sc.f.ReadAt(p, off)
		sc.read += int64(max(got, 0))
		if got < len(p) {
			if err == nil || err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return fmt.Errorf("wal: open: reading %s: read %d of %d bytes at offset %d: %w", sc.name, got, len(p), off, err)
		}
	}
	if z := sc.zeroFrom - off; z < int64(len(p)) {
		clear(p[max(z, 0):])
	}
	return nil
}

// lastNonZero returns the offset of the segment's last non-zero byte at or
// after from, or -1, reading backwards a window at a time.
func (sc *frameScanner) lastNonZero(from int64) (int64, error) {
	buf := make([]byte, min(sc.window, max(sc.s.size-from, 0)))
	for hi := sc.s.size; hi > from; {
		lo := max(from, hi-int64(len(buf)))
		p := buf[:hi-lo]
		if err := sc.readAt(p, lo); err != nil {
			return -1, err
		}
		if k := lastNonZeroFrom(p, 0); k >= 0 {
			return lo + k, nil
		}
		hi = lo
	}
	return -1, nil
}

// copyRange calls fn with the segment's bytes [off, off+n), a window at a
// time, each in a buffer of its own (fn may hand it to a WriteAt that
// scrambles it), with the offset of its first byte.
func (sc *frameScanner) copyRange(off, n int64, fn func(p []byte, off int64) error) error {
	for n > 0 {
		p := make([]byte, min(n, sc.window))
		if err := sc.readAt(p, off); err != nil {
			return err
		}
		if err := fn(p, off); err != nil {
			return err
		}
		off, n = off+int64(len(p)), n-int64(len(p))
	}
	return nil
}

// load makes the window hold the file's bytes [off, off+n), or up to the end
// of the file if it ends first. With ahead it reads a whole window (the
// scan goes on from there), without only the n bytes.
func (sc *frameScanner) load(off, n int64, ahead bool) error {
	n = min(n, sc.s.size-off)
	if sc.f == nil || n <= 0 || (off >= sc.woff && off+n <= sc.woff+int64(len(sc.win))) {
		return nil
	}
	want := n
	if ahead {
		want = min(max(n, sc.window), sc.s.size-off)
	}
	if int64(cap(sc.win)) < want {
		sc.win = make([]byte, want)
	}
	sc.win = sc.win[:want]
	got, err := sc.f.ReadAt(sc.win, off)
	sc.read += int64(max(got, 0))
	if int64(got) < want {
		sc.win, sc.woff = sc.win[:0], 0
		if err == nil || err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return fmt.Errorf("wal: open: reading %s: read %d of %d bytes at offset %d: %w", sc.name, got, want, off, err)
	}
	sc.woff = off
	if z := sc.zeroFrom - off; z < int64(len(sc.win)) {
		clear(sc.win[max(z, 0):])
	}
	return nil
}

// bytesAt returns the bytes of the window from file offset off, which load
// made available.
func (sc *frameScanner) bytesAt(off int64) []byte {
	if off < sc.woff || off > sc.woff+int64(len(sc.win)) {
		return nil
	}
	return sc.win[off-sc.woff:]
}

// frame decodes the frame expected at lsn, as decodeFrame does over the
// whole segment; flags are the frame's flags when it is valid. The payload
// aliases the window: valid until the next call. With ahead it reads a
// window's worth of the frames that follow too.
func (sc *frameScanner) frame(lsn LSN, ahead bool) (rec []byte, wm LSN, size int64, flags uint32, st frameStatus, err error) {
	if sc.s.version == 0 {
		sc.detectFormat()
	}
	off := sc.s.offset(lsn)
	if off >= sc.s.size {
		return nil, 0, 0, 0, frameShort, nil
	}
	maxRec := int(sc.s.size - sc.s.hdr() - frameHeaderSize)
	if err := sc.load(off, frameHeaderSize, ahead); err != nil {
		return nil, 0, 0, 0, frameShort, err
	}
	b := sc.bytesAt(off)
	ff := sc.s.format()
	rec, wm, size, st = decodeFrame(b, ff, lsn, maxRec)
	if st == frameShort && len(b) >= frameHeaderSize {
		// The frame runs past the window: read all of it, if the file holds it.
		if n := binary.LittleEndian.Uint32(b[8:12]); int64(n) <= int64(maxRec) {
			if err := sc.load(off, frameSize(int(n)), ahead); err != nil {
				return nil, 0, 0, 0, frameShort, err
			}
			b = sc.bytesAt(off)
			rec, wm, size, st = decodeFrame(b, ff, lsn, maxRec)
		}
	}
	if st == frameValid && off+size > sc.s.size {
		st = frameShort // its padding is cut off (a file truncated to an odd size)
	}
	if st == frameValid {
		word := format.KindWordOf(b)
		sc.word = word
		if why, woff := sc.rule.Contradiction(ff, uint64(lsn), word); why != "" {
			return nil, 0, 0, 0, frameStale, &CorruptionError{Segment: epochName, Offset: woff,
				Reason: fmt.Sprintf("the frame at LSN %d of %s %s", lsn, sc.name, why)}
		}
		if !sc.rule.Admits(ff, uint64(lsn), word) {
			st = frameStale
		}
	}
	if st == frameValid {
		flags = frameFlags(b)
	}
	return rec, wm, size, flags, st, nil
}

// detectFormat reads the segment's header for the format of its frames,
// if checkSegment has not: a header that does not decode leaves the oldest
// format, whose frames the checksums then judge.
func (sc *frameScanner) detectFormat() {
	version, use := uint32(minSegmentVersion), uint64(0)
	if sc.load(0, segmentHeaderSize, false) == nil {
		if h, why, _ := decodeSegmentHeader(sc.bytesAt(0)); why == "" {
			version, use = h.Version, h.Use
		}
	}
	sc.setFormat(version, use)
}

// setFormat records the format of the segment's frames, and with it where
// a pending cut (sc.cut) starts in the file: the bytes from there read as
// zeros, as finishing the cut will leave them.
func (sc *frameScanner) setFormat(version uint32, use uint64) {
	sc.s.version, sc.s.use = version, use
	if sc.cut == noCutLSN || sc.cut < sc.s.first {
		return
	}
	if z := min(sc.s.size, max(sc.s.hdr(), sc.s.offset(sc.cut))); z < sc.zeroFrom {
		sc.zeroFrom = z
		if sc.f != nil {
			sc.win, sc.woff = sc.win[:0], 0 // read again, zeros from z on
		}
	}
}

// validEnd returns the file offset where the segment's valid frames end.
func (sc *frameScanner) validEnd() (int64, error) {
	for lsn := sc.s.first; ; {
		_, _, size, _, st, err := sc.frame(lsn, true)
		if err != nil {
			return 0, err
		}
		if st != frameValid {
			return sc.s.offset(lsn), nil
		}
		lsn += LSN(size)
	}
}

// linkIn follows the segment's valid frames and returns the LSN of the link
// frame that ends them, if one does.
func (sc *frameScanner) linkIn() (LSN, bool, error) {
	for lsn := sc.s.first; ; {
		rec, _, size, flags, st, err := sc.frame(lsn, true)
		if err != nil || st != frameValid {
			return 0, false, err
		}
		if rec == nil {
			return lsn, flags == flagLink, nil
		}
		lsn += LSN(size)
	}
}

// linkAt reports whether a valid link frame lies at lsn.
func (sc *frameScanner) linkAt(lsn LSN) (bool, error) {
	if lsn < sc.s.first || sc.s.offset(lsn)+endFrameSize > sc.s.size {
		return false, nil
	}
	rec, _, _, flags, st, err := sc.frame(lsn, false)
	return err == nil && st == frameValid && rec == nil && flags == flagLink, err
}
