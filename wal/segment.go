package wal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/durawal/durawal/policy"
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

// prepareSegment returns a temporary segment file of SegmentSize bytes in
// dir that reads as zeros, or a recycled one: appends into it later need no
// block allocation and no size update. A new file is made in one of two
// ways:
//
//   - allocate (fallocate, vfs.Allocate): blocks reserved, no data written.
//     Fast (under 2 ms for 64 MiB against 60-80 ms of zeros) and no write
//     amplification, but its extents are marked unwritten, and a sync after
//     a write into them commits that marking too: each fdatasync of a
//     16 KiB group cost about twice one into zeros (ext4 and XFS; walbench
//     -exp prepare). Where commits sync, the frames written into such a
//     segment are preceded by zeros a MiB at a time (zeroAhead), so that
//     one sync per MiB converts its blocks.
//   - zero-fill (PostgreSQL XLogFileInit, InnoDB's redo files): zeros
//     written and synced, so that a later fdatasync flushes data only.
//
// allocate asks for the first; sync asks for the file to be synced before
// prepareSegment returns (a caller that syncs it next, installSegment, saves
// one sync by passing false). prepareSegment falls back to zero-fill where
// the file or its filesystem cannot allocate, and under a write-through
// method (O_DSYNC), whose writes are each durable but whose allocation
// would not be without an fsync. The file is opened with the log's sync
// method; under O_DIRECT the zeros are written from an aligned buffer in
// aligned chunks (SegmentSize is a multiple of the alignment), under O_DSYNC
// each write is durable and no sync follows. A failure removes the
// temporary file; ENOSPC is reported as an error matching syscall.ENOSPC.
func (l *Log) prepareSegment(allocate, sync bool) (*segment, error) {
	if s := l.reuseSegment(); s != nil {
		return s, nil
	}
	path := filepath.Join(l.dir, fmt.Sprintf("prepare-%d%s", l.tmpSeq.Add(1), tmpSuffix))
	f, err := l.openFile(path, l.fs.Create)
	if err != nil {
		if f != nil {
			f.Close()
			l.fs.Remove(path)
		}
		return nil, err
	}
	fail := func(err error) (*segment, error) {
		f.Close()
		l.fs.Remove(path)
		return nil, err
	}
	start := time.Now()
	done := func(zeroed bool) (*segment, error) {
		if sync {
			if err := l.syncSegment(f); err != nil {
				return fail(err)
			}
		}
		// Counted only for a segment prepared, not for one discarded.
		if zeroed {
			l.stats.seg.prepareBytes.Add(uint64(l.opts.SegmentSize))
		} else {
			l.stats.seg.allocated.Add(1)
		}
		l.stats.seg.prepared.Add(1)
		l.stats.seg.prepareTime.Add(int64(time.Since(start)))
		s := &segment{version: segmentVersion, use: newUseID(), size: l.opts.SegmentSize, limit: l.opts.SegmentSize, handed: segmentHeaderSize, path: path, f: f}
		if !zeroed {
			s.zeroTo = segmentHeaderSize
		}
		return s, nil
	}
	if allocate && !l.method.WriteThrough() {
		err := vfs.Allocate(f, l.opts.SegmentSize)
		if err == nil {
			return done(false)
		}
		if !errors.Is(err, errors.ErrUnsupported) {
			return fail(err)
		}
	}
	// 64 KiB zero-fill writes: a multiple of every accepted alignment, and
	// small enough that the page cache keeps small folios for the file. After
	// a zero-fill in 1 MiB writes, a 104-byte pwrite into the segment cost
	// 2.1× as much (7.0–7.7 µs against 2.8–3.7 µs, medians of 5 interleaved
	// rounds on the loaded 2-core dev VM, ext4, Linux 6.x); 4 KiB writes made
	// the zero-fill itself 3.6× slower.
	const chunk = 64 << 10
	zeros := alignedBuf(int(min(chunk, l.opts.SegmentSize)), l.dio.align)
	// Paced writeback (buffered methods): every step of WritebackAfter
	// bytes is handed to the device as it is written, and the step before it
	// waited for, so at most two steps of zeros are ever queued ahead of the
	// log's own writes and syncs, instead of the whole segment at the final
	// sync. An error of a wait consumes the file's writeback error (as a
	// sync's would): the preparation fails, and the file is discarded.
	// Only where commits sync (SyncEveryCommit, SyncEveryN) is there a sync
	// to protect; elsewhere the preparation runs at full speed, as a log
	// writing hundreds of MiB/s needs its next segment soon.
	step := l.opts.WritebackAfter
	if k := l.pol.Kind(); step <= 0 || l.method.Direct() || l.method.WriteThrough() ||
		(k != policy.KindSyncEveryCommit && k != policy.KindSyncEveryN) {
		step = 0
	}
	var handed int64 // zeros before this offset were handed to the device
	for off := int64(0); off < l.opts.SegmentSize; off += int64(len(zeros)) {
		clear(zeros) // the FS may scramble written buffers
		n := min(int64(len(zeros)), l.opts.SegmentSize-off)
		w, err := f.WriteAt(zeros[:n], off)
		if err == nil && int64(w) < n {
			err = syscall.ENOSPC // no progress and no errno: PostgreSQL reports ENOSPC
		}
		if err == nil && step > 0 && off+n-handed >= step {
			if handed > 0 {
				err = vfs.Writeback(f, max(0, handed-step), min(step, handed), true)
			}
			if err == nil {
				err = vfs.Writeback(f, handed, off+n-handed, false)
			}
			handed = off + n
		}
		if err != nil {
			return fail(err)
		}
		// Yield the P after every chunk. Each write is a short syscall
		// (about 10 µs) that returns before sysmon can hand the P to
		// another thread, so without this the preparer keeps its P for a
		// whole 10 ms time slice, and commits woken onto that P's run queue
		// wait behind it while the other P is held by the leader's
		// fdatasync: with GOMAXPROCS=2 and 16 SyncEveryCommit committers a
		// runtime trace showed followers runnable for 12–14 ms behind a
		// zero-fill, 3–4 such stalls per 768 MiB. Nothing waits for the
		// preparer but a roll, and a Gosched costs well under 1% of a chunk.
		runtime.Gosched()
	}
	return done(true)
}

