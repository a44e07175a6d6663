package main

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/durawal/durawal/internal/measure"
	"github.com/durawal/durawal/policy"
	"github.com/durawal/durawal/wal"
	"github.com/durawal/durawal/wal/vfs"
	"github.com/durawal/durawal/wal/vfs/faultfs"
)

// The long experiment ("the worst commit matters"): enough
// volume to go through many segments, so that the segment lifecycle (the
// next segment allocated or zero-filled and synced in the background, the roll, the
// wait for a segment not yet ready) shows in the tail of commit latency and
// in the bytes the device writes. Not in the default run; -exp long.

// longCommitters is the =1 cell's committer count.
const longCommitters = 16

// longWorst is how many of each cell's slowest commits are explained.
const longWorst = 5

// longIncremental is the Options.IncrementalSync of the innodb=2 cell that
// also syncs every so many bytes (Redis's incremental fsync is every 4 MB).
const longIncremental = 4 << 20

// Default and -quick volumes (payload bytes per cell) and the default
// record size of the long cells (1 KiB unless -size is given).
const (
	defaultLongVolume = 768 << 20
	quickLongVolume   = 24 << 20
	longRecordSize    = 1024
)

// Thresholds the issue counts commits over.
const (
	over10ms  = 10 * time.Millisecond
	over100ms = 100 * time.Millisecond
)

// longResult is the long experiment: one cell per row of its table.
type longResult struct {
	Volume     int64  `json:"volume_bytes"`
	Grow       bool   `json:"grow"` // no checkpoints (-long-grow)
	RecordSize int    `json:"record_size"`
	Segment    int64  `json:"segment_size"`
	Device     string `json:"device"` // what write amplification is measured on, or "n/a: why"
	Sync1      *cell  `json:"innodb1_x16"`
	// RawSync runs right after Sync1 in the same job, for as long as
	// Sync1 took in that round.
	RawSync *cell `json:"raw_write_datasync"`
	// RawSync16 runs right after RawSync, as long: longCommitters
	// goroutines each writing and syncing its own records (no group
	// commit), what innodb=1's committers would get without one.
	RawSync16 *cell `json:"raw_write_datasync_x16"`
	Level2    *cell `json:"innodb2"`
	Level2Inc *cell `json:"innodb2_incremental_sync"` // with Options.IncrementalSync
	RawAppend *cell `json:"raw_pwrite_append"`
	Level0    *cell `json:"innodb0"`
}

// longFigures are a long cell's figures beyond a result's.
type longFigures struct {
	P9999     time.Duration `json:"p9999_ns"`
	Over10ms  int           `json:"commits_over_10ms"`
	Over100ms int           `json:"commits_over_100ms"`
	// Stalls counts the moments over 10 ms: the disjoint intervals of
	// time covered by the waits of the commits over 10 ms (stalls), so
	// that commits that waited through one slow fdatasync together count
	// once.
	Stalls int `json:"stalls_over_10ms"`
	// StallsInPrepare counts the stalls that overlapped a segment
	// preparation, and PrepareShare is the share of the cell's time a
	// preparation was running (log cells): with no effect of the
	// preparations on the commits, StallsInPrepare ≈ Stalls × PrepareShare.
	StallsInPrepare int           `json:"stalls_during_preparation"`
	PrepareShare    float64       `json:"prepare_share"`
	WA              amplification `json:"write_amplification"`
	// WASecond is the write amplification of the cell's second half (from
	// half its records on, its segments mostly recycled files): the steady
	// state of a checkpointed log.
	WASecond amplification `json:"write_amplification_second_half"`
	// Prepared, PrepareTime, SegmentWaitTime and SegmentWaitMax are
	// Stats.Prepare over the measured window (log cells only).
	Prepared        uint64        `json:"segments_prepared,omitempty"`
	Recycled        uint64        `json:"segments_recycled,omitempty"`  // of Prepared, those that reused a file
	Allocated       uint64        `json:"segments_allocated,omitempty"` // of Prepared, those allocated (fallocate), not zero-filled
	PrepareTime     time.Duration `json:"prepare_time_ns,omitempty"`
	SegmentWaitTime time.Duration `json:"segment_wait_time_ns,omitempty"`
	SegmentWaitMax  time.Duration `json:"segment_wait_max_ns,omitempty"`
	// SealWaits is Stats.SealWaits over the window: rolls that waited for
	// the previous roll's sealing (its segment's fdatasync) to finish.
	SealWaits uint64 `json:"seal_waits,omitempty"`
	// Slowest are the round's slowest commits and what each waited on.
	Slowest []slowExplained `json:"slowest,omitempty"`
}

// slowExplained is one slow commit and what happened while it waited.
type slowExplained struct {
	Start   time.Duration `json:"start_ns"` // from the start of the round's run
	Latency time.Duration `json:"latency_ns"`
	// Cause is the first of: "waited for spare segment", "roll",
	// "log-buffer full", "fdatasync took X ms", "unknown".
	Cause string `json:"cause"`
	// During lists everything counted during the wait.
	During string `json:"during"`
	Round  int    `json:"round"`
	// Alike counts the other commits (among each committer's slowest)
	// that returned within a millisecond of this one: the same stall.
	Alike int `json:"alike"`
}

// span is an interval timed from the start of a run.
type span struct{ from, to time.Duration }

