package wal

import (
	"github.com/durawal/durawal/wal/internal/format"
)

// The frame layout is package format's (wal/internal/format), documented
// in doc.go: a 24-byte header (checksum seeded with the LSN XOR the
// segment's use ID, length, kind word with the epoch from format version
// 6, watermark), then the payload padded to 8 bytes. The names below are
// this package's for them.
const (
	frameHeaderSize = format.FrameHeaderSize
	frameAlign      = format.FrameAlign
	flagEnd         = format.FlagEnd  // end frame: a clean Close
	flagLink        = format.FlagLink // link frame: the log continues in the segment named by this LSN
	kindMask        = format.KindMask
	epochBits       = format.EpochBits
	endFrameSize    = format.EndFrameSize
)

// frameFormat says how the frames of one segment are encoded: its format
// version (epochs from 6) and use ID (0 below 6).
type frameFormat = format.FrameFormat

// frameStatus classifies the bytes at one position.
type frameStatus = format.Status

const (
	frameValid = format.Valid
	frameZero  = format.Zero  // an all-zero header: the unwritten end of a segment
	frameShort = format.Short // the header or payload runs past the available bytes
	frameBad   = format.Bad   // length, flags or checksum do not validate
	frameStale = format.Stale // valid, but written in an epoch the log has left at this LSN
)

// frameSize returns the on-disk size in bytes of a frame carrying n payload
// bytes: header plus payload, rounded up to frameAlign.
func frameSize(n int) int64 { return format.FrameSize(n) }

// encodeFrame writes the frame for rec at lsn, written in epoch, into dst,
// which must be exactly frameSize(len(rec)) bytes long.
func encodeFrame(dst []byte, ff frameFormat, epoch uint64, lsn LSN, watermark LSN, rec []byte) {
	format.EncodeFrame(dst, ff, epoch, uint64(lsn), uint64(watermark), rec)
}

// encodeEndFrame writes the end or link frame (flags flagEnd or flagLink)
// at lsn, written in epoch, into dst (endFrameSize bytes): its watermark is
// lsn itself, since everything before it was synced when it was written.
func encodeEndFrame(dst []byte, ff frameFormat, epoch uint64, lsn LSN, flags uint32) {
	format.EncodeEndFrame(dst, ff, epoch, uint64(lsn), flags)
}

// decodeFrame validates the frame expected at lsn at the start of b, in a
// segment of format ff (format.DecodeFrame).
func decodeFrame(b []byte, ff frameFormat, lsn LSN, maxRecord int) (payload []byte, watermark LSN, size int64, st frameStatus) {
	p, wm, size, st := format.DecodeFrame(b, ff, uint64(lsn), maxRecord)
	return p, LSN(wm), size, st
}

// frameFlags returns the flags (flagEnd, flagLink, or 0 for a record) of
// the frame header at the start of b.
func frameFlags(b []byte) uint32 { return format.Flags(b) }

// FrameSize returns the LSN space, in bytes, that a record of n payload
// bytes takes: its frame's header plus the payload, padded to 8 bytes. A
// record appended at LSN x ends at x+FrameSize(n), where the next record
// of the same segment starts (a record that does not fit a segment's room
// starts the next segment, at that LSN).
func FrameSize(n int) int64 { return frameSize(n) }
