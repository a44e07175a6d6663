package groupcommit_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/durawal/durawal/groupcommit"
)

func TestNewValidates(t *testing.T) {
	f := &fakeLog{}
	for _, tc := range []struct {
		name  string
		flush groupcommit.FlushFunc
		opts  groupcommit.Options
	}{
		{"nil flush", nil, groupcommit.Options{}},
		{"negative delay", f.flush, groupcommit.Options{Delay: -1}},
		{"negative max batch", f.flush, groupcommit.Options{MaxBatch: -1}},
		{"negative min active", f.flush, groupcommit.Options{MinActive: -1}},
		{"unknown style", f.flush, groupcommit.Options{Style: 7}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q, err := groupcommit.New(tc.flush, tc.opts)
			if !errors.Is(err, groupcommit.ErrInvalidOptions) || q != nil {
				t.Fatalf("New = %v, %v; want nil, ErrInvalidOptions", q, err)
			}
		})
	}
	if _, err := groupcommit.New(f.flush, groupcommit.Options{}); err != nil {
		t.Fatalf("zero Options: %v", err)
	}
}

func TestQueueWaitInvalidLevel(t *testing.T) {
	f := &fakeLog{}
	q := newQueue(t, f, groupcommit.Options{})
	if err := q.Wait(t.Context(), f.append(1), 3); !errors.Is(err, groupcommit.ErrInvalidLevel) {
		t.Fatalf("Wait(level 3) = %v, want ErrInvalidLevel", err)
	}
	if f.flushes.Load() != 0 {
		t.Fatal("FlushFunc called for an invalid level")
	}
}

func TestQueueLoneCommitter(t *testing.T) {
	f := &fakeLog{}
	q := newQueue(t, f, groupcommit.Options{})
	for i := range 100 {
		need := groupcommit.Level(1 + i%2)
		lsn := f.append(10)
		if err := q.Wait(t.Context(), lsn, need); err != nil {
			t.Fatal(err)
		}
		if !f.covered(lsn, need) {
			t.Fatalf("commit %d acknowledged uncovered", i)
		}
	}
	// A covered LSN returns at once, without a flush.
	if err := q.Wait(t.Context(), 10, groupcommit.Written); err != nil {
		t.Fatal(err)
	}
	s := q.Stats()
	if s.Commits != 101 || s.Groups != 100 || s.SyncGroups != 50 || s.GroupSizeMax != 1 || s.GroupSizeHist[0] != 100 {
		t.Fatalf("stats = %+v", s)
	}
	if s.Written != 1000 || s.Synced != 1000 || s.AdaptiveWaits != 0 {
		t.Fatalf("stats = %+v", s)
	}
}

// TestQueueNoEarlyAck blocks the first flush and checks that nobody, leader
// or follower, returns before FlushFunc does; then that covered followers
// are woken by that flush and uncovered ones form the next group.
func TestQueueNoEarlyAck(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeLog{}
		g := newGate(1)
		f.hold = g.hold
		q := newQueue(t, f, groupcommit.Options{})
		var returned atomic.Int32
		commit := func(lsn uint64) {
			if err := q.Wait(context.Background(), lsn, groupcommit.Synced); err != nil {
				t.Errorf("Wait(%d): %v", lsn, err)
			}
			if !f.covered(lsn, groupcommit.Synced) {
				t.Errorf("Wait(%d) returned uncovered", lsn)
			}
			returned.Add(1)
		}
		lsnA, lsnB := f.append(10), f.append(10) // both appended before the flush
		go commit(lsnA)                          // the leader
		<-g.entered
		go commit(lsnB) // covered by flush 1
		lsnC := f.append(10)
		go commit(lsnC) // appended after flush 1 began: next group
		synctest.Wait()
		if n := returned.Load(); n != 0 {
			t.Fatalf("%d Waits returned before the flush returned", n)
		}
		if s := q.Stats(); s.Active != 3 || s.Groups != 0 {
			t.Fatalf("stats = %+v", s)
		}
		g.open()
		synctest.Wait()
		if n := returned.Load(); n != 3 {
			t.Fatalf("%d Waits returned, want 3", n)
		}
		s := q.Stats()
		if s.Groups != 2 || s.GroupSizeMax != 2 || s.GroupSizeMin != 1 || s.GroupSizeMean != 1.5 || s.Commits != 3 {
			t.Fatalf("stats = %+v", s)
		}
		if s.GroupSizeHist[0] != 1 || s.GroupSizeHist[1] != 1 {
			t.Fatalf("hist = %v", s.GroupSizeHist)
		}
	})
}

