package promwal_test

import (
	"fmt"

	"github.com/durawal/durawal/promwal"
	"github.com/durawal/durawal/wal"
	"github.com/durawal/durawal/wal/vfs"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// Register a Collector for a log; every scrape of the registry (promhttp's
// handler on /metrics, in a program) reads the log's Stats once.
func ExampleNewCollector() {
	l, err := wal.Open("/orders", wal.Options{FS: vfs.NewMem(), SegmentSize: 1 << 20})
	if err != nil {
		panic(err)
	}
	defer l.Close()
	reg := prometheus.NewRegistry()
	reg.MustRegister(promwal.NewCollector(l, promwal.Options{ConstLabels: prometheus.Labels{"log": "orders"}}))

	for range 3 {
		if _, err := l.Append([]byte("order")); err != nil {
			panic(err)
		}
	}
	n, err := testutil.GatherAndCount(reg, "durawal_wal_fsync_duration_seconds", "durawal_wal_commit_duration_seconds")
	if err != nil {
		panic(err)
	}
	fmt.Println("histogram series:", n) // fsync, and commit by wait level
	fmt.Println("commits:", l.Stats().CommitWaitSynced.Count)
	// Output:
	// histogram series: 4
	// commits: 3
}
