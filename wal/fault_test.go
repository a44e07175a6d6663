package wal_test

// Fault tests (docs/failure-model.md): a failed sync poisons the log and
// fails its whole group, EINTR is retried, ENOSPC at segment creation is
// back-pressure and not poison, a short write never leaves a partial frame
// that later frames follow, and retrying a failed sync loses acknowledged data.

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/durawal/durawal/policy"
	"github.com/durawal/durawal/wal"
	"github.com/durawal/durawal/wal/vfs"
	"github.com/durawal/durawal/wal/vfs/faultfs"
	"github.com/stretchr/testify/require"
)

const faultDir = "/wal"

// payload returns a record of n bytes that names i.
func payload(i, n int) []byte {
	b := make([]byte, n)
	s := fmt.Sprintf("rec-%d:", i)
	for k := range b {
		b[k] = s[k%len(s)]
	}
	return b
}

// requirePoisoned checks that every entry point of l fails closed.
func requirePoisoned(t *testing.T, l *wal.Log) {
	t.Helper()
	_, err := l.Append([]byte("after"))
	require.ErrorIs(t, err, wal.ErrPoisoned, "Append after the failure")
	require.ErrorIs(t, l.Sync(), wal.ErrPoisoned, "Sync after the failure")
	require.ErrorIs(t, l.WaitDurable(t.Context(), l.AppendedLSN()-1), wal.ErrPoisoned, "WaitDurable after the failure")
	require.True(t, l.Stats().Poisoned)
}

// TestFaultSyncEIOFailsWholeGroup is §7.5 properties 1 and 2: EIO from the
// sync of a group of 8 concurrent committers fails every one of them, poisons
// the log, and stops all later syncs; after a power loss every commit
// acknowledged before that group is there.
func TestFaultSyncEIOFailsWholeGroup(t *testing.T) {
	mem := vfs.NewMem()
	gate := newSyncGate()
	var syncs, failAt atomic.Int64
	h := faultfs.Inject(mem, faultfs.InjectorFunc(func(op faultfs.Op) error {
		if op.Kind == faultfs.OpSync {
			if syncs.Add(1) == failAt.Load() {
				mem.FailNextSync(syscall.EIO)
			}
			gate.hold()
		}
		return nil
	}))
	opts := wal.Options{FS: h, SegmentSize: 1 << 20} // no segment preparation during the test
	l, err := wal.Open(faultDir, opts)
	require.NoError(t, err)

	var j journal
	for i := range 20 {
		require.NoError(t, j.appendRec(l, payload(i, 100), false).err)
	}
	fsyncsBefore := l.Stats().Fsyncs

	// S leads a group whose sync is held at the gate; 8 committers queue
	// behind it and form the next group, whose sync fails.
	gate.arm(true)
	sDone := make(chan jrec)
	go func() { sDone <- j.appendRec(l, payload(100, 100), false) }()
	gate.waitEntered(t)
	const n = 8
	results := make(chan jrec, n)
	for i := range n {
		go func() { results <- j.appendRec(l, payload(200+i, 100), false) }()
	}
	waitFor(t, "8 queued committers", func() bool { return l.Stats().Group.Active == n+1 })
	groupsBefore := l.Stats().Group.Groups
	failAt.Store(syncs.Load() + 1) // the next sync, the 8's group's, fails
	gate.arm(false)
	gate.release <- struct{}{}

	require.NoError(t, (<-sDone).err, "S's sync succeeded")
	for range n {
		r := <-results
		require.Error(t, r.err, "a member of the failed group was acknowledged")
		require.ErrorIs(t, r.err, wal.ErrDurabilityUnknown)
		require.ErrorIs(t, r.err, wal.ErrPoisoned)
		require.ErrorIs(t, r.err, syscall.EIO)
	}
	st := l.Stats()
	require.Equal(t, groupsBefore+2, st.Group.Groups, "S's group, then the 8 committers as one group")
	require.Equal(t, fsyncsBefore+1, st.Fsyncs, "only S's sync succeeded")
	require.Equal(t, uint64(1), st.FsyncErrors)
	require.True(t, st.Poisoned)
	require.Less(t, st.SyncedLSN, st.AppendedLSN, "a failed sync never marks the log clean")

	requirePoisoned(t, l)
	syncCalls := syncs.Load()
	require.ErrorIs(t, l.Close(), wal.ErrPoisoned)
	require.Equal(t, fsyncsBefore+1, l.Stats().Fsyncs, "no fsync after the failure")
	require.Equal(t, syncCalls, syncs.Load(), "no sync call after the failure, not even by Close")

	want := j.inLog()
	got, err := recoverImage(t, mem.PowerLoss(vfs.DropAll()), faultDir, opts)
	require.NoError(t, err)
	k := checkPrefix(t, "DropAll after EIO", got, want)
	requireSurvivors(t, "DropAll after EIO", want, k, func(r jrec) bool { return r.err == nil }, "acked before the failed group")
}

