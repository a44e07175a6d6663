package wal_test

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/durawal/durawal/policy"
	"github.com/durawal/durawal/wal"
	"github.com/stretchr/testify/require"
)

var updateFormat = flag.Bool("update-format", false, "rewrite testdata/format-v1 from the current writer (only when the format version changes)")

// formatV1Records are the records stored in testdata/format-v1: sizes from
// 1 byte to past a 4 KiB segment's half, so the log spans several segments.
func formatV1Records() [][]byte {
	var recs [][]byte
	for i := range 40 {
		rec := fmt.Appendf(nil, "record %02d ", i)
		for len(rec) < 1+i*37 {
			rec = append(rec, byte('a'+i%26))
		}
		recs = append(recs, rec[:1+i*37])
	}
	return recs
}

// TestFormatV1 checks that a log written by format version 1 still opens and
// replays byte for byte. The files in testdata/format-v1 are never rewritten
// unless the format version changes (then add a format-v2 directory beside
// them instead of editing these).
func TestFormatV1(t *testing.T) {
	src := filepath.Join("testdata", "format-v1")
	recs := formatV1Records()
	if *updateFormat {
		require.NoError(t, os.RemoveAll(src))
		l, err := wal.Open(src, wal.Options{SegmentSize: 4 << 10, Policy: policy.SyncNever()})
		require.NoError(t, err)
		for _, rec := range recs {
			_, err := l.Append(rec)
			require.NoError(t, err)
		}
		require.NoError(t, l.Close())
		require.NoError(t, os.Remove(filepath.Join(src, "LOCK")))
	}
	// Work on a copy: Open takes a lock file and may write.
	dir := t.TempDir()
	ents, err := os.ReadDir(src)
	require.NoError(t, err)
	require.Greater(t, len(ents), 2, "format-v1 should span several segments")
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, e.Name()), b, 0o644))
	}
	l, err := wal.Open(dir, wal.Options{})
	require.NoError(t, err)
	defer l.Close()
	require.Zero(t, l.Recovered().TornBytes)
	_, got := readAll(t, l, 0)
	require.Len(t, got, len(recs))
	for i := range recs {
		require.True(t, bytes.Equal(recs[i], got[i]), "record %d differs", i)
	}
}
