package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/durawal/durawal/policy"
	"github.com/durawal/durawal/wal"
	"github.com/stretchr/testify/require"
)

// dumpDir runs waldump with args and returns its exit status and output.
func dumpDir(args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := run(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// hashDir hashes every file of dir by name.
func hashDir(t *testing.T, dir string) map[string][32]byte {
	t.Helper()
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	m := map[string][32]byte{}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		require.NoError(t, err)
		m[e.Name()] = sha256.Sum256(b)
	}
	return m
}

// newLog writes n records of 200 bytes to a log in a new directory with
// 4 KiB segments and returns the directory and the segment names.
func newLog(t *testing.T, n int, close bool) (string, []string) {
	t.Helper()
	dir := t.TempDir()
	l, err := wal.Open(dir, wal.Options{SegmentSize: 4 << 10, Policy: policy.SyncNever()})
	require.NoError(t, err)
	for i := range n {
		_, err := l.Append(bytes.Repeat([]byte{byte('a' + i%26)}, 200))
		require.NoError(t, err)
	}
	require.NoError(t, l.Sync())
	if close {
		require.NoError(t, l.Close())
	} else {
		t.Cleanup(func() { l.Close() })
	}
	segs, err := filepath.Glob(filepath.Join(dir, "*.wal"))
	require.NoError(t, err)
	return dir, segs
}

func TestDumpFixtures(t *testing.T) {
	for _, dir := range []string{"../../wal/testdata/format-v1", "../../wal/testdata/format-v2"} {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			before := hashDir(t, dir)
			code, out, errOut := dumpDir("-frames", "-records", "3", dir)
			require.Equal(t, 0, code, errOut)
			require.Contains(t, out, "segments: 9")
			require.Contains(t, out, "00000000000000028528.wal  first 28528")
			require.Contains(t, out, "lsn 0  offset 32  size 32  length 1  record")
			require.Contains(t, out, `record lsn 0  length 1  "r"`)
			require.Contains(t, out, "verdict: Open would recover LSN 0 to 30000 in 9 segments")
			require.Equal(t, before, hashDir(t, dir), "waldump changed the fixture")

			code, out, _ = dumpDir("-json", dir)
			require.Equal(t, 0, code)
			var d dump
			require.NoError(t, json.Unmarshal([]byte(out), &d))
			require.Len(t, d.Segments, 9)
			require.True(t, d.Verdict.Opens)
			require.Equal(t, wal.LSN(30000), d.Verdict.EndLSN)
		})
	}
}

func TestDumpTornTailAndLiveWriter(t *testing.T) {
	dir, segs := newLog(t, 30, false) // the writer stays open
	last := segs[len(segs)-1]
	b, err := os.ReadFile(last)
	require.NoError(t, err)
	end := bytes.LastIndexFunc(b, func(r rune) bool { return r != 0 }) + 1
	end = (end + 7) &^ 7
	copy(b[end+8:], "torn bytes after the last frame")
	require.NoError(t, os.WriteFile(last, b, 0o644))

	before := hashDir(t, dir)
	code, out, errOut := dumpDir("-frames", dir)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "verdict: Open would recover")
	require.NotContains(t, out, "torn bytes 0;")
	require.Contains(t, out, "non-zero bytes after the frames")
	require.Contains(t, out, "INVALID: ")
	require.Contains(t, out, "clean close no")
	require.Equal(t, before, hashDir(t, dir), "waldump changed the log")
}

func TestDumpDamage(t *testing.T) {
	dir, segs := newLog(t, 40, true)
	require.Greater(t, len(segs), 2)
	b, err := os.ReadFile(segs[0])
	require.NoError(t, err)
	b[32+24+10] ^= 0x20 // a payload byte of the first record of a sealed segment
	require.NoError(t, os.WriteFile(segs[0], b, 0o644))

	before := hashDir(t, dir)
	code, out, _ := dumpDir("-frames", dir)
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "INVALID: checksum mismatch")
	require.Contains(t, out, "(stray: past the first invalid position)")
	require.Contains(t, out, "verdict: Open would fail: the log is damaged: wal: corrupt segment "+filepath.Base(segs[0]))
	require.Equal(t, before, hashDir(t, dir), "waldump changed the log")

	code, out, _ = dumpDir("-json", dir)
	require.Equal(t, 1, code)
	var d dump
	require.NoError(t, json.Unmarshal([]byte(out), &d))
	require.True(t, d.Verdict.Corrupt)
	require.False(t, d.Verdict.Opens)
}

