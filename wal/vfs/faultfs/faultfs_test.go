package faultfs_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/durawal/durawal/wal/vfs"
	"github.com/durawal/durawal/wal/vfs/faultfs"
)

const dir = "/db"

// newMem returns a MemFS holding the directory dir, its entry durable.
func newMem(t *testing.T) *vfs.MemFS {
	t.Helper()
	m := vfs.NewMem()
	require.NoError(t, m.MkdirAll(dir, 0o755))
	require.NoError(t, m.SyncDir("/"))
	return m
}

// recorder is an Injector that remembers every Op it saw.
type recorder struct{ ops []faultfs.Op }

func (r *recorder) MaybeError(op faultfs.Op) error { r.ops = append(r.ops, op); return nil }

func TestInjectReportsOps(t *testing.T) {
	rec := &recorder{}
	fsys := faultfs.Inject(newMem(t), rec)
	f, err := fsys.Create(dir+"/a", vfs.Fdatasync)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte("abcd"), 10)
	require.NoError(t, err)
	_, err = f.ReadAt(make([]byte, 2), 11)
	require.NoError(t, err)
	require.NoError(t, f.Truncate(7))
	require.NoError(t, f.Sync())
	require.NoError(t, f.Close())
	require.NoError(t, fsys.Rename(dir+"/a", dir+"/b"))
	require.NoError(t, fsys.SyncDir(dir))

	want := []faultfs.Op{
		{Kind: faultfs.OpCreate, Path: dir + "/a", Index: 1},
		{Kind: faultfs.OpWrite, Path: dir + "/a", Offset: 10, Len: 4, Index: 2},
		{Kind: faultfs.OpRead, Path: dir + "/a", Offset: 11, Len: 2, Index: 3},
		{Kind: faultfs.OpTruncate, Path: dir + "/a", Offset: 7, Index: 4},
		{Kind: faultfs.OpSync, Path: dir + "/a", Index: 5},
		{Kind: faultfs.OpClose, Path: dir + "/a", Index: 6},
		{Kind: faultfs.OpRename, Path: dir + "/a", Index: 7},
		{Kind: faultfs.OpSyncDir, Path: dir, Index: 8},
	}
	assert.Equal(t, want, rec.ops)
}

// observer answers MaybeError from answer and records, in order, the index
// of each operation it was asked about ("?N") and of each it heard had
// finished ("N").
type observer struct {
	answer func(faultfs.Op) error
	events []string
}

func (o *observer) MaybeError(op faultfs.Op) error {
	o.events = append(o.events, fmt.Sprintf("?%d", op.Index))
	return o.answer(op)
}

func (o *observer) Finished(op faultfs.Op) { o.events = append(o.events, fmt.Sprint(op.Index)) }

// TestTrackerHearsEveryOperationThatRan: Finished follows each operation
// let run, a short write included, once it has returned; a failed one,
// and a Close that MaybeError refused, get none.
func TestTrackerHearsEveryOperationThatRan(t *testing.T) {
	m := newMem(t)
	o := &observer{answer: func(op faultfs.Op) error {
		switch op.Index {
		case 3:
			return &faultfs.ShortOp{Keep: 1}
		case 4, 6:
			return faultfs.ErrInjected
		}
		return nil
	}}
	fsys := faultfs.Inject(m, o)
	f, err := fsys.Create(dir+"/a", vfs.Fdatasync) // 1
	require.NoError(t, err)
	_, err = f.WriteAt([]byte("ab"), 0) // 2
	require.NoError(t, err)
	n, err := f.WriteAt([]byte("cd"), 2) // 3: short
	require.ErrorIs(t, err, io.ErrShortWrite)
	require.Equal(t, 1, n)
	require.ErrorIs(t, f.Sync(), faultfs.ErrInjected) // 4: refused
	_, err = f.ReadAt(make([]byte, 3), 0)             // 5
	require.NoError(t, err)
	require.ErrorIs(t, f.Close(), faultfs.ErrInjected) // 6: refused, the file closed anyway
	assert.Equal(t, []string{"?1", "1", "?2", "2", "?3", "3", "?4", "?5", "5", "?6"}, o.events)
}

