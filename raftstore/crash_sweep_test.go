package raftstore_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/durawal/durawal/raftstore"
	"github.com/durawal/durawal/wal"
	"github.com/durawal/durawal/wal/vfs"
	"github.com/durawal/durawal/wal/vfs/faultfs"
	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/require"
)

// raftState is what the store holds after a step: index → term.
type raftState map[uint64]uint64

// TestStoreCrashImagesAtEveryOp runs a raft log's life — appends that roll
// segments, a prefix delete (compaction), a suffix delete and re-append in
// a new term (a follower's conflict), a whole-log delete and a restart at a
// new index (a snapshot install) — and takes crash images (power loss in
// several modes, and a process crash) before every filesystem operation.
// Each image must reopen to a store whose entries are those of the state
// before or after the call in flight: nothing acknowledged lost, nothing
// deleted back, no entry with another term, no gap.
func TestStoreCrashImagesAtEveryOp(t *testing.T) {
	type step struct {
		name string
		do   func(s *raftstore.Store) error
	}
	steps := []step{
		{"store 1-60", func(s *raftstore.Store) error { return s.StoreLogs(entries(1, 60, 1)) }},
		{"store 61-120", func(s *raftstore.Store) error { return s.StoreLogs(entries(61, 120, 1)) }},
		{"delete 1-57 (prefix)", func(s *raftstore.Store) error { return s.DeleteRange(1, 57) }},
		{"store 121-140", func(s *raftstore.Store) error { return s.StoreLogs(entries(121, 140, 1)) }},
		{"delete 100-140 (suffix)", func(s *raftstore.Store) error { return s.DeleteRange(100, 140) }},
		{"store 100-130 in term 2", func(s *raftstore.Store) error { return s.StoreLogs(entries(100, 130, 2)) }},
		{"delete 58-130 (all)", func(s *raftstore.Store) error { return s.DeleteRange(58, 130) }},
		{"store 1000-1020 in term 3", func(s *raftstore.Store) error { return s.StoreLogs(entries(1000, 1020, 3)) }},
		{"store 1021-1030 in term 3", func(s *raftstore.Store) error { return s.StoreLogs(entries(1021, 1030, 3)) }},
	}
	// The state after each step, from the model.
	states := []raftState{{}}
	set := func(st raftState, from, to, term uint64) {
		for i := from; i <= to; i++ {
			st[i] = term
		}
	}
	del := func(st raftState, from, to uint64) {
		for i := from; i <= to; i++ {
			delete(st, i)
		}
	}
	for _, f := range []func(raftState){
		func(st raftState) { set(st, 1, 60, 1) },
		func(st raftState) { set(st, 61, 120, 1) },
		func(st raftState) { del(st, 1, 57) },
		func(st raftState) { set(st, 121, 140, 1) },
		func(st raftState) { del(st, 100, 140) },
		func(st raftState) { set(st, 100, 130, 2) },
		func(st raftState) { del(st, 58, 130) },
		func(st raftState) { set(st, 1000, 1020, 3) },
		func(st raftState) { set(st, 1021, 1030, 3) },
	} {
		next := raftState{}
		for k, v := range states[len(states)-1] {
			next[k] = v
		}
		f(next)
		states = append(states, next)
	}

	type image struct {
		img           vfs.FS
		before, after int // indexes into states
		what          string
	}
	var mu sync.Mutex
	var images []image
	var done atomic.Int64    // steps completed
	var inFlight atomic.Bool // a step's call is running
	mem := vfs.NewMem()
	// The states an image may hold: from the last step completed when the
	// op began to the last one begun once its images are taken (the
	// segment preparer's ops run beside the steps).
	span := func() (lo, hi int) {
		d := int(done.Load())
		if inFlight.Load() && d < len(steps) {
			return d, d + 1
		}
		return d, d
	}
	inj := faultfs.InjectorFunc(func(op faultfs.Op) error {
		d, _ := span()
		n := op.Index
		var add []image
		for _, m := range []vfs.CrashMode{vfs.DropAll(), vfs.KeepAll(), vfs.TearAtSector(n), vfs.KeepRandomSubsetOfBlocks(4096, n)} {
			add = append(add, image{mem.PowerLoss(m), d, d, fmt.Sprintf("before op %d (%s %s), %s", n, op.Kind, op.Path, m)})
		}
		add = append(add, image{mem.ProcessCrash(), d, d, fmt.Sprintf("before op %d (%s %s), process crash", n, op.Kind, op.Path)})
		_, hi := span()
		for i := range add {
			add[i].after = hi
		}
		mu.Lock()
		images = append(images, add...)
		mu.Unlock()
		return nil
	})
	s := openStore(t, faultfs.Inject(mem, inj))
	for _, st := range steps {
		inFlight.Store(true)
		require.NoError(t, st.do(s), st.name)
		done.Add(1)
		inFlight.Store(false)
	}
	require.NoError(t, s.Close())
	require.Positive(t, len(images))

	for _, im := range images {
		checkImage(t, im.img, states[im.before:im.after+1],
			fmt.Sprintf("%s, during %q", im.what, stepName(steps, im.before, im.after)))
		if t.Failed() {
			return
		}
	}
	t.Logf("%d crash images", len(images))
}

func stepName[S any](steps []S, before, after int) string {
	if before == after {
		return fmt.Sprintf("between steps (after %d)", before)
	}
	return fmt.Sprintf("steps %d to %d", before+1, after)
}

// checkImage opens the store on img and checks its entries against the
// states the image may hold (those before, during and after the calls in
// flight): each entry it holds is in one of them with that term, and each
// entry all of them hold with one term is there.
func checkImage(t *testing.T, img vfs.FS, states []raftState, what string) {
	t.Helper()
	s, err := raftstore.Open(storeDir, wal.Options{FS: img, SegmentSize: 16 << 10})
	if err != nil {
		t.Errorf("%s: open: %v", what, err)
		return
	}
	defer s.Close()
	first, err := s.FirstIndex()
	require.NoError(t, err)
	last, err := s.LastIndex()
	require.NoError(t, err)
	var lg raft.Log
	if last > 0 {
		for i := first; i <= last; i++ {
			if err := s.GetLog(i, &lg); err != nil {
				t.Errorf("%s: GetLog(%d) in [%d, %d]: %v", what, i, first, last, err)
				return
			}
			ok := false
			for _, st := range states {
				if term, in := st[i]; in && term == lg.Term {
					ok = true
				}
			}
			if !ok {
				t.Errorf("%s: entry %d has term %d, in none of the states it may hold", what, i, lg.Term)
				return
			}
		}
	}
	for i, term := range states[0] {
		stable := true
		for _, st := range states[1:] {
			if tt, in := st[i]; !in || tt != term {
				stable = false
			}
		}
		if stable && (last == 0 || i < first || i > last) {
			t.Errorf("%s: entry %d (term %d), stored before the calls in flight and kept by them, is missing: the store holds [%d, %d]", what, i, term, first, last)
			return
		}
	}
}
