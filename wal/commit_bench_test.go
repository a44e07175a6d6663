package wal_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/durawal/durawal/policy"
	"github.com/durawal/durawal/wal"
	"github.com/durawal/durawal/wal/vfs"
)

// BenchmarkCommitCPU measures the CPU cost of the commit path, with no
// disk to add noise: 100-byte commits to a log on a MemFS from 1 and 16
// committers, under a buffered policy (the commit only copies into the log
// buffer) and a write-only one (each commit is written: a memory copy),
// with no Observer and with one whose funcs all count (observer=funcs).
// This is where the cost of the latency histograms (two clock reads and a
// few atomic adds per commit) and of the Observer would show; compare
// observer=none with an older build for the histograms' cost.
// bench.BenchmarkCommit measures commits on a real disk.
func BenchmarkCommitCPU(b *testing.B) {
	var c eventCounts
	for _, pc := range []struct {
		name string
		pol  policy.Policy
	}{
		{"buffered", policy.AsyncCommit(200*time.Millisecond, 1<<20)},
		{"sync-never", policy.SyncNever()},
	} {
		for _, committers := range []int{1, 16} {
			for _, obs := range []struct {
				name string
				o    wal.Observer
			}{{"none", nil}, {"funcs", c.observer()}} {
				b.Run(fmt.Sprintf("policy=%s/committers=%d/observer=%s", pc.name, committers, obs.name), func(b *testing.B) {
					l, err := wal.Open(faultDir, wal.Options{FS: vfs.NewMem(), SegmentSize: 16 << 20, Policy: pc.pol, Observer: obs.o})
					if err != nil {
						b.Fatal(err)
					}
					defer l.Close()
					rec := record(0, 0, 100)
					b.SetBytes(int64(len(rec)))
					b.ReportAllocs()
					b.SetParallelism(max(committers/2, 1)) // × GOMAXPROCS goroutines
					b.ResetTimer()
					if committers == 1 {
						for b.Loop() {
							if _, err := l.Append(rec); err != nil {
								b.Fatal(err)
							}
						}
						return
					}
					b.RunParallel(func(pb *testing.PB) {
						for pb.Next() {
							if _, err := l.Append(rec); err != nil {
								b.Error(err)
								return
							}
						}
					})
				})
			}
		}
	}
}
