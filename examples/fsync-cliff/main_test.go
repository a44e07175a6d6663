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
	for _, c := range []string{"1", "8", "16", "32"} {
		require.Contains(t, rows, c, "a row per committer count")
		require.Len(t, rows[c], 5)
		for _, cell := range rows[c][1:4] {
			require.Regexp(t, `^[0-9.]+ (µs|ms) / [0-9.]+ (µs|ms)$`, cell)
		}
	}
}

func TestExplain(t *testing.T) {
	us := time.Microsecond
	// This machine on a quiet day: a ~100 µs sync, flat level 1.
	quiet := figures{p50one: 100 * us, p95: [3][4]time.Duration{
		{182 * us, 179 * us, 140 * us, 136 * us},
		{634 * us, 635 * us, 176 * us, 186 * us},
		{us, 76 * us, us, us},
	}}
	text := explain(quiet)
	require.Contains(t, text, "Group commit keeps that bounded")
	require.Contains(t, text, "p95 at 32 committers is 136 µs against 182 µs for one")
	require.Contains(t, text, "does not reproduce it")
	require.Contains(t, text, "raises latency rather than lowering it (p95 635 µs at 8 committers")
	require.Contains(t, text, "latency no longer depends on the disk's sync")

	// A loaded machine: level 1's p95 grows with the committers.
	loaded := figures{p50one: 150 * us, p95: [3][4]time.Duration{
		{151 * us, 900 * us, 3000 * us, 6415 * us},
		{700 * us, 800 * us, 2000 * us, 5000 * us},
		{50 * us, 4000 * us, 5000 * us, 6000 * us},
	}}
	text = explain(loaded)
	require.NotContains(t, text, "bounded")
	require.Contains(t, text, "grew from 151 µs for one committer to 6415 µs for 32")
	require.Contains(t, text, "went from 151 µs to 3000 µs at 16 committers")
	require.Contains(t, text, "did not raise latency at 8 committers")
	require.Contains(t, text, "bought little here")
	loaded.p95[2][3] = 7000 * us
	require.Contains(t, explain(loaded), "bought nothing here")
	require.NotContains(t, text, "no longer depends")
}
