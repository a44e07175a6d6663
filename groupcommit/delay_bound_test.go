package groupcommit_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/durawal/durawal/groupcommit"
)

// TestDelayBoundedAtNew: Options.Delay must lie in 0..MaxDelay (1 s, MySQL's
// cap of binlog_group_commit_sync_delay); anything else is ErrInvalidOptions.
func TestDelayBoundedAtNew(t *testing.T) {
	f := &fakeLog{}
	for _, d := range []time.Duration{-time.Nanosecond, groupcommit.MaxDelay + time.Nanosecond, time.Hour} {
		if _, err := groupcommit.New(f.flush, groupcommit.Options{Delay: d}); !errors.Is(err, groupcommit.ErrInvalidOptions) {
			t.Errorf("Delay %v: New err = %v, want ErrInvalidOptions", d, err)
		}
	}
	for _, d := range []time.Duration{0, time.Microsecond, groupcommit.MaxDelay} {
		if _, err := groupcommit.New(f.flush, groupcommit.Options{Delay: d}); err != nil {
			t.Errorf("Delay %v: New err = %v, want nil", d, err)
		}
	}
}

// TestDelayEndsWithLeaderContext: a leader whose context ends during its
// Delay returns ctx.Err() at once, in both styles, and a follower queued
// behind it takes over the lead and is covered.
func TestDelayEndsWithLeaderContext(t *testing.T) {
	for _, style := range []groupcommit.Style{groupcommit.SyncStageWait, groupcommit.LeaderSleep} {
		t.Run(style.String(), func(t *testing.T) {
			f := &fakeLog{}
			q := newQueue(t, f, groupcommit.Options{Delay: groupcommit.MaxDelay, Style: style})
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			defer cancel()
			start := time.Now()
			err := q.Wait(ctx, f.append(10), groupcommit.Synced)
			if took := time.Since(start); took > 500*time.Millisecond {
				t.Errorf("Wait took %v, want it to return when ctx ends (50ms)", took)
			}
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("Wait err = %v, want context.DeadlineExceeded", err)
			}
			// The queue goes on: a later committer leads and is covered.
			q.Drain()
			lsn := f.append(10)
			if err := q.Wait(context.Background(), lsn, groupcommit.Synced); err != nil || !f.covered(lsn, groupcommit.Synced) {
				t.Errorf("later Wait err = %v, covered %v", err, f.covered(lsn, groupcommit.Synced))
			}
		})
	}
}

// TestDrainEndsDelay: Drain ends a leader's Delay at once; the leader then
// flushes and is covered, and later leaders do not delay.
func TestDrainEndsDelay(t *testing.T) {
	f := &fakeLog{}
	q := newQueue(t, f, groupcommit.Options{Delay: groupcommit.MaxDelay})
	done := make(chan error, 1)
	lsn := f.append(10)
	start := time.Now()
	go func() { done <- q.Wait(context.Background(), lsn, groupcommit.Synced) }()
	for q.Stats().DelaySleeps == 0 {
		time.Sleep(time.Millisecond)
	}
	q.Drain()
	if err := <-done; err != nil || !f.covered(lsn, groupcommit.Synced) {
		t.Fatalf("Wait err = %v, covered %v", err, f.covered(lsn, groupcommit.Synced))
	}
	if took := time.Since(start); took > 500*time.Millisecond {
		t.Errorf("Wait took %v after Drain, want at once", took)
	}
	start = time.Now()
	if err := q.Wait(context.Background(), f.append(10), groupcommit.Synced); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 500*time.Millisecond {
		t.Errorf("Wait after Drain took %v, want no delay", took)
	}
}
