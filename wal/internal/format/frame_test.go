package format

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// legacyFF is the frame format of segment versions below 6: no use ID, no
// epoch. The layout tests below are of it; TestFrameUseAndEpoch covers 6.
var legacyFF = FrameFormat{Version: 5}

func encoded(lsn, watermark uint64, rec []byte) []byte {
	b := make([]byte, FrameSize(len(rec)))
	EncodeFrame(b, legacyFF, 0, lsn, watermark, rec)
	return b
}

func TestFrameUseAndEpoch(t *testing.T) {
	use := FrameFormat{Version: Version, Use: 0x1234_5678_9abc_def0}
	other := FrameFormat{Version: Version, Use: 0x1234_5678_9abc_def1}
	b := make([]byte, FrameSize(3))
	EncodeFrame(b, use, 7+1<<EpochBits, 4096, 1000, []byte("abc"))
	assert.Equal(t, uint32(7)<<2, binary.LittleEndian.Uint32(b[12:16]), "epoch modulo 2^30 in bits 2-31, kind 0")
	rec, wm, _, st := DecodeFrame(b, use, 4096, 100)
	require.Equal(t, Valid, st)
	assert.Equal(t, []byte("abc"), rec)
	assert.Equal(t, uint64(1000), wm)
	_, _, _, st = DecodeFrame(b, other, 4096, 100)
	assert.Equal(t, Bad, st, "a frame of another use of the file never validates")
	_, _, _, st = DecodeFrame(b, legacyFF, 4096, 100)
	assert.Equal(t, Bad, st, "nor as a frame of an older format")

	e := make([]byte, EndFrameSize)
	EncodeEndFrame(e, use, 9, 4096, FlagLink)
	_, _, size, st := DecodeFrame(e, use, 4096, 100)
	require.Equal(t, Valid, st)
	assert.Equal(t, int64(EndFrameSize), size)
	assert.Equal(t, uint32(FlagLink), Flags(e))

	rule := Epoch{N: 7, Start: 4096, Known: true}
	word := func(b []byte) uint32 { return binary.LittleEndian.Uint32(b[12:16]) }
	assert.True(t, rule.Admits(use, 4096, word(b)), "the current epoch at the start")
	assert.False(t, (Epoch{N: 8, Start: 4096, Known: true}).Admits(use, 4096, word(b)), "an older epoch at or after the start")
	assert.True(t, (Epoch{N: 8, Start: 8192, Known: true}).Admits(use, 4096, word(b)), "an older epoch before the start")
	assert.False(t, (Epoch{N: 7, Start: 8192, Known: true}).Admits(use, 4096, word(b)), "the current epoch before its start")
	assert.True(t, (Epoch{N: 8, Start: 4096, Known: true}).Admits(use, 4096, word(e)), "an end or link frame exactly at the start")
	assert.True(t, (Epoch{}).Admits(use, 4096, word(b)), "no record: every frame")
	why, _ := (Epoch{N: 6, Start: 0, Known: true}).Contradiction(use, 4096, word(b))
	assert.Contains(t, why, "older than the log", "a frame of a later epoch than the record")
	why, off := (Epoch{N: 7, Start: 8192, Known: true}).Contradiction(use, 4096, word(b))
	assert.Contains(t, why, "starts later", "a record of the recorded epoch before its start")
	assert.EqualValues(t, 8, off)
	why, _ = rule.Contradiction(use, 4096, word(b))
	assert.Empty(t, why, "the current epoch at its start")
	why, _ = (Epoch{N: 8, Start: 8192, Known: true}).Contradiction(use, 4096, word(b))
	assert.Empty(t, why, "an older epoch before the start")
	assert.False(t, rule.Admits(legacyFF, 4096, 0), "an older format's frame at the start")
	assert.True(t, rule.Admits(legacyFF, 4088, 0), "an older format's frame before the start")
}

func TestFrameSize(t *testing.T) {
	for _, tc := range []struct {
		n    int
		want int64
	}{
		{1, 32}, {7, 32}, {8, 32}, {9, 40}, {16, 40}, {17, 48}, {1000, 1024}, {4 << 20, 24 + 4<<20},
	} {
		assert.Equal(t, tc.want, FrameSize(tc.n), "FrameSize(%d)", tc.n)
		assert.Zero(t, FrameSize(tc.n)%FrameAlign)
	}
}

