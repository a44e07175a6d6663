package wal_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/durawal/durawal/policy"
	"github.com/durawal/durawal/wal"
	"github.com/durawal/durawal/wal/vfs"
	"github.com/durawal/durawal/wal/vfs/faultfs"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// eventCounts is an Observer that counts what it is told.
type eventCounts struct {
	syncs, syncErrs, syncNanos      atomic.Int64
	groups, groupSize, syncedGroups atomic.Int64
	commits, commitRecs, commitErrs atomic.Int64
	commitByWait                    [3]atomic.Int64
	rolls                           atomic.Int64
	poisons                         atomic.Int64
	mu                              sync.Mutex
	rollNames                       []string
	poisonCause                     error
	lastRollFirst                   wal.LSN
}

func (c *eventCounts) observer() wal.Observer {
	return &wal.ObserverFuncs{
		Sync: func(e wal.SyncEvent) {
			c.syncs.Add(1)
			c.syncNanos.Add(int64(e.Duration))
			if e.Err != nil {
				c.syncErrs.Add(1)
			}
		},
		Group: func(e wal.GroupEvent) {
			c.groups.Add(1)
			c.groupSize.Add(int64(e.Size))
			if e.Synced {
				c.syncedGroups.Add(1)
			}
		},
		Commit: func(e wal.CommitEvent) {
			c.commits.Add(1)
			c.commitRecs.Add(int64(e.Records))
			c.commitByWait[e.Wait].Add(1)
			if e.Err != nil {
				c.commitErrs.Add(1)
			}
		},
		Roll: func(e wal.RollEvent) {
			c.rolls.Add(1)
			c.mu.Lock()
			c.rollNames = append(c.rollNames, e.Segment)
			c.lastRollFirst = e.FirstLSN
			c.mu.Unlock()
		},
		Poison: func(cause error) {
			c.poisons.Add(1)
			c.mu.Lock()
			c.poisonCause = cause
			c.mu.Unlock()
		},
	}
}

// TestObserverMatchesStats: under concurrent durable commits across several
// segment rolls, the Observer hears of every sync, group, commit and roll
// the Stats count, with the same durations the histograms hold.
func TestObserverMatchesStats(t *testing.T) {
	var c eventCounts
	l, err := wal.Open(faultDir, wal.Options{FS: vfs.NewMem(), SegmentSize: 64 << 10, Observer: c.observer()})
	require.NoError(t, err)
	const writers, each = 8, 300
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				var err error
				if i%10 == 0 {
					_, err = l.AppendBatchContext(context.Background(), [][]byte{payload(w*each+i, 100), payload(w*each+i, 50)})
				} else {
					_, err = l.Append(payload(w*each+i, 100))
				}
				assert.NoError(t, err)
			}
		})
	}
	wg.Wait()
	s := l.Stats()
	require.Positive(t, s.Rolls, "the workload must roll segments")

	require.Equal(t, int64(s.Fsyncs), c.syncs.Load(), "one Sync event per counted fsync (Open's included)")
	require.Zero(t, c.syncErrs.Load())
	require.Equal(t, s.Fsyncs, s.FsyncDuration.Count)
	require.Equal(t, s.FsyncDuration.Sum, time.Duration(c.syncNanos.Load()), "the histogram and the events time the same syncs")

	require.Equal(t, int64(writers*each), c.commits.Load())
	require.Equal(t, int64(s.Commits), c.commits.Load())
	require.Equal(t, int64(s.AppendRequests), c.commitRecs.Load())
	require.Equal(t, c.commits.Load(), c.commitByWait[policy.WaitSync].Load(), "SyncEveryCommit: every commit waits for the sync")
	require.Equal(t, s.Commits, s.CommitWaitSynced.Count)
	require.Zero(t, s.CommitWaitNone.Count+s.CommitWaitWritten.Count)
	require.Equal(t, s.WriteCalls, s.WriteDuration.Count)

	require.Equal(t, int64(s.Group.GroupSizeHistTotal()), c.groups.Load())
	require.Equal(t, int64(s.Group.SyncGroups), c.syncedGroups.Load())
	require.InDelta(t, s.Group.GroupSizeMean, float64(c.groupSize.Load())/float64(c.groups.Load()), 1e-9)

	require.Equal(t, int64(s.Rolls), c.rolls.Load())
	c.mu.Lock()
	require.Len(t, c.rollNames, int(s.Rolls))
	require.Equal(t, s.Segments, len(c.rollNames)+1)
	require.True(t, strings.HasSuffix(c.rollNames[0], ".wal"))
	c.mu.Unlock()

	require.NoError(t, l.Close())
	require.Zero(t, c.poisons.Load())
}

