package policy

import "time"

// SyncEveryCommit returns the full-durability policy: a commit returns only
// after the fdatasync covering its record returned; concurrent commits share
// that sync (group commit).
//
// Loses on process crash: nothing acknowledged. On power loss: nothing
// acknowledged. Mirrors innodb_flush_log_at_trx_commit=1, appendfsync always,
// synchronous_commit=on and sync_binlog=1.
func SyncEveryCommit() Policy { return Policy{kind: KindSyncEveryCommit} }

// SyncEveryN returns a policy whose commits return after the write, and whose
// every nth group (leader flush) also syncs. n must be ≥ 1; n = 1 is
// SyncEveryCommit's durability.
//
// Loses on process crash: nothing acknowledged. On power loss: the commits of
// at most n-1 groups plus the group in flight. Mirrors sync_binlog=N, which
// counts groups, not transactions.
func SyncEveryN(n int) Policy { return Policy{kind: KindSyncEveryN, n: n} }

// SyncInterval returns a policy whose commits return after the write, with a
// background sync at most once per interval d, timed from the start of the
// previous sync on the monotonic clock, and only if something is unsynced.
//
// Loses on process crash: nothing acknowledged. On power loss: commits
// acknowledged within about d + 2 fsync durations of the crash. Mirrors
// innodb_flush_log_at_trx_commit=2 with innodb_flush_log_at_timeout=d.
func SyncInterval(d time.Duration) Policy { return Policy{kind: KindSyncInterval, interval: d} }

// SyncIntervalPostponed returns Redis's everysec policy: commits return after
// the write, a background sync starts every d unless one is still running,
// and while a background sync runs the write itself is postponed (the commit
// returns from the log buffer) for up to maxPostpone; after that the write is
// forced, by the next commit or by the background flusher if none comes,
// without waiting for the running sync, and counted as a delayed write
// (Redis aof_delayed_fsync).
//
// Loses on process crash: commits acknowledged during a postponement, at most
// maxPostpone + one tick. On power loss: about d + 2 fsync durations. Mirrors
// appendfsync everysec (d = 1s, maxPostpone = 2s).
func SyncIntervalPostponed(d, maxPostpone time.Duration) Policy {
	return Policy{kind: KindSyncIntervalPostponed, interval: d, maxPostpone: maxPostpone}
}

// BufferedInterval returns a policy whose commits return as soon as their
// record is in the log buffer; a background flusher writes the buffer every
// writeDelay and syncs every d.
//
// Loses on process crash: about writeDelay of commits. On power loss: about
// max(writeDelay, d) + 2 fsync durations. Mirrors
// innodb_flush_log_at_trx_commit=0 (5.7: writeDelay = d = 1s).
func BufferedInterval(d, writeDelay time.Duration) Policy {
	return Policy{kind: KindBufferedInterval, interval: d, writeDelay: writeDelay}
}

// AsyncCommit returns PostgreSQL's asynchronous commit: commits return from
// the log buffer; a writer wakes every writerDelay, writes everything and
// syncs if writerDelay passed since the last sync or flushAfter bytes (0 =
// no early sync) are unsynced.
//
// Loses on process crash and on power loss: at most about three writer
// delays of commits. Mirrors synchronous_commit=off with wal_writer_delay and
// wal_writer_flush_after.
func AsyncCommit(writerDelay time.Duration, flushAfter int64) Policy {
	return Policy{kind: KindAsyncCommit, interval: writerDelay, writeDelay: writerDelay, flushAfter: flushAfter}
}

// SyncNever returns a policy whose commits return after the write and which
// never syncs on its own: only [wal.Log.Sync], a per-commit forced sync, a
// segment roll and Close sync.
//
// Loses on process crash: nothing acknowledged. On power loss: whatever the
// OS had not written back (Linux: up to ~30 s by default). Mirrors
// appendfsync no and sync_binlog=0.
func SyncNever() Policy { return Policy{kind: KindSyncNever} }
