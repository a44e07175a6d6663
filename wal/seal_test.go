package wal_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/durawal/durawal/internal/longtest"
	"github.com/durawal/durawal/policy"
	"github.com/durawal/durawal/wal"
	"github.com/durawal/durawal/wal/vfs"
	"github.com/durawal/durawal/wal/vfs/faultfs"
	"github.com/stretchr/testify/require"
)

// sealFault fails, once armed, the first sync of the file that the next
// rename moves into a segment name (the new segment a roll installs): the
// seal's sync of the new segment's header.
type sealFault struct {
	armed  atomic.Bool
	succ   atomic.Pointer[string]
	failed atomic.Bool
}

func (f *sealFault) Before(op faultfs.Op) error {
	if !f.armed.Load() {
		return nil
	}
	if op.Kind == faultfs.OpRename && f.succ.Load() == nil && !strings.HasSuffix(filepath.Base(op.Path), ".wal") {
		p := op.Path
		f.succ.Store(&p)
	}
	if op.Kind == faultfs.OpSync {
		if p := f.succ.Load(); p != nil && *p == op.Path && f.failed.CompareAndSwap(false, true) {
			return errors.New("injected: EIO syncing the new segment")
		}
	}
	return nil
}

// TestSealRemoveBeforeAfterFailedSeal: the roll's seal fails to make the new
// segment's header durable (the log is poisoned). RemoveBefore of the
// finished segment still records the new first LSN (a directory sync, which
// makes the new segment's name durable) and removes the finished segment.
// After a power loss the log consists of one segment whose header never
// reached the disk, and Open refuses it: a crash after an I/O error leaves
// a log that cannot be opened (TestCrashAfterEveryOp's standard: Open must
// succeed after any failed op and a power loss).
func TestSealRemoveBeforeAfterFailedSeal(t *testing.T) {
	for _, recycle := range []bool{false, true} {
		name := "fresh"
		if recycle {
			name = "recycled"
		}
		t.Run(name, func(t *testing.T) {
			mem := vfs.NewMem()
			f := &sealFault{}
			opts := wal.Options{SegmentSize: 4 << 10, Policy: policy.SyncInterval(time.Hour)}
			if recycle {
				opts.RecycleSegments = 4
			}
			l := openLog(t, faultfs.Inject(mem, faultfs.InjectorFunc(f.Before)), opts)
			if recycle {
				// Roll twice, checkpoint, so that the next segment reuses a file.
				for l.Stats().Rolls < 2 {
					_, err := l.Append(record(0, 0, 300))
					require.NoError(t, err)
				}
				require.NoError(t, l.Sync())
				_, err := l.RemoveBefore(l.AppendedLSN())
				require.NoError(t, err)
			}
			rolls := l.Stats().Rolls
			f.armed.Store(true)
			for l.Stats().Rolls == rolls {
				_, err := l.Append(record(1, 0, 300))
				if err != nil {
					// The append that rolls starts the seal; if the seal
					// fails before that append's commit returns, the
					// queue has failed (Queue.Wait returns the sticky
					// error even for a covered LSN), so the append that
					// rolled reports ErrPoisoned (seen in CI under -race).
					require.ErrorIs(t, err, wal.ErrPoisoned)
					require.True(t, f.failed.Load(), "poisoned only by the failed seal")
					break
				}
			}
			// A frame in the new segment. The sealing may have failed
			// on the new segment's sync already: then it is refused.
			if _, err := l.Append(record(1, 1, 300)); err != nil {
				require.ErrorIs(t, err, wal.ErrPoisoned)
			}
			err := l.Sync()
			require.ErrorIs(t, err, wal.ErrPoisoned)
			require.True(t, f.failed.Load(), "the new segment's sync failed")
			segs := segments(t, mem)
			sFirst := segFirst(t, segs[len(segs)-1])
			// The application checkpoints past the finished segment.
			_, rerr := l.RemoveBefore(sFirst)
			t.Logf("RemoveBefore on the poisoned log: %v", rerr)
			l.Close()

			opts.FS = mem.PowerLoss(vfs.DropAll())
			l2, err := wal.Open(logDir, opts)
			require.NoError(t, err, "Open after an I/O error and a power loss")
			require.NoError(t, l2.Close())
		})
	}
}

