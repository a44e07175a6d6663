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
	for _, c := range []string{"1", "8", "16", "32"} {
		require.Contains(t, rows, c, "a row per committer count")
		require.Len(t, rows[c], 5)
		for _, cell := range rows[c][1:4] {
			require.Regexp(t, `^[0-9.]+ (µs|ms) / [0-9.]+ (µs|ms)$`, cell)
		}
	}
}
