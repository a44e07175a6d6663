package format

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/cespare/xxhash/v2"
)

// Names of the files of a log directory besides its segments.
const (
	FirstLSNName  = "first-lsn"    // where the log starts (an LSN record)
	TruncateName  = "truncate-lsn" // a TruncateFrom not yet finished (an LSN record)
	EpochName     = "epoch"        // the current epoch (an epoch record)
	LockName      = "LOCK"
	SegmentExt    = ".wal"
	TempExt       = ".wal.tmp" // temporary files: preparations, kept files, record updates
	QuarantineExt = ".torn"
)

// LSNRecordSize is the size of first-lsn and truncate-lsn: the LSN, then
// its xxhash64, little-endian.
const LSNRecordSize = 16

// EncodeLSNRecord returns the record of lsn.
func EncodeLSNRecord(lsn uint64) []byte {
	b := make([]byte, LSNRecordSize)
	binary.LittleEndian.PutUint64(b[0:8], lsn)
	binary.LittleEndian.PutUint64(b[8:16], xxhash.Sum64(b[0:8]))
	return b
}

// DecodeLSNRecord decodes an LSN record; ok is false if b is short or its
// checksum fails.
func DecodeLSNRecord(b []byte) (lsn uint64, ok bool) {
	if len(b) < LSNRecordSize || xxhash.Sum64(b[0:8]) != binary.LittleEndian.Uint64(b[8:16]) {
		return 0, false
	}
	return binary.LittleEndian.Uint64(b[0:8]), true
}

// EpochRecordSize is the size of the epoch file: [0:8) the epoch, [8:16)
// its start LSN, [16:24) the xxhash64 of bytes [0:16), little-endian.
const EpochRecordSize = 24

// Epoch is the recorded epoch and the LSN its frames start at. A log
// without the record (written by an older build, or whose creation a crash
// cut short before it was written) has none (Known false), and every frame
// is admitted.
type Epoch struct {
	N     uint64
	Start uint64
	Known bool
}

// Word returns the epoch as frames record it (modulo 2^30).
func (e Epoch) Word() uint32 { return uint32(e.N % (1 << EpochBits)) }

// Admits reports whether a valid frame at lsn, of a segment of format ff,
// whose kind word is word, belongs to the log under the epoch rule: at or
// after the start it must carry the current epoch, before it another.
// Frames of segments older than format 6 carry no epoch: they belong only
// before the start. An end or link frame exactly at the start is admitted
// whatever its epoch: it is where the log ended when the epoch began.
func (e Epoch) Admits(ff FrameFormat, lsn uint64, word uint32) bool {
	ep := word >> 2
	switch {
	case !e.Known:
		return true
	case lsn == e.Start && word&KindMask != 0:
		return true
	case ff.Version < 6:
		return lsn < e.Start
	case lsn >= e.Start:
		return ep == e.Word()
	default:
		return ep != e.Word()
	}
}

// Newer reports whether the epoch recorded in the kind word word is later
// than e's: ahead of it by less than half the 2^30 range.
func (e Epoch) Newer(word uint32) bool {
	d := (word>>2 - e.Word()) & (1<<EpochBits - 1)
	return e.Known && d != 0 && d < 1<<(EpochBits-1)
}

// Contradiction says why a valid frame at lsn, of a segment of format ff,
// with kind word word, cannot exist beside the record e, or returns "" if
// it can. The record is made durable before any frame of its epoch, and
// frames of an epoch are written only from its start on, so a frame of a
// later epoch, or a record frame of e's epoch before e's start, means the
// record is not the log's: restored from an older copy, damaged or edited.
// off is the offset in the record file of the field it contradicts.
func (e Epoch) Contradiction(ff FrameFormat, lsn uint64, word uint32) (why string, off int64) {
	switch {
	case !e.Known || ff.Version < 6:
		return "", 0
	case e.Newer(word):
		return fmt.Sprintf("was written in epoch %d (modulo 2^30), after epoch %d that the record names: the record is older than the log (restored from a copy?)", word>>2, e.N), 0
	case lsn < e.Start && word == e.Word()<<2:
		return fmt.Sprintf("was written in epoch %d (modulo 2^30), which the record says starts later, at LSN %d", word>>2, e.Start), 8
	}
	return "", 0
}

