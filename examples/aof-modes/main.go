// Aof-modes measures Redis's three appendfsync settings as durawal policies,
// as article 001 (Redis appendfsync always/everysec/no, Redis 8.10.2 on a macOS
// SSD) did with redis-benchmark: the latency of one
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
	"strings"
	"time"

	"github.com/durawal/durawal/examples/internal/lesson"
	"github.com/durawal/durawal/internal/articles"
	"github.com/durawal/durawal/policy"
	"github.com/durawal/durawal/wal"
)

func main() { lesson.Main(run) }

// article is what article 001 measured (Redis 8.10.2, macOS SSD): one client's
// p50 and p99 in µs, and SETs per second with 1 and 8 clients.
var article = map[string]string{
	"always":   "2707 / 3484 µs · 424 → 2,263/s",
	"everysec": "31 / 99 µs · 30,777 → 87,857/s",
	"no":       "30 / 51 µs · 34,050 → 88,866/s",
}

func run(ctx context.Context, dir string, quick bool, out io.Writer) error {
	perClient := lesson.Pick(quick, 3000, 300)

	t := lesson.NewTable("appendfsync", "p50", "p99", "1 client", "8 clients", "speed-up",
		"fsyncs/commit (8)", "article 001: p50 / p99 · 1 → 8 clients")
	var delayed uint64
	modes := map[string]mode{}
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
		m := mode{
			p50:             one.lat.Percentile(50),
			speedup:         one.elapsed.Seconds() * 8 / eight.elapsed.Seconds(),
			fsyncsPerCommit: eight.stats.FsyncsPerCommit(),
			longest:         max(one.elapsed, eight.elapsed),
		}
		modes[word] = m
		t.Row(word, lesson.Micros(m.p50), lesson.Micros(one.lat.Percentile(99)),
			lesson.PerSecond(one.lat.Count(), one.elapsed), lesson.PerSecond(eight.lat.Count(), eight.elapsed),
			fmt.Sprintf("×%.1f", m.speedup), fmt.Sprintf("%.3f", m.fsyncsPerCommit), article[word])
	}
	t.Fprint(out)

	lesson.Explain(out, explain(modes, runtime.NumCPU(), delayed))
	lesson.Sources(out, articles.A001)
	return nil
}

// mode is what the explanation is chosen from, for one appendfsync word.
type mode struct {
	p50             time.Duration // one client
	speedup         float64       // 8 clients' rate over one client's
	fsyncsPerCommit float64       // with 8 clients
	longest         time.Duration // the longer of the two runs
}

// explain returns the lesson's paragraph, each claim chosen from the
// measured figures: modes by appendfsync word, the CPU count, and the
// delayed fsyncs counted.
func explain(modes map[string]mode, cpus int, delayed uint64) string {
	always, everysec, no := modes["always"], modes["everysec"], modes["no"]
	var b strings.Builder
	b.WriteString(`With always, each commit waits for an fdatasync, so one client's latency
		is the disk's sync latency and its rate is one commit per sync. `)
	switch {
	case always.speedup >= 2:
		fmt.Fprintf(&b, `Eight clients went ×%.1f faster at the same durability, because commits
			that arrive while a sync runs share the next one (%.3f fsyncs per commit): the
			article saw ×5.3. `, always.speedup, always.fsyncsPerCommit)
	case always.fsyncsPerCommit < 0.9:
		fmt.Fprintf(&b, `Eight clients shared syncs (%.3f fsyncs per commit) but went only ×%.1f as
			fast, so something other than the disk's syncs limited them here: CPU, scheduling
			or a loaded machine (the article saw ×5.3). `, always.fsyncsPerCommit, always.speedup)
	default:
		fmt.Fprintf(&b, `Eight clients went ×%.1f as fast and barely shared syncs (%.3f fsyncs per
			commit), so something other than the disk's syncs limited them here: CPU,
			scheduling or a loaded machine (the article saw ×5.3, commits sharing syncs). `,
			always.speedup, always.fsyncsPerCommit)
	}
	fmt.Fprintf(&b, `everysec and no only write() to the page cache at commit, so their median
		(%s and %s) is a memory copy plus a system call, against %s for always`,
		lesson.Micros(everysec.p50), lesson.Micros(no.p50), lesson.Micros(always.p50))
	if always.p50 < 3*max(everysec.p50, no.p50) {
		b.WriteString(`: hardly cheaper, so this directory's fdatasync is nearly free (tmpfs,
			overlayfs, or a disk that does not wait for its media)`)
	}
	b.WriteString(`; their tail is scheduling noise`)
	if everysec.longest >= time.Second {
		b.WriteString(`, plus for everysec the once-a-second background sync competing with the
			writes (the article: p99 99 against 51 µs). `)
	} else {
		b.WriteString(` (the article's everysec p99, 99 against 51 µs, includes the
			once-a-second background sync competing with the writes; these runs ended before
			the first one). `)
	}
	if max(everysec.speedup, no.speedup) < 1.5 {
		fmt.Fprintf(&b, `Eight clients do not speed them up here (×%.1f and ×%.1f): a commit is
			already nothing but CPU work on %d CPUs, while Redis's ×2.9 came from overlapping
			network round trips, which an embedded log does not have. `,
			everysec.speedup, no.speedup, cpus)
	} else {
		fmt.Fprintf(&b, `Eight clients sped them up ×%.1f and ×%.1f here, by running commits on %d
			CPUs at once; Redis's ×2.9 came instead from overlapping network round trips,
			which an embedded log does not have. `, everysec.speedup, no.speedup, cpus)
	}
	b.WriteString(`everysec and no differ above all in what a power loss takes: up to about a
		second of commits for everysec, whatever the OS had not written back for no (see
		examples/what-is-lost). everysec postpones a write while a background sync is still
		running and counts a delayed fsync when it stops waiting (Redis aof_delayed_fsync): `)
	switch {
	case delayed > 0:
		fmt.Fprintf(&b, `%d here, where the article had 0: a background sync ran so long that a
			write stopped waiting for it, so the disk did not keep up.`, delayed)
	case everysec.longest < time.Second:
		b.WriteString(`0 here, as in the article, but only because no background sync ran.`)
	default:
		b.WriteString(`0 here, as in the article, because the disk kept up.`)
	}
	return lesson.OneLine(b.String())
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
