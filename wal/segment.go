package wal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"path/filepath"
	"syscall"
	"time"

	"github.com/durawal/durawal/wal/internal/format"
	"github.com/durawal/durawal/wal/vfs"
)

// The segment header is package format's (wal/internal/format), documented
// in doc.go: 32 bytes in versions 1 to 5, 64 in versions 6 and 7, which add
// the use ID that every frame's checksum is seeded with. The names below
// are this package's for it.
const (
	legacyHeaderSize  = format.LegacyHeaderSize // header of format versions 1 to 5
	segmentHeaderSize = format.HeaderSize       // header of format versions 6 and 7
	segmentVersion    = format.Version          // written by this build for a new segment (allocated or zero-filled)
	recycledVersion   = format.RecycledVersion  // written by this build for a recycled segment
	minSegmentVersion = format.MinVersion       // the oldest this build reads
	maxSegmentVersion = format.MaxVersion
	segmentSuffix     = format.SegmentExt
	tmpSuffix         = format.TempExt
	lockName          = format.LockName
)

// headerSize returns the size in bytes of the header of a segment of
// format version v: where its first frame starts.
func headerSize(v uint32) int64 { return format.HeaderSizeOf(v) }

// staleTail reports whether a segment of format version v is a recycled
// file, whose bytes after the frames may be stale frames rather than zeros.
func staleTail(v uint32) bool { return format.StaleTail(v) }

// earlyUse reports whether a segment of format version v may have received
// frames before its predecessor was synced (a roll sealing in the
// background).
func earlyUse(v uint32) bool { return format.EarlyUse(v) }

var segmentMagic = format.Magic

// segmentName returns the base name of the segment whose first frame is at
// first: 20 decimal digits, so names sort in LSN order.
func segmentName(first LSN) string { return format.SegmentName(uint64(first)) }

// parseSegmentName returns the first LSN a segment name encodes.
func parseSegmentName(name string) (LSN, bool) {
	n, ok := format.ParseSegmentName(name)
	return LSN(n), ok
}

// encodeSegmentHeader returns the header of a segment of format version
// version whose first frame is at first, created with size bytes, for the
// use use (ignored below version 6).
func encodeSegmentHeader(first LSN, size int64, version uint32, use uint64) []byte {
	return format.EncodeHeader(format.Header{Version: version, Created: size, First: uint64(first), Use: use})
}

// segHeader is a decoded segment header.
type segHeader = format.Header

// decodeSegmentHeader decodes the header at the start of b
// (format.DecodeHeader).
func decodeSegmentHeader(b []byte) (h segHeader, why string, unsupported bool) {
	return format.DecodeHeader(b)
}

// checkSegment checks the header and size of the segment sc scans, and
// returns nil if they are good for a segment starting at its first LSN. A
// bad header is a *CorruptionError naming the segment; a header of another
// format version is an error matching ErrUnsupportedVersion. Segments are
// created at full size and never resized, so a file whose size differs from
// the one its header records was truncated or extended after the fact:
// damage, not a crash, reported at the offset where its valid frames end
// (truncated) or where the extension starts.
func checkSegment(sc *frameScanner) error {
	if err := sc.load(0, segmentHeaderSize, false); err != nil {
		return err
	}
	hdr := sc.bytesAt(0)
	if err := checkHeader(hdr, sc.name, sc.s.first); err != nil {
		return err
	}
	h, _, _ := decodeSegmentHeader(hdr)
	sc.setFormat(h.Version, h.Use)
	created := h.Created
	if created == 0 || created == sc.s.size { // 0: written before sizes were recorded
		return nil
	}
	off := created
	if sc.s.size < created {
		var err error
		if off, err = sc.validEnd(); err != nil {
			return err
		}
	}
	return &CorruptionError{Segment: sc.name, Offset: off,
		Reason: fmt.Sprintf("segment file is %d bytes but was created with %d: truncated or extended", sc.s.size, created)}
}

// checkHeader checks the segment header at the start of b, not the file's
// size (b may hold only the header).
func checkHeader(b []byte, name string, first LSN) error {
	h, why, unsupported := decodeSegmentHeader(b)
	switch {
	case unsupported:
		return fmt.Errorf("%w: %s has %s", ErrUnsupportedVersion, name, why)
	case why != "":
		return &CorruptionError{Segment: name, Offset: 0, Reason: why}
	case LSN(h.First) != first:
		return &CorruptionError{Segment: name, Offset: 16, Reason: fmt.Sprintf("header first LSN %d does not match the name", h.First)}
	}
	return nil
}

