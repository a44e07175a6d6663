package wal_test

import (
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/durawal/durawal/internal/longtest"
	"github.com/durawal/durawal/policy"
	"github.com/durawal/durawal/wal"
	"github.com/durawal/durawal/wal/vfs"
	"github.com/durawal/durawal/wal/vfs/faultfs"
	"github.com/stretchr/testify/require"
)

var (
	seedsFlag = flag.Int("seeds", 0, "seeds for TestPowerLossProperty (default with DURAWAL_LONG=1 2000 with -race, 5000 without; else 200 and 500; or $DURAWAL_SEEDS)")
	seedFlag  = flag.Int64("seed", -1, "run TestPowerLossProperty for this one seed only")
)

// history is what a workload did: the records whose Append returned nil, in
// LSN order, how many of them were acknowledged as durable, and what it
// asked RemoveBefore to drop.
type history struct {
	mu    sync.Mutex // guards the fields while a snapshot may read them
	recs  [][]byte
	lsns  []wal.LSN
	acked int // recs[:acked] were covered by a sync that returned nil

	removeAsked wal.LSN // the highest LSN passed to RemoveBefore, 0 if none
	kept        wal.LSN // what the last completed RemoveBefore returned
	removeDone  bool    // that RemoveBefore returned nil
}

func (h *history) add(lsn wal.LSN, rec []byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.recs, h.lsns = append(h.recs, rec), append(h.lsns, lsn)
}

// ack records that every record added so far is durable.
func (h *history) ack() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.acked = len(h.recs)
}

// state returns a copy of the acknowledgement and removal state.
func (h *history) state() *history {
	h.mu.Lock()
	defer h.mu.Unlock()
	return &history{acked: h.acked, removeAsked: h.removeAsked, kept: h.kept, removeDone: h.removeDone}
}

// checkRecovered opens the log on img and checks the recovery invariants
// against h: Open succeeds; the records read back are a contiguous run of
// h's records (byte-identical, same LSNs, no holes) that starts at the first
// segment kept and includes every acknowledged record not removed by
// RemoveBefore; if all is set, every record of h. It then appends to the
// recovered log, closes and reopens it, to show recovery leaves a usable log.
func checkRecovered(t *testing.T, img vfs.FS, opts wal.Options, h *history, all bool, what string) {
	t.Helper()
	checkRecoveredDepth(t, img, opts, h, all, what, 1)
}

// checkRecoveredDepth is checkRecovered; while depth > 0 it also crashes the
// recovered log once more, after its first new append and before anything
// syncs it, and checks that image the same way (a crash during or right
// after recovery).
func checkRecoveredDepth(t *testing.T, img vfs.FS, opts wal.Options, h *history, all bool, what string, depth int) {
	t.Helper()
	opts.FS = img
	l, err := wal.Open(logDir, opts)
	require.NoError(t, err, "%s: Open after the crash", what)
	info := l.Recovered()
	lsns, got := readAll(t, l, info.FirstLSN)

	if h.removeAsked == 0 {
		require.Zero(t, info.FirstLSN, "%s: nothing was removed", what)
	} else {
		require.LessOrEqual(t, info.FirstLSN, h.removeAsked, "%s: removed more than asked", what)
		if h.removeDone {
			require.Equal(t, h.kept, info.FirstLSN, "%s: a completed removal is durable", what)
		}
	}
	start := 0
	for start < len(h.lsns) && h.lsns[start] < info.FirstLSN {
		start++
	}
	requireRecoveredRun(t, what, lsns, got, h.lsns, h.recs, start, h.acked)
	if all {
		require.Equal(t, len(h.recs), start+len(got), "%s: lost a written record", what)
	}
	end := info.FirstLSN
	if n := len(got); n > 0 {
		end = lsns[n-1] + wal.LSN(frameSize(len(got[n-1])))
	}
	require.Equal(t, end, info.EndLSN, "%s", what)

	// The recovered log is usable: it appends at its end and reopens.
	var more [][]byte
	for i := range 3 {
		rec := record(9, i, 50+i*300)
		lsn, err := l.Append(rec)
		require.NoError(t, err, "%s: append after recovery", what)
		require.Equal(t, end, lsn, "%s: next append LSN", what)
		end += wal.LSN(frameSize(len(rec)))
		more = append(more, rec)
		if mem, ok := img.(*vfs.MemFS); ok && i == 0 && depth > 0 {
			n := start + len(got)
			h2 := &history{
				recs:  append(h.recs[:n:n], rec),
				lsns:  append(h.lsns[:n:n], lsn),
				acked: h.acked, removeAsked: h.removeAsked, kept: h.kept, removeDone: h.removeDone,
			}
			mode := vfs.KeepRandomSubsetOfBlocks(512, int64(len(what)+n))
			checkRecoveredDepth(t, mem.PowerLoss(mode), opts, h2, false, what+", then after recovery "+mode.String(), depth-1)
		}
	}
	require.NoError(t, l.Close(), what)
	l, err = wal.Open(logDir, opts)
	require.NoError(t, err, "%s: second Open", what)
	require.Zero(t, l.Recovered().TornBytes, "%s: second Open found a torn tail: %+v; first Open %+v; end after appends %d", what, l.Recovered(), info, end)
	_, got2 := readAll(t, l, info.FirstLSN)
	require.Equal(t, append(got, more...), got2, "%s: after the second Open", what)
	require.NoError(t, l.Close(), what)
}

