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
	for _, word := range []string{"always", "everysec", "no"} {
		require.Contains(t, rows, word, "a row per appendfsync word")
		require.Greater(t, lesson.Number(rows[word][3]), 0.0, "%s: 1-client rate", word)
		require.Greater(t, lesson.Number(rows[word][4]), 0.0, "%s: 8-client rate", word)
	}
	// Columns: word, p50, p99, 1 client, 8 clients, speed-up, fsyncs/commit (8), article.
	// always syncs at every group, so with 8 clients there is at most one fsync
	// per commit (fewer when they share), and at least one sync happened.
	perCommit := lesson.Number(rows["always"][6])
	require.Greater(t, perCommit, 0.0)
	require.LessOrEqual(t, perCommit, 1.0)
}
