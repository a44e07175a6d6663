package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/durawal/durawal/wal"
	"github.com/stretchr/testify/require"
)

// TestDumpLastSegmentIsDirectory: with the last segment file replaced by a
// directory, Open fails (ErrCorrupt: the link frame of the previous segment
// names a segment that is not there), and waldump must exit 1 as its
// documented status says (0 only if Open would open the log); it exited 0,
// the lost records unreported.
func TestDumpLastSegmentIsDirectory(t *testing.T) {
	dir, segs := newLog(t, 100, true)
	last := segs[len(segs)-1]
	require.NoError(t, os.Remove(last))
	require.NoError(t, os.Mkdir(last, 0o755))

	_, openErr := wal.Open(dir, wal.Options{SegmentSize: 4 << 10})
	require.ErrorIs(t, openErr, wal.ErrCorrupt)

	code, out, _ := dumpDir(dir)
	require.Equal(t, 1, code, "Open fails with %v, but waldump says:\n%s", openErr, out)
}

// TestDumpSymlinkInLogDir: a log directory holding a real log plus one
// symbolic link. Open fails with ErrForeignFile, so waldump must exit 1
// (Open would fail: "a foreign file"); it exited 2, the status for a usage
// error or a directory that holds no log, with no verdict.
func TestDumpSymlinkInLogDir(t *testing.T) {
	dir, _ := newLog(t, 100, true)
	require.NoError(t, os.Symlink("/nonexistent", filepath.Join(dir, "junk")))
	_, openErr := wal.Open(dir, wal.Options{SegmentSize: 4 << 10})
	require.ErrorIs(t, openErr, wal.ErrForeignFile)
	code, out, errOut := dumpDir(dir)
	require.Equal(t, 1, code, "Open fails with %v, but waldump says:\n%s%s", openErr, out, errOut)
}
