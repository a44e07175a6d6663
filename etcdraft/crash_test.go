package etcdraft_test

import (
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/durawal/durawal/etcdraft"
	"github.com/durawal/durawal/wal"
	"github.com/durawal/durawal/wal/vfs"
	"github.com/durawal/durawal/wal/vfs/faultfs"
	"github.com/stretchr/testify/require"
	pb "go.etcd.io/raft/v3/raftpb"
)

// nodeState is what a Storage holds, as raft sees it.
type nodeState struct {
	term, vote, commit uint64
	first, last        uint64
	terms              map[uint64]uint64 // index → term, first..last
	snapIndex          uint64
}

func stateOf(t *testing.T, s *etcdraft.Storage) nodeState {
	t.Helper()
	hs, _, err := s.InitialState()
	require.NoError(t, err)
	first, err := s.FirstIndex()
	require.NoError(t, err)
	last, err := s.LastIndex()
	require.NoError(t, err)
	snap, err := s.Snapshot()
	require.NoError(t, err)
	st := nodeState{term: hs.GetTerm(), vote: hs.GetVote(), commit: hs.GetCommit(), first: first, last: last,
		terms: map[uint64]uint64{}, snapIndex: snap.GetMetadata().GetIndex()}
	if last >= first {
		ents, err := s.Entries(first, last+1, math.MaxUint64)
		require.NoError(t, err)
		for _, e := range ents {
			st.terms[e.GetIndex()] = e.GetTerm()
		}
	}
	return st
}

// same reports whether a and b are the same state for raft: the hard
// state, the snapshot, and every entry from the later first index on (a
// reopen may start at the snapshot where the live Storage kept compacted
// entries after it).
func same(a, b nodeState) bool {
	if a.term != b.term || a.vote != b.vote || a.commit != b.commit || a.last != b.last || a.snapIndex != b.snapIndex {
		return false
	}
	for i := max(a.first, b.first); i <= a.last; i++ {
		if a.terms[i] != b.terms[i] {
			return false
		}
	}
	return true
}

