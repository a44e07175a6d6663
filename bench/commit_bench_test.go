package bench

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/durawal/durawal/groupcommit"
	"github.com/durawal/durawal/policy"
	"github.com/durawal/durawal/wal"
	"github.com/durawal/durawal/wal/vfs"
)

// recordSizes are the payload sizes the commit benchmarks run at; 100 bytes
// is the articles' size.
var recordSizes = []int{100}

func record(size int) []byte {
	rec := make([]byte, size)
	for i := range rec {
		rec[i] = byte('a' + i%26)
	}
	return rec
}

// BenchmarkCommit measures one commit (Append under a policy) shared among
// 1 to 32 committers: articles 004 (levels), 001 (appendfsync) and 000
// (16 committers). Compare fsyncs/op and commits/fsync across committers to
// see group commit; compare policies to see what durability costs.
func BenchmarkCommit(b *testing.B) {
	for _, p := range policies {
		for _, n := range []int{1, 8, 16, 32} {
			for _, size := range recordSizes {
				b.Run(name("policy", p.name, "committers", n, "size", size), func(b *testing.B) {
					l := openLog(b, mustPolicy(b, p.pol), groupcommit.Options{})
					rec := record(size)
					b.SetBytes(int64(size))
					b.ReportAllocs()
					commitLoad(b, l, n, func(ctx context.Context) error {
						_, err := l.AppendContext(ctx, rec)
						return err
					})
				})
			}
		}
	}
}

// BenchmarkSyncMethod measures commits under each sync method
// (innodb_flush_method / wal_sync_method, wal.Options.SyncMethod) at 1 and
// 16 committers, at InnoDB levels 1 (sync at commit) and 2 (write at
// commit, sync once a second; article 000's "=2 + O_DIRECT" row). It reports
// commits/s, p50-ns, p99-ns and fsyncs/op (fsyncs per commit: 0 under
// O_DSYNC, whose writes are durable on return). A method the directory's
// filesystem refuses is skipped with the reason.
func BenchmarkSyncMethod(b *testing.B) {
	for _, level := range []int{1, 2} {
		pol, err := policy.InnoDB(level)
		if err != nil {
			b.Fatal(err)
		}
		for _, m := range vfs.SyncMethods() {
			for _, n := range []int{1, 16} {
				b.Run(name("innodb", level, "method", methodName(m), "committers", n), func(b *testing.B) {
					l := openLogWith(b, wal.Options{Policy: pol, SyncMethod: m})
					rec := record(recordSizes[0])
					b.SetBytes(int64(len(rec)))
					b.ReportAllocs()
					commitLoad(b, l, n, func(ctx context.Context) error {
						_, err := l.AppendContext(ctx, rec)
						return err
					})
				})
			}
		}
	}
}

// methodName spells a sync method for a benchmark name (no "|").
func methodName(m vfs.SyncMethod) string { return strings.ReplaceAll(m.String(), "|", "+") }

// BenchmarkGroupCommit measures level-1 commits under three group-commit
// settings (article 002): the default queue with its adaptive merge wait
// (adaptive), the plain leader/follower queue (plain), and MySQL's
// binlog_group_commit_sync_delay=500 µs with _no_delay_count=10
// (delay-500us-10).
func BenchmarkGroupCommit(b *testing.B) {
	groups := []struct {
		name string
		gc   groupcommit.Options
	}{
		{"adaptive", groupcommit.Options{}},
		{"plain", groupcommit.Options{DisableAdaptiveWait: true}},
		{"delay-500us-10", groupcommit.Options{Delay: 500 * time.Microsecond, MaxBatch: 10, Style: groupcommit.SyncStageWait}},
	}
	pol := mustPolicy(b, policies[0].pol) // innodb-1
	for _, g := range groups {
		for _, n := range []int{1, 8, 16, 32} {
			for _, size := range recordSizes {
				b.Run(name("group", g.name, "committers", n, "size", size), func(b *testing.B) {
					l := openLog(b, pol, g.gc)
					rec := record(size)
					b.SetBytes(int64(size))
					b.ReportAllocs()
					commitLoad(b, l, n, func(ctx context.Context) error {
						_, err := l.AppendContext(ctx, rec)
						return err
					})
				})
			}
		}
	}
}

// BenchmarkBatch measures AppendBatch of 2,000 records on one goroutine, one
// wait per batch (article 001's pipelined batches). One op is one batch;
// MB/s counts record payload.
func BenchmarkBatch(b *testing.B) {
	const batch = 2000
	for _, p := range policies {
		if !strings.HasPrefix(p.name, "appendfsync-") {
			continue // article 001's measurement; the InnoDB levels wait the same ways
		}
		for _, size := range recordSizes {
			b.Run(name("policy", p.name, "batch", batch, "size", size), func(b *testing.B) {
				l := openLog(b, mustPolicy(b, p.pol), groupcommit.Options{})
				recs := make([][]byte, batch)
				for i := range recs {
					recs[i] = record(size)
				}
				b.SetBytes(int64(size) * batch)
				b.ReportAllocs()
				commitLoad(b, l, 1, func(ctx context.Context) error {
					_, err := l.AppendBatchContext(ctx, recs)
					return err
				})
				b.ReportMetric(float64(b.N)*batch/b.Elapsed().Seconds(), "records/s")
			})
		}
	}
}
