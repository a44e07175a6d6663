// Group-commit shows how many committers share one fdatasync at full
// durability (policy.SyncEveryCommit, InnoDB innodb_flush_log_at_trx_commit=1).
// It first repeats article 004's second table, 10,000 commits from one
// goroutine and then from eight, counting fsyncs; then it turns on the knobs
// article 002 used to grow groups on purpose, MySQL's
// binlog_group_commit_sync_delay=500 (µs) and
// binlog_group_commit_sync_no_delay_count=10, which are
// groupcommit.Options{Delay: 500 * time.Microsecond, MaxBatch: 10}.
//
//	go run ./examples/group-commit          # 10,000 commits per row
//	go run ./examples/group-commit -quick   # 1,000
//
// The leader/follower queue: the first committer with no flush in flight
// becomes the leader, writes and syncs everything appended so far, and wakes
// every committer that sync covered. Commits that arrive during its sync wait
// for the next one and share it.
package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/durawal/durawal/examples/internal/lesson"
	"github.com/durawal/durawal/groupcommit"
	"github.com/durawal/durawal/internal/articles"
	"github.com/durawal/durawal/internal/measure"
	"github.com/durawal/durawal/policy"
	"github.com/durawal/durawal/wal"
)

func main() { lesson.Main(run) }

// mysqlFix is article 002's setting: wait up to 500 µs for up to 10 commits.
var mysqlFix = groupcommit.Options{Delay: 500 * time.Microsecond, MaxBatch: 10}

func run(ctx context.Context, dir string, quick bool, out io.Writer) error {
	commits := lesson.Pick(quick, 10_000, 1_000)

	cases := []struct {
		committers int
		group      groupcommit.Options
		label      string
		article    string // article 004 (MySQL 8.4, 10,000 commits)
	}{
		{1, groupcommit.Options{}, "none", "10,209 fsyncs · 1.0 /fsync · 7,680/s"},
		{8, groupcommit.Options{}, "none", "3,688 fsyncs · 2.7 /fsync · 17,990/s"},
		{8, groupcommit.Options{DisableAdaptiveWait: true}, "none, adaptive wait off", ""},
		{8, mysqlFix, "500 µs or 10 commits", ""},
		{16, groupcommit.Options{}, "none", ""},
		{16, mysqlFix, "500 µs or 10 commits", ""},
	}
	t := lesson.NewTable("committers", "group-forming wait", "fsyncs", "commits/fsync", "commits/s",
		"p50", "p99", "delays ended by count / by time", "article 004")
	var f figures
	for i, c := range cases {
		l, err := wal.Open(filepath.Join(dir, fmt.Sprint("case", i)), wal.Options{
			Policy:      policy.SyncEveryCommit(), // every commit waits for its fdatasync
			GroupCommit: c.group,
			SegmentSize: 16 << 20,
		})
		if err != nil {
			return err
		}
		opened := l.Stats().Fsyncs // creating the segment file is not a commit's cost
		record := make([]byte, 100)
		elapsed, lat, err := lesson.Load(ctx, c.committers, commits, func(ctx context.Context) error {
			_, err := l.AppendContext(ctx, record)
			return err
		})
		s := l.Stats()
		if cerr := l.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
		fsyncs := s.Fsyncs - opened
		rate := float64(s.Commits) / elapsed.Seconds()
		perFsync := float64(s.Commits) / float64(max(fsyncs, 1))
		switch {
		case c.committers == 1:
			f.one = rate
		case c.committers == 8 && c.group == (groupcommit.Options{}):
			f.eight, f.perFsync8, f.p50none = rate, perFsync, lat.Percentile(50)
		case c.committers == 8 && c.group.DisableAdaptiveWait:
			f.perFsyncPlain = perFsync
		case c.committers == 8 && c.group == mysqlFix:
			f.p50delay, f.perGroup = lat.Percentile(50), elapsed/time.Duration(max(s.Group.Groups, 1))
		case c.committers == 16 && c.group == mysqlFix:
			f.byCount16, f.byTime16 = s.Group.TriggerCount, s.Group.TriggerTimeout
		}
		t.Row(c.committers, c.label, measure.Thousands(int64(fsyncs)),
			fmt.Sprintf("%.1f", perFsync), lesson.PerSecond(int(s.Commits), elapsed),
			lesson.Micros(lat.Percentile(50)), lesson.Micros(lat.Percentile(99)),
			fmt.Sprintf("%d / %d", s.Group.TriggerCount, s.Group.TriggerTimeout), c.article)
	}
	t.Fprint(out)

	lesson.Explain(out, explain(f))
	lesson.Sources(out, articles.A004, articles.A002)
	return nil
}

