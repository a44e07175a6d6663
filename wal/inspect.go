package wal

import (
	"encoding/binary"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"

	"github.com/durawal/durawal/wal/internal/format"
	"github.com/durawal/durawal/wal/vfs"
)

// DirInfo describes the files of a log directory by name, as InspectDir
// found them. It says what is there, not whether the log is sound: that is
// the verdict of OpenReadOnly.
type DirInfo struct {
	// Segments holds the first LSNs of the files named like segments
	// ("%020d.wal"), ascending. A segment below the recorded start (left by
	// an interrupted RemoveBefore) or above a pending cut is listed too.
	Segments []LSN
	// First is the "first-lsn" record: where the log starts.
	First LSNRecord
	// Truncate is the "truncate-lsn" record: a TruncateFrom that has not
	// finished (Present is false when none is pending).
	Truncate LSNRecord
	// Epoch is the "epoch" record: the log's current epoch and the LSN
	// its frames start at (see RecoveryInfo.Epoch).
	Epoch EpochRecord
	// Quarantined lists the torn tails an earlier Open cut and kept
	// ("<from>-<end>.torn"), ascending by FromLSN.
	Quarantined []QuarantineFile
	// Repairs lists the files Repair left ("repair-<stamp>.txt" reports,
	// "repair-<stamp>.<record>" copies of the damaged record files it
	// replaced), ascending by name: by time. Open ignores them.
	Repairs []string
	// Temp lists the leftover temporary files ("*.wal.tmp") of interrupted
	// segment preparations and record updates, which Open removes.
	Temp []string
	// Lock reports that the directory's lock file exists; it says nothing
	// about whether a process holds the lock (a Log leaves the file behind).
	Lock bool
	// Foreign lists the files the log did not create: Open fails with
	// ErrForeignFile while one is there.
	Foreign []string

	hasFirst bool // the first-lsn file exists (recover reads it later)
}

// LSNRecord is the content of one of the 16-byte files "first-lsn" and
// "truncate-lsn" (an LSN and its xxhash64).
type LSNRecord struct {
	// Present reports that the file exists.
	Present bool
	// LSN is the LSN the file records, when Present and Err is nil.
	LSN LSN
	// Err is why the record could not be read: a *CorruptionError for a
	// damaged record, or the filesystem's error.
	Err error
}

// EpochRecord is the content of the 24-byte file "epoch": the log's
// current epoch, the LSN from which its frames start, and their xxhash64.
// Every writable Open and every TruncateFrom writes a new one before any
// frame of the new epoch.
type EpochRecord struct {
	// Present reports that the file exists (a log written before epochs
	// were recorded has none).
	Present bool
	// Epoch is the epoch number, when Present and Err is nil.
	Epoch uint64
	// Start is the LSN at which the epoch began: frames at or after it
	// must carry this epoch, frames before it another.
	Start LSN
	// Err is why the record could not be read: a *CorruptionError for a
	// damaged record, or the filesystem's error.
	Err error
}

// InspectDir lists the log directory dir on fsys (vfs.OS() if nil) and
// classifies its files, reading the first-lsn and truncate-lsn records and
// the sizes of the quarantined tails. It changes nothing, takes no lock,
// and may run beside a Log that has the directory open (it then sees one
// moment of a changing directory). Safe for concurrent use.
//
// Errors: the filesystem's error for dir (one matching fs.ErrNotExist if
// there is no such directory) or for a quarantined file it cannot size. A
// damaged record is reported in its LSNRecord.Err, not as an error.
func InspectDir(fsys vfs.FS, dir string) (DirInfo, error) {
	if fsys == nil {
		fsys = vfs.OS()
	}
	names, err := fsys.List(dir)
	if err != nil {
		return DirInfo{}, fmt.Errorf("wal: inspect: listing %s: %w", dir, foreignIfNotRegular(err))
	}
	d, err := classifyDir(fsys, dir, names, false)
	if err != nil {
		return DirInfo{}, err
	}
	for _, r := range []struct {
		rec  *LSNRecord
		name string
	}{{&d.First, firstLSNName}, {&d.Truncate, truncateName}} {
		lsn, ok, err := readLSNRecord(fsys, dir, r.name)
		*r.rec = LSNRecord{Present: ok || err != nil, LSN: lsn, Err: err}
	}
	e, err := readEpoch(fsys, dir)
	d.Epoch = EpochRecord{Present: e.Known || err != nil, Epoch: e.N, Start: LSN(e.Start), Err: err}
	return d, nil
}

