package main

import (
	"strings"
	"testing"

	"github.com/durawal/durawal/examples/internal/lesson"
	"github.com/stretchr/testify/require"
)

func TestRun(t *testing.T) {
	var out strings.Builder
	require.NoError(t, run(lesson.WithQuick(t.Context()), t.TempDir(), &out))
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
		// ran: a handful of syncs (the one at Close, maybe a tick or two).
		require.Less(t, lesson.Number(rows[level][4]), commits/10, "level %s", level)
	}
}