func TestEncodeFrameLayout(t *testing.T) {
	b := encoded(4096, 1000, []byte("abc"))
	require.Len(t, b, 32)
	assert.Equal(t, uint32(3), binary.LittleEndian.Uint32(b[8:12]), "length")
	assert.Equal(t, uint32(0), binary.LittleEndian.Uint32(b[12:16]), "flags")
	assert.Equal(t, uint64(1000), binary.LittleEndian.Uint64(b[16:24]), "watermark")
	assert.Equal(t, []byte("abc"), b[24:27])
	assert.Equal(t, make([]byte, 5), b[27:], "padding is zero")
	assert.Equal(t, Checksum(4096, b[8:27]), binary.LittleEndian.Uint64(b[0:8]))

	// encodeFrame clears stale padding in a reused buffer.
	dirty := bytes.Repeat([]byte{0xee}, 32)
	EncodeFrame(dirty, legacyFF, 0, 4096, 1000, []byte("abc"))
	assert.Equal(t, b, dirty)
}

func TestDecodeFrame(t *testing.T) {
	const max = 100
	rec := []byte("hello, frame")
	good := encoded(64, 8, rec)
	mutate := func(f func(b []byte)) []byte {
		b := bytes.Clone(good)
		f(b)
		return b
	}
	tests := []struct {
		name     string
		b        []byte
		lsn      uint64
		want     Status
		wantRec  []byte
		wantWM   uint64
		wantSize int64
	}{
		{name: "valid", b: good, lsn: 64, want: Valid, wantRec: rec, wantWM: 8, wantSize: 40},
		{name: "valid with trailing bytes", b: append(bytes.Clone(good), 1, 2, 3), lsn: 64, want: Valid, wantRec: rec, wantWM: 8, wantSize: 40},
		{name: "valid without padding", b: good[:24+len(rec)], lsn: 64, want: Valid, wantRec: rec, wantWM: 8, wantSize: 40},
		{name: "wrong lsn", b: good, lsn: 72, want: Bad},
		{name: "empty", b: nil, want: Short},
		{name: "short header", b: good[:23], lsn: 64, want: Short},
		{name: "short payload", b: good[:30], lsn: 64, want: Short},
		{name: "all zero", b: make([]byte, 64), want: Zero},
		{name: "zero header exactly", b: make([]byte, 24), want: Zero},
		{name: "zero length nonzero checksum", b: mutate(func(b []byte) { binary.LittleEndian.PutUint32(b[8:12], 0) }), lsn: 64, want: Bad},
		{name: "zero length nonzero watermark", b: func() []byte { b := make([]byte, 32); b[16] = 1; return b }(), want: Bad},
		{name: "flags set", b: mutate(func(b []byte) { b[12] = 1 }), lsn: 64, want: Bad},
		{name: "length above max", b: mutate(func(b []byte) { binary.LittleEndian.PutUint32(b[8:12], max+1) }), lsn: 64, want: Bad},
		{name: "length huge", b: mutate(func(b []byte) { binary.LittleEndian.PutUint32(b[8:12], 0xffffffff) }), lsn: 64, want: Bad},
		{name: "checksum flipped", b: mutate(func(b []byte) { b[0] ^= 1 }), lsn: 64, want: Bad},
		{name: "payload flipped", b: mutate(func(b []byte) { b[30] ^= 0x80 }), lsn: 64, want: Bad},
		{name: "watermark flipped", b: mutate(func(b []byte) { b[16] ^= 1 }), lsn: 64, want: Bad},
		{name: "padding ignored", b: mutate(func(b []byte) { b[39] = 0xff }), lsn: 64, want: Valid, wantRec: rec, wantWM: 8, wantSize: 40},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, wm, size, st := DecodeFrame(tc.b, legacyFF, tc.lsn, max)
			require.Equal(t, tc.want, st, "status %s", st)
			if st != Valid {
				assert.Nil(t, got)
				assert.Zero(t, size)
				return
			}
			assert.Equal(t, tc.wantRec, got)
			assert.Equal(t, tc.wantWM, wm)
			assert.Equal(t, tc.wantSize, size)
		})
	}
}

