package wal_test

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/durawal/durawal/policy"
	"github.com/durawal/durawal/wal"
	"github.com/durawal/durawal/wal/vfs"
	"github.com/durawal/durawal/wal/vfs/faultfs"
	"github.com/stretchr/testify/require"
)

// dirState hashes every file of logDir on mem, as the page cache holds it
// and as a power loss keeping only synced state would leave it, by name: a
// change to a byte, a directory entry or what is durable shows.
func dirState(t testing.TB, mem *vfs.MemFS) map[string][32]byte {
	t.Helper()
	out := map[string][32]byte{}
	for _, img := range []struct {
		prefix string
		fs     *vfs.MemFS
	}{{"", mem}, {"durable/", mem.PowerLoss(vfs.DropAll())}} {
		names, err := img.fs.List(logDir)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		require.NoError(t, err)
		for _, name := range names {
			out[img.prefix+name] = sha256.Sum256(fileBytes(t, img.fs, name))
		}
	}
	return out
}

// writeGuard wraps fsys so that every operation that could change a file or
// a directory fails, and records it: a read-only Log must attempt none.
func writeGuard(fsys vfs.FS) (vfs.FS, func() []string) {
	var mu sync.Mutex
	var tried []string
	inj := faultfs.InjectorFunc(func(op faultfs.Op) error {
		switch op.Kind {
		case faultfs.OpCreate, faultfs.OpOpenReadWrite, faultfs.OpRename, faultfs.OpRemove, faultfs.OpMkdirAll,
			faultfs.OpSyncDir, faultfs.OpLock, faultfs.OpWrite, faultfs.OpSync, faultfs.OpTruncate:
			mu.Lock()
			tried = append(tried, fmt.Sprintf("%s %s", op.Kind, op.Path))
			mu.Unlock()
			return fmt.Errorf("read-only test: %s %s: %w", op.Kind, op.Path, faultfs.ErrInjected)
		}
		return nil
	})
	return faultfs.Inject(fsys, inj), func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), tried...)
	}
}

// verdict is what a recovery reports, without its duration and the
// quarantine files.
type verdict struct {
	Segments          int
	FirstLSN, EndLSN  wal.LSN
	TornBytes         int64
	Unvouched         int64
	RemovedTemp       int
	Clean             bool
	Records           int
	QuarantinedBefore []wal.QuarantineFile
}

