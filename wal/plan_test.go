package wal_test

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/durawal/durawal/policy"
	"github.com/durawal/durawal/wal"
	"github.com/durawal/durawal/wal/vfs"
	"github.com/durawal/durawal/wal/vfs/faultfs"
	"github.com/stretchr/testify/require"
)

var rewritePlans = flag.Bool("rewrite-plans", false, "write testdata/plans/*.txt from the plans recovery makes now")

// planCases build directory images, each the state a crash or an operator
// leaves; testdata/plans/<name>.txt holds the verdict and the plan recovery
// must make of it (RecoveryInfo.Steps), as Pebble's datadriven tests keep
// inputs beside the output they must give. Run with -rewrite-plans after a
// deliberate change, and read the diff.
var planCases = []struct {
	name  string
	build func(t *testing.T) *vfs.MemFS
}{
	{"clean-close", func(t *testing.T) *vfs.MemFS {
		return writeLog(t, wal.Options{SegmentSize: 4 << 10}, []int{100, 200, 300}).mem
	}},
	{"torn-tail", func(t *testing.T) *vfs.MemFS {
		// Three records written, never synced; a crash; the third one's
		// payload lost part of its bytes.
		mem := vfs.NewMem()
		l := openLog(t, mem, wal.Options{SegmentSize: 4 << 10, Policy: policy.SyncNever()})
		var lsns []wal.LSN
		for i, n := range []int{100, 200, 300} {
			lsn, err := l.Append(record(0, i, n))
			require.NoError(t, err)
			lsns = append(lsns, lsn)
		}
		wal.AwaitPreparer(l)
		img := mem.ProcessCrash()
		l.Close()
		seg := segments(t, img)[0]
		b := fileBytes(t, img, seg)
		off := segHeader + int(lsns[2]) + frameHeader
		clear(b[off : off+8])
		setFile(t, img, seg, b)
		return img
	}},
	{"leftover-temp-files", func(t *testing.T) *vfs.MemFS {
		mem := writeLog(t, wal.Options{SegmentSize: 4 << 10}, []int{100}).mem
		for _, name := range []string{"prepare-7.wal.tmp", "first-lsn.wal.tmp"} {
			f, err := mem.Create(filepath.Join(logDir, name), vfs.Fdatasync)
			require.NoError(t, err)
			require.NoError(t, f.Close())
		}
		return mem
	}},
	{"interrupted-cut", func(t *testing.T) *vfs.MemFS {
		// TruncateFrom recorded the cut and its epoch, and its sync of
		// the zeroed frames failed: the cut is recorded, not finished.
		mem := vfs.NewMem()
		var armed atomic.Bool
		inj := faultfs.InjectorFunc(func(op faultfs.Op) error {
			if armed.Load() && op.Kind == faultfs.OpSync && strings.HasSuffix(op.Path, ".wal") {
				armed.Store(false)
				return syscall.EIO
			}
			return nil
		})
		l, err := wal.Open(logDir, wal.Options{FS: faultfs.Inject(mem, inj), SegmentSize: 4 << 10})
		require.NoError(t, err)
		var lsns []wal.LSN
		for i := 0; l.Stats().Rolls < 2; i++ {
			lsn, err := l.Append(record(0, i, 200))
			require.NoError(t, err)
			lsns = append(lsns, lsn)
		}
		armed.Store(true)
		require.ErrorIs(t, l.TruncateFrom(lsns[5]), wal.ErrPoisoned)
		wal.AwaitPreparer(l)
		img := mem.ProcessCrash()
		l.Close()
		return img
	}},
	{"interrupted-remove", func(t *testing.T) *vfs.MemFS {
		// RemoveBefore recorded the new start, then a crash came before
		// it removed the oldest segment.
		mem := vfs.NewMem()
		l := openLog(t, mem, wal.Options{SegmentSize: 4 << 10})
		for i := 0; l.Stats().Rolls < 2; i++ {
			_, err := l.Append(record(0, i, 200))
			require.NoError(t, err)
		}
		require.NoError(t, l.Close())
		segs := segments(t, mem)
		old := fileBytes(t, mem, segs[0])
		l = openLog(t, mem, wal.Options{SegmentSize: 4 << 10})
		_, err := l.RemoveBefore(segFirst(t, segs[1]))
		require.NoError(t, err)
		require.NoError(t, l.Close())
		f, err := mem.Create(filepath.Join(logDir, segs[0]), vfs.Fdatasync)
		require.NoError(t, err)
		_, err = f.WriteAt(old, 0)
		require.NoError(t, err)
		require.NoError(t, f.Sync())
		require.NoError(t, f.Close())
		return mem
	}},
	{"roll-cut-short", func(t *testing.T) *vfs.MemFS {
		// A roll's new segment got frames, but its header never reached
		// the disk, and the finished segment has no link.
		mem := vfs.NewMem()
		l := openLog(t, mem, wal.Options{SegmentSize: 4 << 10, Policy: policy.SyncNever()})
		for i := 0; l.Stats().Rolls < 1; i++ {
			_, err := l.Append(record(0, i, 200))
			require.NoError(t, err)
		}
		for i := range 3 {
			_, err := l.Append(record(1, i, 200))
			require.NoError(t, err)
		}
		wal.AwaitPreparer(l)
		img := mem.ProcessCrash()
		l.Close()
		segs := segments(t, img)
		b := fileBytes(t, img, segs[1])
		clear(b[:segHeader])
		setFile(t, img, segs[1], b)
		p := fileBytes(t, img, segs[0])
		at := segHeader + int(segFirst(t, segs[1])-segFirst(t, segs[0]))
		if at+endFrame <= len(p) {
			clear(p[at : at+endFrame])
		}
		setFile(t, img, segs[0], p)
		return img
	}},
	{"first-lsn-past-end", func(t *testing.T) *vfs.MemFS {
		mem := writeLog(t, wal.Options{SegmentSize: 4 << 10}, []int{100, 200}).mem
		setFile(t, mem, "first-lsn", lsnRecord(122400))
		return mem
	}},
	{"creation-interrupted", func(t *testing.T) *vfs.MemFS {
		// A crash after the first segment and first-lsn, before the
		// epoch record.
		mem := writeLog(t, wal.Options{SegmentSize: 4 << 10}, nil).mem
		require.NoError(t, mem.Remove(filepath.Join(logDir, "epoch")))
		return mem
	}},
}

