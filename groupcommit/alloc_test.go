package groupcommit_test

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/durawal/durawal/groupcommit"
)

func TestWaitZeroAllocsLoneCommitter(t *testing.T) {
	for _, need := range []groupcommit.Level{groupcommit.Written, groupcommit.Synced} {
		f := &fakeLog{}
		q := newQueue(t, f, groupcommit.Options{})
		ctx := context.Background()
		allocs := testing.AllocsPerRun(1000, func() {
			if err := q.Wait(ctx, f.append(100), need); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Fatalf("%v: %v allocs per Wait, want 0", need, allocs)
		}
	}
}

// TestWaitZeroAllocsConcurrent runs 8 closed-loop committers against a
// simulated sync and counts mallocs per commit over the whole run (AllocsPerRun
// rounds down and runs one goroutine).
func TestWaitZeroAllocsConcurrent(t *testing.T) {
	if testing.Short() {
		t.Skip("timing")
	}
	for _, disable := range []bool{false, true} {
		f := &fakeLog{}
		f.hold = func(int64) error { time.Sleep(20 * time.Microsecond); return nil }
		q := newQueue(t, f, groupcommit.Options{DisableAdaptiveWait: disable})
		ctx := context.Background()
		const k, each = 8, 2000
		run := func(n int) {
			var wg sync.WaitGroup
			for range k {
				wg.Go(func() {
					for range n {
						if err := q.Wait(ctx, f.append(100), groupcommit.Synced); err != nil {
							t.Error(err)
						}
					}
				})
			}
			wg.Wait()
		}
		run(200) // warm up: grow the waiter list and free list, create the timer
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		run(each)
		runtime.ReadMemStats(&after)
		perCommit := float64(after.Mallocs-before.Mallocs) / (k * each)
		s := q.Stats()
		t.Logf("adaptive off=%v: %.5f allocs per commit (%d mallocs, mean group %.1f)",
			disable, perCommit, after.Mallocs-before.Mallocs, s.GroupSizeMean)
		if perCommit >= 0.01 {
			t.Errorf("%.4f allocs per commit, want < 0.01", perCommit)
		}
		if s.GroupSizeMax < 2 {
			t.Errorf("no multi-committer group formed: %+v", s)
		}
	}
}
