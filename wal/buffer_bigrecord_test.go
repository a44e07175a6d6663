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

// TestRecordsAboveBufferSize: records larger than BufferSize, up to
// MaxRecordSize, and batches totalling more than the buffer, from several
// goroutines, under four policies: no hang, no error, and every record
// reads back after a reopen. The sizes are the defaults' (2 MiB buffer,
// 4 MiB records) divided by 8: MemFS copies a whole segment at each sync
// and scrambles every written byte, which at full size took a minute per
// syncing policy under -race.
func TestRecordsAboveBufferSize(t *testing.T) {
	const bufSize, maxRec = wal.DefaultBufferSize / 8, wal.DefaultMaxRecordSize / 8
	// One policy per way a commit waits (sync, write, nothing), and the
	// one that writes by size.
	pols := []policy.Policy{
		policy.SyncEveryCommit(), policy.SyncInterval(time.Millisecond),
		policy.BufferedInterval(time.Millisecond, time.Millisecond), policy.AsyncCommit(time.Millisecond, bufSize/2),
	}
	for _, pol := range pols {
		t.Run(pol.String(), func(t *testing.T) {
			mem := vfs.NewMem()
			opts := wal.Options{FS: mem, SegmentSize: 1 << 20, Policy: pol, BufferSize: bufSize, MaxRecordSize: maxRec}
			l, err := wal.Open(logDir, opts)
			require.NoError(t, err)
			sizes := []int{maxRec, 3 * maxRec / 4, bufSize, bufSize + 1, 100, bufSize - 24, 1}
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
							batch[j] = bytes.Repeat([]byte{byte(g*16 + i), byte(j)}, 75<<10)
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
			case <-time.After(3 * time.Minute):
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
