// Package format is durawal's on-disk format, and nothing else: the segment
// header, the frame, and the small record files (first-lsn, truncate-lsn,
// epoch), with their encoders and validating decoders, and the names of the
// files in a log directory. It does no I/O and keeps no state, so it can be
// fuzzed on its own; package wal reads and writes the bytes. LSNs are
// uint64 here (wal.LSN in the package above).
//
// Every decoder takes arbitrary bytes: it never panics, never allocates more
// than its input suggests within the bounds given, and says why bytes are
// not what they claim to be.
package format

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/cespare/xxhash/v2"
)

// Segment header. Versions 1 to 5 (written by older builds, still read)
// have a 32-byte header:
//
//	[0:8)   magic      "durawal\x00"
//	[8:12)  version    1 to 5
//	[12:16) size/8     the file's size in bytes when created, divided by 8
//	[16:24) first LSN  the LSN of the segment's first frame (also its name)
//	[24:32) checksum   xxhash64 of bytes [0:24)
//
// Versions 6 and 7 have a 64-byte header:
//
//	[0:24)  as above (version 6, or 7 for a recycled file)
//	[24:32) use ID     a random non-zero number drawn for this use of the file
//	[32:56) zero       reserved
//	[56:64) checksum   xxhash64 of bytes [0:56)
//
// The use ID enters the checksum of every frame written into the file, so a
// frame an earlier use of the same bytes left never validates in this one.
// Versions 3, 5 and 7 are recycled files (their bytes after the frames are
// an earlier use's, not zeros); versions 4 to 7 may take frames before their
// predecessor is synced (a roll sealing in the background).
const (
	LegacyHeaderSize = 32 // bytes: header of versions 1 to 5
	HeaderSize       = 64 // bytes: header of versions 6 and 7
	Version          = 6  // a new segment
	RecycledVersion  = 7  // a recycled segment
	MinVersion       = 1  // the oldest read
	MaxVersion       = RecycledVersion
)

// Magic opens every segment header.
var Magic = [8]byte{'d', 'u', 'r', 'a', 'w', 'a', 'l', 0}

// HeaderSizeOf returns the size in bytes of the header of a segment of
// format version v: where its first frame starts.
func HeaderSizeOf(v uint32) int64 {
	if v >= 6 {
		return HeaderSize
	}
	return LegacyHeaderSize
}

// StaleTail reports whether a segment of version v is a recycled file.
func StaleTail(v uint32) bool { return v == 3 || v == 5 || v == 7 }

// EarlyUse reports whether a segment of version v may have received frames
// before its predecessor was synced.
func EarlyUse(v uint32) bool { return v >= 4 }

// Header is a decoded segment header.
type Header struct {
	Version uint32
	Created int64  // bytes: the file's size when created; 0 if not recorded
	First   uint64 // LSN of the segment's first frame
	Use     uint64 // use ID (version 6 on); 0 below
}

// EncodeHeader returns the header h (HeaderSizeOf(h.Version) bytes).
func EncodeHeader(h Header) []byte {
	b := make([]byte, HeaderSizeOf(h.Version))
	copy(b, Magic[:])
	binary.LittleEndian.PutUint32(b[8:12], h.Version)
	binary.LittleEndian.PutUint32(b[12:16], uint32(h.Created/FrameAlign))
	binary.LittleEndian.PutUint64(b[16:24], h.First)
	if h.Version < 6 {
		binary.LittleEndian.PutUint64(b[24:32], xxhash.Sum64(b[:24]))
		return b
	}
	binary.LittleEndian.PutUint64(b[24:32], h.Use)
	binary.LittleEndian.PutUint64(b[56:64], xxhash.Sum64(b[:56]))
	return b
}

// damagedVersion reports the version read whose header layout the header
// at the start of b checksums correctly under when its version field is set
// to it. The checksum covers the version field, so a header written by a
// build as version k whose field was later damaged matches as k, while a
// genuine header of another version matches as none of them but by a
// 64-bit checksum collision. It tells a flipped bit in the field, which
// Repair can mend, from a log a newer build wrote, which it must not touch.
func damagedVersion(b []byte) (uint32, bool) {
	c := bytes.Clone(b[:min(len(b), HeaderSize)])
	for k := uint32(MinVersion); k <= MaxVersion; k++ {
		if int64(len(c)) < HeaderSizeOf(k) {
			continue
		}
		binary.LittleEndian.PutUint32(c[8:12], k)
		if headerSumOK(c, k) {
			return k, true
		}
	}
	return 0, false
}

// headerSumOK reports whether the header at the start of b carries the
// checksum of version v's layout: of bytes 0..23 at 24 before version 6,
// of bytes 0..55 at 56 from it. b holds at least HeaderSizeOf(v) bytes.
func headerSumOK(b []byte, v uint32) bool {
	if v < 6 {
		return binary.LittleEndian.Uint64(b[24:32]) == xxhash.Sum64(b[:24])
	}
	return binary.LittleEndian.Uint64(b[56:64]) == xxhash.Sum64(b[:56])
}

// DecodeHeader decodes the header at the start of b. why says what is
// wrong if it is not a valid header of a version this package reads;
// unsupported is then true for a header of another version (its magic
// right). A version outside the range read whose header checksum matches
// once the field is set back to a version read is damage, not another
// version (see damagedVersion).
func DecodeHeader(b []byte) (h Header, why string, unsupported bool) {
	if len(b) < LegacyHeaderSize {
		return h, fmt.Sprintf("segment file is %d bytes, too short to hold a segment header (%d bytes)", len(b), LegacyHeaderSize), false
	}
	if [8]byte(b[:8]) != Magic {
		return h, "bad segment magic (not a durawal segment)", false
	}
	h.Version = binary.LittleEndian.Uint32(b[8:12])
	h.Created = int64(binary.LittleEndian.Uint32(b[12:16])) * FrameAlign
	h.First = binary.LittleEndian.Uint64(b[16:24])
	if h.Version < MinVersion || h.Version > MaxVersion {
		if k, ok := damagedVersion(b); ok {
			return h, fmt.Sprintf("segment header version field reads %d, but the header's checksum matches it only as version %d: the field is damaged", h.Version, k), false
		}
		return h, fmt.Sprintf("segment format version %d; this build reads versions %d to %d", h.Version, MinVersion, MaxVersion), true
	}
	switch {
	case h.Version < 6:
		if !headerSumOK(b, h.Version) {
			return h, "segment header checksum mismatch", false
		}
	case len(b) < HeaderSize:
		return h, fmt.Sprintf("segment file is %d bytes, too short to hold a version %d segment header (%d bytes)", len(b), h.Version, HeaderSize), false
	case !headerSumOK(b, h.Version):
		return h, "segment header checksum mismatch", false
	default:
		h.Use = binary.LittleEndian.Uint64(b[24:32])
		if h.Use == 0 {
			return h, "segment header has no use ID", false
		}
	}
	return h, "", false
}
