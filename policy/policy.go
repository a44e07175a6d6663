// Package policy holds the flush policies of the log: what a commit waits for
// (nothing, the write, or the sync) and what the background flusher does on
// each tick. A [Policy] is a small immutable value that names one of the
// policies below with its parameters; package wal makes its decisions from
// it (an internal package holds them, so the set of policies is closed: a
// user chooses among them and cannot add one). It starts no goroutines and
// does no I/O.
//
// The policies mirror settings people already know:
//
//	constructor                  commit returns after                    mirrors
//	SyncEveryCommit()            write + sync (shared by the group)      InnoDB =1, appendfsync always, sync_binlog=1,
//	                                                                     synchronous_commit=on
//	SyncEveryN(n)                write; every nth group also syncs       sync_binlog=N
//	SyncInterval(d)              write; a sync every d                   InnoDB =2
//	SyncIntervalPostponed(d, m)  write, postponed ≤ m while a sync runs  appendfsync everysec
//	BufferedInterval(d, w)       nothing (the log buffer)                InnoDB =0
//	AsyncCommit(d, bytes)        nothing (the log buffer)                synchronous_commit=off
//	PostgresAsync()              = AsyncCommit(200ms, 1 MiB)             synchronous_commit=off, PostgreSQL's defaults
//	SyncNever()                  write; never synced on its own          appendfsync no, sync_binlog=0
//
// Every constructor's doc says what a process crash and a power loss can
// lose. The time bounds of the interval policies assume the background
// flusher runs when its timer fires: a starved scheduler, a stalled sync
// or a paused process delays it and widens the window by that delay, as
// MySQL documents for innodb_flush_log_at_timeout (flushing once per
// interval "not guaranteed" because of process scheduling). The zero Policy is SyncEveryCommit. [InnoDB], [AppendFsync] and
// [SyncBinlog] build the policies from the servers' settings.
//
// Policies are written as text in one language, which [Parse] reads and
// documents, and [Policy.String] writes: "sync-every-commit",
// "sync-interval(1s)", "SyncInterval(1s)", "innodb=2",
// "appendfsync=everysec", "async-commit(200ms,1MiB)".
package policy

import (
	"errors"
	"fmt"
	"time"
)

// Wait is what a commit waits for before it returns.
type Wait uint8

const (
	// WaitNone: the commit returns once its record is in the log buffer.
	WaitNone Wait = iota
	// WaitWrite: the commit returns once its record was written to the OS
	// (page cache): it survives a process crash.
	WaitWrite
	// WaitSync: the commit returns once the sync covering its record
	// returned: it survives a power loss.
	WaitSync
)

// String returns "none", "write" or "sync".
func (w Wait) String() string {
	switch w {
	case WaitNone:
		return "none"
	case WaitWrite:
		return "write"
	case WaitSync:
		return "sync"
	}
	return fmt.Sprintf("Wait(%d)", uint8(w))
}

// Kind names a policy family.
type Kind uint8

// The policy families, one per row of the table in the package doc.
const (
	KindSyncEveryCommit       Kind = iota // SyncEveryCommit (InnoDB =1, appendfsync always)
	KindSyncEveryN                        // SyncEveryN (sync_binlog=N)
	KindSyncInterval                      // SyncInterval (InnoDB =2)
	KindSyncIntervalPostponed             // SyncIntervalPostponed (appendfsync everysec)
	KindBufferedInterval                  // BufferedInterval (InnoDB =0)
	KindAsyncCommit                       // AsyncCommit (synchronous_commit=off)
	KindSyncNever                         // SyncNever (appendfsync no, sync_binlog=0)
)

var kindNames = [...]string{
	KindSyncEveryCommit:       "sync-every-commit",
	KindSyncEveryN:            "sync-every-n",
	KindSyncInterval:          "sync-interval",
	KindSyncIntervalPostponed: "sync-interval-postponed",
	KindBufferedInterval:      "buffered-interval",
	KindAsyncCommit:           "async-commit",
	KindSyncNever:             "sync-never",
}

// String returns the family's name in lower-case-with-dashes, e.g.
// "sync-every-commit".
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// ErrInvalid is matched (with errors.Is) by every error [Policy.Validate],
// [Parse] and the mirror constructors return. Their messages all start with
// its text, "policy: invalid policy: ".
var ErrInvalid = errors.New("policy: invalid policy")

// invalidError is the error of this package: ErrInvalid's text, then what is
// wrong.
type invalidError struct{ detail string }

func (e *invalidError) Error() string { return ErrInvalid.Error() + ": " + e.detail }

