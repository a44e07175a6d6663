package wal_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/durawal/durawal/policy"
	"github.com/durawal/durawal/wal"
	"github.com/durawal/durawal/wal/vfs"
)

// TestKeptFilesTrustedOnlyAfterCleanClose: segment files RemoveBefore kept
// for reuse are adopted by the next Open only after a clean Close. A roll
// reuses a kept file by renaming it; a power loss can undo the rename and
// keep the frames written into the file (or some of their blocks, and not
// its new header), so after a crash a kept file may hold valid frames of
// the very LSNs the recovered log writes next. Reusing it let those stale
// frames follow the new ones (TestPowerLossProperty seed 609: a clean
// Close then reopened with a torn tail). After a crash Open removes them.
func TestKeptFilesTrustedOnlyAfterCleanClose(t *testing.T) {
	for _, clean := range []bool{true, false} {
		name := "crash"
		if clean {
			name = "clean Close"
		}
		t.Run(name, func(t *testing.T) {
			mem := vfs.NewMem()
			opts := wal.Options{FS: mem, SegmentSize: 8 << 10, RecycleSegments: 2, Policy: policy.SyncEveryCommit()}
			l, err := wal.Open(logDir, opts)
			require.NoError(t, err)
			var last wal.LSN
			for l.Stats().Segments < 5 {
				last, err = l.Append(make([]byte, 700))
				require.NoError(t, err)
			}
			_, err = l.RemoveBefore(last)
			require.NoError(t, err)
			require.EqualValues(t, 2, l.Stats().Prepare.Kept, "files kept for reuse")
			img := vfs.FS(mem)
			if clean {
				require.NoError(t, l.Close())
			} else {
				img = mem.PowerLoss(vfs.KeepAll()) // no Close: no end frame
			}
			opts.FS = img
			l2, err := wal.Open(logDir, opts)
			require.NoError(t, err)
			defer l2.Close()
			info := l2.Recovered()
			require.Equal(t, clean, info.Clean)
			names, err := img.List(logDir)
			require.NoError(t, err)
			kept := 0
			for _, n := range names {
				if strings.HasPrefix(n, "recycle-") {
					kept++
				}
			}
			if clean {
				require.Equal(t, 2, kept, "kept files adopted after a clean Close: %v", names)
				require.Zero(t, info.RemovedTemp)
			} else {
				require.Zero(t, kept, "kept files left for reuse after a crash: %v", names)
				require.Equal(t, 2, info.RemovedTemp)
			}
		})
	}
}
