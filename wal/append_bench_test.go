package wal_test

import (
	"flag"
	"fmt"
	"os"
	"testing"

	"github.com/durawal/durawal/policy"
	"github.com/durawal/durawal/wal"
	"github.com/stretchr/testify/require"
)

var benchDir = flag.String("dir", "", "directory on the disk BenchmarkAppend measures (default: a temporary directory under $TMPDIR)")

// BenchmarkAppend measures raw append throughput without sync
// (policy.SyncNever: each Append returns after its write) on a real
// directory, segment preparation and rolls included, for records of 100,
// 1000 and 10000 bytes. MB/s counts record payload bytes.
func BenchmarkAppend(b *testing.B) {
	for _, size := range []int{100, 1000, 10000} {
		b.Run(fmt.Sprintf("size=%d", size), func(b *testing.B) {
			dir := b.TempDir()
			if *benchDir != "" {
				var err error
				dir, err = os.MkdirTemp(*benchDir, "durawal-bench-")
				require.NoError(b, err)
				b.Cleanup(func() { os.RemoveAll(dir) })
			}
			l, err := wal.Open(dir, wal.Options{Policy: policy.SyncNever()})
			require.NoError(b, err)
			rec := record(0, 0, size)
			b.SetBytes(int64(size))
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				if _, err := l.Append(rec); err != nil {
					b.Fatal(err)
				}
				n++
			}
			b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "records/s")
			s := l.Stats()
			b.ReportMetric(float64(s.WriteCalls)/float64(n), "writes/op")
			require.NoError(b, l.Close())
		})
	}
}
