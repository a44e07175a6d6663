// Regression tests from an adversarial review of the integrity work: each
// reproduces a way the log once lost, resurrected or silently dropped data,
// stalled, or broke a documented promise. The comment above each test tells
// the sequence and what used to happen.
package wal_test

// Adversarial tests: each one reproduces a case where the log breaks a
// promise of README.md ("Recovery rule", "Crash-safety assumptions"),
// docs/failure-model.md or the package doc. They fail on the code they were
// written against; see the comment on each for the sequence, what was
// expected and what happens.

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/durawal/durawal/policy"
	"github.com/durawal/durawal/wal"
	"github.com/durawal/durawal/wal/vfs"
	"github.com/durawal/durawal/wal/vfs/faultfs"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCleanCloseNearlyFullSegmentVerifiesLastGroup: the package doc says
// a clean Close leaves every byte verifiable (end frame), and room() keeps
// the last endFrameSize bytes of a v2 segment free "so a clean Close and a
// roll can always write theirs". But writeEnd checks
// used+endFrameSize > room(), where room() already excludes those bytes: the
// reserve is counted twice. A segment filled to within 24 bytes of room()
// gets no end frame at Close, and damage in its last group is then taken for
// a torn tail and cut (issue 11.1 again, in this corner).
//
// Sequence: SegmentSize 4 KiB (room 4008), SyncNever, twenty 176-byte
// records (200-byte frames, 4000 bytes used), Close() returns nil (it synced
// all 20). Flip one payload bit of record 3. Expected: Open fails with
// ErrCorrupt. Happens: Open returns nil with records 1-2 only, 16 records
// that Close had made durable are quarantined and zeroed.
func TestCleanCloseNearlyFullSegmentVerifiesLastGroup(t *testing.T) {
	mem := vfs.NewMem()
	opts := wal.Options{FS: mem, SegmentSize: 4 << 10, Policy: policy.SyncNever()}
	l := openLog(t, mem, opts)
	appendN(t, l, 0, 20, 176)
	require.Equal(t, wal.LSN(20*frameSize(176)), l.AppendedLSN())
	require.NoError(t, l.Close())
	segs := segments(t, mem)
	require.Len(t, segs, 1, "no roll: everything is in one segment")

	// Sanity: the clean close is recognised when nothing is damaged.
	l = openLog(t, mem.ProcessCrash(), opts)
	clean := l.Recovered().Clean
	require.NoError(t, l.Close())

	b := fileBytes(t, mem, segs[0])
	b[segHeader+2*frameSize(176)+frameHeader+7] ^= 0x04 // record 3's payload
	setFile(t, mem, segs[0], b)
	l2, err := wal.Open(logDir, opts)
	if err == nil {
		info := l2.Recovered()
		_, got := readAll(t, l2, 0)
		l2.Close()
		t.Fatalf("Open after a clean Close (Clean=%v before the damage) returned nil with %d of 20 records, TornBytes %d, quarantined %v: damage in data Close synced was taken for a torn tail",
			clean, len(got), info.TornBytes, info.Quarantined)
	}
	require.ErrorIs(t, err, wal.ErrCorrupt)
}

