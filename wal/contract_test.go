package wal_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/durawal/durawal/groupcommit"
	"github.com/durawal/durawal/policy"
	"github.com/durawal/durawal/wal"
	"github.com/durawal/durawal/wal/vfs"
	"github.com/durawal/durawal/wal/vfs/faultfs"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestOpenRejectsGroupDelayOutOfRange: a GroupCommit.Delay that is negative
// or above groupcommit.MaxDelay (1 s) is ErrInvalidOptions at Open.
func TestOpenRejectsGroupDelayOutOfRange(t *testing.T) {
	for _, d := range []time.Duration{-time.Millisecond, groupcommit.MaxDelay + time.Nanosecond, 10 * time.Second, time.Hour} {
		_, err := wal.Open(logDir, wal.Options{FS: vfs.NewMem(), SegmentSize: testSegmentSize,
			GroupCommit: groupcommit.Options{Delay: d}})
		require.ErrorIs(t, err, wal.ErrInvalidOptions, "Delay %v", d)
	}
	l := openLog(t, vfs.NewMem(), wal.Options{GroupCommit: groupcommit.Options{Delay: groupcommit.MaxDelay}})
	require.NoError(t, l.Close())
}

// TestAppendContextEndsDuringGroupDelay: a commit whose context ends during
// the group delay returns at once with the LSN and ctx.Err() (the record is
// appended, not ErrNotAppended).
func TestAppendContextEndsDuringGroupDelay(t *testing.T) {
	for _, style := range []groupcommit.Style{groupcommit.SyncStageWait, groupcommit.LeaderSleep} {
		t.Run(style.String(), func(t *testing.T) {
			l := openLog(t, vfs.NewMem(), wal.Options{Policy: policy.SyncEveryCommit(),
				GroupCommit: groupcommit.Options{Delay: groupcommit.MaxDelay, Style: style}})
			defer l.Close()
			ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
			defer cancel()
			start := time.Now()
			_, err := l.AppendContext(ctx, []byte("x"))
			took := time.Since(start)
			require.ErrorIs(t, err, context.DeadlineExceeded)
			assert.NotErrorIs(t, err, wal.ErrNotAppended)
			assert.Less(t, took, 500*time.Millisecond, "AppendContext must return when ctx ends")
		})
	}
}

// TestCloseEndsGroupDelay: Close ends a commit's group delay at once; the
// commit, made durable by Close's final sync, returns nil.
//
// It runs in a synctest bubble (MemFS: no goroutine blocks in a syscall), so
// synctest.Wait returns once the commit is blocked in its delay, and the
// bubble's clock shows whether Close waited the delay out.
func TestCloseEndsGroupDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := openLog(t, vfs.NewMem(), wal.Options{Policy: policy.SyncEveryCommit(),
			GroupCommit: groupcommit.Options{Delay: groupcommit.MaxDelay, Style: groupcommit.LeaderSleep}})
		done := make(chan error, 1)
		go func() {
			_, err := l.Append([]byte("x"))
			done <- err
		}()
		synctest.Wait() // the commit is in its delay
		require.NotZero(t, l.AppendedLSN())
		start := time.Now()
		require.NoError(t, l.Close())
		assert.Less(t, time.Since(start), groupcommit.MaxDelay, "Close must end the delay")
		require.NoError(t, <-done)
		assert.Equal(t, l.AppendedLSN(), l.SyncedLSN())
	})
}

// TestWaitDurableAfterCloseIsErrClosed: WaitDurable after Close returns
// ErrClosed, for a durable LSN and for one never appended.
func TestWaitDurableAfterCloseIsErrClosed(t *testing.T) {
	l := openLog(t, vfs.NewMem(), wal.Options{})
	lsn, err := l.Append([]byte("x"))
	require.NoError(t, err)
	require.NoError(t, l.Close())
	require.ErrorIs(t, l.WaitDurable(t.Context(), lsn), wal.ErrClosed)
	require.ErrorIs(t, l.WaitDurable(t.Context(), l.AppendedLSN()+100), wal.ErrClosed)
}

