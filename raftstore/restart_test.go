package raftstore_test

import (
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/durawal/durawal/raftstore"
	"github.com/durawal/durawal/wal"
	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/require"
)

// TestRestartTime measures Open (the index rebuild reads the whole log) on
// a log of DURAWAL_RESTART_MB mebibytes of 4 KiB entries, written to a
// temporary directory: it is skipped unless that variable is set. It
// reports the median of 3 reopens, page cache warm, and their range.
func TestRestartTime(t *testing.T) {
	mb, _ := strconv.Atoi(os.Getenv("DURAWAL_RESTART_MB"))
	if mb <= 0 {
		t.Skip("set DURAWAL_RESTART_MB to measure a restart")
	}
	dir := t.TempDir()
	if d := os.Getenv("DURAWAL_RESTART_DIR"); d != "" {
		dir = d
	}
	s, err := raftstore.Open(dir, wal.Options{})
	require.NoError(t, err)
	data := make([]byte, 4096)
	n := uint64(mb) << 20 / 4096
	start := time.Now()
	batch := make([]*raft.Log, 0, 256)
	for i := uint64(1); i <= n; i++ {
		batch = append(batch, &raft.Log{Index: i, Term: 1, Type: raft.LogCommand, Data: data})
		if len(batch) == cap(batch) || i == n {
			require.NoError(t, s.StoreLogs(batch))
			batch = batch[:0]
		}
	}
	t.Logf("wrote %d entries (%d MiB of data) in %v", n, mb, time.Since(start))
	require.NoError(t, s.Close())
	var times []time.Duration
	for range 3 {
		start := time.Now()
		s, err := raftstore.Open(dir, wal.Options{})
		require.NoError(t, err)
		times = append(times, time.Since(start))
		last, err := s.LastIndex()
		require.NoError(t, err)
		require.Equal(t, n, last)
		require.NoError(t, s.Close())
	}
	slices.Sort(times)
	t.Logf("Open of %d MiB, %d entries: median %v [%v–%v] (page cache warm)", mb, n, times[1], times[0], times[2])
}
