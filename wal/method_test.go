package wal_test

// Sync methods (innodb_flush_method, wal_sync_method): what each counts,
// what O_DIRECT writes, and what happens where a method is refused. The
// crash properties of every method × policy are in crash_test.go,
// policy_crash_test.go and kill_test.go.

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/durawal/durawal/policy"
	"github.com/durawal/durawal/wal"
	"github.com/durawal/durawal/wal/vfs"
	"github.com/durawal/durawal/wal/vfs/faultfs"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// Under O_DSYNC no commit issues a sync, yet every commit is durable when
// Append returns and the synced LSN follows each write (InnoDB O_DSYNC,
// PostgreSQL open_datasync).
func TestWriteThroughNoFsyncs(t *testing.T) {
	for _, m := range []vfs.SyncMethod{vfs.ODsync, vfs.ODirectODsync} {
		for _, pol := range []policy.Policy{policy.SyncEveryCommit(), policy.SyncNever()} {
			t.Run(m.String()+"/"+pol.String(), func(t *testing.T) {
				mem := vfs.NewMem()
				c := &faultfs.Counter{}
				l := openLog(t, faultfs.Inject(mem, c), wal.Options{SyncMethod: m, Policy: pol, SegmentSize: 1 << 20})
				st0, syncs0 := l.Stats(), c.Count(faultfs.OpSync)
				var recs [][]byte
				for i := range 100 {
					rec := record(1, i, 1+i*37%700)
					_, err := l.Append(rec)
					require.NoError(t, err)
					recs = append(recs, rec)
					require.Equal(t, l.AppendedLSN(), l.SyncedLSN(), "commit %d: the write made it durable", i)
				}
				st := l.Stats()
				require.Zero(t, st0.Fsyncs, "Open issued no sync for a new log")
				require.Equal(t, st0.Fsyncs, st.Fsyncs, "Stats.Fsyncs grew with commits")
				require.Equal(t, syncs0, c.Count(faultfs.OpSync), "a commit reached File.Sync")
				require.Equal(t, uint64(100), st.WriteCalls)
				require.Equal(t, m, st.SyncMethod)

				got, err := recoverImage(t, mem.PowerLoss(vfs.DropAll()), logDir, wal.Options{SegmentSize: 1 << 20})
				require.NoError(t, err)
				require.Equal(t, recs, got.recs, "every commit survives a power loss without a sync")
				require.NoError(t, l.Close())
			})
		}
	}
}

// Fsync syncs with fsync and counts it like fdatasync.
func TestFsyncMethodSyncs(t *testing.T) {
	mem := vfs.NewMem()
	l := openLog(t, mem, wal.Options{SyncMethod: vfs.Fsync})
	before := l.Stats().Fsyncs
	for i := range 10 {
		_, err := l.Append(record(1, i, 100))
		require.NoError(t, err)
	}
	require.Equal(t, before+10, l.Stats().Fsyncs)
	require.NoError(t, l.Close())
}

// O_DIRECT pads each write to whole blocks and counts the padding apart
// from the frame bytes; a write that completes a block is a full-block
// write, one that only extends the last block a partial one.
func TestDirectIOCounters(t *testing.T) {
	for _, align := range []int{512, 4096} {
		mem := vfs.NewMem()
		mem.SetDirectIOAlignment(align)
		const segSize = 1 << 20
		l := openLog(t, mem, wal.Options{SyncMethod: vfs.ODirect, SegmentSize: segSize})
		var frames, padding, full, partial uint64
		off := int64(segHeader) // the segment header
		for i := range 200 {
			rec := record(2, i, 1+i*53%1500)
			_, err := l.Append(rec)
			require.NoError(t, err)
			n := int64(frameSize(len(rec)))
			end := off + n
			frames += uint64(n)
			padding += uint64((end+int64(align)-1)/int64(align)*int64(align) - end)
			if end/int64(align) > off/int64(align) {
				full++
			} else {
				partial++
			}
			off = end
		}
		st := l.Stats()
		require.Equal(t, frames, st.BytesWritten, "BytesWritten excludes the padding")
		require.Equal(t, padding, st.PaddingBytes)
		require.Equal(t, full, st.FullBlockWrites)
		require.Equal(t, partial, st.PartialBlockWrites)
		require.Equal(t, align, st.DirectIOAlignment)
		require.Equal(t, "MemFS", st.DirectIOAlignmentSource)
		require.NoError(t, l.Close())

		// The padding is invisible: buffered I/O reopens it, and the zeros
		// after the last frame still end the log.
		got, err := recoverImage(t, mem, logDir, wal.Options{SegmentSize: segSize})
		require.NoError(t, err)
		require.Len(t, got.recs, 200)
		require.Zero(t, got.info.TornBytes)
	}
}