// describePlan is what a plan file holds: the verdict of OpenReadOnly,
// then that of Open, and the steps Open took.
func describePlan(info wal.RecoveryInfo, err error) string {
	if err != nil {
		return "error: " + err.Error() + "\n"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "log: LSNs %d to %d in %d segments, clean %v, torn %d bytes, unvouched %d bytes, dropped %q, epoch %d\n",
		info.FirstLSN, info.EndLSN, info.Segments, info.Clean, info.TornBytes, info.Unvouched, info.DroppedSegment, info.Epoch)
	for _, s := range info.Steps {
		fmt.Fprintf(&b, "step: %s\n", s)
	}
	return b.String()
}

func TestRecoveryPlans(t *testing.T) {
	for _, c := range planCases {
		t.Run(c.name, func(t *testing.T) {
			img := c.build(t)
			opts := wal.Options{SegmentSize: 4 << 10}
			ro := opts
			ro.FS = img.ProcessCrash()
			rl, rerr := wal.OpenReadOnly(logDir, ro)
			var rinfo wal.RecoveryInfo
			if rerr == nil {
				rinfo = rl.Recovered()
				require.NoError(t, rl.Close())
			}
			opts.FS = img
			l, err := wal.Open(logDir, opts)
			var info wal.RecoveryInfo
			if err == nil {
				info = l.Recovered()
				require.NoError(t, l.Close())
			}
			got := "read-only " + describePlan(rinfo, rerr) + "open " + describePlan(info, err)
			// One plan: OpenReadOnly's verdict and steps are Open's.
			require.Equal(t, rerr == nil, err == nil, "OpenReadOnly: %v; Open: %v", rerr, err)
			if err == nil {
				require.Equal(t, rinfo.Steps, info.Steps, "OpenReadOnly's plan is Open's")
				require.Equal(t, rinfo.EndLSN, info.EndLSN)
				require.Equal(t, rinfo.TornBytes, info.TornBytes)
				require.Equal(t, rinfo.DroppedSegment, info.DroppedSegment)
			}
			path := filepath.Join("testdata", "plans", c.name+".txt")
			if *rewritePlans {
				require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
			}
			want, rerr2 := os.ReadFile(path)
			require.NoError(t, rerr2, "run with -rewrite-plans to create it")
			require.Equal(t, string(want), got)
		})
	}
}