func TestDumpBadInput(t *testing.T) {
	code, _, errOut := dumpDir()
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "usage: waldump")
	code, _, _ = dumpDir("-nosuchflag", ".")
	require.Equal(t, 2, code)
	code, _, _ = dumpDir("-records", "-1", ".")
	require.Equal(t, 2, code)

	code, _, errOut = dumpDir(filepath.Join(t.TempDir(), "missing"))
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "no such file or directory")

	file := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(file, []byte("x"), 0o644))
	code, _, errOut = dumpDir(file)
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "is not a directory")

	other := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(other, "notes.txt"), []byte("x"), 0o644))
	code, _, errOut = dumpDir(other)
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "holds no durawal log")
	require.Contains(t, errOut, "notes.txt")

	// Garbage named like a segment, and a segment cut short: reported, no panic.
	garbage := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(garbage, "00000000000000000000.wal"), bytes.Repeat([]byte("garbage!"), 100), 0o644))
	code, out, _ := dumpDir("-frames", garbage)
	require.Equal(t, 1, code)
	require.Contains(t, out, "bad header: wal: corrupt segment 00000000000000000000.wal at offset 0: bad segment magic")
	require.Contains(t, out, "verdict: Open would fail")

	dir, segs := newLog(t, 40, true)
	last := segs[len(segs)-1]
	b, err := os.ReadFile(last)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(last, b[:1000], 0o644))
	code, out, _ = dumpDir("-frames", dir)
	require.Equal(t, 1, code)
	require.Contains(t, out, "truncated or extended")
	require.True(t, strings.Contains(out, "verdict: Open would fail: the log is damaged"), out)

	short := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(short, "00000000000000000000.wal"), []byte("dur"), 0o644))
	code, out, _ = dumpDir(short)
	require.Equal(t, 1, code)
	require.Contains(t, out, "too short to hold a segment header")
}

// TestDumpUninspectableSegment: a file named like a segment that
// InspectSegment refuses (here one extended past any segment's size, sparse)
// made waldump stop with exit status 2, "a usage error or a directory that
// holds no log", and print no verdict, although Open fails on such a log
// with ErrCorrupt (exit status 1). The file is now listed with why it could
// not be inspected, and the verdict is printed. (Since issue 26 a file
// with a good header is read only to the size its header records, so it is
// inspected, and its size reported as the header's error.)
func TestDumpUninspectableSegment(t *testing.T) {
	dir, segs := newLog(t, 40, true)
	require.Greater(t, len(segs), 2)
	require.NoError(t, os.Truncate(segs[1], wal.MaxSegmentSize+8)) // sparse: no disk space used
	code, out, errOut := dumpDir(dir)
	require.Equal(t, 1, code, "stderr: %s", errOut)
	require.Contains(t, out, "bad header: ")
	require.Contains(t, out, "but was created with 4096: truncated or extended")
	require.Contains(t, out, "verdict: Open would fail: the log is damaged: wal: corrupt segment "+filepath.Base(segs[1]))
	// Salvage reads what the segment's created bytes and the next one hold.
	require.Contains(t, out, "salvage: 40 records")

	code, out, _ = dumpDir("-json", "-records", "5", dir)
	require.Equal(t, 1, code)
	var d dump
	require.NoError(t, json.Unmarshal([]byte(out), &d))
	require.Len(t, d.Segments, len(segs))
	require.Contains(t, d.Segments[1].HeaderError, "created with 4096")
	require.Empty(t, d.Segments[1].Error)
	require.Positive(t, d.Segments[1].Records)
	require.Len(t, d.Records, 5) // salvaged
	require.True(t, d.Verdict.Corrupt)
}

// Issue 26: a byte flipped in a sealed segment. A default Open succeeds (it
// trusts sealed segments by their link frames); full verification fails.
// waldump prints both and says the exit status follows the second.
func TestDumpDefaultOpenAndVerification(t *testing.T) {
	dir, segs := newLog(t, 40, true)
	b, err := os.ReadFile(segs[0])
	require.NoError(t, err)
	b[32+24+10] ^= 0x20
	require.NoError(t, os.WriteFile(segs[0], b, 0o644))
	code, out, _ := dumpDir(dir)
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "default Open (sealed segments trusted by their link frames): would recover LSN 0 to ")
	require.Contains(t, out, "verdict: Open would fail: the log is damaged")
	require.Contains(t, out, "exit status: follows the verdict (Open with VerifyOnOpen")
	require.Contains(t, out, "salvage: 0 records (0 bytes) readable, LSN 0 to 0; stopped at "+filepath.Base(segs[0])+" offset 64 at the first damage")

	var d dump
	code, out, _ = dumpDir("-json", dir)
	require.Equal(t, 1, code)
	require.NoError(t, json.Unmarshal([]byte(out), &d))
	require.True(t, d.DefaultOpen.Opens)
	require.False(t, d.Verdict.Opens)
}

