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
	got := out.String()
	for _, row := range []string{
		`| 0   | "set x=1" |`,
		`| 32  | "set y=2" |`,
		`| 64  | "del x"   |`,
	} {
		require.Contains(t, got, row)
	}
	require.Contains(t, strings.Join(strings.Fields(got), " "), "The 3 commits cost 3 fsyncs")
}
