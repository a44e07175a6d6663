package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/durawal/durawal/groupcommit"
	"github.com/durawal/durawal/internal/measure"
	"github.com/durawal/durawal/policy"
	"github.com/durawal/durawal/wal"
	"github.com/durawal/durawal/wal/vfs"
	"github.com/durawal/durawal/wal/vfs/faultfs"
)

// env is what every experiment runs in: the configuration, the run
// directory, progress and warning output, and the counter checks so far.
type env struct {
	ctx    context.Context
	cfg    config
	root   string
	stderr io.Writer
	start  time.Time
	seq    int
	rec    []byte  // the record every commit appends
	checks []check // one per log opened
}

func newEnv(ctx context.Context, cfg config, root string, stderr io.Writer) *env {
	return &env{ctx: ctx, cfg: cfg, root: root, stderr: stderr, start: time.Now(), rec: makeRecord(cfg.size)}
}

// makeRecord returns a record of size bytes: the letters a to z, repeated.
func makeRecord(size int) []byte {
	rec := make([]byte, size)
	for i := range rec {
		rec[i] = byte('a' + i%26)
	}
	return rec
}

// progressf writes one progress line to stderr, stamped with the time since
// the run began.
func (e *env) progressf(format string, args ...any) {
	fmt.Fprintf(e.stderr, "walbench [%5.1fs] %s\n", time.Since(e.start).Seconds(), fmt.Sprintf(format, args...))
}

// warnf writes a warning line to stderr.
func (e *env) warnf(format string, args ...any) {
	fmt.Fprintf(e.stderr, "walbench: warning: %s\n", fmt.Sprintf(format, args...))
}

// subdir returns a fresh, not yet existing directory name under the run
// directory.
func (e *env) subdir(name string) string {
	e.seq++
	return filepath.Join(e.root, fmt.Sprintf("%03d-%s", e.seq, name))
}

// check compares one log's fsync counters with the system calls a
// faultfs.Counter saw under it, over the log's whole life (Open to Close).
type check struct {
	Run         string `json:"run"`
	Fsyncs      uint64 `json:"stats_fsyncs"`
	SyncCalls   int64  `json:"vfs_sync_calls"`
	DirSyncs    uint64 `json:"stats_dir_syncs"`
	SyncDirOps  int64  `json:"vfs_syncdir_calls"`
	FsyncErrors uint64 `json:"stats_fsync_errors"`
	Agree       bool   `json:"agree"`
}

// spec describes one measured run of a log.
type spec struct {
	name       string         // row label, also the subdirectory name
	pol        policy.Policy  // flush policy
	method     vfs.SyncMethod // how the log reaches the disk (default fdatasync)
	gc         groupcommit.Options
	committers int           // goroutines committing concurrently
	each       int           // commits per committer, or
	duration   time.Duration // commit until this much time has passed
	batch      int           // records per commit (AppendBatch) if > 1
	size       int           // record size in bytes, if not the run's (-size)
	syncAtEnd  bool          // the window ends with a Log.Sync after the last commit
	keepCDF    bool          // keep the sorted samples for the CDF chart
	// window, if set, is called with the log's directory just before the
	// committers start; the function it returns is called just after they
	// finish, before the log is closed, and its figures become the
	// result's Server (the servers experiment counts syscalls there).
	window func(dir string, l *wal.Log) (end func() (*serverFigures, error), err error)
}

// result is one measured run: the counters over the measured window (from
// after Open to after the last commit returned), its latencies, and rates.
type result struct {
	Name            string          `json:"name"`
	Policy          string          `json:"policy"`
	Method          string          `json:"sync_method"`
	Committers      int             `json:"committers"`
	RecordSize      int             `json:"record_size"`
	RecordsPer      int             `json:"records_per_commit"`
	Commits         uint64          `json:"commits"`
	Elapsed         time.Duration   `json:"elapsed_ns"`
	CommitsPerSec   float64         `json:"commits_per_sec"`
	RecordsPerSec   float64         `json:"records_per_sec"`
	Fsyncs          uint64          `json:"fsyncs"`
	CommitsPerFsync float64         `json:"commits_per_fsync"`
	FsyncsPerCommit float64         `json:"fsyncs_per_commit"`
	WriteCalls      uint64          `json:"write_calls"`
	BytesWritten    uint64          `json:"bytes_written"`
	PaddingBytes    uint64          `json:"padding_bytes"`
	Alignment       int             `json:"direct_io_alignment,omitempty"`
	AlignmentSource string          `json:"direct_io_alignment_source,omitempty"`
	BackgroundSyncs uint64          `json:"background_syncs"`
	Rolls           uint64          `json:"rolls"`
	SegmentStalls   uint64          `json:"segment_create_stalls"`
	BufferFullWaits uint64          `json:"buffer_full_waits"`
	PostponedWrites uint64          `json:"postponed_writes"`
	DelayedWrites   uint64          `json:"delayed_writes"`
	Groups          uint64          `json:"groups"`
	GroupSizeMean   float64         `json:"group_size_mean"`
	GroupSizeMax    uint64          `json:"group_size_max"`
	AdaptiveWaits   uint64          `json:"adaptive_waits"`
	AdaptiveMerges  uint64          `json:"adaptive_merges"`
	FsyncMax        time.Duration   `json:"fsync_max_ns"`
	FsyncMean       time.Duration   `json:"fsync_mean_ns"`
	Latency         measure.Summary `json:"latency"`
	Worst           *tailCauses     `json:"worst_commits,omitempty"`
	// Long holds the long experiment's extra figures.
	Long *longFigures `json:"long,omitempty"`
	// Server holds the servers experiment's extra figures.
	Server *serverFigures `json:"server,omitempty"`
	// Percentiles is the latency curve from p50 to p99.99 (charts).
	Percentiles []measure.Point `json:"latency_percentiles,omitempty"`
}