func (s span) overlaps(t span) bool { return s.from < t.to && t.from < s.to }

// timeline is what a run recorded besides its latencies: the sampled
// counters, and every sync and roll from the log's Observer.
type timeline struct {
	samples []sample
	syncs   []span
	rolls   []time.Duration
}

// prepares reconstructs the segment preparations from the samples: one
// ends where Prepared moved, having taken the PrepareTime that moved with it.
func (tl *timeline) prepares() []span {
	var out []span
	for i := 1; i < len(tl.samples); i++ {
		a, b := tl.samples[i-1], tl.samples[i]
		if b.prepared > a.prepared {
			out = append(out, span{from: b.at - (b.prepareTime - a.prepareTime), to: b.at})
		}
	}
	return out
}

// syncCover returns how much of w the syncs covered (overlapping syncs
// counted once) and how many of them overlapped w.
func syncCover(w span, syncs []span) (covered time.Duration, n int) {
	var in []span
	for _, s := range syncs {
		if s.overlaps(w) {
			in = append(in, span{from: max(s.from, w.from), to: min(s.to, w.to)})
		}
	}
	slices.SortFunc(in, func(a, b span) int { return cmp.Compare(a.from, b.from) })
	var end time.Duration
	for i, s := range in {
		if i == 0 || s.from > end {
			covered += s.to - s.from
			end = s.to
		} else if s.to > end {
			covered += s.to - end
			end = s.to
		}
	}
	return covered, len(in)
}

// explain names what c waited on, from the timeline.
func explain(c slowCommit, tl *timeline) slowExplained {
	w := span{from: c.start, to: c.start + c.latency}
	out := slowExplained{Start: c.start, Latency: c.latency}
	var during []string
	var a, b sample
	if len(tl.samples) > 0 {
		a, b = bracket(c, tl.samples)
	}
	segWait := b.stalls > a.stalls
	if segWait {
		during = append(during, fmt.Sprintf("waited for a spare segment %d× (%s ms)", b.stalls-a.stalls, fmtMS(b.waitTime-a.waitTime)))
	}
	rolls := 0
	for _, r := range tl.rolls {
		if r >= w.from && r <= w.to {
			rolls++
		}
	}
	if rolls > 0 {
		during = append(during, fmt.Sprintf("roll %d×", rolls))
	}
	sealWait := b.sealWaits > a.sealWaits
	if sealWait {
		during = append(during, fmt.Sprintf("a roll waited for the previous roll's seal %d×", b.sealWaits-a.sealWaits))
	}
	bufFull := b.bufFull > a.bufFull
	if bufFull {
		during = append(during, fmt.Sprintf("log buffer full %d×", b.bufFull-a.bufFull))
	}
	var longest time.Duration
	for _, s := range tl.syncs {
		if s.overlaps(w) {
			longest = max(longest, s.to-s.from)
		}
	}
	if longest > 0 {
		during = append(during, fmt.Sprintf("longest fdatasync %s ms", fmtMS(longest)))
	}
	covered, nsyncs := syncCover(w, tl.syncs)
	if nsyncs > 1 {
		during = append(during, fmt.Sprintf("%d fdatasyncs in progress for %s ms of it", nsyncs, fmtMS(covered)))
	}
	for _, p := range tl.prepares() {
		if p.overlaps(w) {
			during = append(during, fmt.Sprintf("next segment being prepared (allocation or zero-fill, and sync, %s ms)", fmtMS(p.to-p.from)))
			break
		}
	}
	if d := b.writeTime - a.writeTime; 2*d >= c.latency {
		during = append(during, fmt.Sprintf("write() %s ms", fmtMS(d)))
	}
	if b.gcCycles > a.gcCycles {
		during = append(during, "GC")
	}
	switch {
	case segWait:
		out.Cause = "waited for spare segment"
	case sealWait:
		out.Cause = "roll waited for the previous seal"
	case rolls > 0:
		out.Cause = "roll"
	case bufFull:
		out.Cause = "log-buffer full"
	case longest > 0 && 2*longest >= c.latency:
		out.Cause = fmt.Sprintf("fdatasync took %s ms", fmtMS(longest))
	case nsyncs > 1 && 2*covered >= c.latency:
		// A commit that arrives while its group's leader syncs waits for
		// that sync, then for its own group's: two or more in a row.
		out.Cause = fmt.Sprintf("%d fdatasyncs in a row, %s ms", nsyncs, fmtMS(covered))
	default:
		out.Cause = "unknown"
	}
	if len(during) == 0 {
		during = append(during, "nothing counted")
	}
	out.During = strings.Join(during, "; ")
	return out
}

// sameWake is how close two commits' returns must be to count as one
// stall (the same group woken by the same sync).
const sameWake = time.Millisecond

// explainWorst explains the n slowest of kept, one per stall: a commit
// that returned within sameWake of a slower one already listed is counted
// in that one's Alike instead of being listed.
func explainWorst(kept []slowCommit, n int, tl *timeline) []slowExplained {
	slices.SortFunc(kept, func(a, b slowCommit) int { return int(b.latency - a.latency) })
	var out []slowExplained
next:
	for _, c := range kept {
		end := c.start + c.latency
		for i := range out {
			if d := out[i].Start + out[i].Latency - end; d <= sameWake && d >= -sameWake {
				out[i].Alike++
				continue next
			}
		}
		if len(out) < n {
			out = append(out, explain(c, tl))
		}
	}
	return out
}