// TestAnyAndCountedPassFinishedOn: a Tracker inside Any hears Finished
// for every operation it let run: after the operation for one that ran
// (a short write another injector asked for included), at once for one
// another injector failed, never for one it failed itself. Counted passes
// Finished on too.
func TestAnyAndCountedPassFinishedOn(t *testing.T) {
	o := &observer{answer: func(op faultfs.Op) error {
		if op.Index == 5 {
			return faultfs.ErrInjected
		}
		return nil
	}}
	other := faultfs.InjectorFunc(func(op faultfs.Op) error {
		switch op.Index {
		case 3:
			return &faultfs.ShortOp{Keep: 1}
		case 4:
			return syscall.EIO
		}
		return nil
	})
	fsys := faultfs.Inject(newMem(t), faultfs.Counted(faultfs.Any(o, other)))
	f, err := fsys.Create(dir+"/a", vfs.Fdatasync) // 1
	require.NoError(t, err)
	_, err = f.WriteAt([]byte("ab"), 0) // 2
	require.NoError(t, err)
	_, err = f.WriteAt([]byte("cd"), 2) // 3: short, by the other injector
	require.ErrorIs(t, err, io.ErrShortWrite)
	require.ErrorIs(t, f.Sync(), syscall.EIO)                  // 4: failed by the other injector
	require.ErrorIs(t, fsys.SyncDir(dir), faultfs.ErrInjected) // 5: failed by o itself
	_, err = f.ReadAt(make([]byte, 3), 0)                      // 6
	require.NoError(t, err)
	assert.Equal(t, []string{"?1", "1", "?2", "2", "?3", "3", "?4", "4", "?5", "?6", "6"}, o.events)
}

func TestOpKindString(t *testing.T) {
	assert.Equal(t, "write", faultfs.OpWrite.String())
	assert.Equal(t, "openreadwrite", faultfs.OpOpenReadWrite.String())
	assert.Equal(t, "close", faultfs.OpClose.String())
	assert.Equal(t, "OpKind(99)", faultfs.OpKind(99).String())
}

func TestOnIndexFailsThatOpOnly(t *testing.T) {
	m := newMem(t)
	fsys := faultfs.Inject(m, faultfs.OnIndex(2, faultfs.ErrInjected))
	f, err := fsys.Create(dir+"/a", vfs.Fdatasync) // op 1
	require.NoError(t, err)
	n, err := f.WriteAt([]byte("x"), 0) // op 2
	require.ErrorIs(t, err, faultfs.ErrInjected)
	assert.Zero(t, n)
	var pe *fs.PathError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, "write", pe.Op)
	assert.Equal(t, dir+"/a", pe.Path)
	assert.Equal(t, "", readFile(t, m, dir+"/a"), "the failed write was skipped")
	_, err = f.WriteAt([]byte("y"), 0) // op 3
	require.NoError(t, err)
}

func TestOnKindFailsEveryOpOfThatKind(t *testing.T) {
	m := newMem(t)
	fsys := faultfs.Inject(m, faultfs.OnKind(faultfs.OpSync, syscall.EIO))
	f, err := fsys.Create(dir+"/a", vfs.Fdatasync)
	require.NoError(t, err)
	for range 3 {
		require.ErrorIs(t, f.Sync(), syscall.EIO)
	}
	require.NoError(t, fsys.SyncDir(dir))
	assert.Zero(t, m.SyncCount(), "the syncs never reached the MemFS")
}

func TestNthFailsOnlyTheNthOfItsKind(t *testing.T) {
	fsys := faultfs.Inject(newMem(t), faultfs.Nth(faultfs.OpWrite, 3, syscall.EIO))
	f, err := fsys.Create(dir+"/a", vfs.Fdatasync)
	require.NoError(t, err)
	var errs []error
	for i := range 5 {
		require.NoError(t, f.Sync()) // other kinds do not count
		_, err := f.WriteAt([]byte{'a' + byte(i)}, int64(i))
		errs = append(errs, err)
	}
	assert.NoError(t, errs[0])
	assert.NoError(t, errs[1])
	assert.ErrorIs(t, errs[2], syscall.EIO)
	assert.NoError(t, errs[3])
	assert.NoError(t, errs[4])
}

