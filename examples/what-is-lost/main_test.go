package main

import (
	"os"
	"strings"
	"testing"
	"time"

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
	require.NoError(t, run(t.Context(), t.TempDir(), true, &out))
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

func TestExplain(t *testing.T) {
	ms := time.Millisecond
	cuts := map[string]outcome{
		"innodb=1":     {acked: 2562},
		"innodb=2":     {acked: 4596, lost: 1056, oldest: 301 * ms},
		"innodb=0":     {acked: 4633, lost: 1033, oldest: 299 * ms},
		"everysec":     {acked: 4655, lost: 1073, oldest: 301 * ms},
		"no":           {acked: 4674, lost: 4674, oldest: 1301 * ms},
		"async-commit": {acked: 4453, lost: 352, oldest: 97 * ms},
	}
	kills := map[string]outcome{
		"innodb=1": {acked: 3012}, "innodb=2": {acked: 4477}, "everysec": {acked: 4378}, "no": {acked: 4432},
		"innodb=0":     {acked: 4222, lost: 793, oldest: 226 * ms},
		"async-commit": {acked: 4105, lost: 167, oldest: 46 * ms},
	}
	// The full run: the crash came after the sync at 1 s.
	text := explain(1300*ms, cuts, kills)
	require.Contains(t, text, "came 1.3s in, so they lost what followed the sync at the 1 s mark, the oldest 301ms")
	require.Contains(t, text, "neither crash loses anything")
	require.Contains(t, text, "lose nothing to kill -9")
	require.Contains(t, text, "which here means everything")
	require.Contains(t, text, "(here 793 and 167 commits)")
	require.Contains(t, text, "async-commit's window is shorter")

	// -quick: the crash came before any background sync.
	text = explain(300*ms, cuts, kills)
	require.NotContains(t, text, "1 s mark")
	require.Contains(t, text, "came 300ms in, before the first once-a-second sync")

	// Broken promises are reported as such, not explained away.
	cuts["innodb=1"] = outcome{acked: 10, lost: 2}
	kills["no"] = outcome{acked: 10, lost: 3}
	cuts["no"] = outcome{acked: 10, lost: 4}
	cuts["async-commit"] = outcome{acked: 10, lost: 1, oldest: 400 * ms}
	text = explain(2500*ms, cuts, kills)
	require.Contains(t, text, "here it lost 2, which is a bug")
	require.Contains(t, text, "here no lost 3, which is a bug")
	require.Contains(t, text, "at the 2 s mark")
	require.Contains(t, text, "here 4 of 10 acknowledged")
	require.Contains(t, text, "here it was not (oldest power-loss loss 400ms against 299ms)")
}

func TestKernelOutcomes(t *testing.T) {
	got, err := kernelOutcomes([]byte(`[
		{"Policy": "innodb=1", "Acked": 900, "Lost": 0, "OldestLostAge": -1},
		{"Policy": "innodb=2", "Acked": 1000, "Lost": 40, "OldestLostAge": 300000000},
		{"Policy": "innodb=2", "Acked": 500, "Lost": 10, "OldestLostAge": 700000000}]`))
	require.NoError(t, err)
	require.Equal(t, outcome{acked: 900}, got["innodb=1"])
	require.Equal(t, outcome{acked: 1500, lost: 50, oldest: 700 * time.Millisecond}, got["innodb=2"])

	_, err = kernelOutcomes([]byte(`[{"Policy": "innodb=1", "Acked": 9, "Lost": 1, "Violations": ["promise \"nothing\" broken"]}]`))
	require.ErrorContains(t, err, "broke its promise")
	_, err = kernelOutcomes([]byte(`[{"Policy": "sync-every-n=9"}]`))
	require.ErrorContains(t, err, "no row")
}
