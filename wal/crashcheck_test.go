package wal_test

import (
	"bytes"
	"testing"

	"github.com/durawal/durawal/wal"
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
