package wal_test

import (
	"bytes"
	"encoding/binary"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/durawal/durawal/policy"
	"github.com/durawal/durawal/wal"
	"github.com/durawal/durawal/wal/vfs"
	"github.com/stretchr/testify/require"
)

var updateFormat = flag.Bool("update-format", false, "write testdata/format-vN for the current format version N from the current writer (only when the format version changes; older fixtures are never rewritten)")

// formatV1Records are the records stored in testdata/format-v1: sizes from
// 1 byte to past a 4 KiB segment's half, so the log spans several segments.
func formatV1Records() [][]byte {
	var recs [][]byte
	for i := range 40 {
		rec := fmt.Appendf(nil, "record %02d ", i)
		for len(rec) < 1+i*37 {
			rec = append(rec, byte('a'+i%26))
		}
		recs = append(recs, rec[:1+i*37])
	}
	return recs
}

// TestFormatV1 checks that a log written by format version 1 (no end
// frame) still opens and replays byte for byte, and that this build, which
// writes version 2, keeps appending to its version-1 last segment without
// writing an end frame into it (older builds could not read one).
func TestFormatV1(t *testing.T) {
	dir := copyFixture(t, filepath.Join("testdata", "format-v1"))
	l, err := wal.Open(dir, wal.Options{})
	require.NoError(t, err)
	require.False(t, l.Recovered().Clean, "version 1 has no end frame")
	checkFixture(t, l)
}

// TestFormatV2 checks the fixture of format version 2, whose clean Close
// ends the log with an end frame: it opens as Clean and replays byte for
// byte. The files in testdata/format-v2 are written once, with
// -update-format, and never edited.
func TestFormatV2(t *testing.T) {
	dir := copyFixture(t, filepath.Join("testdata", "format-v2"))
	l, err := wal.Open(dir, wal.Options{})
	require.NoError(t, err)
	require.True(t, l.Recovered().Clean, "a clean Close of version 2 leaves an end frame")
	require.Zero(t, l.Recovered().Unvouched)
	checkFixture(t, l)
}

// copyFixture copies a fixture directory to a temporary one: Open takes a
// lock file and may write.
func copyFixture(t *testing.T, src string) string {
	dir := t.TempDir()
	ents, err := os.ReadDir(src)
	require.NoError(t, err)
	require.Greater(t, len(ents), 2, "%s should span several segments", src)
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, e.Name()), b, 0o644))
	}
	return dir
}

// checkFixture replays l and compares it with the fixtures' records, then
// appends, closes and reopens: the log stays usable and keeps every record.
func checkFixture(t *testing.T, l *wal.Log) {
	recs := formatV1Records()
	require.Zero(t, l.Recovered().TornBytes)
	_, got := readAll(t, l, 0)
	require.Len(t, got, len(recs))
	for i := range recs {
		require.True(t, bytes.Equal(recs[i], got[i]), "record %d differs", i)
	}
	_, err := l.Append([]byte("appended by this build"))
	require.NoError(t, err)
	dir := l.Dir()
	require.NoError(t, l.Close())
	l, err = wal.Open(dir, wal.Options{})
	require.NoError(t, err)
	defer l.Close()
	_, got = readAll(t, l, 0)
	require.Equal(t, append(recs, []byte("appended by this build")), got)
}

// checkpointRecord is the i-th record of the format-v3 and format-v4
// fixtures, which differ by their tag.
func checkpointRecord(tag string, i int) []byte {
	return []byte(fmt.Sprintf("%s record %04d %s", tag, i, strings.Repeat("r", 150+i%90)))
}

// checkpointRecords is how many records the checkpointed fixtures' writer
// appended.
const checkpointRecords = 400

// writeCheckpointFixture writes, into src, a log checkpointed by
// RemoveBefore after every roll, whose segments reuse recycled files; the
// last records are appended without checkpoints, so the pool of kept files
// runs dry and the last segments are zero-filled ones.
func writeCheckpointFixture(t *testing.T, src, tag string) {
	require.NoError(t, os.RemoveAll(src))
	l, err := wal.Open(src, wal.Options{SegmentSize: 4 << 10, Policy: policy.SyncNever()})
	require.NoError(t, err)
	var lsns []wal.LSN
	rolls := uint64(0)
	for i := range checkpointRecords {
		lsn, err := l.Append(checkpointRecord(tag, i))
		require.NoError(t, err)
		lsns = append(lsns, lsn)
		if r := l.Stats().Rolls; r != rolls && i > 12 && i < checkpointRecords-80 {
			rolls = r
			_, err := l.RemoveBefore(lsns[i-12])
			require.NoError(t, err)
		}
	}
	require.Positive(t, l.Stats().Prepare.Recycled)
	require.NoError(t, l.Close())
	require.NoError(t, os.Remove(filepath.Join(src, "LOCK")))
}

