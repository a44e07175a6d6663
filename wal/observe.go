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
// OpenTelemetry histogram, a tracing span). Set it in [Options.Observer];
// the default, nil, costs one nil check per event. [ObserverFuncs] adapts
// a set of optional funcs.
//
// The methods run on the commit path, in the goroutine that did the work,
// synchronously, while commits wait for them: ObserveSync in whatever
// synced (a group's leader or the background flusher holding the log's
// sync lock, the goroutine sealing a segment a roll finished, a segment
// preparer, Open during recovery, Close), ObserveRoll in the leader that
// rolled, once the new segment is installed, ObserveGroup in the
// flush leader before it returns, ObserveCommit in the committer before
// Append returns, ObservePoison once, when the log fails closed. Events
// from Open's own syncs arrive before Open returns. They must be fast, must
// not block, and must not call the Log's methods that write or wait
// (Append, Sync, WaitDurable, RemoveBefore, Close): that can deadlock.
// Calling [Log.Stats] and the LSN accessors is safe. ObserveSync,
// ObserveCommit and ObservePoison may be called concurrently from several
// goroutines; ObserveGroup and ObserveRoll are called one at a time.
// Events are values; an Observer may keep them.
type Observer interface {
	// ObserveSync is called after each segment sync (fdatasync or fsync:
	// every sync counted in Stats.Fsyncs, and the failed ones counted in
	// Stats.FsyncErrors), with how long it took and its error.
	ObserveSync(SyncEvent)
	// ObserveGroup is called after each successful group-commit flush,
	// once the commits it covered are woken.
	ObserveGroup(GroupEvent)
	// ObserveCommit is called when each Append, AppendContext or
	// AppendBatch call that appended its records returns, with how long it
	// took and its error.
	ObserveCommit(CommitEvent)
	// ObserveRoll is called after each segment roll, once the new segment
	// receives writes.
	ObserveRoll(RollEvent)
	// ObservePoison is called once, with the cause, when a write or sync
	// failure makes the log fail closed ([ErrPoisoned]).
	ObservePoison(cause error)
}

// ObserverFuncs is an [Observer] made of optional funcs: a nil func is not
// called. Use a pointer: Options{Observer: &wal.ObserverFuncs{Sync: f}}.
// The rules of Observer apply to each func.
type ObserverFuncs struct {
	Sync   func(SyncEvent)
	Group  func(GroupEvent)
	Commit func(CommitEvent)
	Roll   func(RollEvent)
	Poison func(cause error)
}

// ObserveSync calls f.Sync if set.
func (f *ObserverFuncs) ObserveSync(e SyncEvent) {
	if f.Sync != nil {
		f.Sync(e)
	}
}

// ObserveGroup calls f.Group if set.
func (f *ObserverFuncs) ObserveGroup(e GroupEvent) {
	if f.Group != nil {
		f.Group(e)
	}
}

// ObserveCommit calls f.Commit if set.
func (f *ObserverFuncs) ObserveCommit(e CommitEvent) {
	if f.Commit != nil {
		f.Commit(e)
	}
}

// ObserveRoll calls f.Roll if set.
func (f *ObserverFuncs) ObserveRoll(e RollEvent) {
	if f.Roll != nil {
		f.Roll(e)
	}
}

// ObservePoison calls f.Poison if set.
func (f *ObserverFuncs) ObservePoison(cause error) {
	if f.Poison != nil {
		f.Poison(cause)
	}
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
	// Duration is the time from the call's first wait to the return of
	// the write or sync that covered it (read once for the whole group),
	// queueing for the log, group delay and I/O included; 0 for a commit
	// that waited for nothing (see Stats.CommitWaitNone).
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
