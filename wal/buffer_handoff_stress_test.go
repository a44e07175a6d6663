package wal_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/durawal/durawal/policy"
	"github.com/durawal/durawal/wal"
	"github.com/durawal/durawal/wal/vfs"
	"github.com/durawal/durawal/wal/vfs/faultfs"
	"github.com/stretchr/testify/require"
)

// The adversarial review of the log-buffer handoff (5b9de02) and the lazy
// commit clock (5ab763c): what held up.

// TestHandoffStress: many concurrent appenders (Append, AppendBatch with
// records larger than BufferSize, short contexts, ReadRecord) on small log
// buffers under every kind of policy: every record that was appended reads
// back once, in LSN order, with its content; nothing else is in the log;
// the commit histograms add up to Commits; no goroutine is left after Close.
func TestHandoffStress(t *testing.T) {
	pols := map[string]policy.Policy{
		"BufferedInterval": policy.BufferedInterval(time.Millisecond, time.Millisecond),
		"AsyncCommit":      policy.AsyncCommit(time.Millisecond, 1<<10),
		"SyncNever":        policy.SyncNever(),
		"SyncInterval":     policy.SyncInterval(time.Millisecond),
		"SyncEveryCommit":  policy.SyncEveryCommit(),
		"Postponed":        policy.SyncIntervalPostponed(time.Millisecond, 2*time.Millisecond),
	}
	for name, pol := range pols {
		for _, bs := range []int{1, 64, 4096} {
			t.Run(fmt.Sprintf("%s/%d", name, bs), func(t *testing.T) {
				base := runtime.NumGoroutine()
				mem := vfs.NewMem()
				l := openLog(t, mem, wal.Options{BufferSize: bs, Policy: pol, SegmentSize: 64 << 10})
				type rec struct {
					lsn wal.LSN
					p   []byte
				}
				var mu sync.Mutex
				var got []rec
				var wg sync.WaitGroup
				for g := range 8 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						r := rand.New(rand.NewPCG(uint64(g), uint64(bs)))
						for i := range 150 {
							id := g*100000 + i*10
							switch r.IntN(4) {
							case 0, 1:
								n := 1 + r.IntN(300)
								if r.IntN(20) == 0 {
									n = bs + 100 + r.IntN(5000)
								}
								p := payload(id, n)
								ctx, cancel := context.Background(), func() {}
								if r.IntN(5) == 0 {
									ctx, cancel = context.WithTimeout(context.Background(), time.Duration(r.IntN(200))*time.Microsecond)
								}
								lsn, err := l.AppendContext(ctx, p)
								cancel()
								if errors.Is(err, wal.ErrNotAppended) {
									continue
								}
								if err != nil && !errors.Is(err, context.DeadlineExceeded) {
									t.Errorf("append: %v", err)
									return
								}
								mu.Lock()
								got = append(got, rec{lsn, p})
								mu.Unlock()
								if r.IntN(4) == 0 {
									q, err := l.ReadRecord(lsn, nil)
									if err != nil || !bytes.Equal(q, p) {
										t.Errorf("ReadRecord(%d): %v", lsn, err)
										return
									}
								}
							case 2:
								k := 2 + r.IntN(5)
								recs := make([][]byte, k)
								for j := range recs {
									n := 1 + r.IntN(200)
									if r.IntN(10) == 0 {
										n = bs + 1 + r.IntN(3000)
									}
									recs[j] = payload(id+j, n)
								}
								lsns := make([]wal.LSN, k)
								ctx, cancel := context.Background(), func() {}
								if r.IntN(4) == 0 {
									ctx, cancel = context.WithTimeout(context.Background(), time.Duration(r.IntN(300))*time.Microsecond)
								}
								_, err := l.AppendBatchLSNs(ctx, recs, lsns)
								cancel()
								n := k
								var be *wal.BatchError
								switch {
								case err == nil:
								case errors.As(err, &be):
									n = be.Appended
								case errors.Is(err, wal.ErrNotAppended):
									n = 0
								case errors.Is(err, context.DeadlineExceeded):
								default:
									t.Errorf("batch: %v", err)
									return
								}
								mu.Lock()
								for j := range n {
									got = append(got, rec{lsns[j], recs[j]})
								}
								mu.Unlock()
							case 3:
								_, err := l.AppendContext(context.Background(), payload(id, 1+r.IntN(50)), wal.ForceSync)
								if err != nil {
									t.Errorf("forced: %v", err)
									return
								}
								// not tracked: re-add below
								mu.Lock()
								mu.Unlock()
							}
						}
					}()
				}
				wg.Wait()
				st := l.Stats()
				require.NoError(t, l.Close())
				require.Equal(t, st.Commits, st.CommitWaitNone.Count+st.CommitWaitWritten.Count+st.CommitWaitSynced.Count)
				requireGoroutines(t, base)

				l = openLog(t, mem, wal.Options{SegmentSize: 64 << 10})
				defer l.Close()
				lsns, recs := readAll(t, l, 0)
				want := map[wal.LSN][]byte{}
				for _, r := range got {
					_, dup := want[r.lsn]
					require.False(t, dup, "LSN %d handed out twice", r.lsn)
					want[r.lsn] = r.p
				}
				seen := 0
				for i, lsn := range lsns {
					if i > 0 {
						require.Greater(t, lsn, lsns[i-1])
					}
					if p, ok := want[lsn]; ok {
						require.Equal(t, p, recs[i], "LSN %d", lsn)
						seen++
					} else {
						// a ForceSync record (untracked) must be short
						require.LessOrEqual(t, len(recs[i]), 50, "untracked record at LSN %d", lsn)
					}
				}
				require.Equal(t, len(want), seen, "records appended but not in the log")
			})
		}
	}
}

