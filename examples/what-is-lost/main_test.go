package main

import (
	"os"
	"strings"
	"testing"

	"github.com/durawal/durawal/examples/internal/lesson"
	"github.com/stretchr/testify/require"
)

// TestMain lets the test binary play the child that processKill starts
// (it re-executes os.Executable(), which under go test is this binary).
func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(child())
	}
	os.Exit(m.Run())
}

func TestRun(t *testing.T) {
	var out strings.Builder
	require.NoError(t, run(lesson.WithQuick(t.Context()), t.TempDir(), &out))
	t.Log("\n" + out.String())
	rows := lesson.Rows(out.String())
	for _, p := range policies {
		require.Contains(t, rows, p.name, "a row per policy")
	}
	lost := func(cell string) float64 { // "lost / acked"
		n, acked, _ := strings.Cut(cell, " / ")
		require.Greater(t, lesson.Number(acked), 0.0, "something was acknowledged")
		return lesson.Number(n)
	}
	// Columns: policy, power loss, oldest, kill -9, oldest, promises.
	require.Zero(t, lost(rows["innodb=1"][1]), "innodb=1 loses nothing to power loss")
	for _, name := range []string{"innodb=1", "innodb=2", "no"} {
		require.Zero(t, lost(rows[name][3]), "%s loses nothing to kill -9", name)
	}
	// In quick mode the run is shorter than the 1 s interval, so no background
	// sync ran before the power cut: the interval policies lose something.
	for _, name := range []string{"innodb=2", "innodb=0", "everysec", "no"} {
		require.Positive(t, lost(rows[name][1]), "%s under power loss", name)
	}
}
