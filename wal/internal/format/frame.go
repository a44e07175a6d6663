package format

import (
	"encoding/binary"

	"github.com/cespare/xxhash/v2"
)

// Frame layout (little endian):
//
//	[0:8)   checksum   xxhash64 seeded with the frame's LSN XOR the segment's
//	                   use ID (0 below format version 6), over bytes [8:24+length)
//	[8:12)  length     payload length in bytes, 1..MaxRecordSize
//	[12:16) kind word  bits 0-1: 0 for a record, FlagEnd for an end frame,
//	                   FlagLink for a link frame; from format version 6, bits
//	                   2-31 hold the log's epoch when the frame was written,
//	                   modulo 2^30 (below version 6 they are zero)
//	[16:24) watermark  the synced LSN known when the frame was appended
//	[24:..) payload, then zero padding to a multiple of FrameAlign bytes
//
// An end frame has length 0, kind FlagEnd, no payload, and a watermark
// equal to its own LSN (Close writes one after its final sync); a link frame
// is the same with kind FlagLink (a roll writes one at its successor's first
// LSN once the successor is durable).
const (
	FrameHeaderSize = 24 // bytes
	FrameAlign      = 8  // bytes
	FlagEnd         = 1
	FlagLink        = 2
	KindMask        = 3  // the bits of the kind word that hold the flags
	EpochBits       = 30 // the bits of the kind word that hold the epoch
	EndFrameSize    = FrameHeaderSize
)

// FrameFormat says how the frames of one segment are encoded: its format
// version (epochs from 6) and use ID (0 below 6).
type FrameFormat struct {
	Version uint32
	Use     uint64
}

// Seed returns the checksum seed of the frame at lsn.
func (ff FrameFormat) Seed(lsn uint64) uint64 { return lsn ^ ff.Use }

// KindWord returns the kind word of a frame with flags written in epoch.
func (ff FrameFormat) KindWord(flags uint32, epoch uint64) uint32 {
	if ff.Version < 6 {
		return flags
	}
	return flags | uint32(epoch%(1<<EpochBits))<<2
}

// FrameSize returns the on-disk size in bytes of a frame carrying n payload
// bytes: header plus payload, rounded up to FrameAlign.
func FrameSize(n int) int64 {
	return (FrameHeaderSize + int64(n) + FrameAlign - 1) &^ (FrameAlign - 1)
}

// EncodeFrame writes the frame for rec at lsn, written in epoch, into dst,
// which must be exactly FrameSize(len(rec)) bytes long.
func EncodeFrame(dst []byte, ff FrameFormat, epoch uint64, lsn, watermark uint64, rec []byte) {
	binary.LittleEndian.PutUint32(dst[8:12], uint32(len(rec)))
	binary.LittleEndian.PutUint32(dst[12:16], ff.KindWord(0, epoch))
	binary.LittleEndian.PutUint64(dst[16:24], watermark)
	n := copy(dst[FrameHeaderSize:], rec)
	clear(dst[FrameHeaderSize+n:])
	binary.LittleEndian.PutUint64(dst[0:8], Checksum(ff.Seed(lsn), dst[8:FrameHeaderSize+n]))
}

// EncodeEndFrame writes the end or link frame (flags FlagEnd or FlagLink)
// at lsn, written in epoch, into dst (EndFrameSize bytes).
func EncodeEndFrame(dst []byte, ff FrameFormat, epoch uint64, lsn uint64, flags uint32) {
	binary.LittleEndian.PutUint32(dst[8:12], 0)
	binary.LittleEndian.PutUint32(dst[12:16], ff.KindWord(flags, epoch))
	binary.LittleEndian.PutUint64(dst[16:24], lsn)
	binary.LittleEndian.PutUint64(dst[0:8], Checksum(ff.Seed(lsn), dst[8:FrameHeaderSize]))
}

// Checksum is the frame checksum: xxhash64 of b with seed.
func Checksum(seed uint64, b []byte) uint64 {
	var d xxhash.Digest
	d.ResetWithSeed(seed)
	d.Write(b)
	return d.Sum64()
}

// Status classifies the bytes at one frame position.
type Status uint8

const (
	Valid Status = iota
	Zero         // an all-zero header: the unwritten end of a segment
	Short        // the header or payload runs past the available bytes
	Bad          // length, flags or checksum do not validate
	Stale        // valid, but written in an epoch the log has left at this LSN
)

// String says what the status means, for error messages.
func (st Status) String() string {
	switch st {
	case Valid:
		return "valid frame"
	case Zero:
		return "zeroed frame header"
	case Short:
		return "truncated frame"
	case Stale:
		return "frame of an earlier epoch"
	}
	return "invalid frame (bad length, flags or checksum)"
}

// DecodeFrame validates the frame expected at lsn at the start of b, in a
// segment of format ff. It returns the payload (aliasing b), the watermark
// and the frame's full size. A valid end frame has a nil payload; a
// record's payload is never empty. It never panics and never allocates,
// whatever b holds: maxRecord bounds the length it will believe. It does
// not apply the epoch rule (Epoch.Admits).
func DecodeFrame(b []byte, ff FrameFormat, lsn uint64, maxRecord int) (payload []byte, watermark uint64, size int64, st Status) {
	if len(b) < FrameHeaderSize {
		return nil, 0, 0, Short
	}
	n := binary.LittleEndian.Uint32(b[8:12])
	sum := binary.LittleEndian.Uint64(b[0:8])
	word := binary.LittleEndian.Uint32(b[12:16])
	flags := word & KindMask
	if ff.Version < 6 && word != flags {
		return nil, 0, 0, Bad
	}
	watermark = binary.LittleEndian.Uint64(b[16:24])
	if n == 0 {
		if sum == 0 && word == 0 && watermark == 0 {
			return nil, 0, 0, Zero
		}
		if (flags == FlagEnd || flags == FlagLink) && watermark == lsn && Checksum(ff.Seed(lsn), b[8:FrameHeaderSize]) == sum {
			return nil, watermark, EndFrameSize, Valid
		}
		return nil, 0, 0, Bad
	}
	if flags != 0 || int64(n) > int64(maxRecord) {
		return nil, 0, 0, Bad
	}
	size = FrameSize(int(n))
	end := FrameHeaderSize + int64(n)
	if int64(len(b)) < end {
		return nil, 0, 0, Short
	}
	if Checksum(ff.Seed(lsn), b[8:end]) != sum {
		return nil, 0, 0, Bad
	}
	return b[FrameHeaderSize:end], watermark, size, Valid
}

// Flags returns the flags (FlagEnd, FlagLink, or 0 for a record) of the
// frame header at the start of b (at least FrameHeaderSize bytes).
func Flags(b []byte) uint32 { return binary.LittleEndian.Uint32(b[12:16]) & KindMask }

// KindWordOf returns the kind word of the frame header at the start of b.
func KindWordOf(b []byte) uint32 { return binary.LittleEndian.Uint32(b[12:16]) }