// TestSealCrashImagesPolicies takes a crash image (every PowerLoss mode
// and a process crash) before each filesystem operation of a rolling
// workload, with and without recycled segments, under five policies and
// four sync methods, and checks each recovers every acknowledged record.
// Long (about 25 s, minutes under -race): run with DURAWAL_LONG=1.
func TestSealCrashImagesPolicies(t *testing.T) {
	if os.Getenv("DURAWAL_LONG") == "" {
		t.Skip("long: set DURAWAL_LONG=1")
	}
	pols := []policy.Policy{policy.SyncEveryCommit(), policy.SyncEveryN(3), policy.SyncInterval(time.Millisecond),
		policy.BufferedInterval(time.Millisecond, time.Millisecond), policy.SyncNever()}
	methods := []vfs.SyncMethod{vfs.Fdatasync, vfs.ODirect, vfs.ODsync, vfs.ODirectODsync}
	for _, m := range methods {
		for _, pol := range pols {
			for _, wl := range workloads {
				t.Run(fmt.Sprintf("%v/%s/%s", m, pol, wl.name), func(t *testing.T) {
					crashImagesAtEveryOp(t, wal.Options{SegmentSize: 4 << 10, Policy: pol, SyncMethod: m}, wl.run)
				})
			}
		}
	}
}

// sealRecoveryCrashes takes crash images of the workload before each of its
// operations, like crashImagesAtEveryOp; for each image whose Open undoes a roll
// or completes one (a dropped segment, or a sealed segment checked frame by
// frame), it crashes that Open before each of its own operations, in
// several modes, and checks that each of those images recovers too.
func sealRecoveryCrashes(t *testing.T, opts wal.Options, workload workloadFunc) {
	type snapshot struct {
		img  *vfs.MemFS
		h    *history
		what string
	}
	mem := vfs.NewMem()
	if opts.SyncMethod.Direct() {
		mem.SetDirectIOAlignment(512)
	}
	h := &history{}
	var mu sync.Mutex
	var snaps []snapshot
	inj := faultfs.InjectorFunc(func(op faultfs.Op) error {
		st := h.state()
		n := op.Index
		modes := []vfs.CrashMode{vfs.KeepAll(), vfs.TearAtSector(n), vfs.KeepRandomSubsetOfBlocks(512, n)}
		var add []snapshot
		for _, m := range modes {
			add = append(add, snapshot{mem.PowerLoss(m), st, fmt.Sprintf("before op %d (%s %s), %s", n, op.Kind, op.Path, m)})
		}
		add = append(add, snapshot{mem.ProcessCrash(), st, fmt.Sprintf("before op %d (%s %s), process crash", n, op.Kind, op.Path)})
		if now := h.state(); now.removeAsked != st.removeAsked {
			st.removeAsked, st.removeDone = now.removeAsked, false
		}
		mu.Lock()
		snaps = append(snaps, add...)
		mu.Unlock()
		return nil
	})
	require.True(t, workload(t, faultfs.Inject(mem, inj), opts, h))
	nested := 0
	for _, s := range snaps {
		s.h.recs, s.h.lsns = h.recs, h.lsns
		probe := opts
		probe.FS = s.img.ProcessCrash()
		l, err := wal.Open(logDir, probe)
		require.NoError(t, err, s.what)
		info := l.Recovered()
		require.NoError(t, l.Close())
		if info.DroppedSegment == "" && info.VerifiedSegments == 0 {
			continue
		}
		// Crash this Open before each of its operations.
		base := s.img.ProcessCrash()
		var imgs []snapshot
		rinj := faultfs.InjectorFunc(func(op faultfs.Op) error {
			n := op.Index
			for _, m := range []vfs.CrashMode{vfs.DropAll(), vfs.KeepRandomSubsetOfBlocks(512, n), vfs.TearAtSector(n)} {
				imgs = append(imgs, snapshot{base.PowerLoss(m), s.h, fmt.Sprintf("%s; Open crashed before its op %d (%s %s), %s", s.what, n, op.Kind, op.Path, m)})
			}
			imgs = append(imgs, snapshot{base.ProcessCrash(), s.h, fmt.Sprintf("%s; Open crashed before its op %d (%s %s), process crash", s.what, n, op.Kind, op.Path)})
			return nil
		})
		o := opts
		o.FS = faultfs.Inject(base, rinj)
		l, err = wal.Open(logDir, o)
		require.NoError(t, err, s.what)
		require.NoError(t, l.Close())
		for _, r := range imgs {
			hh := &history{recs: r.h.recs, lsns: r.h.lsns, acked: r.h.acked,
				removeAsked: r.h.removeAsked, kept: r.h.kept, removeDone: r.h.removeDone}
			checkRecoveredDepth(t, r.img, opts, hh, false, r.what, 0)
			if t.Failed() {
				return
			}
		}
		nested += len(imgs)
	}
	t.Logf("%d crash images, %d images of crashed recoveries", len(snaps), nested)
}

