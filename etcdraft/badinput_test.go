package etcdraft_test

import (
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/durawal/durawal/etcdraft"
	"github.com/durawal/durawal/wal"
	"github.com/durawal/durawal/wal/vfs"
	"github.com/stretchr/testify/require"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
)

// TestSaveRefusesNilAndIndexZero: an entry raft would never hand over (nil,
// or at index 0) is refused with an error; accepted, it went into the log,
// MemoryStorage dropped it, and the next Open failed for good.
func TestSaveRefusesNilAndIndexZero(t *testing.T) {
	mem := vfs.NewMem()
	s := open(t, mem)
	require.ErrorIs(t, s.Save(nil, []*pb.Entry{{Index: new(uint64(0)), Term: new(uint64(1))}}, nil), raft.ErrUnavailable)
	require.ErrorIs(t, s.Save(nil, []*pb.Entry{nil}, nil), raft.ErrUnavailable)
	require.ErrorIs(t, s.Append([]*pb.Entry{nil, {Index: new(uint64(1)), Term: new(uint64(1))}}), raft.ErrUnavailable)
	require.NoError(t, s.Save(nil, entries(1, 1, 1, 1), nil))
	s = reopen(t, s, mem)
	defer s.Close()
	last, err := s.LastIndex()
	require.NoError(t, err)
	require.Equal(t, uint64(3), last)
}

// TestSaveRefusesCommitPastLast: a hard state that commits past the last
// index (counting the entries and snapshot of the same save) is refused;
// accepted, raft panicked at the next start ("out of range").
func TestSaveRefusesCommitPastLast(t *testing.T) {
	mem := vfs.NewMem()
	s := open(t, mem)
	require.NoError(t, s.Save(nil, entries(1, 1, 1), nil))
	require.ErrorIs(t, s.Save(&pb.HardState{Term: new(uint64(1)), Commit: new(uint64(100))}, nil, nil), raft.ErrUnavailable)
	require.ErrorIs(t, s.Save(&pb.HardState{Term: new(uint64(1)), Commit: new(uint64(4))}, entries(3, 1), nil), raft.ErrUnavailable,
		"a conflicting suffix shortens the log: its last entry bounds the commit")
	require.NoError(t, s.Save(&pb.HardState{Term: new(uint64(1)), Commit: new(uint64(4))}, entries(3, 1, 1), nil))
	s = reopen(t, s, mem)
	defer s.Close()
	require.NotPanics(t, func() {
		rn, err := raft.NewRawNode(&raft.Config{ID: 1, ElectionTick: 10, HeartbeatTick: 1, Storage: s,
			MaxSizePerMsg: 1 << 20, MaxInflightMsgs: 16, Logger: quietRaft})
		require.NoError(t, err)
		require.Equal(t, uint64(4), rn.Status().GetCommit())
	})
}

// TestEntriesBadRange: Entries with lo above hi, or hi past the end, is an
// error, not MemoryStorage's panic.
func TestEntriesBadRange(t *testing.T) {
	s := open(t, vfs.NewMem())
	defer s.Close()
	require.NoError(t, s.Save(nil, entries(1, 1, 1, 1), nil))
	_, err := s.Entries(3, 2, math.MaxUint64)
	require.ErrorIs(t, err, raft.ErrUnavailable)
	_, err = s.Entries(1, 9, math.MaxUint64)
	require.ErrorIs(t, err, raft.ErrUnavailable)
}

// TestReadsDuringSaves: raft's goroutine reads (InitialState, Snapshot,
// Entries, Term, FirstIndex, LastIndex) while the application saves,
// snapshots and compacts; under -race this finds any read that is not
// synchronized with a write (MemoryStorage's InitialState takes no lock).
func TestReadsDuringSaves(t *testing.T) {
	s, err := etcdraft.Open("/r", wal.Options{FS: vfs.NewMem(), SegmentSize: 4 << 10})
	require.NoError(t, err)
	defer s.Close()
	var stop atomic.Bool
	var reads atomic.Int64
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			for !stop.Load() {
				f, _ := s.FirstIndex()
				l, _ := s.LastIndex()
				if _, err := s.Entries(f, l+1, math.MaxUint64); err != nil && !errors.Is(err, raft.ErrCompacted) && !errors.Is(err, raft.ErrUnavailable) {
					t.Errorf("Entries: %v", err)
				}
				s.Term(l)
				s.Snapshot()
				s.InitialState()
				reads.Add(1)
			}
		})
	}
	for i := uint64(1); i <= 300; i++ {
		require.NoError(t, s.Save(&pb.HardState{Term: new(uint64(1)), Commit: new(i - 1)}, entries(i, 1), nil))
		if i%50 == 0 {
			_, err := s.CreateSnapshot(i-10, &pb.ConfState{Voters: []uint64{1}}, []byte("state"))
			require.NoError(t, err)
			require.NoError(t, s.Compact(i-10))
		}
	}
	stop.Store(true)
	wg.Wait()
	require.Positive(t, reads.Load())
}
