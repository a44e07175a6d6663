package groupcommit_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/durawal/durawal/groupcommit"
)

// delayRun starts a leader at t=0 and `late` more committers at t=arrive
// (inside the leader's delay, if any), all needing need; it returns the
// bubble-relative times at which each flush started, and the stats.
func delayRun(t *testing.T, opts groupcommit.Options, need groupcommit.Level, late int, arrive time.Duration) ([]time.Duration, groupcommit.Stats) {
	t.Helper()
	var starts []time.Duration
	var mu sync.Mutex
	var stats groupcommit.Stats
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		f := &fakeLog{}
		f.hold = func(int64) error {
			mu.Lock()
			starts = append(starts, time.Since(t0))
			mu.Unlock()
			time.Sleep(time.Millisecond) // the simulated sync
			return nil
		}
		q := newQueue(t, f, opts)
		var wg sync.WaitGroup
		commit := func() {
			if err := q.Wait(context.Background(), f.append(10), need); err != nil {
				t.Error(err)
			}
		}
		wg.Go(commit)
		time.Sleep(arrive)
		for range late {
			wg.Go(commit)
		}
		wg.Wait()
		stats = q.Stats()
	})
	return starts, stats
}

func TestDelaySyncStageWait(t *testing.T) {
	const delay = 10 * time.Millisecond // slices of 1 ms
	t.Run("max batch reached", func(t *testing.T) {
		opts := groupcommit.Options{Delay: delay, MaxBatch: 4, DisableAdaptiveWait: true}
		starts, s := delayRun(t, opts, groupcommit.Synced, 3, 2500*time.Microsecond)
		// Three followers queue at 2.5 ms; the leader sees 4 queued at the
		// next slice boundary, 3 ms, and flushes all four at once.
		if len(starts) != 1 || starts[0] != 3*time.Millisecond {
			t.Fatalf("flush starts %v, want [3ms]", starts)
		}
		if s.TriggerCount != 1 || s.TriggerTimeout != 0 || s.DelaySleeps != 1 || s.GroupSizeMax != 4 {
			t.Fatalf("stats = %+v", s)
		}
	})
	t.Run("max batch not reached", func(t *testing.T) {
		opts := groupcommit.Options{Delay: delay, MaxBatch: 8, DisableAdaptiveWait: true}
		starts, s := delayRun(t, opts, groupcommit.Synced, 3, 2500*time.Microsecond)
		if len(starts) != 1 || starts[0] != delay { // never longer than Delay
			t.Fatalf("flush starts %v, want [%v]", starts, delay)
		}
		if s.TriggerCount != 0 || s.TriggerTimeout != 1 || s.DelaySleeps != 1 || s.GroupSizeMax != 4 {
			t.Fatalf("stats = %+v", s)
		}
	})
	t.Run("max batch zero waits the full delay", func(t *testing.T) {
		opts := groupcommit.Options{Delay: delay, DisableAdaptiveWait: true}
		starts, s := delayRun(t, opts, groupcommit.Synced, 0, 0)
		if len(starts) != 1 || starts[0] != delay {
			t.Fatalf("flush starts %v, want [%v]", starts, delay)
		}
		if s.TriggerTimeout != 1 || s.DelaySleeps != 1 {
			t.Fatalf("stats = %+v", s)
		}
	})
	t.Run("tiny delay sleeps at least 1µs slices", func(t *testing.T) {
		opts := groupcommit.Options{Delay: 5 * time.Microsecond, DisableAdaptiveWait: true}
		starts, s := delayRun(t, opts, groupcommit.Synced, 0, 0)
		if len(starts) != 1 || starts[0] != 5*time.Microsecond || s.TriggerTimeout != 1 {
			t.Fatalf("flush starts %v, stats %+v", starts, s)
		}
	})
}

func TestDelayLeaderSleep(t *testing.T) {
	const delay = 10 * time.Millisecond
	t.Run("lone committer below min active", func(t *testing.T) {
		opts := groupcommit.Options{Delay: delay, MinActive: 1, Style: groupcommit.LeaderSleep, DisableAdaptiveWait: true}
		starts, s := delayRun(t, opts, groupcommit.Synced, 0, 0)
		if len(starts) != 1 || starts[0] != 0 || s.DelaySleeps != 0 {
			t.Fatalf("flush starts %v, stats %+v", starts, s)
		}
	})
	t.Run("min active zero always sleeps", func(t *testing.T) {
		opts := groupcommit.Options{Delay: delay, Style: groupcommit.LeaderSleep, DisableAdaptiveWait: true}
		starts, s := delayRun(t, opts, groupcommit.Synced, 0, 0)
		if len(starts) != 1 || starts[0] != delay || s.DelaySleeps != 1 {
			t.Fatalf("flush starts %v, stats %+v", starts, s)
		}
	})
	t.Run("enough siblings", func(t *testing.T) {
		// The first leader is alone (no sleep, flush at 0 for 1 ms); three
		// committers queue at 0.5 ms. The next leader sees two others inside
		// Wait, sleeps the whole Delay, and flushes the two others with it.
		opts := groupcommit.Options{Delay: delay, MinActive: 2, Style: groupcommit.LeaderSleep, DisableAdaptiveWait: true}
		starts, s := delayRun(t, opts, groupcommit.Synced, 3, 500*time.Microsecond)
		want := []time.Duration{0, time.Millisecond + delay}
		if len(starts) != 2 || starts[0] != want[0] || starts[1] != want[1] {
			t.Fatalf("flush starts %v, want %v", starts, want)
		}
		if s.DelaySleeps != 1 || s.GroupSizeMax != 3 || s.TriggerCount+s.TriggerTimeout != 0 {
			t.Fatalf("stats = %+v", s)
		}
	})
}

func TestDelayNotApplied(t *testing.T) {
	for _, style := range []groupcommit.Style{groupcommit.SyncStageWait, groupcommit.LeaderSleep} {
		t.Run(style.String()+"/delay zero", func(t *testing.T) {
			starts, s := delayRun(t, groupcommit.Options{Style: style}, groupcommit.Synced, 3, 500*time.Microsecond)
			if starts[0] != 0 || starts[1] != time.Millisecond || s.DelaySleeps != 0 || s.TriggerTimeout+s.TriggerCount != 0 {
				t.Fatalf("flush starts %v, stats %+v", starts, s)
			}
		})
		t.Run(style.String()+"/write-only group", func(t *testing.T) {
			opts := groupcommit.Options{Delay: 10 * time.Millisecond, Style: style}
			starts, s := delayRun(t, opts, groupcommit.Written, 3, 500*time.Microsecond)
			if starts[0] != 0 || starts[1] != time.Millisecond || s.DelaySleeps != 0 || s.SyncGroups != 0 {
				t.Fatalf("flush starts %v, stats %+v", starts, s)
			}
		})
	}
}
