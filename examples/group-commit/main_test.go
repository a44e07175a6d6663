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
	// Rows are keyed by their first cell (committers); check the first row
	// of each count and the shape of the table.
	body := strings.Count(out.String(), "\n| ") - 1 // minus the separator line
	require.Equal(t, 6, body, "six cases")
	rows := lesson.Rows(out.String())
	one := rows["1"]
	// Columns: committers, wait, fsyncs, commits/fsync, commits/s, p50, p99, triggers, article.
	require.GreaterOrEqual(t, lesson.Number(one[2]), 1000.0, "one committer: an fsync per commit")
	require.InDelta(t, 1.0, lesson.Number(one[3]), 0.001)
	for _, c := range []string{"8", "16"} {
		require.Contains(t, rows, c)
		perFsync := lesson.Number(rows[c][3])
		require.GreaterOrEqual(t, perFsync, 1.0, "%s committers", c)
	}
}
