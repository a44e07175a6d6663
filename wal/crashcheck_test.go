package wal_test

import (
	"bytes"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/durawal/durawal/wal"
	"github.com/durawal/durawal/wal/vfs"
	"github.com/durawal/durawal/wal/vfs/faultfs"
	"github.com/stretchr/testify/require"
)

// requireRecoveredRun is the check every crash test makes of what a
// recovered log holds: the records read back (lsns, got) are, from index
// start of what was appended (wantLSNs, wantRecs), a contiguous run of it,
// byte-identical at the same LSNs (nothing dropped is back, nothing is
// damaged, no hole), that covers at least the first acked records. It
// returns the index just past the run. what names the image in failures.
func requireRecoveredRun(t *testing.T, what string, lsns []wal.LSN, got [][]byte, wantLSNs []wal.LSN, wantRecs [][]byte, start, acked int) int {
	t.Helper()
	require.LessOrEqual(t, start+len(got), len(wantRecs), "%s: more records than appended (a dropped record is back?)", what)
	for i := range got { // require only on a mismatch: this loop is hot
		if wantLSNs[start+i] != lsns[i] || !bytes.Equal(wantRecs[start+i], got[i]) {
			require.Equal(t, wantLSNs[start+i], lsns[i], "%s: record %d at the wrong LSN", what, start+i)
			require.Equal(t, len(wantRecs[start+i]), len(got[i]), "%s: record %d at LSN %d has the wrong size", what, start+i, lsns[i])
			require.Fail(t, "damaged record", "%s: record %d at LSN %d not byte-identical", what, start+i, lsns[i])
		}
	}
	n := start + len(got)
	require.GreaterOrEqual(t, n, acked, "%s: lost an acknowledged record (got %d from index %d, %d acknowledged)", what, len(got), start, acked)
	return n
}

// checkRecovered opens the log on fsys and checks it holds every acked
// record and none of the cut ones (when the cut returned nil).
func requireCutRecovered(t *testing.T, fsys vfs.FS, acked map[wal.LSN][]byte, cut map[string]bool, what string) {
	t.Helper()
	ro, rerr := wal.OpenReadOnly(logDir, wal.Options{FS: fsys, SegmentSize: 4 << 10})
	var roEnd wal.LSN
	var roSteps []string
	if rerr == nil {
		roEnd = ro.Recovered().EndLSN
		roSteps = ro.Recovered().Steps
		ro.Close()
	}
	l, err := wal.Open(logDir, wal.Options{FS: fsys, SegmentSize: 4 << 10})
	if err != nil {
		t.Fatalf("%s: Open: %v (OpenReadOnly: %v)", what, err, rerr)
	}
	defer l.Close()
	if rerr == nil && roEnd != l.Recovered().EndLSN {
		t.Errorf("%s: OpenReadOnly EndLSN %d, Open EndLSN %d", what, roEnd, l.Recovered().EndLSN)
	}
	if rerr == nil && fmt.Sprint(roSteps) != fmt.Sprint(l.Recovered().Steps) {
		t.Errorf("%s: OpenReadOnly planned %q, Open did %q", what, roSteps, l.Recovered().Steps)
	}
	got := map[wal.LSN][]byte{}
	r, err := l.NewReader(l.Recovered().FirstLSN)
	require.NoError(t, err)
	defer r.Close()
	for {
		lsn, rec, err := r.Next()
		if err != nil {
			break
		}
		got[lsn] = append([]byte(nil), rec...)
		if cut[string(rec)] {
			t.Errorf("%s: cut record came back at LSN %d", what, lsn)
		}
	}
	for lsn, rec := range acked {
		if string(got[lsn]) != string(rec) {
			t.Errorf("%s: acknowledged record at LSN %d lost (got %d bytes)", what, lsn, len(got[lsn]))
		}
	}
	if t.Failed() {
		t.Logf("%s: recovered %+v", what, l.Recovered())
	}
}

// errCrash is the error of every operation at and after a crash point.
var errCrash = errors.New("injected crash")

// crashAtEveryOp is the crash sweep: for k = 1, 2, …, it runs workload on
// a fresh image from newImage with every filesystem operation from the
// k-th on failing with errCrash (the process stops there), and calls check
// with k and the image, until a run meets no crash point (the workload ran
// fewer than k operations) or check returns false. The workload must run
// more than minOps operations. It returns the number of crash points.
func crashAtEveryOp(t *testing.T, minOps int64, newImage func() *vfs.MemFS, workload func(vfs.FS), check func(k int64, img *vfs.MemFS) bool) int64 {
	t.Helper()
	for k := int64(1); ; k++ {
		img := newImage()
		var reached atomic.Bool
		workload(faultfs.Inject(img, faultfs.InjectorFunc(func(op faultfs.Op) error {
			if op.Index >= k {
				reached.Store(true)
				return errCrash
			}
			return nil
		})))
		if !reached.Load() {
			require.Greater(t, k, minOps, "the workload runs fewer operations than expected")
			return k - 1
		}
		if !check(k, img) {
			return k
		}
	}
}
