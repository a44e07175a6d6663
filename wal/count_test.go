package wal_test

// Counting: what each policy costs in fsyncs, stated exactly where the code
// makes it exact, and the fsync counter checked against the filesystem's own
// count of sync calls (docs/design.md, Counters).
//
// The exact formula, from segment.go, recover.go and flush.go, for a fresh
// log on one goroutine with no failures:
//
//	Fsyncs = 3                 Open: the first-lsn and epoch records, and the first segment, allocated
//	                           and given its header under one sync (3 where it must be
//	                           zero-filled: no fallocate; its zeros are synced first)
//	       + commit syncs      per policy: N (SyncEveryCommit), ⌊N/n⌋ (SyncEveryN(n)), ...
//	       + 3·Rolls           each roll syncs the finished segment, the new header, then
//	                           the link frame it writes into the finished segment
//	       + Preparations      each new segment is allocated or zero-filled, and synced, before use:
//	                           one per roll, plus one if the last segment got past an eighth
//	                           full (its spare is prepared, then removed by Close)
//	       + [Close syncs]     1 if anything was unsynced at Close
//	       + 1                 Close's end frame (format v2), synced after its final sync
//
// Directory syncs (DirSyncs) are counted apart: 4 at Open (the new directory's
// parent, first-lsn, first segment, epoch), 1 per roll.

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/durawal/durawal/policy"
	"github.com/durawal/durawal/wal"
	"github.com/durawal/durawal/wal/vfs"
	"github.com/durawal/durawal/wal/vfs/faultfs"
	"github.com/stretchr/testify/require"
)

const (
	countCommits = 10_000
	countRecord  = 100 // bytes; a 128-byte frame (24-byte header, 8-byte alignment)
	countFrame   = 128
)

// expectedRolls returns the rolls and segment preparations of n 128-byte
// frames in segments of segSize bytes (32-byte header).
func expectedRolls(n int, segSize int64) (rolls, preps int) {
	perSeg := int((segSize - segHeader - 24) / countFrame) // header; the end/link frame's room
	segs := (n + perSeg - 1) / perSeg
	rolls = segs - 1
	preps = rolls
	if last := n - rolls*perSeg; int64(last*countFrame) > (segSize-segHeader-24)/8 { // wal.prepareAt
		preps++
	}
	return rolls, preps
}

func TestCountSyncEveryCommit(t *testing.T) {
	for _, tc := range []struct {
		segSize int64
		n       int
	}{{64 << 10, countCommits}, {256 << 10, 1000}} { // 19 rolls; no roll at all (one spare: 128 KB is past an eighth)
		segSize, n := tc.segSize, tc.n
		t.Run(byteSize(segSize), func(t *testing.T) {
			mem := vfs.NewMem()
			l, err := wal.Open(faultDir, wal.Options{FS: mem, SegmentSize: segSize})
			require.NoError(t, err)
			rec := payload(0, countRecord)
			for range n {
				_, err := l.Append(rec)
				require.NoError(t, err)
			}
			require.NoError(t, l.Close())
			st := l.Stats()
			rolls, preps := expectedRolls(n, segSize)
			require.Equal(t, uint64(rolls), st.Rolls)
			checkRollSyncs(t, st.Fsyncs, uint64(3+n+preps+1), rolls)
			require.Equal(t, mem.SyncCount(), int64(st.Fsyncs), "Fsyncs == the MemFS's own count of syncs")
			// Open: the parent of the directory it creates, first-lsn, the first segment's entry, and the epoch record.
			require.Equal(t, uint64(4+rolls), st.DirSyncs)
			require.Equal(t, mem.SyncDirCount(), int64(st.DirSyncs))
			require.Equal(t, uint64(n), st.Commits)
			t.Logf("%d commits: %d fsyncs (%.4f per commit), %d rolls", st.Commits, st.Fsyncs, st.FsyncsPerCommit(), st.Rolls)
		})
	}
}

// checkRollSyncs checks fsyncs, a log's Stats.Fsyncs, against base, the
// syncs of everything but its rolls, and rolls: 3 (Open: the epoch, the first
// segment's allocation and header, first-lsn) + one per committing sync +
// one per preparation + 1 (Close's end frame) is base. Each roll adds two
// or three: the finished segment's sync and its link frame's, and, when
// the sealing goroutine syncs the new segment before the next commit's own
// sync covers it, that one too (the new segment's name and header must be
// durable before the link). Which comes first is the scheduler's choice.
func checkRollSyncs(t *testing.T, fsyncs, base uint64, rolls int) {
	t.Helper()
	lo, hi := base+2*uint64(rolls), base+3*uint64(rolls)
	require.GreaterOrEqual(t, fsyncs, lo, "%d without rolls + 2·%d rolls", base, rolls)
	require.LessOrEqual(t, fsyncs, hi, "%d without rolls + 3·%d rolls", base, rolls)
}

func byteSize(n int64) string {
	if n >= 1<<20 {
		return fmt.Sprintf("%dMiB", n>>20)
	}
	return fmt.Sprintf("%dKiB", n>>10)
}

