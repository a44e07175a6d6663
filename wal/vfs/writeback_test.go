package vfs_test

import (
	"path/filepath"
	"runtime"
	"testing"

	"github.com/durawal/durawal/wal/vfs"
	"github.com/stretchr/testify/require"
)

// TestWriteback: an OS file takes the hint (sync_file_range on Linux) with
// and without waiting, reports the system call's error for a bad range, and
// a file without the method (MemFS) takes it as a no-op.
func TestWriteback(t *testing.T) {
	osfs := vfs.OS()
	f, err := osfs.Create(filepath.Join(t.TempDir(), "f"), vfs.Fdatasync)
	require.NoError(t, err)
	defer f.Close()
	_, err = f.WriteAt(make([]byte, 1<<20), 0)
	require.NoError(t, err)
	require.NoError(t, vfs.Writeback(f, 0, 1<<19, false))
	require.NoError(t, vfs.Writeback(f, 0, 1<<20, true))
	if runtime.GOOS == "linux" {
		err = vfs.Writeback(f, -1, 10, false) // EINVAL: the call was made
		require.Error(t, err)
		require.Contains(t, err.Error(), "sync_file_range")
	}
	mf, err := vfs.NewMem().Create("/m", vfs.Fdatasync)
	require.NoError(t, err)
	_, ok := mf.(vfs.Writebacker)
	require.False(t, ok)
	require.NoError(t, vfs.Writeback(mf, 0, 10, true))
}
