package wal_test

import (
	"context"
	"encoding/binary"
	"sync/atomic"
	"testing"

	"github.com/durawal/durawal/policy"
	"github.com/durawal/durawal/wal"
	"github.com/durawal/durawal/wal/vfs"
	"github.com/durawal/durawal/wal/vfs/faultfs"
	"github.com/stretchr/testify/require"
)

// TestRecycledSegmentLostFirstFrame: the first frames of a segment can be
// appended before its predecessor is synced, so they carry a
// watermark below the segment's first LSN, like the stale frames of a
// recycled file's earlier use. When a power loss keeps such a frame but
// loses the one before it, recovery must still cut it: otherwise a new
// record of the lost one's size ends where it starts, and a crash brings
// it back after the new record (a ghost of a commit that never returned).
func TestRecycledSegmentLostFirstFrame(t *testing.T) {
	const segSize = 8 << 10
	const big = 1000
	mem := vfs.NewMem()
	opts := wal.Options{SegmentSize: segSize, Policy: policy.SyncNever()}
	// The roll's sealing syncs the finished segment, makes the new one's
	// name durable, then syncs the new one (its header): that last sync is
	// held, so the power losses below find the new segment named and its
	// frames unsynced.
	var succ atomic.Pointer[string] // the new segment's file, by the name its handle was opened with
	var hold atomic.Bool
	blocked, release := make(chan struct{}, 1), make(chan struct{})
	inj := faultfs.InjectorFunc(func(op faultfs.Op) error {
		if op.Kind == faultfs.OpRename && hold.Load() && succ.Load() == nil {
			p := op.Path
			succ.Store(&p)
		}
		if op.Kind == faultfs.OpSync && hold.Load() {
			if p := succ.Load(); p != nil && *p == op.Path {
				select {
				case blocked <- struct{}{}:
				default:
				}
				<-release
			}
		}
		return nil
	})
	l := openLog(t, faultfs.Inject(mem, inj), opts)
	lsns, recs := checkpointed(t, l, 6)
	require.NoError(t, l.Sync())
	// Fill the segment until a frame of big bytes no longer fits.
	room := func() int {
		segs := segments(t, mem)
		used := int(l.AppendedLSN() - segFirst(t, segs[len(segs)-1]))
		return segSize - segHeader - endFrame - used
	}
	for i := 0; room() >= frameSize(big); i++ {
		rec := record(6, i, 100)
		lsn, err := l.Append(rec)
		require.NoError(t, err)
		lsns, recs = append(lsns, lsn), append(recs, rec)
	}
	rolls := l.Stats().Rolls
	// One batch: both frames go to the next segment, appended before
	// the roll synced the segment before it.
	batch := [][]byte{record(7, 0, big), record(7, 1, big)}
	bl := make([]wal.LSN, 2)
	hold.Store(true)
	_, err := l.AppendBatchLSNs(context.Background(), batch, bl)
	require.NoError(t, err)
	require.Equal(t, rolls+1, l.Stats().Rolls)
	<-blocked
	segs := segments(t, mem)
	last := segs[len(segs)-1]
	first := segFirst(t, last)
	require.Equal(t, first, bl[0])
	require.EqualValues(t, wal.RecycledVersion, binary.LittleEndian.Uint32(fileBytes(t, mem, last)[8:12]), "the new segment reuses a file")

	// Power losses that lose the first frame and keep the second.
	found := 0
	for seed := range int64(64) {
		img := mem.PowerLoss(vfs.KeepRandomSubsetOfBlocks(512, seed))
		b := fileBytes(t, img, last)
		c := segHeader + int(bl[1]-first)
		keptSecond := binary.LittleEndian.Uint32(b[c+8:]) == big &&
			string(b[c+frameHeader:c+frameHeader+big]) == string(batch[1])
		lostFirst := string(b[segHeader+frameHeader:segHeader+frameHeader+big]) != string(batch[0])
		if !keptSecond || !lostFirst {
			continue
		}
		found++
		l2 := openLog(t, img, opts)
		info := l2.Recovered()
		require.Equal(t, first, info.EndLSN, "seed %d", seed)
		_, got := readAll(t, l2, lsns[0])
		require.Equal(t, recs, got, "seed %d", seed)
		// A new record of the lost one's size ends where the kept one
		// starts.
		rec := record(8, 0, big)
		lsn, err := l2.Append(rec)
		require.NoError(t, err)
		require.Equal(t, first, lsn)
		require.NoError(t, l2.Sync())
		_, got2, _ := replay(t, img.ProcessCrash(), opts)
		require.Equal(t, len(recs)+1, len(got2), "seed %d: a crash after one more record brings back a frame of the lost group", seed)
		require.Equal(t, append(recs, rec), got2, "seed %d", seed)
		require.NoError(t, l2.Close())
	}
	require.Positive(t, found, "no seed lost the first frame and kept the second")
	close(release)
	require.NoError(t, l.Close())
}
