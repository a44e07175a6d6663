package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestQuick runs the whole -quick path in-process on t.TempDir() and checks
// that every experiment ran, every table has its rows, the counters agree
// with the vfs's syscall count, and level 1 on one goroutine syncs at every
// commit.
func TestQuick(t *testing.T) {
	dir := t.TempDir()
	jsonPath := filepath.Join(t.TempDir(), "out.json")
	plotDir := filepath.Join(t.TempDir(), "plots")
	var stdout, stderr bytes.Buffer
	err := run(t.Context(), []string{"-quick", "-dir", dir, "-json", jsonPath, "-plot", plotDir}, &stdout, &stderr)
	require.NoError(t, err, "stderr:\n%s", stderr.String())
	out := stdout.String()

	for _, title := range []string{
		"## disk", "## levels (article 004) — 500 commits", "## levels (article 004) — 496 commits over 8 goroutines (62 each)",
		"## aof (article 001) — 200 synchronous", "## aof (article 001) — batches", "## aof (article 001) — 1 vs 8",
		"## aof (article 001) — postponed", "## cliff (article 002)", "## tail (article 000)", "## counters",
	} {
		assert.Contains(t, out, title)
	}
	rows := map[string]int{ // first cell → how many table rows have it
		"write+fdatasync":                1,
		"write (page cache)":             1,
		"at the start":                   1,
		"at the end":                     1,
		"innodb=1":                       1 + 4 + 1, // levels, cliff, tail
		"innodb=2":                       1 + 4 + 1,
		"innodb=0":                       1 + 1,
		"innodb=1 × 8":                   1,
		"always":                         4,
		"everysec":                       4,
		"no":                             4,
		"innodb=1 plain leader/follower": 4,
		"innodb=1 + delay 500µs/10":      4,
	}
	for label, want := range rows {
		assert.Equal(t, want, countRows(out, label), "table rows whose first cell is %q", label)
	}
	assert.NotContains(t, stderr.String(), "warning: ")
	assert.Contains(t, stderr.String(), "levels: innodb=1, 1 goroutine") // progress

	var rep report
	b, err := os.ReadFile(jsonPath)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &rep))
	require.NotEmpty(t, rep.Checks)
	for _, c := range rep.Checks {
		assert.True(t, c.Agree, "%s: wal.Stats %d fsyncs, vfs %d sync calls; %d vs %d dir syncs",
			c.Run, c.Fsyncs, c.SyncCalls, c.DirSyncs, c.SyncDirOps)
		assert.Positive(t, c.SyncCalls, c.Run)
	}
	require.NotNil(t, rep.Levels)
	require.Len(t, rep.Levels.Single, 3)
	l1 := rep.Levels.Single[0]
	assert.Equal(t, uint64(500), l1.Commits)
	assert.GreaterOrEqual(t, l1.FsyncsPerCommit, 0.99, "innodb=1, one goroutine: fsyncs per commit")
	assert.Positive(t, rep.Levels.Eight.CommitsPerFsync)
	require.NotNil(t, rep.AOF)
	assert.Len(t, rep.AOF.Words, 3)
	require.NotNil(t, rep.Cliff)
	assert.Len(t, rep.Cliff.Configs, 4)
	for _, cfg := range rep.Cliff.Configs {
		assert.Len(t, cfg.Runs, 4, cfg.Name)
	}
	require.NotNil(t, rep.Tail)
	assert.Len(t, rep.Tail.Levels, 3)
	require.NotNil(t, rep.Disk)
	assert.Positive(t, rep.Disk.WriteSync.OpsPerSec)

	for _, name := range []string{"latency-cdf.svg", "commits-per-fsync.svg", "p99.svg"} {
		b, err := os.ReadFile(filepath.Join(plotDir, name))
		if assert.NoError(t, err) {
			assert.Contains(t, string(b), "<svg", name)
		}
	}
	left, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Empty(t, left, "the run directory must be removed")
}

// countRows counts the Markdown table rows of s whose first cell is first.
func countRows(s, first string) int {
	n := 0
	for line := range strings.Lines(s) {
		cells := strings.Split(line, "|")
		if len(cells) > 2 && strings.HasPrefix(line, "|") && strings.TrimSpace(cells[1]) == first {
			n++
		}
	}
	return n
}

// TestOneExperiment runs -exp with a single experiment and checks that only
// its tables appear.
func TestOneExperiment(t *testing.T) {
	var stdout, stderr bytes.Buffer
	err := run(t.Context(), []string{"-quick", "-exp", "levels", "-size", "512", "-dir", t.TempDir()}, &stdout, &stderr)
	require.NoError(t, err, stderr.String())
	assert.Contains(t, stdout.String(), "## levels")
	assert.NotContains(t, stdout.String(), "## disk")
	assert.NotContains(t, stdout.String(), "## tail")
	assert.Contains(t, stdout.String(), "record size: 512 bytes")
}

func TestBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-nosuchflag"},
		{"-exp", "levels,bogus"},
		{"-exp", ","},
		{"-size", "0"},
		{"-size", "many"},
		{"-segment", "100"},
		{"extra-argument"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := run(t.Context(), args, &stdout, &stderr)
			require.Error(t, err)
			assert.ErrorIs(t, err, errUsage)
			assert.NotContains(t, err.Error(), "\n", "one line")
			assert.Empty(t, stdout.String())
		})
	}
}

func TestHelp(t *testing.T) {
	var stdout, stderr bytes.Buffer
	err := run(t.Context(), []string{"-h"}, &stdout, &stderr)
	assert.ErrorIs(t, err, flag.ErrHelp)
	assert.Contains(t, stderr.String(), "-exp")
}

func TestUnwritableDir(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	cases := map[string]string{
		"missing":        filepath.Join(t.TempDir(), "missing"),
		"a regular file": file,
		"under a file":   filepath.Join(file, "sub"),
	}
	if st, err := os.Stat("/proc"); err == nil && st.IsDir() {
		cases["procfs"] = "/proc" // unwritable even for root
	}
	if os.Geteuid() != 0 { // root writes through permission bits
		ro := t.TempDir()
		require.NoError(t, os.Chmod(ro, 0o500))
		t.Cleanup(func() { os.Chmod(ro, 0o700) })
		cases["read-only"] = ro
	}
	for name, dir := range cases {
		t.Run(name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := run(t.Context(), []string{"-quick", "-dir", dir}, &stdout, &stderr)
			require.Error(t, err)
			assert.False(t, errors.Is(err, errUsage))
			assert.Contains(t, err.Error(), "-dir "+dir)
			assert.NotContains(t, err.Error(), "\n", "one line")
		})
	}
}

func TestUnwritableJSON(t *testing.T) {
	var stdout, stderr bytes.Buffer
	missing := filepath.Join(t.TempDir(), "no", "such", "dir", "out.json")
	err := run(t.Context(), []string{"-quick", "-exp", "disk", "-dir", t.TempDir(), "-json", missing}, &stdout, &stderr)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "-json")
	assert.Empty(t, stdout.String(), "fails before running anything")
}
