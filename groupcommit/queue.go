package groupcommit

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// FlushFunc performs one flush for a group: one write of everything appended
// so far and, when need is [Synced] (or when the caller's policy decides so
// itself), one sync. It returns the written and synced LSNs (exclusive end
// byte positions) reached; synced ≤ written, and a synced value also counts
// as written. A successful call must cover, at level need, every record
// appended before it was called: a leader left uncovered calls it again.
//
// The queue calls it from one leader at a time, never concurrently, with no
// lock of the queue held. A non-nil error is sticky: the queue hands it,
// unchanged, to every member of the group and to every later [Queue.Wait], and
// never calls FlushFunc again. The watermarks returned with an error are
// still recorded.
type FlushFunc func(need Level) (written, synced uint64, err error)

// waiter states; a waiter leaves stateQueued exactly once per enqueueing, and
// its wake channel receives exactly one signal when it does.
const (
	stateQueued uint8 = iota // in q.waiters, waiting for a flush
	stateDone                // removed; err is its result (nil: covered)
	stateLead                // removed; it is the next leader
)

// A waiter is a follower's place in the queue. Waiters are reused through
// the queue's free list, so a follower allocates nothing in steady state.
type waiter struct {
	lsn   uint64
	need  Level
	state uint8         // guarded by q.mu
	err   error         // result when state == stateDone; guarded by q.mu
	done  time.Duration // when state == stateDone with no error: q.done when it was woken; guarded by q.mu
	wake  chan struct{} // capacity 1: signalled once when state leaves stateQueued
	next  *waiter       // free-list link; guarded by q.mu
}

// Queue is a leader/follower group-commit queue on written/synced LSN
// watermarks. Committers call [Queue.Wait] with the end LSN of a record they
// have already appended; the first one not yet covered, with no flush in
// flight, becomes the leader and runs the [FlushFunc] for everyone.
//
// A Queue is created by [New] (the zero value is not usable), is safe for
// concurrent use, owns no goroutine and needs no closing; [Queue.Fail] ends
// its use.
type Queue struct {
	flush   FlushFunc
	opts    Options
	onGroup func(size uint64, level Level) // OnGroup's f; guarded by mu

	// stop is closed by the first failure (Fail or a flush error) or by
	// Drain, whichever comes first; it ends a leader's Delay early.
	stop chan struct{}
	// hurry is set with stop, for a leader spinning in a wait; once set, no
	// leader delays or waits adaptively any more.
	hurry atomic.Bool
	// arrivals counts Waits that found their LSN not covered (each once). The
	// adaptive wait reads it without the lock.
	arrivals atomic.Uint64

	mu sync.Mutex
	// written and synced are the watermarks; they never go down, synced ≤ written.
	written, synced uint64
	// err is the sticky failure; once set it never changes.
	err error
	// flushing is true while a leader owns the flush: from the moment it is
	// chosen, through its delay or adaptive wait and FlushFunc, until it
	// records the result and hands leadership on.
	flushing bool
	// waiters are the queued followers in arrival order. Invariant: non-empty
	// only while flushing.
	waiters []*waiter
	// queuedSynced is how many of waiters need Synced.
	queuedSynced int
	// active counts goroutines inside Wait (the LeaderSleep MinActive gate).
	active int
	// free is the free list of waiters.
	free *waiter
	// stats holds the counters; GroupSizeMean, Written, Synced, Active and
	// FlushTime are filled in by Stats.
	stats        Stats
	groupSizeSum uint64

	// The fields below are written under mu by the leader that finishes a
	// flush and read under mu by the next leader.

	// released is how many commits the last successful flush covered, and
	// releaseMark the value of arrivals when it ended: those committers are
	// expected back by arrivals = releaseMark + released.
	released    uint64
	releaseMark uint64
	// flushEWMA is the moving average of Synced flush durations.
	flushEWMA time.Duration
	// adaptHistory holds the outcomes of the last 8 adaptive waits, one bit
	// each, 1 = paid off; adaptSkipped counts opportunities skipped since.
	adaptHistory uint8
	adaptSkipped int

	// timer is owned by the current leader, for Delay; created on first use.
	timer *time.Timer

	// origin is the monotonic origin of done: New's time.
	origin time.Time
	// done is when the last flush (its FlushFunc's return) or Advance that
	// covered waiters ended, as time since origin: one clock reading that
	// every waiter it covered shares (WaitTimed).
	done time.Duration
}

