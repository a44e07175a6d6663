// Command walbench reruns, against durawal on a real directory, the
// experiments of the four articles the project reproduces, and prints their
// tables in Markdown. The articles (internal/articles has the full
// citations, which walbench prints at the top): 000, on
// innodb_flush_log_at_trx_commit and P99 on NVMe (Chinese, MySQL 8.0.35);
// 001, "appendfsync always/everysec/no" (Chinese, bigywater.tech, 2026,
// Redis 8.10.2 on a macOS SSD); 002, the MySQL fsync cliff under concurrent
// writes (Chinese, MySQL 8.0 in Docker); and 004, on counting the InnoDB
// redo log's fsyncs (Vietnamese, MySQL 8.4 on tmpfs). The experiments:
//
//	disk    the baseline: raw write+fdatasync and raw write latency on a
//	        preallocated file in the same directory, the physical limit of
//	        this disk that every other table can be read against
//	levels  article 004: 2,000 commits under InnoDB levels 1, 2 and 0 on one
//	        goroutine, then level 1 over 8 goroutines (fsyncs, commits/s,
//	        commits per fsync)
//	aof     article 001: Redis appendfsync always/everysec/no: latency of
//	        1,000 synchronous commits, batches of 2,000 records, 1 vs 8
//	        committers, delayed fsyncs
//	cliff   article 002: commit latency p50/p95/p99/p99.9/max for 1, 8, 16,
//	        32 committers at level 1, level 2, level 1 with a 500 µs /
//	        10-commit group delay, and level 1 without the adaptive merge
//	        wait; then the adaptive and plain queues compared round by round
//	tail    article 000: 16 committers for a fixed time at levels 1, 2, 0
//	        (commits/s, p50, p99, p99.9, max, log-buffer waits)
//	queue   not run by default: the adaptive and plain group-commit queues
//	        back to back at 8, 16 and 32 committers, more commits each
//	long    not run by default (the worst commit): each cell
//	        appends -long-volume (default 768 MiB, 24 MiB with -quick) of
//	        1 KiB records (or -size, if given) through many segments:
//	        innodb=1 with 16 committers, then a raw write+fdatasync loop for
//	        as long; innodb=2 and innodb=0 with one committer; a raw pwrite
//	        append loop of the same volume. Prints p50 … p99.99, max,
//	        commits over 10 and 100 ms, throughput, write amplification
//	        (device bytes from /proc/diskstats ÷ payload), the issue's
//	        targets, and the 5 slowest stalls of each log cell with what
//	        they waited on (spare segment, roll, log buffer, fdatasync). A
//	        default run takes several minutes; -long-grow lets the log grow
//	        (no checkpoints), so that every segment is a new one
//	bandwidth not run by default: records of 4 KiB, 64 KiB and 1 MiB under
//	        SyncEveryCommit (1 and 8 committers) and SyncNever, in MB/s,
//	        beside raw loops on the same filesystem: a sequential write with
//	        no sync, write+fdatasync of one record and of eight at once
//	prepare not run by default: a segment file made ready by zero-fill,
//	        fallocate, fallocate ZERO_RANGE, or fallocate with zeros written
//	        ahead of the records, then write+fdatasync of 1 KiB and 16 KiB
//	        into it: the preparation's own cost beside what each later
//	        fdatasync pays (run it with -dir on ext4 and on XFS)
//	servers not run by default (the real servers beside the library):
//	        redis-server under appendfsync always, everysec and no, and
//	        mariadbd under innodb_flush_log_at_trx_commit 1, 2 and 0 and
//	        under 1 with log_bin and sync_binlog=1, each at 1, 8 and 16
//	        client connections (one request in flight each), beside
//	        durawal in-process under the equivalent policy; commits/s,
//	        p50, p99 and fsyncs per commit from the server's counter, the
//	        kernel (syscall tracepoints of the server's process, through
//	        tracefs: needs root) and wal.Stats. walbench starts the servers
//	        in the run directory and stops them (their PIDs only); one that
//	        is not installed is skipped with the apt-get line to install it
//
// Every cell is measured once per round (-rounds, default 3), and the
// rounds are interleaved: round 1 runs every cell in order, round 2 in
// reverse, round 3 in order, so a disk that drifts during the run slows
// every cell alike. Tables print the median of the rounds with its range,
// median [min–max], and mark with * a figure whose range is wider than its
// distance from the neighbouring row's median (which of the two is larger
// is not settled). Ratios (8 vs 1 committers, against the disk, adaptive ÷
// plain) are taken within each round. The disk baseline runs in every round
// and once more at the end (drift check).
//
// Tables that show a p99.9 or a max also say what the slowest commits (the
// slowest 0.1% of each round, at most 32) waited on: a sampler reads
// wal.Stats every millisecond while the committers run, and the counters
// that moved during each slow commit name a segment roll, a wait for the
// next segment, a full log buffer, a background sync, a postponed write, a
// group delay, a long fdatasync or write(), or a GC cycle; "none counted"
// leaves the scheduler or a lock. Only the public API of package wal is used.
//
// levels and tail also run the sync method (innodb_flush_method) as a
// dimension: by default the article's O_DIRECT rows (=2 + O_DIRECT and
// =0 + O_DIRECT) after the fdatasync rows; -method lists methods to run at
// every level instead (fdatasync, fsync, O_DSYNC, O_DIRECT,
// O_DIRECT|O_DSYNC). A method the directory's filesystem refuses is
// skipped with a warning.
//
// Usage:
//
//	go run ./bench/cmd/walbench [-exp disk,levels,aof,cliff,tail,queue,long,bandwidth,prepare,servers] [-quick]
//	    [-rounds N] [-dir PARENT] [-size BYTES] [-method LIST] [-json FILE] [-plot DIR]
//	    [-long-volume BYTES] [-long-grow]
//
// -json writes every round's figures and each cell's spreads; -plot writes
// charts as SVG (fonts embedded) and PNG, each with a caption: latency by
// percentile on a stretched tail axis (50 … 99.99 %) for levels and aof,
// and commits per fsync (with the y = x line) and p99 against committers
// for cliff. Both print the paths they wrote.
//
// How to read it: every figure is measured here, on this machine and this
// directory's disk; the columns labelled "article" are the articles'
// figures, from their hardware and their database, and are printed only so
// the shape can be compared (which setting wins, by how much), never the
// absolute numbers. fsyncs are counted over the commits only, from after
// Open to the last commit's return: neither the syncs that prepare the
// first segment nor the final sync at Close (the examples/ lessons count
// the same way). Over each log's whole life they are checked against the
// system calls counted by a faultfs.Counter under the log; a warning line says
// if they ever disagree. On tmpfs or overlayfs fsync is nearly free and the
// tables say little; walbench warns when it sees them.
//
// Each log is opened in a fresh subdirectory of a fresh run directory
// (under -dir, default TMPDIR), removed when its run ends; the run directory
// is removed at exit. A default run takes about a minute on the project's
// 2-core development machine; -quick is a smoke run of a few seconds with
// reduced counts.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/durawal/durawal/wal"
)