// TestAppendWithDoneContextAppendsNothing: AppendContext and AppendBatch with
// an already-done context append nothing and return an error matching both
// ErrNotAppended and the context's error.
func TestAppendWithDoneContextAppendsNothing(t *testing.T) {
	for _, p := range []policy.Policy{policy.SyncNever(), policy.SyncEveryCommit()} {
		t.Run(p.String(), func(t *testing.T) {
			l := openLog(t, vfs.NewMem(), wal.Options{Policy: p})
			defer l.Close()
			ctx, cancel := context.WithCancel(t.Context())
			cancel()
			before := l.AppendedLSN()
			_, err := l.AppendContext(ctx, []byte("x"))
			require.ErrorIs(t, err, wal.ErrNotAppended)
			require.ErrorIs(t, err, context.Canceled)
			_, err = l.AppendBatchContext(ctx, [][]byte{[]byte("a"), []byte("b")})
			require.ErrorIs(t, err, wal.ErrNotAppended)
			require.ErrorIs(t, err, context.Canceled)
			var be *wal.BatchError
			require.False(t, errors.As(err, &be))
			require.Equal(t, before, l.AppendedLSN(), "nothing appended")
		})
	}
}

// TestOpenSyncsParentOfCreatedDir: Open syncs the parent of each directory
// it creates (a mkdir is durable only after its parent is synced), top-down,
// and counts those syncs in Stats.DirSyncs; reopening an existing directory
// syncs no parent.
func TestOpenSyncsParentOfCreatedDir(t *testing.T) {
	mem := vfs.NewMem()
	var synced []string
	rec := faultfs.InjectorFunc(func(op faultfs.Op) error {
		if op.Kind == faultfs.OpSyncDir {
			synced = append(synced, op.Path)
		}
		return nil
	})
	fsys := faultfs.Inject(mem, rec)
	l, err := wal.Open("/a/b/log", wal.Options{FS: fsys, SegmentSize: testSegmentSize})
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(synced), 3)
	assert.Equal(t, []string{"/", "/a", "/a/b"}, synced[:3], "parents synced top-down right after the mkdir")
	assert.EqualValues(t, len(synced), l.Stats().DirSyncs, "Stats.DirSyncs counts them")
	require.NoError(t, l.Close())

	synced = nil
	l, err = wal.Open("/a/b/log", wal.Options{FS: fsys, SegmentSize: testSegmentSize})
	require.NoError(t, err)
	require.NoError(t, l.Close())
	assert.NotContains(t, synced, "/a/b", "an existing directory needs no parent sync")
}

// TestOpenFailsWhenParentDirSyncFails: a failed sync of the new directory's
// parent fails Open with that error.
func TestOpenFailsWhenParentDirSyncFails(t *testing.T) {
	eio := errors.New("injected EIO")
	fsys := faultfs.Inject(vfs.NewMem(), faultfs.InjectorFunc(func(op faultfs.Op) error {
		if op.Kind == faultfs.OpSyncDir && op.Path == "/" {
			return eio
		}
		return nil
	}))
	_, err := wal.Open(logDir, wal.Options{FS: fsys, SegmentSize: testSegmentSize})
	require.ErrorIs(t, err, eio)
}

// TestNewLogDirSurvivesPowerLoss: a log whose directory Open created keeps
// its synced records through a power loss that drops every unsynced change
// (MemFS loses a directory whose parent was never synced).
func TestNewLogDirSurvivesPowerLoss(t *testing.T) {
	mem := vfs.NewMem()
	l, err := wal.Open("/a/b/log", wal.Options{FS: mem, SegmentSize: testSegmentSize})
	require.NoError(t, err)
	_, err = l.Append([]byte("durable"))
	require.NoError(t, err)
	img := mem.PowerLoss(vfs.DropAll())
	require.NoError(t, l.Close())
	names, err := img.List("/a/b/log")
	require.NoError(t, err, "the log directory was lost")
	require.NotEmpty(t, names)
	l, err = wal.Open("/a/b/log", wal.Options{FS: img, SegmentSize: testSegmentSize})
	require.NoError(t, err)
	defer l.Close()
	_, recs := readAll(t, l, 0)
	require.Equal(t, [][]byte{[]byte("durable")}, recs)
}