// eventLog is the Observer of a long run: it records every sync and roll.
type eventLog struct {
	mu     sync.Mutex
	start  time.Time // zero until the committers start
	syncs  []span
	rolls  []time.Duration
	rolled chan wal.LSN // each roll's first LSN, for the checkpointer; never blocks the roll
}

func (o *eventLog) observer() wal.Observer {
	return &wal.ObserverFuncs{
		Sync: func(ev wal.SyncEvent) {
			now := time.Now()
			o.mu.Lock()
			if !o.start.IsZero() {
				end := now.Sub(o.start)
				o.syncs = append(o.syncs, span{from: end - ev.Duration, to: end})
			}
			o.mu.Unlock()
		},
		Roll: func(ev wal.RollEvent) {
			now := time.Now()
			o.mu.Lock()
			if !o.start.IsZero() {
				o.rolls = append(o.rolls, now.Sub(o.start))
			}
			o.mu.Unlock()
			select {
			case o.rolled <- ev.FirstLSN:
			default:
			}
		},
	}
}

func (o *eventLog) begin(t time.Time) {
	o.mu.Lock()
	o.start = t
	o.mu.Unlock()
}

// longFiguresOf counts sorted latencies over the thresholds.
func longFiguresOf(sorted []time.Duration, wa amplification) *longFigures {
	lf := &longFigures{P9999: measure.Percentile(sorted, 99.99), WA: wa}
	for _, d := range sorted {
		if d > over10ms {
			lf.Over10ms++
		}
		if d > over100ms {
			lf.Over100ms++
		}
	}
	return lf
}

// longEnv is what the long cells share: the record and the device.
type longEnv struct {
	*env
	rec    []byte
	volume int64
	dev    *devCounter
	na     string // why write amplification is not measured, if dev is nil
}

func (le *longEnv) commits() int { return int(le.volume / int64(len(le.rec))) }

// planLong queues the long cells: =1 × 16 with its raw write+fdatasync
// loop right after it, =2, the raw pwrite loop, =0.
func planLong(e *env, p *plan) *longResult {
	rec := makeRecord(e.cfg.longSize)
	le := &longEnv{env: e, rec: rec, volume: e.cfg.longVolume}
	le.dev, le.na = openDevCounter(e.root)
	res := &longResult{Volume: le.volume, RecordSize: len(rec), Segment: e.cfg.segment, Device: "n/a: " + le.na, Grow: e.cfg.longGrow}
	if le.dev != nil {
		res.Device = le.dev.String()
	}
	vol := fmtBytes(le.volume)
	res.RawSync = &cell{Name: "raw write+" + datasyncName}
	res.RawSync16 = &cell{Name: fmt.Sprintf("raw write+%s × %d", datasyncName, longCommitters)}
	res.Sync1 = p.addFunc("innodb=1 × 16", fmt.Sprintf("long: innodb=1, %d committers, %s, then raw write+%s as long", longCommitters, vol, datasyncName),
		func() (result, error) {
			pol, _ := policy.InnoDB(1)
			r, err := inRound(res.Sync1)(le.measureLog("innodb=1 × 16", pol, longCommitters, 0))
			if err != nil {
				return r, err
			}
			raw, err := le.rawSyncLoop(r.Elapsed, 1)
			if err != nil {
				return r, err
			}
			res.RawSync.Rounds = append(res.RawSync.Rounds, raw)
			res.RawSync.summarise()
			raw16, err := le.rawSyncLoop(r.Elapsed, longCommitters)
			if err != nil {
				return r, err
			}
			res.RawSync16.Rounds = append(res.RawSync16.Rounds, raw16)
			res.RawSync16.summarise()
			return r, nil
		})
	res.Level2 = p.addFunc("innodb=2", fmt.Sprintf("long: innodb=2, 1 committer, %s", vol), func() (result, error) {
		pol, _ := policy.InnoDB(2)
		return inRound(res.Level2)(le.measureLog("innodb=2", pol, 1, 0))
	})
	incName := fmt.Sprintf("innodb=2 + IncrementalSync %s", fmtBytes(longIncremental))
	res.Level2Inc = p.addFunc(incName, fmt.Sprintf("long: innodb=2, IncrementalSync %s, 1 committer, %s", fmtBytes(longIncremental), vol), func() (result, error) {
		pol, _ := policy.InnoDB(2)
		return inRound(res.Level2Inc)(le.measureLog(incName, pol, 1, longIncremental))
	})
	res.RawAppend = p.addFunc("raw pwrite append", fmt.Sprintf("long: raw pwrite append, %s", vol), le.rawAppendLoop)
	res.Level0 = p.addFunc("innodb=0", fmt.Sprintf("long: innodb=0, 1 committer, %s", vol), func() (result, error) {
		pol, _ := policy.InnoDB(0)
		return inRound(res.Level0)(le.measureLog("innodb=0", pol, 1, 0))
	})
	return res
}

// inRound returns a function that stamps a result's slowest commits with
// the round c is measuring now.
func inRound(c *cell) func(result, error) (result, error) {
	return func(r result, err error) (result, error) {
		if r.Long != nil {
			for i := range r.Long.Slowest {
				r.Long.Slowest[i].Round = len(c.Rounds) + 1
			}
		}
		return r, err
	}
}