// TestAllSegmentsMissingIsCorrupt: "A missing segment is damage wherever
// it was" (README, Recovery rule). But Open only consults first-lsn when at
// least one segment is present; with none it creates a fresh log at LSN 0
// and overwrites first-lsn with 0.
//
// Sequence (a): one segment holding 5 synced records, Close; the segment
// file vanishes. Expected: Open fails with ErrCorrupt (first-lsn says the
// log starts at 0 and a segment is missing). Happens: Open returns nil, an
// empty log, the records are gone without an error.
//
// Sequence (b): rolls, RemoveBefore (first-lsn now > 0), every segment
// vanishes. Happens: Open returns nil and the next append gets LSN 0, below
// LSNs already handed out and checkpointed.
func TestAllSegmentsMissingIsCorrupt(t *testing.T) {
	t.Run("single-segment", func(t *testing.T) {
		mem := vfs.NewMem()
		opts := wal.Options{FS: mem, SegmentSize: 64 << 10}
		l := openLog(t, mem, opts)
		appendN(t, l, 0, 5, 100)
		require.NoError(t, l.Close())
		segs := segments(t, mem)
		require.Len(t, segs, 1)
		require.NoError(t, mem.Remove(filepath.Join(logDir, segs[0])))

		l2, err := wal.Open(logDir, opts)
		if err == nil {
			_, got := readAll(t, l2, 0)
			l2.Close()
			t.Fatalf("Open with the only segment missing returned nil and %d records (5 were acknowledged durable)", len(got))
		}
		require.ErrorIs(t, err, wal.ErrCorrupt)
	})
	t.Run("after-RemoveBefore", func(t *testing.T) {
		mem := vfs.NewMem()
		opts := wal.Options{FS: mem, SegmentSize: 4 << 10}
		l := openLog(t, mem, opts)
		last := appendN(t, l, 0, 60, 300)[59]
		kept, err := l.RemoveBefore(last)
		require.NoError(t, err)
		require.Positive(t, kept)
		require.NoError(t, l.Close())
		for _, s := range segments(t, mem) {
			require.NoError(t, mem.Remove(filepath.Join(logDir, s)))
		}
		l2, err := wal.Open(logDir, opts)
		if err == nil {
			lsn, aerr := l2.Append([]byte("new"))
			l2.Close()
			t.Fatalf("Open with every segment missing (log started at LSN %d, ended past %d) returned nil; next append got LSN %d (err %v)", kept, last, lsn, aerr)
		}
		require.ErrorIs(t, err, wal.ErrCorrupt)
	})
}

// TestLogDirEntryDurableAfterFailedOpen: Open makes a directory it creates
// durable by syncing its parent, but only the Open that ran the mkdir does;
// makeDir skips every sync when the directory exists. If that Open fails at
// the parent's sync (EIO, or the process dies between mkdir and the sync),
// the next Open finds the directory, never syncs its parent, and every
// record it acknowledges lives in a directory whose own entry is not
// durable.
//
// Sequence: the parent sync of the first Open fails (Open returns an
// error); process crash; Open again (nil); five SyncEveryCommit appends
// return nil; Close returns nil; power loss (DropAll). Expected: the five
// records are there. Happens: the log directory is gone, and Open creates a
// fresh empty log without an error.
func TestLogDirEntryDurableAfterFailedOpen(t *testing.T) {
	mem := vfs.NewMem()
	inj := faultfs.InjectorFunc(func(op faultfs.Op) error {
		if op.Kind == faultfs.OpSyncDir && filepath.Clean(op.Path) == "/" {
			return syscall.EIO
		}
		return nil
	})
	opts := wal.Options{SegmentSize: 64 << 10, FS: faultfs.Inject(mem, inj)}
	_, err := wal.Open(logDir, opts)
	require.Error(t, err, "the first Open fails at the parent directory's sync")

	img := mem.ProcessCrash()
	l := openLog(t, img, opts)
	appendN(t, l, 0, 5, 100)
	require.NoError(t, l.Close())

	lost := img.PowerLoss(vfs.DropAll())
	_, got, _ := replay(t, lost, opts)
	require.Len(t, got, 5, "five records acknowledged durable (SyncEveryCommit, then a clean Close) vanished with their directory")
}

