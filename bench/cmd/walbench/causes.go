package main

import (
	"cmp"
	"fmt"
	"runtime/metrics"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/durawal/durawal/wal"
)

// What the slowest commits waited on, seen from outside the log: while a
// run's committers commit, a sampler goroutine reads wal.Stats (and the Go
// runtime's GC cycle count) every sampleEvery; each committer keeps its
// slowest commits with their start times. Afterwards the counters that moved
// between the sample before a slow commit started and the sample after it
// returned name what happened during its wait: a segment roll and its sync,
// a wait for the next segment, a full log buffer written first, a
// background sync, a postponed write, a group delay, a sync or a write()
// that took most of the wait, a GC cycle. A commit during which none moved
// waited on something the log does not count: the scheduler (more
// committers than cores) or a lock.

// sampleEvery is the sampler's period; a cause is attributed to a commit
// within about this much of its start and end.
const sampleEvery = time.Millisecond

// worstPerRun caps how many slow commits one run examines.
const worstPerRun = 32

// sample is the counters at one moment, at an offset from the run's start.
type sample struct {
	at                                         time.Duration
	rolls, stalls, bufFull, bgSyncs, postponed uint64
	fsyncs, delays, sealWaits                  uint64
	fsyncTime, writeTime                       time.Duration
	gcCycles                                   uint64
	// The segment lifecycle (Stats.Prepare): segments prepared, the time
	// spent preparing them, and the time appends spent waiting for one.
	prepared              uint64
	prepareTime, waitTime time.Duration
}

// gcReader reads the runtime's GC cycle count without allocating.
type gcReader struct{ s []metrics.Sample }

func newGCReader() *gcReader {
	return &gcReader{s: []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}}}
}

func (g *gcReader) cycles() uint64 {
	metrics.Read(g.s)
	if g.s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return g.s[0].Value.Uint64()
}

// takeSample reads l's counters now.
func takeSample(l *wal.Log, at time.Duration, g *gcReader) sample {
	s := l.Stats()
	return sample{
		at: at, rolls: s.Rolls, stalls: s.Prepare.Waits, bufFull: s.BufferFullWaits,
		bgSyncs: s.BackgroundSyncs, postponed: s.PostponedWrites, fsyncs: s.Fsyncs, sealWaits: s.SealWaits,
		delays:    s.Group.DelaySleeps + s.Group.TriggerCount + s.Group.TriggerTimeout,
		fsyncTime: s.FsyncTimeTotal, writeTime: s.WriteTimeTotal, gcCycles: g.cycles(),
		prepared: s.Prepare.Prepared, prepareTime: s.Prepare.PrepareTime, waitTime: s.Prepare.WaitTime,
	}
}

// sampler polls a log's counters until stopped.
type sampler struct {
	l       *wal.Log
	start   time.Time
	mu      sync.Mutex
	samples []sample
	stop    chan struct{}
	done    chan struct{}
}

// startSampler takes a first sample and polls l every sampleEvery, timing
// samples from start.
func startSampler(l *wal.Log, start time.Time) *sampler {
	s := &sampler{l: l, start: start, stop: make(chan struct{}), done: make(chan struct{})}
	g := newGCReader()
	s.samples = append(s.samples, takeSample(l, 0, g))
	go func() {
		defer close(s.done)
		t := time.NewTicker(sampleEvery)
		defer t.Stop()
		for {
			select {
			case <-s.stop:
				return
			case <-t.C:
				smp := takeSample(l, time.Since(start), g)
				s.mu.Lock()
				s.samples = append(s.samples, smp)
				s.mu.Unlock()
			}
		}
	}()
	return s
}

// finish stops the sampler, takes a last sample and returns them all.
func (s *sampler) finish() []sample {
	close(s.stop)
	<-s.done
	s.samples = append(s.samples, takeSample(s.l, time.Since(s.start), newGCReader()))
	return s.samples
}

// slowCommit is one commit kept for attribution.
type slowCommit struct {
	start, latency time.Duration // start is the offset from the run's start
}

// slowest keeps the k slowest commits of one committer, and every one of
// its commits over 10 ms.
type slowest struct {
	k    int
	kept []slowCommit
	min  int          // index of the fastest kept
	over []slowCommit // every commit over over10ms, in order
}

func (s *slowest) add(c slowCommit) {
	if c.latency > over10ms {
		s.over = append(s.over, c)
	}
	if len(s.kept) < s.k {
		s.kept = append(s.kept, c)
		if c.latency < s.kept[s.min].latency {
			s.min = len(s.kept) - 1
		}
		return
	}
	if c.latency <= s.kept[s.min].latency {
		return
	}
	s.kept[s.min] = c
	for i, k := range s.kept {
		if k.latency < s.kept[s.min].latency {
			s.min = i
		}
	}
}

// tailCauses counts, over the slowest commits of a cell's rounds, what
// moved while each waited. A commit may have several causes.
type tailCauses struct {
	Commits int `json:"commits"` // slow commits examined
	// Fastest is the latency of the fastest commit examined: every one
	// took at least this long.
	Fastest time.Duration  `json:"fastest_examined_ns"`
	Causes  map[string]int `json:"causes"`
}

// Cause names, in the order tables list them.
const (
	causeStall     = "segment wait"
	causeRoll      = "roll"
	causeBuffer    = "buffer full"
	causeBgSync    = "background sync"
	causePostponed = "postponed write"
	causeDelay     = "group delay"
	causeSync      = "sync"
	causeWrite     = "write()"
	causeGC        = "GC"
	causeNone      = "none counted"
)

var causeOrder = []string{causeStall, causeRoll, causeBuffer, causeBgSync, causePostponed, causeDelay, causeSync, causeWrite, causeGC, causeNone}