// measureLog opens a log, appends the volume from n committers, closes
// it, and measures latency, throughput, the slowest commits and the
// device bytes written from after Open to after Close.
func (le *longEnv) measureLog(name string, pol policy.Policy, n int, incremental int64) (res result, err error) {
	if err := le.ctx.Err(); err != nil {
		return res, err
	}
	dir := le.subdir("long")
	defer os.RemoveAll(dir)
	counter := &faultfs.Counter{}
	events := &eventLog{rolled: make(chan wal.LSN, 64)}
	l, err := wal.Open(dir, wal.Options{
		Policy:      pol,
		SegmentSize: le.cfg.segment,
		FS:          faultfs.Inject(vfs.OS(), counter),
		Observer:    events.observer(),
		// IncrementalSync: the flusher also syncs every so many bytes.
		IncrementalSync: incremental,
	})
	if err != nil {
		return res, fmt.Errorf("%s: %w", name, err)
	}
	closed := false
	defer func() {
		if !closed {
			l.Close()
		}
	}()
	// The checkpointer: after every roll, RemoveBefore drops every segment
	// but the previous and the new one, as a database checkpoints its log;
	// the freed files are reused as the next segments
	// (Options.RecycleSegments).
	var ckpt sync.WaitGroup
	stopCkpt := make(chan struct{})
	ckpt.Go(func() {
		if le.cfg.longGrow {
			return // the log grows: no checkpoints
		}
		var prev wal.LSN
		for {
			select {
			case first := <-events.rolled:
				if prev > 0 {
					l.RemoveBefore(prev)
				}
				prev = first
			case <-stopCkpt:
				return
			}
		}
	})
	stopCheckpointer := sync.OnceFunc(func() { close(stopCkpt); ckpt.Wait() })
	defer stopCheckpointer()
	wa := startWA(le.dev, le.na)
	before := l.Stats()
	var smp *sampler
	var done atomic.Int64 // commits returned
	half := int64(le.commits() / 2)
	stopMid := make(chan struct{})
	var midWG sync.WaitGroup
	midWG.Go(func() { // the mid-cell device reading, off the commit path
		for tick := time.NewTicker(2 * time.Millisecond); ; {
			select {
			case <-tick.C:
				if c := done.Load(); c >= half {
					wa.markMid(uint64(c) * uint64(len(le.rec)))
					tick.Stop()
					return
				}
			case <-stopMid:
				tick.Stop()
				return
			}
		}
	})
	commit := func(ctx context.Context) error {
		_, err := l.AppendContext(ctx, le.rec)
		if err == nil {
			done.Add(1)
		}
		return err
	}
	var over []slowCommit
	samples, kept, elapsed, err := driveLoad(le.ctx, measure.Load{Workers: n, Total: le.commits()}, 2*longWorst, &over, commit,
		func(t0 time.Time) { events.begin(t0); smp = startSampler(l, t0) })
	close(stopMid)
	midWG.Wait()
	after := l.Stats()
	var tl timeline
	if smp != nil {
		tl.samples = smp.finish()
	}
	if err != nil {
		return res, fmt.Errorf("%s: %w", name, err)
	}
	stopCheckpointer()
	closed = true
	cerr := l.Close()
	total := l.Stats()
	if cerr != nil {
		return res, fmt.Errorf("%s: close: %w", name, cerr)
	}
	le.addCheck("long "+name, total, counter)
	events.mu.Lock()
	tl.syncs, tl.rolls = events.syncs, events.rolls
	events.mu.Unlock()

	res = windowResult(spec{name: name, pol: pol, committers: n}, before, after, elapsed, 1)
	res.RecordSize = len(le.rec)
	res.Latency = measure.Summarize(samples) // sorts samples
	res.Long = longFiguresOf(samples, wa.finish(res.Commits*uint64(len(le.rec))))
	res.Long.WASecond = wa.secondHalf(res.Commits * uint64(len(le.rec)))
	spans, preps := stallSpans(over), tl.prepares()
	res.Long.Stalls = len(spans)
	for _, st := range spans {
		if slices.ContainsFunc(preps, st.overlaps) {
			res.Long.StallsInPrepare++
		}
	}
	var preparing time.Duration
	for _, p := range preps {
		preparing += p.to - p.from
	}
	if elapsed > 0 {
		res.Long.PrepareShare = float64(preparing) / float64(elapsed)
	}
	res.Long.Prepared = after.Prepare.Prepared - before.Prepare.Prepared
	res.Long.Recycled = after.Prepare.Recycled - before.Prepare.Recycled
	res.Long.Allocated = after.Prepare.Allocated - before.Prepare.Allocated
	res.Long.SealWaits = after.SealWaits - before.SealWaits
	res.Long.PrepareTime = after.Prepare.PrepareTime - before.Prepare.PrepareTime
	res.Long.SegmentWaitTime = after.Prepare.WaitTime - before.Prepare.WaitTime
	res.Long.SegmentWaitMax = after.Prepare.WaitMax
	res.Long.Slowest = explainWorst(kept, longWorst, &tl)
	return res, nil
}