// TestRemoveBeforeDirSyncFailureKeepsListTrue: RemoveBefore
// removes a segment, then syncs the directory, and only then drops the
// segment from l.segs.firsts. When the directory sync fails, the file is gone
// but the log still lists it as its oldest segment, and the log is not
// poisoned (it keeps taking appends).
//
// Sequence: 60 records over several 4 KiB segments; the directory sync
// after the first removal fails, RemoveBefore returns the error. Then, with
// the filesystem healthy again: RemoveBefore(same LSN) fails again with
// "file does not exist", and so does every later call (it retries the
// Remove of the file already removed); NewReader(FirstLSN) returns a raw
// ENOENT from the filesystem instead of a Reader or ErrNotFound. Expected:
// the retry succeeds (or the error path keeps the list in step with the
// directory) and NewReader of the oldest kept LSN works.
func TestRemoveBeforeDirSyncFailureKeepsListTrue(t *testing.T) {
	mem := vfs.NewMem()
	var armed, removed atomic.Bool
	inj := faultfs.InjectorFunc(func(op faultfs.Op) error {
		if !armed.Load() {
			return nil
		}
		if op.Kind == faultfs.OpRemove && strings.HasSuffix(op.Path, ".wal") {
			removed.Store(true)
		}
		if op.Kind == faultfs.OpSyncDir && removed.Load() {
			armed.Store(false)
			return syscall.EIO
		}
		return nil
	})
	opts := wal.Options{SegmentSize: 4 << 10, FS: faultfs.Inject(mem, inj)}
	l := openLog(t, opts.FS, opts)
	defer l.Close()
	last := appendN(t, l, 0, 60, 300)[59]
	armed.Store(true)
	_, err := l.RemoveBefore(last)
	require.ErrorIs(t, err, syscall.EIO)

	// The filesystem works again.
	first := l.Recovered().FirstLSN
	kept, err := l.RemoveBefore(last)
	assert.NoError(t, err, "retrying RemoveBefore once the directory sync works")
	if err != nil {
		kept = first // what the log still reports as its oldest kept LSN
	}
	r, err := l.NewReader(kept)
	if assert.NoError(t, err, "a Reader from the oldest kept LSN %d", kept) {
		r.Close()
	}
	_, err = l.Append([]byte("still usable"))
	require.NoError(t, err)
}

// TestMissingLastSegmentWithStrayByteAfterLink (double fault, low): a
// link frame in the last segment present proves the log continued in a
// segment that is missing, and Open reports it, but only if nothing but
// zeros follows the link. One non-zero byte anywhere after it (bit rot in
// the unused tail) turns the link into "a torn tail from the link on": the
// link is quarantined and zeroed, Open returns nil, the missing segment's
// records are gone and the next append reuses their LSNs. No crash can put
// bytes after a link (nothing is ever written there), so they are damage.
//
// Sequence: three 4 KiB segments, Close; remove the last segment; set the
// last byte of the (now last) second segment to 1. Expected: ErrCorrupt
// naming the missing segment. Happens: Open nil.
func TestMissingLastSegmentWithStrayByteAfterLink(t *testing.T) {
	mem := vfs.NewMem()
	opts := wal.Options{FS: mem, SegmentSize: 4 << 10}
	l := openLog(t, mem, opts)
	appendUntilSegments(t, l, mem, 3, 0)
	end := l.AppendedLSN()
	require.NoError(t, l.Close())
	segs := segments(t, mem)
	require.NoError(t, mem.Remove(filepath.Join(logDir, segs[2])))
	_, err := wal.Open(logDir, opts)
	require.ErrorIs(t, err, wal.ErrCorrupt, "the link alone is reported")

	b := fileBytes(t, mem, segs[1])
	b[len(b)-1] = 1
	setFile(t, mem, segs[1], b)
	l2, err := wal.Open(logDir, opts)
	if err == nil {
		info := l2.Recovered()
		l2.Close()
		t.Fatalf("%s missing and one stray byte after the link in %s: Open nil, log ends at LSN %d (was %d), TornBytes %d",
			segs[2], segs[1], info.EndLSN, end, info.TornBytes)
	}
	require.ErrorIs(t, err, wal.ErrCorrupt)
}