func TestAnyAndCounted(t *testing.T) {
	c := &faultfs.Counter{}
	boom := faultfs.Counted(faultfs.OnKind(faultfs.OpRemove, faultfs.ErrInjected))
	fsys := faultfs.Inject(newMem(t), faultfs.Any(boom, c))
	writeFile(t, fsys, dir+"/a", "x")
	err := fsys.Remove(dir + "/a")
	require.ErrorIs(t, err, faultfs.ErrInjected)
	assert.EqualValues(t, 1, boom.Fired())
	assert.EqualValues(t, 1, c.Count(faultfs.OpRemove), "Any asks every injector")
	assert.EqualValues(t, 5, c.Total()) // create, write, sync, close, remove
	_, err = fsys.List(dir)
	require.NoError(t, err)
	assert.EqualValues(t, 1, boom.Fired())
}

func TestPathErrorIsNotWrappedTwice(t *testing.T) {
	pe := &fs.PathError{Op: "custom", Path: "p", Err: syscall.EIO}
	fsys := faultfs.Inject(newMem(t), faultfs.OnKind(faultfs.OpCreate, pe))
	_, err := fsys.Create(dir+"/a", vfs.Fdatasync)
	assert.Same(t, pe, err)
}

func TestNoSpaceAfter(t *testing.T) {
	m := newMem(t)
	fsys := faultfs.Inject(m, faultfs.NoSpaceAfter(10))
	f, err := fsys.Create(dir+"/a", vfs.Fdatasync)
	require.NoError(t, err)
	n, err := f.WriteAt([]byte("123456"), 0)
	require.NoError(t, err)
	assert.Equal(t, 6, n)
	n, err = f.WriteAt([]byte("abcdefgh"), 6)
	require.ErrorIs(t, err, syscall.ENOSPC)
	assert.Equal(t, 4, n, "the bytes that fit are written")
	assert.Equal(t, "123456abcd", readFile(t, m, dir+"/a"))
	n, err = f.WriteAt([]byte("z"), 10)
	require.ErrorIs(t, err, syscall.ENOSPC)
	assert.Zero(t, n)
	g, err := fsys.Create(dir+"/b", vfs.Fdatasync) // the limit is for the whole FS
	require.NoError(t, err)
	_, err = g.WriteAt([]byte("z"), 0)
	require.ErrorIs(t, err, syscall.ENOSPC)
	require.NoError(t, f.Sync(), "syncs are unaffected")
}

func TestShortWriteOnNth(t *testing.T) {
	m := newMem(t)
	fsys := faultfs.Inject(m, faultfs.ShortWriteOnNth(2, 3, syscall.EIO))
	f, err := fsys.Create(dir+"/a", vfs.Fdatasync)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte("first|"), 0)
	require.NoError(t, err)
	n, err := f.WriteAt([]byte("second"), 6)
	require.ErrorIs(t, err, syscall.EIO)
	assert.Equal(t, 3, n)
	assert.Equal(t, "first|sec", readFile(t, m, dir+"/a"))

	// With a nil error the short write still reports one.
	fsys = faultfs.Inject(m, faultfs.ShortWriteOnNth(1, 2, nil))
	g, err := fsys.OpenReadWrite(dir+"/a", vfs.Fdatasync)
	require.NoError(t, err)
	n, err = g.WriteAt([]byte("XYZ"), 0)
	require.ErrorIs(t, err, io.ErrShortWrite)
	assert.Equal(t, 2, n)
}

func TestShortReadOnNth(t *testing.T) {
	m := newMem(t)
	writeFile(t, m, dir+"/a", "0123456789")
	fsys := faultfs.Inject(m, faultfs.ShortReadOnNth(2, 4))
	f, err := fsys.Open(dir + "/a")
	require.NoError(t, err)
	buf := make([]byte, 8)
	n, err := f.ReadAt(buf, 0)
	require.NoError(t, err)
	assert.Equal(t, 8, n)
	clear(buf)
	n, err = f.ReadAt(buf, 1)
	require.ErrorIs(t, err, io.ErrUnexpectedEOF)
	assert.Equal(t, 4, n)
	assert.Equal(t, []byte("1234\x00\x00\x00\x00"), buf)
	n, err = f.ReadAt(buf, 2)
	require.NoError(t, err)
	assert.Equal(t, 8, n)
}