// measureRun opens a log for s in a fresh subdirectory, drives its
// committers, closes the log, checks the fsync counters against the
// syscall count, removes the subdirectory, and returns the window's figures.
func (e *env) measureRun(s spec) (res result, err error) {
	if err := e.ctx.Err(); err != nil {
		return res, err
	}
	dir := e.subdir(s.name)
	defer os.RemoveAll(dir)
	counter := &faultfs.Counter{}
	l, err := wal.Open(dir, wal.Options{
		Policy:      s.pol,
		GroupCommit: s.gc,
		SegmentSize: e.cfg.segment,
		SyncMethod:  s.method,
		FS:          faultfs.Inject(vfs.OS(), counter),
	})
	if err != nil {
		return res, fmt.Errorf("%s: %w", s.name, err)
	}
	closed := false
	defer func() {
		if !closed {
			l.Close()
		}
	}()

	rec := e.rec
	if s.size > 0 {
		rec = makeRecord(s.size)
	}
	batch := max(s.batch, 1)
	recs := make([][]byte, batch)
	for i := range recs {
		recs[i] = rec
	}
	commit := func(ctx context.Context) error {
		if batch > 1 {
			_, err := l.AppendBatchContext(ctx, recs)
			return err
		}
		_, err := l.AppendContext(ctx, rec)
		return err
	}

	before := l.Stats()
	var endWindow func() (*serverFigures, error)
	if s.window != nil {
		if endWindow, err = s.window(dir, l); err != nil {
			return res, fmt.Errorf("%s: %w", s.name, err)
		}
	}
	var smp *sampler
	samples, kept, elapsed, err := drive(e.ctx, s.committers, s.each, s.duration, commit,
		func(t0 time.Time) { smp = startSampler(l, t0) })
	if err == nil && s.syncAtEnd {
		t := time.Now()
		if err = l.Sync(); err == nil {
			elapsed += time.Since(t)
		}
	}
	after := l.Stats()
	timeline := smp.finish()
	var server *serverFigures
	if endWindow != nil {
		var werr error
		if server, werr = endWindow(); err == nil {
			err = werr
		}
	}
	if err != nil {
		return res, fmt.Errorf("%s: %w", s.name, err)
	}
	closed = true
	cerr := l.Close()
	total := l.Stats()
	if cerr != nil {
		return res, fmt.Errorf("%s: close: %w", s.name, cerr)
	}
	e.addCheck(s.name, total, counter)

	res = windowResult(s, before, after, elapsed, batch)
	res.RecordSize = len(rec)
	res.Server = server
	res.Worst = attribute(kept, len(samples), timeline)
	res.Latency = measure.Summarize(samples) // sorts samples
	if s.keepCDF {
		res.Percentiles = percentileCurve(samples)
	}
	return res, nil
}

