package wal_test

import (
	"encoding/binary"
	"strconv"
	"strings"
	"testing"

	"github.com/durawal/durawal/policy"
	"github.com/durawal/durawal/wal"
	"github.com/durawal/durawal/wal/vfs"
	"github.com/stretchr/testify/require"
)

// BenchmarkOpenTornLargeRecord measures Open of a log whose last record, 2
// MiB in an 8 MiB segment, was torn (a byte of it differs from what its
// checksum covers): recovery looks for a later frame at every 8-byte offset
// of the torn bytes. A record of small integers reads, at many offsets, as
// a frame header claiming a long payload; only headers whose watermark
// could decide the verdict are checksummed.
func BenchmarkOpenTornLargeRecord(b *testing.B) {
	for _, c := range []struct {
		name  string
		young bool // the record is torn in the log's first MiB of LSNs
		fill  func(rec []byte)
	}{
		{"uint32-small", false, func(rec []byte) {
			for i := 0; i+4 <= len(rec); i += 4 {
				binary.LittleEndian.PutUint32(rec[i:], uint32(i/4%4096))
			}
		}},
		{"uint64-ascending", false, func(rec []byte) {
			for i := 0; i+8 <= len(rec); i += 8 {
				binary.LittleEndian.PutUint64(rec[i:], uint64(i/8))
			}
		}},
		// The case the watermark test cannot filter: integers in the
		// range of the LSNs around the tear, read as watermarks.
		{"uint64-ascending-young", true, func(rec []byte) {
			for i := 0; i+8 <= len(rec); i += 8 {
				binary.LittleEndian.PutUint64(rec[i:], uint64(i/8))
			}
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			opts := wal.Options{SegmentSize: 8 << 20, MaxRecordSize: 4 << 20, Policy: policy.SyncNever()}
			mem := vfs.NewMem()
			l := openLog(b, mem, opts)
			appendN(b, l, 0, 10, 100)
			if !c.young {
				for l.Stats().Rolls < 2 {
					appendN(b, l, 1, 100, 1000)
				}
			}
			rec := make([]byte, 2<<20)
			c.fill(rec)
			lsn, err := l.Append(rec)
			require.NoError(b, err)
			require.NoError(b, l.Sync())
			img := mem.ProcessCrash()
			require.NoError(b, l.Close())
			segs := segments(b, img)
			seg := segs[len(segs)-1]
			first, err := strconv.ParseUint(strings.TrimSuffix(seg, ".wal"), 10, 64)
			require.NoError(b, err)
			buf := fileBytes(b, img, seg)
			buf[32+int(lsn)-int(first)+24+(1<<20)] ^= 1 // inside the record: torn
			setFile(b, img, seg, buf)
			for b.Loop() {
				b.StopTimer()
				run := img.ProcessCrash()
				b.StartTimer()
				o := opts
				o.FS = run
				l, err := wal.Open(logDir, o)
				require.NoError(b, err)
				require.Equal(b, lsn, l.Recovered().EndLSN)
				b.StopTimer()
				require.NoError(b, l.Close())
				b.StartTimer()
			}
		})
	}
}