// New returns a Queue whose leaders call flush. It returns an error matching
// [ErrInvalidOptions] if flush is nil or opts holds a negative value, a Delay
// above [MaxDelay] or an unknown Style. New does no I/O and starts no goroutine.
func New(flush FlushFunc, opts Options) (*Queue, error) {
	if flush == nil {
		return nil, errors.Join(ErrInvalidOptions, errors.New("groupcommit: nil FlushFunc"))
	}
	if err := opts.validate(); err != nil {
		return nil, err
	}
	return &Queue{
		flush:        flush,
		opts:         opts,
		stop:         make(chan struct{}),
		adaptHistory: 0xff,
		origin:       time.Now(),
	}, nil
}

// Wait returns nil once a finished flush (or [Queue.Advance]) has covered lsn
// at level need: written ≥ lsn for [Written], synced ≥ lsn for [Synced], where
// lsn is the exclusive end position of the caller's record, which must
// already be appended (visible to the FlushFunc). A nil return never comes
// before the FlushFunc call covering lsn has returned.
//
// If no flush is in flight, the caller becomes the leader: it may wait to
// grow its group (Options.Delay and the adaptive merge wait), then calls the
// FlushFunc once for everyone queued. Otherwise it waits as a follower.
//
// Wait returns the sticky error once the queue has failed ([Queue.Fail], or a
// FlushFunc error), even for an lsn already covered, and [ErrInvalidLevel] for
// a need other than Written or Synced. If ctx ends first, a follower returns
// ctx.Err() at once (its record may still be flushed, and the group goes on);
// so does a leader still in its Delay (it hands leadership to the next
// follower in line); a leader already in its FlushFunc finishes the flush and
// returns its outcome. Wait is safe for
// concurrent use and allocates nothing in steady state.
func (q *Queue) Wait(ctx context.Context, lsn uint64, need Level) error {
	_, err := q.wait(ctx, lsn, need)
	return err
}

// WaitTimed is [Queue.Wait] that also says when lsn was covered: the time
// at which the FlushFunc call (or the [Queue.Advance]) that covered it
// returned, read once for every waiter it covered, so a group costs one
// clock reading rather than one per member. A caller that times its
// commits from its own start to this time counts the flush and everything
// queued before it, and not the moments its goroutine then takes to run.
// The time is the zero Time when lsn was already covered at the call, with
// nothing to wait for (the caller reads the clock itself if it needs the
// time), and whenever the error is not nil. It is safe for concurrent use
// and allocates nothing in steady state.
func (q *Queue) WaitTimed(ctx context.Context, lsn uint64, need Level) (time.Time, error) {
	at, err := q.wait(ctx, lsn, need)
	if err != nil || at < 0 {
		return time.Time{}, err
	}
	return q.origin.Add(at), nil
}

// wait is Wait; it returns, on success, when lsn was covered (q.done of
// the flush or Advance that covered it), or -1 if it was covered at the
// call.
func (q *Queue) wait(ctx context.Context, lsn uint64, need Level) (time.Duration, error) {
	if need != Written && need != Synced {
		return -1, ErrInvalidLevel
	}
	q.mu.Lock()
	q.active++
	leading, arrived := false, false
	at := time.Duration(-1)
	for {
		if q.err != nil {
			if leading {
				q.flushing = false // failLocked has woken every waiter
			}
			return -1, q.leaveLocked(q.err)
		}
		if q.coveredLocked(lsn, need) {
			if leading {
				q.passLeadLocked()
			}
			if arrived && at < 0 { // covered by a flush or an Advance it did not lead
				at = q.done
			}
			q.stats.Commits++
			return at, q.leaveLocked(nil)
		}
		if !arrived {
			arrived = true
			q.arrivals.Add(1)
		}
		if leading || !q.flushing {
			leading = true
			q.flushing = true
			if !q.leadLocked(ctx, need) { // ctx ended during the delay
				q.passLeadLocked()
				return -1, q.leaveLocked(ctx.Err())
			}
			at = q.done
			continue // re-check: covered, failed, or (a FlushFunc that fell short) lead again
		}

		// A follower: queue up and wait for the flush in flight.
		w := q.getWaiterLocked(lsn, need)
		q.mu.Unlock()
		woken := false
		select {
		case <-w.wake:
			woken = true
		case <-ctx.Done():
		}
		q.mu.Lock()
		if !woken && w.state != stateQueued {
			<-w.wake // ctx ended as the signal came: it is buffered; take it
		}
		switch w.state {
		case stateQueued: // ctx ended first; the group goes on without us
			q.removeLocked(w)
			q.putWaiterLocked(w)
			return -1, q.leaveLocked(ctx.Err())
		case stateDone:
			err, done := w.err, w.done
			q.putWaiterLocked(w)
			if err != nil {
				return -1, q.leaveLocked(err)
			}
			q.stats.Commits++
			return done, q.leaveLocked(nil)
		case stateLead:
			q.putWaiterLocked(w)
			if ctx.Err() != nil { // give leadership to the next in line
				q.passLeadLocked()
				return -1, q.leaveLocked(ctx.Err())
			}
			leading = true
		}
	}
}