// raceEnabled reports whether the test binary was built with -race.
var raceEnabled = func() bool {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, s := range bi.Settings {
		if s.Key == "-race" {
			return s.Value == "true"
		}
	}
	return false
}()

// seedCount returns how many seeds TestPowerLossProperty runs.
func seedCount(t *testing.T) int {
	if *seedsFlag > 0 {
		return *seedsFlag
	}
	if s := os.Getenv("DURAWAL_SEEDS"); s != "" {
		n, err := strconv.Atoi(s)
		require.NoError(t, err, "DURAWAL_SEEDS")
		return n
	}
	if testing.Short() {
		return 200
	}
	if raceEnabled {
		return longtest.Pick(2000, 200)
	}
	return longtest.Pick(5000, 500)
}

// otherMethodShare is the fraction of the seeds each sync method other than
// the default runs in TestPowerLossProperty (a slice keeps -race time
// reasonable; CI slices can raise -seeds).
const otherMethodShare = 10

// TestPowerLossProperty runs a random workload per seed (appends of random
// sizes up to MaxRecordSize, syncs, batches, rolls of 4–16 KiB segments, a
// RemoveBefore) under a random policy, crashes it without Close in every
// PowerLoss mode and as a process crash, and checks the recovery invariants
// on each image. All seeds run with the default sync method (fdatasync),
// and one in otherMethodShare with each other method; O_DIRECT runs on a
// MemFS that fails misaligned I/O with EINVAL, at 512- and 4096-byte
// alignment by turns. Some images are also reopened with the opposite kind
// of I/O (direct ↔ buffered). Replay one seed with -seed=N (all methods).
func TestPowerLossProperty(t *testing.T) {
	n := seedCount(t)
	first := int64(1)
	if *seedFlag >= 0 {
		first, n = *seedFlag, 1
	}
	start := time.Now()
	var images atomic.Int64
	t.Run("seeds", func(t *testing.T) { // returns once its parallel subtests are done
		for _, m := range vfs.SyncMethods() {
			count := n
			if m != vfs.Fdatasync {
				count = max(1, n/otherMethodShare)
			}
			for seed := first; seed < first+int64(count); seed++ {
				powerLossSeed(t, seed, m, &images)
			}
		}
	})
	t.Logf("%d seeds, %d crash images recovered in %s", n, images.Load(), time.Since(start).Round(time.Millisecond))
}

// otherIO returns a method of the opposite kind of I/O to m: buffered for
// a direct method, O_DIRECT for a buffered one.
func otherIO(m vfs.SyncMethod) vfs.SyncMethod {
	if m.Direct() {
		return m.WithoutDirect()
	}
	return vfs.ODirect
}

