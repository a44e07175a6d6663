package wal

import (
	"encoding/binary"

	"github.com/cespare/xxhash/v2"
)

// Frame layout (little endian), normative, documented in doc.go:
//
//	[0:8)   checksum   xxhash64 seeded with the frame's LSN, over bytes [8:24+length)
//	[8:12)  length     payload length in bytes, 1..MaxRecordSize
//	[12:16) flags      0 for a record; flagEnd for an end frame (format v2)
//	[16:24) watermark  the synced LSN known when the frame was appended
//	[24:..) payload, then zero padding to a multiple of frameAlign bytes
//
// An end frame (segment format version 2) has length 0, flags flagEnd, no
// payload, and a watermark equal to its own LSN: Close writes one after its
// final sync, so it vouches for every byte before it, and any damage there
// is reported instead of being taken for a torn tail. Readers skip it.
// A link frame is the same with flags flagLink: a roll writes one into the
// finished segment, at the first LSN of its successor, once the successor
// is durable, so Open can tell a missing last segment from a log that ends.
const (
	frameHeaderSize = 24
	frameAlign      = 8
	flagEnd         = 1 // end frame: a clean Close
	flagLink        = 2 // link frame: the log continues in the segment named by this LSN
	endFrameSize    = frameHeaderSize
)

// frameSize returns the on-disk size in bytes of a frame carrying n payload
// bytes: header plus payload, rounded up to frameAlign.
func frameSize(n int) int64 {
	return (frameHeaderSize + int64(n) + frameAlign - 1) &^ (frameAlign - 1)
}

// encodeFrame writes the frame for rec at lsn into dst, which must be exactly
// frameSize(len(rec)) bytes long.
func encodeFrame(dst []byte, lsn LSN, watermark LSN, rec []byte) {
	binary.LittleEndian.PutUint32(dst[8:12], uint32(len(rec)))
	binary.LittleEndian.PutUint32(dst[12:16], 0)
	binary.LittleEndian.PutUint64(dst[16:24], uint64(watermark))
	n := copy(dst[frameHeaderSize:], rec)
	clear(dst[frameHeaderSize+n:])
	binary.LittleEndian.PutUint64(dst[0:8], frameChecksum(lsn, dst[8:frameHeaderSize+n]))
}

// encodeEndFrame writes the end or link frame (flags flagEnd or flagLink)
// at lsn into dst (endFrameSize bytes): its watermark is lsn itself, since
// everything before it was synced when it was written.
func encodeEndFrame(dst []byte, lsn LSN, flags uint32) {
	binary.LittleEndian.PutUint32(dst[8:12], 0)
	binary.LittleEndian.PutUint32(dst[12:16], flags)
	binary.LittleEndian.PutUint64(dst[16:24], uint64(lsn))
	binary.LittleEndian.PutUint64(dst[0:8], frameChecksum(lsn, dst[8:frameHeaderSize]))
}

func frameChecksum(lsn LSN, b []byte) uint64 {
	var d xxhash.Digest
	d.ResetWithSeed(uint64(lsn))
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
)

// decodeFrame validates the frame expected at lsn at the start of b. It
// returns the payload (aliasing b), the watermark and the frame's full size.
// A valid end frame has a nil payload; a record's payload is never empty. It never panics and never allocates, whatever b holds: maxRecord bounds the
// length it will believe.
func decodeFrame(b []byte, lsn LSN, maxRecord int) (payload []byte, watermark LSN, size int64, st frameStatus) {
	if len(b) < frameHeaderSize {
		return nil, 0, 0, frameShort
	}
	n := binary.LittleEndian.Uint32(b[8:12])
	sum := binary.LittleEndian.Uint64(b[0:8])
	flags := binary.LittleEndian.Uint32(b[12:16])
	watermark = LSN(binary.LittleEndian.Uint64(b[16:24]))
	if n == 0 {
		if sum == 0 && flags == 0 && watermark == 0 {
			return nil, 0, 0, frameZero
		}
		// An end frame: no payload (nil), watermark == its own LSN.
		if (flags == flagEnd || flags == flagLink) && watermark == lsn && frameChecksum(lsn, b[8:frameHeaderSize]) == sum {
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
	if frameChecksum(lsn, b[8:end]) != sum {
		return nil, 0, 0, frameBad
	}
	return b[frameHeaderSize:end], watermark, size, frameValid
}

// frameFlags returns the flags of the frame header at the start of b, which
// decodeFrame has validated.
func frameFlags(b []byte) uint32 { return binary.LittleEndian.Uint32(b[12:16]) }
