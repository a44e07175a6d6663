package wal_test

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
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

// BenchmarkManyLogs opens 100 logs side by side on a real directory, each
// with one record appended, and reports what each open log costs: heap bytes
// (the log buffer's two halves dominate), bytes of segment files on disk
// (the segment and its prepared spare) and goroutines, with the defaults and
// with the settings docs/usage.md recommends for a process holding hundreds
// of logs (one per Raft group or tenant).
func BenchmarkManyLogs(b *testing.B) {
	const n = 100
	for _, c := range []struct {
		name string
		opts wal.Options
	}{
		{"defaults", wal.Options{}},
		{"many-logs", wal.Options{SegmentSize: 4 << 20, BufferSize: 64 << 10, RecycleSegments: -1}},
	} {
		b.Run(c.name, func(b *testing.B) {
			parent := b.TempDir()
			if *benchDir != "" {
				var err error
				parent, err = os.MkdirTemp(*benchDir, "durawal-bench-")
				require.NoError(b, err)
				b.Cleanup(func() { os.RemoveAll(parent) })
			}
			var heap, disk, gor float64
			for i := range b.N {
				runtime.GC()
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				g0 := runtime.NumGoroutine()
				logs := make([]*wal.Log, n)
				for j := range logs {
					l, err := wal.Open(fmt.Sprintf("%s/%d/%d", parent, i, j), c.opts)
					require.NoError(b, err)
					_, err = l.Append(record(0, 0, 100))
					require.NoError(b, err)
					logs[j] = l
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				heap += float64(after.HeapAlloc) - float64(before.HeapAlloc)
				gor += float64(runtime.NumGoroutine() - g0)
				filepath.WalkDir(fmt.Sprintf("%s/%d", parent, i), func(_ string, d fs.DirEntry, err error) error {
					if err == nil && !d.IsDir() {
						if info, err := d.Info(); err == nil {
							disk += float64(info.Size())
						}
					}
					return nil
				})
				for _, l := range logs {
					require.NoError(b, l.Close())
				}
			}
			b.ReportMetric(heap/float64(b.N*n), "heap-B/log")
			b.ReportMetric(disk/float64(b.N*n), "disk-B/log")
			b.ReportMetric(gor/float64(b.N*n), "goroutines/log")
		})
	}
}
