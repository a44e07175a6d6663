//go:build unix

package wal_test

import (
	"fmt"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/durawal/durawal/internal/longtest"
	"github.com/durawal/durawal/policy"
	"github.com/durawal/durawal/wal"
	"github.com/durawal/durawal/wal/vfs"
	"github.com/durawal/durawal/wal/vfs/faultfs"
)

// allocPolicies are the policies whose spares are allocated.
var allocPolicies = []policy.Policy{
	policy.BufferedInterval(time.Millisecond, time.Millisecond),
	policy.AsyncCommit(time.Millisecond, 0),
}

// TestAllocatedSegmentCrashImages: crash images before every op, every PowerLoss
// mode, under the policies that allocate spares.
func TestAllocatedSegmentCrashImages(t *testing.T) {
	for _, m := range []vfs.SyncMethod{vfs.Fdatasync, vfs.ODirect, vfs.Fsync}[:longtest.Pick(3, 1)] { // all three with DURAWAL_LONG=1
		for _, pol := range allocPolicies {
			for _, seg := range []int64{4 << 10, 8 << 10} {
				for _, wl := range workloads {
					if seg > 4<<10 && wl.name == "recycling" {
						continue // the workload needs 5 reuses
					}
					t.Run(fmt.Sprintf("%v/%s/%d/%s", m, pol, seg, wl.name), func(t *testing.T) {
						crashImagesAtEveryOp(t, wal.Options{SegmentSize: seg, Policy: pol, SyncMethod: m}, wl.run)
					})
				}
			}
		}
	}
}

// TestPrepareBytesAfterFailedSync: a zero-filled spare whose sync fails
// is discarded and not counted as Prepared; its zeros must not be counted
// in PrepareBytes either, or PrepareBytes != (Prepared-Recycled-Allocated)
// × SegmentSize, the invariant PrepareStats documents.
func TestPrepareBytesAfterFailedSync(t *testing.T) {
	const segSize = 8 << 10
	for _, pol := range []policy.Policy{policy.SyncEveryCommit(), policy.BufferedInterval(time.Millisecond, time.Millisecond)} {
		t.Run(pol.String(), func(t *testing.T) {
			mem := vfs.NewMem()
			var fired atomic.Bool
			inj := faultfs.InjectorFunc(func(op faultfs.Op) error {
				if op.Kind == faultfs.OpSync && strings.Contains(op.Path, "/prepare-") && !strings.HasSuffix(op.Path, "prepare-1.wal.tmp") && fired.CompareAndSwap(false, true) {
					return syscall.EIO
				}
				return nil
			})
			l, err := wal.Open(logDir, wal.Options{FS: faultfs.Inject(mem, inj), SegmentSize: segSize, Policy: pol})
			require.NoError(t, err)
			var errs int
			for i := range 300 {
				if _, err := l.Append(record(1, i, 100)); err != nil {
					errs++
					require.NotErrorIs(t, err, wal.ErrPoisoned)
				}
			}
			require.NoError(t, l.Close())
			require.True(t, fired.Load(), "a spare's sync failed")
			st := l.Stats().Prepare
			t.Logf("append errors %d, %+v", errs, st)
			require.Equal(t, (st.Prepared-st.Recycled-st.Allocated)*segSize, st.PrepareBytes,
				"PrepareBytes counts the zeros of the zero-filled segments only")
		})
	}
}

// TestAllocateEIO: an allocation failing with EIO at a spare's preparation
// (allocating policies) fails one Append without poisoning, the log goes
// on, leaves no temporary file, and every appended record reads back. (At
// Open: TestOpenAllocateFails.)
func TestAllocateEIO(t *testing.T) {
	for _, pol := range allocPolicies {
		t.Run(pol.String(), func(t *testing.T) {
			mem := vfs.NewMem()
			var n atomic.Int64
			inj := faultfs.InjectorFunc(func(op faultfs.Op) error {
				if op.Kind == faultfs.OpAllocate && n.Add(1) == 2 {
					return syscall.EIO
				}
				return nil
			})
			opts := wal.Options{FS: faultfs.Inject(mem, inj), SegmentSize: 8 << 10, Policy: pol}
			l, err := wal.Open(logDir, opts)
			require.NoError(t, err)
			var lsns []wal.LSN
			var errs int
			for i := range 300 {
				lsn, err := l.Append(record(1, i, 100))
				if err != nil {
					errs++
					require.ErrorIs(t, err, syscall.EIO)
					require.NotErrorIs(t, err, wal.ErrPoisoned)
					continue
				}
				lsns = append(lsns, lsn)
			}
			require.Equal(t, 1, errs)
			require.NoError(t, l.Close())
			requireNoTemp(t, mem)
			got, _, _ := replay(t, mem, wal.Options{SegmentSize: 8 << 10, Policy: pol})
			require.Equal(t, lsns, got)
			st := l.Stats().Prepare
			require.Equal(t, st.Prepared, st.Allocated, "%+v", st)
		})
	}
}

func requireNoTemp(t *testing.T, mem *vfs.MemFS) {
	t.Helper()
	names, err := mem.List(logDir)
	if err != nil {
		return
	}
	for _, name := range names {
		require.False(t, strings.HasSuffix(name, ".wal.tmp"), "%s left behind", name)
	}
}

// TestOpenFirstSegmentSyncFails: Open's first segment is no longer
// synced by prepareSegment (sync=false) but by installSegment; a failure of
// that sync must not leave the temporary file behind, as a failed
// preparation's did not before the change.
func TestOpenFirstSegmentSyncFails(t *testing.T) {
	for _, kind := range []faultfs.OpKind{faultfs.OpSync, faultfs.OpWrite} {
		t.Run(kind.String(), func(t *testing.T) {
			mem := vfs.NewMem()
			inj := faultfs.InjectorFunc(func(op faultfs.Op) error {
				if op.Kind == kind && strings.Contains(op.Path, "/prepare-") {
					return syscall.EIO
				}
				return nil
			})
			_, err := wal.Open(logDir, wal.Options{FS: faultfs.Inject(mem, inj), SegmentSize: 8 << 10})
			require.ErrorIs(t, err, syscall.EIO)
			requireNoTemp(t, mem)
		})
	}
}
