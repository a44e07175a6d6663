package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLongQuick runs -exp long -quick in-process (one round, a small
// volume) and checks its three tables, its JSON, and that every log's
// counters agreed with the syscalls.
func TestLongQuick(t *testing.T) {
	jsonPath := filepath.Join(t.TempDir(), "out.json")
	var stdout, stderr bytes.Buffer
	err := run(t.Context(), []string{"-exp", "long", "-quick", "-rounds", "1", "-long-volume", "6MiB",
		"-dir", t.TempDir(), "-json", jsonPath}, &stdout, &stderr)
	require.NoError(t, err, "stderr:\n%s", stderr.String())
	out := stdout.String()
	for _, title := range []string{
		"## long — the segment lifecycle in the worst commits: 6 MiB of 1024-byte records per cell, 4 MiB segments",
		"## long — the targets", "## long — the 5 slowest commits of each log cell",
		"p99.99 µs", "> 10 ms", "> 100 ms", "write amplification", "MiB/s",
	} {
		assert.Contains(t, out, title)
	}
	assert.NotContains(t, out, "## disk", "only the long experiment ran")
	for _, label := range []string{"raw write+" + datasyncName + " × 1", "raw write+" + datasyncName + " × 16", "innodb=2 × 1", "innodb=0 × 1", "raw pwrite append × 1"} {
		assert.Equal(t, 1, countRows(out, label), "figures row %q", label)
	}
	for _, label := range []string{"innodb=2: max ≤ 10.0 ms", "innodb=0: max ≤ 10.0 ms", "innodb=2: ≥ 0.95× the raw pwrite throughput"} {
		assert.Equal(t, 1, countRows(out, label), "targets row %q", label)
	}
	// the worst table: at least one stall each (innodb=1 × 16 also has its figures row)
	assert.GreaterOrEqual(t, countRows(out, "innodb=1 × 16"), 2)
	assert.Positive(t, countRows(out, "innodb=2"))
	assert.Positive(t, countRows(out, "innodb=0"))
	assert.NotContains(t, stderr.String(), "warning: ")

	var rep report
	b, err := os.ReadFile(jsonPath)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &rep))
	require.NotNil(t, rep.Long)
	assert.Equal(t, 1024, rep.Long.RecordSize, "1 KiB records unless -size is given")
	for _, c := range []*cell{rep.Long.Sync1, rep.Long.Level2, rep.Long.Level2Inc, rep.Long.Level0, rep.Long.RawAppend} {
		require.Len(t, c.Rounds, 1, c.Name)
		r := c.Rounds[0]
		assert.Equal(t, uint64(6<<10), r.Commits, "%s: the volume in 1 KiB records", c.Name)
		require.NotNil(t, r.Long, c.Name)
		assert.Equal(t, uint64(6<<20), r.Long.WA.PayloadBytes, c.Name)
		if r.Long.WA.NA == "" {
			assert.Positive(t, r.Long.WA.Ratio, c.Name)
		}
	}
	require.Len(t, rep.Long.RawSync.Rounds, 1)
	assert.Positive(t, rep.Long.RawSync.Rounds[0].Commits)
	require.Len(t, rep.Long.RawSync16.Rounds, 1)
	assert.Positive(t, rep.Long.RawSync16.Rounds[0].Commits)
	assert.Equal(t, 16, rep.Long.RawSync16.Rounds[0].Committers)
	assert.Positive(t, rep.Long.Sync1.Rounds[0].Rolls, "6 MiB in 4 MiB segments rolls")
	assert.NotEmpty(t, rep.Long.Sync1.Rounds[0].Long.Slowest)
	for _, c := range rep.Checks {
		assert.True(t, c.Agree, c.Run)
	}
}

func TestLongFlags(t *testing.T) {
	cfg, err := parseFlags([]string{"-exp", "long"}, nil)
	require.NoError(t, err)
	assert.Equal(t, int64(768<<20), cfg.longVolume)
	assert.Equal(t, 1024, cfg.longSize)
	assert.Equal(t, 100, cfg.size, "the other experiments keep their default")
	assert.Equal(t, int64(64<<20), cfg.segment)

	cfg, err = parseFlags([]string{"-exp", "long", "-quick", "-size", "512"}, nil)
	require.NoError(t, err)
	assert.Equal(t, int64(24<<20), cfg.longVolume)
	assert.Equal(t, 512, cfg.longSize, "an explicit -size applies")
	assert.Equal(t, int64(4<<20), cfg.segment)

	cfg, err = parseFlags([]string{"-exp", "long", "-long-volume", "3GiB"}, nil)
	require.NoError(t, err)
	assert.Equal(t, int64(3<<30), cfg.longVolume)

	cfg, err = parseFlags(nil, nil)
	require.NoError(t, err)
	assert.NotContains(t, cfg.exps, "long", "not in the default run")

	for _, bad := range []string{"", "0", "-1MiB", "12XB", "MiB", "1000000GiB", "100"} {
		_, err := parseFlags([]string{"-exp", "long", "-long-volume", bad}, nil)
		if bad == "" {
			assert.NoError(t, err, "empty is the default")
			continue
		}
		assert.ErrorIs(t, err, errUsage, "-long-volume %q", bad)
	}
}

