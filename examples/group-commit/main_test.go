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

func TestExplain(t *testing.T) {
	us := time.Microsecond
	quiet := figures{one: 10957, eight: 68405, perFsync8: 8, perFsyncPlain: 4.5,
		p50none: 99 * us, p50delay: 598 * us, perGroup: 600 * us, byCount16: 625}
	text := explain(quiet)
	require.Contains(t, text, "throughput rises (×6.2 here")
	require.Contains(t, text, "4.5 commits per fsync")
	require.NotContains(t, text, "no better here")
	require.Contains(t, text, "took 598 µs instead of 99 µs")
	require.Contains(t, text, "most delays ended by count (625 of 625)")

	loaded := figures{one: 5000, eight: 4000, perFsync8: 3, perFsyncPlain: 3.5,
		p50none: 900 * us, p50delay: 700 * us, perGroup: 800 * us, byCount16: 10, byTime16: 300}
	text = explain(loaded)
	require.Contains(t, text, "throughput did not rise here (×0.8")
	require.Contains(t, text, "no better here")
	require.Contains(t, text, "against 900 µs without it")
	require.Contains(t, text, "still ended by time (300 of 310)")
}