// classifyDir sorts the names of dir's entries into a DirInfo, sizing the
// quarantined files. Open (strict) fails at the first foreign file, in the
// order of names, with an error matching ErrForeignFile; InspectDir lists
// them. The records' contents are not read.
func classifyDir(fsys vfs.FS, dir string, names []string, strict bool) (DirInfo, error) {
	var d DirInfo
	for _, name := range names {
		if first, ok := parseSegmentName(name); ok {
			d.Segments = append(d.Segments, first)
			continue
		}
		if q, ok := parseQuarantineName(name); ok {
			f, err := fsys.Open(filepath.Join(dir, name))
			if err != nil {
				return DirInfo{}, fmt.Errorf("wal: open: %w", err)
			}
			q.Bytes, err = f.Size()
			f.Close()
			if err != nil {
				return DirInfo{}, fmt.Errorf("wal: open: %s: %w", name, err)
			}
			q.EndLSN = q.FromLSN + LSN(q.Bytes)
			d.Quarantined = append(d.Quarantined, q)
			continue
		}
		switch {
		case name == lockName:
			d.Lock = true
		case name == firstLSNName:
			d.hasFirst = true
		case name == truncateName, name == epochName:
		case isRepairName(name):
			d.Repairs = append(d.Repairs, name)
		case strings.HasSuffix(name, tmpSuffix):
			d.Temp = append(d.Temp, name)
		case strict:
			return DirInfo{}, fmt.Errorf("%w: %s in %s (only segments %s, quarantined tails %s, %s, %s, %s, %s and repair files %s* belong there)",
				ErrForeignFile, name, dir, segmentName(0), quarantineName(0, 0, 0), firstLSNName, truncateName, epochName, lockName, format.RepairPrefix)
		default:
			d.Foreign = append(d.Foreign, name)
		}
	}
	slices.Sort(d.Segments)
	slices.Sort(d.Repairs)
	return d, nil
}

// FrameKind says what a valid frame is.
type FrameKind uint8

const (
	// FrameInvalid marks a position that holds no valid frame.
	FrameInvalid FrameKind = iota
	// FrameRecord is a record's frame.
	FrameRecord
	// FrameEnd is the end frame a clean Close writes (flags 1).
	FrameEnd
	// FrameLink is the link frame a roll writes into the finished segment
	// (flags 2); its LSN is the successor segment's first LSN.
	FrameLink
)

// String returns "invalid", "record", "end" or "link".
func (k FrameKind) String() string {
	switch k {
	case FrameRecord:
		return "record"
	case FrameEnd:
		return "end"
	case FrameLink:
		return "link"
	}
	return "invalid"
}

// FrameInfo describes one position of a segment that InspectSegment
// reports: a valid frame, or the first position where the chain of valid
// frames breaks while non-zero bytes follow it.
type FrameInfo struct {
	// LSN is the position's LSN: the segment's first LSN plus its offset
	// past the 32-byte segment header.
	LSN LSN
	// Offset is the position's byte offset in the segment file.
	Offset int64
	// Size is the bytes the frame takes in the file (24-byte header,
	// payload, zero padding to 8 bytes); 0 for an invalid position. End
	// and link frames take 24 bytes in the file but no LSN space.
	Size int64
	// Length is the payload length the header holds, as read (also at an
	// invalid position, when its header is there).
	Length uint32
	// Kind is what the frame is; FrameInvalid at an invalid position.
	Kind FrameKind
	// Watermark is the synced LSN the frame records, as read.
	Watermark LSN
	// Problem says why the position holds no valid frame ("zeroed frame
	// header", "truncated frame", "checksum mismatch", ...); empty for a
	// valid frame.
	Problem string
	// Stray reports a valid frame found past the first invalid position,
	// by looking at every 8-byte boundary as recovery does: not part of the
	// chain of frames from the segment's start. Recovery fails with
	// ErrCorrupt if a stray frame's watermark is above the invalid
	// position's LSN in the last segment.
	Stray bool
	// Payload is the record's payload, aliasing InspectSegment's buffer:
	// valid only until the callback returns. Nil for other kinds.
	Payload []byte
}

// SegmentInfo describes one segment file as InspectSegment read it.
type SegmentInfo struct {
	// Name is the file's base name; FirstLSN the LSN its name encodes.
	Name     string
	FirstLSN LSN
	// Size is the file's size in bytes.
	Size int64
	// Version is the format version in the header; 0 if the file has no
	// header with the segment magic.
	Version uint32
	// CreatedSize is the file size in bytes the header records (0 in a
	// header written before sizes were recorded, or without a header).
	CreatedSize int64
	// Recycled reports that the format version is one a recycled file
	// carries (3, 5 or 7): non-zero bytes after its frames may be stale
	// bytes of the file's earlier use. In other versions they are not.
	Recycled bool
	// HeaderErr is why the header, or the file's size against it, is not
	// what Open accepts: a *CorruptionError, or an error matching
	// ErrUnsupportedVersion. Nil for a good header. The frames of a file
	// without the segment magic are not read.
	HeaderErr error
	// ChainEnd is the LSN where the chain of valid frames from FirstLSN
	// ends: the first position holding no valid frame (the next frame's LSN
	// in a segment that is good to that point), or the position after an
	// end or link frame.
	ChainEnd LSN
	// Records counts the record frames of the chain.
	Records int
	// Closing is FrameEnd or FrameLink when the chain ends with an end or
	// a link frame (at ChainEnd minus 24), FrameInvalid otherwise.
	Closing FrameKind
	// MaxWatermark is the largest watermark among the chain's frames.
	MaxWatermark LSN
	// TrailingBytes is the number of bytes from ChainEnd's offset to the
	// last non-zero byte of the file: 0 when only zeros follow the chain.
	// In the last segment they are what Open calls a torn tail (or damage).
	TrailingBytes int64
}

