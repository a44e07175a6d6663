package wal_test

import (
	"io"
	"path/filepath"
	"testing"

	"github.com/durawal/durawal/wal"
	"github.com/stretchr/testify/require"
)

// TestLegacySegmentEmptiedThenAppended: a log of an older format, emptied
// by TruncateFrom(FirstLSN()), takes an append: the append rolls away from
// the older segment (Open never appends to one) into a new segment whose
// first LSN is the older one's, so the older file must not be reused or
// overwritten under the same name while it is still the log's.
func TestLegacySegmentEmptiedThenAppended(t *testing.T) {
	for _, v := range []string{"format-v1", "format-v2", "format-v4"} {
		t.Run(v, func(t *testing.T) {
			dir := copyFixture(t, filepath.Join("testdata", v))
			l, err := wal.Open(dir, wal.Options{})
			require.NoError(t, err)
			first := l.FirstLSN()
			require.NoError(t, l.TruncateFrom(first))
			r, err := l.NewReader(first)
			require.NoError(t, err)
			_, _, err = r.Next()
			require.ErrorIs(t, err, io.EOF, "the log is empty")
			lsn, err := l.Append([]byte("after the cut"))
			require.NoError(t, err)
			require.Equal(t, first, lsn)
			_, rec, err := r.Next()
			require.NoError(t, err, "a Reader opened on the replaced segment follows the new one")
			require.Equal(t, []byte("after the cut"), rec)
			require.NoError(t, r.Close())
			rec, err = l.ReadRecord(lsn, nil)
			require.NoError(t, err)
			require.Equal(t, []byte("after the cut"), rec)
			_, err = l.Append([]byte("and one more"))
			require.NoError(t, err)
			require.NoError(t, l.Close())

			l, err = wal.Open(dir, wal.Options{VerifyOnOpen: true})
			require.NoError(t, err)
			_, got := readAll(t, l, l.FirstLSN())
			require.NoError(t, l.Close())
			require.Equal(t, [][]byte{[]byte("after the cut"), []byte("and one more")}, got)
		})
	}
}
