//go:build unix

package wal_test

import (
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"github.com/durawal/durawal/wal"
	"github.com/durawal/durawal/wal/vfs"
	"github.com/stretchr/testify/require"
)

func dirNames(t *testing.T, dir string) []string {
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	var n []string
	for _, e := range ents {
		n = append(n, e.Name())
	}
	slices.Sort(n)
	return n
}

func TestSymlinkedLogDirWorks(t *testing.T) {
	real := t.TempDir()
	link := filepath.Join(t.TempDir(), "log")
	require.NoError(t, os.Symlink(real, link))
	opts := wal.Options{SegmentSize: 8 << 10, RecycleSegments: 2}
	l, err := wal.Open(link, opts)
	require.NoError(t, err)
	appendVaried(t, l, 500)
	_, err = l.RemoveBefore(20000)
	require.NoError(t, err)
	require.NoError(t, l.Close())
	l, err = wal.Open(link, opts)
	require.NoError(t, err)
	_, recs := readAll(t, l, l.FirstLSN())
	t.Logf("recs %d first %d info %+v", len(recs), l.FirstLSN(), l.Recovered())
	require.NoError(t, l.Close())
	ro, err := wal.OpenReadOnly(link, opts)
	require.NoError(t, err)
	ro.Close()
	_, err = wal.InspectDir(nil, link)
	require.NoError(t, err)
}

// TestOpenBesideLinksAndFifos: links and FIFOs in a parent directory are
// none of the log's business: a new log is created below it.
func TestOpenBesideLinksAndFifos(t *testing.T) {
	p := t.TempDir()
	require.NoError(t, os.Symlink("/nonexistent", filepath.Join(p, "dangling")))
	require.NoError(t, syscall.Mkfifo(filepath.Join(p, "fifo"), 0o644))
	l, err := wal.Open(filepath.Join(p, "a", "b"), wal.Options{})
	require.NoError(t, err)
	_, err = l.Append([]byte("x"))
	require.NoError(t, err)
	require.NoError(t, l.Close())
}

// TestOpenRefusingLinksCreatesNothing: Open refuses a directory holding a
// symbolic link before it creates anything in it (the lock file included).
func TestOpenRefusingLinksCreatesNothing(t *testing.T) {
	for _, name := range []string{"junk", "first-lsn", "00000000000000000000.wal"} {
		dir := t.TempDir()
		require.NoError(t, os.Symlink("/nonexistent", filepath.Join(dir, name)))
		before := dirNames(t, dir)
		_, err := wal.Open(dir, wal.Options{})
		t.Logf("%s: %v", name, err)
		require.ErrorIs(t, err, wal.ErrForeignFile)
		require.ErrorIs(t, err, vfs.ErrNotRegular)
		require.Equal(t, before, dirNames(t, dir), "Open refused %s but changed the directory", name)
	}
}

// TestOpenRefusesLockLink: a dangling link named LOCK is refused; Open
// must not follow it and create its target outside the log directory.
func TestOpenRefusesLockLink(t *testing.T) {
	dir, other := t.TempDir(), t.TempDir()
	target := filepath.Join(other, "created-by-open")
	require.NoError(t, os.Symlink(target, filepath.Join(dir, "LOCK")))
	_, err := wal.Open(dir, wal.Options{})
	t.Logf("open: %v", err)
	require.ErrorIs(t, err, wal.ErrForeignFile)
	_, serr := os.Lstat(target)
	require.Error(t, serr, "Open refused the LOCK link but created its target %s outside the log directory", target)
}

func TestOpenRefusesSpecialFiles(t *testing.T) {
	l0dir := t.TempDir()
	l, err := wal.Open(l0dir, wal.Options{SegmentSize: 8 << 10})
	require.NoError(t, err)
	appendVaried(t, l, 200)
	require.NoError(t, l.Close())
	segs, _ := filepath.Glob(filepath.Join(l0dir, "*.wal"))
	for _, name := range []string{"LOCK", "first-lsn", "truncate-lsn", filepath.Base(segs[len(segs)-1]), "recycle-1.wal.tmp", "zz.wal"} {
		for _, kind := range []string{"fifo", "sock"} {
			if kind == "sock" && name == "LOCK" {
				continue // TestOpenRefusesSocketLock
			}
			dir := t.TempDir()
			l, err := wal.Open(dir, wal.Options{SegmentSize: 8 << 10})
			require.NoError(t, err)
			appendVaried(t, l, 200)
			require.NoError(t, l.Close())
			p := filepath.Join(dir, name)
			os.Remove(p)
			if kind == "fifo" {
				require.NoError(t, syscall.Mkfifo(p, 0o644))
			} else {
				fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
				require.NoError(t, err)
				require.NoError(t, syscall.Bind(fd, &syscall.SockaddrUnix{Name: p}))
				defer syscall.Close(fd)
			}
			before := dirNames(t, dir)
			_, err = wal.Open(dir, wal.Options{SegmentSize: 8 << 10})
			t.Logf("%s %s: open: %v", kind, name, err)
			require.ErrorIs(t, err, wal.ErrForeignFile)
			_, err = wal.OpenReadOnly(dir, wal.Options{SegmentSize: 8 << 10})
			t.Logf("%s %s: ro: %v", kind, name, err)
			require.ErrorIs(t, err, wal.ErrForeignFile)
			_, err = wal.InspectDir(nil, dir)
			require.ErrorIs(t, err, wal.ErrForeignFile)
			require.Equal(t, before, dirNames(t, dir))
		}
	}
}

// TestDirNamedLikeLogFiles: a directory named like first-lsn, truncate-lsn,
// LOCK or a kept file either fails Open or leaves the log's start as it was.
func TestDirNamedLikeLogFiles(t *testing.T) {
	for _, name := range []string{"first-lsn", "truncate-lsn", "LOCK", "recycle-1.wal.tmp"} {
		dir := t.TempDir()
		opts := wal.Options{SegmentSize: 8 << 10}
		l, err := wal.Open(dir, opts)
		require.NoError(t, err)
		appendVaried(t, l, 500)
		_, err = l.RemoveBefore(30000)
		require.NoError(t, err)
		first := l.FirstLSN()
		end := l.AppendedLSN()
		require.NoError(t, l.Close())
		p := filepath.Join(dir, name)
		os.Remove(p)
		require.NoError(t, os.Mkdir(p, 0o755))
		l, err = wal.Open(dir, opts)
		if err != nil {
			t.Logf("%s: open: %v", name, err)
			continue
		}
		t.Logf("%s: opened first %d (was %d) end %d (was %d) info %+v", name, l.FirstLSN(), first, l.Recovered().EndLSN, end, l.Recovered())
		require.Equal(t, first, l.FirstLSN())
		l.Close()
	}
}

// TestOpenRefusesSocketLock: a socket named LOCK in the log directory is
// refused like every other non-regular entry (ErrForeignFile,
// vfs.ErrNotRegular); it failed with ENXIO from opening the socket, the
// lock being taken before the directory was listed.
func TestOpenRefusesSocketLock(t *testing.T) {
	dir := t.TempDir()
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	require.NoError(t, err)
	defer syscall.Close(fd)
	require.NoError(t, syscall.Bind(fd, &syscall.SockaddrUnix{Name: filepath.Join(dir, "LOCK")}))
	_, err = wal.Open(dir, wal.Options{})
	t.Logf("open: %v", err)
	require.ErrorIs(t, err, wal.ErrForeignFile)
	require.ErrorIs(t, err, vfs.ErrNotRegular)
}