// TestQueueFlushLevel checks that the leader flushes at the highest level
// queued, and that a Synced flush also covers Written waiters.
func TestQueueFlushLevel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeLog{}
		g := newGate(1)
		f.hold = g.hold
		q := newQueue(t, f, groupcommit.Options{})
		go q.Wait(context.Background(), f.append(10), groupcommit.Written)
		<-g.entered
		go q.Wait(context.Background(), f.append(10), groupcommit.Written)
		go q.Wait(context.Background(), f.append(10), groupcommit.Synced)
		synctest.Wait()
		g.open()
		synctest.Wait()
		if s := q.Stats(); s.Groups != 2 || s.SyncGroups != 1 || s.Commits != 3 || s.Synced != 30 {
			t.Fatalf("stats = %+v", s)
		}
	})
}

func TestQueueCancelledFollower(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeLog{}
		g := newGate(1)
		f.hold = g.hold
		q := newQueue(t, f, groupcommit.Options{})
		lsnLeader, lsnF := f.append(10), f.append(10)
		leaderDone := make(chan error)
		go func() { leaderDone <- q.Wait(context.Background(), lsnLeader, groupcommit.Synced) }()
		<-g.entered
		ctx, cancel := context.WithCancel(context.Background())
		followerDone := make(chan error)
		go func() { followerDone <- q.Wait(ctx, lsnF, groupcommit.Synced) }()
		synctest.Wait()
		cancel()
		if err := <-followerDone; !errors.Is(err, context.Canceled) {
			t.Fatalf("follower: %v, want context.Canceled", err)
		}
		select {
		case <-leaderDone:
			t.Fatal("leader returned before its flush")
		default:
		}
		g.open()
		if err := <-leaderDone; err != nil {
			t.Fatalf("leader: %v", err)
		}
		if !f.covered(lsnF, groupcommit.Synced) {
			t.Fatal("the cancelled follower's record was not flushed")
		}
		if s := q.Stats(); s.Commits != 1 || s.Groups != 1 || s.GroupSizeMax != 1 {
			t.Fatalf("stats = %+v", s)
		}
	})
}