// A segment written with a size that is not a multiple of the direct-I/O
// alignment reopens under O_DIRECT: its unaligned end is left unused (the
// next frame rolls), and a torn tail reaching into it is zeroed through
// buffered I/O.
func TestDirectIOReopensUnalignedSegment(t *testing.T) {
	mem := vfs.NewMem()
	mem.SetDirectIOAlignment(4096)
	const oldSize = 8200 // a multiple of 8, not of 4096
	l := openLog(t, mem, wal.Options{SegmentSize: oldSize})
	var recs [][]byte
	for i := range 7 {
		rec := record(3, i, 1100)
		_, err := l.Append(rec)
		require.NoError(t, err)
		recs = append(recs, rec)
	}
	require.NoError(t, l.Close())
	seg := segments(t, mem)[0]
	b := fileBytes(t, mem, seg)
	end := segHeader + 7*frameSize(1100)
	require.Less(t, end, 8192, "the frames end inside the aligned part")
	for i := 8196; i < oldSize; i++ {
		b[i] = 0xee // unsynced garbage past the frames: a torn tail
	}
	setFile(t, mem, seg, b)

	opts := wal.Options{SyncMethod: vfs.ODirect, SegmentSize: 8192}
	l = openLog(t, mem, opts)
	require.Equal(t, int64(oldSize-end), l.Recovered().TornBytes)
	for i := 7; i < 12; i++ {
		rec := record(3, i, 1100)
		_, err := l.Append(rec)
		require.NoError(t, err)
		recs = append(recs, rec)
	}
	require.NoError(t, l.Close())
	require.Len(t, segments(t, mem), 2, "the frame that did not fit the aligned part rolled")
	for _, m := range []vfs.SyncMethod{vfs.ODirect, vfs.Fdatasync} {
		opts.SyncMethod = m
		got, err := recoverImage(t, mem, logDir, opts)
		require.NoError(t, err, "%v", m)
		require.Equal(t, recs, got.recs, "%v", m)
		require.Zero(t, got.info.TornBytes, "%v", m)
	}
}

// SegmentSize must be a multiple of the direct-I/O alignment.
func TestDirectIOSegmentSizeAlignment(t *testing.T) {
	mem := vfs.NewMem()
	mem.SetDirectIOAlignment(4096)
	_, err := wal.Open(logDir, wal.Options{FS: mem, SyncMethod: vfs.ODirect, SegmentSize: 6144})
	require.ErrorIs(t, err, wal.ErrInvalidOptions)
	names, err := mem.List(logDir)
	require.NoError(t, err)
	require.Equal(t, []string{"LOCK"}, names, "no temporary segment left behind")
}

// Where the filesystem refuses O_DIRECT, Open fails with a clear error, or
// falls back to the same durability without direct I/O if asked, and says
// so in Stats.
func TestSyncMethodRefused(t *testing.T) {
	refusing := map[string]func() (vfs.FS, *vfs.MemFS){
		"inject-EINVAL": func() (vfs.FS, *vfs.MemFS) {
			mem := vfs.NewMem()
			return faultfs.Inject(mem, faultfs.RefuseDirectIO()), mem
		},
		"memfs-without-direct-io": func() (vfs.FS, *vfs.MemFS) {
			mem := vfs.NewMem()
			mem.SetDirectIOAlignment(0)
			return mem, mem
		},
	}
	for name, mk := range refusing {
		for _, m := range []vfs.SyncMethod{vfs.ODirect, vfs.ODirectODsync} {
			t.Run(name+"/"+m.String(), func(t *testing.T) {
				fsys, mem := mk()
				_, err := wal.Open(logDir, wal.Options{FS: fsys, SyncMethod: m, SegmentSize: testSegmentSize})
				require.ErrorIs(t, err, wal.ErrSyncMethodUnsupported)
				require.ErrorIs(t, err, syscall.EINVAL)
				require.Contains(t, err.Error(), m.String())
				require.Contains(t, err.Error(), logDir)
				names, lerr := mem.List(logDir)
				require.NoError(t, lerr)
				require.Equal(t, []string{"LOCK"}, names, "nothing created")

				l, err := wal.Open(logDir, wal.Options{FS: fsys, SyncMethod: m, SegmentSize: testSegmentSize, AllowSyncMethodFallback: true})
				require.NoError(t, err)
				st := l.Stats()
				require.True(t, st.SyncMethodFallback)
				require.Equal(t, m.WithoutDirect(), st.SyncMethod, "the fallback keeps the durability")
				require.Equal(t, 1, st.DirectIOAlignment)
				_, err = l.Append(record(4, 0, 100))
				require.NoError(t, err)
				require.NoError(t, l.Close())

				// An existing log is refused at its last segment just the same.
				_, err = wal.Open(logDir, wal.Options{FS: fsys, SyncMethod: m, SegmentSize: testSegmentSize})
				require.ErrorIs(t, err, wal.ErrSyncMethodUnsupported)
			})
		}
	}
}

