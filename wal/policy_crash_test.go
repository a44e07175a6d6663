package wal_test

// Loss bounds per policy (docs/semantics.md, Policies) as property tests on MemFS.
//
// Each seed runs twice. In a testing/synctest bubble ("fake"), the clock
// moves only when every goroutine is blocked, so timer ticks and
// acknowledgment times are exact and no CI noise can make a bound flaky:
// there ε is 1 ms of fake time. Syncs take no time there (F = 0): a sync
// that sleeps would hold the log's sync mutex while sleeping, and a
// goroutine blocked on a mutex is not "durably blocked", so the fake clock
// would never move. The real-clock run ("real") injects sync latencies of
// 0..8 ms (F measured, as FsyncMaxDuration is) and uses a generous
// ε = 50 ms + 5·interval for a 2-core CI machine under -race.
//
// Committers append records of random sizes with random pauses, now and then
// with wal.ForceSync or a Sync call; at a random moment T the test takes an
// atomic ProcessCrash image of the MemFS while they run, and power-loss
// images of that image in several modes. Each image must reopen (I2: no
// corruption error), recover a byte-identical prefix of the append order
// (I1, I2), and hold every record the policy's row promises for that crash:
//
//	policy                     process crash (P)           power loss (L)
//	SyncEveryCommit            every acked                 every acked
//	SyncEveryN(n)              every acked                 (SyncedLSN only)
//	SyncInterval(d)            every acked                 acked ≤ T − (max(d,F) + F + ε)
//	SyncIntervalPostponed(d,m) acked ≤ T − (m + tick + ε)  acked ≤ T − (max(d,F) + 2F + tick + ε)
//	BufferedInterval(d,w)      acked ≤ T − (w + ε)         acked ≤ T − (w + max(d,F) + F + ε)
//	AsyncCommit(w,0)           acked ≤ T − (3w + F + ε)    acked ≤ T − (3w + F + ε)
//	SyncNever                  every acked                 (SyncedLSN only)
//
// For every policy, in addition: every record ending at or before the
// WrittenLSN (SyncedLSN) sampled just before the image survives P (L);
// every Sync that returned before T and every ForceSync commit acked before
// T make all records appended before them survive L (I5); a Close that
// returned nil makes every record survive L (I4); and SyncedLSN ≤
// WrittenLSN ≤ AppendedLSN, each non-decreasing, throughout (I3).

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/durawal/durawal/internal/decide"
	"github.com/durawal/durawal/internal/longtest"
	"github.com/durawal/durawal/policy"
	"github.com/durawal/durawal/wal"
	"github.com/durawal/durawal/wal/vfs"
	"github.com/stretchr/testify/require"
)

var (
	crashSeeds = flag.Int("crash.seeds", 0, "seeds per policy in TestPolicyCrashBounds (0: 4, 8 with DURAWAL_LONG=1, or 2 with -short); the real-clock runs take a quarter")
	crashSeed0 = flag.Int("crash.seed0", 0, "first seed of TestPolicyCrashBounds, to run CI-sized slices")
)

// fakeEps is the slack of the fake clock: timers fire on time, so 1 ms
// only covers the order of events within one instant.
const fakeEps = time.Millisecond

// realEps is the slack of the real clock for a policy with interval d:
// scheduler delays of tens of ms happen on a loaded 2-core machine, and
// under -race, with this test's subtests and other packages' tests in
// parallel, a flusher was once seen starved for over 90 ms (CI). The exact
// bounds are checked on the fake clock; the real clock checks that nothing
// is lost beyond them by more than scheduling noise.
func realEps(d time.Duration) time.Duration {
	if raceEnabled {
		return 200*time.Millisecond + 5*d
	}
	return 50*time.Millisecond + 5*d
}

// never marks a crash kind for which a policy promises nothing time-based.
const never = time.Duration(-1)

type crashCase struct {
	pol policy.Policy
	// window returns, for the largest sync duration F, how old an
	// acknowledgment must be to be promised to survive a process crash
	// (p) and a power loss (l); 0 means every acknowledged record, never
	// nothing beyond the watermarks.
	window func(F, eps time.Duration) (p, l time.Duration)
}

func crashCases() []crashCase {
	const d = 10 * time.Millisecond
	postponed := policy.SyncIntervalPostponed(d, 30*time.Millisecond)
	buffered := policy.BufferedInterval(20*time.Millisecond, 5*time.Millisecond)
	const wd = 5 * time.Millisecond
	return []crashCase{
		{policy.SyncEveryCommit(), func(_, _ time.Duration) (time.Duration, time.Duration) { return 0, 0 }},
		{policy.SyncEveryN(4), func(_, _ time.Duration) (time.Duration, time.Duration) { return 0, never }},
		{policy.SyncInterval(d), func(F, eps time.Duration) (time.Duration, time.Duration) {
			return 0, max(d, F) + F + eps
		}},
		{postponed, func(F, eps time.Duration) (time.Duration, time.Duration) {
			tick := decide.Tick(postponed)
			return postponed.MaxPostpone() + tick + eps, max(d, F) + 2*F + tick + eps
		}},
		{buffered, func(F, eps time.Duration) (time.Duration, time.Duration) {
			w := buffered.WriteDelay()
			return w + eps, w + max(buffered.Interval(), F) + F + eps
		}},
		{policy.AsyncCommit(wd, 0), func(F, eps time.Duration) (time.Duration, time.Duration) {
			return 3*wd + F + eps, 3*wd + F + eps
		}},
		{policy.SyncNever(), func(_, _ time.Duration) (time.Duration, time.Duration) { return 0, never }},
	}
}

