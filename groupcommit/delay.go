package groupcommit

import (
	"context"
	"math/bits"
	"runtime"
	"time"
)

const (
	// adaptFraction bounds the adaptive wait: flushEWMA / adaptFraction.
	// About 10% of the flush time was measured too short to merge the
	// cohorts; 25% merges them.
	adaptFraction = 4
	// adaptMinPaid is how many of the last 8 adaptive waits must have paid
	// off for the next one to be taken; below it the leader only probes.
	adaptMinPaid = 4
	// adaptProbeEvery is how many skipped opportunities pass between probes
	// while the adaptive wait is backed off.
	adaptProbeEvery = 16
	// adaptMaxSpins caps the spin by iterations as well as by time, so that a
	// clock that does not move (testing/synctest) cannot trap a leader.
	adaptMaxSpins = 1 << 14
)

// delayLocked applies Options.Delay in the configured Style before a syncing
// flush. It is called and returns with q.mu held, releasing it while it
// sleeps, and reports whether the Delay governed this group (the leader slept
// or MaxBatch closed the group), in which case no adaptive wait follows. It
// ends early if ctx ends, the queue fails, or [Queue.Drain] was called.
func (q *Queue) delayLocked(ctx context.Context) bool {
	d := q.opts.Delay
	if d <= 0 || q.hurry.Load() {
		return false
	}
	if q.opts.Style == LeaderSleep {
		// PostgreSQL MinimumActiveBackends(commit_siblings): count the others.
		if q.active-1 < q.opts.MinActive {
			return false
		}
		q.stats.DelaySleeps++
		q.mu.Unlock()
		q.sleep(ctx, d)
		q.mu.Lock()
		return true
	}

	// MySQL Commit_stage_manager::wait_count_or_timeout: slices of
	// max(1µs, delay/10), stopping early at MaxBatch queued commits.
	slice := max(time.Microsecond, d/10)
	slept := false
	deadline := time.Now().Add(d) // timed by the clock, so late wake-ups do not add up
	for left := d; q.err == nil && !q.hurry.Load() && ctx.Err() == nil; left = time.Until(deadline) {
		if q.opts.MaxBatch > 0 && 1+len(q.waiters) >= q.opts.MaxBatch {
			q.stats.TriggerCount++
			break
		}
		if left <= 0 {
			q.stats.TriggerTimeout++
			break
		}
		s := min(slice, left)
		if !slept {
			slept = true
			q.stats.DelaySleeps++
		}
		q.mu.Unlock()
		q.sleep(ctx, s)
		q.mu.Lock()
	}
	return true
}

// preciseBelow is the longest wait that sleep makes by spinning: a Go timer
// under about 1 ms fires up to 1 ms late once the process idles, which would
// turn a 500 µs binlog_group_commit_sync_delay into 1 ms per slice (about
// 11 ms for ten slices, measured here).
const preciseBelow = 2 * time.Millisecond

// sleep waits d, or until ctx ends, the queue fails or is drained. A short wait spins, yielding the
// processor to the committers it waits for; the leader's reusable timer
// takes longer waits, and what is left after a bounded spin (so that under
// testing/synctest, whose clock moves only when every goroutine blocks, the
// fake clock still advances). Only the leader calls it.
func (q *Queue) sleep(ctx context.Context, d time.Duration) {
	if d < preciseBelow {
		end := time.Now().Add(d)
		for i := 0; i < adaptMaxSpins; i++ {
			if q.hurry.Load() || !time.Now().Before(end) {
				return
			}
			runtime.Gosched()
		}
		if d = time.Until(end); d <= 0 {
			return
		}
	}
	if q.timer == nil {
		q.timer = time.NewTimer(d)
	} else {
		q.timer.Reset(d)
	}
	select {
	case <-q.timer.C:
	case <-q.stop:
		q.timer.Stop()
	case <-ctx.Done():
		q.timer.Stop()
	}
}

// adaptiveWaitLocked is the adaptive merge wait. When the previous flush
// released n > 1 committers that have not all come back yet, the leader waits
// for them (until n arrivals since that flush ended) for at most a quarter of
// the average flush time, so that they join this group instead of waiting a
// whole extra flush for the next one (the two-cohort effect). It waits only
// while recent waits paid off; otherwise it probes now and then. It is called
// and returns with q.mu held, releasing it while it waits.
func (q *Queue) adaptiveWaitLocked() {
	if q.opts.DisableAdaptiveWait || q.released < 2 || q.flushEWMA <= 0 || q.err != nil || q.hurry.Load() {
		return
	}
	target := q.releaseMark + q.released
	got := q.arrivals.Load()
	if got >= target {
		return // all back already: nobody to wait for
	}
	if bits.OnesCount8(q.adaptHistory) < adaptMinPaid {
		if q.adaptSkipped++; q.adaptSkipped < adaptProbeEvery {
			return
		}
	}
	q.adaptSkipped = 0
	q.stats.AdaptiveWaits++
	bound := q.flushEWMA / adaptFraction
	q.mu.Unlock()
	end := q.spinUntil(target, bound)
	q.mu.Lock()
	paid := 2*(end-got) >= target-got // at least half of those awaited came
	q.adaptHistory <<= 1
	if paid {
		q.adaptHistory |= 1
		q.stats.AdaptiveMerges++
	}
}

// spinUntil yields the processor until arrivals reach target, the queue
// fails, or bound has passed, and returns the arrivals seen. It spins rather
// than sleeping on a channel plus timer: the committers it waits for need the
// processor to come back, and a Go timer under 1 ms can fire up to 1 ms late
// once the process goes idle, which is exactly when nobody comes back.
// Measured on 2 cores with fdatasync: both merged closed-loop cohorts equally
// (k = 8–32), but with open-loop arrivals the timer's late firing stretched
// the waits that did not pay off (p50 up to 2–3× the spin's at 2000–5000/s).
func (q *Queue) spinUntil(target uint64, bound time.Duration) uint64 {
	start := time.Now()
	for i := 0; ; i++ {
		n := q.arrivals.Load()
		if n >= target || q.hurry.Load() || i >= adaptMaxSpins || time.Since(start) >= bound {
			return n
		}
		runtime.Gosched()
	}
}