// TestFaultBackgroundSyncEIO: a failed background sync (SyncInterval)
// poisons the log and never marks it clean.
func TestFaultBackgroundSyncEIO(t *testing.T) {
	for _, pol := range []policy.Policy{
		policy.SyncInterval(5 * time.Millisecond),
		policy.SyncIntervalPostponed(5*time.Millisecond, 20*time.Millisecond),
		policy.BufferedInterval(5*time.Millisecond, 2*time.Millisecond),
		policy.AsyncCommit(5*time.Millisecond, 0),
	} {
		t.Run(pol.String(), func(t *testing.T) {
			mem := vfs.NewMem()
			opts := wal.Options{FS: mem, SegmentSize: 1 << 20, Policy: pol}
			l, err := wal.Open(faultDir, opts)
			require.NoError(t, err)
			var j journal
			for i := range 10 {
				require.NoError(t, j.appendRec(l, payload(i, 100), false).err)
			}
			require.NoError(t, j.syncNow(l))
			syncedBefore := l.SyncedLSN()
			mem.FailNextSync(syscall.EIO)
			require.NoError(t, j.appendRec(l, payload(10, 100), false).err)
			waitFor(t, "the background sync to fail", func() bool { return l.Stats().Poisoned })
			st := l.Stats()
			require.Equal(t, uint64(1), st.FsyncErrors)
			require.Equal(t, syncedBefore, st.SyncedLSN, "a failed background sync never marks the log clean")
			fsyncs := st.Fsyncs
			requirePoisoned(t, l)
			time.Sleep(20 * time.Millisecond) // several ticks
			require.Equal(t, fsyncs, l.Stats().Fsyncs, "the flusher stopped syncing")
			require.ErrorIs(t, l.Close(), wal.ErrPoisoned)

			want := j.inLog()
			got, err := recoverImage(t, mem.PowerLoss(vfs.DropAll()), faultDir, opts)
			require.NoError(t, err)
			k := checkPrefix(t, "DropAll", got, want)
			require.GreaterOrEqual(t, k, 10, "the records Sync made durable survive")
		})
	}
}

// TestFaultEINTRRetried is §7.5 property 4: EINTR from a file sync or a
// directory sync is retried and reaches no caller.
func TestFaultEINTRRetried(t *testing.T) {
	for _, kind := range []faultfs.OpKind{faultfs.OpSync, faultfs.OpSyncDir} {
		for nth := 1; nth <= 6; nth++ {
			t.Run(fmt.Sprintf("%s#%d", kind, nth), func(t *testing.T) {
				mem := vfs.NewMem()
				inj := faultfs.Counted(faultfs.Nth(kind, nth, syscall.EINTR))
				// Small segments, so the directory syncs of rolls come by.
				opts := wal.Options{FS: faultfs.Inject(mem, inj), SegmentSize: 8 << 10}
				l, err := wal.Open(faultDir, opts)
				require.NoError(t, err)
				var j journal
				for i := range 400 {
					require.NoError(t, j.appendRec(l, payload(i, 100), false).err)
				}
				require.NoError(t, l.Close())
				require.Equal(t, int64(1), inj.Fired(), "the EINTR was injected")
				st := l.Stats()
				require.Zero(t, st.FsyncErrors)
				require.False(t, st.Poisoned)
				want := j.inLog()
				got, err := recoverImage(t, mem.PowerLoss(vfs.DropAll()), faultDir, opts)
				require.NoError(t, err)
				require.Equal(t, len(want), checkPrefix(t, "DropAll", got, want))
			})
		}
	}
}

