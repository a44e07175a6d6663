package wal_test

import (
	"bytes"
	"flag"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/durawal/durawal/policy"
	"github.com/durawal/durawal/wal"
	"github.com/durawal/durawal/wal/vfs"
	"github.com/stretchr/testify/require"
)

var sessionSeeds = flag.Int("sessionSeeds", 40, "seeds for TestCrashAcrossSessions")
var sessionSeed = flag.Int("sessionSeed", -1, "one seed for TestCrashAcrossSessions")

type sessionHistory struct {
	lsns  []wal.LSN
	recs  [][]byte
	acked int
}

// sessionCheck opens img and checks the recovered records are a prefix of h
// (from FirstLSN) covering every acked record; trims h to what recovered.
func sessionCheck(t *testing.T, img vfs.FS, opts wal.Options, h *sessionHistory, what string) *wal.Log {
	t.Helper()
	opts.FS = img
	l, err := wal.Open(logDir, opts)
	require.NoError(t, err, "%s: Open", what)
	info := l.Recovered()
	lsns, got := readAll(t, l, info.FirstLSN)
	start := 0
	for start < len(h.lsns) && h.lsns[start] < info.FirstLSN {
		start++
	}
	n := requireRecoveredRun(t, fmt.Sprintf("%s (info %+v)", what, info), lsns, got, h.lsns, h.recs, start, h.acked)
	h.lsns, h.recs = h.lsns[:n:n], h.recs[:n:n]
	h.acked = n
	return l
}

// TestCrashAcrossSessions runs, per seed, five sessions on one log: random
// appends, syncs, RemoveBefore and TruncateFrom under a random policy and
// sync method, with segment recycling, each session ending in a clean Close
// or a crash image of each kind (or a crash right after Open's repair).
// Every image must recover a prefix holding every durable record, read the
// same through OpenReadOnly, and after more appends and a clean Close
// reopen exactly, with no torn bytes. Replay one seed with -sessionSeed=N.
func TestCrashAcrossSessions(t *testing.T) {
	lo, hi := 0, *sessionSeeds
	if *sessionSeed >= 0 {
		lo, hi = *sessionSeed, *sessionSeed+1
	}
	for seed := lo; seed < hi; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			defer func() {
				if t.Failed() {
					t.Logf("replay: go test ./wal -run TestCrashAcrossSessions -sessionSeed=%d", seed)
				}
			}()
			rng := rand.New(rand.NewPCG(uint64(seed), 7))
			segSize := int64(4<<10) * int64(1+rng.IntN(2))
			pols := []policy.Policy{policy.SyncNever(), policy.SyncEveryN(3), policy.SyncEveryCommit()}
			methods := []vfs.SyncMethod{vfs.Fdatasync, vfs.Fdatasync, vfs.ODirect}
			opts := wal.Options{SegmentSize: segSize, RecycleSegments: 1 + rng.IntN(3), Policy: pols[rng.IntN(3)], SyncMethod: methods[rng.IntN(3)]}
			mem := vfs.NewMem()
			var img vfs.FS = mem
			h := &sessionHistory{}
			for sess := range 5 {
				what := fmt.Sprintf("seed %d session %d", seed, sess)
				// OpenReadOnly first: it must read what Open then recovers (or a prefix-consistent subset)
				ropts := opts
				ropts.FS = img
				if ro, err := wal.OpenReadOnly(logDir, ropts); err == nil {
					rl, rrecs := readAll(t, ro, ro.FirstLSN())
					ro.Close()
					hc := &sessionHistory{lsns: h.lsns, recs: h.recs, acked: h.acked}
					st := 0
					for st < len(hc.lsns) && len(rl) > 0 && hc.lsns[st] < rl[0] {
						st++
					}
					for i := range rrecs {
						require.Less(t, st+i, len(hc.recs), "%s: read-only read more records than appended", what)
						require.Equal(t, hc.lsns[st+i], rl[i], "%s: read-only LSN", what)
						require.True(t, bytes.Equal(hc.recs[st+i], rrecs[i]), "%s: read-only record at LSN %d differs", what, rl[i])
					}
				} else {
					t.Logf("%s: OpenReadOnly: %v", what, err)
				}
				l := sessionCheck(t, img, opts, h, what)
				if m, ok := img.(*vfs.MemFS); ok && rng.IntN(3) == 0 {
					// a crash right after Open's repair
					mode := vfs.KeepRandomSubsetOfBlocks(512, int64(seed*100+sess))
					if rng.IntN(2) == 0 {
						mode = vfs.TearAtSector(int64(seed*100 + sess))
					}
					img = m.PowerLoss(mode)
					l.Close()
					l = sessionCheck(t, img, opts, h, what+" after crash in/after Open repair "+mode.String())
				}
				cur := img
				_ = cur
				ops := 20 + rng.IntN(80)
				sizeSame := rng.IntN(2) == 0
				for i := range ops {
					switch r := rng.IntN(100); {
					case r < 75:
						sz := 1 + rng.IntN(600)
						if sizeSame {
							sz = 200
						}
						rec := record(sess*1000+seed, i, sz)
						lsn, err := l.Append(rec)
						require.NoError(t, err)
						h.lsns, h.recs = append(h.lsns, lsn), append(h.recs, rec)
						if opts.Policy.Kind() == policy.KindSyncEveryCommit {
							h.acked = len(h.recs)
						}
					case r < 88:
						require.NoError(t, l.Sync())
						h.acked = len(h.recs)
					case r < 95:
						if len(h.lsns) > 10 {
							_, err := l.RemoveBefore(h.lsns[len(h.lsns)-10])
							require.NoError(t, err)
						}
					default:
						if len(h.lsns) > 3 {
							k := len(h.lsns) - 1 - rng.IntN(3)
							if h.lsns[k] >= l.FirstLSN() {
								require.NoError(t, l.TruncateFrom(h.lsns[k]))
								h.lsns, h.recs = h.lsns[:k:k], h.recs[:k:k]
								h.acked = k
							}
						}
					}
				}
				// end of session: clean close or crash
				switch c := rng.IntN(4); c {
				case 0:
					require.NoError(t, l.Close())
					img = cur
					if m, ok := img.(*vfs.MemFS); ok {
						img = m
					}
				default:
					m := img.(*vfs.MemFS)
					modes := []vfs.CrashMode{vfs.KeepAll(), vfs.DropAll(), vfs.TearAtSector(int64(seed*10 + sess)),
						vfs.KeepRandomSubsetOfBlocks(512, int64(seed*10+sess))}
					mode := modes[rng.IntN(len(modes))]
					img = m.PowerLoss(mode)
					l.Close()
					what += " " + mode.String()
				}
				_ = what
			}
			// final: open, append, clean close, reopen: exact, no torn bytes
			l := sessionCheck(t, img, opts, h, fmt.Sprintf("seed %d final", seed))
			for i := range 5 {
				rec := record(9999, i, 100+i*97)
				lsn, err := l.Append(rec)
				require.NoError(t, err)
				h.lsns, h.recs = append(h.lsns, lsn), append(h.recs, rec)
			}
			first := l.FirstLSN()
			require.NoError(t, l.Close())
			opts.FS = img
			l2, err := wal.Open(logDir, opts)
			require.NoError(t, err)
			defer l2.Close()
			require.Zero(t, l2.Recovered().TornBytes, "seed %d: torn tail after clean Close: %+v", seed, l2.Recovered())
			_, got := readAll(t, l2, first)
			start := 0
			for start < len(h.lsns) && h.lsns[start] < first {
				start++
			}
			require.Equal(t, h.recs[start:], got)
		})
	}
}