// TestSealCrashDuringRecovery crashes again before each of Open's own
// operations on every crash image whose recovery undoes or finishes a roll
// (quarantine, removal, header rewrite, link), and checks those images
// recover too. Long (about 6 minutes on 2 cores): run with DURAWAL_LONG=1.
func TestSealCrashDuringRecovery(t *testing.T) {
	if os.Getenv("DURAWAL_LONG") == "" {
		t.Skip("long: set DURAWAL_LONG=1")
	}
	pols := []policy.Policy{policy.SyncEveryCommit(), policy.SyncInterval(time.Millisecond), policy.SyncNever()}
	methods := []vfs.SyncMethod{vfs.Fdatasync, vfs.ODirect}
	for _, m := range methods {
		for _, pol := range pols {
			for _, wl := range workloads {
				t.Run(fmt.Sprintf("%v/%s/%s", m, pol, wl.name), func(t *testing.T) {
					sealRecoveryCrashes(t, wal.Options{SegmentSize: 4 << 10, Policy: pol, SyncMethod: m}, wl.run)
				})
			}
		}
	}
}

// TestSealFormatV1RollThenReopen: this build appends to a log of format
// version 1 until it rolls from the version-1 last segment P into a new
// version-4 segment S. The seal writes a link frame into P (it fits), and
// Close is clean. The next Open must open the log: recoverRoll, seeing S
// of version 4 as the last segment, skips its link check for P (version
// 1 < 2), scans P as a last segment and takes P's link frame for "the log
// continues in a segment that is not there".
func TestSealFormatV1RollThenReopen(t *testing.T) {
	dir := copyFixture(t, filepath.Join("testdata", "format-v1"))
	opts := wal.Options{SegmentSize: 4 << 10}
	l, err := wal.Open(dir, opts)
	require.NoError(t, err)
	n := 0
	for l.Stats().Rolls == 0 {
		_, err := l.Append(record(3, n, 100))
		require.NoError(t, err)
		n++
	}
	require.NoError(t, l.Close())
	l, err = wal.Open(dir, opts)
	require.NoError(t, err, "reopening after a clean Close")
	_, got := readAll(t, l, 0)
	require.Len(t, got, len(formatV1Records())+n)
	require.NoError(t, l.Close())
}