// TestCountSyncEveryN: one committer makes every commit its own group, so
// SyncEveryN(4) syncs every 4th commit: ⌊N/4⌋ (a roll's syncs, its
// sealing's included, do not reset the group count), and Close has
// nothing left.
func TestCountSyncEveryN(t *testing.T) {
	mem := vfs.NewMem()
	const segSize = 64 << 10
	l, err := wal.Open(faultDir, wal.Options{FS: mem, SegmentSize: segSize, Policy: policy.SyncEveryN(4)})
	require.NoError(t, err)
	rec := payload(0, countRecord)
	for range countCommits {
		_, err := l.Append(rec)
		require.NoError(t, err)
	}
	require.NoError(t, l.Close())
	st := l.Stats()
	require.Equal(t, uint64(countCommits), st.Group.Groups)
	rolls, preps := expectedRolls(countCommits, segSize)
	checkRollSyncs(t, st.Fsyncs, uint64(3+countCommits/4+preps+1), rolls)
	require.Equal(t, mem.SyncCount(), int64(st.Fsyncs))
}

// TestCountIntervalPolicies runs one committer for N intervals of fake time
// (a commit per ms: 10,000 commits in 10 s) and counts the syncs: about N
// for SyncInterval and BufferedInterval, and none for SyncNever but Close's.
func TestCountIntervalPolicies(t *testing.T) {
	const n = 10
	const d = time.Second
	for _, tc := range []struct {
		pol      policy.Policy
		min, max int // commit syncs: background syncs + Close's
	}{
		{policy.SyncInterval(d), n - 1, n + 1},
		{policy.BufferedInterval(d, d), n - 1, n + 1},
		{policy.BufferedInterval(d, 100*time.Millisecond), n - 1, n + 1},
		{policy.SyncIntervalPostponed(d, 2*d), n - 1, n + 1},
		{policy.AsyncCommit(d, 0), n - 1, n + 1},
		{policy.SyncNever(), 1, 1},
	} {
		t.Run(tc.pol.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				mem := vfs.NewMem()
				l, err := wal.Open(faultDir, wal.Options{FS: mem, SegmentSize: 4 << 20, Policy: tc.pol}) // 1.28 MB: no roll, one spare
				require.NoError(t, err)
				rec := payload(0, countRecord)
				start := time.Now()
				commits := 0
				for time.Since(start) < n*d {
					_, err := l.Append(rec)
					require.NoError(t, err)
					commits++
					time.Sleep(time.Millisecond)
				}
				require.Equal(t, countCommits, commits)
				mid := l.Stats()
				time.Sleep(5 * d) // idle: no fsyncs
				idle := l.Stats()
				require.NoError(t, l.Close())
				st := l.Stats()
				// Open's 3, Close's end frame, and the spare's preparation
				// (1.28 MB is past an eighth of the segment).
				require.EqualValues(t, 2, st.Prepare.Prepared, "the first segment and the spare")
				got := int(st.Fsyncs) - 4 - 1
				t.Logf("%s: %d commits in %v: %d fsyncs (%d background), %.5f per commit",
					tc.pol, commits, n*d, got, st.BackgroundSyncs, float64(got)/float64(commits))
				require.GreaterOrEqual(t, got, tc.min)
				require.LessOrEqual(t, got, tc.max)
				// Every background sync counted issued one fsync; Close's
				// final sync, if it had anything left, is the only other.
				require.LessOrEqual(t, int(st.BackgroundSyncs), got)
				require.GreaterOrEqual(t, int(st.BackgroundSyncs), got-1)
				require.Equal(t, mem.SyncCount(), int64(st.Fsyncs))
				if tc.pol.Kind() != policy.KindSyncNever {
					require.LessOrEqual(t, idle.Fsyncs, mid.Fsyncs+1, "an idle log issues no fsyncs (one may finish the busy run)")
					require.Equal(t, idle.Fsyncs+1, st.Fsyncs, "Close found everything synced: only its end frame's sync")
				}
			})
		})
	}
}

// TestCountMatchesOSSyscalls checks Stats().Fsyncs and DirSyncs against
// the system calls counted below the log on the real filesystem.
func TestCountMatchesOSSyscalls(t *testing.T) {
	var c faultfs.Counter
	const segSize = 64 << 10
	const n = 600 // 600 frames of 128 bytes in 64 KiB segments: 1 roll
	l, err := wal.Open(t.TempDir(), wal.Options{FS: faultfs.Inject(vfs.OS(), &c), SegmentSize: segSize})
	require.NoError(t, err)
	rec := payload(0, countRecord)
	for range n {
		_, err := l.Append(rec)
		require.NoError(t, err)
	}
	require.NoError(t, l.Close())
	st := l.Stats()
	rolls, preps := expectedRolls(n, segSize)
	require.Equal(t, uint64(rolls), st.Rolls)
	checkRollSyncs(t, st.Fsyncs, uint64(3+n+preps+1), rolls)
	require.Equal(t, c.Count(faultfs.OpSync), int64(st.Fsyncs), "Fsyncs == fdatasync calls")
	require.Equal(t, c.Count(faultfs.OpSyncDir), int64(st.DirSyncs), "DirSyncs == directory fsync calls")
	t.Logf("real disk: %d commits, %d fdatasync, %d dir fsync, fsync max %v", st.Commits, st.Fsyncs, st.DirSyncs, st.FsyncMaxDuration)
}