// experiments lists the experiment names in the order they run; disk runs
// first so the other tables can be read against it.
var experiments = []string{"disk", "levels", "aof", "cliff", "tail"}

// extraExperiments run only when -exp names them, after the others.
var extraExperiments = []string{"queue", "long", "bandwidth", "prepare", "servers"}

// allExperiments is every experiment -exp accepts, in run order.
func allExperiments() []string { return append(slices.Clone(experiments), extraExperiments...) }

// errUsage marks an error in the command line (exit status 2).
var errUsage = errors.New("usage")

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	switch {
	case err == nil:
	case errors.Is(err, flag.ErrHelp):
	case errors.Is(err, errUsage):
		fmt.Fprintln(os.Stderr, "walbench:", strings.TrimPrefix(err.Error(), "usage: "))
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "walbench:", err)
		os.Exit(1)
	}
}

// config is the parsed command line.
type config struct {
	parent  string      // where the run directory is created
	quick   bool        // reduced counts
	exps    []string    // experiments to run, in run order
	size    int         // record size in bytes
	segment int64       // segment size in bytes
	json    string      // -json file, or ""
	methods []methodRow // the sync-method rows of levels and tail
	plot    string      // -plot directory, or ""
	rounds  int         // times every cell is measured, interleaved
	counts  counts
	// longVolume is the payload each long cell appends, in records of
	// longSize bytes (1 KiB unless -size is given).
	longVolume int64
	longSize   int
	// longGrow runs the long cells without the checkpointer: the log
	// grows, and every segment is a new one.
	longGrow bool
}