// TestSealFailedHeaderSyncThenReopen: the seal's sync of the new segment S
// fails (EIO: under Linux the failed sync marks S's pages clean, so S's
// header, written by the roll without a sync, may never reach the disk;
// MemFS.FailNextSync models that). The log is poisoned; the process exits.
// The next Open finds P whole and S's header good in the page cache and
// completes the roll: it syncs S (which writes nothing: the pages are
// clean), writes P's link, rewrites S's unvouched frames, but never
// rewrites S's header. Records appended and synced after that Open are
// acknowledged; a power loss then leaves S with the prepared file's zeros
// as its header and a linked predecessor: Open fails with ErrCorrupt and
// the acknowledged records are gone.
func TestSealFailedHeaderSyncThenReopen(t *testing.T) {
	mem := vfs.NewMem()
	var armed atomic.Bool
	var succ atomic.Pointer[string]
	var fired atomic.Bool
	inj := faultfs.InjectorFunc(func(op faultfs.Op) error {
		if !armed.Load() {
			return nil
		}
		if op.Kind == faultfs.OpRename && succ.Load() == nil && !strings.HasSuffix(filepath.Base(op.Path), ".wal") {
			p := op.Path
			succ.Store(&p)
		}
		if op.Kind == faultfs.OpSync {
			if p := succ.Load(); p != nil && *p == op.Path && fired.CompareAndSwap(false, true) {
				mem.FailNextSync(syscall.EIO) // this very sync fails, as fsync(2) with EIO
			}
		}
		return nil
	})
	opts := wal.Options{SegmentSize: 4 << 10, Policy: policy.SyncInterval(time.Hour)}
	l := openLog(t, faultfs.Inject(mem, inj), opts)
	armed.Store(true)
	var recs [][]byte
	for l.Stats().Rolls == 0 {
		rec := record(4, len(recs), 300)
		_, err := l.Append(rec)
		require.NoError(t, err)
		recs = append(recs, rec)
	}
	require.ErrorIs(t, l.Sync(), wal.ErrPoisoned)
	require.True(t, fired.Load())
	l.Close()

	// The process restarts: the page cache still holds everything.
	img := mem.ProcessCrash()
	opts.FS = img
	l2, err := wal.Open(logDir, opts)
	require.NoError(t, err)
	require.Empty(t, l2.Recovered().DroppedSegment)
	for i := range 3 {
		rec := record(5, i, 100)
		_, err := l2.Append(rec)
		require.NoError(t, err)
		recs = append(recs, rec)
	}
	require.NoError(t, l2.Sync()) // every record is acknowledged as durable
	require.NoError(t, l2.Close())

	opts.FS = img.PowerLoss(vfs.KeepAll())
	l3, err := wal.Open(logDir, opts)
	require.NoError(t, err, "Open after a power loss")
	_, got := readAll(t, l3, 0)
	require.Equal(t, recs, got)
	require.NoError(t, l3.Close())
}

