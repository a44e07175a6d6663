// Aof-modes measures Redis's three appendfsync settings as durawal policies,
// as article 001 of shared/seeds did with redis-benchmark: the latency of one
// client's synchronous commits (p50, p99), and the throughput of 1 and then
// 8 concurrent clients.
//
//	go run ./examples/aof-modes          # 3,000 commits per client
//	go run ./examples/aof-modes -quick   # 300
//
//	always    policy.AppendFsync("always")   = SyncEveryCommit: write + fdatasync per commit,
//	                                           shared by concurrent commits (group commit)
//	everysec  policy.AppendFsync("everysec") = SyncIntervalPostponed(1s, 2s): write per commit,
//	                                           fdatasync once a second in the background
//	no        policy.AppendFsync("no")       = SyncNever: write per commit, the OS decides
package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"runtime"
	"time"

	"github.com/durawal/durawal/examples/internal/lesson"
	"github.com/durawal/durawal/policy"
	"github.com/durawal/durawal/wal"
)

func main() { lesson.Main(run) }

// article is what article 001 measured (Redis 8, macOS SSD): one client's
// p50 and p99 in µs, and SETs per second with 1 and 8 clients.
var article = map[string]string{
	"always":   "2707 / 3484 µs · 424 → 2,263/s",
	"everysec": "31 / 99 µs · 30,777 → 87,857/s",
	"no":       "30 / 51 µs · 34,050 → 88,866/s",
}

func run(ctx context.Context, dir string, out io.Writer) error {
	perClient := lesson.Pick(ctx, 3000, 300)

	t := lesson.NewTable("appendfsync", "p50", "p99", "1 client", "8 clients", "speed-up",
		"fsyncs/commit (8)", "article 001: p50 / p99 · 1 → 8 clients")
	var delayed uint64
	for _, word := range []string{"always", "everysec", "no"} {
		one, err := measure(ctx, filepath.Join(dir, word+"-1"), word, 1, perClient)
		if err != nil {
			return err
		}
		eight, err := measure(ctx, filepath.Join(dir, word+"-8"), word, 8, 8*perClient)
		if err != nil {
			return err
		}
		delayed += one.stats.DelayedWrites + eight.stats.DelayedWrites
		t.Row(word, lesson.Micros(one.lat.Percentile(50)), lesson.Micros(one.lat.Percentile(99)),
			lesson.PerSecond(one.lat.Count(), one.elapsed), lesson.PerSecond(eight.lat.Count(), eight.elapsed),
			fmt.Sprintf("×%.1f", one.elapsed.Seconds()*8/eight.elapsed.Seconds()),
			fmt.Sprintf("%.3f", eight.stats.FsyncsPerCommit()), article[word])
	}
	t.Fprint(out)

	lesson.Explain(out, fmt.Sprintf(`With always, each commit waits for an fdatasync,
		so one client's latency is the disk's sync latency and its rate is one commit per
		sync. Eight clients go several times faster at the same durability because
		commits that arrive while a sync runs share the next one (fsyncs per commit falls
		well below 1): that is the article's ×5.3. everysec and no only write() to the
		page cache at commit, so their median is a memory copy plus a system call and
		their tail is scheduling noise, plus for everysec the once-a-second background
		sync competing with the writes (the article: p99 99 against 51 µs). Eight clients do not
		speed them up here: a commit is already a few µs of CPU on %d CPUs, while
		Redis's ×2.9 came from overlapping network round trips, which an embedded log
		does not have. everysec and no differ not in speed but in what a power loss
		takes: up to about a second of commits for everysec, whatever the OS had not
		written back for no (see examples/what-is-lost). everysec postpones a write
		while a background sync is still running and counts a delayed fsync when it
		stops waiting (Redis aof_delayed_fsync): %d here, as in the article, because
		the disk kept up.`, runtime.NumCPU(), delayed))
	return nil
}

type result struct {
	elapsed time.Duration
	lat     *lesson.Recorder
	stats   wal.Stats
}

// measure commits n records of 100 bytes from clients goroutines to a new log
// in dir under the appendfsync word.
func measure(ctx context.Context, dir, word string, clients, n int) (result, error) {
	p, err := policy.AppendFsync(word)
	if err != nil {
		return result{}, err
	}
	l, err := wal.Open(dir, wal.Options{Policy: p, SegmentSize: 16 << 20})
	if err != nil {
		return result{}, err
	}
	opened := l.Stats().Fsyncs
	record := make([]byte, 100) // a small SET
	elapsed, lat, err := lesson.Load(ctx, clients, n, func(ctx context.Context) error {
		_, err := l.AppendContext(ctx, record)
		return err
	})
	s := l.Stats()
	s.Fsyncs -= opened // count only the commits' fsyncs
	if cerr := l.Close(); err == nil {
		err = cerr
	}
	return result{elapsed, lat, s}, err
}
