package main

import (
	"strings"
	"testing"
	"time"

	"github.com/durawal/durawal/examples/internal/lesson"
	"github.com/stretchr/testify/require"
)

func TestRun(t *testing.T) {
	var out strings.Builder
	require.NoError(t, run(t.Context(), t.TempDir(), true, &out))
	t.Log("\n" + out.String())
	rows := lesson.Rows(out.String())
	for _, level := range []string{"1", "2", "0"} {
		require.Contains(t, rows, level, "a row per level")
	}
	// Columns: level, commits, time, commits/s, fsyncs, fsyncs/commit, ...
	commits, fsyncs := lesson.Number(rows["1"][1]), lesson.Number(rows["1"][4])
	require.Equal(t, 1000.0, commits)
	require.GreaterOrEqual(t, fsyncs, commits, "level 1, one connection: an fsync per commit")
	for _, level := range []string{"2", "0"} {
		// The run lasts well under the 1 s interval on any disk where level 1
		// ran: a handful of syncs at most (the one at Close is not counted).
		require.Less(t, lesson.Number(rows[level][4]), commits/10, "level %s", level)
	}
}

func TestExplain(t *testing.T) {
	ms := time.Millisecond
	text := explain(figures{
		fsyncs:  map[int]uint64{1: 10000, 2: 0, 0: 0},
		elapsed: map[int]time.Duration{1: 1091 * ms, 2: 19 * ms, 0: 4 * ms},
	})
	require.Contains(t, text, "one fdatasync per commit (10,000 here")
	require.Contains(t, text, "under a second, as both did here, costs them almost no fsync while it commits (0 and 0; the sync at Close, not counted")
	require.Contains(t, text, "match the article's shape")

	// A slow machine: level 2 ran past its first background syncs.
	text = explain(figures{
		fsyncs:  map[int]uint64{1: 1000, 2: 3, 0: 1},
		elapsed: map[int]time.Duration{1: 9 * time.Second, 2: 3200 * ms, 0: 900 * ms},
	})
	require.NotContains(t, text, "under a second")
	require.Contains(t, text, "one fsync per second of run (3 in 3.2s and 1 in 900ms here, not counting the sync at Close)")
}