// checkSegmentHeaders checks the header and size of every segment before
// any segment's frames are checked against the next one's first LSN, so a
// bad segment (a stray short file with a segment's name, another format
// version) is reported as itself, not as damage in the segment before it.
func (l *Log) checkSegmentHeaders(firsts []LSN) error {
	var hdr []byte
	for i, first := range firsts {
		name := segmentName(first)
		path := filepath.Join(l.dir, name)
		f, err := l.fs.Open(path)
		if err != nil {
			return fmt.Errorf("wal: open: %w", err)
		}
		size, err := f.Size()
		if err == nil {
			hdr = make([]byte, min(size, segmentHeaderSize))
			var n int
			n, err = f.ReadAt(hdr, 0)
			l.info.BytesRead += int64(max(n, 0))
			if n == len(hdr) {
				err = nil // io.EOF at the end of a short file
			} else {
				if err == nil || err == io.EOF {
					err = io.ErrUnexpectedEOF
				}
				err = fmt.Errorf("read %d of %d bytes: %w", n, len(hdr), err)
			}
		}
		f.Close()
		if err != nil {
			return fmt.Errorf("wal: open: reading the header of %s: %w", path, err)
		}
		if i > 0 && i == len(firsts)-1 && len(hdr) == segmentHeaderSize && headerUnwritten(hdr, first) {
			// A roll wrote it without a sync and a crash lost it:
			// recoverRoll decides (the last segment's scan reports it
			// if it stays).
			continue
		}
		if err := checkHeader(hdr, name, first); err != nil {
			return err
		}
		// An extended file is damage whatever it holds: say so before
		// anything reads it whole (a truncated one is checked when read,
		// to report where its frames end).
		if created := int64(binary.LittleEndian.Uint32(hdr[12:16])) * frameAlign; created != 0 && size > created {
			return &CorruptionError{Segment: name, Offset: created,
				Reason: fmt.Sprintf("segment file is %d bytes but was created with %d: truncated or extended", size, created)}
		}
	}
	return nil
}

// segment is one file of the log.
type segment struct {
	first   LSN
	version uint32 // segment format version from its header
	use     uint64 // use ID from its header (version 6 on): enters every frame's checksum
	size    int64  // file size in bytes
	limit   int64  // end of the bytes new frames may use: size, aligned down under O_DIRECT
	handed  int64  // frames before this offset were handed to the device (WritebackAfter)
	zeroTo  int64  // allocated by this Log: its blocks before this offset were written (zeroAhead); 0 if not allocated
	path    string
	f       vfs.File // write handle while the segment is active or prepared
}

// capacity returns how many frame bytes fit the segment.
func (s *segment) capacity() int64 { return s.size - s.hdr() }

// hdr returns the size in bytes of s's header: where its first frame starts.
func (s *segment) hdr() int64 { return headerSize(s.version) }

// format returns how s's frames are encoded.
func (s *segment) format() frameFormat { return frameFormat{Version: s.version, Use: s.use} }

// room returns how many frame bytes new appends may fill: the capacity,
// less an unaligned end that direct I/O cannot write (a segment created
// with another SegmentSize and reopened with O_DIRECT).
//
// From format version 2 the last endFrameSize bytes are kept for the end or
// link frame, so a clean Close and a roll can always write theirs.
func (s *segment) room() int64 {
	r := s.capacity()
	if s.limit > 0 {
		r = s.limit - s.hdr()
	}
	if s.version >= 2 {
		r -= endFrameSize
	}
	return r
}

// offset returns the file offset of lsn within s.
func (s *segment) offset(lsn LSN) int64 { return s.hdr() + int64(lsn-s.first) }

// installSegment gives a prepared segment its first LSN, s.first: it writes
// the header, syncs it, renames the file to its segment name and syncs the
// directory. After it returns nil the segment survives a power loss. It
// installs a new log's first segment, and every new segment under a
// write-through method; other rolls write the header and rename without a
// sync, and leave the syncs to the sealing (rollTo).
//
// The caller sets s.first (under l.app, on a roll): appenders read it under
// l.app while the leader installs s without it, so it is only read here.
func (l *Log) installSegment(s *segment) error {
	if err := l.writeHeader(s); err != nil {
		return err
	}
	if err := l.syncSegment(s.f); err != nil {
		return err
	}
	if err := l.nameSegment(s); err != nil {
		return err
	}
	return l.syncDir()
}

// writeHeader writes s's header, naming s.first, through s's write handle
// (unsynced). Under O_DIRECT it goes out as a whole block (header, then the
// zeros already there), which becomes the partial block the first frames
// rewrite.
func (l *Log) writeHeader(s *segment) error {
	hdr := encodeSegmentHeader(s.first, s.size, s.version, s.use)
	if l.method.Direct() {
		blk := alignedBuf(l.write.dio.align, l.write.dio.align)
		copy(blk, hdr)
		if _, err := s.f.WriteAt(blk, 0); err != nil {
			return err
		}
		l.write.dio.setTail(0, hdr)
		return nil
	}
	_, err := s.f.WriteAt(hdr, 0)
	return err
}

// nameSegment renames the prepared file of s to its segment name (not
// synced: the caller syncs the directory when the name must be durable).
func (l *Log) nameSegment(s *segment) error {
	path := filepath.Join(l.dir, segmentName(s.first))
	if err := l.fs.Rename(s.path, path); err != nil {
		return err
	}
	s.path = path
	return nil
}

