package wal_test

// Group commit through the log: no committer returns before the sync that
// covers its record returned, Close with committers queued releases them
// all, a cancelled committer leaves and the group goes on, and under load
// every acknowledged commit survives a power loss.

import (
	"context"
	"fmt"
	"math/rand/v2"
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

// gatedLog opens a SyncEveryCommit log on MemFS whose syncs block at g while
// it is armed.
func gatedLog(t *testing.T) (*wal.Log, *vfs.MemFS, *syncGate, wal.Options) {
	mem := vfs.NewMem()
	g := newSyncGate()
	opts := wal.Options{FS: faultfs.Inject(mem, g), SegmentSize: 1 << 20}
	l, err := wal.Open(faultDir, opts)
	require.NoError(t, err)
	return l, mem, g, opts
}

// requireNone fails if any of chs delivers within d.
func requireNone[T any](t *testing.T, d time.Duration, what string, chs ...chan T) {
	t.Helper()
	deadline := time.After(d)
	for {
		for _, ch := range chs {
			select {
			case <-ch:
				t.Fatalf("%s returned early", what)
			default:
			}
		}
		select {
		case <-deadline:
			return
		case <-time.After(time.Millisecond):
		}
	}
}

// TestGroupNoEarlyAck: while the leader's sync is held, neither it nor the
// committers queued behind it return; releasing it returns the leader only
// (the others' records were appended after that sync started), and they
// return once their own group's sync returns.
func TestGroupNoEarlyAck(t *testing.T) {
	l, _, g, _ := gatedLog(t)
	var j journal
	g.arm(true)
	a := make(chan jrec, 1)
	go func() { a <- j.appendRec(l, payload(0, 100), false) }()
	g.waitEntered(t)
	const n = 4
	others := make([]chan jrec, n)
	for i := range others {
		others[i] = make(chan jrec, 1)
		go func() { others[i] <- j.appendRec(l, payload(1+i, 100), false) }()
	}
	waitFor(t, "queued committers", func() bool { return l.Stats().Group.Active == n+1 })
	requireNone(t, 20*time.Millisecond, "a commit whose sync is held", append([]chan jrec{a}, others...)...)

	g.release <- struct{}{} // the leader's sync returns
	require.NoError(t, (<-a).err)
	g.waitEntered(t) // the next group's sync
	requireNone(t, 20*time.Millisecond, "a commit of the second group", others...)
	g.arm(false)
	g.release <- struct{}{}
	for _, ch := range others {
		require.NoError(t, (<-ch).err)
	}
	require.Equal(t, uint64(2), l.Stats().Group.SyncGroups, "two groups, two syncs")
	require.NoError(t, l.Close())
}

// TestGroupNoEarlyAckConcurrent: 64 committers; every acknowledgment is
// checked against the bytes the filesystem really had made durable, by a
// wrapper that records what each sync covered (the frame writes before it
// started).
func TestGroupNoEarlyAckConcurrent(t *testing.T) {
	mem := vfs.NewMem()
	var mu sync.Mutex
	var writtenEnd, durableEnd int64
	rng := rand.New(rand.NewPCG(1, 2))
	cover := map[*hookFile]int64{}
	h := &hookFS{FS: mem,
		afterWrite: func(f *hookFile, off int64, n int) {
			if off >= 32 { // frames, not the zero fill or the header
				mu.Lock()
				writtenEnd = max(writtenEnd, off+int64(n))
				mu.Unlock()
			}
		},
		beforeSync: func(f *hookFile) {
			mu.Lock()
			cover[f] = writtenEnd
			d := time.Duration(rng.IntN(300)) * time.Microsecond
			mu.Unlock()
			time.Sleep(d)
		},
		afterSync: func(f *hookFile, err error) {
			mu.Lock()
			if err == nil {
				durableEnd = max(durableEnd, cover[f])
			}
			mu.Unlock()
		},
	}
	const segSize = 1 << 20 // 64×20 records fit it: one file (a spare is prepared past an eighth)
	l, err := wal.Open(faultDir, wal.Options{FS: h, SegmentSize: segSize})
	require.NoError(t, err)
	var j journal
	var wg sync.WaitGroup
	var early atomic.Int64
	for g := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 20 {
				size := 1 + (g*31+i*17)%200
				r := j.appendRec(l, payload(g*100+i, size), false)
				if r.err != nil {
					t.Error(r.err)
					return
				}
				end := 32 + int64(r.lsn) + (24+int64(size)+7)&^7
				mu.Lock()
				if end > durableEnd {
					early.Add(1)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	require.Zero(t, early.Load(), "commits acknowledged before the sync covering them returned")
	st := l.Stats()
	t.Logf("64 committers: %d commits, %d groups, %d fsyncs, mean group %.1f", st.Commits, st.Group.Groups, st.Fsyncs, st.Group.GroupSizeMean)
	require.Less(t, st.Fsyncs, st.Commits, "concurrent commits shared syncs")
	require.NoError(t, l.Close())
}

// TestGroupCloseWithQueuedCommitters: Close while a sync is held and
// committers are queued returns, and so do they all; with a sync that then
// fails, they all get errors and none hangs.
func TestGroupCloseWithQueuedCommitters(t *testing.T) {
	for _, fail := range []bool{false, true} {
		t.Run(fmt.Sprintf("sync-fails=%v", fail), func(t *testing.T) {
			l, mem, g, opts := gatedLog(t)
			var j journal
			g.arm(true)
			const n = 9
			done := make(chan jrec, n)
			go func() { done <- j.appendRec(l, payload(0, 100), false) }()
			g.waitEntered(t)
			for i := 1; i < n; i++ {
				go func() { done <- j.appendRec(l, payload(i, 100), false) }()
			}
			waitFor(t, "queued committers", func() bool { return l.Stats().Group.Active == n })
			closed := make(chan error, 1)
			go func() { closed <- l.Close() }()
			waitFor(t, "Close to queue", func() bool { return l.Stats().Group.Active == n+1 })
			if fail {
				mem.FailNextSync(syscall.EIO)
			}
			g.arm(false)
			g.release <- struct{}{}
			timeout := time.After(10 * time.Second)
			for range n {
				select {
				case r := <-done:
					if fail {
						require.ErrorIs(t, r.err, wal.ErrPoisoned)
					} else {
						require.NoError(t, r.err)
					}
				case <-timeout:
					t.Fatal("a committer hangs after Close")
				}
			}
			select {
			case err := <-closed:
				if fail {
					require.ErrorIs(t, err, wal.ErrPoisoned)
					return
				}
				require.NoError(t, err)
			case <-timeout:
				t.Fatal("Close hangs")
			}
			want := j.inLog()
			got, err := recoverImage(t, mem.PowerLoss(vfs.DropAll()), faultDir, opts)
			require.NoError(t, err)
			require.Equal(t, n, checkPrefix(t, "DropAll after Close", got, want))
		})
	}
}

// TestGroupContextCancel: a queued committer whose context ends returns
// ctx.Err() with its LSN at once; the group goes on without it, and its
// record is in the log.
func TestGroupContextCancel(t *testing.T) {
	l, mem, g, opts := gatedLog(t)
	g.arm(true)
	a := make(chan error, 1)
	go func() { _, err := l.Append(payload(0, 100)); a <- err }()
	g.waitEntered(t)
	ctx, cancel := context.WithCancel(t.Context())
	type res struct {
		lsn wal.LSN
		err error
	}
	b := make(chan res, 1)
	go func() { lsn, err := l.AppendContext(ctx, payload(1, 100)); b <- res{lsn, err} }()
	waitFor(t, "B to queue", func() bool { return l.Stats().Group.Active == 2 })
	cancel()
	rb := <-b
	require.ErrorIs(t, rb.err, context.Canceled)
	require.Positive(t, rb.lsn)
	select {
	case <-a:
		t.Fatal("the leader returned before its sync")
	default:
	}
	g.arm(false)
	g.release <- struct{}{}
	require.NoError(t, <-a)
	_, err := l.Append(payload(2, 100))
	require.NoError(t, err, "the log goes on")
	require.NoError(t, l.WaitDurable(t.Context(), rb.lsn))
	require.NoError(t, l.Close())
	got, err := recoverImage(t, mem.PowerLoss(vfs.DropAll()), faultDir, opts)
	require.NoError(t, err)
	require.Len(t, got.recs, 3)
	require.Equal(t, rb.lsn, got.lsns[1])
}

// TestGroupStress: committers under a random policy, some with ForceSync,
// on MemFS with random sync latency, while power-loss images are taken at
// random moments: every commit acknowledged as durable (SyncEveryCommit, or
// ForceSync) before an image survives it, and every image is a prefix.
func TestGroupStress(t *testing.T) {
	pols := []policy.Policy{policy.SyncEveryCommit(), policy.SyncEveryN(3), policy.SyncInterval(5 * time.Millisecond), policy.SyncNever(), policy.BufferedInterval(5*time.Millisecond, time.Millisecond)}
	for seed := range 5 {
		pol := pols[seed%len(pols)]
		t.Run(fmt.Sprintf("%s/seed=%d", pol, seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(seed), 3))
			mem := vfs.NewMem()
			var latMu sync.Mutex
			h := &hookFS{FS: mem, afterSync: func(*hookFile, error) {
				latMu.Lock()
				d := time.Duration(rng.IntN(500)) * time.Microsecond
				latMu.Unlock()
				time.Sleep(d)
			}}
			opts := wal.Options{FS: h, Policy: pol, SegmentSize: 32 << 10}
			l, err := wal.Open(faultDir, opts)
			require.NoError(t, err)
			var j journal
			var wg sync.WaitGroup
			for g := range 16 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range 40 {
						size := 1 + (g*131+i*71)%700
						forced := (g+i)%5 == 0
						if r := j.appendRec(l, payload(g*1000+i, size), forced); r.err != nil {
							t.Error(r.err)
							return
						}
					}
				}()
			}
			type image struct {
				at  time.Time
				img *vfs.MemFS
			}
			var images []image
			stop := make(chan struct{})
			var snapWG sync.WaitGroup
			snapWG.Add(1)
			go func() {
				defer snapWG.Done()
				for k := 0; ; k++ {
					select {
					case <-stop:
						return
					case <-time.After(2 * time.Millisecond):
					}
					modes := []vfs.CrashMode{vfs.DropAll(), vfs.TearAtSector(int64(k)), vfs.KeepRandomSubsetOfBlocks(512, int64(k))}
					at := time.Now()
					images = append(images, image{at, mem.PowerLoss(modes[k%len(modes)])})
				}
			}()
			wg.Wait()
			close(stop)
			snapWG.Wait()
			require.NoError(t, l.Close())
			want := j.inLog()
			for n, im := range images {
				label := fmt.Sprintf("image %d", n)
				got, err := recoverImage(t, im.img, faultDir, opts)
				require.NoError(t, err, label)
				k := checkPrefix(t, label, got, want)
				last := -1 // the last record acknowledged as durable before the image
				for i, r := range want {
					if (r.forced || pol.Kind() == policy.KindSyncEveryCommit) && !r.ack.IsZero() && r.ack.Before(im.at) {
						last = i
					}
				}
				requireSurvivors(t, label, want, k, func(r jrec) bool {
					return last >= 0 && r.lsn <= want[last].lsn
				}, "acknowledged as durable before the image")
			}
			t.Logf("%d images checked", len(images))
		})
	}
}
