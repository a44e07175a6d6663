package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/durawal/durawal/wal"
	"github.com/stretchr/testify/require"
)

// TestDumpSymlinkInLogDir: a log directory holding a real log plus one
// symbolic link. Open fails with ErrForeignFile; the documented exit status
// is 1 when Open would fail ("a foreign file"), 2 only for a usage error or
// a directory that holds no log. waldump exits 2 with no verdict.
func TestDumpSymlinkInLogDir(t *testing.T) {
	dir, _ := newLog(t, 100, true)
	require.NoError(t, os.Symlink("/nonexistent", filepath.Join(dir, "junk")))
	_, openErr := wal.Open(dir, wal.Options{SegmentSize: 4 << 10})
	require.ErrorIs(t, openErr, wal.ErrForeignFile)
	code, out, errOut := dumpDir(dir)
	require.Equal(t, 1, code, "Open fails with %v, but waldump says:\n%s%s", openErr, out, errOut)
}
