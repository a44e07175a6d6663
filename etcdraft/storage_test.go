package etcdraft_test

// The cases of etcd raft's own storage tests (written for MemoryStorage),
// run against a Storage: each state is built through the durable methods,
// checked, and checked again after the Storage is closed and reopened from
// its files.

import (
	"math"
	"testing"

	"github.com/durawal/durawal/etcdraft"
	"github.com/durawal/durawal/wal"
	"github.com/durawal/durawal/wal/vfs"
	"github.com/stretchr/testify/require"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// entries returns entries at consecutive indexes from first, one per term.
func entries(first uint64, terms ...uint64) []*pb.Entry {
	out := make([]*pb.Entry, len(terms))
	for i, t := range terms {
		out[i] = &pb.Entry{Index: new(first + uint64(i)), Term: new(t)}
	}
	return out
}

// open opens a Storage on mem (a new one if mem is empty).
func open(t *testing.T, mem *vfs.MemFS) *etcdraft.Storage {
	t.Helper()
	s, err := etcdraft.Open("/node", wal.Options{FS: mem, SegmentSize: 16 << 10})
	require.NoError(t, err)
	return s
}

// reopen closes s and opens its files again.
func reopen(t *testing.T, s *etcdraft.Storage, mem *vfs.MemFS) *etcdraft.Storage {
	t.Helper()
	require.NoError(t, s.Close())
	return open(t, mem)
}

// base builds the state MemoryStorage{ents: entries(3, 3, 4, 5)} has in
// etcd's tests: a snapshot at index 3 (term 3), then entries 4 and 5.
func base(t *testing.T, mem *vfs.MemFS, terms ...uint64) *etcdraft.Storage {
	t.Helper()
	s := open(t, mem)
	require.NoError(t, s.ApplySnapshot(&pb.Snapshot{Metadata: &pb.SnapshotMetadata{Index: new(uint64(3)), Term: new(terms[0])}}))
	require.NoError(t, s.Append(entries(4, terms[1:]...)))
	return s
}

// both runs check on s, then on s reopened from its files.
func both(t *testing.T, s *etcdraft.Storage, mem *vfs.MemFS, check func(*etcdraft.Storage)) {
	t.Helper()
	check(s)
	s = reopen(t, s, mem)
	defer s.Close()
	check(s)
}

func requireEntries(t *testing.T, want, got []*pb.Entry) {
	t.Helper()
	require.Len(t, got, len(want))
	for i := range want {
		require.True(t, proto.Equal(want[i], got[i]), "entry %d: want %v, got %v", i, want[i], got[i])
	}
}

func TestStorageTerm(t *testing.T) {
	for _, tc := range []struct {
		i    uint64
		err  error
		term uint64
	}{{2, raft.ErrCompacted, 0}, {3, nil, 3}, {4, nil, 4}, {5, nil, 5}, {6, raft.ErrUnavailable, 0}} {
		mem := vfs.NewMem()
		both(t, base(t, mem, 3, 4, 5), mem, func(s *etcdraft.Storage) {
			term, err := s.Term(tc.i)
			require.Equal(t, tc.err, err, "Term(%d)", tc.i)
			require.Equal(t, tc.term, term, "Term(%d)", tc.i)
		})
	}
}

func TestStorageEntries(t *testing.T) {
	ents := entries(3, 3, 4, 5, 6)
	size := func(k ...int) uint64 {
		var n int
		for _, i := range k {
			n += proto.Size(ents[i])
		}
		return uint64(n)
	}
	for _, tc := range []struct {
		lo, hi, max uint64
		err         error
		want        []*pb.Entry
	}{
		{2, 6, math.MaxUint64, raft.ErrCompacted, nil},
		{3, 4, math.MaxUint64, raft.ErrCompacted, nil},
		{4, 5, math.MaxUint64, nil, entries(4, 4)},
		{4, 6, math.MaxUint64, nil, entries(4, 4, 5)},
		{4, 7, math.MaxUint64, nil, entries(4, 4, 5, 6)},
		{4, 7, 0, nil, entries(4, 4)}, // the first entry even above maxSize
		{4, 7, size(1, 2), nil, entries(4, 4, 5)},
		{4, 7, size(1, 2) + uint64(proto.Size(ents[3]))/2, nil, entries(4, 4, 5)},
		{4, 7, size(1, 2, 3) - 1, nil, entries(4, 4, 5)},
		{4, 7, size(1, 2, 3), nil, entries(4, 4, 5, 6)},
	} {
		mem := vfs.NewMem()
		both(t, base(t, mem, 3, 4, 5, 6), mem, func(s *etcdraft.Storage) {
			got, err := s.Entries(tc.lo, tc.hi, tc.max)
			require.Equal(t, tc.err, err)
			requireEntries(t, tc.want, got)
		})
	}
	// Past the last index: MemoryStorage panics, a Storage answers an error.
	mem := vfs.NewMem()
	both(t, base(t, mem, 3, 4, 5, 6), mem, func(s *etcdraft.Storage) {
		got, err := s.Entries(4, 8, math.MaxUint64)
		require.ErrorIs(t, err, raft.ErrUnavailable)
		require.Empty(t, got)
	})
}

func TestStorageLastIndex(t *testing.T) {
	mem := vfs.NewMem()
	s := base(t, mem, 3, 4, 5)
	last, err := s.LastIndex()
	require.NoError(t, err)
	require.Equal(t, uint64(5), last)
	require.NoError(t, s.Append(entries(6, 5)))
	both(t, s, mem, func(s *etcdraft.Storage) {
		last, err := s.LastIndex()
		require.NoError(t, err)
		require.Equal(t, uint64(6), last)
	})
}

func TestStorageFirstIndex(t *testing.T) {
	mem := vfs.NewMem()
	s := base(t, mem, 3, 4, 5)
	first, err := s.FirstIndex()
	require.NoError(t, err)
	require.Equal(t, uint64(4), first)
	_, err = s.CreateSnapshot(4, &pb.ConfState{Voters: []uint64{1}}, []byte("state"))
	require.NoError(t, err)
	require.NoError(t, s.Compact(4))
	both(t, s, mem, func(s *etcdraft.Storage) {
		first, err := s.FirstIndex()
		require.NoError(t, err)
		require.Equal(t, uint64(5), first)
	})
}

// TestStorageCompact: etcd's cases, with the snapshot Compact needs here
// taken first at the last index. The first index after a reopen is the
// snapshot's: entries between the compaction and the snapshot are covered
// by it, and replay starts from it.
func TestStorageCompact(t *testing.T) {
	for _, tc := range []struct {
		i      uint64
		err    error
		first  uint64 // before the reopen
		length int    // entries from first to the last, before the reopen
	}{{2, raft.ErrCompacted, 4, 2}, {3, raft.ErrCompacted, 4, 2}, {4, nil, 5, 1}, {5, nil, 6, 0}} {
		mem := vfs.NewMem()
		s := base(t, mem, 3, 4, 5)
		_, err := s.CreateSnapshot(5, &pb.ConfState{Voters: []uint64{1}}, []byte("state"))
		require.NoError(t, err)
		require.Equal(t, tc.err, s.Compact(tc.i), "Compact(%d)", tc.i)
		first, _ := s.FirstIndex()
		last, _ := s.LastIndex()
		require.Equal(t, tc.first, first, "Compact(%d)", tc.i)
		require.Equal(t, tc.length, int(last+1-first), "Compact(%d)", tc.i)
		term, err := s.Term(first - 1)
		require.NoError(t, err)
		require.Equal(t, first-1, term, "the entry before the first keeps its term")
		s = reopen(t, s, mem)
		first, _ = s.FirstIndex()
		last, _ = s.LastIndex()
		require.Equal(t, uint64(6), first, "reopened at the snapshot")
		require.Equal(t, uint64(5), last)
		require.NoError(t, s.Close())
	}
}

func TestStorageCreateSnapshot(t *testing.T) {
	cs := &pb.ConfState{Voters: []uint64{1, 2, 3}}
	data := []byte("data")
	for _, i := range []uint64{4, 5} {
		mem := vfs.NewMem()
		s := base(t, mem, 3, 4, 5)
		snap, err := s.CreateSnapshot(i, cs, data)
		require.NoError(t, err)
		want := &pb.Snapshot{Data: data, Metadata: &pb.SnapshotMetadata{Index: new(i), Term: new(i), ConfState: cs}}
		require.True(t, proto.Equal(want, snap))
		both(t, s, mem, func(s *etcdraft.Storage) {
			got, err := s.Snapshot()
			require.NoError(t, err)
			// Compared field by field: a configuration read back has its
			// optional fields set to their zero values.
			require.Equal(t, want.GetMetadata().GetIndex(), got.GetMetadata().GetIndex())
			require.Equal(t, want.GetMetadata().GetTerm(), got.GetMetadata().GetTerm())
			require.Equal(t, cs.GetVoters(), got.GetMetadata().GetConfState().GetVoters())
			require.Equal(t, want.GetData(), got.GetData())
		})
	}
	mem := vfs.NewMem()
	s := base(t, mem, 3, 4, 5)
	defer s.Close()
	_, err := s.CreateSnapshot(3, cs, data)
	require.ErrorIs(t, err, raft.ErrSnapOutOfDate)
	_, err = s.CreateSnapshot(6, cs, data)
	require.ErrorIs(t, err, raft.ErrUnavailable)
}

func TestStorageAppend(t *testing.T) {
	for _, tc := range []struct {
		append, want []*pb.Entry
	}{
		{entries(1, 1, 2), entries(4, 4, 5)},
		{entries(3, 3, 4, 5), entries(4, 4, 5)},
		{entries(3, 3, 6, 6), entries(4, 6, 6)},
		{entries(3, 3, 4, 5, 5), entries(4, 4, 5, 5)},
		{entries(2, 3, 3, 5), entries(4, 5)}, // truncate the incoming entries and the existing ones
		{entries(4, 5), entries(4, 5)},       // truncate the existing entries and append
		{entries(6, 5), entries(4, 4, 5, 5)}, // a direct append
	} {
		mem := vfs.NewMem()
		s := base(t, mem, 3, 4, 5)
		require.NoError(t, s.Append(tc.append))
		both(t, s, mem, func(s *etcdraft.Storage) {
			last, _ := s.LastIndex()
			got, err := s.Entries(4, last+1, math.MaxUint64)
			require.NoError(t, err)
			requireEntries(t, tc.want, got)
		})
	}
	// A gap is refused with an error, not the panic MemoryStorage gives.
	mem := vfs.NewMem()
	s := base(t, mem, 3, 4, 5)
	defer s.Close()
	require.ErrorIs(t, s.Append(entries(8, 5)), raft.ErrUnavailable)
	require.ErrorIs(t, s.Append([]*pb.Entry{{Index: new(uint64(6)), Term: new(uint64(5))}, {Index: new(uint64(8)), Term: new(uint64(5))}}), raft.ErrUnavailable)
}

func TestStorageApplySnapshot(t *testing.T) {
	cs := &pb.ConfState{Voters: []uint64{1, 2, 3}}
	data := []byte("data")
	snap := func(i uint64) *pb.Snapshot {
		return &pb.Snapshot{Data: data, Metadata: &pb.SnapshotMetadata{Index: new(i), Term: new(i), ConfState: cs}}
	}
	for _, tc := range []struct {
		name  string
		snaps []*pb.Snapshot
		err   error
	}{
		{"normal case", []*pb.Snapshot{snap(4)}, nil},
		{"snapshot out of date", []*pb.Snapshot{snap(4), snap(3)}, raft.ErrSnapOutOfDate},
		{"bootstrap with confState", []*pb.Snapshot{{Data: data, Metadata: &pb.SnapshotMetadata{ConfState: cs}}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := vfs.NewMem()
			s := open(t, mem)
			var err error
			for _, sn := range tc.snaps {
				err = s.ApplySnapshot(sn)
			}
			require.Equal(t, tc.err, err)
			want := tc.snaps[0]
			both(t, s, mem, func(s *etcdraft.Storage) {
				_, gotCS, err := s.InitialState()
				require.NoError(t, err)
				require.Equal(t, cs.GetVoters(), gotCS.GetVoters(), "the configuration survives")
				got, err := s.Snapshot()
				require.NoError(t, err)
				require.Equal(t, want.GetMetadata().GetIndex(), got.GetMetadata().GetIndex())
				require.Equal(t, want.GetData(), got.GetData())
			})
		})
	}
}

// TestStorageHardStateAndSave: a Save of a Ready (entries and hard state)
// survives a reopen, and a later Save whose entries conflict replaces the
// suffix, also after a reopen.
func TestStorageHardStateAndSave(t *testing.T) {
	mem := vfs.NewMem()
	s := open(t, mem)
	hs := &pb.HardState{Term: new(uint64(2)), Vote: new(uint64(1)), Commit: new(uint64(2))}
	require.NoError(t, s.Save(hs, entries(1, 1, 1, 2), nil))
	require.NoError(t, s.Save(&pb.HardState{Term: new(uint64(3)), Vote: new(uint64(2)), Commit: new(uint64(2))}, entries(3, 3, 3), nil))
	both(t, s, mem, func(s *etcdraft.Storage) {
		got, _, err := s.InitialState()
		require.NoError(t, err)
		require.Equal(t, uint64(3), got.GetTerm())
		require.Equal(t, uint64(2), got.GetVote())
		ents, err := s.Entries(1, 5, math.MaxUint64)
		require.NoError(t, err)
		requireEntries(t, entries(1, 1, 1, 3, 3), ents)
	})
}

// TestSaveSyncsWhatRaftNeeds: a Save with entries, or a new term or vote,
// is synced when it returns; one that only moves the commit index is not
// (raft.MustSync), and becomes durable with the next synced write.
func TestSaveSyncsWhatRaftNeeds(t *testing.T) {
	mem := vfs.NewMem()
	s := open(t, mem)
	defer s.Close()
	hard := func(term, vote, commit uint64) *pb.HardState {
		return &pb.HardState{Term: new(term), Vote: new(vote), Commit: new(commit)}
	}
	require.NoError(t, s.Save(hard(1, 1, 0), entries(1, 1, 1), nil))
	n := mem.SyncCount()
	require.NoError(t, s.Save(hard(1, 1, 1), nil, nil))
	require.Equal(t, n, mem.SyncCount(), "a commit-only Save synced")
	lost := open(t, mem.PowerLoss(vfs.DropAll()))
	hs, _, _ := lost.InitialState()
	lost.Close()
	require.Equal(t, uint64(0), hs.GetCommit(), "not synced: lost at a power loss")
	require.NoError(t, s.Save(hard(2, 0, 1), nil, nil)) // a new term: synced
	require.Greater(t, mem.SyncCount(), n)
	kept := open(t, mem.PowerLoss(vfs.DropAll()))
	hs, _, _ = kept.InitialState()
	kept.Close()
	require.True(t, proto.Equal(hard(2, 0, 1), hs), "%v", hs)
}

// TestStorageApplySnapshotDropsSuffix: a follower whose log diverged
// (entries 1..5 of term 1) receives a snapshot at index 3 of term 2.
// MemoryStorage drops every entry on ApplySnapshot, so raft sees a log
// ending at 3; the reopened Storage must not bring back entries 4 and 5 of
// term 1 (a term lower than the snapshot's before them: raft would compare
// logs by a last term that is too old and could grant a vote it must not).
func TestStorageApplySnapshotDropsSuffix(t *testing.T) {
	mem := vfs.NewMem()
	s := open(t, mem)
	require.NoError(t, s.Append(entries(1, 1, 1, 1, 1, 1)))
	require.NoError(t, s.ApplySnapshot(&pb.Snapshot{Metadata: &pb.SnapshotMetadata{Index: new(uint64(3)), Term: new(uint64(2)),
		ConfState: &pb.ConfState{Voters: []uint64{1}}}}))
	both(t, s, mem, func(s *etcdraft.Storage) {
		last, err := s.LastIndex()
		require.NoError(t, err)
		require.Equal(t, uint64(3), last)
		term, err := s.Term(3)
		require.NoError(t, err)
		require.Equal(t, uint64(2), term)
	})
	// Entries saved after the snapshot (in a later Save) are kept.
	s = open(t, mem)
	require.NoError(t, s.Save(nil, entries(4, 2, 2), nil))
	both(t, s, mem, func(s *etcdraft.Storage) {
		last, err := s.LastIndex()
		require.NoError(t, err)
		require.Equal(t, uint64(5), last)
		term, err := s.Term(5)
		require.NoError(t, err)
		require.Equal(t, uint64(2), term)
	})
}