func TestParseBytes(t *testing.T) {
	for in, want := range map[string]int64{
		"1024": 1024, "768MiB": 768 << 20, "24M": 24 << 20, "2GiB": 2 << 30, "64KiB": 64 << 10, "4096B": 4096, "1G": 1 << 30,
	} {
		got, err := parseBytes(in)
		if assert.NoError(t, err, in) {
			assert.Equal(t, want, got, in)
		}
	}
}

func TestWAMeterWithoutDevice(t *testing.T) {
	a := startWA(nil, "st_dev 0:42 is not a block device").finish(1000)
	assert.Equal(t, amplification{PayloadBytes: 1000, NA: "st_dev 0:42 is not a block device"}, a)
	r := result{Long: &longFigures{WA: a}}
	assert.True(t, metricFunc("write_amplification")(r) != metricFunc("write_amplification")(r), "NaN: not measured")
	c := &cell{Rounds: []result{r}}
	c.summarise()
	assert.Equal(t, "n/a", waCell(c, "write_amplification"))
	assert.Equal(t, "n/a", waCell(c, "write_amplification_second_half"))
}

// TestWASecondHalf: the second half's write amplification is the device
// bytes from the mid reading to the end over the payload written after the
// mid reading; without a mid reading (or a device) there is none.
func TestWASecondHalf(t *testing.T) {
	m := &waMeter{dev: &devCounter{name: "vda", major: 254}, start: 1000, mid: 5000, midPayload: 4000, midSet: true, end: 9400}
	a := m.secondHalf(8000)
	assert.Equal(t, uint64(4400), a.DeviceBytes)
	assert.Equal(t, uint64(4000), a.PayloadBytes)
	assert.InDelta(t, 1.1, a.Ratio, 1e-9)
	m.midSet = false
	assert.Zero(t, m.secondHalf(8000).Ratio, "no mid reading")
	assert.Equal(t, "no mid-cell reading", m.secondHalf(8000).NA)
	assert.Zero(t, startWA(nil, "no device").secondHalf(10).Ratio)
}

