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

func TestExplain(t *testing.T) {
	us := time.Microsecond
	fast := map[string]mode{
		"always":   {p50: 115 * us, speedup: 5.2, fsyncsPerCommit: 0.127, longest: 400 * time.Millisecond},
		"everysec": {p50: us, speedup: 1.0, longest: 10 * time.Millisecond},
		"no":       {p50: us, speedup: 1.3, longest: 10 * time.Millisecond},
	}
	text := explain(fast, 2, 0)
	require.Contains(t, text, "went ×5.2 faster")
	require.Contains(t, text, "do not speed them up here (×1.0 and ×1.3)")
	require.Contains(t, text, "no background sync ran")
	require.NotContains(t, text, "hardly cheaper")

	// A loaded machine: eight clients slower than one, syncs still shared.
	loaded := map[string]mode{
		"always":   {p50: 900 * us, speedup: 0.5, fsyncsPerCommit: 0.4, longest: 3 * time.Second},
		"everysec": {p50: 40 * us, speedup: 2.0, longest: 2 * time.Second},
		"no":       {p50: 30 * us, speedup: 1.1, longest: time.Second},
	}
	text = explain(loaded, 2, 3)
	require.NotContains(t, text, "faster at the same durability")
	require.Contains(t, text, "went only ×0.5 as fast")
	require.Contains(t, text, "sped them up ×2.0 and ×1.1")
	require.Contains(t, text, "3 here, where the article had 0")
	require.Contains(t, text, "plus for everysec the once-a-second background sync")

	// tmpfs: fsync nearly free, no sharing.
	free := map[string]mode{
		"always":   {p50: 2 * us, speedup: 1.1, fsyncsPerCommit: 1, longest: 10 * time.Millisecond},
		"everysec": {p50: us, speedup: 1, longest: time.Millisecond},
		"no":       {p50: us, speedup: 1, longest: time.Millisecond},
	}
	text = explain(free, 8, 0)
	require.Contains(t, text, "barely shared syncs")
	require.Contains(t, text, "hardly cheaper")
}