// checkReadOnlyMatchesOpen opens the log on img read-only, reads it, closes
// it, and checks that nothing of img changed and no write was tried; then
// it opens a copy of img with Open and checks that both reached the same
// verdict (the same error, or the same RecoveryInfo and records). It
// returns OpenReadOnly's error and RecoveryInfo.
func checkReadOnlyMatchesOpen(t *testing.T, img *vfs.MemFS, opts wal.Options, what string) (wal.RecoveryInfo, error) {
	t.Helper()
	before := dirState(t, img)
	guarded, tried := writeGuard(img)
	roOpts := opts
	roOpts.FS = guarded
	ro, roErr := wal.OpenReadOnly(logDir, roOpts)
	var roInfo wal.RecoveryInfo
	var roLSNs []wal.LSN
	var roRecs [][]byte
	if roErr == nil {
		roInfo = ro.Recovered()
		roLSNs, roRecs = readAll(t, ro, ro.FirstLSN())
		for i, lsn := range roLSNs {
			rec, err := ro.ReadRecord(lsn, nil)
			require.NoError(t, err, "%s: ReadRecord(%d) read-only", what, lsn)
			require.Equal(t, roRecs[i], rec, "%s: ReadRecord(%d) read-only", what, lsn)
		}
		require.Equal(t, roInfo.EndLSN, ro.AppendedLSN(), what)
		require.NoError(t, ro.Close(), "%s: Close read-only", what)
	}
	require.Empty(t, tried(), "%s: OpenReadOnly tried to change the log", what)
	require.Equal(t, before, dirState(t, img), "%s: OpenReadOnly changed a file or an entry", what)

	cp := img.ProcessCrash() // an independent copy: Open repairs it
	opts.FS = cp
	l, err := wal.Open(logDir, opts)
	if roErr != nil {
		if errors.Is(roErr, fs.ErrNotExist) && err == nil {
			// No log yet: Open creates one, OpenReadOnly reads none.
			require.Zero(t, l.Recovered().Segments, "%s: OpenReadOnly found no log (%v) where Open found one", what, roErr)
			require.NoError(t, l.Close())
			return roInfo, roErr
		}
		require.Error(t, err, "%s: OpenReadOnly failed (%v), Open did not", what, roErr)
		require.Equal(t, err.Error(), roErr.Error(), "%s: not the same verdict", what)
		require.Equal(t, errors.Is(err, wal.ErrCorrupt), errors.Is(roErr, wal.ErrCorrupt), what)
		return roInfo, roErr
	}
	require.NoError(t, err, "%s: Open failed where OpenReadOnly did not", what)
	info := l.Recovered()
	lsns, recs := readAll(t, l, l.FirstLSN())
	require.NoError(t, l.Close())
	var kept []wal.QuarantineFile // Open's, less the one it adds for a torn tail
	for _, q := range info.Quarantined {
		if _, ok := before[q.Name]; ok {
			kept = append(kept, q)
		}
	}
	want := verdict{info.Segments, info.FirstLSN, info.EndLSN, info.TornBytes, info.Unvouched, info.RemovedTemp, info.Clean, len(recs), kept}
	got := verdict{roInfo.Segments, roInfo.FirstLSN, roInfo.EndLSN, roInfo.TornBytes, roInfo.Unvouched, roInfo.RemovedTemp, roInfo.Clean, len(roRecs), roInfo.Quarantined}
	require.Equal(t, want, got, "%s: OpenReadOnly's RecoveryInfo differs from Open's", what)
	require.Equal(t, lsns, roLSNs, "%s: records' LSNs", what)
	require.Equal(t, recs, roRecs, "%s: records", what)
	return roInfo, nil
}

// crashedLog appends n records of 300 bytes to a log with 4 KiB segments on
// a new MemFS under SyncNever, syncing after the first synced of them, and
// returns the image a process crash leaves (no Close, no end frame).
func crashedLog(t *testing.T, n, synced int) (*vfs.MemFS, wal.Options, []wal.LSN) {
	t.Helper()
	opts := wal.Options{SegmentSize: 4 << 10, Policy: policy.SyncNever()}
	mem := vfs.NewMem()
	l := openLog(t, mem, opts)
	lsns := appendN(t, l, 1, synced, 300)
	require.NoError(t, l.Sync())
	lsns = append(lsns, appendN(t, l, 2, n-synced, 300)...)
	img := mem.ProcessCrash()
	require.NoError(t, l.Close())
	return img, opts, lsns
}

func TestOpenReadOnlyTornTail(t *testing.T) {
	img, opts, lsns := crashedLog(t, 20, 15)
	segs := segments(t, img)
	last := segs[len(segs)-1]
	b := fileBytes(t, img, last)
	end := lastNonZero(b, 0) + 1
	for i := range 40 { // a partial frame after the last one
		b[end+i] = byte(0x5a + i)
	}
	setFile(t, img, last, b)

	info, err := checkReadOnlyMatchesOpen(t, img, opts, "torn tail")
	require.NoError(t, err)
	require.Positive(t, info.TornBytes, "the garbage after the last frame is a torn tail")
	require.Positive(t, info.Unvouched, "the records after the last sync are not vouched for")
	require.False(t, info.Clean)
	require.Equal(t, len(segs), info.Segments)
	require.Empty(t, info.Quarantined, "OpenReadOnly quarantines nothing")
	_ = lsns
}

