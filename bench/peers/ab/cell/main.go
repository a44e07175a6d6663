// Command cell runs one measured cell of the A/B comparison (see
// bench/peers/ab) and prints its figures as one JSON line: a fresh log,
// one library, one policy, a number of committers appending records for a
// fixed time. The ab driver builds it once against each revision of
// durawal it compares, so it uses only the parts of durawal's public API
// that every compared revision has (wal.Open with Policy, Append, Stats's
// Fsyncs and DirSyncs, Close; policy's constructors): keep it that way, or
// older revisions stop building.
//
//	cell -lib durawal|pebble -policy sync|never|buffered -writers N -size B
//	     -duration D -dir DIR [-cpuprofile FILE] [-trace FILE]
//
// sync is SyncEveryCommit (pebble: Sync=true); never is SyncNever, a
// write() per group and no fsync (pebble: Sync=false, buffered in its
// LogWriter); buffered is BufferedInterval with an hourly sync and a
// write every second, the log-buffer append path alone (pebble: Sync=false).
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/durawal/durawal/bench/peers/internal/pebblewal"
	"github.com/durawal/durawal/policy"
	"github.com/durawal/durawal/wal"
)

// Result is what one cell measured; the driver decodes it.
type Result struct {
	Commits   int64   `json:"commits"`
	Seconds   float64 `json:"seconds"`
	CPUus     float64 `json:"cpu_us"` // user+system CPU of the whole process over the window, µs; -1 if unknown
	Syncs     int64   `json:"syncs"`  // fsyncs of log files and directory over the window
	P50us     float64 `json:"p50_us"` // commit latency percentiles; 0 when not timed (buffered)
	P99us     float64 `json:"p99_us"`
	P999us    float64 `json:"p999_us"`
	MaxUs     float64 `json:"max_us"`
	Over10ms  int64   `json:"over_10ms"`
	Err       string  `json:"error,omitempty"`
	GoVersion string  `json:"go"`
}

type appender interface {
	Append(rec []byte) error
	Syncs() int64
	Close() error
}

type durawalLog struct{ l *wal.Log }

func (d durawalLog) Append(rec []byte) error { _, err := d.l.Append(rec); return err }
func (d durawalLog) Syncs() int64 {
	s := d.l.Stats()
	return int64(s.Fsyncs + s.DirSyncs)
}
func (d durawalLog) Close() error { return d.l.Close() }

func open(lib, pol, dir string) (appender, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	switch lib {
	case "durawal":
		var p policy.Policy
		switch pol {
		case "sync":
			p = policy.SyncEveryCommit()
		case "never":
			p = policy.SyncNever()
		case "buffered":
			p = policy.BufferedInterval(time.Hour, time.Second)
		default:
			return nil, fmt.Errorf("unknown -policy %q", pol)
		}
		l, err := wal.Open(dir, wal.Options{Policy: p})
		if err != nil {
			return nil, err
		}
		return durawalLog{l}, nil
	case "pebble":
		return pebblewal.Create(dir, pol == "sync", 0)
	}
	return nil, fmt.Errorf("unknown -lib %q", lib)
}

func main() {
	lib := flag.String("lib", "durawal", "durawal or pebble")
	pol := flag.String("policy", "sync", "sync, never or buffered")
	writers := flag.Int("writers", 1, "committers")
	size := flag.Int("size", 100, "record size in bytes")
	d := flag.Duration("duration", 2*time.Second, "how long the committers append")
	dir := flag.String("dir", "", "fresh directory for the log (removed afterwards)")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the window to this file")
	traceFile := flag.String("trace", "", "write a runtime trace of the window to this file")
	flag.Parse()
	res := run(*lib, *pol, *writers, *size, *d, *dir, *cpuprofile, *traceFile)
	res.GoVersion = runtime.Version()
	json.NewEncoder(os.Stdout).Encode(res)
	if res.Err != "" {
		os.Exit(1)
	}
}

func run(lib, pol string, writers, size int, d time.Duration, dir, cpuprofile, traceFile string) (res Result) {
	if dir == "" || writers < 1 || size < 1 {
		res.Err = "need -dir, -writers ≥ 1, -size ≥ 1"
		return res
	}
	defer os.RemoveAll(dir)
	lg, err := open(lib, pol, filepath.Join(dir, "log"))
	if err != nil {
		res.Err = err.Error()
		return res
	}
	rec := make([]byte, size)
	for i := range rec {
		rec[i] = byte('a' + i%26)
	}
	if err := lg.Append(rec); err != nil { // warm-up: the first segment and goroutines exist
		lg.Close()
		res.Err = err.Error()
		return res
	}
	timed := pol != "buffered" // a buffered commit takes ~100 ns: two clock reads would be a third of it
	var stop atomic.Bool
	var commits atomic.Int64
	var firstErr atomic.Value
	lats := make([][]time.Duration, writers)
	var wg sync.WaitGroup
	if cpuprofile != "" {
		if f, err := os.Create(cpuprofile); err == nil {
			pprof.StartCPUProfile(f)
			defer f.Close()
		}
	}
	if traceFile != "" {
		if f, err := os.Create(traceFile); err == nil {
			trace.Start(f)
			defer f.Close()
		}
	}
	syncs0, cpu0 := lg.Syncs(), cpuTime()
	start := time.Now()
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := slices.Clone(rec)
			var mine []time.Duration
			if timed {
				mine = make([]time.Duration, 0, 1<<14)
			}
			var n int64
			for first := true; first || !stop.Load(); first = false { // at least one commit each, however late it starts
				var t0 time.Time
				if timed {
					t0 = time.Now()
				}
				if err := lg.Append(r); err != nil {
					firstErr.CompareAndSwap(nil, err.Error())
					stop.Store(true)
					break
				}
				if timed {
					mine = append(mine, time.Since(t0))
				}
				n++
			}
			commits.Add(n)
			lats[w] = mine
		}()
	}
	time.Sleep(d)
	stop.Store(true)
	wg.Wait()
	elapsed := time.Since(start)
	cpu1, syncs1 := cpuTime(), lg.Syncs()
	if traceFile != "" {
		trace.Stop()
	}
	if cpuprofile != "" {
		pprof.StopCPUProfile()
	}
	if err := lg.Close(); err != nil {
		firstErr.CompareAndSwap(nil, err.Error())
	}
	if e, ok := firstErr.Load().(string); ok {
		res.Err = e
	}
	res.Commits, res.Seconds, res.Syncs = commits.Load(), elapsed.Seconds(), syncs1-syncs0
	res.CPUus = -1
	if cpu0 >= 0 && cpu1 >= 0 {
		res.CPUus = float64(cpu1-cpu0) / 1e3
	}
	all := slices.Concat(lats...)
	if len(all) > 0 {
		slices.Sort(all)
		pct := func(p float64) float64 {
			return float64(all[min(len(all)-1, int(p/100*float64(len(all))))]) / 1e3
		}
		res.P50us, res.P99us, res.P999us = pct(50), pct(99), pct(99.9)
		res.MaxUs = float64(all[len(all)-1]) / 1e3
		i, _ := slices.BinarySearch(all, 10*time.Millisecond+1)
		res.Over10ms = int64(len(all) - i)
	}
	return res
}