func TestExplain(t *testing.T) {
	ms := time.Millisecond
	tl := &timeline{
		samples: []sample{
			{at: 0},
			{at: 10 * ms},
			{at: 20 * ms, stalls: 1, waitTime: 7 * ms},
			{at: 30 * ms, stalls: 1, waitTime: 7 * ms, bufFull: 1},
			{at: 40 * ms, stalls: 1, waitTime: 7 * ms, bufFull: 1, prepared: 1, prepareTime: 15 * ms}, // prepared over 25–40 ms
			{at: 50 * ms, stalls: 1, waitTime: 7 * ms, bufFull: 1, prepared: 1, prepareTime: 15 * ms},
			{at: 60 * ms, stalls: 1, waitTime: 7 * ms, bufFull: 1, prepared: 1, prepareTime: 15 * ms},
			{at: 70 * ms, stalls: 1, waitTime: 7 * ms, bufFull: 1, prepared: 1, prepareTime: 15 * ms, gcCycles: 1},
			{at: 80 * ms, stalls: 1, waitTime: 7 * ms, bufFull: 1, prepared: 1, prepareTime: 15 * ms, gcCycles: 1},
			{at: 90 * ms, stalls: 1, waitTime: 7 * ms, bufFull: 1, prepared: 1, prepareTime: 15 * ms, gcCycles: 1, sealWaits: 1},
		},
		syncs: []span{{from: 41 * ms, to: 49 * ms}, {from: 50 * ms, to: 51 * ms}, {from: 5 * ms, to: 6 * ms},
			{from: 100 * ms, to: 105 * ms}, {from: 104 * ms, to: 106 * ms}, {from: 106 * ms, to: 111 * ms}},
		rolls: []time.Duration{33 * ms},
	}
	assert.Equal(t, []span{{from: 25 * ms, to: 40 * ms}}, tl.prepares())
	for _, tc := range []struct {
		name        string
		c           slowCommit
		cause       string
		during      []string
		notInDuring []string
	}{
		{"segment wait first", slowCommit{start: 12 * ms, latency: 6 * ms}, "waited for spare segment",
			[]string{"waited for a spare segment 1× (7.0 ms)"}, []string{"roll", "buffer"}},
		{"a segment wait before a roll", slowCommit{start: 15 * ms, latency: 19 * ms}, "waited for spare segment",
			[]string{"waited for a spare segment 1×", "roll 1×", "log buffer full 1×"}, nil},
		{"a roll waiting for the previous seal", slowCommit{start: 82 * ms, latency: 7 * ms}, "roll waited for the previous seal",
			[]string{"a roll waited for the previous roll's seal 1×"}, []string{"spare", "buffer", "GC"}},
		{"roll", slowCommit{start: 31 * ms, latency: 8 * ms}, "roll",
			[]string{"roll 1×", "next segment being prepared (allocation or zero-fill, and sync, 15.0 ms)"}, []string{"spare", "buffer"}},
		{"buffer full", slowCommit{start: 21 * ms, latency: 8 * ms}, "log-buffer full",
			[]string{"log buffer full 1×", "next segment being prepared"}, []string{"roll"}},
		{"a long fdatasync", slowCommit{start: 42 * ms, latency: 9 * ms}, "fdatasync took 8.0 ms",
			[]string{"longest fdatasync 8.0 ms"}, []string{"prepared", "roll", "GC"}},
		{"a sync too short to explain it", slowCommit{start: 42 * ms, latency: 19 * ms}, "unknown",
			[]string{"longest fdatasync 8.0 ms", "GC"}, nil},
		{"nothing", slowCommit{start: 1 * ms, latency: 3 * ms}, "unknown", []string{"nothing counted"}, nil},
		{"syncs in a row", slowCommit{start: 101 * ms, latency: 12 * ms}, "3 fdatasyncs in a row, 10.0 ms",
			[]string{"longest fdatasync 5.0 ms", "3 fdatasyncs in progress for 10.0 ms of it"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := explain(tc.c, tl)
			assert.Equal(t, tc.cause, got.Cause)
			assert.Equal(t, tc.c.latency, got.Latency)
			for _, s := range tc.during {
				assert.Contains(t, got.During, s)
			}
			for _, s := range tc.notInDuring {
				assert.NotContains(t, got.During, s)
			}
		})
	}
}

func TestExplainWorstOnePerStall(t *testing.T) {
	ms := time.Millisecond
	tl := &timeline{syncs: []span{{from: 0, to: 90 * ms}}}
	kept := []slowCommit{
		{start: 0, latency: 95 * ms},
		{start: 1 * ms, latency: 93*ms + ms/2},      // returned 0.5 ms before the first: the same stall
		{start: 5*ms + ms/2, latency: 90 * ms},      // 0.5 ms later: still the same
		{start: 200 * ms, latency: 20 * ms},         // another stall
		{start: 300 * ms, latency: 10 * ms},         // and another
		{start: 400 * ms, latency: 5 * ms},          // over n
		{start: 400*ms + ms/2, latency: 5*ms - 100}, // alike the one over n: not counted anywhere
	}
	got := explainWorst(kept, 3, tl)
	require.Len(t, got, 3)
	assert.Equal(t, []time.Duration{95 * ms, 20 * ms, 10 * ms}, []time.Duration{got[0].Latency, got[1].Latency, got[2].Latency})
	assert.Equal(t, 2, got[0].Alike)
	assert.Zero(t, got[1].Alike)
	assert.Equal(t, "fdatasync took 90.0 ms", got[0].Cause)
	assert.True(t, strings.HasPrefix(got[1].Cause, "unknown"))
}

// TestStalls: commits whose waits overlap make one stall; disjoint ones
// count apart, in whatever order the committers recorded them.
func TestStalls(t *testing.T) {
	ms := func(start, lat int) slowCommit {
		return slowCommit{start: time.Duration(start) * time.Millisecond, latency: time.Duration(lat) * time.Millisecond}
	}
	for _, tc := range []struct {
		name string
		over []slowCommit
		want int
	}{
		{"none", nil, 0},
		{"one", []slowCommit{ms(5, 12)}, 1},
		{"a group of three", []slowCommit{ms(100, 14), ms(101, 13), ms(99, 15)}, 1},
		{"chained overlaps", []slowCommit{ms(0, 11), ms(10, 11), ms(20, 11)}, 1},
		{"apart, out of order", []slowCommit{ms(200, 11), ms(0, 11), ms(100, 11)}, 3},
		{"a long one swallows later ones", []slowCommit{ms(0, 100), ms(50, 11), ms(90, 11), ms(120, 11)}, 2},
	} {
		if got := stalls(tc.over); got != tc.want {
			t.Errorf("%s: stalls = %d, want %d", tc.name, got, tc.want)
		}
	}
}
