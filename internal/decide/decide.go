// Package decide holds the decisions a flush policy makes for package wal:
// what a commit waits for ([Commit]), whether a leader's group also syncs
// ([SyncGroup]), how often the background flusher wakes ([Tick]) and what it
// does then ([OnTick]). They are pure functions of a [policy.Policy] and the
// numbers wal hands them in a [State]: no goroutines, no I/O.
//
// They are internal: a user chooses among the policies package policy
// builds, and cannot add one. Each decision mirrors the server code named
// beside it (InnoDB's log flusher, Redis's flushAppendOnlyFile and
// serverCron, PostgreSQL's XLogBackgroundFlush, MySQL's sync_counter).
package decide

import (
	"time"

	"github.com/durawal/durawal/policy"
)

// State is what package wal tells a policy when it asks for a decision. LSNs
// are byte positions in the log; durations are measured on the monotonic
// clock.
type State struct {
	// AppendedLSN, WrittenLSN and SyncedLSN are how far the log has been
	// copied into the log buffer, written to the OS, and made durable
	// (byte positions; SyncedLSN ≤ WrittenLSN ≤ AppendedLSN).
	AppendedLSN, WrittenLSN, SyncedLSN uint64
	// GroupsSinceSync counts leader flushes since the last sync.
	GroupsSinceSync int
	// SyncInProgress reports that a background sync is running now.
	SyncInProgress bool
	// PostponedFor is how long appended bytes have waited for a write
	// because a background sync was running (0 if none is postponed).
	PostponedFor time.Duration
	// SinceSyncStart is the time since the start of the last sync (or since
	// Open if there was none).
	SinceSyncStart time.Duration
	// SinceWrite is the time since the last write (or since Open).
	SinceWrite time.Duration
}

// Commit returns what a commit waits for under state s.
func Commit(p policy.Policy, s State) policy.Wait {
	switch p.Kind() {
	case policy.KindSyncEveryCommit:
		return policy.WaitSync
	case policy.KindSyncEveryN, policy.KindSyncInterval, policy.KindSyncNever:
		return policy.WaitWrite
	case policy.KindSyncIntervalPostponed:
		// Redis flushAppendOnlyFile: while a background fsync runs, the write
		// is postponed (the commit is acknowledged from the buffer) until the
		// postponement reaches maxPostpone; then it is written anyway.
		if s.SyncInProgress && s.PostponedFor < p.MaxPostpone() {
			return policy.WaitNone
		}
		return policy.WaitWrite
	}
	return policy.WaitNone // BufferedInterval, AsyncCommit
}

// SyncGroup reports whether a leader's flush (one group) must also sync,
// beyond what its committers wait for. Only policy.SyncEveryN says yes on its own
// (every nth group, counted like MySQL's sync_counter).
func SyncGroup(p policy.Policy, s State) bool {
	switch p.Kind() {
	case policy.KindSyncEveryCommit:
		return true
	case policy.KindSyncEveryN:
		return s.GroupsSinceSync+1 >= p.N()
	}
	return false
}

// Tick returns how often the background flusher wakes, or 0 if the policy
// needs no background flusher.
func Tick(p policy.Policy) time.Duration {
	switch p.Kind() {
	case policy.KindSyncInterval, policy.KindAsyncCommit:
		return p.Interval()
	case policy.KindSyncIntervalPostponed:
		// Redis serverCron runs at hz=10; it retries postponed writes.
		return min(p.Interval(), 100*time.Millisecond)
	case policy.KindBufferedInterval:
		return p.WriteDelay()
	}
	return 0
}

// Action is what the background flusher does on one tick.
type Action struct {
	Write bool // write the log buffer to the OS
	Sync  bool // sync what is written
}

// OnTick decides the background flusher's action under state s. A policy
// never syncs when nothing is unsynced, so an idle log issues no syncs.
func OnTick(p policy.Policy, s State) Action {
	unwritten := s.AppendedLSN > s.WrittenLSN
	unsynced := s.AppendedLSN > s.SyncedLSN
	due := s.SinceSyncStart >= p.Interval()
	switch p.Kind() {
	case policy.KindSyncInterval:
		// InnoDB log_flusher under =2: at most one fsync per interval,
		// timed from the start of the previous one.
		return Action{Sync: due && s.WrittenLSN > s.SyncedLSN}
	case policy.KindSyncIntervalPostponed:
		// Write postponed bytes once no sync runs, or once they have been
		// postponed maxPostpone (Redis serverCron retries the postponed
		// write and forces it after 2 s whether or not commands arrive;
		// the write does not wait for the running sync). Start a sync
		// once a second unless one still runs.
		return Action{
			Write: unwritten && (!s.SyncInProgress || s.PostponedFor >= p.MaxPostpone()),
			Sync:  due && unsynced && !s.SyncInProgress,
		}
	case policy.KindBufferedInterval:
		return Action{Write: unwritten, Sync: due && unsynced}
	case policy.KindAsyncCommit:
		// PostgreSQL XLogBackgroundFlush: write everything; sync when the
		// writer delay passed or flushAfter bytes are unsynced.
		early := p.FlushAfter() > 0 && s.AppendedLSN-s.SyncedLSN >= uint64(p.FlushAfter())
		return Action{Write: unwritten, Sync: unsynced && (due || early)}
	}
	return Action{}
}

// UnsyncedBound is the time a write may wait for its sync under p, the
// sync's own durations aside: the interval of the interval policies, 0
// (none) for the others (SyncEveryCommit and SyncEveryN sync in the
// commit; SyncNever promises nothing).
func UnsyncedBound(p policy.Policy) time.Duration {
	switch p.Kind() {
	case policy.KindSyncInterval, policy.KindSyncIntervalPostponed, policy.KindBufferedInterval, policy.KindAsyncCommit:
		return p.Interval()
	}
	return 0
}
