package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/durawal/durawal/internal/measure"
	"github.com/durawal/durawal/wal"
)

var benchDir = flag.String("dir", "", "directory on the disk to benchmark (default: the test's temp dir)")

// TestQuickRun runs the whole program in a reduced quick mode and checks
// every table and the JSON come out, and that every library ran.
func TestQuickRun(t *testing.T) {
	jsonPath := filepath.Join(t.TempDir(), "out.json")
	var out, errOut bytes.Buffer
	args := []string{"-quick", "-dir", t.TempDir(), "-json", jsonPath, "-writers", "1,4",
		"-duration", "50ms", "-recovery-mib", "1", "-torn-records", "5", "-strace=false"}
	if err := run(args, &out, &errOut); err != nil {
		t.Fatalf("run: %v\n%s", err, errOut.String())
	}
	for _, want := range []string{"## Durable commits", "## Relaxed commits", "## Recovery", "## Torn tail", "| pebble   |"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	b, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var res results
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	for _, l := range libs() {
		n := 0
		for _, c := range res.Cells {
			if c.Lib == l.name {
				n++
				if c.Err != "" {
					t.Errorf("%s %s %d writers: %s", c.Lib, c.Mode, c.Writers, c.Err)
				}
				if c.Commits == 0 {
					t.Errorf("%s %s %d writers: no commits", c.Lib, c.Mode, c.Writers)
				}
			}
		}
		if n == 0 {
			t.Errorf("%s never ran", l.name)
		}
	}
	for _, c := range res.Cells {
		if c.Lib == "durawal" && c.Syncs != c.VFSSyncs {
			t.Errorf("durawal %s %d writers: Stats counted %d syncs, the faultfs.Counter %d", c.Mode, c.Writers, c.Syncs, c.VFSSyncs)
		}
	}
	for _, r := range res.Recovery {
		if r.Err != "" || r.Recovered != r.Written {
			t.Errorf("recovery %s: %d of %d records, err %q", r.Lib, r.Recovered, r.Written, r.Err)
		}
	}
	for _, tr := range res.Torn {
		if strings.HasPrefix(tr.Outcome, "setup failed") {
			t.Errorf("torn %s: %s %s", tr.Lib, tr.Outcome, tr.Err)
		}
	}
}

func TestParseStraceCounts(t *testing.T) {
	text := `% time     seconds  usecs/call     calls    errors syscall
------ ----------- ----------- --------- --------- ----------------
 97.10    1.021035         676      1510           fdatasync
  2.90    0.030511         763        40         2 fsync
------ ----------- ----------- --------- --------- ----------------
100.00    1.051546         679      1550         2 total
`
	if got := parseStraceCounts(text); got != 1550 {
		t.Errorf("parseStraceCounts = %d, want 1550", got)
	}
}

// BenchmarkCommit commits 100 B records from 1, 8, 16 and 32 goroutines to
// each library: go test -bench . -count 10 | benchstat, with -args -dir
// /path/on/disk to pick the disk.
func BenchmarkCommit(b *testing.B) {
	for _, l := range libs() {
		for _, m := range []mode{durable, relaxed} {
			if m == relaxed && l.relaxed == "" {
				continue
			}
			for _, w := range []int{1, 8, 16, 32} {
				b.Run(fmt.Sprintf("lib=%s/mode=%s/writers=%d", l.name, m, w), func(b *testing.B) {
					benchCommit(b, l, m, w, 100)
				})
			}
		}
	}
}

// benchLogDir returns a new directory for one benchmark's log under -dir
// (or the test's temporary directory), removed when the benchmark ends.
func benchLogDir(b *testing.B) string {
	root := *benchDir
	if root == "" {
		root = b.TempDir()
	}
	dir, err := os.MkdirTemp(root, "bench-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func benchCommit(b *testing.B, l *lib, m mode, writers, size int) {
	lg, err := l.open(benchLogDir(b), m)
	if err != nil {
		b.Fatal(err)
	}
	if err := lg.Append(record(size, 999, 0)); err != nil {
		b.Fatal(err)
	}
	syncs0 := lg.Syncs()
	var (
		next atomic.Int64
		wg   sync.WaitGroup
		mu   sync.Mutex
		lats []time.Duration
		errs atomic.Value
	)
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rec := record(size, w, 0)
			var mine []time.Duration
			for next.Add(1) <= int64(b.N) {
				t0 := time.Now()
				if err := lg.Append(rec); err != nil {
					errs.Store(err)
					return
				}
				mine = append(mine, time.Since(t0))
			}
			mu.Lock()
			lats = append(lats, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	b.StopTimer()
	syncs1 := lg.Syncs()
	if err := lg.Close(); err != nil {
		b.Fatal(err)
	}
	if err, _ := errs.Load().(error); err != nil {
		b.Fatal(err)
	}
	slices.Sort(lats)
	b.ReportMetric(float64(measure.Percentile(lats, 99))/1e3, "p99-µs")
	if syncs0 >= 0 {
		b.ReportMetric(float64(syncs1-syncs0)/float64(b.N), "fsyncs/op")
	}
}

// BenchmarkLogBufferAppend compares one goroutine's appends into a log
// buffer with no fsync: durawal under policy.BufferedInterval (InnoDB =0:
// the commit returns once its record is in the log buffer; the buffer is
// written when a half fills, and never synced within the run) against
// pebble's LogWriter with SyncRecord(p, nil, nil) (buffered, written by
// its flush goroutine; pebble's Sync=false). durawal's segment preparation,
// rolls and their background sealing fall inside the measurement; pebble
// writes one preallocated file. pebble-nosync-rotating adds what pebble's DB
// does around its LogWriter each time a memtable fills: close the WAL (which
// syncs it), create the next and sync the directory, on the commit path;
// here every 64 MiB, durawal's default segment size, so both pay a sync per
// 64 MiB (durawal's off the commit path, until a roll finds the previous
// one's sealing still running: sealwaits). fullwaits, sparewaits,
// sealwaits and rolls are durawal's Stats for the whole run.
// Run with -benchmem and -count: the
// sub-benchmarks alternate, so a ratio is taken within one run.
// durawal-buffered-nowriteback turns Options.WritebackAfter off: by default
// durawal hands every MiB written to the device (sync_file_range), so that
// no later fdatasync meets a backlog, and a log that is never synced then
// runs at the device's speed, where pebble's writes stay in the page cache.
func BenchmarkLogBufferAppend(b *testing.B) {
	for _, size := range []int{100, 1000} {
		for _, name := range []string{"durawal-buffered", "durawal-buffered-nowriteback", "pebble-nosync", "pebble-nosync-rotating"} {
			b.Run(fmt.Sprintf("size=%d/lib=%s", size, name), func(b *testing.B) {
				dir := benchLogDir(b)
				var lg peerLog
				var err error
				switch name {
				case "pebble-nosync":
					lg, err = pebbleLib().open(dir, relaxed)
				case "pebble-nosync-rotating":
					lg, err = openRotatingPebble(dir, wal.DefaultSegmentSize)
				case "durawal-buffered-nowriteback":
					lg, err = openDurawalBuffered(dir, -1)
				default:
					lg, err = openDurawalBuffered(dir, 0)
				}
				if err != nil {
					b.Fatal(err)
				}
				rec := record(size, 0, 0)
				b.SetBytes(int64(size))
				b.ReportAllocs()
				for b.Loop() {
					if err := lg.Append(rec); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				if d, ok := lg.(*durawalLog); ok {
					s := d.l.Stats()
					b.ReportMetric(float64(s.BufferFullWaits), "fullwaits")
					b.ReportMetric(float64(s.Prepare.Waits), "sparewaits")
					b.ReportMetric(float64(s.SealWaits), "sealwaits")
					b.ReportMetric(float64(s.Rolls), "rolls")
				}
				if err := lg.Close(); err != nil {
					b.Fatal(err)
				}
			})
		}
	}
}

// TestRotatingPebbleRotates checks the benchmark's pebble-nosync-rotating
// peer does what it claims: a new WAL file each rotateAt bytes, each
// closed one synced, plus a directory sync per rotation.
func TestRotatingPebbleRotates(t *testing.T) {
	dir := t.TempDir()
	p, err := openRotatingPebble(dir, 64<<10)
	if err != nil {
		t.Fatal(err)
	}
	rec := record(1000, 0, 0)
	for range 1000 { // about 1 MiB: 15 rotations
		if err := p.Append(rec); err != nil {
			t.Fatal(err)
		}
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil {
		t.Fatal(err)
	}
	rotations := len(files) - 1
	if rotations < 14 {
		t.Fatalf("%d WAL files for 1 MiB at 64 KiB each", len(files))
	}
	// A sync per closed WAL and a directory sync per rotation.
	if got := p.Syncs(); got < int64(2*rotations) {
		t.Fatalf("%d syncs for %d rotations", got, rotations)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
}
