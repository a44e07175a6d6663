package measure

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Load says how Drive spreads calls over workers. Exactly one of Each, Total
// and For ends the run; with none set, each worker makes one call.
type Load struct {
	// Workers is the number of goroutines calling op, one call at a time
	// each (like sysbench threads or redis-benchmark clients); at least 1.
	Workers int
	// Each is the number of calls every worker makes.
	Each int
	// Total is the number of calls shared by all workers: each takes the
	// next while any are left.
	Total int
	// For is how long the workers keep calling; a call running when it ends
	// finishes and is counted.
	For time.Duration
	// OnStart, if set, is called with the start time once every worker is
	// ready, just before they are released.
	OnStart func(start time.Time)
	// OnCall, if set, is called after every call, in the worker's own
	// goroutine (so per-worker state needs no lock), with when the call
	// started and how long it took.
	OnCall func(worker int, start time.Time, latency time.Duration)
}

// Run is what Drive measured.
type Run struct {
	// Latencies holds the duration of every call, successful or not, in no
	// particular order (Summarize sorts them).
	Latencies []time.Duration
	// Elapsed is the wall time from the moment every worker was released
	// until the last one finished.
	Elapsed time.Duration
}

// Drive calls op from ld.Workers goroutines that all start together (a
// barrier: none calls before every one is ready), times every call into a
// recorder of its own worker, and merges them at the end, so timing costs no
// lock. op gets the worker's index and the call's sequence number within
// that worker. The first error stops every worker and is returned with what
// was measured up to it; so is the context's error if ctx ends first.
func Drive(ctx context.Context, ld Load, op func(ctx context.Context, worker, seq int) error) (Run, error) {
	n := max(ld.Workers, 1)
	each := ld.Each
	if each == 0 && ld.Total == 0 && ld.For == 0 {
		each = 1
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	hint := 1024
	switch {
	case each > 0:
		hint = each
	case ld.Total > 0:
		hint = ld.Total/n + 1
	}
	recs := make([]*Recorder, n)
	for i := range recs {
		recs[i] = NewRecorder(hint)
	}
	var (
		wg      sync.WaitGroup
		ready   sync.WaitGroup
		stop    atomic.Bool
		taken   atomic.Int64
		release = make(chan struct{})
	)
	ready.Add(n)
	for w := range n {
		rec := recs[w]
		wg.Go(func() {
			ready.Done()
			<-release
			for seq := 0; ; seq++ {
				switch {
				case stop.Load() || ctx.Err() != nil:
					return
				case each > 0 && seq >= each:
					return
				case ld.Total > 0 && taken.Add(1) > int64(ld.Total):
					return
				}
				t0 := time.Now()
				err := op(ctx, w, seq)
				lat := time.Since(t0)
				rec.Add(lat)
				if ld.OnCall != nil {
					ld.OnCall(w, t0, lat)
				}
				if err != nil {
					cancel(err)
					return
				}
			}
		})
	}
	ready.Wait()
	start := time.Now()
	if ld.OnStart != nil {
		ld.OnStart(start)
	}
	close(release)
	if each == 0 && ld.Total == 0 {
		t := time.AfterFunc(ld.For, func() { stop.Store(true) })
		defer t.Stop()
	}
	wg.Wait()
	run := Run{Latencies: Merge(recs...), Elapsed: time.Since(start)}
	return run, context.Cause(ctx)
}
