package wal_test

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/durawal/durawal/policy"
	"github.com/durawal/durawal/wal"
	"github.com/durawal/durawal/wal/vfs"
	"github.com/stretchr/testify/require"
)

// TestRecordsAboveDefaultBuffer: with the default 2 MiB BufferSize,
// records up to MaxRecordSize (4 MiB) and batches totalling more than the
// buffer, from several goroutines, under four policies: no hang, no
// error, and every record reads back after a reopen.
func TestRecordsAboveDefaultBuffer(t *testing.T) {
	// One policy per way a commit waits (sync, write, nothing), and the
	// one that writes by size: every policy makes MemFS copy its whole
	// 8 MiB segment at each sync, so all seven would take half a minute.
	pols := []policy.Policy{
		policy.SyncEveryCommit(), policy.SyncInterval(time.Millisecond),
		policy.BufferedInterval(time.Millisecond, time.Millisecond), policy.AsyncCommit(time.Millisecond, 1<<20),
	}
	for _, pol := range pols {
		t.Run(pol.String(), func(t *testing.T) {
			mem := vfs.NewMem()
			opts := wal.Options{FS: mem, SegmentSize: 8 << 20, Policy: pol}
			l, err := wal.Open(logDir, opts)
			require.NoError(t, err)
			sizes := []int{wal.DefaultMaxRecordSize, 3 << 20, wal.DefaultBufferSize, wal.DefaultBufferSize + 1, 100, 2<<20 - 24, 1}
			var mu sync.Mutex
			got := map[wal.LSN][]byte{}
			var wg sync.WaitGroup
			done := make(chan struct{})
			for g := range 3 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range 6 {
						if (g+i)%2 == 0 {
							rec := bytes.Repeat([]byte{byte(g*16 + i)}, sizes[(g+i)%len(sizes)])
							lsn, err := l.Append(rec)
							if err != nil {
								t.Error(err)
								return
							}
							mu.Lock()
							got[lsn] = rec
							mu.Unlock()
							continue
						}
						batch := make([][]byte, 5)
						for j := range batch {
							batch[j] = bytes.Repeat([]byte{byte(g*16 + i), byte(j)}, 600<<10)
						}
						lsns := make([]wal.LSN, len(batch))
						if _, err := l.AppendBatchLSNs(context.Background(), batch, lsns); err != nil {
							t.Error(err)
							return
						}
						mu.Lock()
						for j, lsn := range lsns {
							got[lsn] = batch[j]
						}
						mu.Unlock()
					}
				}()
			}
			go func() { wg.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(60 * time.Second):
				t.Fatal("appends hung")
			}
			require.NoError(t, l.Sync())
			require.NoError(t, l.Close())
			st := l.Stats()
			t.Logf("%s: rolls %d, prepare %+v", pol, st.Rolls, st.Prepare)
			lsns, recs, _ := replay(t, mem, wal.Options{SegmentSize: 16 << 20, Policy: pol})
			require.Equal(t, len(got), len(lsns))
			for i, lsn := range lsns {
				require.True(t, bytes.Equal(got[lsn], recs[i]), fmt.Sprintf("record at %d", lsn))
			}
		})
	}
}