// TestWriteFailsWhileHandoffPending: the write of a half fails while
// appends wait for the other half: every waiter returns an error matching
// ErrPoisoned; none hangs; Close returns.
func TestWriteFailsWhileHandoffPending(t *testing.T) {
	for _, name := range []string{"BufferedInterval", "SyncEveryCommit", "SyncNever", "AsyncCommit"} {
		t.Run(name, func(t *testing.T) {
			pol := map[string]policy.Policy{
				"BufferedInterval": policy.BufferedInterval(time.Hour, time.Hour),
				"SyncEveryCommit":  policy.SyncEveryCommit(),
				"SyncNever":        policy.SyncNever(),
				"AsyncCommit":      policy.AsyncCommit(time.Hour, 1<<30),
			}[name]
			const bufSize = 4 << 10
			// Any frame write is held (not only a group's of 1 KiB and
			// more: under the write-at-commit policies 16 appenders may
			// all find the leader done and write a record or three at a
			// time); headers (32 bytes) and link frames are not.
			h := &holder{release: make(chan struct{}), minLen: 64}
			base := runtime.NumGoroutine()
			mem := vfs.NewMem()
			l := openLog(t, faultfs.Inject(mem, h.inj()), wal.Options{BufferSize: bufSize, Policy: pol, SegmentSize: 8 << 20}) // no segment preparer writes before the hold
			h.hold.Store(true)
			const n = 16
			errs := make(chan error, n*100)
			var wg sync.WaitGroup
			for g := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range 100 {
						_, err := l.Append(payload(g*1000+i, 300))
						errs <- err
						if err != nil {
							return
						}
					}
				}()
			}
			require.Eventually(t, func() bool { return h.held.Load() >= 1 }, 5*time.Second, time.Millisecond)
			require.Eventually(t, func() bool { return appendsWait(l) }, 5*time.Second, time.Millisecond,
				"appends wait for the held write")
			e := error(faultfs.ErrInjected)
			h.fail.Store(&e)
			h.hold.Store(false)
			close(h.release)
			waitOrDump(t, &wg, 10*time.Second, "appenders hang")
			close(errs)
			failed := 0
			for err := range errs {
				if err != nil {
					failed++
					require.ErrorIs(t, err, wal.ErrPoisoned)
				}
			}
			require.Positive(t, failed)
			require.ErrorIs(t, l.Close(), wal.ErrPoisoned)
			requireGoroutines(t, base)
		})
	}
}

