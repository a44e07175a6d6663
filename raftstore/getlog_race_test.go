package raftstore_test

import (
	"bytes"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/durawal/durawal/raftstore"
	"github.com/durawal/durawal/wal"
	"github.com/durawal/durawal/wal/vfs"
	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/require"
)

// TestGetLogDuringSuffixRewrite: while one goroutine cuts the suffix
// 20..40 and stores it again, alternately with small and large entries
// (so the LSNs of the new entries are not those of the old), readers
// GetLog every index. Each call must return the entry stored at that index
// when it ran (index and term matching, the data of one of the two
// generations) or raft.ErrLogNotFound: never a corruption error for a
// healthy log.
func TestGetLogDuringSuffixRewrite(t *testing.T) {
	s, err := raftstore.Open(storeDir, wal.Options{FS: vfs.NewMem(), SegmentSize: 1 << 20})
	require.NoError(t, err)
	defer s.Close()
	gen := func(from, to, term uint64, size int) []*raft.Log {
		var logs []*raft.Log
		for i := from; i <= to; i++ {
			logs = append(logs, &raft.Log{Index: i, Term: term, Type: raft.LogCommand,
				Data: bytes.Repeat([]byte{byte(i)}, size)})
		}
		return logs
	}
	require.NoError(t, s.StoreLogs(gen(1, 40, 1, 50)))

	var stop atomic.Bool
	var reads, notFound atomic.Int64
	var wg sync.WaitGroup
	errc := make(chan error, 2)
	for r := range 2 {
		wg.Go(func() {
			var lg raft.Log
			for i := uint64(r); !stop.Load(); i++ {
				idx := 1 + i%40
				err := s.GetLog(idx, &lg)
				reads.Add(1)
				switch {
				case errors.Is(err, raft.ErrLogNotFound):
					notFound.Add(1)
				case err != nil:
					errc <- err
					return
				case lg.Index != idx || len(lg.Data) == 0 || lg.Data[0] != byte(idx) ||
					(len(lg.Data) != 50 && len(lg.Data) != 700):
					errc <- errors.New("GetLog returned an entry that was never stored at that index")
					return
				}
			}
		})
	}
	deadline := time.Now().Add(time.Second)
	rounds := 0
	for ; time.Now().Before(deadline) && len(errc) == 0; rounds++ {
		require.NoError(t, s.DeleteRange(20, 40))
		size := 700
		if rounds%2 == 1 {
			size = 50
		}
		require.NoError(t, s.StoreLogs(gen(20, 40, uint64(rounds+2), size)))
	}
	stop.Store(true)
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatalf("after %d rewrites and %d reads: %v", rounds, reads.Load(), err)
	}
	t.Logf("%d rewrites, %d reads (%d not found)", rounds, reads.Load(), notFound.Load())
}