// causesNote explains the "slowest commits waited on" column.
const causesNote = "\"Slowest commits\": the slowest 0.1% of each round's commits (at least 1, at most 32 a round), " +
	"and what the log's counters (wal.Stats, sampled every millisecond) and the Go runtime recorded while each waited: " +
	"segment wait = waited for the next segment to be prepared (Stats.Prepare.Waits); " +
	"roll = a segment was finished and replaced (Rolls; its sync runs in the background, but a commit that needs durability waits for it); buffer full = the log buffer had to be written before " +
	"an append could copy its record (BufferFullWaits); background sync = the flusher's periodic fdatasync ran " +
	"(BackgroundSyncs); postponed write = a write waited for a background sync (PostponedWrites); " +
	"group delay = a leader waited to grow its group; sync = fdatasync calls took at least half the wait " +
	"(FsyncTimeTotal); write() = write calls took at least half the wait (WriteTimeTotal: a write held up by " +
	"page-cache writeback or the journal); " +
	"GC = a Go garbage collection cycle; none counted = nothing the log counts happened: the wait was the scheduler " +
	"(more committers than cores) or a lock. A commit can have several; " +
	"a cause is what happened during the wait, within a millisecond, not proof that it alone made the wait long."

// attribute picks the slowest commits (0.1% of total, 1..worstPerRun) from
// kept and names what moved in samples while each waited.
func attribute(kept []slowCommit, total int, samples []sample) *tailCauses {
	if len(kept) == 0 || len(samples) == 0 {
		return nil
	}
	n := min(max((total+999)/1000, 1), worstPerRun, len(kept))
	slices.SortFunc(kept, func(a, b slowCommit) int { return int(b.latency - a.latency) })
	tc := &tailCauses{Commits: n, Fastest: kept[n-1].latency, Causes: map[string]int{}}
	for _, c := range kept[:n] {
		for _, cause := range causesOf(c, samples) {
			tc.Causes[cause]++
		}
	}
	return tc
}

// causesOf returns what moved between the last sample at or before c began
// and the first sample at or after it ended.
func causesOf(c slowCommit, samples []sample) []string {
	a, b := bracket(c, samples)
	var out []string
	add := func(moved bool, name string) {
		if moved {
			out = append(out, name)
		}
	}
	add(b.stalls > a.stalls, causeStall)
	add(b.rolls > a.rolls, causeRoll)
	add(b.bufFull > a.bufFull, causeBuffer)
	add(b.bgSyncs > a.bgSyncs, causeBgSync)
	add(b.postponed > a.postponed, causePostponed)
	add(b.delays > a.delays, causeDelay)
	add(b.fsyncs > a.fsyncs && 2*(b.fsyncTime-a.fsyncTime) >= c.latency, causeSync)
	add(2*(b.writeTime-a.writeTime) >= c.latency, causeWrite)
	add(b.gcCycles > a.gcCycles, causeGC)
	if len(out) == 0 {
		out = append(out, causeNone)
	}
	return out
}

// bracket returns the last sample at or before c began and the first at or
// after it ended (the nearest ones where the samples stop short).
func bracket(c slowCommit, samples []sample) (a, b sample) {
	end := c.start + c.latency
	i, _ := slices.BinarySearchFunc(samples, c.start, func(s sample, t time.Duration) int { return cmp.Compare(s.at, t) })
	if i >= len(samples) || samples[i].at > c.start {
		i = max(i-1, 0)
	}
	j, _ := slices.BinarySearchFunc(samples, end, func(s sample, t time.Duration) int { return cmp.Compare(s.at, t) })
	j = min(j, len(samples)-1)
	return samples[i], samples[j]
}

// mergeCauses adds up the rounds' attributions.
func mergeCauses(rounds []result) *tailCauses {
	var out *tailCauses
	for _, r := range rounds {
		if r.Worst == nil {
			continue
		}
		if out == nil {
			out = &tailCauses{Fastest: r.Worst.Fastest, Causes: map[string]int{}}
		}
		out.Commits += r.Worst.Commits
		out.Fastest = min(out.Fastest, r.Worst.Fastest)
		for k, v := range r.Worst.Causes {
			out.Causes[k] += v
		}
	}
	return out
}

// String renders tc for a table cell: "32 ≥ 1,234 µs: roll 3, sync 30".
func (tc *tailCauses) String() string {
	if tc == nil || tc.Commits == 0 {
		return "—"
	}
	var parts []string
	for _, c := range causeOrder {
		if n := tc.Causes[c]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", c, n))
		}
	}
	return fmt.Sprintf("%d ≥ %s µs: %s", tc.Commits, fmtUS(tc.Fastest), strings.Join(parts, ", "))
}

// stalls counts the moments when commits took over 10 ms: the disjoint
// intervals the union of the slow commits' waits (start to return) makes.
// Commits that waited through the same slow moment (a group's slow
// fdatasync, which every member of the group waits for) count once, so a
// log shared by 16 committers compares with a loop of one.
func stalls(over []slowCommit) int { return len(stallSpans(over)) }

// stallSpans returns the stretches of time the commits in over waited
// through, overlapping waits merged: one span per stall.
func stallSpans(over []slowCommit) []span {
	s := slices.Clone(over)
	slices.SortFunc(s, func(a, b slowCommit) int { return cmp.Compare(a.start, b.start) })
	var out []span
	for _, c := range s {
		if n := len(out); n > 0 && c.start <= out[n-1].to {
			out[n-1].to = max(out[n-1].to, c.start+c.latency)
			continue
		}
		out = append(out, span{from: c.start, to: c.start + c.latency})
	}
	return out
}
