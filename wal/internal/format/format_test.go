package format

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/cespare/xxhash/v2"
	"github.com/stretchr/testify/require"
)

func TestHeaderRoundTrip(t *testing.T) {
	for _, h := range []Header{
		{Version: Version, Created: 64 << 20, First: 123456, Use: 0xfeed},
		{Version: RecycledVersion, Created: 4096, First: 0, Use: 1},
		{Version: 4, Created: 4096, First: 8192},
	} {
		b := EncodeHeader(h)
		require.Len(t, b, int(HeaderSizeOf(h.Version)))
		got, why, unsupported := DecodeHeader(b)
		require.Empty(t, why)
		require.False(t, unsupported)
		require.Equal(t, h, got)
	}
	b := EncodeHeader(Header{Version: Version, Created: 4096, First: 1, Use: 7})
	_, why, _ := DecodeHeader(b[:LegacyHeaderSize])
	require.Contains(t, why, "too short")
	b[40] ^= 1
	_, why, _ = DecodeHeader(b)
	require.Contains(t, why, "checksum")
	b = EncodeHeader(Header{Version: Version, Created: 4096, First: 1})
	_, why, _ = DecodeHeader(b)
	require.Contains(t, why, "no use ID", "a version-6 header always names its use")
	// A newer build's header: its checksum covers its own version.
	b = EncodeHeader(Header{Version: Version, Created: 4096, First: 1, Use: 1})
	b[8] = MaxVersion + 1
	binary.LittleEndian.PutUint64(b[56:64], xxhash.Sum64(b[:56]))
	_, why, unsupported := DecodeHeader(b)
	require.True(t, unsupported, why)
}

// TestDamagedVersionField: a version field out of the range read whose
// header checksums as a version read is damage (unsupported false, the
// reason naming both versions), for every version read and every bit of
// the field; one whose checksum matches no version read is another
// version.
func TestDamagedVersionField(t *testing.T) {
	for v := uint32(MinVersion); v <= MaxVersion; v++ {
		h := Header{Version: v, Created: 4096, First: 8192}
		if v >= 6 {
			h.Use = 0xbeef
		}
		for bit := range 32 {
			b := EncodeHeader(h)
			binary.LittleEndian.PutUint32(b[8:12], v^1<<bit)
			if got := v ^ 1<<bit; got >= MinVersion && got <= MaxVersion {
				continue // another version read: its own checksum fails
			}
			_, why, unsupported := DecodeHeader(b)
			require.False(t, unsupported, "version %d, bit %d: %s", v, bit, why)
			require.Contains(t, why, fmt.Sprintf("matches it only as version %d", v))
		}
	}
	b := EncodeHeader(Header{Version: 2, Created: 4096, First: 8192})
	binary.LittleEndian.PutUint32(b[8:12], 1000)
	binary.LittleEndian.PutUint64(b[24:32], xxhash.Sum64(b[:24]))
	_, why, unsupported := DecodeHeader(b)
	require.True(t, unsupported, why)
}

// FuzzDecodeHeader: arbitrary bytes never panic the decoder, and a header
// it accepts encodes back to the same bytes.
func FuzzDecodeHeader(f *testing.F) {
	f.Add(EncodeHeader(Header{Version: Version, Created: 64 << 20, First: 4096, Use: 99}))
	f.Add(EncodeHeader(Header{Version: 2, Created: 4096, First: 0}))
	f.Add(make([]byte, 64))
	f.Add([]byte("durawal\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, why, _ := DecodeHeader(b)
		if why != "" {
			return
		}
		re := EncodeHeader(h)
		n := len(re)
		if h.Version >= 6 {
			require.Equal(t, b[:24], re[:24])
			require.Equal(t, b[24:32], re[24:32])
			require.Equal(t, b[56:64], re[56:64], "the checksum covers the reserved bytes as they are")
			return
		}
		require.Equal(t, b[:n], re)
	})
}

// FuzzDecodeRecords: the small record files (first-lsn, truncate-lsn,
// epoch) decode only what their encoders wrote, and never panic.
func FuzzDecodeRecords(f *testing.F) {
	f.Add(EncodeLSNRecord(122400), uint64(0), uint64(0))
	f.Add(EncodeEpoch(Epoch{N: 3, Start: 4096, Known: true}), uint64(3), uint64(4096))
	f.Add([]byte{}, uint64(1), uint64(2))
	f.Fuzz(func(t *testing.T, b []byte, n, start uint64) {
		if lsn, ok := DecodeLSNRecord(b); ok {
			require.Equal(t, b[:LSNRecordSize], EncodeLSNRecord(lsn))
		}
		if e, ok := DecodeEpoch(b); ok {
			require.True(t, e.Known)
			require.Equal(t, b[:EpochRecordSize], EncodeEpoch(e))
		}
		e := Epoch{N: n, Start: start, Known: true}
		got, ok := DecodeEpoch(EncodeEpoch(e))
		require.True(t, ok)
		require.Equal(t, e, got)
		lsn, ok := DecodeLSNRecord(EncodeLSNRecord(n))
		require.True(t, ok)
		require.Equal(t, n, lsn)
		flipped := EncodeEpoch(e)
		flipped[int(start%EpochRecordSize)] ^= 1 << (n % 8)
		_, ok = DecodeEpoch(flipped)
		require.False(t, ok, "a flipped bit is caught")
	})
}

func TestNames(t *testing.T) {
	require.Equal(t, "00000000000000004096.wal", SegmentName(4096))
	first, ok := ParseSegmentName(SegmentName(1 << 40))
	require.True(t, ok)
	require.Equal(t, uint64(1<<40), first)
	for _, bad := range []string{"4096.wal", "0000000000000000409a.wal", "00000000000000004096.tmp"} {
		_, ok := ParseSegmentName(bad)
		require.False(t, ok, bad)
	}
	from, ok := ParseQuarantineName(QuarantineName(512, 96, 0))
	require.True(t, ok)
	require.Equal(t, uint64(512), from)
	_, ok = ParseQuarantineName(QuarantineName(512, 96, 3))
	require.True(t, ok)
	_, ok = ParseQuarantineName(bytes.NewBufferString("00000000000000000512-x.torn").String())
	require.False(t, ok)
}

func TestRepairNames(t *testing.T) {
	for _, c := range []struct {
		n    int
		what string
	}{{0, "txt"}, {2, "txt"}, {0, FirstLSNName}, {1, TruncateName}, {0, EpochName}} {
		name := RepairName("20261205T121348Z", c.n, c.what)
		what, ok := ParseRepairName(name)
		require.True(t, ok, name)
		require.Equal(t, c.what, what)
	}
	for _, bad := range []string{"repair-20261205T121348Z.tar", "repair-20261305T121348Z.txt", "repair-20261205T121348Z.0.txt",
		"repair-20261205T121348Z.txt.wal.tmp", "repair-x.txt", "repair-20261205T121348Z", "20261205T121348Z.txt"} {
		_, ok := ParseRepairName(bad)
		require.False(t, ok, bad)
	}
}
