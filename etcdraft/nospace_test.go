package etcdraft_test

import (
	"bytes"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/durawal/durawal/etcdraft"
	"github.com/durawal/durawal/wal"
	"github.com/durawal/durawal/wal/vfs"
	"github.com/durawal/durawal/wal/vfs/faultfs"
	"github.com/stretchr/testify/require"
	pb "go.etcd.io/raft/v3/raftpb"
)

// TestSaveStopsAfterPartialBatch: a save that a full disk cuts short
// (wal.ErrNoSpace after some of its records were appended, which does not
// poison the log) leaves the Storage refusing every later write, so the
// unmarked records of the failed save are never replayed as part of a later
// save's batch; Open drops them.
func TestSaveStopsAfterPartialBatch(t *testing.T) {
	mem := vfs.NewMem()
	var full atomic.Bool
	inj := faultfs.InjectorFunc(func(op faultfs.Op) error {
		if full.Load() && op.Kind == faultfs.OpCreate && strings.HasSuffix(op.Path, ".wal.tmp") {
			return syscall.ENOSPC
		}
		return nil
	})
	opts := wal.Options{FS: faultfs.Inject(mem, inj), SegmentSize: 16 << 10, NoSpaceTimeout: -1}
	s, err := etcdraft.Open("/node", opts)
	require.NoError(t, err)
	big := func(first, last, term uint64) []*pb.Entry {
		var out []*pb.Entry
		for i := first; i <= last; i++ {
			out = append(out, &pb.Entry{Index: new(i), Term: new(term), Data: bytes.Repeat([]byte{'x'}, 1000)})
		}
		return out
	}
	require.NoError(t, s.Save(&pb.HardState{Term: new(uint64(1)), Commit: new(uint64(0))}, big(1, 5, 1), nil))
	full.Store(true)
	err = s.Save(&pb.HardState{Term: new(uint64(1)), Commit: new(uint64(5))}, big(6, 60, 1), nil)
	require.ErrorIs(t, err, wal.ErrNoSpace)
	require.ErrorIs(t, err, etcdraft.ErrFailed, "the save stopped partway")
	full.Store(false)
	// Space is back, and the log itself would take appends again.
	require.ErrorIs(t, s.Save(&pb.HardState{Term: new(uint64(2)), Commit: new(uint64(5))}, nil, nil), etcdraft.ErrFailed)
	require.ErrorIs(t, s.Append(big(6, 6, 1)), etcdraft.ErrFailed)
	_, err = s.CreateSnapshot(5, &pb.ConfState{}, nil)
	require.ErrorIs(t, err, etcdraft.ErrFailed)
	require.ErrorIs(t, s.Compact(3), etcdraft.ErrFailed)
	last, _ := s.LastIndex()
	require.Equal(t, uint64(5), last)
	require.NoError(t, s.Close())
	s, err = etcdraft.Open("/node", wal.Options{FS: mem, SegmentSize: 16 << 10})
	require.NoError(t, err)
	defer s.Close()
	reLast, _ := s.LastIndex()
	require.Equal(t, last, reLast, "the failed save's entries came back at Open")
	hs, _, _ := s.InitialState()
	require.Equal(t, uint64(1), hs.GetTerm())
}