// windowResult derives a result from the counters before and after the
// measured window.
func windowResult(s spec, before, after wal.Stats, elapsed time.Duration, batch int) result {
	r := result{
		Name:            s.name,
		Policy:          s.pol.String(),
		Method:          after.SyncMethod.String(),
		Committers:      s.committers,
		RecordsPer:      batch,
		Commits:         after.Commits - before.Commits,
		Elapsed:         elapsed,
		Fsyncs:          after.Fsyncs - before.Fsyncs,
		WriteCalls:      after.WriteCalls - before.WriteCalls,
		BytesWritten:    after.BytesWritten - before.BytesWritten,
		PaddingBytes:    after.PaddingBytes - before.PaddingBytes,
		BackgroundSyncs: after.BackgroundSyncs - before.BackgroundSyncs,
		Rolls:           after.Rolls - before.Rolls,
		SegmentStalls:   after.Prepare.Waits - before.Prepare.Waits,
		BufferFullWaits: after.BufferFullWaits - before.BufferFullWaits,
		PostponedWrites: after.PostponedWrites - before.PostponedWrites,
		DelayedWrites:   after.DelayedWrites - before.DelayedWrites,
		Groups:          after.Group.Groups - before.Group.Groups,
		GroupSizeMax:    after.Group.GroupSizeMax,
		AdaptiveWaits:   after.Group.AdaptiveWaits - before.Group.AdaptiveWaits,
		AdaptiveMerges:  after.Group.AdaptiveMerges - before.Group.AdaptiveMerges,
		FsyncMax:        after.FsyncMaxDuration,
	}
	if sec := elapsed.Seconds(); sec > 0 {
		r.CommitsPerSec = float64(r.Commits) / sec
		r.RecordsPerSec = float64(r.Commits) * float64(batch) / sec
	}
	if r.Fsyncs > 0 {
		r.CommitsPerFsync = float64(r.Commits) / float64(r.Fsyncs)
		r.FsyncMean = (after.FsyncTimeTotal - before.FsyncTimeTotal) / time.Duration(r.Fsyncs)
	}
	if r.Commits > 0 {
		r.FsyncsPerCommit = float64(r.Fsyncs) / float64(r.Commits)
	}
	if after.SyncMethod.Direct() {
		r.Alignment, r.AlignmentSource = after.DirectIOAlignment, after.DirectIOAlignmentSource
	}
	if r.Groups > 0 {
		r.GroupSizeMean = float64(after.Group.Commits-before.Group.Commits) / float64(r.Groups)
	}
	return r
}

// addCheck records, and warns about, a disagreement between the log's own
// fsync counters and the system calls the faultfs.Counter saw.
func (e *env) addCheck(run string, st wal.Stats, c *faultfs.Counter) {
	ch := check{
		Run: run, Fsyncs: st.Fsyncs, SyncCalls: c.Count(faultfs.OpSync),
		DirSyncs: st.DirSyncs, SyncDirOps: c.Count(faultfs.OpSyncDir), FsyncErrors: st.FsyncErrors,
	}
	// Failed syncs reach the FS but are not counted as fsyncs.
	ch.Agree = int64(ch.Fsyncs+ch.FsyncErrors) == ch.SyncCalls && int64(ch.DirSyncs) == ch.SyncDirOps
	if !ch.Agree {
		e.warnf("%s: wal.Stats says %d fsyncs + %d failed and %d directory syncs, the filesystem saw %d sync and %d syncdir calls",
			run, ch.Fsyncs, ch.FsyncErrors, ch.DirSyncs, ch.SyncCalls, ch.SyncDirOps)
	}
	e.checks = append(e.checks, ch)
}

// drive runs commit on n goroutines, each either each times or, if each is
// 0, until d has passed, all starting together (measure.Drive). It returns
// every commit's latency, each committer's slowest commits (timed from the
// start), and the time from the start until the last committer finished.
// onStart, if not nil, is called with the start time just before the
// committers start. The first error stops every committer.
func drive(ctx context.Context, n, each int, d time.Duration, commit func(context.Context) error,
	onStart func(time.Time)) ([]time.Duration, []slowCommit, time.Duration, error) {
	ld := measure.Load{Workers: n, Each: each}
	if each == 0 {
		ld.For = d
	}
	return driveLoad(ctx, ld, worstPerRun, nil, commit, onStart)
}

// driveLoad is drive for any measure.Load (its OnStart and OnCall are
// replaced), keeping each committer's k slowest commits and, if over is
// not nil, appending to it every commit over 10 ms.
func driveLoad(ctx context.Context, ld measure.Load, k int, over *[]slowCommit, commit func(context.Context) error,
	onStart func(time.Time)) ([]time.Duration, []slowCommit, time.Duration, error) {
	slows := make([]*slowest, max(ld.Workers, 1))
	for i := range slows {
		slows[i] = &slowest{k: k}
	}
	var start time.Time
	ld.OnStart = func(t time.Time) {
		start = t
		if onStart != nil {
			onStart(t)
		}
	}
	ld.OnCall = func(w int, t0 time.Time, lat time.Duration) {
		slows[w].add(slowCommit{start: t0.Sub(start), latency: lat})
	}
	run, err := measure.Drive(ctx, ld, func(ctx context.Context, _, _ int) error { return commit(ctx) })
	if err != nil {
		return nil, nil, run.Elapsed, err
	}
	var kept []slowCommit
	for _, s := range slows {
		kept = append(kept, s.kept...)
	}
	if over != nil {
		for _, s := range slows {
			*over = append(*over, s.over...)
		}
	}
	return run.Latencies, kept, run.Elapsed, nil
}