// TestQueueCancelledNextLeader cancels a follower that the finished flush
// picks as the next leader: it must pass leadership on, not strand the group.
func TestQueueCancelledNextLeader(t *testing.T) {
	for range 50 {
		synctest.Test(t, func(t *testing.T) {
			f := &fakeLog{}
			g := newGate(1)
			f.hold = g.hold
			q := newQueue(t, f, groupcommit.Options{})
			go q.Wait(context.Background(), f.append(10), groupcommit.Synced)
			<-g.entered
			ctx, cancel := context.WithCancel(context.Background())
			cancelled := make(chan error, 1)
			go func() { cancelled <- q.Wait(ctx, f.append(10), groupcommit.Synced) }()
			synctest.Wait()
			others := make(chan error, 3)
			for range 3 {
				go func() { others <- q.Wait(context.Background(), f.append(10), groupcommit.Synced) }()
			}
			synctest.Wait()
			cancel() // races with the wake-up below
			g.open()
			if err := <-cancelled; err != nil && !errors.Is(err, context.Canceled) {
				t.Fatalf("cancelled follower: %v", err)
			}
			for range 3 {
				if err := <-others; err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

func TestQueueFlushErrorFanOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		errSync := errors.New("sync: input/output error")
		f := &fakeLog{}
		entered, release := make(chan struct{}), make(chan struct{})
		f.hold = func(n int64) error {
			close(entered) // a second flush would panic here
			<-release
			return errSync
		}
		q := newQueue(t, f, groupcommit.Options{})
		errs := make(chan error, 5)
		go func() { errs <- q.Wait(context.Background(), f.append(10), groupcommit.Synced) }()
		<-entered
		for range 4 {
			go func() { errs <- q.Wait(context.Background(), f.append(10), groupcommit.Synced) }()
		}
		synctest.Wait()
		close(release)
		for range 5 {
			if err := <-errs; err != errSync {
				t.Fatalf("member got %v, want the flush error unchanged", err)
			}
		}
		for _, need := range []groupcommit.Level{groupcommit.Written, groupcommit.Synced} {
			if err := q.Wait(context.Background(), f.append(10), need); err != errSync {
				t.Fatalf("later Wait: %v", err)
			}
		}
		if err := q.Wait(context.Background(), 1, groupcommit.Written); err != errSync {
			t.Fatalf("later Wait on an old LSN: %v", err)
		}
		if n := f.flushes.Load(); n != 1 {
			t.Fatalf("FlushFunc called %d times, want 1", n)
		}
		if q.Err() != errSync {
			t.Fatalf("Err = %v", q.Err())
		}
	})
}

func TestQueueFailWithWaitersQueued(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		errClosed := errors.New("wal: closed")
		f := &fakeLog{}
		g := newGate(1)
		f.hold = g.hold
		q := newQueue(t, f, groupcommit.Options{})
		leader := make(chan error, 1)
		go func() { leader <- q.Wait(context.Background(), f.append(10), groupcommit.Synced) }()
		<-g.entered
		followers := make(chan error, 8)
		for range 8 {
			go func() { followers <- q.Wait(context.Background(), f.append(10), groupcommit.Synced) }()
		}
		synctest.Wait()
		q.Fail(errClosed)
		q.Fail(errors.New("second failure loses"))
		for range 8 {
			if err := <-followers; err != errClosed {
				t.Fatalf("follower: %v", err)
			}
		}
		g.open() // the flush in flight ends; its leader gets the sticky error
		if err := <-leader; err != errClosed {
			t.Fatalf("leader: %v", err)
		}
		if err := q.Wait(context.Background(), f.append(10), groupcommit.Synced); err != errClosed {
			t.Fatalf("later Wait: %v", err)
		}
		if n := f.flushes.Load(); n != 1 {
			t.Fatalf("FlushFunc called %d times after Fail", n)
		}
		if s := q.Stats(); s.Synced != 10 || s.Active != 0 {
			t.Fatalf("the in-flight flush's watermarks were not recorded: %+v", s)
		}
	})
}

func TestQueueFailDuringDelay(t *testing.T) {
	for _, style := range []groupcommit.Style{groupcommit.SyncStageWait, groupcommit.LeaderSleep} {
		t.Run(style.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				errClosed := errors.New("wal: closed")
				f := &fakeLog{}
				q := newQueue(t, f, groupcommit.Options{Delay: time.Second, Style: style})
				errs := make(chan error, 4)
				start := time.Now()
				go func() { errs <- q.Wait(context.Background(), f.append(10), groupcommit.Synced) }()
				synctest.Wait() // the leader is asleep in its Delay
				for range 3 {
					go func() { errs <- q.Wait(context.Background(), f.append(10), groupcommit.Synced) }()
				}
				synctest.Wait()
				q.Fail(errClosed)
				for range 4 {
					if err := <-errs; err != errClosed {
						t.Fatalf("Wait: %v", err)
					}
				}
				if d := time.Since(start); d != 0 {
					t.Fatalf("waiters returned after %v, want at once", d)
				}
				if n := f.flushes.Load(); n != 0 {
					t.Fatalf("FlushFunc called %d times after Fail", n)
				}
			})
		})
	}
}

func TestQueueAdvance(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeLog{}
		g := newGate(1)
		f.hold = g.hold
		q := newQueue(t, f, groupcommit.Options{})
		go q.Wait(context.Background(), f.append(10), groupcommit.Written)
		<-g.entered
		done := make(chan error, 1)
		lsn := f.append(10)
		go func() { done <- q.Wait(context.Background(), lsn, groupcommit.Synced) }()
		synctest.Wait()
		q.Advance(lsn, lsn-1) // not synced far enough: still waiting
		synctest.Wait()
		select {
		case err := <-done:
			t.Fatalf("woken uncovered: %v", err)
		default:
		}
		q.Advance(0, lsn) // a background sync covered it; never lowers written
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if s := q.Stats(); s.Written != lsn || s.Synced != lsn {
			t.Fatalf("stats = %+v", s)
		}
		g.open()
	})
}

