package vfs_test

import (
	"errors"
	"io"
	"io/fs"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/durawal/durawal/wal/vfs"
	"github.com/durawal/durawal/wal/vfs/faultfs"
)

// impls returns every FS implementation with a fresh directory to work in.
func impls() []struct {
	name string
	open func(t *testing.T) (vfs.FS, string)
} {
	return []struct {
		name string
		open func(t *testing.T) (vfs.FS, string)
	}{
		{"OS", func(t *testing.T) (vfs.FS, string) { return vfs.OS(), t.TempDir() }},
		{"Mem", func(t *testing.T) (vfs.FS, string) {
			m := vfs.NewMem()
			require.NoError(t, m.MkdirAll("/data", 0o755))
			require.NoError(t, m.SyncDir("/"))
			return m, "/data"
		}},
		{"InjectCounter", func(t *testing.T) (vfs.FS, string) {
			m := vfs.NewMem()
			require.NoError(t, m.MkdirAll("/data", 0o755))
			require.NoError(t, m.SyncDir("/"))
			return faultfs.Inject(m, &faultfs.Counter{}), "/data"
		}},
	}
}

// TestConformance runs the same checks over every implementation: what one
// FS does, all must do.
func TestConformance(t *testing.T) {
	for _, impl := range impls() {
		t.Run(impl.name, func(t *testing.T) {
			for _, tc := range conformance {
				t.Run(tc.name, func(t *testing.T) {
					fsys, dir := impl.open(t)
					tc.run(t, fsys, dir)
				})
			}
		})
	}
}