// TestSealStress runs appends (some forced to sync), syncs, RemoveBefore,
// TruncateFrom, Readers, ReadRecord and OpenReadOnly of the live log
// against each other with tiny segments, so that most calls meet a pending
// seal; syncs of segment files are slowed at random to widen the windows.
// Nothing may panic, hang, race, or report damage; the closed log reopens
// with every record acknowledged before Close returned.
func TestSealStress(t *testing.T) {
	for _, pol := range []policy.Policy{policy.SyncEveryCommit(), policy.SyncInterval(time.Millisecond), policy.SyncNever(), policy.SyncEveryN(2)} {
		t.Run(pol.String(), func(t *testing.T) {
			mem := vfs.NewMem()
			var slow atomic.Int64
			inj := faultfs.InjectorFunc(func(op faultfs.Op) error {
				if op.Kind == faultfs.OpSync && slow.Add(1)%3 == 0 {
					time.Sleep(time.Duration(op.Index%5) * 100 * time.Microsecond)
				}
				return nil
			})
			opts := wal.Options{SegmentSize: 4 << 10, Policy: pol, RecycleSegments: 2, FS: faultfs.Inject(mem, inj)}
			l, err := wal.Open(logDir, opts)
			require.NoError(t, err)
			stop := make(chan struct{})
			var truncs atomic.Int64 // a reader's LSN may stop being a record's after a cut
			var wg sync.WaitGroup
			var errs sync.Map
			bad := func(what string, err error) {
				if err != nil && errors.Is(err, wal.ErrCorrupt) {
					errs.Store(what+": "+err.Error(), true)
				}
			}
			for a := range 2 {
				wg.Go(func() {
					for i := 0; ; i++ {
						select {
						case <-stop:
							return
						default:
						}
						var err error
						if i%7 == 0 {
							_, err = l.AppendContext(t.Context(), record(a, i, 1+(i*131)%900), wal.ForceSync)
						} else {
							_, err = l.Append(record(a, i, 1+(i*131)%900))
						}
						bad("append", err)
						if err != nil && !errors.Is(err, wal.ErrClosed) {
							errs.Store("append: "+err.Error(), true)
							return
						}
					}
				})
			}
			wg.Go(func() {
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					switch i % 4 {
					case 0:
						bad("sync", l.Sync())
					case 1:
						_, err := l.RemoveBefore(l.SyncedLSN() / 2)
						bad("remove", err)
					case 2:
						if i%40 == 2 {
							// a record's LSN: read one first
							r, err := l.NewReader(l.FirstLSN())
							if err == nil {
								lsn, _, err := r.Next()
								r.Close()
								if err == nil {
									truncs.Add(1) // odd while a cut runs
									bad("truncate", l.TruncateFrom(lsn))
									truncs.Add(1)
								}
							}
						}
					case 3:
						ro, err := wal.OpenReadOnly(logDir, opts)
						bad("openreadonly", err)
						if err == nil {
							ro.Close()
						}
					}
				}
			})
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					cuts := truncs.Load()
					r, err := l.NewReader(l.FirstLSN())
					if err != nil || cuts%2 != 0 {
						if r != nil {
							r.Close()
						}
						continue
					}
					for k := 0; k < 50; k++ {
						lsn, _, err := r.Next()
						if err != nil {
							if truncs.Load() == cuts {
								bad("reader", err)
							}
							break
						}
						_, err = l.ReadRecord(lsn, nil)
						if truncs.Load() == cuts {
							bad("readrecord", err)
						}
					}
					r.Close()
				}
			})
			time.Sleep(700 * time.Millisecond)
			cerr := make(chan error, 1)
			go func() { cerr <- l.Close() }()
			select {
			case err := <-cerr:
				require.NoError(t, err)
			case <-time.After(30 * time.Second):
				t.Fatal("Close hung")
			}
			close(stop)
			done := make(chan struct{})
			go func() { wg.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				t.Fatal("a call hung after Close")
			}
			errs.Range(func(k, _ any) bool { t.Error(k); return true })
			st := l.Stats()
			t.Logf("rolls %d, seal waits %d", st.Rolls, st.SealWaits)
			l2, err := wal.Open(logDir, wal.Options{SegmentSize: 4 << 10, Policy: pol, FS: mem.PowerLoss(vfs.KeepRandomSubsetOfBlocks(512, 1))})
			require.NoError(t, err)
			require.NoError(t, l2.Close())
		})
	}
}

// sealFailEveryOp is crashAfterEveryOp with the options given and more
// crash modes: the n-th filesystem operation fails, for every n; the
// workload must stop (poisoned) or go on, never hang, and every image of
// the result must recover every acknowledged record.
func sealFailEveryOp(t *testing.T, opts wal.Options, workload workloadFunc) {
	var n int64
	for n = 1; ; n++ {
		mem := vfs.NewMem()
		if opts.SyncMethod.Direct() {
			mem.SetDirectIOAlignment(512)
		}
		inj, fired := failNth(n)
		h := &history{}
		done := workload(t, faultfs.Inject(mem, inj), opts, h)
		for _, m := range []vfs.CrashMode{vfs.DropAll(), vfs.KeepRandomSubsetOfBlocks(512, n), vfs.TearAtSector(n)} {
			checkRecoveredDepth(t, mem.PowerLoss(m), opts, h, false, fmt.Sprintf("op %d failed, %s", n, m), 0)
		}
		checkRecoveredDepth(t, mem.ProcessCrash(), opts, h, false, fmt.Sprintf("op %d failed, process crash", n), 0)
		if t.Failed() {
			return
		}
		if done && !fired.Load() {
			break
		}
		require.Less(t, n, int64(5000), "the workload never finishes")
	}
	t.Logf("failed each of %d operations", n-1)
}