// crashRun is what one seed leaves for checking outside its bubble.
type crashRun struct {
	opts            wal.Options
	want            []jrec
	syncs           []syncPoint
	T               time.Time
	written, synced wal.LSN // sampled just before the image
	F               time.Duration
	p               *vfs.MemFS // the process-crash image at T
	closed          *vfs.MemFS // power loss after Close
	monotone        string     // an I3 violation, if any
}

// TestPolicyCrashBounds checks every policy's bounds under every sync
// method: the default (fdatasync) with all seeds, each other method with a
// quarter of them (at least one per clock). O_DIRECT runs on a MemFS that
// fails misaligned I/O, at 512- or 4096-byte alignment by seed.
func TestPolicyCrashBounds(t *testing.T) {
	seeds := *crashSeeds
	if seeds == 0 {
		seeds = longtest.Pick(8, 4) // 8 seeds per case with DURAWAL_LONG=1
		if testing.Short() {
			seeds = 2
		}
	}
	for _, m := range vfs.SyncMethods() {
		for _, clock := range []string{"fake", "real"} {
			for _, cc := range crashCases() {
				name := clock + "/" + cc.pol.String()
				if m != vfs.Fdatasync {
					name = m.String() + "/" + name
				}
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					policyCrashSeeds(t, cc, m, clock, seeds)
				})
			}
		}
	}
}

func policyCrashSeeds(t *testing.T, cc crashCase, m vfs.SyncMethod, clock string, seeds int) {
	n := seeds
	if clock == "real" {
		n = max(1, seeds/4) // each costs ~0.3 s of wall time
	}
	if m != vfs.Fdatasync {
		n = max(1, n/4)
	}
	for seed := *crashSeed0; seed < *crashSeed0+n; seed++ {
		run := runCrashSeed(t, cc.pol, m, int64(seed), clock == "fake")
		eps := fakeEps
		if clock == "real" {
			eps = realEps(cc.pol.Interval())
		}
		checkCrashRun(t, fmt.Sprintf("%s %s %v seed=%d", clock, cc.pol, m, seed), cc, run, int64(seed), eps)
	}
}

// runCrashSeed runs committers under pol, in a synctest bubble if fake, and
// takes the crash image at a random moment.
func runCrashSeed(t *testing.T, pol policy.Policy, method vfs.SyncMethod, seed int64, fake bool) crashRun {
	rng := rand.New(rand.NewPCG(uint64(seed), uint64(pol.Kind())+1))
	var maxLat time.Duration
	crashAt := 30*time.Millisecond + time.Duration(rng.IntN(150_000))*time.Microsecond
	if !fake {
		maxLat = []time.Duration{0, 2 * time.Millisecond, 8 * time.Millisecond}[rng.IntN(3)]
		crashAt = 150*time.Millisecond + time.Duration(rng.IntN(250_000))*time.Microsecond
	}
	writers := 1 + rng.IntN(6)
	segSize := []int64{16 << 10, 1 << 20}[rng.IntN(2)]
	var run crashRun
	body := func(t *testing.T) {
		mem := vfs.NewMem()
		mem.SetDirectIOAlignment([]int{512, 4096}[seed%2])
		var latMu sync.Mutex
		latRng := rand.New(rand.NewPCG(uint64(seed), 7))
		// The sync takes effect first, then takes its time: only bytes
		// written before the sync started become durable, as on a disk.
		h := &hookFS{FS: mem, afterSync: func(*hookFile, error) {
			if maxLat == 0 {
				return
			}
			latMu.Lock()
			d := time.Duration(latRng.Int64N(int64(maxLat) + 1))
			run.F = max(run.F, d)
			latMu.Unlock()
			time.Sleep(d)
		}}
		run.opts = wal.Options{FS: h, Policy: pol, SegmentSize: segSize, MaxRecordSize: 4 << 10, SyncMethod: method}
		l, err := wal.Open(faultDir, run.opts)
		require.NoError(t, err)

		var j journal
		var stop atomic.Bool
		var wg sync.WaitGroup
		for w := range writers {
			wrng := rand.New(rand.NewPCG(uint64(seed), uint64(w)+100))
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; !stop.Load(); i++ {
					time.Sleep(time.Duration(wrng.IntN(2000)) * time.Microsecond)
					switch n := wrng.IntN(100); {
					case n == 0:
						if err := j.syncNow(l); err != nil {
							run.monotone = fmt.Sprintf("Sync: %v", err)
							return
						}
					default:
						size := 1 + wrng.IntN(400)
						if n < 3 {
							size = 1 + wrng.IntN(4<<10)
						}
						b := make([]byte, size)
						for k := range b {
							b[k] = byte(wrng.Uint32())
						}
						if r := j.appendRec(l, b, n == 1); r.err != nil {
							run.monotone = fmt.Sprintf("Append: %v", r.err)
							return
						}
					}
				}
			}()
		}
		// I3: the watermarks are ordered and never go down.
		wg.Add(1)
		go func() {
			defer wg.Done()
			var ps, pw, pa wal.LSN
			for !stop.Load() {
				s, w, a := l.SyncedLSN(), l.WrittenLSN(), l.AppendedLSN()
				if s > w || w > a || s < ps || w < pw || a < pa {
					run.monotone = fmt.Sprintf("I3: synced %d written %d appended %d after %d %d %d", s, w, a, ps, pw, pa)
					return
				}
				ps, pw, pa = s, w, a
				time.Sleep(500 * time.Microsecond)
			}
		}()

		time.Sleep(crashAt)
		run.T = time.Now()
		run.synced, run.written = l.SyncedLSN(), l.WrittenLSN()
		run.p = mem.ProcessCrash()
		stop.Store(true)
		wg.Wait()
		st := l.Stats()
		require.NoError(t, l.Close(), "I4: Close")
		run.closed = mem.PowerLoss(vfs.DropAll())
		if fake {
			require.Zero(t, st.FsyncMaxDuration, "syncs take no fake time")
		} else {
			run.F = max(run.F, st.FsyncMaxDuration)
		}
		run.want = j.inLog()
		run.syncs = j.syncs
	}
	if fake {
		synctest.Test(t, body)
	} else {
		body(t)
	}
	return run
}