func TestDecodeFrameMaxRecordBoundary(t *testing.T) {
	rec := bytes.Repeat([]byte{7}, 100)
	b := encoded(0, 0, rec)
	_, _, _, st := DecodeFrame(b, legacyFF, 0, 100)
	assert.Equal(t, Valid, st, "length == maxRecord is valid")
	_, _, _, st = DecodeFrame(b, legacyFF, 0, 99)
	assert.Equal(t, Bad, st, "length > maxRecord is never believed")
}

func TestDecodeFrameDoesNotAllocate(t *testing.T) {
	b := encoded(128, 64, bytes.Repeat([]byte("x"), 300))
	allocs := testing.AllocsPerRun(100, func() {
		if _, _, _, st := DecodeFrame(b, legacyFF, 128, 1000); st != Valid {
			t.Fatal("not valid")
		}
	})
	assert.Zero(t, allocs)
}

func TestFrameStatusString(t *testing.T) {
	for _, st := range []Status{Valid, Zero, Short, Bad, Stale} {
		assert.NotEmpty(t, st.String())
	}
}

// FuzzDecodeFrame feeds arbitrary bytes to the decoder: it must never panic,
// never believe a length above maxRecord, and return a payload that lies
// inside b; a frame it calls valid re-encodes to the same bytes. The fuzzer
// also encodes its input as a record and checks the round trip.
func FuzzDecodeFrame(f *testing.F) {
	f.Add(encoded(0, 0, []byte("a")), uint64(0), uint16(64))
	f.Add(encoded(4096, 4000, []byte("hello, world")), uint64(4096), uint16(64))
	f.Add(make([]byte, 48), uint64(8), uint16(16))
	f.Add([]byte{1, 2, 3}, uint64(0), uint16(1))
	f.Fuzz(func(t *testing.T, b []byte, lsn uint64, maxRecord uint16) {
		max := int(maxRecord) + 1
		payload, wm, size, st := DecodeFrame(b, legacyFF, uint64(lsn), max)
		switch st {
		case Valid:
			require.NotEmpty(t, payload)
			require.LessOrEqual(t, len(payload), max, "believed a length above maxRecord")
			require.Equal(t, FrameSize(len(payload)), size)
			require.LessOrEqual(t, FrameHeaderSize+len(payload), len(b))
			require.Equal(t, &b[FrameHeaderSize], &payload[0], "payload must alias b")
			re := encoded(uint64(lsn), wm, payload)
			require.Equal(t, b[:FrameHeaderSize+len(payload)], re[:FrameHeaderSize+len(payload)])
		case Zero, Short, Bad:
			require.Nil(t, payload)
			require.Zero(t, size)
		default:
			t.Fatalf("unknown status %d", st)
		}
		// The same bytes as a frame of a format-6 segment: never a panic,
		// and valid only if they re-encode the same under that use.
		v6 := FrameFormat{Version: Version, Use: lsn | 1}
		if p, wm6, _, st := DecodeFrame(b, v6, uint64(lsn), max); st == Valid && p != nil {
			re := make([]byte, FrameSize(len(p)))
			EncodeFrame(re, v6, uint64(binary.LittleEndian.Uint32(b[12:16])>>2), uint64(lsn), wm6, p)
			require.Equal(t, b[:FrameHeaderSize+len(p)], re[:FrameHeaderSize+len(p)])
		}
		switch st {
		case Valid, Zero, Short, Bad:
		default:
			t.Fatalf("unknown status %d", st)
		}

		// Round trip: the input as a record, when it fits.
		if len(b) == 0 || len(b) > max {
			return
		}
		frame := encoded(uint64(lsn), wm, b)
		got, gotWM, gotSize, st := DecodeFrame(frame, legacyFF, uint64(lsn), max)
		require.Equal(t, Valid, st)
		require.Equal(t, b, got)
		require.Equal(t, wm, gotWM)
		require.Equal(t, int64(len(frame)), gotSize)
		if lsn+8 > lsn {
			_, _, _, st = DecodeFrame(frame, legacyFF, uint64(lsn+8), max)
			require.NotEqual(t, Valid, st, "a frame must not validate at another LSN")
		}
	})
}
