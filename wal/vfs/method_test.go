package vfs_test

import (
	"io/fs"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/durawal/durawal/wal/vfs"
	"github.com/durawal/durawal/wal/vfs/faultfs"
	"github.com/stretchr/testify/require"
)

func TestSyncMethodNames(t *testing.T) {
	for _, m := range vfs.SyncMethods() {
		got, err := vfs.ParseSyncMethod(m.String())
		require.NoError(t, err)
		require.Equal(t, m, got)
		require.True(t, m.Valid())
		require.False(t, m.WithoutDirect().Direct())
		require.Equal(t, m.WriteThrough(), m.WithoutDirect().WriteThrough(), "dropping O_DIRECT keeps the durability")
	}
	m, err := vfs.ParseSyncMethod("o_direct+o_dsync")
	require.NoError(t, err)
	require.Equal(t, vfs.ODirectODsync, m)
	_, err = vfs.ParseSyncMethod("nosync")
	require.Error(t, err)
	require.Equal(t, vfs.Fdatasync, vfs.SyncMethod(0), "the zero value is the default")
}

// MemFS fails misaligned direct I/O with EINVAL (offset, length and buffer
// address), so a caller that gets it wrong cannot pass a test.
func TestMemDirectIOAlignment(t *testing.T) {
	for _, align := range []int{512, 4096} {
		mem := vfs.NewMem()
		mem.SetDirectIOAlignment(align)
		f, err := mem.Create("/a", vfs.ODirect)
		require.NoError(t, err)
		require.Equal(t, align, f.Alignment())
		require.Equal(t, "MemFS", vfs.AlignmentSource(f))
		buf := make([]byte, 3*align)
		off := 0
		for uintptr(unsafeAddr(buf[off:]))%uintptr(align) != 0 {
			off++
		}
		aligned := buf[off : off+align]
		_, err = f.WriteAt(aligned, 0)
		require.NoError(t, err)
		for _, bad := range []struct {
			p   []byte
			off int64
		}{
			{aligned, 8},                  // offset
			{buf[off : off+align-8], 0},   // length
			{buf[off+8 : off+8+align], 0}, // address
		} {
			_, err := f.WriteAt(bad.p, bad.off)
			require.ErrorIs(t, err, syscall.EINVAL)
			_, err = f.ReadAt(bad.p, bad.off)
			require.ErrorIs(t, err, syscall.EINVAL)
		}
		b, err := mem.Create("/b", vfs.Fdatasync)
		require.NoError(t, err)
		require.Equal(t, 1, b.Alignment())
		_, err = b.WriteAt([]byte("x"), 3)
		require.NoError(t, err, "buffered I/O has no alignment rule")
	}
	mem := vfs.NewMem()
	mem.SetDirectIOAlignment(0)
	_, err := mem.Create("/a", vfs.ODirect)
	require.ErrorIs(t, err, syscall.EINVAL)
	require.ErrorIs(t, err, vfs.ErrSyncMethodUnsupported)
	_, err = mem.Open("/a")
	require.ErrorIs(t, err, fs.ErrNotExist, "a refused create leaves nothing")
}

// An O_DSYNC write is durable when it returns; a buffered or O_DIRECT one
// only after Sync.
func TestMemWriteThroughDurable(t *testing.T) {
	for _, m := range vfs.SyncMethods() {
		mem := vfs.NewMem()
		f, err := mem.Create("/a", m)
		require.NoError(t, err)
		require.NoError(t, mem.SyncDir("/"))
		p := make([]byte, 4096)
		for i := range p {
			p[i] = byte(i) | 1
		}
		want := append([]byte(nil), p...)
		p = alignedCopy(p, 4096)
		_, err = f.WriteAt(p, 4096)
		require.NoError(t, err)
		img := mem.PowerLoss(vfs.DropAll())
		g, err := img.Open("/a")
		require.NoError(t, err)
		size, err := g.Size()
		require.NoError(t, err)
		if m.WriteThrough() {
			require.Equal(t, int64(8192), size, "%v", m)
			got := make([]byte, 4096)
			_, err = g.ReadAt(got, 4096)
			require.NoError(t, err)
			require.Equal(t, want, got, "%v", m)
		} else {
			require.Zero(t, size, "%v: nothing durable before Sync", m)
		}
	}
}

func TestRefuseDirectIO(t *testing.T) {
	mem := vfs.NewMem()
	fsys := faultfs.Inject(mem, faultfs.RefuseDirectIO())
	_, err := fsys.Create("/a", vfs.ODirect)
	require.ErrorIs(t, err, syscall.EINVAL)
	_, err = mem.Open("/a")
	require.ErrorIs(t, err, fs.ErrNotExist)
	f, err := fsys.Create("/a", vfs.ODsync)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	_, err = fsys.OpenReadWrite("/a", vfs.ODirectODsync)
	require.ErrorIs(t, err, syscall.EINVAL)
}

// OS opens every method on the test directory's filesystem, or refuses a
// direct one with ErrSyncMethodUnsupported naming the filesystem.
func TestOSSyncMethods(t *testing.T) {
	dir := t.TempDir()
	for _, m := range vfs.SyncMethods() {
		f, err := vfs.OS().Create(filepath.Join(dir, m.String()), m)
		if m.Direct() && err != nil {
			require.ErrorIs(t, err, vfs.ErrSyncMethodUnsupported)
			t.Logf("%v refused: %v", m, err)
			continue
		}
		require.NoError(t, err, "%v", m)
		a := f.Alignment()
		if !m.Direct() {
			require.Equal(t, 1, a)
			require.Equal(t, "none", vfs.AlignmentSource(f))
			_, err = f.WriteAt([]byte("hello"), 0)
		} else {
			require.Greater(t, a, 1)
			require.Zero(t, a&(a-1), "a power of two")
			t.Logf("%v: alignment %d from %s", m, a, vfs.AlignmentSource(f))
			_, err = f.WriteAt(alignedCopy(make([]byte, a), a), 0)
		}
		require.NoError(t, err, "%v", m)
		require.NoError(t, f.Sync(), "%v", m)
		require.NoError(t, f.Close())
	}
}