func powerLossSeed(t *testing.T, seed int64, method vfs.SyncMethod, images *atomic.Int64) {
	name := fmt.Sprintf("seed=%d", seed)
	if method != vfs.Fdatasync {
		name = fmt.Sprintf("method=%v/seed=%d", method, seed)
	}
	t.Run(name, func(t *testing.T) {
		t.Parallel()
		defer func() {
			if t.Failed() {
				t.Logf("replay with: go test ./wal -run TestPowerLossProperty -seed=%d", seed)
			}
		}()
		rng := rand.New(rand.NewPCG(uint64(seed), 0xc0ffee))
		segSize := int64(4<<10) * int64(1+rng.IntN(4))
		pols := []policy.Policy{policy.SyncNever(), policy.SyncEveryCommit(), policy.SyncEveryN(3)}
		pol := pols[rng.IntN(len(pols))]
		opts := wal.Options{SegmentSize: segSize, Policy: pol, SyncMethod: method}
		if seed%3 == 1 {
			opts = wal.WithScanWindow(opts, 48+8*int64(rng.IntN(64))) // frames straddle recovery's windows
		}
		maxRec := int(segSize) - 112 // header 64, frame header 24, end/link frame room 24
		mem := vfs.NewMem()
		mem.SetDirectIOAlignment([]int{512, 4096}[seed%2])
		l := openLog(t, mem, opts)
		defer l.Close()

		h := &history{}
		size := func() int {
			switch r := rng.IntN(100); {
			case r < 70:
				return 1 + rng.IntN(200)
			case r < 95:
				return 1 + rng.IntN(2000)
			default:
				return maxRec - rng.IntN(64)
			}
		}
		ops := 10 + rng.IntN(50)
		for i := range ops {
			switch r := rng.IntN(100); {
			case r < 70:
				rec := record(int(seed), i, size())
				lsn, err := l.Append(rec)
				require.NoError(t, err)
				h.add(lsn, rec)
				if pol.Kind() == policy.KindSyncEveryCommit || method.WriteThrough() {
					h.acked = len(h.recs)
				}
			case r < 80:
				recs := make([][]byte, 1+rng.IntN(4))
				for j := range recs {
					recs[j] = record(int(seed), i*10+j, size())
				}
				lsn, err := l.AppendBatchContext(t.Context(), recs)
				require.NoError(t, err)
				for _, rec := range recs {
					h.add(lsn, rec)
					lsn += wal.LSN(frameSize(len(rec)))
				}
				if pol.Kind() == policy.KindSyncEveryCommit || method.WriteThrough() {
					h.acked = len(h.recs)
				}
			case r < 95:
				require.NoError(t, l.Sync())
				h.acked = len(h.recs)
			default:
				if len(h.lsns) == 0 {
					continue
				}
				at := h.lsns[rng.IntN(len(h.lsns))]
				kept, err := l.RemoveBefore(at)
				require.NoError(t, err)
				require.LessOrEqual(t, kept, max(h.removeAsked, at))
				h.removeAsked, h.kept, h.removeDone = max(h.removeAsked, at), kept, true
			}
		}
		if h.removeDone {
			// A later RemoveBefore with a lower LSN drops nothing, so the
			// first kept segment is the highest kept ever returned.
			h.kept, _ = l.RemoveBefore(0)
		}

		modes := []vfs.CrashMode{
			vfs.DropAll(), vfs.KeepAll(), vfs.TearAtSector(seed),
			vfs.KeepRandomSubsetOfBlocks(512, seed), vfs.KeepRandomSubsetOfBlocks(4096, seed),
		}
		for _, mode := range modes {
			// The deterministic modes leave nothing torn for a second crash
			// to catch; the random ones and the process crash do.
			all := mode == vfs.KeepAll()
			depth := 1
			if mode == vfs.DropAll() || all {
				depth = 0
			}
			checkRecoveredDepth(t, mem.PowerLoss(mode), opts, h, all, fmt.Sprintf("seed %d, %s, %v, %s", seed, pol, method, mode), depth)
			images.Add(1)
		}
		if method != vfs.Fdatasync || seed%4 == 0 {
			// A log written with O_DIRECT padding reopens with buffered
			// I/O, and the reverse.
			other := opts
			other.SyncMethod = otherIO(method)
			mode := vfs.TearAtSector(seed + 1)
			checkRecoveredDepth(t, mem.PowerLoss(mode), other, h, false,
				fmt.Sprintf("seed %d, %s, written with %v, reopened with %v, %s", seed, pol, method, other.SyncMethod, mode), 1)
			images.Add(1)
		}
		// A process crash keeps everything written; every policy here
		// returns from Append only after the write.
		checkRecovered(t, mem.ProcessCrash(), opts, h, true, fmt.Sprintf("seed %d, %s, ProcessCrash", seed, pol))
		images.Add(1)
	})
}

