//go:build unix

package vfs_test

import (
	"errors"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"

	"github.com/durawal/durawal/wal/vfs"
	"github.com/durawal/durawal/wal/vfs/faultfs"
	"github.com/stretchr/testify/require"
)

// TestAllocateOS: on Linux an OS file grows to the size asked for with its
// blocks reserved (st_blocks covers them, unlike a Truncate that grows it
// sparse), reads as zeros, keeps bytes written before, and is never
// shrunk; elsewhere Allocate says it is unsupported.
func TestAllocateOS(t *testing.T) {
	dir := t.TempDir()
	f, err := vfs.OS().Create(filepath.Join(dir, "f"), vfs.Fdatasync)
	require.NoError(t, err)
	defer f.Close()
	_, err = f.WriteAt([]byte("head"), 0)
	require.NoError(t, err)
	const size = 1 << 20
	err = vfs.Allocate(f, size)
	if runtime.GOOS != "linux" {
		require.ErrorIs(t, err, errors.ErrUnsupported)
		return
	}
	if errors.Is(err, errors.ErrUnsupported) {
		t.Skipf("the filesystem of %s cannot allocate: %v", dir, err)
	}
	require.NoError(t, err)
	n, err := f.Size()
	require.NoError(t, err)
	require.Equal(t, int64(size), n)
	var st syscall.Stat_t
	require.NoError(t, syscall.Stat(filepath.Join(dir, "f"), &st))
	require.GreaterOrEqual(t, st.Blocks*512, int64(size), "the blocks are reserved, not a hole")
	got := make([]byte, size)
	_, err = f.ReadAt(got, 0)
	require.NoError(t, err)
	require.Equal(t, "head", string(got[:4]))
	require.Equal(t, make([]byte, size-4), got[4:], "allocated bytes read as zeros")
	require.NoError(t, vfs.Allocate(f, 10), "a smaller size is not an error")
	n, err = f.Size()
	require.NoError(t, err)
	require.Equal(t, int64(size), n, "and does not shrink the file")
	require.Error(t, vfs.Allocate(f, -1), "a negative size is the system call's EINVAL")
}

// TestAllocateMem: a MemFS file grows to zeros, durable only once synced (a
// power loss before the sync keeps the old size); an injected rule sees it
// as OpAllocate with the size as Offset and can fail it with ENOSPC; a file
// without the method reports errors.ErrUnsupported.
func TestAllocateMem(t *testing.T) {
	mem := vfs.NewMem()
	require.NoError(t, mem.MkdirAll("/d", 0o755))
	f, err := mem.Create("/d/f", vfs.Fdatasync)
	require.NoError(t, err)
	require.NoError(t, mem.SyncDir("/"))
	require.NoError(t, mem.SyncDir("/d"))
	_, err = f.WriteAt([]byte("head"), 0)
	require.NoError(t, err)
	require.NoError(t, f.Sync())
	require.NoError(t, vfs.Allocate(f, 100))
	n, err := f.Size()
	require.NoError(t, err)
	require.Equal(t, int64(100), n)

	img := mem.PowerLoss(vfs.DropAll())
	g, err := img.Open("/d/f")
	require.NoError(t, err)
	n, err = g.Size()
	require.NoError(t, err)
	require.Equal(t, int64(4), n, "an allocation is not durable before a sync")
	require.NoError(t, f.Sync())
	g, err = mem.PowerLoss(vfs.DropAll()).Open("/d/f")
	require.NoError(t, err)
	n, err = g.Size()
	require.NoError(t, err)
	require.Equal(t, int64(100), n, "after the sync it is")

	var seen []faultfs.Op
	inj := faultfs.Inject(mem, faultfs.InjectorFunc(func(op faultfs.Op) error {
		if op.Kind == faultfs.OpAllocate {
			seen = append(seen, op)
			return syscall.ENOSPC
		}
		return nil
	}))
	h, err := inj.OpenReadWrite("/d/f", vfs.Fdatasync)
	require.NoError(t, err)
	err = vfs.Allocate(h, 200)
	require.ErrorIs(t, err, syscall.ENOSPC)
	require.Len(t, seen, 1)
	require.Equal(t, int64(200), seen[0].Offset)
	require.Equal(t, "allocate", seen[0].Kind.String())

	err = vfs.Allocate(noAlloc{f}, 10)
	require.ErrorIs(t, err, errors.ErrUnsupported)
}

// noAlloc hides a file's Allocate method.
type noAlloc struct{ vfs.File }