// counts sizes the experiments; quickCounts is the -quick smoke run.
type counts struct {
	diskSyncs, diskWrites int           // disk: operations timed
	levelCommits          int           // levels: commits per run (article: 10,000)
	aofCommits            int           // aof: synchronous commits (article: 3,000)
	aofBatch              int           // aof: records per batch (article: 2,000)
	aofClientTime         time.Duration // aof: 1 vs 8 committers run for this long
	cliffPerCommitter     int           // cliff: commits per committer
	queuePerCommitter     int           // queue: commits per committer
	tailTime              time.Duration // tail: each level runs for this long
	serverCommits         int           // servers: commits per cell, split over its clients
}

var (
	// defaultCounts are per round: three rounds of each fit the minute the
	// README promises on this project's 2-core development machine.
	defaultCounts = counts{
		diskSyncs: 1000, diskWrites: 10000,
		levelCommits: 2000,
		aofCommits:   1000, aofBatch: 2000, aofClientTime: 400 * time.Millisecond,
		cliffPerCommitter: 200, queuePerCommitter: 500,
		tailTime: 700 * time.Millisecond, serverCommits: 2000,
	}
	quickCounts = counts{
		diskSyncs: 100, diskWrites: 1000,
		levelCommits: 500,
		aofCommits:   200, aofBatch: 2000, aofClientTime: 150 * time.Millisecond,
		cliffPerCommitter: 20, queuePerCommitter: 20,
		tailTime: 150 * time.Millisecond, serverCommits: 200,
	}
)

// quickSegment is the segment size of a -quick run unless -segment is
// given: preparing 64 MiB segments (zero-filled where commits write or
// sync) would dominate a smoke run.
const quickSegment = 4 << 20

// parseFlags parses args into a config. Errors wrap errUsage, or are
// flag.ErrHelp after the usage was printed to stderr.
func parseFlags(args []string, stderr io.Writer) (config, error) {
	fs := flag.NewFlagSet("walbench", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	dir := fs.String("dir", "", "parent `directory` of the run directory (default TMPDIR); must be on the disk to measure")
	quick := fs.Bool("quick", false, "smoke run with reduced counts (a few seconds)")
	rounds := fs.Int("rounds", 3, "measure every cell this many `times`, interleaved; tables show the median and range")
	exp := fs.String("exp", strings.Join(experiments, ","), "comma-separated `experiments` to run: "+strings.Join(experiments, ", ")+
		"; also queue (adaptive vs plain group-commit queue at 8/16/32 committers), long (the segment lifecycle in the worst "+
		"commits over -long-volume: innodb=1 × 16, =2, =0 against raw loops, with write amplification), bandwidth (4 KiB to "+
		"1 MiB records in MB/s against raw sequential writes), prepare (zero-fill against fallocate: what each later "+
		"fdatasync pays) and servers (redis-server and mariadbd beside durawal under the equivalent policies), not run by default")
	size := fs.Int("size", 100, "record size in `bytes` (the long experiment: 1024 unless given)")
	longVolume := fs.String("long-volume", "", "payload each long cell appends: `bytes`, or with a KiB, MiB or GiB suffix (default 768MiB, 24MiB with -quick)")
	longGrow := fs.Bool("long-grow", false, "long: let the log grow (no checkpoints: every segment new, none recycled), as an initial load or a Raft log between snapshots does")
	segment := fs.Int64("segment", 0, "segment size in `bytes` (default: wal.DefaultSegmentSize, 4 MiB with -quick)")
	jsonPath := fs.String("json", "", "write every raw figure as JSON to `file`")
	plotDir := fs.String("plot", "", "write SVG and PNG charts into `directory`")
	methodList := fs.String("method", "", "comma-separated sync `methods` run at every level of levels and tail, after the fdatasync rows: "+
		"fdatasync, fsync, O_DSYNC, O_DIRECT, O_DIRECT|O_DSYNC (default: the article's =2 + O_DIRECT and =0 + O_DIRECT rows)")
	var err error
	if err = fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stderr)
			fmt.Fprintln(stderr, "usage: walbench [flags]  (reruns the articles' durability experiments on this disk)")
			fs.PrintDefaults()
			return config{}, err
		}
		return config{}, fmt.Errorf("%w: %v (run walbench -h for the flags)", errUsage, err)
	}
	if fs.NArg() > 0 {
		return config{}, fmt.Errorf("%w: unexpected argument %q (run walbench -h for the flags)", errUsage, fs.Arg(0))
	}
	c := config{parent: *dir, quick: *quick, size: *size, segment: *segment, json: *jsonPath, plot: *plotDir, rounds: *rounds, counts: defaultCounts,
		longGrow: *longGrow}
	if c.rounds < 1 || c.rounds > 100 {
		return config{}, fmt.Errorf("%w: -rounds %d: want 1..100", errUsage, c.rounds)
	}
	if c.quick {
		c.counts = quickCounts
	}
	c.longSize = longRecordSize
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "size" {
			c.longSize = c.size
		}
	})
	switch {
	case *longVolume != "":
		if c.longVolume, err = parseBytes(*longVolume); err != nil {
			return config{}, fmt.Errorf("%w: -long-volume: %v", errUsage, err)
		}
	case c.quick:
		c.longVolume = quickLongVolume
	default:
		c.longVolume = defaultLongVolume
	}
	for _, name := range strings.Split(*exp, ",") {
		name = strings.TrimSpace(name)
		switch {
		case name == "":
		case !slices.Contains(allExperiments(), name):
			return config{}, fmt.Errorf("%w: -exp: unknown experiment %q, want some of %s", errUsage, name, strings.Join(allExperiments(), ","))
		case !slices.Contains(c.exps, name):
			c.exps = append(c.exps, name)
		}
	}
	if len(c.exps) == 0 {
		return config{}, fmt.Errorf("%w: -exp: no experiment named", errUsage)
	}
	if c.methods, err = parseMethods(*methodList); err != nil {
		return config{}, fmt.Errorf("%w: -method: %v", errUsage, err)
	}
	slices.SortFunc(c.exps, func(a, b string) int { return slices.Index(allExperiments(), a) - slices.Index(allExperiments(), b) })
	if c.size < 1 || c.size > 1<<20 {
		return config{}, fmt.Errorf("%w: -size %d: want 1..%d bytes", errUsage, c.size, 1<<20)
	}
	switch {
	case c.segment == 0 && c.quick:
		c.segment = quickSegment
	case c.segment == 0:
		c.segment = wal.DefaultSegmentSize
	case c.segment < wal.MinSegmentSize || c.segment > wal.MaxSegmentSize:
		return config{}, fmt.Errorf("%w: -segment %d: want %d..%d bytes", errUsage, c.segment, wal.MinSegmentSize, wal.MaxSegmentSize)
	}
	if c.longVolume < int64(c.longSize)*longCommitters {
		return config{}, fmt.Errorf("%w: -long-volume %d: want at least %d records of %d bytes", errUsage, c.longVolume, longCommitters, c.longSize)
	}
	if int64(c.size)*int64(c.counts.aofBatch) > c.segment/2 {
		return config{}, fmt.Errorf("%w: -size %d: a batch of %d records must fit half a %d-byte segment", errUsage, c.size, c.counts.aofBatch, c.segment)
	}
	return c, nil
}