// EncodeEpoch returns the epoch record of e.
func EncodeEpoch(e Epoch) []byte {
	b := make([]byte, EpochRecordSize)
	binary.LittleEndian.PutUint64(b[0:8], e.N)
	binary.LittleEndian.PutUint64(b[8:16], e.Start)
	binary.LittleEndian.PutUint64(b[16:24], xxhash.Sum64(b[0:16]))
	return b
}

// DecodeEpoch decodes an epoch record; ok is false if b is short or its
// checksum fails.
func DecodeEpoch(b []byte) (e Epoch, ok bool) {
	if len(b) < EpochRecordSize || xxhash.Sum64(b[0:16]) != binary.LittleEndian.Uint64(b[16:24]) {
		return Epoch{}, false
	}
	return Epoch{N: binary.LittleEndian.Uint64(b[0:8]), Start: binary.LittleEndian.Uint64(b[8:16]), Known: true}, true
}

// SegmentName returns the base name of the segment whose first frame is at
// first: 20 decimal digits, so names sort in LSN order.
func SegmentName(first uint64) string { return fmt.Sprintf("%020d%s", first, SegmentExt) }

// ParseSegmentName returns the first LSN a segment name encodes.
func ParseSegmentName(name string) (uint64, bool) {
	digits, ok := strings.CutSuffix(name, SegmentExt)
	if !ok || len(digits) != 20 {
		return 0, false
	}
	n, err := strconv.ParseUint(digits, 10, 64)
	return n, err == nil
}

// QuarantineName returns the name of the n-th quarantine file (n = 0: the
// first) for size torn bytes from LSN from: "<from>-<end>[.n].torn".
func QuarantineName(from uint64, size int64, n int) string {
	if n == 0 {
		return fmt.Sprintf("%020d-%020d%s", from, from+uint64(size), QuarantineExt)
	}
	return fmt.Sprintf("%020d-%020d.%d%s", from, from+uint64(size), n, QuarantineExt)
}

// ParseQuarantineName recognises a name QuarantineName made and returns
// the LSN its bytes started at.
func ParseQuarantineName(name string) (from uint64, ok bool) {
	base, ok := strings.CutSuffix(name, QuarantineExt)
	if !ok {
		return 0, false
	}
	if i := strings.IndexByte(base, '.'); i >= 0 {
		if n, err := strconv.Atoi(base[i+1:]); err != nil || n <= 0 {
			return 0, false
		}
		base = base[:i]
	}
	a, b, ok := strings.Cut(base, "-")
	if !ok || len(a) != 20 || len(b) != 20 {
		return 0, false
	}
	from, err1 := strconv.ParseUint(a, 10, 64)
	_, err2 := strconv.ParseUint(b, 10, 64)
	return from, err1 == nil && err2 == nil
}

// RepairPrefix begins the names of the files a repair leaves in a log
// directory: its report ("repair-<stamp>[.n].txt") and the copies of the
// damaged record files it replaced ("repair-<stamp>[.n].first-lsn", and
// likewise for truncate-lsn and epoch). <stamp> is the repair's start, UTC,
// as "20060102T150405Z".
const RepairPrefix = "repair-"

// RepairStampLayout is the time layout of a repair file's <stamp>.
const RepairStampLayout = "20060102T150405Z"

// RepairName returns the name of a repair file: stamp (RepairStampLayout),
// n (0: none; otherwise ".n" tells apart repairs of the same second) and
// what: "txt" for the report, or the record's name for its damaged copy.
func RepairName(stamp string, n int, what string) string {
	if n == 0 {
		return RepairPrefix + stamp + "." + what
	}
	return fmt.Sprintf("%s%s.%d.%s", RepairPrefix, stamp, n, what)
}

// ParseRepairName recognises a name RepairName made and returns its what.
func ParseRepairName(name string) (what string, ok bool) {
	rest, ok := strings.CutPrefix(name, RepairPrefix)
	if !ok || len(rest) < len(RepairStampLayout)+2 || rest[len(RepairStampLayout)] != '.' {
		return "", false
	}
	if _, err := time.Parse(RepairStampLayout, rest[:len(RepairStampLayout)]); err != nil {
		return "", false
	}
	rest = rest[len(RepairStampLayout)+1:]
	if i := strings.IndexByte(rest, '.'); i >= 0 {
		if n, err := strconv.Atoi(rest[:i]); err == nil && n > 0 {
			rest = rest[i+1:]
		} else {
			return "", false
		}
	}
	switch rest {
	case "txt", FirstLSNName, TruncateName, EpochName:
		return rest, true
	}
	return "", false
}
