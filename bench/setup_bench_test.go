package bench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/durawal/durawal/groupcommit"
	"github.com/durawal/durawal/internal/measure"
	"github.com/durawal/durawal/policy"
	"github.com/durawal/durawal/wal"
	"golang.org/x/sys/unix"
)

// dirFlag is the parent directory of the benchmarks' logs; it must be on the
// disk to measure. Empty: b.TempDir (TMPDIR).
var dirFlag = flag.String("dir", "", "parent `directory` of the benchmark logs (default: TMPDIR)")

// segmentSize keeps zero-filling a new log's first segment short; the
// benchmarks' logs stay far smaller.
const segmentSize = 16 << 20

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(m.Run())
}

var warnOnce sync.Once

// benchDir returns a fresh directory for one log, removed when b ends, and
// logs once if the filesystem makes fsync nearly free.
func benchDir(b *testing.B) string {
	b.Helper()
	dir := b.TempDir()
	if *dirFlag != "" {
		var err error
		if dir, err = os.MkdirTemp(*dirFlag, "durawal-bench-"); err != nil {
			b.Fatalf("-dir: %v", err)
		}
		b.Cleanup(func() { os.RemoveAll(dir) })
	}
	warnOnce.Do(func() {
		var st unix.Statfs_t
		if unix.Statfs(dir, &st) != nil {
			return
		}
		switch uint64(st.Type) {
		case 0x01021994, 0x858458F6, 0x794C7630: // tmpfs, ramfs, overlayfs
			b.Logf("warning: %s is on tmpfs/overlayfs, where fsync is nearly free; pass -args -dir /path/on/disk", dir)
		}
	})
	return dir
}

// openLog opens a log in a fresh directory and closes it when b ends.
func openLog(b *testing.B, pol policy.Policy, gc groupcommit.Options) *wal.Log {
	b.Helper()
	return openLogWith(b, wal.Options{Policy: pol, GroupCommit: gc})
}

// openLogWith opens a log with opts (SegmentSize defaults to segmentSize) in
// a fresh directory and closes it when b ends. A sync method the directory's
// filesystem refuses skips b with the reason.
func openLogWith(b *testing.B, opts wal.Options) *wal.Log {
	b.Helper()
	if opts.SegmentSize == 0 {
		opts.SegmentSize = segmentSize
	}
	l, err := wal.Open(benchDir(b), opts)
	if errors.Is(err, wal.ErrSyncMethodUnsupported) {
		b.Skipf("%v", err)
	}
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close() })
	return l
}

// policies are the settings the articles compare, by benchmark name.
var policies = []struct {
	name string
	pol  func() (policy.Policy, error)
}{
	{"innodb-1", func() (policy.Policy, error) { return policy.InnoDB(1) }},
	{"innodb-2", func() (policy.Policy, error) { return policy.InnoDB(2) }},
	{"innodb-0", func() (policy.Policy, error) { return policy.InnoDB(0) }},
	{"appendfsync-always", func() (policy.Policy, error) { return policy.AppendFsync("always") }},
	{"appendfsync-everysec", func() (policy.Policy, error) { return policy.AppendFsync("everysec") }},
	{"appendfsync-no", func() (policy.Policy, error) { return policy.AppendFsync("no") }},
	{"sync-binlog-4", func() (policy.Policy, error) { return policy.SyncBinlog(4) }},
	{"pg-async", func() (policy.Policy, error) { return policy.PostgresAsync(), nil }},
}

func mustPolicy(b *testing.B, f func() (policy.Policy, error)) policy.Policy {
	b.Helper()
	p, err := f()
	if err != nil {
		b.Fatal(err)
	}
	return p
}

// commitLoad runs b.N calls of commit shared among n committers, timing
// each, and reports fsyncs/op, commits/fsync, p50-ns and p99-ns. One op is
// one call of commit. b.Loop does not fit here: the iterations are spread
// over n goroutines, so the count is taken from b.N.
func commitLoad(b *testing.B, l *wal.Log, n int, commit func(ctx context.Context) error) {
	b.Helper()
	ctx := b.Context()
	recs := make([]*measure.Recorder, n)
	for i := range recs {
		recs[i] = measure.NewRecorder(b.N/n + 1)
	}
	var (
		next   atomic.Int64
		failed atomic.Pointer[error]
		wg     sync.WaitGroup
	)
	before := l.Stats()
	b.ResetTimer()
	for i := range n {
		rec := recs[i]
		wg.Go(func() {
			for next.Add(1) <= int64(b.N) && failed.Load() == nil {
				start := time.Now()
				err := commit(ctx)
				rec.Add(time.Since(start))
				if err != nil {
					failed.CompareAndSwap(nil, errPtr(err))
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	if p := failed.Load(); p != nil {
		b.Fatal(*p)
	}
	after := l.Stats()
	reportCounters(b, before, after, measure.Merge(recs...))
}

// errPtr returns a pointer to a copy of err; taking &err in the commit loop
// would move err to the heap at every iteration.
func errPtr(err error) *error { return &err }

// reportCounters reports the counter-derived metrics of one benchmark.
func reportCounters(b *testing.B, before, after wal.Stats, samples []time.Duration) {
	fsyncs := float64(after.Fsyncs - before.Fsyncs)
	commits := float64(after.Commits - before.Commits)
	b.ReportMetric(fsyncs/float64(b.N), "fsyncs/op")
	if sec := b.Elapsed().Seconds(); sec > 0 {
		b.ReportMetric(commits/sec, "commits/s")
	}
	if fsyncs > 0 {
		b.ReportMetric(commits/fsyncs, "commits/fsync")
	} else {
		b.ReportMetric(0, "commits/fsync")
	}
	s := measure.Summarize(samples)
	b.ReportMetric(float64(s.P50), "p50-ns")
	b.ReportMetric(float64(s.P99), "p99-ns")
}

// name formats key=value sub-benchmark names.
func name(kv ...any) string {
	s := ""
	for i := 0; i+1 < len(kv); i += 2 {
		if s != "" {
			s += "/"
		}
		s += fmt.Sprintf("%v=%v", kv[i], kv[i+1])
	}
	return s
}
