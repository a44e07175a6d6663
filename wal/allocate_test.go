//go:build unix

package wal_test

import (
	"errors"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/durawal/durawal/policy"
	"github.com/durawal/durawal/wal"
	"github.com/durawal/durawal/wal/vfs"
	"github.com/durawal/durawal/wal/vfs/faultfs"
	"github.com/stretchr/testify/require"
)

// TestSegmentsAllocated: a new segment is allocated (fallocate), not
// zero-filled, where commits return before their write (BufferedInterval,
// AsyncCommit), and a new log's first segment is allocated under every
// policy; where commits wait for their write or sync, later new segments
// are zero-filled. Each segment file on the
// OS has its full size with its blocks reserved, no zeros are counted as
// written for an allocated one, and every record reads back after a
// reopen.
func TestSegmentsAllocated(t *testing.T) {
	const segSize = 64 << 10
	for _, c := range []struct {
		pol       policy.Policy
		allocated func(prepared uint64) uint64
	}{
		{policy.BufferedInterval(10*time.Millisecond, time.Millisecond), func(p uint64) uint64 { return p }},
		{policy.AsyncCommit(10*time.Millisecond, 1<<20), func(p uint64) uint64 { return p }},
		{policy.SyncNever(), func(uint64) uint64 { return 1 }},
		{policy.SyncInterval(10 * time.Millisecond), func(uint64) uint64 { return 1 }},
		{policy.SyncIntervalPostponed(10*time.Millisecond, 20*time.Millisecond), func(uint64) uint64 { return 1 }},
		{policy.SyncEveryCommit(), func(uint64) uint64 { return 1 }},
		{policy.SyncEveryN(4), func(uint64) uint64 { return 1 }},
	} {
		t.Run(c.pol.String(), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "log")
			opts := wal.Options{SegmentSize: segSize, Policy: c.pol}
			l, err := wal.Open(dir, opts)
			require.NoError(t, err)
			lsns := appendN(t, l, 1, 700, 300) // 3 segments and more
			require.NoError(t, l.Close())
			st := l.Stats().Prepare
			require.GreaterOrEqual(t, st.Prepared, uint64(4), "%+v", st)
			require.Zero(t, st.Recycled)
			if runtime.GOOS == "linux" && st.Allocated == 0 {
				t.Skipf("the filesystem of %s cannot allocate", dir)
			}
			require.Equal(t, c.allocated(st.Prepared), st.Allocated, "%+v", st)
			require.Equal(t, (st.Prepared-st.Allocated)*segSize, st.PrepareBytes, "zeros are written only for the zero-filled ones")

			names, err := vfs.OS().List(dir)
			require.NoError(t, err)
			var segs int
			for _, name := range names {
				if !strings.HasSuffix(name, ".wal") {
					continue
				}
				segs++
				var sta syscall.Stat_t
				require.NoError(t, syscall.Stat(filepath.Join(dir, name), &sta))
				require.Equal(t, int64(segSize), sta.Size, name)
				require.GreaterOrEqual(t, sta.Blocks*512, int64(segSize), "%s: blocks reserved or written, not a hole", name)
			}
			require.GreaterOrEqual(t, segs, 3)

			l, err = wal.Open(dir, opts)
			require.NoError(t, err)
			defer l.Close()
			require.True(t, l.Recovered().Clean)
			got, _ := readAll(t, l, 0)
			require.Equal(t, lsns, got)
		})
	}
}

// TestSegmentsZeroFilledWhereAllocateIsUnsupported: on files that cannot
// allocate (vfs.Allocate says errors.ErrUnsupported), every new segment is
// zero-filled instead, under a policy that would allocate, and the log
// works as before.
func TestSegmentsZeroFilledWhereAllocateIsUnsupported(t *testing.T) {
	const segSize = 8 << 10
	mem := vfs.NewMem()
	opts := wal.Options{SegmentSize: segSize, Policy: policy.BufferedInterval(time.Millisecond, time.Millisecond)}
	l := openLog(t, faultfs.Inject(mem, faultfs.OnKind(faultfs.OpAllocate, errors.ErrUnsupported)), opts)
	lsns := appendN(t, l, 1, 100, 300)
	require.NoError(t, l.Close())
	st := l.Stats().Prepare
	require.GreaterOrEqual(t, st.Prepared, uint64(3))
	require.Zero(t, st.Allocated)
	require.Equal(t, st.Prepared*segSize, st.PrepareBytes)
	got, _, _ := replay(t, mem, opts)
	require.Equal(t, lsns, got)
}

// TestOpenAllocateFails: a new log whose first segment cannot be allocated
// fails to open with the cause (ErrNoSpace for ENOSPC, not for EIO), leaves
// no temporary file behind, and opens once the allocation works.
func TestOpenAllocateFails(t *testing.T) {
	for _, errno := range []syscall.Errno{syscall.ENOSPC, syscall.EIO} {
		t.Run(errno.Error(), func(t *testing.T) {
			mem := vfs.NewMem()
			inj := faultfs.InjectorFunc(func(op faultfs.Op) error {
				if op.Kind == faultfs.OpAllocate {
					return errno
				}
				return nil
			})
			_, err := wal.Open(logDir, wal.Options{FS: faultfs.Inject(mem, inj), SegmentSize: 8 << 10})
			require.ErrorIs(t, err, errno)
			if errno == syscall.ENOSPC {
				require.ErrorIs(t, err, wal.ErrNoSpace)
			} else {
				require.NotErrorIs(t, err, wal.ErrNoSpace)
			}
			requireNoTemp(t, mem)
			l, err := wal.Open(logDir, wal.Options{FS: mem, SegmentSize: 8 << 10})
			require.NoError(t, err)
			require.NoError(t, l.Close())
		})
	}
}