// parseBytes parses a byte count: a whole number, optionally followed by
// KiB, MiB or GiB (or K, M, G: the same binary units).
func parseBytes(s string) (int64, error) {
	num, unit := s, int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"B", 1}} {
		if n, ok := strings.CutSuffix(s, u.suffix); ok {
			num, unit = n, u.mult
			break
		}
	}
	n, err := strconv.ParseInt(strings.TrimSpace(num), 10, 64)
	if err != nil || n <= 0 || n > (1<<40)/unit {
		return 0, fmt.Errorf("%q: want a positive byte count such as 768MiB", s)
	}
	return n * unit, nil
}

// run parses args, runs the chosen experiments and writes the report to
// stdout, progress and warnings to stderr. It is main without os.Exit.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	root, err := makeRunDir(cfg.parent)
	if err != nil {
		return err
	}
	defer os.RemoveAll(root)

	var jsonFile *os.File
	if cfg.json != "" { // fail before the long run, not after it
		if jsonFile, err = os.Create(cfg.json); err != nil {
			return fmt.Errorf("-json: %w", err)
		}
		defer jsonFile.Close()
	}
	if cfg.plot != "" {
		if err := os.MkdirAll(cfg.plot, 0o755); err != nil {
			return fmt.Errorf("-plot: %w", err)
		}
	}

	e := newEnv(ctx, cfg, root, stderr)
	rep := &report{Header: collectHeader(root, cfg)}
	for _, w := range rep.Header.Warnings {
		e.warnf("%s", w)
	}
	writeHeader(stdout, rep.Header)

	// Plan every cell of every experiment, run the plan round by round,
	// then print the tables.
	p := &plan{}
	for _, name := range cfg.exps {
		switch name {
		case "disk":
			rep.Disk = planDisk(e, p)
		case "levels":
			rep.Levels = planLevels(e, p)
		case "aof":
			rep.AOF = planAOF(e, p)
		case "cliff":
			rep.Cliff = planCliff(e, p)
		case "tail":
			rep.Tail = planTail(e, p)
		case "queue":
			rep.Queue = planQueue(e, p)
		case "long":
			rep.Long = planLong(e, p)
		case "servers":
			rep.Servers = planServers(e, p)
			defer rep.Servers.close(e)
		case "bandwidth":
			rep.Bandwidth = planBandwidth(e, p)
		case "prepare":
			rep.Prepare = planPrepare(e, p)
		}
	}
	if err := e.runRounds(p, e.skipUnsupported); err != nil {
		return err
	}
	rep.Rounds = cfg.rounds
	for _, name := range cfg.exps {
		var tables []table
		switch name {
		case "disk":
			tables = diskTables(rep.Disk, cfg.rounds)
		case "levels":
			tables = levelsTables(rep.Levels, rep.Disk, cfg.rounds)
		case "aof":
			tables = aofTables(rep.AOF, rep.Disk, cfg.rounds)
		case "cliff":
			tables = cliffTables(rep.Cliff, cfg.rounds)
		case "tail":
			tables = tailTables(rep.Tail, rep.Disk, cfg.rounds)
		case "queue":
			tables = queueTables(rep.Queue, cfg.rounds)
		case "long":
			tables = longTables(rep.Long, cfg.rounds)
		case "servers":
			tables = serversTables(rep.Servers, cfg.rounds)
		case "bandwidth":
			tables = bandwidthTables(rep.Bandwidth, cfg.rounds)
		case "prepare":
			tables = prepareTables(rep.Prepare, cfg.rounds)
		}
		for _, t := range tables {
			t.write(stdout)
		}
	}
	if rep.Disk != nil && len(cfg.exps) > 1 {
		if err := runDiskAgain(e, rep.Disk); err != nil {
			return fmt.Errorf("disk: %w", err)
		}
		diskDriftTable(rep.Disk).write(stdout)
	}
	rep.Checks = e.checks
	rep.Elapsed = time.Since(e.start)
	writeChecks(stdout, rep)
	if jsonFile != nil {
		if err := writeJSON(jsonFile, rep); err != nil {
			return fmt.Errorf("-json: %w", err)
		}
		if err := jsonFile.Close(); err != nil {
			return fmt.Errorf("-json: %w", err)
		}
		fmt.Fprintf(stdout, "\nJSON written to %s\n", cfg.json)
	}
	if cfg.plot != "" {
		paths, err := writePlots(cfg.plot, rep)
		if err != nil {
			return fmt.Errorf("-plot: %w", err)
		}
		fmt.Fprintf(stdout, "\nCharts written to %s:\n", cfg.plot)
		for _, p := range paths {
			fmt.Fprintf(stdout, "- %s\n", p)
		}
	}
	e.progressf("done in %s", rep.Elapsed.Round(100*time.Millisecond))
	return nil
}

// makeRunDir creates a fresh run directory under parent (TMPDIR if empty)
// and checks that files can be created and synced in it.
func makeRunDir(parent string) (string, error) {
	if parent == "" {
		parent = os.TempDir()
	}
	st, err := os.Stat(parent)
	if err != nil {
		return "", fmt.Errorf("-dir %s: %w", parent, unwrapPath(err))
	}
	if !st.IsDir() {
		return "", fmt.Errorf("-dir %s: not a directory", parent)
	}
	root, err := os.MkdirTemp(parent, "walbench-")
	if err != nil {
		return "", fmt.Errorf("-dir %s: cannot create a run directory: %w", parent, unwrapPath(err))
	}
	probe := filepath.Join(root, "probe")
	f, err := os.Create(probe)
	if err == nil {
		err = f.Sync()
		f.Close()
	}
	if err != nil {
		os.RemoveAll(root)
		return "", fmt.Errorf("-dir %s: cannot write and sync a file: %w", parent, unwrapPath(err))
	}
	os.Remove(probe)
	return root, nil
}

// unwrapPath drops the *PathError wrapper whose path the caller already names.
func unwrapPath(err error) error {
	if pe, ok := errors.AsType[*os.PathError](err); ok {
		return pe.Err
	}
	return err
}