// figures are what the explanation is chosen from.
type figures struct {
	one, eight               float64       // commits/s: 1 committer, 8 (default queue)
	perFsync8, perFsyncPlain float64       // commits per fsync, 8 committers: default, adaptive wait off
	p50none, p50delay        time.Duration // 8 committers: median commit without and with the delay
	perGroup                 time.Duration // 8 committers with the delay: wall time per group
	byCount16, byTime16      uint64        // 16 committers with the delay: how the delays ended
}

// explain returns the lesson's paragraph, each claim chosen from the
// measured figures.
func explain(f figures) string {
	var b strings.Builder
	b.WriteString(`Every row is full durability: no commit returns before an fdatasync covering
		it. One committer needs one fsync per commit. `)
	speedup := f.eight / f.one
	if speedup >= 1.2 {
		fmt.Fprintf(&b, `Eight committers share them (%.1f commits per fsync), so the disk does
			fewer syncs for the same commits and throughput rises (×%.1f here, ×2.3 in the
			article): while the leader's sync runs, the others append and queue, and the
			next sync covers them all. `, f.perFsync8, speedup)
	} else {
		fmt.Fprintf(&b, `Eight committers share them (%.1f commits per fsync), so the disk does
			fewer syncs for the same commits, yet throughput did not rise here (×%.1f, ×2.3
			in the article): the syncs were not what limited this machine. `, f.perFsync8, speedup)
	}
	fmt.Fprintf(&b, `A plain leader/follower queue tends to split closed-loop committers into two
		cohorts that take turns, about half of them per sync (%.1f commits per fsync in the
		"adaptive wait off" row here, 2.7 in the article); durawal's leader waits a fraction
		of a sync for the previous group to come back, so that more join: %.1f per fsync
		with the wait on`, f.perFsyncPlain, f.perFsync8)
	if f.perFsync8 <= f.perFsyncPlain {
		b.WriteString(`, no better here`)
	}
	b.WriteString(`. The group delay (article 002's fix) makes a leader wait before it syncs,
		so that more commits join. With eight committers a count of 10 cannot be reached,
		so every delay runs to its time limit ("by time"): `)
	fmt.Fprintf(&b, `each group took %s, against 500 µs of delay plus one sync, and the median
		commit took %s `, lesson.Micros(f.perGroup), lesson.Micros(f.p50delay))
	if f.p50delay > f.p50none {
		fmt.Fprintf(&b, `instead of %s`, lesson.Micros(f.p50none))
	} else {
		fmt.Fprintf(&b, `against %s without it, no worse only because the plain queue waited
			as long`, lesson.Micros(f.p50none))
	}
	if f.byCount16 > f.byTime16 {
		fmt.Fprintf(&b, `; with sixteen, most delays ended by count (%d of %d). `,
			f.byCount16, f.byCount16+f.byTime16)
	} else {
		fmt.Fprintf(&b, `; with sixteen, a count of 10 is within reach, yet here most delays
			still ended by time (%d of %d). `, f.byTime16, f.byCount16+f.byTime16)
	}
	b.WriteString(`The delay pays where fsyncs are scarce (a slow disk, committers that arrive
		spread out); where the groups are already full it only adds latency.`)
	return lesson.OneLine(b.String())
}