// leaveLocked ends a Wait: it unlocks q.mu and returns err.
func (q *Queue) leaveLocked(err error) error {
	q.active--
	q.mu.Unlock()
	return err
}

// coveredLocked reports whether the watermarks cover lsn at level need.
func (q *Queue) coveredLocked(lsn uint64, need Level) bool {
	if need == Synced {
		return q.synced >= lsn
	}
	return q.written >= lsn
}

// leadLocked runs one flush as the leader: the group-forming wait, then the
// FlushFunc with no lock held, then recording the result and waking the
// covered followers. It is called and returns with q.mu held and q.flushing
// set; it never calls the FlushFunc once q.err is set. It returns false,
// without flushing, if ctx ended during the Delay.
func (q *Queue) leadLocked(ctx context.Context, need Level) bool {
	syncing := need == Synced || q.queuedSynced > 0
	if syncing {
		if !q.delayLocked(ctx) {
			q.adaptiveWaitLocked()
		}
	}
	if q.err != nil {
		return true
	}
	if ctx.Err() != nil && q.opts.Delay > 0 && syncing {
		return false
	}
	if q.queuedSynced > 0 { // arrivals during the wait
		need = Synced
	}
	q.mu.Unlock()
	var start time.Duration
	if need == Synced { // only sync flushes feed the EWMA that bounds the adaptive wait
		start = time.Since(q.origin)
	}
	written, synced, err := q.flush(need)
	end := time.Since(q.origin) // the group's one reading of when it was covered (WaitTimed)
	took := end - start
	q.mu.Lock()
	q.done = max(q.done, end)

	q.stats.Groups++
	level := Written
	if need == Synced || synced > q.synced { // asked to sync, or the FlushFunc chose to
		q.stats.SyncGroups++
		level = Synced
	}
	if need == Synced {
		if q.flushEWMA == 0 {
			q.flushEWMA = took
		} else {
			q.flushEWMA += (took - q.flushEWMA) / 8
		}
	}
	q.advanceLocked(written, synced)
	if err != nil {
		q.failLocked(err)
		return true
	}
	n := 1 + q.wakeCoveredLocked() // the leader and the followers it covered
	q.stats.recordGroup(n)
	q.groupSizeSum += n
	q.released = n
	q.releaseMark = q.arrivals.Load()
	if f := q.onGroup; f != nil {
		// Unlocked, as during the flush: q.flushing keeps other leaders out,
		// and the caller re-checks everything once it holds q.mu again.
		q.mu.Unlock()
		f(n, level)
		q.mu.Lock()
	}
	return true
}

// advanceLocked raises the watermarks; it never lowers them.
func (q *Queue) advanceLocked(written, synced uint64) {
	q.written = max(q.written, written, synced)
	q.synced = max(q.synced, synced)
}

// wakeCoveredLocked wakes, with a nil result, every queued follower the
// watermarks now cover, keeps the others queued in order, and returns how
// many it woke.
func (q *Queue) wakeCoveredLocked() uint64 {
	var n uint64
	kept := q.waiters[:0]
	for _, w := range q.waiters {
		if !q.coveredLocked(w.lsn, w.need) {
			kept = append(kept, w)
			continue
		}
		if w.need == Synced {
			q.queuedSynced--
		}
		w.state, w.err, w.done = stateDone, nil, q.done
		w.wake <- struct{}{}
		n++
	}
	clear(q.waiters[len(kept):])
	q.waiters = kept
	return n
}

// passLeadLocked ends the current leader's turn: the first queued follower,
// if any, becomes the next leader at once; otherwise no flush is in flight.
func (q *Queue) passLeadLocked() {
	if len(q.waiters) == 0 || q.err != nil {
		q.flushing = false
		return
	}
	w := q.waiters[0]
	q.removeLocked(w)
	w.state = stateLead
	w.wake <- struct{}{}
}

// failLocked makes err sticky (the first failure wins) and wakes every queued
// follower with it. A leader in flight keeps q.flushing until it returns.
func (q *Queue) failLocked(err error) {
	if q.err == nil {
		q.err = err
		q.stopLocked()
	}
	for _, w := range q.waiters {
		w.state, w.err = stateDone, q.err
		w.wake <- struct{}{}
	}
	clear(q.waiters)
	q.waiters = q.waiters[:0]
	q.queuedSynced = 0
}

