package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBandwidthAndPrepareQuick runs -exp bandwidth,prepare -quick
// in-process and checks both tables have a row for every cell, that each
// log and raw cell wrote the volume in the record size it names, that the
// synced cells synced and the unsynced did not, and that every log's
// counters agreed with the syscalls.
func TestBandwidthAndPrepareQuick(t *testing.T) {
	jsonPath := filepath.Join(t.TempDir(), "out.json")
	var stdout, stderr bytes.Buffer
	err := run(t.Context(), []string{"-exp", "bandwidth,prepare", "-quick", "-rounds", "1", "-dir", t.TempDir(),
		"-json", jsonPath}, &stdout, &stderr)
	require.NoError(t, err, "stderr:\n%s", stderr.String())
	out := stdout.String()
	assert.Contains(t, out, "## bandwidth — large records against the device: payload MB/s")
	assert.Contains(t, out, "## prepare — how a new segment is made ready")
	for _, row := range [][2]string{{"4 KiB", "=1 × 1"}, {"64 KiB", "=1 × 8"}, {"1 MiB", "SyncNever × 1"}} {
		assert.Equal(t, 1, countRows2(out, row[0], row[1]), "bandwidth row %q", row)
	}
	assert.Equal(t, 2, countRows(out, "zero-fill"), "one prepare row per write size")

	var rep report
	b, err := os.ReadFile(jsonPath)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &rep))
	require.NotNil(t, rep.Bandwidth)
	require.Len(t, rep.Bandwidth.Rows, len(bandwidthSizes))
	for i, row := range rep.Bandwidth.Rows {
		require.Equal(t, bandwidthSizes[i], row.Size)
		n := uint64(max(quickBandwidthVolume/row.Size, bandwidthGroup)) // records per cell
		for _, c := range []*cell{row.Sync1, row.Sync8, row.Never1, row.RawWrite, row.RawSync1, row.RawSync8} {
			require.Len(t, c.Rounds, 1, c.Name)
			r := c.Rounds[0]
			assert.Equal(t, row.Size, r.RecordSize, "%s at %d", c.Name, row.Size)
			assert.Equal(t, n, r.Commits, "%s at %d: the volume in records", c.Name, row.Size)
		}
		assert.Positive(t, row.Sync1.Rounds[0].Fsyncs)
		assert.Equal(t, n, row.RawSync1.Rounds[0].Fsyncs, "one fdatasync per record")
		assert.Equal(t, n/bandwidthGroup, row.RawSync8.Rounds[0].Fsyncs, "one per 8 records")
		assert.Equal(t, uint64(1), row.RawWrite.Rounds[0].Fsyncs, "one fdatasync at the end")
	}
	require.NotNil(t, rep.Prepare)
	for _, way := range prepareWays {
		for _, size := range prepareWrites {
			c := rep.Prepare.Cells[way][size]
			require.NotNil(t, c, "%s %d", way, size)
			if len(c.Rounds) == 0 {
				continue // the filesystem cannot allocate: skipped with a warning
			}
			assert.Equal(t, uint64(quickPrepareOps), c.Rounds[0].Fsyncs)
			assert.Len(t, rep.Prepare.Extra[way][size], 1)
		}
	}
	for _, c := range rep.Checks {
		assert.True(t, c.Agree, c.Run)
	}
}

// TestLongGrow: -long-grow runs the long cells without checkpoints: no
// segment is recycled, the note says the log grows, and the targets table
// has the growing log's rows; the same volume checkpointed recycles.
func TestLongGrow(t *testing.T) {
	recycled := func(grow bool) (uint64, string) {
		jsonPath := filepath.Join(t.TempDir(), "out.json")
		args := []string{"-exp", "long", "-quick", "-rounds", "1", "-long-volume", "14MiB", "-dir", t.TempDir(), "-json", jsonPath}
		if grow {
			args = append(args, "-long-grow")
		}
		var stdout, stderr bytes.Buffer
		require.NoError(t, run(t.Context(), args, &stdout, &stderr), "stderr:\n%s", stderr.String())
		var rep report
		b, err := os.ReadFile(jsonPath)
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(b, &rep))
		require.Equal(t, grow, rep.Long.Grow)
		var n uint64
		for _, c := range []*cell{rep.Long.Sync1, rep.Long.Level2, rep.Long.Level2Inc, rep.Long.Level0} {
			n += c.Rounds[0].Long.Recycled
		}
		return n, stdout.String()
	}
	n, out := recycled(true)
	assert.Zero(t, n, "a growing log recycles nothing")
	assert.Contains(t, out, "The log grows (-long-grow)")
	assert.Contains(t, out, "growing: commits over 10 ms ≤ the raw loop's + 1 per 256 MiB (1)")
	n, out = recycled(false)
	assert.Positive(t, n, "the checkpointed log recycles")
	assert.NotContains(t, out, "growing:")
}

// countRows2 counts the table rows whose first two cells are a and b.
func countRows2(s, a, b string) int {
	n := 0
	for line := range strings.Lines(s) {
		cells := strings.Split(line, "|")
		if len(cells) > 3 && strings.HasPrefix(line, "|") && strings.TrimSpace(cells[1]) == a && strings.TrimSpace(cells[2]) == b {
			n++
		}
	}
	return n
}