// A real tmpfs: older kernels refuse O_DIRECT there (EINVAL); since Linux
// 6.6 tmpfs accepts it. Either way Open must say what happened.
func TestSyncMethodTmpfs(t *testing.T) {
	var st unix.Statfs_t
	if err := unix.Statfs("/dev/shm", &st); err != nil || st.Type != unix.TMPFS_MAGIC {
		t.Skip("no tmpfs at /dev/shm")
	}
	dir, err := os.MkdirTemp("/dev/shm", "durawal-test-")
	require.NoError(t, err)
	defer os.RemoveAll(dir)
	l, err := wal.Open(filepath.Join(dir, "log"), wal.Options{SyncMethod: vfs.ODirect, SegmentSize: testSegmentSize})
	if err == nil {
		t.Logf("this kernel's tmpfs accepts O_DIRECT (alignment %d from %s); nothing to refuse",
			l.Stats().DirectIOAlignment, l.Stats().DirectIOAlignmentSource)
		_, err = l.Append(record(5, 0, 100))
		require.NoError(t, err)
		require.NoError(t, l.Close())
		return
	}
	require.ErrorIs(t, err, wal.ErrSyncMethodUnsupported)
	require.True(t, strings.Contains(err.Error(), "tmpfs"), "the error names the filesystem: %v", err)
}

// Options.SyncMethod must be a defined method.
func TestSyncMethodInvalid(t *testing.T) {
	_, err := wal.Open(logDir, wal.Options{FS: vfs.NewMem(), SyncMethod: vfs.SyncMethod(99)})
	require.ErrorIs(t, err, wal.ErrInvalidOptions)
}

// Every method works on the real filesystem of the test directory (O_DIRECT
// is skipped with the reason if it refuses it), and a log written with one
// reopens with every other.
func TestSyncMethodsOS(t *testing.T) {
	dir := t.TempDir()
	var recs [][]byte
	for i, m := range vfs.SyncMethods() {
		l, err := wal.Open(dir, wal.Options{SyncMethod: m, SegmentSize: 16 << 10})
		if m.Direct() && err != nil {
			require.ErrorIs(t, err, wal.ErrSyncMethodUnsupported)
			t.Logf("skipping %v: %v", m, err)
			continue
		}
		require.NoError(t, err, "%v", m)
		st := l.Stats()
		if m.Direct() {
			require.Greater(t, st.DirectIOAlignment, 1)
			t.Logf("%v: alignment %d from %s", m, st.DirectIOAlignment, st.DirectIOAlignmentSource)
		}
		got, err := l.NewReader(0)
		require.NoError(t, err)
		n := 0
		for {
			_, rec, err := got.Next()
			if err != nil {
				break
			}
			require.Equal(t, recs[n], rec, "%v: record %d", m, n)
			n++
		}
		got.Close()
		require.Equal(t, len(recs), n, "%v reads what the earlier methods wrote", m)
		for j := range 150 { // rolls a 16 KiB segment
			rec := record(10+i, j, 1+j*71%400)
			_, err := l.Append(rec)
			require.NoError(t, err)
			recs = append(recs, rec)
		}
		require.NoError(t, l.Close())
	}
}