func TestOpenReadOnlyInterruptedRemoveBefore(t *testing.T) {
	opts := wal.Options{SegmentSize: 4 << 10, Policy: policy.SyncEveryCommit(), RecycleSegments: -1} // the removal fails, not a rename
	mem := vfs.NewMem()
	var failRemove atomic.Bool
	fsys := faultfs.Inject(mem, faultfs.InjectorFunc(func(op faultfs.Op) error {
		if op.Kind == faultfs.OpRemove && strings.HasSuffix(op.Path, ".wal") && failRemove.Load() {
			return faultfs.ErrInjected // the segments' removal, once first-lsn is recorded
		}
		return nil
	}))
	l := openLog(t, fsys, opts)
	lsns := appendUntilSegments(t, l, mem, 5, 1)
	failRemove.Store(true)
	kept, err := l.RemoveBefore(lsns[len(lsns)-1])
	require.ErrorIs(t, err, faultfs.ErrInjected)
	img := mem.ProcessCrash()
	failRemove.Store(false)
	require.NoError(t, l.Close())
	onDisk := segments(t, img)
	require.Len(t, onDisk, 5, "the failed RemoveBefore left its segments")

	info, err := checkReadOnlyMatchesOpen(t, img, opts, "interrupted RemoveBefore")
	require.NoError(t, err)
	require.Equal(t, kept, info.FirstLSN, "the log starts where first-lsn says")
	require.Equal(t, 1, info.Segments, "the segments below the start are not part of the log")
	require.Equal(t, onDisk, segments(t, img), "and stay on the disk")
}

func TestOpenReadOnlyInterruptedTruncateFrom(t *testing.T) {
	opts := wal.Options{SegmentSize: 4 << 10, Policy: policy.SyncEveryCommit()}
	mem := vfs.NewMem()
	var armed, cutting atomic.Bool
	fsys := faultfs.Inject(mem, faultfs.InjectorFunc(func(op faultfs.Op) error {
		if op.Kind == faultfs.OpRename && strings.HasPrefix(filepath.Base(op.Path), "truncate-lsn") && armed.Load() {
			cutting.Store(true) // the cut is recorded: fail its first write
		} else if op.Kind == faultfs.OpWrite && cutting.Load() {
			return faultfs.ErrInjected
		}
		return nil
	}))
	l := openLog(t, fsys, opts)
	lsns := appendUntilSegments(t, l, mem, 4, 1)
	cut := lsns[3]
	armed.Store(true)
	require.ErrorIs(t, l.TruncateFrom(cut), wal.ErrPoisoned)
	img := mem.ProcessCrash()
	l.Close()
	onDisk := segments(t, img)
	require.Len(t, onDisk, 4)
	require.Contains(t, dirState(t, img), "truncate-lsn", "the cut is recorded, not finished")

	info, err := checkReadOnlyMatchesOpen(t, img, opts, "interrupted TruncateFrom")
	require.NoError(t, err)
	require.Equal(t, cut, info.EndLSN, "the log reads as cut")
	require.Equal(t, 1, info.Segments)
	require.Equal(t, onDisk, segments(t, img), "the segments after the cut stay on the disk")
	require.Contains(t, dirState(t, img), "truncate-lsn")
}

func TestOpenReadOnlyLeftoverTemp(t *testing.T) {
	img, opts, _ := crashedLog(t, 6, 6)
	f, err := img.Create(filepath.Join(logDir, "prepare-7.wal.tmp"), vfs.Fdatasync)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte("half a segment"), 0)
	require.NoError(t, err)
	require.NoError(t, f.Close())

	// The image may also hold the background preparation of a spare
	// segment that the crash interrupted.
	names, err := img.List(logDir)
	require.NoError(t, err)
	temps := 0
	for _, name := range names {
		if strings.HasSuffix(name, ".wal.tmp") {
			temps++
		}
	}
	info, err := checkReadOnlyMatchesOpen(t, img, opts, "leftover temporary file")
	require.NoError(t, err)
	require.Equal(t, temps, info.RemovedTemp, "what Open would remove")
	require.Positive(t, info.RemovedTemp)
	require.Contains(t, dirState(t, img), "prepare-7.wal.tmp")
}