// noSpaceInjector fails the creation of new segments with ENOSPC while full
// is set: in mode "create" the Create of the temporary file fails, in mode
// "zerofill" its zero-filling write is short with ENOSPC, in mode
// "allocate" its allocation (fallocate) fails with ENOSPC. Writes into
// existing (preallocated) segments never fail, as on a real filesystem.
func noSpaceInjector(mode string, segSize int64, full *atomic.Bool, fired *atomic.Int64) faultfs.Injector {
	return faultfs.InjectorFunc(func(op faultfs.Op) error {
		if !full.Load() || !strings.HasSuffix(op.Path, ".wal.tmp") {
			return nil
		}
		switch {
		case mode == "create" && op.Kind == faultfs.OpCreate:
			fired.Add(1)
			return syscall.ENOSPC
		case mode == "zerofill" && op.Kind == faultfs.OpWrite && op.Offset == 0 && int64(op.Len) == segSize:
			fired.Add(1)
			return &faultfs.ShortOp{Keep: op.Len / 2, Err: syscall.ENOSPC}
		case mode == "allocate" && op.Kind == faultfs.OpAllocate:
			fired.Add(1)
			return syscall.ENOSPC
		}
		return nil
	})
}

// TestFaultNoSpaceNoWait: a negative NoSpaceTimeout turns the wait off, as
// a negative value turns off every other feature of Options: the first
// preparation that meets ENOSPC makes the Append that needs the segment
// return ErrNoSpace, with no retry. With a timeout the preparation is
// retried until it passes.
func TestFaultNoSpaceNoWait(t *testing.T) {
	for _, tc := range []struct {
		timeout time.Duration
		retries bool
	}{{-1, false}, {200 * time.Millisecond, true}} {
		t.Run(tc.timeout.String(), func(t *testing.T) {
			const segSize = 8 << 10
			mem := vfs.NewMem()
			var full atomic.Bool
			var fired atomic.Int64
			opts := wal.Options{FS: faultfs.Inject(mem, noSpaceInjector("create", segSize, &full, &fired)),
				SegmentSize: segSize, NoSpaceTimeout: tc.timeout}
			l, err := wal.Open(faultDir, opts)
			require.NoError(t, err)
			defer l.Close()
			full.Store(true)
			var noSpace error
			for i := 0; i < 200 && noSpace == nil; i++ {
				_, noSpace = l.Append(payload(i, 100))
			}
			require.ErrorIs(t, noSpace, wal.ErrNoSpace)
			if tc.retries {
				require.Greater(t, fired.Load(), int64(1), "the preparation is retried while the timeout runs")
			} else {
				require.Equal(t, int64(1), fired.Load(), "one failed preparation, no retry")
			}
		})
	}
}

// TestFaultNoSpaceAtSegmentCreation is §7.4: with the disk full when the
// next segment must be created, Append blocks up to NoSpaceTimeout, then
// returns ErrNoSpace without poisoning; once space is back the log goes on
// and nothing acknowledged is lost. Mode "allocate" runs under
// BufferedInterval, whose new segments are allocated rather than
// zero-filled.
func TestFaultNoSpaceAtSegmentCreation(t *testing.T) {
	for _, mode := range []string{"create", "zerofill", "allocate"} {
		t.Run(mode, func(t *testing.T) {
			const segSize = 8 << 10 // 63 frames of 100-byte records
			const timeout = 150 * time.Millisecond
			mem := vfs.NewMem()
			var full atomic.Bool
			var fired atomic.Int64
			opts := wal.Options{FS: faultfs.Inject(mem, noSpaceInjector(mode, segSize, &full, &fired)),
				SegmentSize: segSize, NoSpaceTimeout: timeout}
			if mode == "allocate" {
				opts.Policy = policy.BufferedInterval(time.Millisecond, time.Millisecond)
			}
			l, err := wal.Open(faultDir, opts)
			require.NoError(t, err)
			var j journal
			for i := range 10 {
				require.NoError(t, j.appendRec(l, payload(i, 100), false).err)
			}

			full.Store(true)
			var noSpace error
			var took time.Duration
			for i := 10; i < 200 && noSpace == nil; i++ {
				start := time.Now()
				r := j.appendRec(l, payload(i, 100), false)
				took = time.Since(start)
				noSpace = r.err
			}
			require.ErrorIs(t, noSpace, wal.ErrNoSpace)
			require.ErrorIs(t, noSpace, syscall.ENOSPC)
			require.GreaterOrEqual(t, took, timeout-time.Millisecond, "Append waited (back-pressure) before giving up")
			require.Less(t, took, timeout+5*time.Second)
			require.Positive(t, fired.Load())
			st := l.Stats()
			require.False(t, st.Poisoned, "ENOSPC at segment creation must not poison")
			require.Positive(t, st.Prepare.Waits)
			require.NoError(t, l.Sync(), "the log still syncs what it holds")
			_, err = l.Append(payload(999, 100))
			require.ErrorIs(t, err, wal.ErrNoSpace, "still full")
			names, err := mem.List(faultDir)
			require.NoError(t, err)
			for _, name := range names {
				require.False(t, strings.HasSuffix(name, ".wal.tmp"), "a failed preparation leaves %s behind", name)
			}

			// Space is back while an Append waits: it goes through. Space
			// returns once a preparation failed again, for this Append.
			f0 := fired.Load()
			go func() {
				for deadline := time.Now().Add(5 * time.Second); fired.Load() == f0 && time.Now().Before(deadline); {
					time.Sleep(100 * time.Microsecond)
				}
				full.Store(false)
			}()
			require.NoError(t, j.appendRec(l, payload(1000, 100), false).err)
			for i := 1001; i < 1200; i++ { // several more rolls
				require.NoError(t, j.appendRec(l, payload(i, 100), false).err)
			}
			require.NoError(t, l.Close())
			require.Positive(t, l.Stats().Rolls) // after Close: a buffered policy rolls when it writes

			want := j.inLog()
			got, err := recoverImage(t, mem.PowerLoss(vfs.DropAll()), faultDir, opts)
			require.NoError(t, err)
			k := checkPrefix(t, "DropAll", got, want)
			require.Equal(t, len(want), k, "nothing acknowledged was lost")
		})
	}
}

