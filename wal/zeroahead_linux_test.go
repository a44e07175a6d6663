//go:build linux

package wal_test

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
	"time"
	"unsafe"

	"github.com/durawal/durawal/policy"
	"github.com/durawal/durawal/wal"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// unwrittenBelow returns how many bytes of f's extents below end are
// unwritten (allocated by fallocate, never written), from the FIEMAP
// ioctl, and false where the filesystem does not report extents.
func unwrittenBelow(t *testing.T, path string, end int64) (int64, bool) {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	const (
		fsIocFiemap      = 0xC020660B // _IOWR('f', 11, struct fiemap)
		fiemapFlagSync   = 0x1
		extentUnwritten  = 0x800
		headerSize       = 32
		extentSize       = 56
		maxExtents       = 512
		extentFlagsField = 40
	)
	buf := make([]byte, headerSize+maxExtents*extentSize)
	binary.LittleEndian.PutUint64(buf[0:], 0)               // fm_start
	binary.LittleEndian.PutUint64(buf[8:], uint64(end))     // fm_length
	binary.LittleEndian.PutUint32(buf[16:], fiemapFlagSync) // fm_flags
	binary.LittleEndian.PutUint32(buf[24:], maxExtents)     // fm_extent_count
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, f.Fd(), fsIocFiemap, uintptr(unsafe.Pointer(&buf[0]))); e != 0 {
		return 0, false
	}
	n := int(binary.LittleEndian.Uint32(buf[20:])) // fm_mapped_extents
	var unwritten int64
	for i := range n {
		e := buf[headerSize+i*extentSize:]
		logical, length := int64(binary.LittleEndian.Uint64(e[0:])), int64(binary.LittleEndian.Uint64(e[16:]))
		if binary.LittleEndian.Uint32(e[extentFlagsField:])&extentUnwritten == 0 || logical >= end {
			continue
		}
		unwritten += min(logical+length, end) - logical
	}
	return unwritten, true
}

// TestZeroAheadConvertsExtents: on the real filesystem, a new log's first
// segment is allocated, its blocks unwritten extents. Where commits sync,
// the zeros written ahead of the frames leave, after a few small durable
// commits, no unwritten extent in the first MiB: the commits' syncs
// converted it once, not each its own blocks. Under a policy that does
// not write zeros ahead (SyncInterval, synced by hand), the blocks past
// the frames are still unwritten after the same commits and sync: the
// control, showing the filesystem does keep unwritten extents.
func TestZeroAheadConvertsExtents(t *testing.T) {
	base := t.TempDir()
	for _, c := range []struct {
		name  string
		pol   policy.Policy
		ahead bool
	}{
		{"sync-every-commit", policy.SyncEveryCommit(), true},
		{"sync-interval", policy.SyncInterval(time.Hour), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(base, c.name)
			l, err := wal.Open(dir, wal.Options{Policy: c.pol, SegmentSize: 4 << 20})
			require.NoError(t, err)
			defer l.Close()
			if l.Stats().Prepare.Allocated == 0 {
				t.Skip("the filesystem cannot allocate")
			}
			for i := range 20 {
				_, err := l.Append(record(1, i, 100))
				require.NoError(t, err)
			}
			require.NoError(t, l.Sync())
			unwritten, ok := unwrittenBelow(t, filepath.Join(dir, "00000000000000000000.wal"), 1<<20)
			if !ok {
				t.Skip("the filesystem does not report extents (FIEMAP)")
			}
			if c.ahead {
				require.Zero(t, unwritten, "bytes of the first MiB still unwritten extents")
				require.Equal(t, uint64(1<<20), l.Stats().Prepare.ZeroedAhead)
			} else {
				require.Greater(t, unwritten, int64(1<<19), "the control: blocks past the frames stay unwritten")
			}
		})
	}
}