func TestOpenReadOnlyDamagedSealedSegment(t *testing.T) {
	opts := wal.Options{SegmentSize: 4 << 10, Policy: policy.SyncEveryCommit()}
	mem := vfs.NewMem()
	l := openLog(t, mem, opts)
	appendUntilSegments(t, l, mem, 3, 1)
	require.NoError(t, l.Close())
	first := segments(t, mem)[0]
	b := fileBytes(t, mem, first)
	b[segHeader+frameHeader+10] ^= 0x40 // a payload byte of the first record
	setFile(t, mem, first, b)

	// A default OpenReadOnly, like Open, trusts the sealed segment by its
	// link frame: its reader finds the damage. With VerifyOnOpen both
	// fail on it.
	ro, err := wal.OpenReadOnly(logDir, wal.Options{FS: mem, SegmentSize: opts.SegmentSize})
	require.NoError(t, err)
	require.Equal(t, 2, ro.Recovered().TrustedSegments)
	r, err := ro.NewReader(0)
	require.NoError(t, err)
	_, _, err = r.Next()
	require.ErrorIs(t, err, wal.ErrCorrupt)
	require.NoError(t, r.Close())
	require.NoError(t, ro.Close())
	opts.VerifyOnOpen = true
	_, err = checkReadOnlyMatchesOpen(t, mem, opts, "damaged sealed segment")
	var ce *wal.CorruptionError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, first, ce.Segment)
}

func TestOpenReadOnlyErrors(t *testing.T) {
	mem := vfs.NewMem()
	_, err := wal.OpenReadOnly(logDir, wal.Options{FS: mem})
	require.ErrorIs(t, err, fs.ErrNotExist, "no directory")
	require.Contains(t, err.Error(), "no log directory")
	require.NoError(t, mem.MkdirAll(logDir, 0o755))
	_, err = wal.OpenReadOnly(logDir, wal.Options{FS: mem})
	require.ErrorIs(t, err, fs.ErrNotExist, "an empty directory holds no log")
	require.Contains(t, err.Error(), "no segment")
	names, err := mem.List(logDir)
	require.NoError(t, err)
	require.Empty(t, names, "OpenReadOnly created nothing")
	_, err = wal.OpenReadOnly("", wal.Options{FS: mem})
	require.ErrorIs(t, err, wal.ErrInvalidOptions)
}

func TestOpenReadOnlyRefusesWrites(t *testing.T) {
	img, opts, lsns := crashedLog(t, 10, 10)
	before := dirState(t, img)
	opts.FS = img
	l, err := wal.OpenReadOnly(logDir, opts)
	require.NoError(t, err)
	ctx := context.Background()
	recs := [][]byte{[]byte("a"), []byte("b")}
	for name, call := range map[string]func() error{
		"Append":        func() error { _, err := l.Append([]byte("x")); return err },
		"AppendContext": func() error { _, err := l.AppendContext(ctx, []byte("x"), wal.ForceSync); return err },
		"AppendBatch":   func() error { _, err := l.AppendBatchContext(ctx, recs); return err },
		"AppendBatchLSNs": func() error {
			_, err := l.AppendBatchLSNs(ctx, recs, make([]wal.LSN, 2))
			return err
		},
		"AppendBatchLSNs short": func() error { _, err := l.AppendBatchLSNs(ctx, recs, nil); return err },
		"Sync":                  l.Sync,
		"SyncContext":           func() error { return l.SyncContext(ctx) },
		"WaitDurable":           func() error { return l.WaitDurable(ctx, lsns[0]) },
		"RemoveBefore":          func() error { _, err := l.RemoveBefore(lsns[len(lsns)-1]); return err },
		"TruncateFrom":          func() error { return l.TruncateFrom(lsns[0]) },
	} {
		require.ErrorIs(t, call(), wal.ErrReadOnly, name)
	}
	require.Equal(t, lsns[len(lsns)-1]+wal.LSN(frameSize(300)), l.AppendedLSN(), "nothing appended")
	got, _ := readAll(t, l, 0)
	require.Equal(t, lsns, got)
	require.NoError(t, l.Close())
	require.ErrorIs(t, l.Close(), wal.ErrClosed)
	require.Equal(t, before, dirState(t, img), "Close wrote nothing (no end frame)")

	// A reopened read-only Log still finds no clean close.
	l, err = wal.OpenReadOnly(logDir, opts)
	require.NoError(t, err)
	require.False(t, l.Recovered().Clean, "Close of the read-only Log wrote no end frame")
	require.NoError(t, l.Close())
}