// workload appends 60 records of 1..600 bytes to the log in logDir on fsys
// with 4 KiB segments (so it rolls about 7 times), syncing every fifth, with
// one RemoveBefore that drops several segments. It stops at the first error. done reports that it
// ran to the end, Close included, without an error.
func workload(t *testing.T, fsys vfs.FS, opts wal.Options, h *history) (done bool) {
	opts.FS = fsys
	l, err := wal.Open(logDir, opts)
	if err != nil {
		return false
	}
	defer func() {
		if !done {
			l.Close()
		}
	}()
	for i := range 60 {
		if !appendStep(t, l, opts, h, record(1, i, 1+(i*97)%600), i%5 == 4) {
			return false
		}
		if i == 45 && !removeStep(l, h, h.lsns[35]) {
			return false
		}
	}
	if err := l.Close(); err != nil {
		return false
	}
	return true
}

// appendStep appends rec to l and records it in h, acknowledged if the
// policy syncs every commit; with sync it then syncs and acknowledges
// everything. It returns false once the log failed (checked).
func appendStep(t *testing.T, l *wal.Log, opts wal.Options, h *history, rec []byte, sync bool) bool {
	lsn, err := l.Append(rec)
	if err != nil {
		if errors.Is(err, wal.ErrDurabilityUnknown) {
			h.add(lsn, rec) // it may or may not be in the log
		}
		checkFailedLog(t, l, err)
		return false
	}
	h.add(lsn, rec)
	if opts.Policy.Kind() == policy.KindSyncEveryCommit {
		h.ack()
	}
	if sync {
		if err := l.Sync(); err != nil {
			checkFailedLog(t, l, err)
			return false
		}
		h.ack()
	}
	return true
}

// removeStep asks l to remove what lies before at, recording the request
// in h first and its result after.
func removeStep(l *wal.Log, h *history, at wal.LSN) bool {
	h.mu.Lock()
	h.removeAsked, h.removeDone = at, false
	h.mu.Unlock()
	kept, err := l.RemoveBefore(at)
	if err != nil {
		return false
	}
	h.mu.Lock()
	h.kept, h.removeDone = kept, true
	h.mu.Unlock()
	return true
}

// workloads are the workloads the crash tests run: the basic one, and one
// that checkpoints with RemoveBefore after every roll, so that most
// segments reuse a recycled file full of frames of earlier LSNs.
var workloads = []struct {
	name string
	run  workloadFunc
}{{"basic", workload}, {"recycling", recycleWorkload}}

// workloadFunc runs a workload on the log in logDir on fsys, recording in h
// what it appended, acknowledged and removed; it reports whether it ran to
// the end, Close included, without an error.
type workloadFunc func(t *testing.T, fsys vfs.FS, opts wal.Options, h *history) (done bool)

// recycleWorkload appends 150 records of 1 to 600 bytes, syncing every 5th,
// and after every roll removes every segment but the last two: a file RemoveBefore
// keeps (Options.RecycleSegments) becomes the next segment. It fails the
// test if no segment was reused.
func recycleWorkload(t *testing.T, fsys vfs.FS, opts wal.Options, h *history) (done bool) {
	opts.FS = fsys
	l, err := wal.Open(logDir, opts)
	if err != nil {
		return false
	}
	defer func() {
		if !done {
			l.Close()
		}
	}()
	rolls := uint64(0)
	for i := range 150 {
		if !appendStep(t, l, opts, h, record(2, i, 1+(i*197)%600), i%5 == 4) {
			return false
		}
		if r := l.Stats().Rolls; r != rolls && len(h.lsns) > 30 {
			rolls = r
			if !removeStep(l, h, h.lsns[len(h.lsns)-30]) {
				return false
			}
		}
	}
	st := l.Stats()
	if err := l.Close(); err != nil {
		return false
	}
	require.GreaterOrEqual(t, st.Prepare.Recycled, uint64(5), "the workload reuses segments")
	return true
}