func TestSealFailEveryOp(t *testing.T) {
	// BufferedInterval and AsyncCommit allocate their spares, the others
	// zero-fill them.
	pols := []policy.Policy{policy.SyncEveryCommit(), policy.SyncEveryN(3), policy.SyncInterval(time.Millisecond),
		policy.BufferedInterval(time.Millisecond, time.Millisecond), policy.AsyncCommit(time.Millisecond, 0), policy.SyncNever()}
	for _, m := range []vfs.SyncMethod{vfs.Fdatasync, vfs.ODirect}[:longtest.Pick(2, 1)] { // O_DIRECT with DURAWAL_LONG=1
		for _, pol := range pols[:longtest.Pick(len(pols), 4)] { // by default up to BufferedInterval, which allocates spares
			for _, wl := range workloads {
				t.Run(fmt.Sprintf("%v/%s/%s", m, pol, wl.name), func(t *testing.T) {
					sealFailEveryOp(t, wal.Options{SegmentSize: 4 << 10, Policy: pol, SyncMethod: m}, wl.run)
				})
			}
		}
	}
}

// TestSealSyncEveryNAcrossRolls: under SyncEveryN(n) with one committer,
// every n-th commit's group syncs before it returns, rolls and their
// background seals included.
func TestSealSyncEveryNAcrossRolls(t *testing.T) {
	for _, n := range []int{1, 2, 3} {
		l := openLog(t, vfs.NewMem(), wal.Options{SegmentSize: 4 << 10, Policy: policy.SyncEveryN(n)})
		since := 0
		for i := range 400 {
			_, err := l.Append(record(6, i, 1+(i*53)%700))
			require.NoError(t, err)
			since++
			if l.SyncedLSN() == l.AppendedLSN() {
				since = 0
			}
			require.Less(t, since, n, "commit %d: %d groups without a sync (n=%d)", i, since, n)
		}
		require.Positive(t, l.Stats().Rolls)
		require.NoError(t, l.Close())
	}
}

// sealFsyncgate makes the n-th sync of the workload fail as Linux's fsync
// does (MemFS.FailNextSync: the pages it covered are marked clean and lost
// to a power loss), for every n. The process then restarts (the page cache
// survives), the next Open recovers, a few records are appended and
// synced (acknowledged), the log is closed, and the power goes: the Open
// after that must succeed with every acknowledged record.
func sealFsyncgate(t *testing.T, opts wal.Options, workload workloadFunc) {
	var n int64
	for n = 1; ; n++ {
		mem := vfs.NewMem()
		var syncs atomic.Int64
		var fired atomic.Bool
		inj := faultfs.InjectorFunc(func(op faultfs.Op) error {
			// Segment files only: a failed sync of first-lsn is another
			// (older) matter.
			if op.Kind == faultfs.OpSync && !strings.Contains(op.Path, "-lsn") && syncs.Add(1) == n {
				fired.Store(true)
				mem.FailNextSync(syscall.EIO)
			}
			return nil
		})
		h := &history{}
		done := workload(t, faultfs.Inject(mem, inj), opts, h)
		what := fmt.Sprintf("sync %d failed", n)

		img := mem.ProcessCrash()
		o := opts
		o.FS = img
		l, err := wal.Open(logDir, o)
		require.NoError(t, err, "%s: Open after the restart", what)
		info := l.Recovered()
		lsns, got := readAll(t, l, info.FirstLSN)
		start := 0
		for start < len(h.lsns) && h.lsns[start] < info.FirstLSN {
			start++
		}
		require.GreaterOrEqual(t, start+len(got), h.acked, "%s: lost an acknowledged record at the restart", what)
		h2 := &history{recs: append(h.recs[:start:start], got...), lsns: append(h.lsns[:start:start], lsns...),
			removeAsked: h.removeAsked, kept: h.kept, removeDone: h.removeDone}
		for i := range 3 {
			rec := record(8, i, 200+i*500)
			lsn, err := l.Append(rec)
			require.NoError(t, err, what)
			h2.add(lsn, rec)
		}
		require.NoError(t, l.Sync(), what)
		h2.ack()
		require.NoError(t, l.Close(), what)
		for _, m := range []vfs.CrashMode{vfs.KeepAll(), vfs.DropAll(), vfs.KeepRandomSubsetOfBlocks(512, n)} {
			checkRecoveredDepth(t, img.PowerLoss(m), opts, h2, false, fmt.Sprintf("%s, restart, append, sync, close, %s", what, m), 0)
		}
		if t.Failed() {
			return
		}
		if done && !fired.Load() {
			break
		}
		require.Less(t, n, int64(5000), "the workload never finishes")
	}
	t.Logf("failed each of %d syncs", n-1)
}