// TestMissingFirstLSNAndOldestSegment (double fault, low): Open writes a
// missing first-lsn from the oldest segment present, assuming "only a crash
// between creating the log's first segment and recording its start" leaves
// a v2 log without it. That crash leaves only segment 0; a v2 log without
// first-lsn whose oldest segment starts above 0 has lost both, and the
// oldest segment's loss is then recorded as the log's start.
//
// Sequence: three 4 KiB segments, never RemoveBefore; first-lsn and
// segment 0 both vanish (a copy of *.wal that missed the oldest file).
// Expected: ErrCorrupt. Happens: Open nil, FirstLSN > 0, first-lsn rewritten.
func TestMissingFirstLSNAndOldestSegment(t *testing.T) {
	mem := vfs.NewMem()
	opts := wal.Options{FS: mem, SegmentSize: 4 << 10}
	l := openLog(t, mem, opts)
	appendUntilSegments(t, l, mem, 3, 0)
	require.NoError(t, l.Close())
	segs := segments(t, mem)
	require.NoError(t, mem.Remove(filepath.Join(logDir, "first-lsn")))
	require.NoError(t, mem.Remove(filepath.Join(logDir, segs[0])))
	l2, err := wal.Open(logDir, opts)
	if err == nil {
		info := l2.Recovered()
		l2.Close()
		t.Fatalf("first-lsn and %s missing, log never trimmed: Open nil, FirstLSN %d", segs[0], info.FirstLSN)
	}
	require.ErrorIs(t, err, wal.ErrCorrupt)
}

