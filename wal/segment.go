package wal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/durawal/durawal/wal/vfs"
)

// Segment header layout (little endian), normative, documented in doc.go:
//
//	[0:8)   magic      "durawal\x00"
//	[8:12)  version    1
//	[12:16) size/8     the file's size in bytes when created, divided by 8
//	[16:24) first LSN  the LSN of the segment's first frame (also its name)
//	[24:32) checksum   xxhash64 of bytes [0:24)
const (
	segmentHeaderSize = 32
	segmentVersion    = 1
	segmentSuffix     = ".wal"
	tmpSuffix         = ".wal.tmp"
	lockName          = "LOCK"
)

var segmentMagic = [8]byte{'d', 'u', 'r', 'a', 'w', 'a', 'l', 0}

// segmentName returns the base name of the segment whose first frame is at
// first: 20 decimal digits, so names sort in LSN order.
func segmentName(first LSN) string { return fmt.Sprintf("%020d%s", uint64(first), segmentSuffix) }

// parseSegmentName returns the first LSN a segment name encodes.
func parseSegmentName(name string) (LSN, bool) {
	digits, ok := strings.CutSuffix(name, segmentSuffix)
	if !ok || len(digits) != 20 {
		return 0, false
	}
	n, err := strconv.ParseUint(digits, 10, 64)
	if err != nil {
		return 0, false
	}
	return LSN(n), true
}

func encodeSegmentHeader(first LSN, size int64) []byte {
	b := make([]byte, segmentHeaderSize)
	copy(b, segmentMagic[:])
	binary.LittleEndian.PutUint32(b[8:12], segmentVersion)
	binary.LittleEndian.PutUint32(b[12:16], uint32(size/frameAlign))
	binary.LittleEndian.PutUint64(b[16:24], uint64(first))
	binary.LittleEndian.PutUint64(b[24:32], xxhash.Sum64(b[:24]))
	return b
}

// checkSegmentHeader validates the segment b (the whole file) and returns
// why its header is bad, or "" if it is good for a segment starting at
// first. Segments are created at full size and never resized, so a file
// whose size differs from the one its header records was truncated or
// extended after the fact: damage, not a crash.
func checkSegmentHeader(b []byte, first LSN) string {
	switch {
	case len(b) < segmentHeaderSize:
		return "segment shorter than its header"
	case [8]byte(b[:8]) != segmentMagic:
		return "bad segment magic (not a durawal segment)"
	case binary.LittleEndian.Uint64(b[24:32]) != xxhash.Sum64(b[:24]):
		return "segment header checksum mismatch"
	case binary.LittleEndian.Uint32(b[8:12]) != segmentVersion:
		return fmt.Sprintf("unsupported segment version %d", binary.LittleEndian.Uint32(b[8:12]))
	case LSN(binary.LittleEndian.Uint64(b[16:24])) != first:
		return fmt.Sprintf("header first LSN %d does not match the name", binary.LittleEndian.Uint64(b[16:24]))
	case binary.LittleEndian.Uint32(b[12:16]) != 0 && // 0: written before sizes were recorded
		int64(binary.LittleEndian.Uint32(b[12:16]))*frameAlign != int64(len(b)):
		return fmt.Sprintf("segment file is %d bytes but was created with %d: truncated or extended",
			len(b), int64(binary.LittleEndian.Uint32(b[12:16]))*frameAlign)
	}
	return ""
}

// segment is one file of the log.
type segment struct {
	first LSN
	size  int64 // file size in bytes
	limit int64 // end of the bytes new frames may use: size, aligned down under O_DIRECT
	path  string
	f     vfs.File // write handle while the segment is active or prepared
}

// capacity returns how many frame bytes fit the segment.
func (s *segment) capacity() int64 { return s.size - segmentHeaderSize }

// room returns how many frame bytes new appends may fill: the capacity,
// less an unaligned end that direct I/O cannot write (a segment created
// with another SegmentSize and reopened with O_DIRECT).
func (s *segment) room() int64 {
	if s.limit > 0 {
		return s.limit - segmentHeaderSize
	}
	return s.capacity()
}

// offset returns the file offset of lsn within s.
func (s *segment) offset(lsn LSN) int64 { return segmentHeaderSize + int64(lsn-s.first) }

// prepareSegment creates a zero-filled, synced temporary segment file of
// size bytes in dir (PostgreSQL XLogFileInit): appends into it later need no
// size or extent updates, so fdatasync flushes data only. The file is opened
// with the log's sync method; under O_DIRECT the zeros are written from an
// aligned buffer in aligned chunks (SegmentSize is a multiple of the
// alignment), under O_DSYNC each write is durable and no sync follows. A
// failure removes the temporary file; ENOSPC is reported as an error
// matching syscall.ENOSPC.
func (l *Log) prepareSegment() (*segment, error) {
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
	const chunk = 1 << 20 // a multiple of every accepted alignment
	zeros := alignedBuf(int(min(chunk, l.opts.SegmentSize)), l.dio.align)
	for off := int64(0); off < l.opts.SegmentSize; off += int64(len(zeros)) {
		clear(zeros) // the FS may scramble written buffers
		n := min(int64(len(zeros)), l.opts.SegmentSize-off)
		w, err := f.WriteAt(zeros[:n], off)
		if err == nil && int64(w) < n {
			err = syscall.ENOSPC // no progress and no errno: PostgreSQL reports ENOSPC
		}
		if err != nil {
			return fail(err)
		}
	}
	if err := l.syncSegment(f); err != nil {
		return fail(err)
	}
	return &segment{size: l.opts.SegmentSize, limit: l.opts.SegmentSize, path: path, f: f}, nil
}

// installSegment gives a prepared segment its first LSN, s.first: it writes the header,
// syncs it, renames the file to its segment name and syncs the directory.
// After it returns nil the segment survives a power loss. Under O_DIRECT the
// header goes out as a whole block (header, then the zeros already there),
// and the block becomes the partial block the first frames rewrite.
//
// The caller sets s.first (under l.mu, on a roll): appenders read it under
// l.mu while the leader installs s without it, so it is only read here.
func (l *Log) installSegment(s *segment) error {
	hdr := encodeSegmentHeader(s.first, s.size)
	if l.method.Direct() {
		blk := alignedBuf(l.dio.align, l.dio.align)
		copy(blk, hdr)
		if _, err := s.f.WriteAt(blk, 0); err != nil {
			return err
		}
		l.dio.setTail(0, hdr)
	} else if _, err := s.f.WriteAt(hdr, 0); err != nil {
		return err
	}
	if err := l.syncSegment(s.f); err != nil {
		return err
	}
	path := filepath.Join(l.dir, segmentName(s.first))
	if err := l.fs.Rename(s.path, path); err != nil {
		return err
	}
	s.path = path
	return l.syncDir()
}

// syncFile syncs f, retrying EINTR (the call did not run) and nothing else.
// Every segment sync goes through it, so Fsyncs, FsyncTimeTotal and
// FsyncMaxDuration cover commit, background, roll and preparation syncs.
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
