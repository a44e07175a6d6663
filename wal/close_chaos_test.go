package wal_test

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"math/rand"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/durawal/durawal/internal/longtest"
	"github.com/durawal/durawal/policy"
	"github.com/durawal/durawal/wal"
	"github.com/durawal/durawal/wal/vfs"
	"github.com/durawal/durawal/wal/vfs/faultfs"
)

// TestCloseChaos: many goroutines use the log while one fault
// (failed write or sync, at a random operation) poisons it and Close runs
// at a random moment. Nothing may panic or hang; no library operation
// may use a file after closing it; no call may report fs.ErrClosed (a file
// closed under it); Close must leave no file open (a spare that a failed
// roll, or the unwritten log buffer of a poisoned log, would never use).
func TestCloseChaos(t *testing.T) {
	pols := []policy.Policy{
		policy.SyncEveryCommit(), policy.SyncInterval(5 * time.Millisecond),
		policy.SyncIntervalPostponed(5*time.Millisecond, 10*time.Millisecond),
		policy.BufferedInterval(5*time.Millisecond, 2*time.Millisecond),
		policy.AsyncCommit(2*time.Millisecond, 4<<10), policy.SyncNever(),
	}
	methods := []vfs.SyncMethod{vfs.Fdatasync, vfs.ODsync, vfs.ODirect}
	seeds := longtest.Pick(120, 36) // 36: each policy with each method twice
	if testing.Short() {
		seeds = 10
	}
	for seed := 0; seed < seeds; seed++ {
		rng := rand.New(rand.NewSource(int64(seed)))
		pol := pols[seed%len(pols)]
		method := methods[(seed/len(pols))%len(methods)]
		chaosRun(t, seed, rng, pol, method)
		if t.Failed() {
			return
		}
	}
}

func chaosRun(t *testing.T, seed int, rng *rand.Rand, pol policy.Policy, method vfs.SyncMethod) {
	var armed atomic.Bool
	var ops atomic.Int64
	failAt := int64(5 + rng.Intn(120))
	failKind := []faultfs.OpKind{faultfs.OpWrite, faultfs.OpSync, faultfs.OpSyncDir, faultfs.OpRename}[rng.Intn(4)]
	if method.WriteThrough() && failKind == faultfs.OpSync {
		failKind = faultfs.OpWrite
	}
	var fired atomic.Bool
	inj := faultfs.InjectorFunc(func(op faultfs.Op) error {
		if !armed.Load() {
			return nil
		}
		if op.Kind == faultfs.OpWrite || op.Kind == faultfs.OpSync {
			if n := ops.Add(1); n%7 == 0 {
				time.Sleep(time.Duration(n%5) * 50 * time.Microsecond)
			}
		}
		if op.Kind == failKind && ops.Load() >= failAt && fired.CompareAndSwap(false, true) {
			return faultfs.ErrInjected
		}
		return nil
	})
	ofs := newOpenFS(faultfs.Inject(vfs.NewMem(), inj))
	opts := wal.Options{SegmentSize: 16 << 10, BufferSize: 4 << 10, Policy: pol, SyncMethod: method, RecycleSegments: 2}
	opts.FS = ofs
	l, err := wal.Open(logDir, opts)
	if err != nil {
		t.Fatalf("seed %d: open: %v", seed, err)
	}
	armed.Store(true)
	var bad sync.Mutex
	var problems []string
	report := func(what string, err error) {
		if err == nil {
			return
		}
		if errors.Is(err, fs.ErrClosed) && !errors.Is(err, wal.ErrClosed) || strings.Contains(err.Error(), "file already closed") {
			bad.Lock()
			problems = append(problems, what+": "+err.Error())
			bad.Unlock()
		}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var lastLSN atomic.Uint64
	for g := 0; g < 3; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration(i%5)*time.Millisecond+time.Microsecond)
				var lsn wal.LSN
				var err error
				switch i % 4 {
				case 0:
					lsn, err = l.AppendBatchContext(ctx, [][]byte{payload(i, 100+g*50), payload(i+1, 900)})
				case 1:
					lsn, err = l.AppendContext(ctx, payload(i, 300), wal.ForceSync)
				default:
					lsn, err = l.Append(payload(i, 200+i%700))
				}
				cancel()
				report("append", err)
				if err == nil {
					lastLSN.Store(uint64(lsn))
				}
				if errors.Is(err, wal.ErrClosed) {
					return
				}
			}
		}(g)
	}
	wg.Add(1)
	go func() { // syncs, reads, removals, truncations
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			switch i % 6 {
			case 0:
				report("sync", l.Sync())
			case 1:
				ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
				report("waitdurable", l.WaitDurable(ctx, wal.LSN(lastLSN.Load())))
				cancel()
			case 2:
				_, err := l.ReadRecord(wal.LSN(lastLSN.Load()), nil)
				report("readrecord", err)
			case 3:
				if i%30 == 3 {
					_, err := l.RemoveBefore(wal.LSN(lastLSN.Load()))
					report("removebefore", err)
				}
			case 4:
				if i%50 == 4 {
					report("truncate", l.TruncateFrom(wal.LSN(lastLSN.Load())))
				}
			case 5:
				r, err := l.NewReader(l.FirstLSN(), wal.DurableOnly)
				if err == nil {
					for k := 0; k < 50; k++ {
						_, _, err = r.Next()
						if err != nil {
							break
						}
					}
					if err != io.EOF {
						report("reader", err)
					}
					r.Close()
				}
			}
			if i%10 == 0 {
				time.Sleep(100 * time.Microsecond)
			}
		}
	}()
	time.Sleep(time.Duration(10+rng.Intn(70)) * time.Millisecond)
	closed := make(chan error, 1)
	go func() { closed <- l.Close() }()
	select {
	case err := <-closed:
		report("close", err)
	case <-time.After(20 * time.Second):
		buf := make([]byte, 1<<20)
		t.Fatalf("seed %d (%v, %v, fail %v at op %d): Close hangs:\n%s", seed, pol, method, failKind, failAt, buf[:runtime.Stack(buf, true)])
	}
	close(stop)
	waitOrDump(t, &wg, 20*time.Second, "callers hang after Close")
	bad.Lock()
	defer bad.Unlock()
	if len(problems) > 0 {
		t.Fatalf("seed %d (%v, %v, fail %v at op %d): file closed under a call: %v", seed, pol, method, failKind, failAt, problems)
	}
	ofs.mu.Lock()
	after := ofs.afterClose
	ofs.mu.Unlock()
	if len(after) > 0 {
		t.Fatalf("seed %d (%v, %v, fail %v at op %d): operations on a closed file: %v", seed, pol, method, failKind, failAt, after)
	}
	if testing.Verbose() {
		st := l.Stats()
		t.Logf("seed %d (%v, %v, fail %v at op %d): fired %v, appended %d, poisoned %v, rolls %d, ops %d", seed, pol, method, failKind, failAt, fired.Load(), l.AppendedLSN(), st.Poisoned, st.Rolls, ops.Load())
	}
	if open := ofs.stillOpen(); len(open) > 0 {
		t.Fatalf("seed %d (%v, %v, fail %v at op %d, fired %v): files left open after Close: %v", seed, pol, method, failKind, failAt, fired.Load(), open)
	}
}