// getWaiterLocked takes a waiter from the free list (or makes one), fills it
// in and queues it.
func (q *Queue) getWaiterLocked(lsn uint64, need Level) *waiter {
	w := q.free
	if w != nil {
		q.free = w.next
		w.next = nil
	} else {
		w = &waiter{wake: make(chan struct{}, 1)}
	}
	w.lsn, w.need, w.state, w.err = lsn, need, stateQueued, nil
	q.waiters = append(q.waiters, w)
	if need == Synced {
		q.queuedSynced++
	}
	return w
}

// removeLocked takes a queued w out of q.waiters.
func (q *Queue) removeLocked(w *waiter) {
	for i, x := range q.waiters {
		if x == w {
			q.waiters = slices.Delete(q.waiters, i, i+1)
			if w.need == Synced {
				q.queuedSynced--
			}
			return
		}
	}
}

// putWaiterLocked returns w to the free list.
func (q *Queue) putWaiterLocked(w *waiter) {
	w.err = nil
	w.next = q.free
	q.free = w
}

// Advance reports progress made outside the queue, such as a background sync
// by the log: it raises the written and synced watermarks (never lowers them;
// synced also counts as written) and wakes the followers now covered. It does
// not count a group. Advance is safe for concurrent use, including with a
// FlushFunc in flight.
func (q *Queue) Advance(written, synced uint64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.advanceLocked(written, synced)
	if q.err == nil {
		if len(q.waiters) > 0 {
			q.done = max(q.done, time.Since(q.origin))
		}
		q.wakeCoveredLocked()
	}
}

// Fail makes err sticky: every queued follower returns it at once, and every
// later Wait returns it. The first failure wins (a later Fail, or a FlushFunc
// error, is ignored). Fail does not wait for a flush in flight: that flush's
// leader finishes its FlushFunc call, records the watermarks it returns, and
// then returns the sticky error too; no FlushFunc call starts after Fail, and
// a leader in its Delay or adaptive wait stops waiting at once. So every
// waiter returns, and none hangs. Fail is safe for concurrent use; a nil err
// is ignored.
func (q *Queue) Fail(err error) {
	if err == nil {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.failLocked(err)
}

// Drain ends at once any Delay or adaptive merge wait a leader is in, and
// makes every later leader skip them, flushing at once; unlike [Queue.Fail]
// the queue keeps working. A log calls it as it closes, so that its final
// flush does not wait out a group delay. Drain is safe for concurrent use
// and idempotent.
func (q *Queue) Drain() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.stopLocked()
}

// stopLocked closes q.stop once and sets q.hurry.
func (q *Queue) stopLocked() {
	if !q.hurry.Load() {
		q.hurry.Store(true)
		close(q.stop)
	}
}

// Err returns the sticky error, or nil while the queue has not failed.
func (q *Queue) Err() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.err
}

// Stats returns a snapshot of the counters and watermarks. It takes the
// queue's lock briefly and is safe at any time, without stopping committers.
func (q *Queue) Stats() Stats {
	q.mu.Lock()
	defer q.mu.Unlock()
	s := q.stats
	if n := s.GroupSizeHistTotal(); n > 0 {
		s.GroupSizeMean = float64(q.groupSizeSum) / float64(n)
	}
	s.Written, s.Synced = q.written, q.synced
	s.Active = q.active
	s.FlushTime = q.flushEWMA
	return s
}

// GroupSizeHistTotal returns the number of successful groups counted in
// GroupSizeHist. It has a value receiver, so it can be called on the value
// Queue.Stats (or wal's Log.Stats().Group) returns; it reads only s.
func (s Stats) GroupSizeHistTotal() uint64 {
	var n uint64
	for _, c := range s.GroupSizeHist {
		n += c
	}
	return n
}

// OnGroup sets f to be called by the leader after each successful flush,
// once the followers it covered are woken, with the group's size (the
// leader plus those followers, as [Stats.GroupSizeHist] counts it) and the
// level the flush reached ([Synced] if it synced, asked for or chosen by the
// FlushFunc). f runs on the commit path, in the leader's goroutine before its
// Wait returns, with no lock held, one call at a time (flushes never
// overlap): it must be fast and must not wait on q. A failed flush is not
// reported. OnGroup replaces an earlier f; nil removes it. It is safe to
// call at any time; flushes that already began may still call the old f.
func (q *Queue) OnGroup(f func(size uint64, level Level)) {
	q.mu.Lock()
	q.onGroup = f
	q.mu.Unlock()
}