// allocatesSpares reports whether the next segment is to be allocated
// rather than zero-filled (prepareSegment): only where commits return
// before their record is written (BufferedInterval, AsyncCommit). Where a
// commit waits for its write() or its sync, the unwritten extents cost it:
// the sync that converts them (on ext4, in the journal) holds up the
// commits' writes and syncs meanwhile. At innodb=2 (SyncInterval 1 s, one
// committer, 768 MiB of 1 KiB records, checkpointed) allocated spares gave
// a max commit of 8.7-15.6 ms with 1 over 10 ms in 3 of 4 runs, zero-filled
// ones 2.7-4.2 ms and none, and 8% more throughput; at innodb=0
// (BufferedInterval) allocated ones gave 1.01-1.14M appends/s against
// 0.86-0.95M and half the appends over 10 ms (4 interleaved rounds each on
// the 2-core dev VM). A new log's first segment is allocated under every
// policy (where prepareSegment can allocate at all), so that Open does not
// write a segment of zeros first; where commits sync, zeros written ahead
// of its frames (zeroAhead) spare its commits most of the conversions.
// Spares stay zero-filled there: with zeros ahead an allocated segment
// still took 0.83-0.91× a zero-filled one's fdatasyncs per second (16 KiB
// groups, ext4 and XFS), and the zero-fill runs off the commit path, paced;
// unless the writes are large (largeWrites), whose syncs convert their own
// blocks, a conversion per 64 KiB or more, where zeros would halve the
// bandwidth a log of large records gets from the device.
func (l *Log) allocatesSpares() bool {
	k := l.pol.Kind()
	return k == policy.KindBufferedInterval || k == policy.KindAsyncCommit || l.largeWrites()
}