// TestOpenReadOnlyBesideWriter reads a log whose writer holds the lock, in
// the same process: on a MemFS and in a real directory.
func TestOpenReadOnlyBesideWriter(t *testing.T) {
	for _, tc := range []struct {
		name string
		fs   vfs.FS
		dir  string
	}{{"mem", vfs.NewMem(), logDir}, {"os", vfs.OS(), t.TempDir()}} {
		t.Run(tc.name, func(t *testing.T) {
			opts := wal.Options{FS: tc.fs, SegmentSize: 4 << 10, Policy: policy.SyncNever()}
			w, err := wal.Open(tc.dir, opts)
			require.NoError(t, err)
			defer w.Close()
			var want [][]byte
			for i := range 40 {
				rec := record(3, i, 200)
				_, err := w.Append(rec)
				require.NoError(t, err)
				want = append(want, rec)
			}
			require.NoError(t, w.Sync())
			_, err = wal.Open(tc.dir, opts)
			require.ErrorIs(t, err, vfs.ErrLocked, "the writer holds the lock")

			ro, err := wal.OpenReadOnly(tc.dir, opts)
			require.NoError(t, err)
			require.Equal(t, w.AppendedLSN(), ro.AppendedLSN())
			_, got := readAll(t, ro, 0)
			require.Equal(t, want, got)

			// The writer goes on; the read-only Log stays at its end.
			_, err = w.Append(record(3, 99, 200))
			require.NoError(t, err)
			require.NoError(t, w.Sync())
			_, got = readAll(t, ro, 0)
			require.Equal(t, want, got)
			_, err = ro.ReadRecord(w.AppendedLSN()-wal.LSN(frameSize(200)), nil)
			require.ErrorIs(t, err, wal.ErrNotFound)
			require.NoError(t, ro.Close())
			_, err = w.Append(record(3, 100, 200))
			require.NoError(t, err, "closing the read-only Log leaves the writer alone")
		})
	}
}