// TestQueueStress runs 64 committers with mixed levels, random cancellation
// and background Advance calls; run it under -race.
func TestQueueStress(t *testing.T) {
	f := &fakeLog{}
	f.hold = func(int64) error {
		time.Sleep(time.Duration(rand.IntN(100)) * time.Microsecond)
		return nil
	}
	q := newQueue(t, f, groupcommit.Options{})
	const committers, each = 64, 200
	var wg sync.WaitGroup
	var acked atomic.Uint64
	stop := make(chan struct{})
	go func() { // a background syncer reporting progress, as package wal's flusher does
		for {
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Microsecond):
				q.Advance(f.written.Load(), f.synced.Load())
			}
		}
	}()
	for range committers {
		wg.Go(func() {
			for range each {
				need := groupcommit.Level(1 + rand.IntN(2))
				lsn := f.append(uint64(1 + rand.IntN(100)))
				ctx, cancel := context.WithCancel(context.Background())
				if rand.IntN(20) == 0 {
					cancel()
				}
				err := q.Wait(ctx, lsn, need)
				cancel()
				switch {
				case err == nil:
					acked.Add(1)
					if !f.covered(lsn, need) {
						t.Errorf("lsn %d acknowledged at %v uncovered", lsn, need)
					}
				case !errors.Is(err, context.Canceled):
					t.Errorf("Wait: %v", err)
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	if f.concurrent.Load() {
		t.Fatal("FlushFunc ran concurrently")
	}
	s := q.Stats()
	if s.Commits != acked.Load() || s.Active != 0 {
		t.Fatalf("Commits = %d, acknowledged %d; stats %+v", s.Commits, acked.Load(), s)
	}
	if s.GroupSizeMin < 1 || s.GroupSizeMean < 1 || float64(s.GroupSizeMax) < s.GroupSizeMean {
		t.Fatalf("group sizes: %+v", s)
	}
	t.Logf("%d commits in %d groups (mean %.1f, max %d), %d adaptive waits",
		s.Commits, s.Groups, s.GroupSizeMean, s.GroupSizeMax, s.AdaptiveWaits)
}

func TestQueueAdaptiveWaitLoneCommitter(t *testing.T) {
	f := &fakeLog{}
	f.hold = func(int64) error { time.Sleep(50 * time.Microsecond); return nil }
	q := newQueue(t, f, groupcommit.Options{})
	for range 200 {
		if err := q.Wait(t.Context(), f.append(10), groupcommit.Synced); err != nil {
			t.Fatal(err)
		}
	}
	if s := q.Stats(); s.AdaptiveWaits != 0 || s.Groups != 200 {
		t.Fatalf("stats = %+v", s)
	}
}

// TestQueueAdaptiveWaitMerges runs k closed-loop committers against a
// simulated 1 ms sync and checks that the adaptive wait merges the two
// cohorts (a plain queue settles near k/2 per group).
func TestQueueAdaptiveWaitMerges(t *testing.T) {
	if testing.Short() {
		t.Skip("timing")
	}
	const k = 8
	run := func(disable bool) groupcommit.Stats {
		f := &fakeLog{}
		f.hold = func(int64) error { time.Sleep(time.Millisecond); return nil }
		q := newQueue(t, f, groupcommit.Options{DisableAdaptiveWait: disable})
		var wg sync.WaitGroup
		for range k {
			wg.Go(func() {
				for range 100 {
					if err := q.Wait(context.Background(), f.append(10), groupcommit.Synced); err != nil {
						t.Error(err)
					}
				}
			})
		}
		wg.Wait()
		return q.Stats()
	}
	on, off := run(false), run(true)
	t.Logf("adaptive on: mean group %.2f (%d waits, %d merged); off: mean group %.2f",
		on.GroupSizeMean, on.AdaptiveWaits, on.AdaptiveMerges, off.GroupSizeMean)
	if on.AdaptiveWaits == 0 || off.AdaptiveWaits != 0 {
		t.Fatalf("AdaptiveWaits: on %d, off %d", on.AdaptiveWaits, off.AdaptiveWaits)
	}
	if on.GroupSizeMean < 0.75*k {
		t.Errorf("adaptive wait did not merge the cohorts: mean group %.2f of %d", on.GroupSizeMean, k)
	}
}