// TestRemoveBeforeOnFullDisk (ZooKeeper/Kafka disk-full): when the disk
// is full, Append returns ErrNoSpace and the README says the log "works
// again once space is freed"; RemoveBefore is the log's own way to free
// space. But RemoveBefore first records the new start in first-lsn by
// writing a new file (first-lsn.wal.tmp) — which needs a free data block —
// and refuses to remove anything when that write fails. On a full disk it
// can never free space. Deleting the oldest segments by hand instead makes
// every later Open fail (first-lsn says they must be there). The log is
// stuck until the operator frees space elsewhere.
//
// Sequence: 4 KiB segments, 60 records (several segments); the disk fills
// (no file can be created: ENOSPC; writes into existing,
// preallocated segments still work); Append returns ErrNoSpace;
// RemoveBefore(an LSN in the last segment). Expected: old segments removed,
// space freed. Happens: RemoveBefore fails with ENOSPC and removes nothing.
func TestRemoveBeforeOnFullDisk(t *testing.T) {
	mem := vfs.NewMem()
	var full atomic.Bool
	inj := faultfs.InjectorFunc(func(op faultfs.Op) error {
		// A full disk: no new file can be made, and no file created since
		// can grow. Writes into blocks that exist (a segment prepared
		// before, first-lsn) still work.
		if full.Load() && op.Kind == faultfs.OpCreate {
			return syscall.ENOSPC
		}
		return nil
	})
	opts := wal.Options{SegmentSize: 4 << 10, NoSpaceTimeout: 50 * time.Millisecond, FS: faultfs.Inject(mem, inj)}
	l := openLog(t, opts.FS, opts)
	defer l.Close()
	last := appendN(t, l, 0, 60, 300)[59]
	before := len(segments(t, mem))
	full.Store(true)
	var err error
	for i := 0; err == nil && i < 100; i++ {
		_, err = l.Append(record(1, i, 300))
	}
	require.ErrorIs(t, err, wal.ErrNoSpace, "the disk is full")

	_, err = l.RemoveBefore(last)
	require.NoError(t, err, "RemoveBefore on a full disk: the only way the log offers to free space")
	require.Less(t, len(segments(t, mem)), before)
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

// TestFailedSyncOfZeroedTailDoesNotResurrectCutRecords (fsyncgate inside
// recovery): Open quarantines a torn tail, zeroes it and syncs. If that sync
// fails (EIO) Open fails, as it should — but Linux has now marked the zeroed
// pages clean while the disk still holds the old tail. The next Open, in a
// fresh process as the README advises, reads zeros from the page cache,
// sees no torn tail, rewrites only the unvouched frames (not the zeros) and
// its sync writes nothing there. New records go on at the cut LSN; after a
// power loss the old frames that Open #1 had cut reappear right after them,
// at their own LSNs, whenever a new frame ends where an old one began
// (always, with fixed-size records).
//
// Sequence (MemFS models the failed sync: FailNextSync): SyncNever; ten
// 100-byte records R0..R9, Sync after R4; crash image in which R7's header
// sector is lost while R8 and R9 reached the disk (as a power loss that
// writes sectors out of order leaves it): torn tail R7..R9. Open #1: the sync after zeroing the tail fails,
// Open returns the error. Process crash; Open #2 nil (R0..R6); Append N7
// (SyncEveryCommit) nil at R7's LSN; power loss. Expected: R0..R6, N7.
// Happens: R0..R6, N7, R8, R9 — records cut as torn and never acknowledged
// come back after an acknowledged one.
func TestFailedSyncOfZeroedTailDoesNotResurrectCutRecords(t *testing.T) {
	mem := vfs.NewMem()
	opts := wal.Options{FS: mem, SegmentSize: 64 << 10, Policy: policy.SyncNever()}
	l := openLog(t, mem, opts)
	var recs [][]byte
	var lsns []wal.LSN
	for i := range 10 {
		rec := record(0, i, 100)
		lsn, err := l.Append(rec)
		require.NoError(t, err)
		recs, lsns = append(recs, rec), append(lsns, lsn)
		if i == 4 {
			require.NoError(t, l.Sync())
		}
	}
	img := mem.ProcessCrash()
	require.NoError(t, l.Close())
	seg := segments(t, img)[0]
	b := fileBytes(t, img, seg)
	xoff := int64(segHeader + int(lsns[7]))
	clear(b[xoff : xoff+frameHeader]) // R7's header never reached the disk
	setFile(t, img, seg, b)

	// Open #1: the sync that follows the zeroing of the torn tail fails.
	var zeroed atomic.Bool
	inj := faultfs.InjectorFunc(func(op faultfs.Op) error {
		if op.Kind == faultfs.OpWrite && strings.HasSuffix(op.Path, seg) && op.Offset == xoff {
			zeroed.Store(true)
		}
		if op.Kind == faultfs.OpSync && strings.HasSuffix(op.Path, seg) && zeroed.Load() {
			img.FailNextSync(syscall.EIO)
		}
		return nil
	})
	o1 := opts
	o1.FS = faultfs.Inject(img, inj)
	_, err := wal.Open(logDir, o1)
	require.ErrorIs(t, err, syscall.EIO, "Open #1 fails at the sync of the zeroed tail")

	// Open #2 in a fresh process: one acknowledged durable record at R7's LSN.
	img2 := img.ProcessCrash()
	o2 := wal.Options{FS: img2, SegmentSize: 64 << 10}
	l2, err := wal.Open(logDir, o2)
	require.NoError(t, err)
	_, got := readAll(t, l2, 0)
	require.Equal(t, recs[:7], got)
	n7 := record(1, 7, 100)
	lsn, err := l2.Append(n7)
	require.NoError(t, err)
	require.Equal(t, lsns[7], lsn)

	lost := img2.PowerLoss(vfs.DropAll())
	require.NoError(t, l2.Close())
	o3 := o2
	o3.FS = lost
	l3, err := wal.Open(logDir, o3)
	require.NoError(t, err)
	gotLSNs, got := readAll(t, l3, 0)
	require.NoError(t, l3.Close())
	require.Equal(t, append(append([][]byte{}, recs[:7]...), n7), got,
		"after the power loss: %d records at LSNs %v; records past N7 were cut as torn by Open #1 and never acknowledged", len(got), gotLSNs)
}

// TestOversizedSegmentRejectedBeforeRead (low): the header of every
// segment records the size it was created with, and a file of another size
// is damage. But Open reads the whole file into memory (readSegment) before
// it compares the sizes (checkSegmentHeader), so a segment file extended by
// something other than the log — a sparse truncate -s, a copy tool padding
// it — costs Open as much memory as the file claims. Here a 4 KiB segment
// extended (sparsely) to 256 MiB makes Open allocate and read 256 MiB before it
// returns the expected ErrCorrupt; a file extended to more than RAM (vm
// overcommit 0 refuses it) ends the process with "fatal error: out of
// memory" instead of an error.
//
// Expected: ErrCorrupt after reading the header (a few KiB). Happens:
// ErrCorrupt after allocating ≥ 256 MiB.
func TestOversizedSegmentRejectedBeforeRead(t *testing.T) {
	dir := t.TempDir()
	opts := wal.Options{SegmentSize: 4 << 10}
	l, err := wal.Open(dir, opts)
	require.NoError(t, err)
	_, err = l.Append([]byte("hello"))
	require.NoError(t, err)
	require.NoError(t, l.Close())
	require.NoError(t, os.Truncate(filepath.Join(dir, "00000000000000000000.wal"), 256<<20))

	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err = wal.Open(dir, opts)
	runtime.ReadMemStats(&after)
	require.ErrorIs(t, err, wal.ErrCorrupt)
	allocated := after.TotalAlloc - before.TotalAlloc
	require.Less(t, allocated, uint64(64<<20), "Open allocated %d MiB to reject a segment whose header says 4 KiB", allocated>>20)
}

// TestMissingLinkRepairedAtOpen (low): a roll installs
// the new segment durably and only then writes the link into the finished
// one. A crash between the two is recovered without error, as it should be,
// but Open never writes the missing link (it knows the successor exists:
// the successor's name is the link's content). From then on the protection
// the link gives is gone for good: if the last segment later vanishes, Open
// returns nil without its records.
//
// Sequence: 4 KiB segments, SyncEveryCommit; process crash just as the first
// roll's sealing opens the finished segment to write the link; Open (nil);
// append three records (into the new segment, which holds the few appended
// while the sealing ran), Close; the last segment vanishes.
// Expected: ErrCorrupt naming it. Happens: Open nil, the ten acknowledged
// records are gone and their LSNs are handed out again.
func TestMissingLinkRepairedAtOpen(t *testing.T) {
	mem := vfs.NewMem()
	var crashed atomic.Pointer[vfs.MemFS]
	inj := faultfs.InjectorFunc(func(op faultfs.Op) error {
		if crashed.Load() == nil && op.Kind == faultfs.OpOpenReadWrite && strings.HasSuffix(op.Path, "00000000000000000000.wal") {
			crashed.Store(mem.ProcessCrash()) // the successor is installed, the link not yet written
		}
		return nil
	})
	opts := wal.Options{SegmentSize: 4 << 10}
	l := openLog(t, faultfs.Inject(mem, inj), opts)
	// Stop at the first roll: its sealing runs in the background (Close
	// waits for it), and the new segment keeps room for what follows.
	for i := 0; l.Stats().Rolls == 0; i++ {
		_, err := l.Append(record(0, i, 300))
		require.NoError(t, err)
		require.Less(t, i, 50)
	}
	require.NoError(t, l.Close())

	img := crashed.Load()
	require.NotNil(t, img, "the roll's sealing opened the finished segment")
	l = openLog(t, img, opts)
	require.Len(t, segments(t, img), 2)
	// No link to trust the sealed segment by: Open checked its frames.
	require.Equal(t, 1, l.Recovered().VerifiedSegments)
	require.Zero(t, l.Recovered().TrustedSegments)
	appendN(t, l, 1, 3, 100)
	end := l.AppendedLSN()
	require.NoError(t, l.Close())
	segs := segments(t, img)
	require.Len(t, segs, 2)
	require.NoError(t, img.Remove(filepath.Join(logDir, segs[1])))
	o := opts
	o.FS = img
	l2, err := wal.Open(logDir, o)
	if err == nil {
		info := l2.Recovered()
		l2.Close()
		t.Fatalf("%s missing: Open nil, log ends at LSN %d (was %d)", segs[1], info.EndLSN, end)
	}
	require.ErrorIs(t, err, wal.ErrCorrupt)
}

// TestCloseWaitsForRemoveBefore (concurrency, low): RemoveBefore
// checks l.closed once and then removes files under segsMu, which Close
// never takes. Close returns, and releases the directory lock, while a
// RemoveBefore is still deleting segments. A second Log opened on the
// directory in that window (the lock is free) lists the segments, and the
// first Log's RemoveBefore then deletes files out from under it: its oldest
// segment is gone and NewReader(Recovered().FirstLSN) fails with a raw
// ENOENT.
//
// Sequence: several 4 KiB segments; RemoveBefore runs and is held as it
// creates first-lsn.wal.tmp (before any removal); Close() returns nil; Open of the
// same directory succeeds; RemoveBefore resumes and returns. Expected: Close
// waits for RemoveBefore (or RemoveBefore stops at Close), so the second Log
// owns the directory alone. Happens: the second Log's oldest segment is
// deleted by the first Log after the second opened.
func TestCloseWaitsForRemoveBefore(t *testing.T) {
	mem := vfs.NewMem()
	var armed atomic.Bool
	held, release := make(chan struct{}), make(chan struct{})
	inj := faultfs.InjectorFunc(func(op faultfs.Op) error {
		// Hold RemoveBefore as it removes its first segment.
		if op.Kind == faultfs.OpRemove && strings.HasSuffix(op.Path, ".wal") && armed.CompareAndSwap(true, false) {
			close(held)
			<-release
		}
		return nil
	})
	opts := wal.Options{SegmentSize: 4 << 10, FS: faultfs.Inject(mem, inj)}
	l := openLog(t, opts.FS, opts)
	last := appendN(t, l, 0, 60, 300)[59]
	armed.Store(true)
	rbDone := make(chan error, 1)
	go func() {
		_, err := l.RemoveBefore(last)
		rbDone <- err
	}()
	<-held
	closed := make(chan error, 1)
	go func() { closed <- l.Close() }()
	select {
	case err := <-closed:
		require.NoError(t, err)
	case <-time.After(2 * time.Second):
		close(release)
		<-rbDone
		return // Close waited for RemoveBefore: the expected behaviour
	}
	l2 := openLog(t, mem, wal.Options{SegmentSize: 4 << 10})
	defer l2.Close()
	close(release)
	<-rbDone
	first := l2.Recovered().FirstLSN
	r, err := l2.NewReader(first)
	require.NoError(t, err, "Close returned and a second Log opened the directory while the first Log's RemoveBefore was still removing segments; the second Log's oldest segment (LSN %d) was deleted under it", first)
	r.Close()
}

// TestEmptySmallSegmentTakesLargeRecordAfterResize (low): Options says
// "A log reopened with another SegmentSize keeps its existing segments as
// they are", and MaxRecordSize is checked against the new SegmentSize. When
// the last segment is empty (a log created and closed before its first
// record, or a crash right after a roll installed the next segment) and was
// made with a smaller SegmentSize, a record that fits the new size but not
// the old one never gets in: reserveLocked refuses to roll away from an
// empty segment ("rolling would never end") and returns ErrRecordTooLarge,
// on every try, although the next segment would be made at the new size.
//
// Sequence: Open with SegmentSize 4 KiB, Close (no record); reopen with
// 64 KiB; Append a 10 KiB record (MaxRecordSize allows 64 KiB-112).
// Expected: nil (a roll to a 64 KiB segment). Happens: ErrRecordTooLarge.
func TestEmptySmallSegmentTakesLargeRecordAfterResize(t *testing.T) {
	mem := vfs.NewMem()
	l := openLog(t, mem, wal.Options{SegmentSize: 4 << 10})
	require.NoError(t, l.Close())
	l = openLog(t, mem, wal.Options{SegmentSize: 64 << 10})
	defer l.Close()
	_, err := l.Append(record(0, 0, 10<<10))
	require.NoError(t, err, "a 10 KiB record under SegmentSize 64 KiB")
}

// TestRecoveryBytesReadCountsEveryRead: RecoveryInfo.BytesRead is "the
// number of bytes of segment files Open read", but Open read every
// segment's header once more before checking the segments (a stray short
// file is reported as itself), and those reads, like the second read of a
// last segment that a live writer changed under OpenReadOnly and the read
// of the segment an interrupted TruncateFrom left, were not counted: 32
// bytes per segment went missing from the figure.
//
// Sequence: a clean log of 7 segments of 64 KiB; Open and OpenReadOnly
// through an FS counting the bytes read from segment files, with and
// without VerifyOnOpen, and once more with a TruncateFrom's record left
// (its segment is read before the scan). Expected: BytesRead equals the
// count. Happened: it was 7×32 = 224 bytes short.
func TestRecoveryBytesReadCountsEveryRead(t *testing.T) {
	opts := wal.Options{SegmentSize: 64 << 10, Policy: policy.SyncNever()}
	sizes := make([]int, 600)
	for i := range sizes {
		sizes[i] = 500 + i%300
	}
	w := writeLog(t, opts, sizes)
	require.Greater(t, len(segments(t, w.mem)), 5)
	counted := func(fsys vfs.FS) (vfs.FS, *atomic.Int64) {
		var n atomic.Int64
		return faultfs.Inject(fsys, faultfs.InjectorFunc(func(op faultfs.Op) error {
			if op.Kind == faultfs.OpRead && strings.HasSuffix(op.Path, ".wal") {
				n.Add(int64(op.Len))
			}
			return nil
		})), &n
	}
	for _, verify := range []bool{false, true} {
		for _, readOnly := range []bool{true, false} {
			fsys, n := counted(w.mem.ProcessCrash())
			o := opts
			o.FS, o.VerifyOnOpen = fsys, verify
			open := wal.Open
			if readOnly {
				open = wal.OpenReadOnly
			}
			l, err := open(logDir, o)
			require.NoError(t, err)
			require.Equal(t, n.Load(), l.Recovered().BytesRead, "VerifyOnOpen %v, read-only %v", verify, readOnly)
			require.NoError(t, l.Close())
		}
	}

	// A cut a crash kept TruncateFrom from finishing: Open reads the
	// segment holding it before the scan, to zero the dropped frames.
	mem := w.mem.ProcessCrash()
	var armed, cutting atomic.Bool
	l := openLog(t, faultfs.Inject(mem, faultfs.InjectorFunc(func(op faultfs.Op) error {
		if op.Kind == faultfs.OpRename && strings.HasPrefix(filepath.Base(op.Path), "truncate-lsn") && armed.Load() {
			cutting.Store(true) // the cut is recorded: fail its first write
		} else if op.Kind == faultfs.OpWrite && cutting.Load() {
			return faultfs.ErrInjected
		}
		return nil
	})), opts)
	armed.Store(true)
	require.ErrorIs(t, l.TruncateFrom(w.lsns[len(w.lsns)-40]), wal.ErrPoisoned)
	img := mem.ProcessCrash()
	l.Close()
	fsys, n := counted(img)
	o := opts
	o.FS = fsys
	l, err := wal.Open(logDir, o)
	require.NoError(t, err)
	require.Equal(t, n.Load(), l.Recovered().BytesRead, "with a cut to finish")
	require.NoError(t, l.Close())
}