// TestOpenReadOnlyWhileWriterRolls opens the log read-only again and again
// while a writer appends, rolls segments and removes old ones: each open
// must succeed and read a contiguous run of the writer's records.
func TestOpenReadOnlyWhileWriterRolls(t *testing.T) {
	mem := vfs.NewMem()
	opts := wal.Options{FS: mem, SegmentSize: 4 << 10, Policy: policy.SyncEveryCommit()}
	w, err := wal.Open(logDir, opts)
	require.NoError(t, err)
	defer w.Close()
	var stop atomic.Bool
	var wg sync.WaitGroup
	size := func(i int) int { return 100 + i%700 }
	wg.Go(func() {
		for i := 0; !stop.Load(); i++ {
			lsn, err := w.Append(record(4, i, size(i)))
			if err != nil {
				return
			}
			if i%50 == 49 {
				w.RemoveBefore(lsn)
			}
		}
	})
	read := 0
	for n := 0; n < 200 || w.Stats().Rolls < 20; n++ { // the writer rolls while the opens run
		ro, err := wal.OpenReadOnly(logDir, opts)
		require.NoError(t, err, "open %d", n)
		r, err := ro.NewReader(ro.FirstLSN())
		if errors.Is(err, fs.ErrNotExist) { // the writer removed the segment since
			require.NoError(t, ro.Close())
			continue
		}
		require.NoError(t, err)
		read++
		next, prev := ro.FirstLSN(), -1
		for {
			lsn, rec, err := r.Next()
			if err == io.EOF || errors.Is(err, fs.ErrNotExist) { // a segment removed before the reader reached it
				break
			}
			require.NoError(t, err, "open %d", n)
			i := int(binary.LittleEndian.Uint64(rec[8:16]))
			require.Equal(t, record(4, i, size(i)), rec, "open %d: record at LSN %d", n, lsn)
			if prev >= 0 {
				require.Equal(t, prev+1, i, "open %d: records in order, none missing", n)
				require.Equal(t, next, lsn, "open %d: contiguous LSNs", n)
			}
			prev, next = i, lsn+wal.LSN(frameSize(len(rec)))
		}
		r.Close()
		require.NoError(t, ro.Close())
	}
	stop.Store(true)
	wg.Wait()
	require.Positive(t, read, "some read-only Log was read")
}

// TestOpenReadOnlyAtEveryCrashImage takes the crash images of
// TestCrashImagesAtEveryOp and of TestTruncateCrashImagesAtEveryOp (before
// every filesystem operation, every PowerLoss mode and a process crash) and
// checks on each that OpenReadOnly changes nothing and reaches Open's
// verdict.
func TestOpenReadOnlyAtEveryCrashImage(t *testing.T) {
	for _, pol := range []policy.Policy{policy.SyncEveryCommit(), policy.SyncNever()} {
		for _, work := range []string{"workload", "truncate"} {
			t.Run(fmt.Sprintf("policy=%s/%s", pol, work), func(t *testing.T) {
				opts := wal.Options{SegmentSize: 4 << 10, Policy: pol}
				mem := vfs.NewMem()
				var mu sync.Mutex
				type snap struct {
					img  *vfs.MemFS
					what string
				}
				var snaps []snap
				inj := faultfs.InjectorFunc(func(op faultfs.Op) error {
					n := op.Index
					modes := []vfs.CrashMode{vfs.DropAll(), vfs.KeepAll(), vfs.TearAtSector(n), vfs.KeepRandomSubsetOfBlocks(512, n)}
					var add []snap
					for _, m := range modes {
						add = append(add, snap{mem.PowerLoss(m), fmt.Sprintf("before op %d (%s %s), %s", n, op.Kind, op.Path, m)})
					}
					add = append(add, snap{mem.ProcessCrash(), fmt.Sprintf("before op %d (%s %s), process crash", n, op.Kind, op.Path)})
					mu.Lock()
					snaps = append(snaps, add...)
					mu.Unlock()
					return nil
				})
				if work == "workload" {
					require.True(t, workload(t, faultfs.Inject(mem, inj), opts, &history{}))
				} else {
					require.True(t, truncWorkload(t, faultfs.Inject(mem, inj), opts, &truncState{pending: -1}))
				}
				failed, torn, unvouched := 0, 0, 0
				for _, s := range snaps {
					info, err := checkReadOnlyMatchesOpen(t, s.img, opts, s.what)
					if err != nil {
						failed++
					}
					if info.TornBytes > 0 {
						torn++
					}
					if info.Unvouched > 0 {
						unvouched++
					}
				}
				require.Positive(t, torn, "some image has a torn tail")
				t.Logf("%d crash images: %d with a torn tail, %d with unvouched frames, %d without a log or failing", len(snaps), torn, unvouched, failed)
			})
		}
	}
}
