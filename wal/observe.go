package wal

import (
	"time"

	"github.com/durawal/durawal/policy"
)

// DefaultSlowSyncThreshold is the default [Options.SlowSyncThreshold]: a
// segment sync that takes longer is logged as a warning. It is etcd's
// (warnSyncDuration, 1 s): a healthy device syncs in microseconds to tens of
// milliseconds, so a second means a stalled or failing disk or an
// overloaded host, and at most one line per slow sync cannot flood a log.
const DefaultSlowSyncThreshold = time.Second

// An Observer receives events from a [Log] as they happen, for metrics
// libraries that want every event rather than the cumulative [Stats] (an
// OpenTelemetry histogram, a tracing span). Each field is optional: a nil
// func is not called, and the zero Observer (the default) costs one nil
// check per event.
//
// The funcs run on the commit path, in the goroutine that did the work,
// synchronously, while commits wait for it: Sync and Roll while the log's
// sync lock is held, Group in the flush leader before it returns, Commit in
// the committer before Append returns, Poison once, when the log fails
// closed. They must be fast, must not block, and must not call the Log's
// methods that write or wait (Append, Sync, WaitDurable, RemoveBefore,
// Close): that can deadlock. Calling [Log.Stats] and the LSN accessors is
// safe. Sync, Commit and Poison may be called concurrently from several
// goroutines; Group and Roll are called one at a time.
type Observer struct {
	// Sync is called after each segment sync (fdatasync or fsync: every
	// sync counted in Stats.Fsyncs, and the failed ones counted in
	// Stats.FsyncErrors), with how long it took and its error.
	Sync func(SyncEvent)
	// Group is called after each successful group-commit flush, once the
	// commits it covered are woken.
	Group func(GroupEvent)
	// Commit is called when each Append, AppendContext or AppendBatch call
	// that got an LSN returns, with how long it took and its error.
	Commit func(CommitEvent)
	// Roll is called after each segment roll, once the new segment receives
	// writes.
	Roll func(RollEvent)
	// Poison is called once, with the cause, when a write or sync failure
	// makes the log fail closed ([ErrPoisoned]).
	Poison func(cause error)
}

// A SyncEvent describes one segment sync.
type SyncEvent struct {
	// Duration is how long the sync call took, EINTR retries included.
	Duration time.Duration
	// Err is the sync's error, nil on success. A failed sync poisons the
	// log.
	Err error
}

// A GroupEvent describes one group-commit flush (one write, and one sync
// if Synced).
type GroupEvent struct {
	// Size is the number of waits the flush satisfied: the leader and the
	// followers it woke (commits, Sync calls, appends waiting for log-buffer
	// space; see Stats.Group).
	Size uint64
	// Synced reports that the flush synced: a member needed it, or the
	// policy chose to (every nth group under policy.SyncEveryN).
	Synced bool
}

// A CommitEvent describes one commit: one Append, AppendContext or
// AppendBatch call that appended its records.
type CommitEvent struct {
	// Wait is what the commit waited for: nothing (buffered policies),
	// the write, or the sync (the policy's choice, or ForceSync).
	Wait policy.Wait
	// Records is the number of records the call appended (1 for Append).
	Records int
	// Duration is the time from the call to its return, queueing for the
	// log, group delay and I/O included.
	Duration time.Duration
	// Err is the call's error (its records are in the log: a context that
	// ended, ErrDurabilityUnknown, ErrClosed), nil on success.
	Err error
}

// A RollEvent describes one segment roll.
type RollEvent struct {
	// Segment is the base name of the segment that now receives writes.
	Segment string
	// FirstLSN is that segment's first LSN.
	FirstLSN LSN
}