// InspectSegment reads the segment file at path on fsys (vfs.OS() if nil)
// and calls fn for every valid frame in file order, then, when non-zero
// bytes follow the chain of valid frames, for the position where it breaks
// (Kind FrameInvalid) and for every stray valid frame after it. It returns
// what it found in the file. It judges the file alone: whether the log
// needs the frames past a break is the recovery rule's question
// (OpenReadOnly answers it). It changes nothing and takes no lock; the
// whole file is read into memory (up to MaxSegmentSize bytes). A file
// written while it is read may be seen half written. Safe for concurrent
// use.
//
// Errors: one saying the base name is not a segment's ("%020d.wal"), the
// filesystem's error for the file, or the first non-nil error fn returns,
// which stops the walk. A damaged or foreign header is reported in
// SegmentInfo.HeaderErr, not as an error; so is a file too short for a
// header (Version 0, no frames). A file above MaxSegmentSize is an error.
func InspectSegment(fsys vfs.FS, path string, fn func(FrameInfo) error) (SegmentInfo, error) {
	if fsys == nil {
		fsys = vfs.OS()
	}
	name := filepath.Base(path)
	first, ok := parseSegmentName(name)
	if !ok {
		return SegmentInfo{}, fmt.Errorf("wal: inspect: %s is not a segment file name (%s: its first LSN in 20 digits)", path, segmentName(0))
	}
	info := SegmentInfo{Name: name, FirstLSN: first, ChainEnd: first}
	buf, size, err := readSegmentFile(fsys, path)
	if err != nil {
		return info, fmt.Errorf("wal: inspect: %w", err)
	}
	info.Size = size
	if size > int64(len(buf)) {
		// Longer than its header records: only the created bytes were
		// read (a file extended sparsely to gigabytes is not read whole).
		info.HeaderErr = &CorruptionError{Segment: name, Offset: int64(len(buf)),
			Reason: fmt.Sprintf("segment file is %d bytes but was created with %d: truncated or extended", size, len(buf))}
	} else {
		info.HeaderErr = checkSegment(scanBytes(buf, name, first))
	}
	if len(buf) < legacyHeaderSize || [8]byte(buf[:8]) != segmentMagic {
		return info, nil
	}
	info.Version = binary.LittleEndian.Uint32(buf[8:12])
	info.CreatedSize = int64(binary.LittleEndian.Uint32(buf[12:16])) * frameAlign
	info.Recycled = staleTail(info.Version)

	h, _, _ := decodeSegmentHeader(buf)
	img := segmentImage{buf: buf, s: segment{first: first, size: int64(len(buf)), version: info.Version, use: h.Use}}
	img.maxRec = int(int64(len(buf)) - img.s.hdr() - frameHeaderSize)
	lsn, err := img.walkChain(&info, fn)
	info.ChainEnd = lsn
	if err != nil {
		return info, err
	}
	xoff := img.s.offset(lsn)
	if last := lastNonZeroFrom(buf, xoff); last >= 0 {
		info.TrailingBytes = last + 1 - xoff
	}
	if info.TrailingBytes == 0 {
		return info, nil
	}
	if info.Closing == FrameInvalid {
		fi, _ := img.frame(lsn, false)
		if err := fn(fi); err != nil {
			return info, err
		}
	}
	return info, img.walkStrays(xoff, fn)
}

// segmentImage is a segment file read into memory for InspectSegment.
type segmentImage struct {
	buf    []byte
	s      segment
	maxRec int // the largest payload a frame of this file can hold
}

