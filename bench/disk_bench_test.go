package bench

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/durawal/durawal/internal/measure"
	"github.com/durawal/durawal/wal/vfs"
)

// BenchmarkDisk measures this disk without the log: write(size) at
// consecutive offsets of a preallocated, zero-filled file, with and without
// the sync (fdatasync on Linux, through vfs.OS, as the log syncs). It is the
// baseline a level-1 commit on one goroutine cannot beat.
func BenchmarkDisk(b *testing.B) {
	for _, op := range []string{"write+sync", "write"} {
		for _, size := range recordSizes {
			b.Run(name("op", op, "size", size), func(b *testing.B) {
				benchDisk(b, size, op == "write+sync")
			})
		}
	}
}

func benchDisk(b *testing.B, size int, sync bool) {
	fs := vfs.OS()
	f, err := fs.Create(filepath.Join(benchDir(b), "baseline"), vfs.Fdatasync)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	// Preallocate a region that the loop wraps around in, zero-filled and
	// synced, so that a sync flushes data only, never size or extents.
	const region = 8 << 20
	zeros := make([]byte, 1<<20)
	for off := int64(0); off < region; off += int64(len(zeros)) {
		if _, err := f.WriteAt(zeros, off); err != nil {
			b.Fatal(err)
		}
	}
	if err := f.Sync(); err != nil { // the zero-fill and the size, durable
		b.Fatal(err)
	}
	rec := record(size)
	r := measure.NewRecorder(1024)
	var off int64
	b.SetBytes(int64(size))
	b.ReportAllocs()
	for b.Loop() {
		start := time.Now()
		if _, err := f.WriteAt(rec, off); err != nil {
			b.Fatal(err)
		}
		if sync {
			if err := f.Sync(); err != nil { // the record just written, durable
				b.Fatal(err)
			}
		}
		r.Add(time.Since(start))
		if off += int64(size); off+int64(size) > region {
			off = 0
		}
	}
	s := measure.Summarize(measure.Merge(r))
	b.ReportMetric(float64(s.P50), "p50-ns")
	b.ReportMetric(float64(s.P99), "p99-ns")
}