// TestStorageCrashImagesAtEveryOp runs a node's life — Readies with entries
// and hard states over segment rolls, a conflicting suffix replaced in a new
// term, a snapshot, a compaction, more Readies, a snapshot installed from a
// leader inside the log (the entries after it dropped), another past its
// end — and takes crash images (power loss in several modes, and a process
// crash) before every filesystem operation. Each image must reopen
// to the state before or after the call in flight: nothing saved lost, no
// replaced entry back, no hard state without its entries.
func TestStorageCrashImagesAtEveryOp(t *testing.T) {
	hs := func(term, vote, commit uint64) *pb.HardState {
		return &pb.HardState{Term: new(term), Vote: new(vote), Commit: new(commit)}
	}
	run := func(first, last, term uint64) []*pb.Entry {
		var out []*pb.Entry
		for i := first; i <= last; i++ {
			out = append(out, &pb.Entry{Index: new(i), Term: new(term), Data: make([]byte, 200)})
		}
		return out
	}
	steps := []struct {
		name string
		do   func(s *etcdraft.Storage) error
	}{
		{"ready 1-40, term 1", func(s *etcdraft.Storage) error { return s.Save(hs(1, 1, 0), run(1, 40, 1), nil) }},
		{"ready 41-80, commit 40", func(s *etcdraft.Storage) error { return s.Save(hs(1, 1, 40), run(41, 80, 1), nil) }},
		{"ready 61-90 in term 2 (conflict)", func(s *etcdraft.Storage) error { return s.Save(hs(2, 2, 60), run(61, 90, 2), nil) }},
		{"snapshot at 60", func(s *etcdraft.Storage) error {
			_, err := s.CreateSnapshot(60, &pb.ConfState{Voters: []uint64{1, 2, 3}}, []byte("state at 60"))
			return err
		}},
		{"compact to 60", func(s *etcdraft.Storage) error { return s.Compact(60) }},
		{"ready 91-130, commit 90", func(s *etcdraft.Storage) error { return s.Save(hs(2, 2, 90), run(91, 130, 2), nil) }},
		{"install a snapshot at 110 in term 3 (entries 111-130 of term 2 dropped)", func(s *etcdraft.Storage) error {
			return s.Save(hs(3, 0, 110), nil, &pb.Snapshot{Data: []byte("leader's state at 110"),
				Metadata: &pb.SnapshotMetadata{Index: new(uint64(110)), Term: new(uint64(3)), ConfState: &pb.ConfState{Voters: []uint64{1, 2, 3}}}})
		}},
		{"ready 111-120 in term 3", func(s *etcdraft.Storage) error { return s.Save(hs(3, 0, 110), run(111, 120, 3), nil) }},
		{"install a snapshot at 200 in term 3", func(s *etcdraft.Storage) error {
			return s.Save(hs(3, 0, 200), nil, &pb.Snapshot{Data: []byte("leader's state"),
				Metadata: &pb.SnapshotMetadata{Index: new(uint64(200)), Term: new(uint64(3)), ConfState: &pb.ConfState{Voters: []uint64{1, 2, 3}}}})
		}},
		{"ready 201-220 in term 3", func(s *etcdraft.Storage) error { return s.Save(hs(3, 0, 200), run(201, 220, 3), nil) }},
	}

	// The state after each step, read from a Storage that never crashes.
	states := []nodeState{}
	{
		mem := vfs.NewMem()
		s := open(t, mem)
		states = append(states, stateOf(t, s))
		for _, st := range steps {
			require.NoError(t, st.do(s), st.name)
			states = append(states, stateOf(t, s))
		}
		require.NoError(t, s.Close())
	}

	type image struct {
		img           vfs.FS
		before, after int
		what          string
	}
	var mu sync.Mutex
	var images []image
	var done atomic.Int64
	var inFlight atomic.Bool
	mem := vfs.NewMem()
	span := func() (lo, hi int) {
		d := int(done.Load())
		if inFlight.Load() && d < len(steps) {
			return d, d + 1
		}
		return d, d
	}
	inj := faultfs.InjectorFunc(func(op faultfs.Op) error {
		lo, _ := span()
		n := op.Index
		var add []image
		for _, m := range []vfs.CrashMode{vfs.DropAll(), vfs.KeepAll(), vfs.TearAtSector(n), vfs.KeepRandomSubsetOfBlocks(4096, n)} {
			add = append(add, image{mem.PowerLoss(m), lo, lo, fmt.Sprintf("before op %d (%s %s), %s", n, op.Kind, op.Path, m)})
		}
		add = append(add, image{mem.ProcessCrash(), lo, lo, fmt.Sprintf("before op %d (%s %s), process crash", n, op.Kind, op.Path)})
		_, hi := span()
		for i := range add {
			add[i].after = hi
		}
		mu.Lock()
		images = append(images, add...)
		mu.Unlock()
		return nil
	})
	s, err := etcdraft.Open("/node", wal.Options{FS: faultfs.Inject(mem, inj), SegmentSize: 16 << 10})
	require.NoError(t, err)
	for _, st := range steps {
		inFlight.Store(true)
		require.NoError(t, st.do(s), st.name)
		done.Add(1)
		inFlight.Store(false)
	}
	require.NoError(t, s.Close())
	require.Greater(t, len(images), 100)

	for _, im := range images {
		s, err := etcdraft.Open("/node", wal.Options{FS: im.img, SegmentSize: 16 << 10})
		require.NoError(t, err, im.what)
		got := stateOf(t, s)
		ok := false
		for k := im.before; k <= im.after; k++ {
			ok = ok || same(got, states[k])
		}
		require.True(t, ok, "%s: state %+v is neither the one before (%+v) nor after (%+v) the call in flight",
			im.what, got, states[im.before], states[im.after])
		// The node goes on: one more Ready saves and reopens.
		next := got.last + 1
		require.NoError(t, s.Save(&pb.HardState{Term: new(max(got.term, 9)), Commit: new(got.commit)},
			[]*pb.Entry{{Index: new(next), Term: new(max(got.term, 9))}}, nil), im.what)
		require.NoError(t, s.Close())
		s, err = etcdraft.Open("/node", wal.Options{FS: im.img, SegmentSize: 16 << 10})
		require.NoError(t, err, im.what)
		last, _ := s.LastIndex()
		require.Equal(t, next, last, im.what)
		require.NoError(t, s.Close())
	}
	t.Logf("%d crash images across %d steps", len(images), len(steps))
}
