// Package groupcommit is a leader/follower group-commit queue: many
// concurrent commits share one write and one sync, as InnoDB
// (innodb_flush_log_at_trx_commit=1), PostgreSQL (XLogFlush) and MySQL's
// binlog group commit do. It knows LSNs only as uint64 byte positions and
// knows nothing of files: the log hands it a [FlushFunc] that does the I/O.
// It imports only the standard library.
//
// # Protocol
//
// A committer first appends its record (so that the next flush will include
// it), then calls [Queue.Wait] with the record's end LSN and the [Level] it
// needs. Under the queue's mutex, Wait:
//
//  1. returns the sticky error if the queue has failed;
//  2. returns nil if the watermark already covers the LSN;
//  3. if no flush is in flight, makes the caller the leader;
//  4. otherwise queues the caller as a follower, which then waits on its own
//     reusable channel (select with ctx.Done()).
//
// The leader may wait to grow its group ([Options.Delay], and the adaptive
// merge wait below), then calls the FlushFunc once, with no lock held, at the
// highest level any queued committer needs. The FlushFunc writes everything
// appended so far and syncs if asked. The leader then records the watermarks
// it returned and wakes exactly the followers now covered. Followers still
// uncovered appended after the flush began: they form the next group, and
// the first of them is made leader at once. Commits that arrive while a
// flush runs therefore wait for at most that flush and the next one.
//
// # Covered
//
// The LSN passed to Wait is the exclusive end position of the record. It is
// covered at level [Written] when the written watermark is ≥ it (the write
// handing it to the OS returned), and at level [Synced] when the synced
// watermark is ≥ it (the sync covering it returned; synced ≤ written, and
// synced also counts as written). Watermarks only go up: by a leader's
// FlushFunc result, or by [Queue.Advance] for progress made elsewhere (a
// background sync). Wait never returns nil before the FlushFunc call (or
// Advance) that covers its LSN has returned: there is no early
// acknowledgment.
//
// # Cancellation
//
// A follower whose ctx ends returns ctx.Err() at once; the group goes on
// without it, and its record is still written and synced by the flush it was
// waiting for (the caller must treat its outcome as unknown). A follower
// picked to lead whose ctx has ended passes leadership to the next one in
// line. A leader whose ctx ends finishes its flush and returns its outcome:
// the other members depend on it.
//
// # Failure fan-out
//
// A FlushFunc error is sticky: it is returned, unchanged, to the leader, to
// every follower of that group and to every later Wait, and the FlushFunc is
// never called again ("fsyncgate": a failed sync is never retried and then
// reported as a success). [Queue.Fail] does the same for an error from
// outside, such as the log being closed: queued followers return it at once,
// a leader in its delay stops waiting and does not flush, and a leader whose
// FlushFunc is in flight returns it when that call ends. The first failure
// wins. No waiter is left waiting.
//
// # Group-forming delay
//
// With [Options.Delay] > 0 a leader of a syncing group waits before it
// flushes, in one of two styles: MySQL's [SyncStageWait]
// (binlog_group_commit_sync_delay, ending early at
// binlog_group_commit_sync_no_delay_count queued commits) or PostgreSQL's
// [LeaderSleep] (commit_delay, only with at least commit_siblings other
// committers active). The delay is off by default.
//
// # The adaptive merge wait
//
// With k closed-loop committers, a plain leader/follower queue splits them
// into two cohorts that take turns: when group A's flush ends, A's members
// return and append their next records a few microseconds later, but group
// B's leader has already started B's flush, so A waits a whole extra flush.
// The result is about k/2 commits per sync and a median latency of two syncs.
// To merge the cohorts, a leader about to sync, whose previous group released
// n > 1 committers that have not all come back, yields the processor until
// they have (n arrivals since that flush ended), for at most a quarter of the
// moving average of the sync flush time. A lone committer never waits (its
// previous group had one member). The wait backs off when recent waits did
// not pay off (open-loop arrivals, where nobody comes back), probing now and
// then. A leader that slept in its Delay (or whose group MaxBatch closed)
// does not also take it. [Options.DisableAdaptiveWait] turns it off;
// [Stats.AdaptiveWaits] counts it.
//
// Measured on 2 cores and ext4 (fdatasync p50 ≈ 0.1 ms), with 8, 16 and 32
// closed-loop committers the wait raises commits per sync from about k/2 to
// 0.99·k and cuts the median commit latency from about two syncs to
// 1.05–1.3 times one; see BenchmarkWait and BenchmarkWaitOpenLoop.
//
// # Allocation
//
// Wait allocates nothing in steady state: a lone leader uses no channel, and
// followers reuse per-waiter channels kept on a free list.
package groupcommit
