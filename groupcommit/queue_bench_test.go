package groupcommit_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/durawal/durawal/groupcommit"
)

// benchDir is where flush=disk benchmarks put their file. tmpfs and
// overlayfs make fdatasync nearly free: point it at a real disk.
var benchDir = flag.String("dir", "", "directory for the flush=disk and flush=raw benchmarks (default os.TempDir(), which honours TMPDIR)")

const (
	recordSize    = 128      // bytes appended per commit
	benchFileSize = 16 << 20 // the preallocated file the disk benchmarks write into, in bytes
	simSync       = 300 * time.Microsecond
)

// benchLog is a minimal log for benchmarks: append reserves bytes; flush
// writes everything appended since the last flush (one pwrite) and, when
// asked, makes it durable (one fdatasync). With file == nil it simulates the
// write as free and the sync as a blocking 300 µs nanosleep.
type benchLog struct {
	file     *os.File
	fd       int
	buf      []byte
	appended atomic.Uint64
	syncs    atomic.Int64
	// written and synced are owned by the flush (one leader at a time).
	written, synced uint64
}

func (l *benchLog) append() uint64 { return l.appended.Add(recordSize) }

func (l *benchLog) flush(need groupcommit.Level) (uint64, uint64, error) {
	end := l.appended.Load()
	if l.file != nil && end > l.written {
		n := min(end-l.written, uint64(len(l.buf)))
		off := int64(l.written % benchFileSize)
		if off+int64(n) > benchFileSize {
			off = 0
		}
		if _, err := l.file.WriteAt(l.buf[:n], off); err != nil {
			return l.written, l.synced, err
		}
	}
	l.written = end
	if need == groupcommit.Synced {
		if err := l.sync(); err != nil {
			return l.written, l.synced, err
		}
		l.synced = end
	}
	return l.written, l.synced, nil
}

// sync makes the written bytes durable: fdatasync on the preallocated file
// (no metadata to flush), or a simulated sync that blocks the thread as the
// system call would.
func (l *benchLog) sync() error {
	l.syncs.Add(1)
	if l.file == nil {
		ts := syscall.NsecToTimespec(simSync.Nanoseconds())
		for {
			// The runtime's preemption signal interrupts the sleep: sleep
			// the rest (rem), as a sync interrupted by a signal is not cut
			// short either.
			var rem syscall.Timespec
			err := syscall.Nanosleep(&ts, &rem)
			if err != syscall.EINTR {
				return err
			}
			ts = rem
		}
	}
	return syscall.Fdatasync(l.fd)
}

// The disk benchmarks share one preallocated file per test process:
// creating, zero-filling and removing a file per benchmark run would put
// writeback and discards in the middle of the measurements.
var (
	benchFileOnce sync.Once
	benchFile     *os.File
	benchFileErr  error
	benchBuf      []byte
)

// openBenchFile creates the shared file in -dir (or os.TempDir()), zero-fills
// it and syncs it, so that each later fdatasync flushes data only, never the
// file size or block allocation.
func openBenchFile() {
	dir := *benchDir
	if dir == "" {
		dir = os.TempDir()
	}
	f, err := os.CreateTemp(dir, "groupcommit-bench-*.wal")
	if err != nil {
		benchFileErr = err
		return
	}
	benchBuf = make([]byte, 1<<20)
	for off := int64(0); off < benchFileSize; off += int64(len(benchBuf)) {
		if _, err := f.WriteAt(benchBuf, off); err != nil {
			benchFileErr = err
			return
		}
	}
	// The zero-filled blocks and the file size are durable from here on.
	if benchFileErr = f.Sync(); benchFileErr != nil {
		return
	}
	for i := range benchBuf {
		benchBuf[i] = byte(i)
	}
	benchFile = f
}

func TestMain(m *testing.M) {
	code := m.Run()
	if benchFile != nil {
		benchFile.Close()
		os.Remove(benchFile.Name())
	}
	os.Exit(code)
}

// newBenchLog returns a simulated log, or one on the shared preallocated file.
func newBenchLog(b *testing.B, disk bool) *benchLog {
	b.Helper()
	l := &benchLog{}
	if !disk {
		return l
	}
	benchFileOnce.Do(openBenchFile)
	if benchFileErr != nil {
		b.Fatal(benchFileErr)
	}
	l.file, l.fd, l.buf = benchFile, int(benchFile.Fd()), benchBuf
	return l
}

// reportLatency reports commits/s, p50-ns and p99-ns from per-commit
// latencies (nanoseconds) over elapsed.
func reportLatency(b *testing.B, lat []int64, elapsed time.Duration) {
	slices.Sort(lat)
	b.ReportMetric(float64(len(lat))/elapsed.Seconds(), "commits/s")
	b.ReportMetric(float64(lat[len(lat)*50/100]), "p50-ns")
	b.ReportMetric(float64(lat[len(lat)*99/100]), "p99-ns")
}

func reportSyncs(b *testing.B, commits int, syncs int64, s groupcommit.Stats) {
	b.ReportMetric(float64(commits)/float64(max(syncs, 1)), "commits/fsync")
	b.ReportMetric(float64(syncs)/float64(commits), "fsyncs/op")
	b.ReportMetric(float64(s.AdaptiveWaits)/float64(max(s.Groups, 1)), "adaptive-waits/group")
}