// Is makes the error match ErrInvalid.
func (e *invalidError) Is(target error) bool { return target == ErrInvalid }

// invalid returns an error matching ErrInvalid that says what is wrong.
func invalid(format string, args ...any) error {
	return &invalidError{detail: fmt.Sprintf(format, args...)}
}

// Policy is a flush policy. It is a comparable value, safe to copy and to use
// from many goroutines. The zero value is [SyncEveryCommit]. Build one with a
// constructor; package wal calls [Policy.Validate] in Open.
type Policy struct {
	kind        Kind
	n           int           // SyncEveryN: groups per sync
	interval    time.Duration // background sync period (interval, buffered, async: writer delay)
	writeDelay  time.Duration // BufferedInterval: background write period
	maxPostpone time.Duration // SyncIntervalPostponed: longest a write is postponed
	flushAfter  int64         // AsyncCommit: sync early once this many bytes are unsynced
}

// Kind returns the policy's family.
func (p Policy) Kind() Kind { return p.kind }

// N returns the number of groups per sync of a [SyncEveryN] policy, 1 for
// SyncEveryCommit, and 0 for the others.
func (p Policy) N() int {
	switch p.kind {
	case KindSyncEveryCommit:
		return 1
	case KindSyncEveryN:
		return p.n
	}
	return 0
}

// Interval returns the background sync period (the writer delay for
// [AsyncCommit]), or 0 for policies without a background flusher.
func (p Policy) Interval() time.Duration { return p.interval }

// WriteDelay returns how often the background flusher writes the log buffer
// under [BufferedInterval] and [AsyncCommit], or 0.
func (p Policy) WriteDelay() time.Duration { return p.writeDelay }

// MaxPostpone returns how long [SyncIntervalPostponed] may postpone a write
// while a background sync runs, or 0.
func (p Policy) MaxPostpone() time.Duration { return p.maxPostpone }

// FlushAfter returns the unsynced byte count at which [AsyncCommit] syncs
// before its writer delay has passed, or 0 (never early).
func (p Policy) FlushAfter() int64 { return p.flushAfter }

// String describes the policy with its parameters in the canonical form of
// the language [Parse] reads, e.g. "sync-interval(1s)" or
// "async-commit(200ms,1MiB)" (a byte count with the largest of the units
// KiB, MiB and GiB that divides it exactly). Parse(p.String()) returns p for
// every valid p.
func (p Policy) String() string {
	switch p.kind {
	case KindSyncEveryN:
		return fmt.Sprintf("%s(%d)", p.kind, p.n)
	case KindSyncInterval:
		return fmt.Sprintf("%s(%s)", p.kind, p.interval)
	case KindSyncIntervalPostponed:
		return fmt.Sprintf("%s(%s,%s)", p.kind, p.interval, p.maxPostpone)
	case KindBufferedInterval:
		return fmt.Sprintf("%s(%s,%s)", p.kind, p.interval, p.writeDelay)
	case KindAsyncCommit:
		return fmt.Sprintf("%s(%s,%s)", p.kind, p.interval, formatBytes(p.flushAfter))
	}
	return p.kind.String()
}

// Validate reports whether the policy's parameters are usable. Its errors
// match [ErrInvalid].
func (p Policy) Validate() error {
	bad := func(format string, args ...any) error {
		return invalid("%s: %s", p.kind, fmt.Sprintf(format, args...))
	}
	switch p.kind {
	case KindSyncEveryCommit, KindSyncNever:
		return nil
	case KindSyncEveryN:
		if p.n < 1 {
			return bad("n = %d, want ≥ 1", p.n)
		}
	case KindSyncInterval, KindSyncIntervalPostponed, KindBufferedInterval, KindAsyncCommit:
		if p.interval < time.Millisecond || p.interval > time.Hour {
			return bad("interval %s, want 1ms..1h", p.interval)
		}
		if p.kind == KindSyncIntervalPostponed && (p.maxPostpone < 0 || p.maxPostpone > time.Hour) {
			return bad("max postpone %s, want 0..1h", p.maxPostpone)
		}
		if p.kind == KindBufferedInterval && (p.writeDelay < time.Millisecond || p.writeDelay > p.interval) {
			return bad("write delay %s, want 1ms..interval (%s)", p.writeDelay, p.interval)
		}
		if p.kind == KindAsyncCommit && p.flushAfter < 0 {
			return bad("flush-after %d bytes, want ≥ 0", p.flushAfter)
		}
	default:
		return bad("unknown kind")
	}
	return nil
}