// installSegment gives a prepared segment its first LSN, s.first: it writes
// the header, syncs it, renames the file to its segment name and syncs the
// directory. After it returns nil the segment survives a power loss. It
// installs a new log's first segment, and every new segment under a
// write-through method; other rolls write the header and rename without a
// sync, and leave the syncs to the sealing (rollTo).
//
// The caller sets s.first (under l.mu, on a roll): appenders read it under
// l.mu while the leader installs s without it, so it is only read here.
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
		blk := alignedBuf(l.dio.align, l.dio.align)
		copy(blk, hdr)
		if _, err := s.f.WriteAt(blk, 0); err != nil {
			return err
		}
		l.dio.setTail(0, hdr)
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
		for m := l.stats.fsyncMax.Load(); int64(d) > m && !l.stats.fsyncMax.CompareAndSwap(m, int64(d)); {
			m = l.stats.fsyncMax.Load()
		}
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
// first LSN into the gauges Stats reads without a lock. l.segsMu is held.
func (l *Log) publishSegmentsLocked() {
	var bytes int64
	for _, n := range l.segSizes {
		bytes += n
	}
	l.stats.segments.Store(int64(len(l.segFirsts)))
	l.stats.segmentBytes.Store(bytes)
	if len(l.segFirsts) > 0 {
		l.stats.firstLSN.Store(uint64(l.segFirsts[0]))
	}
}

// reuseSegment returns a segment prepared from a file RemoveBefore kept
// for reuse (Options.RecycleSegments), or nil if none can be reused. A
// recycled file is neither zero-filled nor synced again: its blocks are
// allocated and written, so a later fdatasync needs no metadata, and what
// it holds are frames of LSNs below the log's start, which no frame
// checksum seeded with a current LSN accepts. It gets the header of
// version recycledVersion at install, so recovery takes those bytes for
// stale rather than torn. A file that cannot be opened is removed and the
// next one tried.
func (l *Log) reuseSegment() *segment {
	for {
		l.poolMu.Lock()
		if len(l.pool) == 0 {
			l.poolMu.Unlock()
			return nil
		}
		path := l.pool[0]
		l.pool = l.pool[1:]
		l.poolMu.Unlock()
		start := time.Now()
		f, err := l.openFile(path, l.fs.OpenReadWrite)
		if err == nil {
			var size int64
			if size, err = f.Size(); err == nil && size != l.opts.SegmentSize {
				err = fmt.Errorf("recycled file %s is %d bytes, not %d", path, size, l.opts.SegmentSize)
			}
		}
		if err != nil {
			if f != nil {
				f.Close()
			}
			l.opts.Logger.Warn("wal: cannot reuse a recycled segment file; removing it", "file", path, "err", err)
			l.fs.Remove(path)
			continue
		}
		l.stats.seg.prepared.Add(1)
		l.stats.seg.recycled.Add(1)
		l.stats.seg.prepareTime.Add(int64(time.Since(start)))
		return &segment{version: recycledVersion, use: newUseID(), size: l.opts.SegmentSize, limit: l.opts.SegmentSize,
			handed: segmentHeaderSize, path: path, f: f}
	}
}

// recycleName returns the name under which RemoveBefore keeps a segment
// file for reuse: "recycle-<n>.wal.tmp", a temporary file's, so that builds
// that do not reuse it remove it at Open; this one adopts it (adoptPooled).
func (l *Log) recycleName() string {
	return filepath.Join(l.dir, fmt.Sprintf("%s%d%s", recyclePrefix, l.tmpSeq.Add(1), tmpSuffix))
}

const recyclePrefix = "recycle-"

// parseRecycleName returns the n of a name recycleName made.
func parseRecycleName(name string) (int64, bool) {
	digits, ok := strings.CutPrefix(name, recyclePrefix)
	if !ok {
		return 0, false
	}
	digits, ok = strings.CutSuffix(digits, tmpSuffix)
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	return n, err == nil && n > 0
}

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