// TestCloseWhileHandoffPending: Close while appends wait for a held write:
// all return, Close returns, every append that returned nil is in the log.
func TestCloseWhileHandoffPending(t *testing.T) {
	const bufSize = 4 << 10
	h := &holder{release: make(chan struct{})}
	mem := vfs.NewMem()
	l := openLog(t, faultfs.Inject(mem, h.inj()), wal.Options{BufferSize: bufSize, Policy: policy.BufferedInterval(time.Hour, time.Hour), SegmentSize: 8 << 20})
	h.hold.Store(true)
	var ok sync.Map
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 100 {
				p := payload(g*1000+i, 300)
				lsn, err := l.Append(p)
				if err != nil {
					require.ErrorIs(t, err, wal.ErrClosed)
					return
				}
				ok.Store(lsn, p)
			}
		}()
	}
	require.Eventually(t, func() bool { return h.held.Load() >= 1 }, 5*time.Second, time.Millisecond)
	require.Eventually(t, func() bool { return appendsWait(l) }, 5*time.Second, time.Millisecond,
		"appends wait for the held write")
	cerr := make(chan error, 1)
	go func() { cerr <- l.Close() }()
	require.Eventually(t, func() bool { return wal.Closing(l) }, 5*time.Second, time.Millisecond)
	h.hold.Store(false)
	close(h.release)
	waitOrDump(t, &wg, 10*time.Second, "hang")
	require.NoError(t, <-cerr)
	l = openLog(t, mem, wal.Options{})
	defer l.Close()
	lsns, recs := readAll(t, l, 0)
	in := map[wal.LSN][]byte{}
	for i, lsn := range lsns {
		in[lsn] = recs[i]
	}
	ok.Range(func(k, v any) bool {
		require.Equal(t, v, in[k.(wal.LSN)], "LSN %v", k)
		return true
	})
}

// appendsWait reports whether an append waits behind a held write: for
// log-buffer space (the buffered policies), or in the group-commit queue
// behind the leader writing (the write-at-commit ones).
func appendsWait(l *wal.Log) bool {
	st := l.Stats()
	return st.BufferFullWaits >= 1 || st.Group.Active >= 2
}

// requireGoroutines waits up to 2 s for the goroutine count to fall to base.
func requireGoroutines(t *testing.T, base int) {
	t.Helper()
	for range 2000 {
		if runtime.NumGoroutine() <= base {
			return
		}
		time.Sleep(time.Millisecond)
	}
	buf := make([]byte, 1<<20)
	t.Fatalf("goroutines after Close: %d, before %d:\n%s", runtime.NumGoroutine(), base, buf[:runtime.Stack(buf, true)])
}

// TestTruncateRacesHandoff: TruncateFrom while appenders fill a tiny log
// buffer: nothing hangs; after a reopen the log is a prefix-consistent
// sequence (each record readable, LSNs increasing).
func TestTruncateRacesHandoff(t *testing.T) {
	for _, bs := range []int{1, 64, 4096} {
		t.Run(fmt.Sprint(bs), func(t *testing.T) {
			mem := vfs.NewMem()
			l := openLog(t, mem, wal.Options{BufferSize: bs, Policy: policy.BufferedInterval(time.Millisecond, time.Millisecond)})
			var wg sync.WaitGroup
			stop := make(chan struct{})
			// lastLSN is a record appended since the last cut: an LSN an
			// appender got before a cut may be cut away, and the LSNs
			// reused for other records, so it would not be a record's.
			var mu sync.Mutex
			var lastLSN wal.LSN
			var epoch atomic.Int64 // odd while a cut runs
			for g := range 6 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; ; i++ {
						select {
						case <-stop:
							return
						default:
						}
						e := epoch.Load()
						lsn, err := l.Append(payload(g*100000+i, 1+(i*37)%400))
						if err != nil {
							t.Errorf("append: %v", err)
							return
						}
						mu.Lock()
						if e%2 == 0 && epoch.Load() == e {
							lastLSN = lsn
						}
						mu.Unlock()
					}
				}()
			}
			for range 30 {
				time.Sleep(2 * time.Millisecond)
				mu.Lock()
				lsn := lastLSN
				lastLSN = 0
				epoch.Add(1) // appends from here on may race the cut
				mu.Unlock()
				if lsn == 0 {
					epoch.Add(1)
					continue
				}
				err := l.TruncateFrom(lsn)
				epoch.Add(1)
				if err != nil && !errors.Is(err, wal.ErrNotFound) {
					t.Fatalf("TruncateFrom(%d): %v", lsn, err)
				}
			}
			close(stop)
			waitOrDump(t, &wg, 10*time.Second, "hang")
			require.NoError(t, l.Close())
			l = openLog(t, mem, wal.Options{})
			defer l.Close()
			lsns, recs := readAll(t, l, 0)
			for i := range lsns {
				if i > 0 {
					require.Greater(t, lsns[i], lsns[i-1])
				}
				require.True(t, bytes.HasPrefix(recs[i], []byte("r")), "%q", recs[i])
			}
		})
	}
}