// checkFailedLog checks that after an I/O error the log is either poisoned
// (every later call fails) or fine (it takes an append).
func checkFailedLog(t *testing.T, l *wal.Log, err error) {
	t.Helper()
	if errors.Is(err, wal.ErrPoisoned) {
		_, err := l.Append([]byte("after poison"))
		require.ErrorIs(t, err, wal.ErrPoisoned)
		require.ErrorIs(t, l.Sync(), wal.ErrPoisoned)
		require.True(t, l.Stats().Poisoned)
		return
	}
	require.False(t, l.Stats().Poisoned, "error %v does not say poisoned", err)
}

// failNth returns an injector that fails the n-th filesystem operation
// with faultfs.ErrInjected, and whether it has.
func failNth(n int64) (faultfs.Injector, *atomic.Bool) {
	fired := new(atomic.Bool)
	return faultfs.InjectorFunc(func(op faultfs.Op) error {
		if op.Index == n {
			fired.Store(true)
			return faultfs.ErrInjected
		}
		return nil
	}), fired
}

// TestCrashAfterEveryOp fails the n-th filesystem operation of the workload
// for n = 1, 2, … until the workload completes without reaching n, and
// checks after each failure, on a power-loss image keeping only synced
// state, that every record acknowledged as durable comes back (STYLE B.10
// snippet 5).
func TestCrashAfterEveryOp(t *testing.T) {
	for _, pol := range []policy.Policy{policy.SyncEveryCommit(), policy.SyncNever()} {
		for _, wl := range workloads {
			for _, window := range scanWindows[longtest.Pick(0, 1):] { // by default the 64-byte window only
				t.Run(fmt.Sprintf("policy=%s/%s/window=%d", pol, wl.name, window), func(t *testing.T) {
					crashAfterEveryOp(t, pol, wl.run, window)
				})
			}
		}
	}
}

// scanWindows are the recovery read windows the crash tests run with: the
// default, and 64 bytes, so that frames straddle windows in 4 KiB segments.
var scanWindows = []int64{0, 64}

func crashAfterEveryOp(t *testing.T, pol policy.Policy, workload workloadFunc, window int64) {
	opts := wal.WithScanWindow(wal.Options{SegmentSize: 4 << 10, Policy: pol}, window)
	var n int64
	for n = 1; ; n++ {
		mem := vfs.NewMem()
		inj, fired := failNth(n)
		h := &history{}
		done := workload(t, faultfs.Inject(mem, inj), opts, h)
		what := fmt.Sprintf("%s, op %d failed", pol, n)
		checkRecovered(t, mem.PowerLoss(vfs.DropAll()), opts, h, false, what)
		if done && !fired.Load() {
			break // the workload finished before op n: every op was covered
		}
		require.Less(t, n, int64(5000), "the workload never finishes")
	}
	t.Logf("%s: failed each of %d operations", pol, n-1)
}

// TestCrashImagesAtEveryOp crashes the workload just before each of its
// filesystem operations, without failing any, in every PowerLoss mode and
// as a process crash: so there is a crash inside every step of every
// segment roll (prepare, header, sync, rename, directory sync, close) and
// of every segment removal. Each image must recover every record
// acknowledged before the crash, as a contiguous suffix that continues at
// the right LSN.
func TestCrashImagesAtEveryOp(t *testing.T) {
	for _, pol := range []policy.Policy{policy.SyncEveryCommit(), policy.SyncNever()} {
		for _, wl := range workloads {
			for _, window := range scanWindows[longtest.Pick(0, 1):] { // by default the 64-byte window only
				t.Run(fmt.Sprintf("policy=%s/%s/window=%d", pol, wl.name, window), func(t *testing.T) {
					crashImagesAtEveryOp(t, wal.WithScanWindow(wal.Options{SegmentSize: 4 << 10, Policy: pol}, window), wl.run)
				})
			}
		}
	}
}

