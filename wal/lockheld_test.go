package wal_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/durawal/durawal/wal"
	"github.com/durawal/durawal/wal/vfs"
)

// Issue 26: Open of a directory it refuses (a foreign file) left a LOCK
// file in it; it must leave the directory as it found it.
func TestOpenForeignLeavesNoLock(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("x"), 0o644))
	_, err := wal.Open(dir, wal.Options{})
	require.ErrorIs(t, err, wal.ErrForeignFile)
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, ents, 1, "Open left %v", ents)
	require.Equal(t, "notes.txt", ents[0].Name())
}

// Issue 26: a second Open in the same process said the lock was held "by
// another process".
func TestOpenTwiceSaysThisProcess(t *testing.T) {
	dir := t.TempDir()
	l, err := wal.Open(dir, wal.Options{})
	require.NoError(t, err)
	_, err = wal.Open(dir, wal.Options{})
	require.ErrorIs(t, err, vfs.ErrLocked)
	require.Contains(t, err.Error(), "held by this process")
	require.NotContains(t, err.Error(), "another process")
	_, err = wal.Open(dir+"/.", wal.Options{}) // the same directory, spelled otherwise
	require.Contains(t, err.Error(), "held by this process")
	require.NoError(t, l.Close())
	l, err = wal.Open(dir, wal.Options{})
	require.NoError(t, err)
	require.NoError(t, l.Close())
}