// TestSyncFailsWhileHandoffPending: a failing fsync under
// SyncEveryCommit with a group delay, tiny buffers: every caller gets
// ErrPoisoned or nil, nobody hangs.
func TestSyncFailsWhileHandoffPending(t *testing.T) {
	for _, bs := range []int{1, 64, 4096} {
		t.Run(fmt.Sprint(bs), func(t *testing.T) {
			var fail atomic.Bool
			var syncs atomic.Int64
			inj := faultfs.InjectorFunc(func(op faultfs.Op) error {
				if op.Kind == faultfs.OpSync && strings.Contains(op.Path, ".wal") {
					if syncs.Add(1) > 40 {
						fail.Store(true)
					}
					if fail.Load() {
						return faultfs.ErrInjected
					}
				}
				return nil
			})
			base := runtime.NumGoroutine()
			mem := vfs.NewMem()
			opts := wal.Options{BufferSize: bs, Policy: policy.SyncEveryCommit()}
			opts.GroupCommit.Delay = 200 * time.Microsecond
			l := openLog(t, faultfs.Inject(mem, inj), opts)
			var wg sync.WaitGroup
			for g := range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range 200 {
						var err error
						if i%3 == 0 {
							_, err = l.AppendBatchContext(context.Background(), [][]byte{payload(i, 100), payload(i, 5000), payload(i, 10)})
						} else {
							_, err = l.Append(payload(g*1000+i, 1+(i*53)%600))
						}
						if err != nil {
							if !errors.Is(err, wal.ErrPoisoned) {
								t.Errorf("append: %v", err)
							}
							return
						}
					}
				}()
			}
			waitOrDump(t, &wg, 20*time.Second, "hang")
			l.Close()
			requireGoroutines(t, base)
		})
	}
}

// TestCrashSmallLogBuffer: the crash workloads with a 64-byte log buffer
// (every append hands a full half off): a failure at each operation, and a
// crash image before each, recover every acknowledged record.
func TestCrashSmallLogBuffer(t *testing.T) {
	for _, pol := range []policy.Policy{policy.SyncEveryCommit(), policy.SyncNever(), policy.BufferedInterval(time.Millisecond, time.Millisecond)} {
		for _, wl := range workloads {
			run := func(t *testing.T, fsys vfs.FS, opts wal.Options, h *history) bool {
				opts.BufferSize = 64
				return wl.run(t, fsys, opts, h)
			}
			t.Run(fmt.Sprintf("%s/%s/fail", pol, wl.name), func(t *testing.T) { crashAfterEveryOp(t, pol, run, 0) })
			if wl.name != "basic" {
				continue // the images of the recycling workload take 20 s under -race
			}
			t.Run(fmt.Sprintf("%s/%s/images", pol, wl.name), func(t *testing.T) {
				crashImagesAtEveryOp(t, wal.Options{SegmentSize: 4 << 10, Policy: pol, BufferSize: 64}, wl.run)
			})
		}
	}
}

// TestBatchContextEndsDuringHandoffWait: a batch whose second record
// finds the buffer full while the other half's write is held, and whose
// context then ends, returns a *BatchError with Appended 1 (not
// ErrNotAppended), and its first record is in the log.
func TestBatchContextEndsDuringHandoffWait(t *testing.T) {
	const bufSize = 4 << 10
	h := &holder{release: make(chan struct{})}
	mem := vfs.NewMem()
	l := openLog(t, faultfs.Inject(mem, h.inj()), wal.Options{BufferSize: bufSize, Policy: policy.BufferedInterval(time.Hour, time.Hour)})
	h.hold.Store(true)
	for l.AppendedLSN() < bufSize+bufSize/2 {
		_, err := l.Append(payload(0, 200))
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool { return h.held.Load() == 1 }, 5*time.Second, time.Millisecond)
	for l.AppendedLSN()+2*232 <= 2*bufSize {
		_, err := l.Append(payload(1, 200))
		require.NoError(t, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	lsns := make([]wal.LSN, 2)
	first, err := l.AppendBatchLSNs(ctx, [][]byte{payload(7, 200), payload(8, 400)}, lsns)
	cancel()
	var be *wal.BatchError
	require.ErrorAs(t, err, &be)
	require.Equal(t, 1, be.Appended)
	require.NotErrorIs(t, err, wal.ErrNotAppended)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	h.hold.Store(false)
	close(h.release)
	got, err := l.ReadRecord(first, nil)
	require.NoError(t, err)
	require.Equal(t, payload(7, 200), got)
	require.NoError(t, l.Close())
}

// waitOrDump waits for wg, failing the test with every goroutine's stack
// if that takes longer than d (what names what hung).
func waitOrDump(t *testing.T, wg *sync.WaitGroup, d time.Duration, what string) {
	t.Helper()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(d):
		buf := make([]byte, 1<<20)
		t.Fatalf("%s:\n%s", what, buf[:runtime.Stack(buf, true)])
	}
}
