package wal

import (
	"context"
	"fmt"
	"time"

	"github.com/durawal/durawal/groupcommit"
	"github.com/durawal/durawal/internal/decide"
	"github.com/durawal/durawal/policy"
)

// stateLocked returns the numbers the policy decides from. l.app is held.
func (l *Log) stateLocked(now time.Time) decide.State {
	since := int64(now.Sub(l.opened))
	st := decide.State{
		AppendedLSN:     uint64(l.app.next),
		WrittenLSN:      l.written.Load(),
		SyncedLSN:       l.synced.Load(),
		GroupsSinceSync: int(l.leader.groupsSinceSync.Load()),
		SyncInProgress:  l.syncInProgress.Load(),
		SinceSyncStart:  time.Duration(since - l.lastSyncStart.Load()),
		SinceWrite:      time.Duration(since - l.lastWrite.Load()),
	}
	if !l.app.postponeStart.IsZero() {
		st.PostponedFor = now.Sub(l.app.postponeStart)
	}
	return st
}

// runFlusher is the background flusher of interval and async policies: it
// wakes every policy tick, or when the next sync is due (timed from the
// start of the previous sync on the monotonic clock) or a postponed write
// reaches the policy's maximum postponement, and does what the
// policy's OnTick says. It stops when Close closes l.stop, or when the log
// is poisoned.
func (l *Log) runFlusher() {
	defer l.wg.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { <-l.stop; cancel() }()
	tick := decide.Tick(l.pol)
	timer := time.NewTimer(tick)
	defer timer.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-l.syncKick: // nil (never ready) unless IncrementalSync is set
			if l.poisonErr.Load() != nil {
				return
			}
			if l.written.Load()-l.synced.Load() >= uint64(l.opts.IncrementalSync) && l.syncInProgress.CompareAndSwap(false, true) {
				if !l.startBackgroundSync(ctx) {
					return
				}
			}
			continue
		case <-timer.C:
		}
		if !l.flusherRound(ctx) {
			return
		}
		timer.Reset(l.nextWake(tick))
	}
}

// flusherRound does one tick's work; it returns false if the flusher must
// stop.
func (l *Log) flusherRound(ctx context.Context) bool {
	if l.poisonErr.Load() != nil {
		return false
	}
	l.app.Lock()
	now := time.Now()
	st := l.stateLocked(now)
	a := decide.OnTick(l.pol, st)
	target := uint64(l.app.next) + l.qbase
	if a.Write && st.SyncInProgress && st.PostponedFor > 0 && !l.app.delayedSeen {
		// Redis everysec: the postponement reached its limit and no commit
		// came to force the write; the flusher writes it without waiting for
		// the running sync (aof_delayed_fsync).
		l.app.delayedSeen = true
		l.stats.delayedWrites.Add(1)
	}
	l.app.Unlock()
	if a.Write {
		if err := l.q.Wait(ctx, target, groupcommit.Written); err != nil {
			return false
		}
	}
	if !a.Sync || !l.syncInProgress.CompareAndSwap(false, true) {
		return true
	}
	return l.startBackgroundSync(ctx)
}

// startBackgroundSync runs a background sync, for a tick or for
// IncrementalSync; the caller has set syncInProgress. It returns false if
// the flusher must stop.
func (l *Log) startBackgroundSync(ctx context.Context) bool {
	postponing := l.pol.Kind() == policy.KindSyncIntervalPostponed
	if l.pol.WriteDelay() == 0 && !postponing {
		return l.runBackgroundSync() == nil
	}
	// Buffered and async policies: the sync runs beside the writes
	// (InnoDB's log_writer and log_flusher are separate threads), so the
	// next write tick never waits a sync. Redis everysec: the sync runs in
	// the background (the bio thread) so that the flusher can force a write
	// postponed to its limit while the sync still runs; when the sync ends,
	// what it postponed is written at once.
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		if l.runBackgroundSync() == nil && postponing {
			l.writePostponed(ctx)
		}
	}()
	return true
}

// writePostponed writes what a finished background sync postponed, as the
// policy says (Redis everysec).
func (l *Log) writePostponed(ctx context.Context) {
	l.app.Lock()
	a := decide.OnTick(l.pol, l.stateLocked(time.Now()))
	target := uint64(l.app.next) + l.qbase
	l.app.Unlock()
	if a.Write {
		l.q.Wait(ctx, target, groupcommit.Written) // a failure poisons the log; the flusher stops on it
	}
}

// nextWake returns how long the flusher sleeps: one tick, or less when a
// sync falls due sooner (so 1 s means 1 s, not 1 s rounded to ticks).
func (l *Log) nextWake(tick time.Duration) time.Duration {
	d := tick
	if mp := l.pol.MaxPostpone(); mp > 0 {
		l.app.Lock()
		if !l.app.postponeStart.IsZero() {
			d = min(d, mp-time.Since(l.app.postponeStart)) // a postponed write falls due
		}
		l.app.Unlock()
	}
	if iv := l.pol.Interval(); iv > 0 && l.appended.Load() > l.synced.Load() {
		since := time.Duration(int64(time.Since(l.opened)) - l.lastSyncStart.Load())
		if until := iv - since; until < d {
			d = until
		}
	}
	return max(d, time.Millisecond)
}

// runBackgroundSync syncs what is written, outside the group-commit queue (like
// InnoDB's log_flusher or Redis's bio thread), and wakes commits waiting for
// it. A failure poisons the log and never marks it clean.
// The caller has set syncInProgress; runBackgroundSync clears it.
func (l *Log) runBackgroundSync() error {
	didSync, err := l.syncWrittenSynced(true)
	l.syncInProgress.Store(false)
	if err != nil {
		l.poison(err)
		l.q.Fail(fmt.Errorf("%w: %w: %w", ErrDurabilityUnknown, ErrPoisoned, err))
		return err
	}
	if didSync { // not when another sync had covered everything, or under O_DSYNC
		l.stats.backgroundSyncs.Add(1)
	}
	l.syncMu.Lock() // TruncateFrom changes qbase under syncMu
	synced := l.synced.Load() + l.qbase
	l.syncMu.Unlock()
	l.q.Advance(synced, synced) // what it made durable, no further: see sealInBackground
	return nil
}