// TestFaultShortWriteThenError is §7.3: a segment write that writes part of
// its frames and fails poisons the log; no later frame is ever written after
// the partial one, and every crash image recovers a prefix holding every
// record acknowledged before the failure.
func TestFaultShortWriteThenError(t *testing.T) {
	pols := []policy.Policy{policy.SyncEveryCommit(), policy.SyncEveryN(3), policy.SyncNever(), policy.SyncInterval(5 * time.Millisecond)}
	for seed := range 12 {
		pol := pols[seed%len(pols)]
		t.Run(fmt.Sprintf("%s/seed=%d", pol, seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(seed), 1))
			mem := vfs.NewMem()
			var armed atomic.Bool
			var failed atomic.Bool
			var writesAfter atomic.Int64
			keepFrac := rng.Float64()
			inj := faultfs.InjectorFunc(func(op faultfs.Op) error {
				if op.Kind != faultfs.OpWrite || op.Offset < 32 { // segment frames only, not zero-fill or headers
					return nil
				}
				if failed.Load() {
					writesAfter.Add(1)
					return nil
				}
				if armed.Load() && failed.CompareAndSwap(false, true) {
					return &faultfs.ShortOp{Keep: int(keepFrac * float64(op.Len)), Err: syscall.EIO}
				}
				return nil
			})
			opts := wal.Options{FS: faultfs.Inject(mem, inj), SegmentSize: 64 << 10, Policy: pol}
			l, err := wal.Open(faultDir, opts)
			require.NoError(t, err)
			var j journal
			for i := range 30 {
				require.NoError(t, j.appendRec(l, payload(i, 1+rng.IntN(300)), false).err)
			}
			armed.Store(true)
			var wg sync.WaitGroup
			for g := range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range 50 {
						if r := j.appendRec(l, payload(1000*g+i, 1+(i*37+g)%300), false); r.err != nil {
							return
						}
					}
				}()
			}
			wg.Wait()
			require.True(t, failed.Load(), "the short write was injected")
			st := l.Stats()
			require.True(t, st.Poisoned)
			require.Equal(t, uint64(1), st.WriteErrors)
			requirePoisoned(t, l)
			require.ErrorIs(t, l.Close(), wal.ErrPoisoned)
			require.Zero(t, writesAfter.Load(), "a frame was written after the partial one")

			want := j.inLog()
			for _, r := range want {
				if r.err != nil {
					require.ErrorIs(t, r.err, wal.ErrPoisoned)
				}
			}
			images := map[string]*vfs.MemFS{"process-crash": mem.ProcessCrash()}
			for _, m := range []vfs.CrashMode{vfs.DropAll(), vfs.KeepAll(), vfs.TearAtSector(int64(seed)), vfs.KeepRandomSubsetOfBlocks(512, int64(seed))} {
				images[m.String()] = mem.PowerLoss(m)
			}
			for name, img := range images {
				got, err := recoverImage(t, img, faultDir, opts)
				require.NoError(t, err, name)
				k := checkPrefix(t, name, got, want)
				mustSurvive := func(r jrec) bool { return r.err == nil } // written before ack: survives a process crash
				if name != "process-crash" && pol.Kind() != policy.KindSyncEveryCommit {
					mustSurvive = func(jrec) bool { return false } // only I1/I2 after a power loss
				}
				requireSurvivors(t, name, want, k, mustSurvive, "acked before the failed write")
			}
		})
	}
}

