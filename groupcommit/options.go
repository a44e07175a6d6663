package groupcommit

import (
	"errors"
	"fmt"
	"time"
)

// Level is what a committer waits for: its record handed to the OS, or its
// record durable.
type Level uint8

const (
	// Written means the record was handed to the OS: the write covering it
	// returned. A process crash does not lose it; a power loss may.
	Written Level = 1
	// Synced means the record is durable: the sync covering it returned.
	Synced Level = 2
)

// String returns "written" or "synced".
func (l Level) String() string {
	switch l {
	case Written:
		return "written"
	case Synced:
		return "synced"
	}
	return fmt.Sprintf("Level(%d)", uint8(l))
}

// Style selects how a leader applies [Options.Delay] before it flushes.
type Style uint8

const (
	// SyncStageWait is MySQL's binlog sync-stage wait
	// (binlog_group_commit_sync_delay, binlog_group_commit_sync_no_delay_count):
	// the leader sleeps in slices of max(1µs, Delay/10), ending early once
	// MaxBatch commits (the leader included) are queued.
	SyncStageWait Style = iota
	// LeaderSleep is PostgreSQL's commit_delay / commit_siblings: the leader
	// sleeps the whole Delay, but only when at least MinActive other
	// committers are inside [Queue.Wait].
	LeaderSleep
)

// String returns "sync-stage-wait" or "leader-sleep".
func (s Style) String() string {
	switch s {
	case SyncStageWait:
		return "sync-stage-wait"
	case LeaderSleep:
		return "leader-sleep"
	}
	return fmt.Sprintf("Style(%d)", uint8(s))
}

// Options configures a [Queue]. The zero value is valid: no group-forming
// delay, and the adaptive merge wait on. [New] copies Options and never
// modifies them.
type Options struct {
	// Delay is how long a leader may wait for more commits to join its group
	// before it flushes, in the way Style says. It applies only to groups that
	// will sync (flush level [Synced]); a write-only group never waits.
	// Default 0: no delay; 0..[MaxDelay] (1 s) accepted, anything else makes
	// [New] fail with an error matching [ErrInvalidOptions]. It mirrors MySQL
	// binlog_group_commit_sync_delay (in µs there, capped at 1 s) and
	// PostgreSQL commit_delay (µs, capped at 0.1 s). A leader whose context
	// ends during the delay returns ctx.Err() at once, and [Queue.Drain] or
	// [Queue.Fail] ends the delay at once. Go timers below 1 ms may fire late
	// by up to 1 ms when the process is otherwise idle.
	Delay time.Duration
	// MaxBatch ends a SyncStageWait delay early once this many commits are
	// queued, the leader included. Default 0: always wait the full Delay.
	// It mirrors MySQL binlog_group_commit_sync_no_delay_count. Ignored by
	// LeaderSleep.
	MaxBatch int
	// MinActive gates a LeaderSleep delay: the leader sleeps only when at
	// least this many other committers are inside [Queue.Wait]. Default 0:
	// always sleep. It mirrors PostgreSQL commit_siblings (default 5 there),
	// except that PostgreSQL counts other backends with an open transaction,
	// while here "active" means a committer already waiting for a flush.
	// Ignored by SyncStageWait.
	MinActive int
	// Style selects the delay style. Default SyncStageWait.
	Style Style
	// DisableAdaptiveWait turns off the adaptive merge wait (see the package
	// documentation), leaving a plain leader/follower queue. Default false:
	// the wait is on. It exists to show the cohort effect it removes.
	DisableAdaptiveWait bool
}

// MaxDelay is the largest accepted [Options.Delay]: 1 s, MySQL's upper bound
// of binlog_group_commit_sync_delay (1000000 µs).
const MaxDelay = time.Second

// ErrInvalidOptions is returned, wrapped with the offending field, by [New]
// when Options hold an impossible value or the FlushFunc is nil.
var ErrInvalidOptions = errors.New("groupcommit: invalid options")

// ErrInvalidLevel is returned by [Queue.Wait] when need is neither
// [Written] nor [Synced].
var ErrInvalidLevel = errors.New("groupcommit: invalid level")

// validate reports the first impossible value in o.
func (o Options) validate() error {
	switch {
	case o.Delay < 0 || o.Delay > MaxDelay:
		return fmt.Errorf("%w: Delay %v, want 0..%v", ErrInvalidOptions, o.Delay, MaxDelay)
	case o.MaxBatch < 0:
		return fmt.Errorf("%w: MaxBatch %d is negative", ErrInvalidOptions, o.MaxBatch)
	case o.MinActive < 0:
		return fmt.Errorf("%w: MinActive %d is negative", ErrInvalidOptions, o.MinActive)
	case o.Style != SyncStageWait && o.Style != LeaderSleep:
		return fmt.Errorf("%w: unknown %v", ErrInvalidOptions, o.Style)
	}
	return nil
}