// checkCrashRun recovers each image of run and checks the invariants and
// cc's bounds.
func checkCrashRun(t *testing.T, label string, cc crashCase, run crashRun, seed int64, eps time.Duration) {
	t.Helper()
	if run.monotone != "" {
		t.Fatalf("%s: %s", label, run.monotone)
	}
	want := run.want
	require.NotEmpty(t, want, label)
	for _, r := range want {
		require.NoError(t, r.err, label)
	}
	// end returns the end LSN of want[i] (the next record's LSN), or ^0 for
	// the last one, whose end the test does not know.
	end := func(i int) wal.LSN {
		if i+1 < len(want) {
			return want[i+1].lsn
		}
		return ^wal.LSN(0)
	}
	// I5: a Sync that returned, or a ForceSync commit acked, before T makes
	// everything appended before it durable.
	var forcedUpTo wal.LSN
	for _, sp := range run.syncs {
		if sp.at.Before(run.T) {
			forcedUpTo = max(forcedUpTo, sp.upTo)
		}
	}
	for i, r := range want {
		if r.forced && r.ack.Before(run.T) {
			forcedUpTo = max(forcedUpTo, end(i))
		}
	}
	pw, lw := cc.window(run.F, eps)
	ackedBy := func(r jrec, w time.Duration) bool {
		return w != never && !r.ack.IsZero() && r.ack.Before(run.T.Add(-w)) || w == 0 && r.ack.Before(run.T)
	}
	index := make(map[wal.LSN]int, len(want))
	for i, r := range want {
		index[r.lsn] = i
	}
	check := func(name string, img vfs.FS, mustP bool) {
		label := fmt.Sprintf("%s %s (F=%v)", label, name, run.F)
		got, err := recoverImage(t, img, faultDir, run.opts)
		require.NoError(t, err, "%s: Open of the crash image", label)
		k := checkPrefix(t, label, got, want)
		requireSurvivors(t, label, want, k, func(r jrec) bool {
			i := index[r.lsn]
			if end(i) <= run.synced || end(i) <= forcedUpTo {
				return true
			}
			if mustP {
				return end(i) <= run.written || ackedBy(r, pw)
			}
			return ackedBy(r, lw)
		}, fmt.Sprintf("bounds P=%v L=%v, written %d synced %d forced %d", pw, lw, run.written, run.synced, forcedUpTo))
	}
	check("process-crash", run.p, true)
	for _, m := range []vfs.CrashMode{vfs.DropAll(), vfs.TearAtSector(seed), vfs.KeepRandomSubsetOfBlocks(512, seed), vfs.KeepRandomSubsetOfBlocks(4096, seed)} {
		check("power-loss "+m.String(), run.p.PowerLoss(m), false)
	}
	// I4: after Close every record is durable.
	got, err := recoverImage(t, run.closed, faultDir, run.opts)
	require.NoError(t, err, "%s: Open after Close + power loss", label)
	require.Equal(t, len(want), checkPrefix(t, label+" close+DropAll", got, want), "%s: I4: Close made every record durable", label)
}