var conformance = []struct {
	name string
	run  func(t *testing.T, fsys vfs.FS, dir string)
}{
	{"CreateIsExclusive", func(t *testing.T, fsys vfs.FS, dir string) {
		name := filepath.Join(dir, "a")
		f, err := fsys.Create(name, vfs.Fdatasync)
		require.NoError(t, err)
		require.NoError(t, f.Close())
		_, err = fsys.Create(name, vfs.Fdatasync)
		require.ErrorIs(t, err, fs.ErrExist)
		var pe *fs.PathError
		assert.ErrorAs(t, err, &pe)
	}},
	{"MissingFileIsErrNotExist", func(t *testing.T, fsys vfs.FS, dir string) {
		name := filepath.Join(dir, "missing")
		_, err := fsys.Open(name)
		assert.ErrorIs(t, err, fs.ErrNotExist)
		_, err = fsys.OpenReadWrite(name, vfs.Fdatasync)
		assert.ErrorIs(t, err, fs.ErrNotExist)
		assert.ErrorIs(t, fsys.Remove(name), fs.ErrNotExist)
		assert.ErrorIs(t, fsys.Rename(name, filepath.Join(dir, "b")), fs.ErrNotExist)
		_, err = fsys.Create(filepath.Join(dir, "nodir", "a"), vfs.Fdatasync)
		assert.ErrorIs(t, err, fs.ErrNotExist)
		_, err = fsys.List(filepath.Join(dir, "nodir"))
		assert.ErrorIs(t, err, fs.ErrNotExist)
		assert.ErrorIs(t, fsys.SyncDir(filepath.Join(dir, "nodir")), fs.ErrNotExist)
	}},
	{"WriteReadSizeTruncate", func(t *testing.T, fsys vfs.FS, dir string) {
		f, err := fsys.Create(filepath.Join(dir, "a"), vfs.Fdatasync)
		require.NoError(t, err)
		defer f.Close()

		n, err := f.WriteAt([]byte("hello"), 0)
		require.NoError(t, err)
		require.Equal(t, 5, n)
		n, err = f.WriteAt([]byte("world"), 10) // leaves a gap of zeros
		require.NoError(t, err)
		require.Equal(t, 5, n)
		size, err := f.Size()
		require.NoError(t, err)
		require.EqualValues(t, 15, size)

		buf := make([]byte, 15)
		n, err = f.ReadAt(buf, 0)
		require.NoError(t, err)
		require.Equal(t, 15, n)
		require.Equal(t, []byte("hello\x00\x00\x00\x00\x00world"), buf)

		// Reading past the end: the bytes there and io.EOF.
		n, err = f.ReadAt(buf[:10], 10)
		require.ErrorIs(t, err, io.EOF)
		require.Equal(t, 5, n)
		n, err = f.ReadAt(buf[:1], 15)
		require.ErrorIs(t, err, io.EOF)
		require.Equal(t, 0, n)

		require.NoError(t, f.Truncate(3))
		size, err = f.Size()
		require.NoError(t, err)
		require.EqualValues(t, 3, size)
		require.NoError(t, f.Truncate(6)) // grows with zeros
		n, err = f.ReadAt(buf[:6], 0)
		require.NoError(t, err)
		require.Equal(t, []byte("hel\x00\x00\x00"), buf[:n])
		require.NoError(t, f.Sync())
	}},
	{"OpenIsReadOnlyOpenReadWriteIsNot", func(t *testing.T, fsys vfs.FS, dir string) {
		name := filepath.Join(dir, "a")
		f, err := fsys.Create(name, vfs.Fdatasync)
		require.NoError(t, err)
		_, err = f.WriteAt([]byte("abc"), 0)
		require.NoError(t, err)
		require.NoError(t, f.Close())

		ro, err := fsys.Open(name)
		require.NoError(t, err)
		_, err = ro.WriteAt([]byte("x"), 0)
		require.Error(t, err)
		require.NoError(t, ro.Close())

		rw, err := fsys.OpenReadWrite(name, vfs.Fdatasync)
		require.NoError(t, err)
		_, err = rw.WriteAt([]byte("X"), 1)
		require.NoError(t, err)
		buf := make([]byte, 3)
		_, err = rw.ReadAt(buf, 0)
		require.NoError(t, err)
		require.Equal(t, "aXc", string(buf))
		require.NoError(t, rw.Close())
	}},
	{"RenameReplaces", func(t *testing.T, fsys vfs.FS, dir string) {
		a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
		writeFile(t, fsys, a, "new")
		writeFile(t, fsys, b, "old content")
		require.NoError(t, fsys.Rename(a, b))
		require.Equal(t, "new", readFile(t, fsys, b))
		_, err := fsys.Open(a)
		require.ErrorIs(t, err, fs.ErrNotExist)
		names, err := fsys.List(dir)
		require.NoError(t, err)
		require.Equal(t, []string{"b"}, names)
		require.NoError(t, fsys.SyncDir(dir))
	}},
	{"RenameKeepsOpenFile", func(t *testing.T, fsys vfs.FS, dir string) {
		a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
		f, err := fsys.Create(a, vfs.Fdatasync)
		require.NoError(t, err)
		require.NoError(t, fsys.Rename(a, b))
		_, err = f.WriteAt([]byte("after"), 0)
		require.NoError(t, err)
		require.NoError(t, f.Close())
		require.Equal(t, "after", readFile(t, fsys, b))
	}},
	{"RemoveKeepsOpenFile", func(t *testing.T, fsys vfs.FS, dir string) {
		a := filepath.Join(dir, "a")
		writeFile(t, fsys, a, "data")
		f, err := fsys.Open(a)
		require.NoError(t, err)
		require.NoError(t, fsys.Remove(a))
		buf := make([]byte, 4)
		_, err = f.ReadAt(buf, 0)
		require.NoError(t, err)
		require.Equal(t, "data", string(buf))
		require.NoError(t, f.Close())
		_, err = fsys.Open(a)
		require.ErrorIs(t, err, fs.ErrNotExist)
	}},
	{"ListSortedRegularFilesOnly", func(t *testing.T, fsys vfs.FS, dir string) {
		for _, n := range []string{"c", "a", "b10", "b2"} {
			writeFile(t, fsys, filepath.Join(dir, n), n)
		}
		require.NoError(t, fsys.MkdirAll(filepath.Join(dir, "sub", "deeper"), 0o755))
		writeFile(t, fsys, filepath.Join(dir, "sub", "inner"), "x")
		names, err := fsys.List(dir)
		require.NoError(t, err)
		require.Equal(t, []string{"a", "b10", "b2", "c"}, names)
		names, err = fsys.List(filepath.Join(dir, "sub"))
		require.NoError(t, err)
		require.Equal(t, []string{"inner"}, names)
		require.NoError(t, fsys.SyncDir(filepath.Join(dir, "sub")))
	}},
	{"LockIsExclusive", func(t *testing.T, fsys vfs.FS, dir string) {
		name := filepath.Join(dir, "LOCK")
		l, err := fsys.Lock(name)
		require.NoError(t, err)
		_, err = fsys.Lock(name)
		require.ErrorIs(t, err, vfs.ErrLocked)
		require.NoError(t, l.Close())
		l, err = fsys.Lock(name)
		require.NoError(t, err)
		require.NoError(t, l.Close())
		names, err := fsys.List(dir) // Lock creates the file
		require.NoError(t, err)
		require.Equal(t, []string{"LOCK"}, names)
	}},
	{"ClosedFileFails", func(t *testing.T, fsys vfs.FS, dir string) {
		f, err := fsys.Create(filepath.Join(dir, "a"), vfs.Fdatasync)
		require.NoError(t, err)
		require.NoError(t, f.Close())
		_, err = f.WriteAt([]byte("x"), 0)
		require.ErrorIs(t, err, fs.ErrClosed)
		require.Error(t, f.Close())
	}},
}

func writeFile(t *testing.T, fsys vfs.FS, name, content string) {
	t.Helper()
	f, err := fsys.Create(name, vfs.Fdatasync)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte(content), 0)
	require.NoError(t, err)
	require.NoError(t, f.Sync())
	require.NoError(t, f.Close())
}

// readFile returns name's content, failing the test if it cannot be read.
func readFile(t *testing.T, fsys vfs.FS, name string) string {
	t.Helper()
	s, err := tryReadFile(fsys, name)
	require.NoError(t, err)
	return s
}

func tryReadFile(fsys vfs.FS, name string) (string, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return "", err
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return "", err
	}
	buf := make([]byte, size)
	n, err := f.ReadAt(buf, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return "", err
	}
	return string(buf[:n]), nil
}
