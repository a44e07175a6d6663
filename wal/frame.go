package wal

import (
	"encoding/binary"

	"github.com/cespare/xxhash/v2"
)

// Frame layout (little endian), normative, documented in doc.go:
//
//	[0:8)   checksum   xxhash64 seeded with the frame's LSN XOR the segment's
//	                   use ID (0 below format version 6), over bytes [8:24+length)
//	[8:12)  length     payload length in bytes, 1..MaxRecordSize
//	[12:16) kind       bits 0-1: 0 for a record, flagEnd for an end frame,
//	                   flagLink for a link frame; from format version 6, bits
//	                   2-31 hold the log's epoch when the frame was written,
//	                   modulo 2^30 (below version 6 they are zero)
//	[16:24) watermark  the synced LSN known when the frame was appended
//	[24:..) payload, then zero padding to a multiple of frameAlign bytes
//
// An end frame (segment format version 2) has length 0, kind flagEnd, no
// payload, and a watermark equal to its own LSN: Close writes one after its
// final sync, so it vouches for every byte before it, and any damage there
// is reported instead of being taken for a torn tail. Readers skip it.
// A link frame is the same with kind flagLink: a roll writes one into the
// finished segment, at the first LSN of its successor, once the successor
// is durable, so Open can tell a missing last segment from a log that ends.
//
// The use ID binds a frame to one use of its file, the epoch to one stretch
// of the log's history between cuts and Opens (see epoch.go): a frame left
// by an earlier use of the same bytes fails its checksum, and one left by
// an earlier epoch at an LSN the current epoch has rewritten fails the
// epoch rule, so recovery ends the log there whatever a crash kept.
const (
	frameHeaderSize = 24
	frameAlign      = 8
	flagEnd         = 1 // end frame: a clean Close
	flagLink        = 2 // link frame: the log continues in the segment named by this LSN
	kindMask        = 3 // the bits of the kind word that hold the flags
	epochBits       = 30
	endFrameSize    = frameHeaderSize
)

// frameFormat says how the frames of one segment are encoded: its format
// version (epochs from 6) and use ID (0 below 6).
type frameFormat struct {
	version uint32
	use     uint64
}

// seed returns the checksum seed of the frame at lsn.
func (ff frameFormat) seed(lsn LSN) uint64 { return uint64(lsn) ^ ff.use }

// kindWord returns the kind word of a frame with flags written in epoch.
func (ff frameFormat) kindWord(flags uint32, epoch uint64) uint32 {
	if ff.version < 6 {
		return flags
	}
	return flags | uint32(epoch%(1<<epochBits))<<2
}

// frameSize returns the on-disk size in bytes of a frame carrying n payload
// bytes: header plus payload, rounded up to frameAlign.
func frameSize(n int) int64 {
	return (frameHeaderSize + int64(n) + frameAlign - 1) &^ (frameAlign - 1)
}

// encodeFrame writes the frame for rec at lsn, written in epoch, into dst,
// which must be exactly frameSize(len(rec)) bytes long.
func encodeFrame(dst []byte, ff frameFormat, epoch uint64, lsn LSN, watermark LSN, rec []byte) {
	binary.LittleEndian.PutUint32(dst[8:12], uint32(len(rec)))
	binary.LittleEndian.PutUint32(dst[12:16], ff.kindWord(0, epoch))
	binary.LittleEndian.PutUint64(dst[16:24], uint64(watermark))
	n := copy(dst[frameHeaderSize:], rec)
	clear(dst[frameHeaderSize+n:])
	binary.LittleEndian.PutUint64(dst[0:8], frameChecksum(ff.seed(lsn), dst[8:frameHeaderSize+n]))
}

// encodeEndFrame writes the end or link frame (flags flagEnd or flagLink)
// at lsn, written in epoch, into dst (endFrameSize bytes): its watermark is
// lsn itself, since everything before it was synced when it was written.
func encodeEndFrame(dst []byte, ff frameFormat, epoch uint64, lsn LSN, flags uint32) {
	binary.LittleEndian.PutUint32(dst[8:12], 0)
	binary.LittleEndian.PutUint32(dst[12:16], ff.kindWord(flags, epoch))
	binary.LittleEndian.PutUint64(dst[16:24], uint64(lsn))
	binary.LittleEndian.PutUint64(dst[0:8], frameChecksum(ff.seed(lsn), dst[8:frameHeaderSize]))
}

func frameChecksum(seed uint64, b []byte) uint64 {
	var d xxhash.Digest
	d.ResetWithSeed(seed)
	d.Write(b)
	return d.Sum64()
}

// frameStatus classifies the bytes at one position.
type frameStatus uint8

const (
	frameValid frameStatus = iota
	frameZero              // an all-zero header: the unwritten end of a segment
	frameShort             // the header or payload runs past the available bytes
	frameBad               // length, flags or checksum do not validate
	frameStale             // valid, but written in an epoch the log has left at this LSN
)

// decodeFrame validates the frame expected at lsn at the start of b, in a
// segment of format ff. It returns the payload (aliasing b), the watermark
// and the frame's full size. A valid end frame has a nil payload; a
// record's payload is never empty. It never panics and never allocates,
// whatever b holds: maxRecord bounds the length it will believe. It does
// not apply the epoch rule (frameEpoch, Epoch.admits).
func decodeFrame(b []byte, ff frameFormat, lsn LSN, maxRecord int) (payload []byte, watermark LSN, size int64, st frameStatus) {
	if len(b) < frameHeaderSize {
		return nil, 0, 0, frameShort
	}
	n := binary.LittleEndian.Uint32(b[8:12])
	sum := binary.LittleEndian.Uint64(b[0:8])
	flags := frameFlags(b)
	if ff.version < 6 && binary.LittleEndian.Uint32(b[12:16]) != flags {
		return nil, 0, 0, frameBad
	}
	watermark = LSN(binary.LittleEndian.Uint64(b[16:24]))
	if n == 0 {
		if sum == 0 && binary.LittleEndian.Uint32(b[12:16]) == 0 && watermark == 0 {
			return nil, 0, 0, frameZero
		}
		// An end frame: no payload (nil), watermark == its own LSN.
		if (flags == flagEnd || flags == flagLink) && watermark == lsn && frameChecksum(ff.seed(lsn), b[8:frameHeaderSize]) == sum {
			return nil, watermark, endFrameSize, frameValid
		}
		return nil, 0, 0, frameBad
	}
	if flags != 0 || int64(n) > int64(maxRecord) {
		return nil, 0, 0, frameBad
	}
	size = frameSize(int(n))
	end := frameHeaderSize + int64(n)
	if int64(len(b)) < end {
		return nil, 0, 0, frameShort
	}
	if frameChecksum(ff.seed(lsn), b[8:end]) != sum {
		return nil, 0, 0, frameBad
	}
	return b[frameHeaderSize:end], watermark, size, frameValid
}

// frameFlags returns the flags (flagEnd, flagLink, or 0 for a record) of
// the frame header at the start of b.
func frameFlags(b []byte) uint32 { return binary.LittleEndian.Uint32(b[12:16]) & kindMask }
