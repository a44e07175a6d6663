package wal_test

import (
	"fmt"
	"io"
	"sync"
	"testing"

	"github.com/durawal/durawal/wal"
	"github.com/durawal/durawal/wal/vfs"
	"github.com/stretchr/testify/require"
)

func readAll(t *testing.T, l *wal.Log, from wal.LSN) (lsns []wal.LSN, recs []string) {
	t.Helper()
	r, err := l.NewReader(from)
	require.NoError(t, err)
	defer r.Close()
	for {
		lsn, rec, err := r.Next()
		if err == io.EOF {
			return
		}
		require.NoError(t, err)
		lsns = append(lsns, lsn)
		recs = append(recs, string(rec))
	}
}

func TestSmokeAppendReopenRead(t *testing.T) {
	for _, name := range []string{"os", "mem"} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			var fsys vfs.FS = vfs.OS()
			if name == "mem" {
				fsys = vfs.NewMem()
			}
			opts := wal.Options{FS: fsys, SegmentSize: 8 << 10}
			l, err := wal.Open(dir, opts)
			require.NoError(t, err)
			var want []string
			for i := range 500 {
				rec := fmt.Sprintf("record-%d-%s", i, string(make([]byte, i%50)))
				want = append(want, rec)
				_, err := l.Append([]byte(rec))
				require.NoError(t, err)
			}
			require.NoError(t, l.Close())
			l, err = wal.Open(dir, opts)
			require.NoError(t, err)
			_, got := readAll(t, l, 0)
			require.Equal(t, want, got)
			st := l.Stats()
			require.Equal(t, l.AppendedLSN(), st.AppendedLSN)
			require.NoError(t, l.Close())
		})
	}
}

func TestSmokeConcurrent(t *testing.T) {
	dir := t.TempDir()
	l, err := wal.Open(dir, wal.Options{SegmentSize: 64 << 10})
	require.NoError(t, err)
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 100 {
				_, err := l.Append(fmt.Appendf(nil, "g%d-%d", g, i))
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	st := l.Stats()
	t.Logf("commits %d fsyncs %d groups %d", st.Commits, st.Fsyncs, st.Group.Groups)
	require.NoError(t, l.Close())
	l, err = wal.Open(dir, wal.Options{SegmentSize: 64 << 10})
	require.NoError(t, err)
	_, got := readAll(t, l, 0)
	require.Len(t, got, 1600)
	require.NoError(t, l.Close())
}