// rawSyncLoop is the raw baseline of =1: n goroutines each write a record
// and fdatasync it, at consecutive offsets (taken in turn from one counter)
// of a zero-filled, synced file of one segment's size (wrapping around), for
// d. With n = 1 this is what the device does for one durable record at a
// time, without the log; with n = 16, what 16 committers get from the device
// with no group commit: each its own sync.
func (le *longEnv) rawSyncLoop(d time.Duration, n int) (result, error) {
	f, done, err := le.rawFile(true)
	if err != nil {
		return result{}, err
	}
	defer done()
	size := int64(len(le.rec))
	slots := max(le.cfg.segment/size, 1)
	name := "raw write+" + datasyncName
	if n > 1 {
		name = fmt.Sprintf("%s × %d", name, n)
	}
	wa := startWA(le.dev, le.na)
	recs := make([]*measure.Recorder, n)
	overs := make([][]slowCommit, n) // each goroutine's operations over 10 ms
	var next atomic.Int64
	var firstErr atomic.Pointer[error]
	var wg sync.WaitGroup
	start := time.Now()
	for g := range n {
		recs[g] = measure.NewRecorder(1 << 16 / n)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; time.Since(start) < d && firstErr.Load() == nil; i++ {
				if i%256 == 0 && le.ctx.Err() != nil {
					err := le.ctx.Err()
					firstErr.CompareAndSwap(nil, &err)
					return
				}
				slot := (next.Add(1) - 1) % slots
				t0 := time.Now() // one timing for the latency and the stall, as Recorder.Time reads the clock
				_, err := f.WriteAt(le.rec, slot*size)
				if err == nil {
					err = datasync(f)
				}
				d := time.Since(t0)
				recs[g].Add(d)
				if d > over10ms {
					overs[g] = append(overs[g], slowCommit{start: t0.Sub(start), latency: d})
				}
				if err != nil {
					err = fmt.Errorf("%s: %w", name, err)
					firstErr.CompareAndSwap(nil, &err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if p := firstErr.Load(); p != nil {
		return result{}, *p
	}
	r := le.rawResult(name, time.Since(start), wa, recs...)
	r.Committers = n
	r.Long.Stalls = stalls(slices.Concat(overs...))
	return r, nil
}

// rawAppendLoop is the raw baseline of =2 and =0: one goroutine pwrites
// the volume in records at consecutive offsets of a fresh file, with no
// sync until the end (timed up to the last write, as the log cells are
// timed up to their last commit).
func (le *longEnv) rawAppendLoop() (result, error) {
	f, done, err := le.rawFile(false)
	if err != nil {
		return result{}, err
	}
	defer done()
	size := int64(len(le.rec))
	wa := startWA(le.dev, le.na)
	rec := measure.NewRecorder(le.commits())
	var over []slowCommit
	start := time.Now()
	for i := range int64(le.commits()) {
		if i%256 == 0 && le.ctx.Err() != nil {
			return result{}, le.ctx.Err()
		}
		t0 := time.Now() // one timing for the latency and the stall, as Recorder.Time reads the clock
		if _, err := f.WriteAt(le.rec, i*size); err != nil {
			return result{}, fmt.Errorf("raw pwrite: %w", err)
		}
		d := time.Since(t0)
		rec.Add(d)
		if d > over10ms {
			over = append(over, slowCommit{start: t0.Sub(start), latency: d})
		}
	}
	elapsed := time.Since(start)
	if err := datasync(f); err != nil {
		return result{}, fmt.Errorf("raw pwrite: %w", err)
	}
	r := le.rawResult("raw pwrite append", elapsed, wa, rec)
	r.Long.Stalls = stalls(over)
	return r, nil
}

// rawFile creates a file in a fresh subdirectory, zero-filled to one
// segment's size and synced if prealloc, and returns it with a function
// that removes it.
func (le *longEnv) rawFile(prealloc bool) (*os.File, func(), error) {
	dir := le.subdir("long-raw")
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, nil, err
	}
	f, err := os.Create(filepath.Join(dir, "raw"))
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, err
	}
	done := func() { f.Close(); os.RemoveAll(dir) }
	if prealloc {
		zeros := make([]byte, 1<<20)
		for off := int64(0); off < le.cfg.segment; off += int64(len(zeros)) {
			if _, err := f.WriteAt(zeros[:min(int64(len(zeros)), le.cfg.segment-off)], off); err != nil {
				done()
				return nil, nil, err
			}
		}
		if err := f.Sync(); err != nil {
			done()
			return nil, nil, err
		}
	}
	return f, done, nil
}

// rawResult summarises a raw loop as a result, operations as commits.
func (le *longEnv) rawResult(name string, elapsed time.Duration, wa *waMeter, recs ...*measure.Recorder) result {
	lat := measure.Merge(recs...)
	n := len(lat)
	r := result{Name: name, Committers: 1, RecordSize: len(le.rec), RecordsPer: 1, Commits: uint64(n), Elapsed: elapsed}
	if s := elapsed.Seconds(); s > 0 {
		r.CommitsPerSec, r.RecordsPerSec = float64(n)/s, float64(n)/s
	}
	r.Latency = measure.Summarize(lat)
	r.Long = longFiguresOf(lat, wa.finish(uint64(n)*uint64(len(le.rec))))
	return r
}

// The targets the long experiment checks.
const (
	targetWA          = 1.15
	targetBufferedMax = 10 * time.Millisecond
	targetTailRatio   = 3         // =1 p99.99 against the raw loop's p99.9
	targetThroughput  = 0.95      // =2 against raw pwrite
	growAllowance     = 256 << 20 // a growing log may add one slow commit per this much payload
)

// crossRatio is the spread over rounds of num's metric a divided by den's
// metric b, each ratio within one round.
func crossRatio(num *cell, a string, den *cell, b string) spread {
	var xs []float64
	fa, fb := metricFunc(a), metricFunc(b)
	for i := range min(len(num.Rounds), len(den.Rounds)) {
		if d := fb(den.Rounds[i]); d > 0 {
			xs = append(xs, fa(num.Rounds[i])/d)
		}
	}
	return spreadOf(xs)
}

// verdict is "yes", "no", or "n/a" when the figure is missing.
func verdict(ok, known bool) string {
	switch {
	case !known:
		return "n/a"
	case ok:
		return "yes"
	}
	return "no"
}

// longTables renders the long experiment: the figures, the targets, and
// the slowest commits.
func longTables(lr *longResult, rounds int) []table {
	cells := []*cell{lr.Sync1, lr.RawSync, lr.RawSync16, lr.Level2, lr.Level2Inc, lr.Level0, lr.RawAppend}
	if slices.ContainsFunc(cells, func(c *cell) bool { return len(c.Rounds) == 0 }) {
		return nil // interrupted
	}
	labels := []string{"innodb=1 × 16", "raw write+" + datasyncName + " × 1",
		fmt.Sprintf("raw write+%s × %d", datasyncName, longCommitters), "innodb=2 × 1",
		fmt.Sprintf("innodb=2 + IncrementalSync %s × 1", fmtBytes(longIncremental)), "innodb=0 × 1", "raw pwrite append × 1"}
	rows := spreadCells(cells, []string{"a", "b", "c", "d", "e", "f", "g"}, []col{
		{metric: "commits", format: fmtCount, noFlag: true},
		{metric: "commits_per_sec", format: fmtRate},
		{metric: "payload_mib_per_sec", format: fmtFloat1},
		{metric: "p50_us", format: fmtUSf}, {metric: "p99_us", format: fmtUSf}, {metric: "p999_us", format: fmtUSf},
		{metric: "p9999_us", format: fmtUSf}, {metric: "max_us", format: fmtUSf},
		{metric: "over_10ms", format: fmtCount}, {metric: "stalls_over_10ms", format: fmtCount},
		{metric: "stalls_during_preparation", format: fmtDashOr(fmtCount), noFlag: true},
		{metric: "prepare_share_pct", format: fmtDashOr(fmtFloat1), noFlag: true},
		{metric: "over_100ms", format: fmtCount},
		{metric: "rolls", format: fmtCount, noFlag: true}, {metric: "segment_stalls", format: fmtCount, noFlag: true},
		{metric: "seal_waits", format: fmtCount, noFlag: true},
		{metric: "segments_recycled", format: fmtCount, noFlag: true},
		{metric: "segments_allocated", format: fmtCount, noFlag: true},
		{metric: "prepare_ms_per_segment", format: fmtDashOr(fmtFloat1)},
	})
	tb := table{
		title: fmt.Sprintf("long — the segment lifecycle in the worst commits: %s of %d-byte records per cell, %s segments",
			fmtBytes(lr.Volume), lr.RecordSize, fmtBytes(lr.Segment)),
		notes: []string{
			fmt.Sprintf("Each log cell appends %s (%s records) to a fresh log, so it fills, rolls and prepares about %d segments; "+
				"the next segment is prepared in the background once the current one is an eighth full. %s"+
				"innodb=1 × 16: SyncEveryCommit, %d committers sharing group commits; innodb=2: write at commit, fdatasync once a second "+
				"(and again with Options.IncrementalSync, which also syncs in the background whenever %s were written since the last sync); "+
				"innodb=0: buffered, written and synced once a second; one committer each.",
				fmtBytes(lr.Volume), fmtInt(lr.Volume/int64(lr.RecordSize)), max(lr.Volume/lr.Segment, 1), lifecycleNote(lr.Grow),
				longCommitters, fmtBytes(longIncremental)),
			fmt.Sprintf("Raw loops, in the same rounds: raw write+%s × 1 runs right after innodb=1 × 16, for as long as it took in that round, "+
				"one goroutine writing a record and syncing it at consecutive offsets of a zero-filled, synced file of one segment "+
				"(the device's own latency for one durable record; its commit count differs, its wall time is the same); "+
				"raw write+%[1]s × %[2]d then does the same from %[2]d goroutines, each syncing its own record (what %[2]d committers "+
				"get from the device without group commit; the records share the file, so their syncs queue on it); "+
				"raw pwrite append × 1 writes the same volume as the log cells into a fresh file with no sync until the end, "+
				"the ceiling for =2 and =0.", datasyncName, longCommitters),
			"Throughput is commits/s and payload MiB/s up to the last commit's return. Over 10 ms / over 100 ms count commits " +
				"slower than that; stalls over 10 ms count the moments they make: the disjoint stretches of time covered by the " +
				"waits of commits over 10 ms, so the members of one group that waited through the same slow fdatasync count once " +
				"(for a loop of one goroutine, stalls equal commits over 10 ms); stalls in preparation count those that overlapped a " +
				"segment preparation, and % time preparing is how much of the cell a preparation ran (with no effect of the " +
				"preparations on the commits, the first is about that share of the stalls). Rolls and segment waits (appends that waited for the next segment, Stats.Prepare.Waits) " +
				"are wal.Stats over the commits; seal waits count rolls that waited for the previous roll's sealing (Stats.SealWaits: " +
				"its segment's fdatasync, which a log writing faster than the device sustains meets at each roll); recycled and allocated count the segments prepared by reusing a file and by fallocate " +
				"(the rest were zero-filled); prepare ms/segment is Stats.Prepare.PrepareTime ÷ Prepared over them (allocation or " +
				"zero-fill, and sync, of a new segment, or reopening a recycled one).",
			fmt.Sprintf("Targets: at innodb=1 × 16, no more commits over 10 ms than the raw loop, and p99.99 ≤ %d× the raw loop's p99.9; "+
				"innodb=2 and innodb=0 max ≤ %s ms; write amplification ≤ %.2f×; innodb=2 ≥ %.2f× the raw pwrite throughput. "+
				"The second table checks them on the medians.", targetTailRatio, fmtMS(targetBufferedMax), targetWA, targetThroughput),
			roundsNote(rounds),
		},
		header: []string{"cell", "commits", "commits/s", "MiB/s", "p50 µs", "p99 µs", "p99.9 µs", "p99.99 µs", "max µs",
			"> 10 ms", "stalls > 10 ms", "stalls in preparation", "% time preparing", "> 100 ms", "rolls", "segment waits", "seal waits", "recycled", "allocated", "prepare ms/segment", "write amplification",
			"WA, second half"},
	}
	for i, c := range cells {
		tb.rows = append(tb.rows, append(append([]string{labels[i]}, rows[i]...), waCell(c, "write_amplification"),
			waCell(c, "write_amplification_second_half")))
	}
	tb.notes = append(tb.notes, waNote(lr))

	return []table{tb, targetsTable(lr, rounds), worstTable(lr)}
}

// lifecycleNote says where the long cells' segments come from.
func lifecycleNote(grow bool) string {
	made := "allocated (fallocate) for the first and, at innodb=0, the rest; zero-filled at innodb=1 and =2 (all but the first), " +
		"and synced. "
	if grow {
		return "The log grows (-long-grow): no checkpoints, so every segment is made new: " + made
	}
	return "The log is checkpointed: after every roll RemoveBefore drops every segment but the previous and the new one, " +
		"and the next segments reuse the freed files (Options.RecycleSegments); the first segments of a fresh log are made new: " + made
}

// fmtDashOr is f, or "—" for 0 (a figure not measured in this cell).
func fmtDashOr(f func(float64) string) func(float64) string {
	return func(x float64) string {
		if x == 0 {
			return "—"
		}
		return f(x)
	}
}

// waCell renders a cell's write amplification (metric), or n/a.
func waCell(c *cell, metric string) string {
	s := c.get(metric)
	if s.Median == 0 {
		return "n/a"
	}
	return fmtSpread(s, func(x float64) string { return fmtRatio(x) + "×" }, false)
}

// waNote says how write amplification was measured, or why it was not.
func waNote(lr *longResult) string {
	if strings.HasPrefix(lr.Device, "n/a") {
		return "Write amplification: " + lr.Device + "."
	}
	return fmt.Sprintf("Write amplification: bytes the block device %s reports written (/proc/diskstats sectors × 512), "+
		"after sync(2) before and after the cell, divided by the payload (records × record size). For the log cells it runs "+
		"from after Open (the first segment already prepared) to after Close; for the raw loops, after the raw file was "+
		"created (and, for the fdatasync loop, zero-filled). It counts every writer on the device, so other work on the "+
		"machine adds to it. \"WA, second half\" (log cells) runs from the commit that completes half the records, when "+
		"the log is checkpointed and its new segments are recycled files (a steady state), to after Close; its start is "+
		"read without a sync, so writeback of the first half that lands after it counts against the second: it errs high.", lr.Device)
}

// targetsTable checks the targets on the medians.
func targetsTable(lr *longResult, rounds int) table {
	t := table{
		title:  "long — the targets",
		notes:  []string{"Checked on the medians of the rounds; ratios are taken within each round. " + roundsNote(rounds)},
		header: []string{"target", "measured", "met"},
	}
	add := func(target, measured, met string) { t.rows = append(t.rows, []string{target, measured, met}) }
	msOf := func(x float64) string { return fmtFloat1(x / 1000) }
	over, rawOver := lr.Sync1.get("over_10ms"), lr.RawSync.get("over_10ms")
	add("innodb=1 × 16: commits over 10 ms ≤ the raw loop's",
		fmt.Sprintf("%s vs %s", fmtSpread(over, fmtCount, false), fmtSpread(rawOver, fmtCount, false)),
		verdict(over.Median <= rawOver.Median, true))
	st, rawSt := lr.Sync1.get("stalls_over_10ms"), lr.RawSync.get("stalls_over_10ms")
	add("innodb=1 × 16: stalls over 10 ms ≤ the raw loop's (commits that waited through one slow moment count once)",
		fmt.Sprintf("%s vs %s", fmtSpread(st, fmtCount, false), fmtSpread(rawSt, fmtCount, false)),
		verdict(st.Median <= rawSt.Median, true))
	if lr.Grow {
		// A growing log prepares a new segment per segment size: the
		// issue allows one commit over 10 ms per 256 MiB beyond the raw
		// loop's.
		allow := float64(max(lr.Volume/growAllowance, 1))
		add(fmt.Sprintf("innodb=1 × 16, growing: commits over 10 ms ≤ the raw loop's + 1 per %s (%.0f)", fmtBytes(growAllowance), allow),
			fmt.Sprintf("%s vs %s", fmtSpread(over, fmtCount, false), fmtSpread(rawOver, fmtCount, false)),
			verdict(over.Median <= rawOver.Median+allow, true))
		add(fmt.Sprintf("innodb=1 × 16, growing: stalls over 10 ms ≤ the raw loop's + 1 per %s", fmtBytes(growAllowance)),
			fmt.Sprintf("%s vs %s", fmtSpread(st, fmtCount, false), fmtSpread(rawSt, fmtCount, false)),
			verdict(st.Median <= rawSt.Median+allow, true))
	}
	tail := crossRatio(lr.Sync1, "p9999_us", lr.RawSync, "p999_us")
	add(fmt.Sprintf("innodb=1 × 16: p99.99 ≤ %d× the raw loop's p99.9", targetTailRatio),
		fmt.Sprintf("%s ms vs %s ms: %s×", msOf(lr.Sync1.get("p9999_us").Median), msOf(lr.RawSync.get("p999_us").Median),
			fmtSpread(tail, fmtRatio, false)),
		verdict(tail.Median <= targetTailRatio, tail.Median > 0))
	for _, c := range []*cell{lr.Level2, lr.Level2Inc, lr.Level0} {
		m := c.get("max_us")
		add(fmt.Sprintf("%s: max ≤ %s ms", c.Name, fmtMS(targetBufferedMax)),
			fmtSpread(m, msOf, false)+" ms", verdict(m.Median <= us(targetBufferedMax), true))
	}
	for _, c := range []*cell{lr.Sync1, lr.Level2, lr.Level2Inc, lr.Level0} {
		wa := c.get("write_amplification_second_half")
		add(fmt.Sprintf("%s: write amplification at steady state (second half) ≤ %.2f×", c.Name, targetWA),
			waCell(c, "write_amplification_second_half")+" (whole run "+waCell(c, "write_amplification")+")",
			verdict(wa.Median <= targetWA, wa.Median > 0))
	}
	for _, c := range []*cell{lr.Level2, lr.Level2Inc} {
		thr := ratioSpread(c, lr.RawAppend, "commits_per_sec")
		add(fmt.Sprintf("%s: ≥ %.2f× the raw pwrite throughput", c.Name, targetThroughput),
			fmtSpread(thr, fmtRatio, false)+"×", verdict(thr.Median >= targetThroughput, thr.Median > 0))
	}
	return t
}

// worstTable lists each log cell's slowest commits over all rounds.
func worstTable(lr *longResult) table {
	t := table{
		title: fmt.Sprintf("long — the %d slowest commits of each log cell and what they waited on", longWorst),
		notes: []string{"\"Waited on\" is the first that applies of: waited for spare segment (Stats.Prepare.Waits moved: the append " +
			"waited for the next segment's preparation), roll waited for the previous seal (Stats.SealWaits moved: a roll waited " +
			"for the segment before it to be synced and linked), roll (the Observer saw a segment roll during the wait), log-buffer full " +
			"(Stats.BufferFullWaits moved), fdatasync took X ms (an fdatasync reported by the Observer overlapped the wait and took at " +
			"least half of it), N fdatasyncs in a row (fdatasyncs, one after another, were in progress for at least half of it: a commit " +
			"that arrives while a group's sync runs waits for it and then for its own group's), unknown. \"During the wait\" lists " +
			"everything counted in it: the longest overlapping fdatasync (the " +
			"commit's own, the background flusher's, a roll's or a segment preparation's), whether the next segment was being " +
			"prepared (reconstructed from Stats.Prepare.Prepared and PrepareTime, sampled every millisecond), write() time of at " +
			"least half the wait, a GC cycle. Counters are sampled every millisecond, so a cause is placed within about a millisecond " +
			"of the wait; it is what happened during the wait, not proof that it alone made the wait long. " +
			"One row per stall: \"alike\" counts the other commits (of each committer's slowest) that returned within a " +
			"millisecond of the listed one, the rest of its group."},
		header: []string{"cell", "round", "at s", "latency ms", "alike", "waited on", "during the wait"},
	}
	for _, c := range []*cell{lr.Sync1, lr.Level2, lr.Level2Inc, lr.Level0} {
		var all []slowExplained
		for _, r := range c.Rounds {
			if r.Long != nil {
				all = append(all, r.Long.Slowest...)
			}
		}
		slices.SortFunc(all, func(a, b slowExplained) int { return int(b.Latency - a.Latency) })
		for _, s := range all[:min(longWorst, len(all))] {
			t.rows = append(t.rows, []string{c.Name, fmt.Sprint(s.Round), fmtFloat1(s.Start.Seconds()),
				fmtFloat1(ms(s.Latency)), fmtInt(s.Alike), s.Cause, s.During})
		}
	}
	return t
}