// crashImagesAtEveryOp runs workload with opts, takes a crash image (every
// PowerLoss mode and a process crash) before each filesystem operation, and
// checks that each recovers (checkRecovered).
func crashImagesAtEveryOp(t *testing.T, opts wal.Options, workload workloadFunc) {
	type snapshot struct {
		img  vfs.FS
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
	var counts [32]int
	inj := faultfs.InjectorFunc(func(op faultfs.Op) error {
		st := h.state()
		n := op.Index
		modes := []vfs.CrashMode{vfs.DropAll(), vfs.KeepAll(), vfs.TearAtSector(n),
			vfs.KeepRandomSubsetOfBlocks(512, n), vfs.KeepRandomSubsetOfBlocks(4096, n)}
		var add []snapshot
		for _, m := range modes {
			add = append(add, snapshot{mem.PowerLoss(m), st, fmt.Sprintf("before op %d (%s %s), %s", n, op.Kind, op.Path, m)})
		}
		add = append(add, snapshot{mem.ProcessCrash(), st, fmt.Sprintf("before op %d (%s %s), process crash", n, op.Kind, op.Path)})
		// The segment preparer runs beside the workload: a removal
		// may start while the images are taken. What was asked by
		// the end of it bounds what they may lack.
		// A RemoveBefore that started meanwhile (the recycling
		// workload calls it again and again) may have moved the
		// start past the last completed one's.
		if now := h.state(); now.removeAsked != st.removeAsked {
			st.removeAsked, st.removeDone = now.removeAsked, false
		}
		mu.Lock()
		snaps = append(snaps, add...)
		counts[op.Kind]++
		mu.Unlock()
		return nil
	})
	require.True(t, workload(t, faultfs.Inject(mem, inj), opts, h))
	require.Positive(t, counts[faultfs.OpRename], "the workload rolls segments")
	require.Positive(t, counts[faultfs.OpRemove], "the workload removes segments")
	for _, s := range snaps {
		s.h.recs, s.h.lsns = h.recs, h.lsns // what may have reached the image
		checkRecovered(t, s.img, opts, s.h, false, s.what)
		if t.Failed() {
			return
		}
	}
	t.Logf("%d crash images, %d renames, %d removes", len(snaps), counts[faultfs.OpRename], counts[faultfs.OpRemove])
}

// TestProcessCrashThenPowerLoss: a process crash leaves written but
// unsynced frames; the next Open recovers them, and frames appended after it
// carry a watermark. A power loss before anything syncs them again must not
// turn the old unsynced frames into "damaged synced data": Open must make
// what it recovered durable before it claims it as synced.
func TestProcessCrashThenPowerLoss(t *testing.T) {
	opts := wal.Options{Policy: policy.SyncNever(), SegmentSize: 64 << 10}
	for seed := range int64(64) {
		mem := vfs.NewMem()
		h := &history{}
		l := openLog(t, mem, opts)
		for i := range 8 {
			rec := record(6, i, 1000)
			lsn, err := l.Append(rec)
			require.NoError(t, err)
			h.add(lsn, rec)
			if i == 1 {
				require.NoError(t, l.Sync())
				h.ack()
			}
		}
		img := mem.ProcessCrash()
		require.NoError(t, l.Close())

		l = openLog(t, img, opts)
		_, got := readAll(t, l, 0)
		require.Equal(t, h.recs, got, "a process crash keeps every written record")
		for i := range 4 {
			rec := record(7, i, 1000)
			lsn, err := l.Append(rec)
			require.NoError(t, err)
			h.add(lsn, rec)
		}
		for _, mode := range []vfs.CrashMode{vfs.KeepRandomSubsetOfBlocks(512, seed), vfs.TearAtSector(seed), vfs.DropAll()} {
			checkRecovered(t, img.PowerLoss(mode), opts, h, false, fmt.Sprintf("process crash, reopen, append, then %s", mode))
		}
		require.NoError(t, l.Close())
	}
}
