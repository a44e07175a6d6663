//go:build linux

package wal_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/durawal/durawal/policy"
	"github.com/durawal/durawal/wal"
	"github.com/durawal/durawal/wal/vfs"
	"github.com/durawal/durawal/wal/vfs/faultfs"
	"github.com/stretchr/testify/require"
)

// TestAllocatedSegmentsRealFS: on the real ext4 of /var/tmp, every sync method and
// a set of policies, allocated segments (and recycled files first used as
// allocated segments) read back after close and reopen, and after a
// second round of appends into recycled files.
func TestAllocatedSegmentsRealFS(t *testing.T) {
	base, err := os.MkdirTemp("/var/tmp", "advalloc")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(base) })
	pols := []policy.Policy{
		policy.BufferedInterval(time.Millisecond, time.Millisecond),
		policy.AsyncCommit(time.Millisecond, 0),
		policy.SyncEveryCommit(),
		policy.SyncIntervalPostponed(time.Millisecond, 2*time.Millisecond),
		policy.SyncNever(),
		policy.SyncEveryN(3),
	}
	for _, m := range vfs.SyncMethods() {
		for pi, pol := range pols {
			t.Run(fmt.Sprintf("%v/%s", m, pol), func(t *testing.T) {
				dir := fmt.Sprintf("%s/%d-%d", base, m, pi)
				opts := wal.Options{SegmentSize: 64 << 10, Policy: pol, SyncMethod: m, RecycleSegments: 4}
				l, err := wal.Open(dir, opts)
				if errors.Is(err, vfs.ErrSyncMethodUnsupported) {
					t.Skip(err)
				}
				require.NoError(t, err)
				var want [][]byte
				var lsns []wal.LSN
				add := func(n, id int) {
					for i := range n {
						rec := record(id, i, 1+(i*131)%3000)
						lsn, err := l.Append(rec)
						require.NoError(t, err)
						want = append(want, rec)
						lsns = append(lsns, lsn)
					}
				}
				add(300, 1)
				st := l.Stats().Prepare
				require.NoError(t, l.Close())
				t.Logf("round 1: %+v", st)

				l, err = wal.Open(dir, opts)
				require.NoError(t, err)
				require.True(t, l.Recovered().Clean)
				gl, got := readAll(t, l, 0)
				require.Equal(t, lsns, gl)
				require.True(t, equalRecs(want, got))
				// Recycle: drop all but the last 20 records' segments.
				cut := lsns[len(lsns)-20]
				_, err = l.RemoveBefore(cut)
				require.NoError(t, err)
				add(400, 2)
				st = l.Stats().Prepare
				t.Logf("round 2: %+v", st)
				require.Positive(t, st.Recycled, "a recycled file was reused")
				require.NoError(t, l.Sync())
				require.NoError(t, l.Close())

				l, err = wal.Open(dir, opts)
				require.NoError(t, err)
				defer l.Close()
				require.True(t, l.Recovered().Clean)
				from := l.Recovered().FirstLSN
				gl, got = readAll(t, l, from)
				k := 0
				for k < len(lsns) && lsns[k] < gl[0] {
					k++
				}
				require.Equal(t, lsns[k:], gl)
				require.True(t, equalRecs(want[k:], got))
				// One large batch above the 2 MiB buffer.
				big := [][]byte{bytes.Repeat([]byte{7}, 40<<10)}
				_, err = l.AppendBatchContext(context.Background(), big)
				require.NoError(t, err)
			})
		}
	}
}

func equalRecs(a, b [][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}

// TestAllocatedCountsMatchOS: Stats.Fsyncs, DirSyncs and Prepare.Allocated
// against the system calls counted below the log on the real filesystem,
// under the allocating policies and every sync method.
func TestAllocatedCountsMatchOS(t *testing.T) {
	base, err := os.MkdirTemp("/var/tmp", "advcount")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(base) })
	for _, m := range vfs.SyncMethods() {
		for pi, pol := range []policy.Policy{allocPolicies[0], allocPolicies[1], policy.SyncEveryCommit()} {
			t.Run(fmt.Sprintf("%v/%s", m, pol), func(t *testing.T) {
				var c faultfs.Counter
				opts := wal.Options{FS: faultfs.Inject(vfs.OS(), &c), SegmentSize: 64 << 10, Policy: pol, SyncMethod: m}
				l, err := wal.Open(fmt.Sprintf("%s/%d-%d", base, m, pi), opts)
				if errors.Is(err, vfs.ErrSyncMethodUnsupported) {
					t.Skip(err)
				}
				require.NoError(t, err)
				for i := range 1500 {
					_, err := l.Append(record(1, i, 100))
					require.NoError(t, err)
				}
				require.NoError(t, l.Close())
				st := l.Stats()
				require.Equal(t, c.Count(faultfs.OpSync), int64(st.Fsyncs), "Fsyncs == sync calls")
				require.Equal(t, c.Count(faultfs.OpSyncDir), int64(st.DirSyncs))
				require.Equal(t, c.Count(faultfs.OpAllocate), int64(st.Prepare.Allocated), "%+v", st.Prepare)
				want := uint64(1)
				if m.WriteThrough() {
					want = 0
				} else if pol.Kind() != policy.KindSyncEveryCommit {
					want = st.Prepare.Prepared
				}
				require.Equal(t, want, st.Prepare.Allocated, "%+v", st.Prepare)
				require.Equal(t, (st.Prepare.Prepared-st.Prepare.Allocated)*(64<<10), st.Prepare.PrepareBytes)
			})
		}
	}
}