// Issue 26: waldump opened with the default segment size, so the recycled
// files a 64 KiB-segment log keeps were counted as temporary files Open
// would remove; Open with the log's own size keeps them. And the "recycled
// file" line was printed for fresh segments too.
func TestDumpUsesTheLogsOwnSegmentSize(t *testing.T) {
	dir := t.TempDir()
	opts := wal.Options{SegmentSize: 64 << 10}
	l, err := wal.Open(dir, opts)
	require.NoError(t, err)
	var last wal.LSN
	for range 1200 {
		last, err = l.Append(bytes.Repeat([]byte{'r'}, 300))
		require.NoError(t, err)
	}
	_, err = l.RemoveBefore(last)
	require.NoError(t, err)
	require.NoError(t, l.Close())
	tmps, _ := filepath.Glob(filepath.Join(dir, "*.tmp"))
	require.NotEmpty(t, tmps, "no recycled files kept")

	l, err = wal.OpenReadOnly(dir, opts)
	require.NoError(t, err)
	want := l.Recovered().RemovedTemp
	require.NoError(t, l.Close())

	code, out, _ := dumpDir(dir)
	require.Equal(t, 0, code, out)
	require.Contains(t, out, fmt.Sprintf("temporary files to remove %d ", want))
	require.NotContains(t, out, "recycled file")

	// A fresh segment with bytes after its end frame: no "recycled" line.
	dir2, segs := newLog(t, 5, true)
	b, err := os.ReadFile(segs[len(segs)-1])
	require.NoError(t, err)
	b[len(b)-1] = 0x55
	require.NoError(t, os.WriteFile(segs[len(segs)-1], b, 0o644))
	_, out, _ = dumpDir(dir2)
	require.Regexp(t, `\n    [0-9]+ non-zero bytes after the frames\n`, out)
}

// Issue 26: -records N reads what can be read of a log Open refuses, and
// -export writes every readable record, as JSON lines or binary.
func TestDumpSalvageAndExport(t *testing.T) {
	dir, segs := newLog(t, 40, true)
	require.NoError(t, os.Remove(segs[1])) // a missing middle segment
	code, out, _ := dumpDir("-records", "3", dir)
	require.Equal(t, 1, code)
	require.Contains(t, out, "record lsn 0  length 200  \"aaaa")
	require.Contains(t, out, "salvage: 17 records (3400 bytes) readable, LSN 0 to 3808; stopped at "+filepath.Base(segs[1])+" offset 0 at the first damage: wal: corrupt segment "+filepath.Base(segs[1])+" at offset 0: missing")

	jl := filepath.Join(t.TempDir(), "out.jsonl")
	code, out, _ = dumpDir("-export", jl, dir)
	require.Equal(t, 1, code)
	require.Contains(t, out, "salvage: exported 17 records to "+jl)
	lines := strings.Split(strings.TrimSpace(string(must(os.ReadFile(jl)))), "\n")
	require.Len(t, lines, 17)
	var r struct {
		LSN  wal.LSN
		Data []byte
	}
	require.NoError(t, json.Unmarshal([]byte(lines[1]), &r))
	require.Equal(t, wal.LSN(224), r.LSN)
	require.Equal(t, bytes.Repeat([]byte{'b'}, 200), r.Data)

	bin := filepath.Join(t.TempDir(), "out.bin")
	code, _, _ = dumpDir("-export", bin, "-export-format", "binary", dir)
	require.Equal(t, 1, code)
	bb := must(os.ReadFile(bin))
	require.Len(t, bb, 17*(12+200))
	require.Equal(t, uint64(224), binary.LittleEndian.Uint64(bb[212:]))
	require.Equal(t, uint32(200), binary.LittleEndian.Uint32(bb[220:]))

	// An existing file is not overwritten.
	code, _, errOut := dumpDir("-export", bin, dir)
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "file exists")
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// Issue 26: -repair is a dry run; -repair -apply repairs; then the log opens
// with the records Salvage read, and the evidence is in the directory.
func TestDumpRepair(t *testing.T) {
	dir, segs := newLog(t, 40, true)
	b, err := os.ReadFile(segs[1])
	require.NoError(t, err)
	b[64+24+10] ^= 0x20 // the first record of the second segment
	require.NoError(t, os.WriteFile(segs[1], b, 0o644))
	before := hashDir(t, dir)

	code, out, errOut := dumpDir("-repair", dir)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "keeps: LSN 0 to 3808: 17 records")
	require.Contains(t, out, "repair would: 1. write the report repair-")
	require.Contains(t, out, "repair would: 2. copy the ")
	require.Contains(t, out, "dry run: nothing was changed")
	require.Equal(t, before, hashDir(t, dir), "a dry run changed the log")

	code, out, errOut = dumpDir("-repair", "-apply", dir)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "repaired: Open accepts the log")
	require.Contains(t, out, "; the report is repair-")
	code, out, _ = dumpDir(dir)
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "verdict: Open would recover LSN 0 to 3808")
	require.Contains(t, out, "quarantined: 00000000000000003808-")
	require.Contains(t, out, "policy and sync method: not recorded in the log")
	require.Regexp(t, `repair file: repair-\d{8}T\d{6}Z\.txt`, out)

	code, out, _ = dumpDir("-repair", dir)
	require.Equal(t, 0, code)
	require.Contains(t, out, "nothing to repair")

	code, _, _ = dumpDir("-apply", dir) // -apply only with -repair
	require.Equal(t, 2, code)
}