// frame describes the frame at lsn; ok reports whether it is valid.
func (img *segmentImage) frame(lsn LSN, stray bool) (fi FrameInfo, ok bool) {
	off := img.s.offset(lsn)
	fi = FrameInfo{LSN: lsn, Offset: off, Stray: stray}
	b := img.buf[off:]
	if len(b) >= frameHeaderSize {
		fi.Length = binary.LittleEndian.Uint32(b[8:12])
		fi.Watermark = LSN(binary.LittleEndian.Uint64(b[16:24]))
	}
	rec, _, size, st := decodeFrame(b, img.s.format(), lsn, img.maxRec)
	if st == frameValid && off+size > int64(len(img.buf)) {
		st = frameShort // its padding is cut off
	}
	if st != frameValid {
		fi.Problem = frameProblem(b, img.s.format(), lsn, img.maxRec, st)
		return fi, false
	}
	fi.Size, fi.Payload, fi.Kind = size, rec, FrameRecord
	if rec == nil {
		fi.Kind = FrameEnd
		if frameFlags(b) == flagLink {
			fi.Kind = FrameLink
		}
	}
	return fi, true
}

// walkChain calls fn for each valid frame from the segment's first LSN on,
// up to the first invalid one or through an end or link frame, counting
// them into info, and returns the LSN where the chain stops.
func (img *segmentImage) walkChain(info *SegmentInfo, fn func(FrameInfo) error) (LSN, error) {
	lsn := img.s.first
	for img.s.offset(lsn) < int64(len(img.buf)) {
		fi, ok := img.frame(lsn, false)
		if !ok {
			break
		}
		lsn += LSN(fi.Size)
		info.MaxWatermark = max(info.MaxWatermark, fi.Watermark)
		if fi.Kind == FrameRecord {
			info.Records++
		}
		if err := fn(fi); err != nil {
			return lsn, err
		}
		if fi.Kind != FrameRecord {
			info.Closing = fi.Kind
			break // nothing follows an end or link frame
		}
	}
	return lsn, nil
}

// walkStrays calls fn for every valid frame found at an 8-byte boundary
// after the chain, which ends at offset xoff, as recoverTail looks for a
// frame whose watermark proves the break damaged.
func (img *segmentImage) walkStrays(xoff int64, fn func(FrameInfo) error) error {
	for off := xoff + frameAlign; off+frameHeaderSize <= int64(len(img.buf)); off += frameAlign {
		fi, ok := img.frame(img.s.first+LSN(off-segmentHeaderSize), true)
		if !ok {
			continue
		}
		if err := fn(fi); err != nil {
			return err
		}
		off += fi.Size - frameAlign
	}
	return nil
}

// frameProblem says why the bytes b hold no valid frame at lsn (st, as
// decodeFrame classified them), for InspectSegment.
func frameProblem(b []byte, ff frameFormat, lsn LSN, maxRecord int, st frameStatus) string {
	if st != frameBad || len(b) < frameHeaderSize {
		return st.String()
	}
	n := binary.LittleEndian.Uint32(b[8:12])
	flags := binary.LittleEndian.Uint32(b[12:16])
	if ff.Version >= 6 {
		flags = frameFlags(b) // the other bits hold the epoch
	}
	wm := LSN(binary.LittleEndian.Uint64(b[16:24]))
	switch {
	case n == 0 && flags != flagEnd && flags != flagLink:
		return fmt.Sprintf("length 0 with flags %d (not an end or link frame)", flags)
	case n == 0 && wm != lsn:
		return fmt.Sprintf("end or link frame whose watermark %d is not its LSN", wm)
	case n != 0 && flags != 0:
		return fmt.Sprintf("record frame with flags %d", flags)
	case int64(n) > int64(maxRecord):
		return fmt.Sprintf("length %d beyond the %d bytes a frame of this segment can hold", n, maxRecord)
	}
	return "checksum mismatch"
}

// readSegmentFile reads the segment file at path on fsys and returns its
// bytes and its size. A file whose header records a created size smaller
// than the file is read only to that size (the header and size are checked
// before anything else is read); one above MaxSegmentSize with no such
// header is refused.
func readSegmentFile(fsys vfs.FS, path string) ([]byte, int64, error) {
	f, err := fsys.Open(path)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %w", path, err)
	}
	limit := size
	hdr := make([]byte, segmentHeaderSize)
	if n, _ := f.ReadAt(hdr, 0); n == len(hdr) {
		if h, why, _ := decodeSegmentHeader(hdr); why == "" && h.Created > 0 && h.Created < size {
			limit = h.Created
		}
	}
	if limit > MaxSegmentSize {
		return nil, 0, fmt.Errorf("%s is %d bytes, larger than any segment (%d bytes at most)", path, size, int64(MaxSegmentSize))
	}
	buf := make([]byte, limit)
	if n, err := f.ReadAt(buf, 0); int64(n) < limit {
		if err == nil {
			err = io.ErrUnexpectedEOF
		}
		return nil, 0, fmt.Errorf("reading %s: read %d of %d bytes: %w", path, n, limit, err)
	}
	return buf, size, nil
}