// TestObserverPoison: a failed sync is reported to Sync with its error,
// to Poison once with the cause, and to Commit with the commit's error.
func TestObserverPoison(t *testing.T) {
	var c eventCounts
	var failing atomic.Bool
	fsys := faultfs.Inject(vfs.NewMem(), faultfs.InjectorFunc(func(op faultfs.Op) error {
		if op.Kind == faultfs.OpSync && failing.Load() {
			return faultfs.ErrInjected
		}
		return nil
	}))
	l, err := wal.Open(faultDir, wal.Options{FS: fsys, Observer: c.observer(), SegmentSize: 64 << 10})
	require.NoError(t, err)
	_, err = l.Append([]byte("ok"))
	require.NoError(t, err)
	failing.Store(true)
	_, err = l.Append([]byte("lost?"))
	require.ErrorIs(t, err, wal.ErrDurabilityUnknown)
	_, err = l.Append([]byte("refused"))
	require.ErrorIs(t, err, wal.ErrPoisoned)

	require.Equal(t, int64(1), c.syncErrs.Load())
	require.Equal(t, int64(1), c.poisons.Load())
	c.mu.Lock()
	require.ErrorIs(t, c.poisonCause, faultfs.ErrInjected)
	c.mu.Unlock()
	require.Equal(t, int64(2), c.commits.Load(), "the refused Append got no LSN: no commit event")
	require.Equal(t, int64(1), c.commitErrs.Load())
	s := l.Stats()
	require.Equal(t, uint64(1), s.Commits)
	require.Equal(t, s.Fsyncs, s.FsyncDuration.Count, "failed syncs are not in the histogram")
	require.Equal(t, int64(s.Fsyncs+s.FsyncErrors), c.syncs.Load())
	require.ErrorIs(t, l.Close(), wal.ErrPoisoned)
}

// TestCommitWaitHistograms: each commit is counted in the histogram of
// what it waited for, and their counts add up to Commits.
func TestCommitWaitHistograms(t *testing.T) {
	for _, tc := range []struct {
		name                  string
		pol                   policy.Policy
		none, written, synced uint64
	}{
		{"sync-every-commit", policy.SyncEveryCommit(), 0, 0, 10},
		{"sync-never", policy.SyncNever(), 0, 10, 0},
		{"async-commit", policy.AsyncCommit(time.Hour, 1<<20), 10, 0, 0},
	} {
		t.Run("policy="+tc.name, func(t *testing.T) {
			l := openLog(t, vfs.NewMem(), wal.Options{Policy: tc.pol})
			for i := range 10 {
				_, err := l.Append(payload(i, 10))
				require.NoError(t, err)
			}
			_, err := l.AppendContext(context.Background(), []byte("ddl"), wal.ForceSync)
			require.NoError(t, err)
			s := l.Stats()
			require.Equal(t, tc.none, s.CommitWaitNone.Count)
			require.Equal(t, tc.written, s.CommitWaitWritten.Count)
			require.Equal(t, tc.synced+1, s.CommitWaitSynced.Count, "ForceSync counts as a sync wait")
			require.Equal(t, s.Commits, s.CommitWaitNone.Count+s.CommitWaitWritten.Count+s.CommitWaitSynced.Count)
			require.Positive(t, s.CommitWaitSynced.P50())
			require.NoError(t, l.Close())
		})
	}
}

