package groupcommit

import (
	"math/bits"
	"time"
)

// GroupSizeBuckets is the number of buckets in [Stats.GroupSizeHist].
const GroupSizeBuckets = 16

// Stats is a snapshot of a [Queue]'s counters, taken by [Queue.Stats].
// Counters only grow; Written and Synced are gauges that never go down.
// Names follow the upstream counters each mirrors (docs/design.md, Counters).
type Stats struct {
	// Commits counts Waits that returned nil: commits acknowledged at their
	// level, by a flush, by Advance, or because the watermark already covered
	// them. Mirrors MariaDB Binlog_commits (MySQL Com_commit). It counts
	// every successful Wait, whatever the caller uses it for: in package wal
	// that is each commit that waits (policy level write or sync), but also
	// Log.Sync, Log.WaitDurable, an append waiting for log-buffer space and
	// the final flush of Log.Close, while commits acknowledged from the log
	// buffer do not wait and are not counted. wal's Stats.Commits is the
	// count of commits.
	Commits uint64
	// Groups counts flushes run by leaders (FlushFunc calls, failed ones
	// included). Mirrors MariaDB Binlog_group_commits.
	Groups uint64
	// SyncGroups counts the Groups that synced: those whose FlushFunc was
	// called with need [Synced] (a committer asked), plus those called with
	// need [Written] whose FlushFunc returned a synced watermark beyond the
	// queue's (the FlushFunc chose to sync, as wal does every nth group
	// under policy.SyncEveryN). A sync made outside the queue (wal's
	// background flusher) and not yet reported with Advance when a flush
	// returns is attributed to that flush. Failed flushes are counted.
	// Mirrors Innodb_os_log_fsyncs / pg_stat_wal.wal_sync for the syncs
	// made by groups; background syncs, roll syncs and a need-Synced flush
	// with nothing left to sync make wal's Stats.Fsyncs differ.
	SyncGroups uint64

	// GroupSizeMin and GroupSizeMax are the fewest and most commits one
	// successful flush covered: its leader plus the followers it woke. Zero
	// until the first group. (MySQL and PostgreSQL expose no such gauge;
	// MariaDB's ratio Binlog_commits / Binlog_group_commits is the mean.)
	GroupSizeMin, GroupSizeMax uint64
	// GroupSizeMean is the mean commits per successful flush (leader plus
	// followers woken by that flush).
	GroupSizeMean float64
	// GroupSizeHist counts successful flushes by group size in power-of-two
	// buckets: bucket 0 holds size 1, bucket 1 sizes 2–3, bucket 2 sizes 4–7,
	// bucket i sizes 2^i to 2^(i+1)-1, and the last bucket every size
	// ≥ 2^(GroupSizeBuckets-1).
	GroupSizeHist [GroupSizeBuckets]uint64

	// TriggerCount counts SyncStageWait delays ended early because MaxBatch
	// commits were queued. Mirrors MariaDB Binlog_group_commit_trigger_count.
	TriggerCount uint64
	// TriggerTimeout counts SyncStageWait delays that ran the full Delay.
	// Mirrors MariaDB Binlog_group_commit_trigger_timeout.
	TriggerTimeout uint64
	// DelaySleeps counts leaders that slept for Delay (in either Style; a
	// SyncStageWait delay counts once if it slept at least one slice). No
	// upstream counter; PostgreSQL's commit_delay sleeps are its model
	// (docs/design.md, Counters).
	DelaySleeps uint64

	// AdaptiveWaits counts leaders that waited briefly for the committers the
	// previous group released to come back (the adaptive merge wait). No
	// upstream counter: neither MySQL nor PostgreSQL has this wait.
	AdaptiveWaits uint64
	// AdaptiveMerges counts the AdaptiveWaits that paid off: at least half of
	// the awaited committers came back before the bound.
	AdaptiveMerges uint64
	// FlushTime is the moving average (EWMA, weight 1/8) of the duration of a
	// FlushFunc call at level [Synced]; it bounds the adaptive wait. Mirrors
	// InnoDB log_flush_avg_time / pg_stat_wal.wal_sync_time ÷ wal_sync.
	FlushTime time.Duration

	// Written and Synced are the watermarks (exclusive end LSNs) the queue
	// knows: how far the log was handed to the OS and made durable. Mirror
	// InnoDB write_lsn / flushed_to_disk_lsn and PostgreSQL
	// pg_current_wal_lsn() / pg_current_wal_flush_lsn(). Synced ≤ Written.
	Written, Synced uint64
	// Active is a gauge: committers inside [Queue.Wait] right now.
	Active int
}

// groupSizeBucket returns the GroupSizeHist index for a group of n ≥ 1.
func groupSizeBucket(n uint64) int {
	return min(bits.Len64(n)-1, GroupSizeBuckets-1)
}

// recordGroup adds one successful group of n commits to s; s.GroupSizeMean
// is derived later from sum.
func (s *Stats) recordGroup(n uint64) {
	if s.GroupSizeMin == 0 || n < s.GroupSizeMin {
		s.GroupSizeMin = n
	}
	s.GroupSizeMax = max(s.GroupSizeMax, n)
	s.GroupSizeHist[groupSizeBucket(n)]++
}