func TestSealFsyncgate(t *testing.T) {
	pols := []policy.Policy{policy.SyncEveryCommit(), policy.SyncInterval(time.Millisecond), policy.SyncNever()}
	for _, m := range []vfs.SyncMethod{vfs.Fdatasync, vfs.ODirect}[:longtest.Pick(2, 1)] { // O_DIRECT with DURAWAL_LONG=1
		for _, pol := range pols {
			for _, wl := range workloads {
				t.Run(fmt.Sprintf("%v/%s/%s", m, pol, wl.name), func(t *testing.T) {
					sealFsyncgate(t, wal.Options{SegmentSize: 4 << 10, Policy: pol, SyncMethod: m}, wl.run)
				})
			}
		}
	}
}

// TestSealHeaderDamageDroppedSilently: under SyncEveryCommit the commit
// that rolls syncs the finished segment P, makes the new segment S's name
// and header durable and syncs S. If it returned before P's link was
// durable, damage to S's durable header (zeroed) would look like a header a
// roll never made durable: Open would drop S and the acknowledged record
// with it, and report no error. So the commit must wait for the link (held
// here), and once it has returned, the damage is ErrCorrupt.
func TestSealHeaderDamageDroppedSilently(t *testing.T) {
	mem := vfs.NewMem()
	var hold atomic.Bool
	blocked, release := make(chan struct{}, 1), make(chan struct{})
	inj := faultfs.InjectorFunc(func(op faultfs.Op) error {
		if hold.Load() && op.Kind == faultfs.OpOpenReadWrite && strings.HasSuffix(op.Path, ".wal") {
			select { // the seal's link write
			case blocked <- struct{}{}:
			default:
			}
			<-release
		}
		return nil
	})
	opts := wal.Options{SegmentSize: 4 << 10, Policy: policy.SyncEveryCommit()}
	l := openLog(t, faultfs.Inject(mem, inj), opts)
	hold.Store(true)
	var recs [][]byte
	done := make(chan error, 1)
	go func() {
		for l.Stats().Rolls == 0 {
			rec := record(9, len(recs), 300)
			if _, err := l.Append(rec); err != nil { // returns once durable
				done <- err
				return
			}
			recs = append(recs, rec)
		}
		done <- nil
	}()
	<-blocked
	segs := segments(t, mem)
	require.Len(t, segs, 2)
	time.Sleep(20 * time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("the commit into the new segment returned (%v) before the link that vouches for its header", err)
	default:
	}
	require.LessOrEqual(t, l.SyncedLSN(), segFirst(t, segs[1]), "nothing in the new segment counts as synced before the link")
	close(release)
	require.NoError(t, <-done)
	require.Equal(t, l.AppendedLSN(), l.SyncedLSN(), "every record is acknowledged as durable")

	img := mem.PowerLoss(vfs.DropAll()) // only what was synced
	b := fileBytes(t, img, segs[1])
	clear(b[:32]) // damage: the new segment's durable header is lost
	setFile(t, img, segs[1], b)
	opts.FS = img
	l2, err := wal.Open(logDir, opts)
	if err == nil {
		_, got := readAll(t, l2, 0)
		info := l2.Recovered()
		l2.Close()
		t.Errorf("damage to a durable header was not reported: Open dropped %q and returned %d of %d acknowledged records",
			info.DroppedSegment, len(got), len(recs))
	} else {
		require.ErrorIs(t, err, wal.ErrCorrupt)
	}
	require.NoError(t, l.Close())
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