// TestFaultUnsafeRetrySyncLosesAckedData is §7.5 property 3, the fsyncgate
// negative test. Linux marks the pages of a failed fsync clean, so a retried
// fsync "succeeds" without writing them. With the retry on (WithUnsafeRetrySync) the log
// retries, acknowledges the commit as durable, and a power loss shows it
// lost; if the log went on appending, the next Open even finds "synced" data
// missing and reports corruption. With the default the commit gets an error
// instead.
func TestFaultUnsafeRetrySyncLosesAckedData(t *testing.T) {
	run := func(t *testing.T, unsafe bool, more int) (*vfs.MemFS, wal.Options, []jrec, jrec) {
		mem := vfs.NewMem()
		opts := wal.Options{FS: mem, SegmentSize: 1 << 20}
		if unsafe {
			opts = wal.WithUnsafeRetrySync(opts)
		}
		l, err := wal.Open(faultDir, opts)
		require.NoError(t, err)
		var j journal
		for i := range 10 {
			require.NoError(t, j.appendRec(l, payload(i, 100), false).err)
		}
		mem.FailNextSync(syscall.EIO)
		x := j.appendRec(l, payload(10, 100), false)
		for i := range more {
			j.appendRec(l, payload(11+i, 100), false)
		}
		st := l.Stats()
		require.Equal(t, uint64(1), st.FsyncErrors)
		if unsafe {
			require.NoError(t, x.err, "the retried sync 'succeeded' and the commit was acknowledged")
			require.False(t, st.Poisoned)
			require.NoError(t, l.Close())
		} else {
			require.ErrorIs(t, x.err, wal.ErrDurabilityUnknown)
			require.ErrorIs(t, x.err, syscall.EIO)
			require.True(t, st.Poisoned)
			require.ErrorIs(t, l.Close(), wal.ErrPoisoned)
		}
		return mem, opts, j.inLog(), x
	}

	t.Run("unsafe/acked-record-lost", func(t *testing.T) {
		// The retried sync "succeeded" and the record was acknowledged,
		// but its bytes never reached the disk. Before Close's end frame
		// existed the loss was silent; now the end frame vouches for the
		// missing bytes and Open reports them, at the lost record.
		mem, opts, _, x := run(t, true, 0)
		_, err := recoverImage(t, mem.PowerLoss(vfs.DropAll()), faultDir, opts)
		var ce *wal.CorruptionError
		require.ErrorAs(t, err, &ce, "the acknowledged record at LSN %d was lost: this is why retrying a failed sync is unsafe", x.lsn)
		require.ErrorIs(t, err, wal.ErrCorrupt)
		require.Contains(t, ce.Reason, fmt.Sprintf("at LSN %d", x.lsn))
	})
	t.Run("unsafe/later-appends-make-it-corrupt", func(t *testing.T) {
		mem, opts, _, _ := run(t, true, 5)
		_, err := recoverImage(t, mem.PowerLoss(vfs.DropAll()), faultDir, opts)
		var ce *wal.CorruptionError
		require.ErrorAs(t, err, &ce, "acknowledged 'synced' data is missing under later synced frames")
		require.ErrorIs(t, err, wal.ErrCorrupt)
	})
	t.Run("default/error-not-ack", func(t *testing.T) {
		mem, opts, want, _ := run(t, false, 0)
		got, err := recoverImage(t, mem.PowerLoss(vfs.DropAll()), faultDir, opts)
		require.NoError(t, err)
		k := checkPrefix(t, "DropAll", got, want)
		requireSurvivors(t, "DropAll", want, k, func(r jrec) bool { return r.err == nil }, "acked")
	})
}