// BenchmarkWait runs k closed-loop committers (each appends a 128-byte record
// and waits for it to be synced, in a loop) against a simulated sync
// (flush=sim, 300 µs) or a real pwrite + fdatasync (flush=disk, in -dir),
// with the adaptive merge wait on and off. flush=raw is the baseline: one
// goroutine doing write + fdatasync with no queue.
func BenchmarkWait(b *testing.B) {
	b.Run("flush=raw/k=1", benchRaw)
	for _, flush := range []string{"sim", "disk"} {
		for _, k := range []int{1, 8, 16, 32} {
			for _, adaptive := range []string{"on", "off"} {
				name := fmt.Sprintf("flush=%s/k=%d/adaptive=%s", flush, k, adaptive)
				b.Run(name, func(b *testing.B) {
					benchClosedLoop(b, flush == "disk", k, groupcommit.Options{DisableAdaptiveWait: adaptive == "off"})
				})
			}
		}
	}
}

// benchRaw is a plain write + fdatasync loop: the latency and throughput a
// lone committer cannot beat.
func benchRaw(b *testing.B) {
	l := newBenchLog(b, true)
	lat := make([]int64, 0, 1<<16)
	b.ReportAllocs()
	start := time.Now()
	var off int64
	for b.Loop() {
		t0 := time.Now()
		if _, err := l.file.WriteAt(l.buf[:recordSize], off); err != nil {
			b.Fatal(err)
		}
		if err := syscall.Fdatasync(l.fd); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0).Nanoseconds())
		off = (off + recordSize) % benchFileSize
	}
	reportLatency(b, lat, time.Since(start))
	b.ReportMetric(1, "commits/fsync")
	b.ReportMetric(1, "fsyncs/op")
}

func benchClosedLoop(b *testing.B, disk bool, k int, opts groupcommit.Options) {
	l := newBenchLog(b, disk)
	q, err := groupcommit.New(l.flush, opts)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	lat := make([]int64, b.N)
	var ticket atomic.Int64
	var wg sync.WaitGroup
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for range k {
		wg.Go(func() {
			for {
				i := ticket.Add(1) - 1
				if i >= int64(b.N) {
					return
				}
				t0 := time.Now()
				if err := q.Wait(ctx, l.append(), groupcommit.Synced); err != nil {
					b.Error(err)
					return
				}
				lat[i] = time.Since(t0).Nanoseconds()
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	reportLatency(b, lat, elapsed)
	reportSyncs(b, b.N, l.syncs.Load(), q.Stats())
}

// BenchmarkWaitOpenLoop commits at a fixed rate, each commit by a free worker
// that does not wait for the others: nobody "comes back", so the adaptive
// wait must not add latency. Each of 64 workers sleeps until the scheduled
// time of its next arrival (a fixed schedule, independent of completions),
// then appends and waits; latency is measured from the append to the return
// of Wait. flush=raw is the baseline under the same arrivals: each commit
// does its own write + fdatasync, with no queue. Pacing uses time.Sleep,
// which fires up to 1 ms late when the process is idle, so arrivals come in
// small bursts at the higher rates (pacing by spinning costs one of the two
// cores; pacing by nanosleep on a locked thread stalls the scheduler with
// both Ps in system calls).
func BenchmarkWaitOpenLoop(b *testing.B) {
	for _, flush := range []string{"sim", "disk"} {
		for _, rate := range []int{500, 1000, 2000, 5000} {
			if flush == "disk" {
				b.Run(fmt.Sprintf("flush=raw/rate=%d", rate), func(b *testing.B) { benchOpenLoopRaw(b, rate) })
			}
			for _, adaptive := range []string{"on", "off"} {
				name := fmt.Sprintf("flush=%s/rate=%d/adaptive=%s", flush, rate, adaptive)
				b.Run(name, func(b *testing.B) {
					opts := groupcommit.Options{DisableAdaptiveWait: adaptive == "off"}
					benchOpenLoop(b, flush == "disk", rate, opts)
				})
			}
		}
	}
}

func benchOpenLoop(b *testing.B, disk bool, rate int, opts groupcommit.Options) {
	l := newBenchLog(b, disk)
	q, err := groupcommit.New(l.flush, opts)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	openLoop(b, rate, func() error { return q.Wait(ctx, l.append(), groupcommit.Synced) })
	reportSyncs(b, b.N, l.syncs.Load(), q.Stats())
}

// benchOpenLoopRaw is the open-loop baseline without a queue: each commit
// does its own write + fdatasync, under the same arrivals (and the same idle
// gaps) as the queued runs.
func benchOpenLoopRaw(b *testing.B, rate int) {
	l := newBenchLog(b, true)
	var off atomic.Int64
	openLoop(b, rate, func() error {
		o := (off.Add(recordSize) - recordSize) % benchFileSize
		if _, err := l.file.WriteAt(l.buf[:recordSize], o); err != nil {
			return err
		}
		return syscall.Fdatasync(l.fd)
	})
	b.ReportMetric(1, "fsyncs/op")
}

// openLoop makes b.N commits at a fixed rate and reports their latency.
// Worker w makes arrivals w, w+workers, w+2·workers, … each at its own
// scheduled time, whether or not the others' commits have returned.
func openLoop(b *testing.B, rate int, commit func() error) {
	const workers = 64
	lat := make([]int64, b.N)
	period := time.Second / time.Duration(rate)
	var wg sync.WaitGroup
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for w := range workers {
		wg.Go(func() {
			for i := w; i < b.N; i += workers {
				time.Sleep(time.Until(start.Add(time.Duration(i) * period)))
				t0 := time.Now()
				if err := commit(); err != nil {
					b.Error(err)
					return
				}
				lat[i] = time.Since(t0).Nanoseconds()
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	reportLatency(b, lat, elapsed)
}