func TestShortOpOnOtherKindsFails(t *testing.T) {
	fsys := faultfs.Inject(newMem(t), faultfs.OnKind(faultfs.OpCreate, &faultfs.ShortOp{Keep: 1}))
	_, err := fsys.Create(dir+"/a", vfs.Fdatasync)
	require.ErrorIs(t, err, faultfs.ErrInjected)
}

func TestEINTRIsPassedThrough(t *testing.T) {
	m := newMem(t)
	fsys := faultfs.Inject(m, faultfs.Nth(faultfs.OpSync, 1, syscall.EINTR))
	f, err := fsys.Create(dir+"/a", vfs.Fdatasync)
	require.NoError(t, err)
	require.ErrorIs(t, f.Sync(), syscall.EINTR, "Inject does not retry")
	require.NoError(t, f.Sync())
	assert.EqualValues(t, 1, m.SyncCount())
}

func TestInjectedCloseStillCloses(t *testing.T) {
	fsys := faultfs.Inject(newMem(t), faultfs.OnKind(faultfs.OpClose, syscall.EIO))
	f, err := fsys.Create(dir+"/a", vfs.Fdatasync)
	require.NoError(t, err)
	require.ErrorIs(t, f.Close(), syscall.EIO)
	_, err = f.WriteAt([]byte("x"), 0)
	require.ErrorIs(t, err, fs.ErrClosed)
}

func TestCounterOnOSCountsSyncs(t *testing.T) {
	c := &faultfs.Counter{}
	fsys := faultfs.Inject(vfs.OS(), c)
	d := t.TempDir()
	f, err := fsys.Create(filepath.Join(d, "a"), vfs.Fdatasync)
	require.NoError(t, err)
	const syncs = 7
	for i := range syncs {
		_, err := f.WriteAt(bytes.Repeat([]byte{byte(i)}, 100), int64(i*100))
		require.NoError(t, err)
		require.NoError(t, f.Sync())
	}
	require.NoError(t, fsys.SyncDir(d))
	require.NoError(t, f.Close())
	assert.EqualValues(t, syncs, c.Count(faultfs.OpSync))
	assert.EqualValues(t, syncs, c.Count(faultfs.OpWrite))
	assert.EqualValues(t, 1, c.Count(faultfs.OpSyncDir))
	assert.EqualValues(t, 1, c.Count(faultfs.OpCreate))
	assert.Zero(t, c.Count(faultfs.OpRead))
	assert.Zero(t, c.Count(faultfs.OpKind(0)))
}

func TestMemFSSyncFailurePassesThroughInject(t *testing.T) {
	m := newMem(t)
	fsys := faultfs.Inject(m, &faultfs.Counter{})
	f, err := fsys.Create(dir+"/a", vfs.Fdatasync)
	require.NoError(t, err)
	m.FailNextSync(syscall.EIO)
	err = f.Sync()
	require.ErrorIs(t, err, syscall.EIO)
	require.False(t, errors.Is(err, faultfs.ErrInjected))
}

// readFile returns the whole content of name in fsys.
func readFile(t *testing.T, fsys vfs.FS, name string) string {
	t.Helper()
	f, err := fsys.Open(name)
	require.NoError(t, err)
	defer f.Close()
	size, err := f.Size()
	require.NoError(t, err)
	buf := make([]byte, size)
	n, err := f.ReadAt(buf, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		require.NoError(t, err)
	}
	return string(buf[:n])
}

// writeFile creates name in fsys holding content, synced.
func writeFile(t *testing.T, fsys vfs.FS, name, content string) {
	t.Helper()
	f, err := fsys.Create(name, vfs.Fdatasync)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte(content), 0)
	require.NoError(t, err)
	require.NoError(t, f.Sync())
	require.NoError(t, f.Close())
}
