package wal_test

import (
	"os"
	"testing"

	"github.com/durawal/durawal/policy"
	"github.com/durawal/durawal/wal"
	"github.com/stretchr/testify/require"
)

// BenchmarkOpen measures Open of a 1 GiB log (16 full 64 MiB segments and
// a partly filled last one, 1 KiB records, closed cleanly) on a real
// directory, warm: by default (sealed segments trusted by their link
// frame) and with VerifyOnOpen (every frame of every segment checked), and
// Open of a log of 4 small records in its 64 MiB segment (the rest of which
// recovery must find zeros) and of a new log (its first segment
// zero-filled and synced). It reports the bytes of segments read per Open
// and the memory Open allocates.
func BenchmarkOpen(b *testing.B) {
	parent := b.TempDir()
	if *benchDir != "" {
		var err error
		parent, err = os.MkdirTemp(*benchDir, "durawal-bench-")
		require.NoError(b, err)
		b.Cleanup(func() { os.RemoveAll(parent) })
	}
	dir := parent + "/1GiB"
	l, err := wal.Open(dir, wal.Options{Policy: policy.SyncNever()})
	require.NoError(b, err)
	rec := record(0, 0, 1024)
	for l.AppendedLSN() < 1<<30+32<<20 {
		if _, err := l.Append(rec); err != nil {
			b.Fatal(err)
		}
	}
	require.NoError(b, l.Close())
	for _, c := range []struct {
		name   string
		verify bool
	}{{"1GiB", false}, {"1GiB-VerifyOnOpen", true}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			var read int64
			for b.Loop() {
				l, err := wal.Open(dir, wal.Options{VerifyOnOpen: c.verify})
				if err != nil {
					b.Fatal(err)
				}
				read = l.Recovered().BytesRead
				if err := l.Close(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(read), "bytes-read/op")
		})
	}
	b.Run("small", func(b *testing.B) { // 4 records in a 64 MiB segment
		dir := parent + "/small"
		l, err := wal.Open(dir, wal.Options{})
		require.NoError(b, err)
		appendN(b, l, 0, 4, 32)
		require.NoError(b, l.Close())
		var read int64
		for b.Loop() {
			l, err := wal.Open(dir, wal.Options{})
			if err != nil {
				b.Fatal(err)
			}
			read = l.Recovered().BytesRead
			if err := l.Close(); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(read), "bytes-read/op")
	})
	b.Run("new", func(b *testing.B) {
		n := 0
		for b.Loop() {
			dir := parent + "/new"
			l, err := wal.Open(dir, wal.Options{})
			if err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			require.NoError(b, l.Close())
			require.NoError(b, os.RemoveAll(dir))
			n++
			b.StartTimer()
		}
	})
}