// TestSegmentGauges: Segments, SegmentBytes and FirstLSN follow rolls and
// RemoveBefore, and survive a reopen; RecoveryDuration is set by Open.
func TestSegmentGauges(t *testing.T) {
	mem := vfs.NewMem()
	const segSize = 16 << 10
	l, err := wal.Open(faultDir, wal.Options{FS: mem, SegmentSize: segSize, Policy: policy.SyncNever()})
	require.NoError(t, err)
	s := l.Stats()
	require.Equal(t, 1, s.Segments)
	require.Equal(t, int64(segSize), s.SegmentBytes)
	require.Equal(t, wal.LSN(0), s.FirstLSN)

	var last wal.LSN
	for i := range 400 {
		last, err = l.Append(payload(i, 200))
		require.NoError(t, err)
	}
	s = l.Stats()
	require.Equal(t, int(s.Rolls)+1, s.Segments)
	require.Equal(t, int64(s.Segments)*segSize, s.SegmentBytes)
	names, err := mem.List(faultDir)
	require.NoError(t, err)
	require.Equal(t, s.Segments, countSuffix(names, ".wal"), "segment files on disk: %v", names)

	first, err := l.RemoveBefore(last)
	require.NoError(t, err)
	s = l.Stats()
	require.Equal(t, first, s.FirstLSN)
	require.Equal(t, 1, s.Segments, "everything before the last record's segment removed")
	require.Equal(t, int64(segSize), s.SegmentBytes)
	require.NoError(t, l.Close())

	l, err = wal.Open(faultDir, wal.Options{FS: mem, SegmentSize: segSize})
	require.NoError(t, err)
	s = l.Stats()
	require.Equal(t, 1, s.Segments)
	require.Equal(t, int64(segSize), s.SegmentBytes)
	require.Equal(t, first, s.FirstLSN)
	require.Positive(t, s.RecoveryDuration)
	require.Equal(t, s.RecoveryDuration, l.Recovered().Duration)
	require.NoError(t, l.Close())
}

func countSuffix(names []string, suffix string) int {
	n := 0
	for _, name := range names {
		if strings.HasSuffix(name, suffix) {
			n++
		}
	}
	return n
}

// TestReaderCounters: ReaderRecords counts the records Readers returned
// and ReaderBytes the bytes they read, at least the frames they decoded.
func TestReaderCounters(t *testing.T) {
	l := openLog(t, vfs.NewMem(), wal.Options{SegmentSize: 16 << 10})
	for i := range 300 {
		_, err := l.Append(payload(i, 100))
		require.NoError(t, err)
	}
	lsns, _ := readAll(t, l, 0)
	require.Len(t, lsns, 300)
	s := l.Stats()
	require.Equal(t, uint64(300), s.ReaderRecords)
	require.GreaterOrEqual(t, s.ReaderBytes, uint64(s.AppendedLSN), "every frame byte was read at least once")
	lsns, _ = readAll(t, l, lsns[150])
	require.Len(t, lsns, 150)
	require.Equal(t, uint64(450), l.Stats().ReaderRecords, "over every Reader")
	require.NoError(t, l.Close())
}

// TestSlowSyncWarning: a sync slower than Options.SlowSyncThreshold (here
// an injected 1.5 s stall on the fake clock of a synctest bubble) is
// logged as a warning and counted, with the 1 s default; a negative
// threshold turns both off.
func TestSlowSyncWarning(t *testing.T) {
	for _, tc := range []struct {
		name      string
		threshold time.Duration
		want      uint64
	}{
		{"default", 0, 1},
		{"off", -1, 0},
		{"above-the-stall", 2 * time.Second, 0},
	} {
		t.Run("threshold="+tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var stall atomic.Bool
				fsys := faultfs.Inject(vfs.NewMem(), faultfs.InjectorFunc(func(op faultfs.Op) error {
					if op.Kind == faultfs.OpSync && stall.CompareAndSwap(true, false) {
						time.Sleep(1500 * time.Millisecond) // the disk stalls once
					}
					return nil
				}))
				var logBuf bytes.Buffer
				logger := slog.New(slog.NewTextHandler(&logBuf, &slog.HandlerOptions{Level: slog.LevelWarn}))
				l, err := wal.Open(faultDir, wal.Options{FS: fsys, Logger: logger, SlowSyncThreshold: tc.threshold, SegmentSize: 64 << 10})
				require.NoError(t, err)
				_, err = l.Append([]byte("fast"))
				require.NoError(t, err)
				stall.Store(true)
				_, err = l.Append([]byte("slow"))
				require.NoError(t, err)
				s := l.Stats()
				require.Equal(t, tc.want, s.SlowSyncs)
				require.Equal(t, 1500*time.Millisecond, s.FsyncMaxDuration)
				require.Equal(t, 1500*time.Millisecond, s.FsyncDuration.Quantile(1).Round(100*time.Millisecond), "the slow sync is the histogram's maximum")
				if tc.want > 0 {
					require.Contains(t, logBuf.String(), "wal: slow sync")
					require.Contains(t, logBuf.String(), "duration=1.5s")
					require.Contains(t, logBuf.String(), "threshold=1s")
				} else {
					require.NotContains(t, logBuf.String(), "slow sync")
				}
				require.NoError(t, l.Close())
			})
		})
	}
}