// checkCheckpointFixture opens a copy of the checkpointed fixture src,
// whose segments must include every format version in versions: it opens
// clean, with nothing torn or quarantined, its records are the writer's
// last ones, and it takes an append and reopens with every frame verified.
func checkCheckpointFixture(t *testing.T, src, tag string, versions ...uint32) {
	dir := copyFixture(t, src)
	found := map[uint32]bool{}
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range ents {
		if b, err := os.ReadFile(filepath.Join(dir, e.Name())); err == nil && strings.HasSuffix(e.Name(), ".wal") {
			found[binary.LittleEndian.Uint32(b[8:12])] = true
		}
	}
	for _, v := range versions {
		require.True(t, found[v], "the fixture holds segments of version %d", v)
	}
	l, err := wal.Open(dir, wal.Options{})
	require.NoError(t, err)
	info := l.Recovered()
	require.True(t, info.Clean)
	require.Zero(t, info.TornBytes)
	require.Empty(t, info.Quarantined)
	_, got := readAll(t, l, info.FirstLSN)
	require.GreaterOrEqual(t, len(got), 12)
	for i, rec := range got {
		require.Equal(t, checkpointRecord(tag, checkpointRecords-len(got)+i), rec, "record %d of %d", i, len(got))
	}
	_, err = l.Append([]byte("appended by this build"))
	require.NoError(t, err)
	require.NoError(t, l.Close())
	l, err = wal.Open(dir, wal.Options{VerifyOnOpen: true})
	require.NoError(t, err)
	_, got2 := readAll(t, l, info.FirstLSN)
	require.Equal(t, append(got, []byte("appended by this build")), got2)
	require.NoError(t, l.Close())
}

// TestFormatV3: the fixture is a log checkpointed by RemoveBefore after
// every roll, whose segments reuse recycled files (format version 3: stale
// frames of earlier LSNs after the frames). It opens clean, with nothing
// torn or quarantined, and its records are the generator's last ones.
func TestFormatV3(t *testing.T) {
	checkCheckpointFixture(t, filepath.Join("testdata", "format-v3"), "format-v3", 3)
}

// TestFormatV4: the same workload written by a build that seals a roll's
// finished segment in the background: zero-filled segments of version 4
// and recycled ones of version 5. The files in testdata/format-v4 are
// written once, with -update-format, and never edited.
func TestFormatV4(t *testing.T) {
	checkCheckpointFixture(t, filepath.Join("testdata", "format-v4"), "format-v4", 4, 5)
}

// TestFormatV6: the same workload written by a build that binds every
// frame to its file's use (a use ID in the 64-byte header of version 6, 7
// when recycled) and to the log's epoch (the file "epoch"). The files in
// testdata/format-v6 are written once, with -update-format, and never
// edited.
func TestFormatV6(t *testing.T) {
	src := filepath.Join("testdata", "format-v6")
	if *updateFormat {
		writeCheckpointFixture(t, src, "format-v6")
	}
	checkCheckpointFixture(t, src, "format-v6", 6, 7)
	_, err := os.Stat(filepath.Join(src, "epoch"))
	require.NoError(t, err, "the fixture records its epoch")
}

// TestV1UpgradedLogMissingLastSegment: README: "a roll writes a link
// frame into the finished segment once its successor is durable, so a
// vanished last segment fails Open naming it". A log written by format 1
// and continued by this build rolls from its version-1 last segment into a
// version-2 one, and writeLink skips version-1 segments. If that first
// version-2 segment vanishes, Open returns nil without its records. Only the
// code comment on writeLink says so; README and the package doc state the
// guarantee without this exception (and "logs created before format 2 ...
// their oldest segment is not checked" names only the other end).
//
// Sequence: the format-v1 fixture (9 segments of 4 KiB); Open with
// SegmentSize 4 KiB; append 300-byte records until a tenth segment exists
// (SyncEveryCommit: each acknowledged durable); Close; remove the tenth
// segment. Expected: ErrCorrupt naming it. Happens: Open nil, the records
// acknowledged in it are gone.
func TestV1UpgradedLogMissingLastSegment(t *testing.T) {
	mem := loadFixture(t, filepath.Join("testdata", "format-v1"))
	opts := wal.Options{FS: mem, SegmentSize: 4 << 10}
	l := openLog(t, mem, opts)
	n := len(segments(t, mem))
	acked := 0
	for len(segments(t, mem)) == n {
		_, err := l.Append(record(1, acked, 300))
		require.NoError(t, err)
		acked++
		require.Less(t, acked, 100)
	}
	require.Len(t, segments(t, mem), n+1, "one version-2 segment")
	end := l.AppendedLSN()
	require.NoError(t, l.Close())
	segs := segments(t, mem)
	require.NoError(t, mem.Remove(filepath.Join(logDir, segs[len(segs)-1])))
	l2, err := wal.Open(logDir, opts)
	if err == nil {
		info := l2.Recovered()
		l2.Close()
		t.Fatalf("%s (version 2, after the version-1 segments) missing: Open nil, log ends at LSN %d (was %d)", segs[len(segs)-1], info.EndLSN, end)
	}
	require.ErrorIs(t, err, wal.ErrCorrupt)
}

// loadFixture copies a testdata fixture directory into logDir on a new
// MemFS, durably.
func loadFixture(t *testing.T, src string) *vfs.MemFS {
	t.Helper()
	mem := vfs.NewMem()
	require.NoError(t, mem.MkdirAll(logDir, 0o755))
	require.NoError(t, mem.SyncDir("/"))
	ents, err := os.ReadDir(src)
	require.NoError(t, err)
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		require.NoError(t, err)
		f, err := mem.Create(filepath.Join(logDir, e.Name()), vfs.Fdatasync)
		require.NoError(t, err)
		_, err = f.WriteAt(b, 0)
		require.NoError(t, err)
		require.NoError(t, f.Sync())
		require.NoError(t, f.Close())
	}
	require.NoError(t, mem.SyncDir(logDir))
	return mem
}