// syncFile syncs f, retrying EINTR (the call did not run) and nothing else.
// Every segment sync goes through it, so Fsyncs, FsyncTimeTotal,
// FsyncMaxDuration, FsyncDuration, the slow-sync warning and
// Observer.ObserveSync cover commit, background, roll and preparation syncs.
func (l *Log) syncFile(f vfs.File) error {
	start := time.Now()
	l.stats.fsyncsPending.Add(1)
	defer l.stats.fsyncsPending.Add(-1)
	for {
		err := f.Sync()
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		d := time.Since(start)
		l.stats.fsyncTime.Add(int64(d))
		raiseMax(&l.stats.fsyncMax, int64(d))
		if err == nil {
			l.stats.fsyncs.Add(1)
			l.stats.fsyncHist.record(d)
		}
		if t := l.opts.SlowSyncThreshold; t >= 0 && d > t {
			l.stats.slowSyncs.Add(1)
			l.opts.Logger.Warn("wal: slow sync", "dir", l.dir, "duration", d, "threshold", t, "err", err)
		}
		if o := l.opts.Observer; o != nil {
			o.ObserveSync(SyncEvent{Duration: d, Err: err})
		}
		return err
	}
}

// syncSegment syncs f unless the sync method writes through (O_DSYNC): then
// every write to f was durable when it returned and there is nothing to
// sync, and, as InnoDB and PostgreSQL report it, no fsync is counted.
func (l *Log) syncSegment(f vfs.File) error {
	if l.method.WriteThrough() {
		return nil
	}
	return l.syncFile(f)
}

// writeFile opens path with method m (creating it when create is set; the
// file must not exist then), lets write put its bytes, makes them durable
// (a sync, unless m writes through) and closes the file: the one way the
// log patches a file outside the commit path (link and end frames, zeroed
// tails, headers, small record files, quarantined bytes). It stops at the
// first step that fails, closes the file anyway, and returns that step's
// error.
func (l *Log) writeFile(path string, m vfs.SyncMethod, create bool, write func(vfs.File) error) error {
	return writeFileSynced(l.fs, path, m, create, l.syncFile, write)
}

// writeFileSynced is writeFile on fsys, with sync as the way the file is
// synced: a Log's syncFile counts and times its fsyncs; Repair, which runs
// without a Log, passes vfs.File.Sync.
func writeFileSynced(fsys vfs.FS, path string, m vfs.SyncMethod, create bool, sync, write func(vfs.File) error) error {
	open := fsys.OpenReadWrite
	if create {
		open = fsys.Create
	}
	f, err := open(path, m)
	if err != nil {
		return err
	}
	if err = write(f); err == nil && !m.WriteThrough() {
		err = sync(f)
	}
	if err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// syncDir makes the log directory's entries durable.
func (l *Log) syncDir() error { return l.syncDirAt(l.dir) }

// syncDirAt makes dir's entries durable, retrying EINTR, and counts the
// directory sync in Stats.DirSyncs.
func (l *Log) syncDirAt(dir string) error {
	for {
		err := l.fs.SyncDir(dir)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err == nil {
			l.stats.dirSyncs.Add(1)
		}
		return err
	}
}

// publishSegmentsLocked copies the installed segments' count, total size and
// first LSN into the gauges Stats reads without a lock. l.segs is held.
func (l *Log) publishSegmentsLocked() {
	var bytes int64
	for _, n := range l.segs.sizes {
		bytes += n
	}
	l.stats.segments.Store(int64(len(l.segs.firsts)))
	l.stats.segmentBytes.Store(bytes)
	if len(l.segs.firsts) > 0 {
		l.stats.firstLSN.Store(uint64(l.segs.firsts[0]))
	}
}

const recyclePrefix = "recycle-"

// writeZeros writes zeros over f's bytes [off, stop), a MiB at a time.
func writeZeros(f vfs.File, off, stop int64) error {
	zeros := make([]byte, min(1<<20, max(stop-off, 0)))
	for off < stop {
		clear(zeros) // the FS may scramble written buffers
		n := min(int64(len(zeros)), stop-off)
		if _, err := f.WriteAt(zeros[:n], off); err != nil {
			return err
		}
		off += n
	}
	return nil
}

// headerFirst reads the segment header at the start of f and returns the
// first LSN it names, if it is a durawal header whose checksum holds (of
// any format version this build reads).
func headerFirst(f vfs.File) (LSN, bool) {
	h, ok := readHeader(f)
	return LSN(h.First), ok
}

// readHeader reads and decodes the segment header at the start of f.
func readHeader(f vfs.File) (segHeader, bool) {
	var hdr [segmentHeaderSize]byte
	n, _ := f.ReadAt(hdr[:], 0)
	h, why, _ := decodeSegmentHeader(hdr[:max(n, 0)])
	return h, why == ""
}

// newUseID returns a random non-zero use ID for a segment file's new use.
func newUseID() uint64 {
	for {
		if u := rand.Uint64(); u != 0 {
			return u
		}
	}
}
