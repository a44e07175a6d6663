package raftstore_test

import (
	"bytes"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
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

// TestStableContract: the raft.StableStore contract — a missing key reads
// as an empty value and as 0, values round-trip (copied both ways), a
// key overwritten with a shorter value, a value that is not a uint64 read
// as one is ErrInvalidEntry, and everything survives a reopen.
func TestStableContract(t *testing.T) {
	mem := vfs.NewMem()
	s := openStore(t, mem)
	v, err := s.Get([]byte("CurrentTerm"))
	require.NoError(t, err)
	require.Empty(t, v)
	n, err := s.GetUint64([]byte("CurrentTerm"))
	require.NoError(t, err)
	require.Zero(t, n)

	require.NoError(t, s.SetUint64([]byte("CurrentTerm"), 7))
	val := []byte("node-1")
	require.NoError(t, s.Set([]byte("LastVoteCand"), val))
	val[0] = 'X' // the store keeps its own copy
	big := bytes.Repeat([]byte("abcdefg"), 3000)
	require.NoError(t, s.Set([]byte("blob"), big))
	require.NoError(t, s.Set([]byte("blob"), []byte("short")))
	got, err := s.Get([]byte("LastVoteCand"))
	require.NoError(t, err)
	require.Equal(t, "node-1", string(got))
	got[0] = 'Y' // and hands out copies
	_, err = s.GetUint64([]byte("LastVoteCand"))
	require.ErrorIs(t, err, raftstore.ErrInvalidEntry)

	check := func(s *raftstore.Store) {
		n, err := s.GetUint64([]byte("CurrentTerm"))
		require.NoError(t, err)
		require.EqualValues(t, 7, n)
		v, err := s.Get([]byte("LastVoteCand"))
		require.NoError(t, err)
		require.Equal(t, "node-1", string(v))
		v, err = s.Get([]byte("blob"))
		require.NoError(t, err)
		require.Equal(t, "short", string(v))
	}
	check(s)
	require.NoError(t, s.Close())
	s = openStore(t, mem)
	check(s)
	require.NoError(t, s.Close())
	s = openStore(t, mem.PowerLoss(vfs.DropAll())) // every Set was durable
	check(s)
	require.NoError(t, s.Close())
}

// TestStableOnDisk: the stable file on the real filesystem, and a damaged
// one refused at Open with wal.ErrCorrupt.
func TestStableOnDisk(t *testing.T) {
	dir := t.TempDir()
	s, err := raftstore.Open(dir, wal.Options{})
	require.NoError(t, err)
	require.NoError(t, s.SetUint64([]byte("CurrentTerm"), 3))
	require.NoError(t, s.Close())
	s, err = raftstore.Open(dir, wal.Options{})
	require.NoError(t, err)
	n, err := s.GetUint64([]byte("CurrentTerm"))
	require.NoError(t, err)
	require.EqualValues(t, 3, n)
	require.NoError(t, s.Close())

	p := filepath.Join(dir, "stable")
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	b[9] ^= 1
	require.NoError(t, os.WriteFile(p, b, 0o644))
	_, err = raftstore.Open(dir, wal.Options{})
	require.ErrorIs(t, err, wal.ErrCorrupt)
}

// TestStableCrashImagesAtEveryOp: a StableStore's life — terms and votes
// set and overwritten, a value of several sectors and blocks grown and
// shrunk, log appends and a prefix delete (whose first-index note shares
// the directory) between them — with crash images (power loss in every
// mode, and a process crash) taken before every filesystem operation. Each
// image must reopen, and its keys and values must be exactly those before
// or after the Set in flight: nothing acknowledged lost, no value torn, no
// mix of two versions.
func TestStableCrashImagesAtEveryOp(t *testing.T) {
	type kv map[string]string
	type step struct {
		name string
		do   func(s *raftstore.Store) error
		set  kv // what the step sets, nil for a log step
	}
	u64 := func(n uint64) string { return string([]byte{byte(n), 0, 0, 0, 0, 0, 0, 0}) }
	big := func(c byte, n int) string { return string(bytes.Repeat([]byte{c}, n)) }
	setStep := func(k, v string) step {
		return step{fmt.Sprintf("set %s (%d bytes)", k, len(v)), func(s *raftstore.Store) error { return s.Set([]byte(k), []byte(v)) }, kv{k: v}}
	}
	steps := []step{
		{"set CurrentTerm 1", func(s *raftstore.Store) error { return s.SetUint64([]byte("CurrentTerm"), 1) }, kv{"CurrentTerm": u64(1)}},
		setStep("LastVoteCand", "n1"),
		{"set LastVoteTerm 1", func(s *raftstore.Store) error { return s.SetUint64([]byte("LastVoteTerm"), 1) }, kv{"LastVoteTerm": u64(1)}},
		{"store 1-40", func(s *raftstore.Store) error { return s.StoreLogs(entries(1, 40, 1)) }, nil},
		setStep("blob", big('a', 9000)),
		{"set CurrentTerm 2", func(s *raftstore.Store) error { return s.SetUint64([]byte("CurrentTerm"), 2) }, kv{"CurrentTerm": u64(2)}},
		{"delete 1-30 (prefix)", func(s *raftstore.Store) error { return s.DeleteRange(1, 30) }, nil},
		setStep("blob", big('b', 3000)),
		setStep("LastVoteCand", "n2-longer-name"),
		{"set LastVoteTerm 2", func(s *raftstore.Store) error { return s.SetUint64([]byte("LastVoteTerm"), 2) }, kv{"LastVoteTerm": u64(2)}},
		setStep("blob", big('c', 12000)),
	}
	states := []kv{{}}
	for _, st := range steps {
		next := maps.Clone(states[len(states)-1])
		maps.Copy(next, st.set)
		states = append(states, next)
	}
	keys := []string{"CurrentTerm", "LastVoteCand", "LastVoteTerm", "blob"}

	type image struct {
		img           vfs.FS
		before, after int
		what          string
	}
	var mu sync.Mutex
	var images []image
	var done atomic.Int64
	var inFlight atomic.Bool
	span := func() (lo, hi int) {
		d := int(done.Load())
		if inFlight.Load() && d < len(steps) {
			return d, d + 1
		}
		return d, d
	}
	mem := vfs.NewMem()
	inj := faultfs.InjectorFunc(func(op faultfs.Op) error {
		d, _ := span()
		n := op.Index
		var add []image
		for _, m := range []vfs.CrashMode{vfs.DropAll(), vfs.KeepAll(), vfs.TearAtSector(n), vfs.KeepRandomSubsetOfBlocks(4096, n), vfs.KeepRandomSubsetOfBlocks(512, n+1)} {
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
	// After a clean close, and a power loss of the final state.
	images = append(images, image{mem.PowerLoss(vfs.DropAll()), len(steps), len(steps), "after the last step, DropAll()"})

	for _, im := range images {
		what := fmt.Sprintf("%s, during %q", im.what, stepName(steps, im.before, im.after))
		s, err := raftstore.Open(storeDir, wal.Options{FS: im.img, SegmentSize: 16 << 10})
		require.NoError(t, err, what)
		got := kv{}
		for _, k := range keys {
			v, err := s.Get([]byte(k))
			require.NoError(t, err, what)
			if len(v) > 0 {
				got[k] = string(v)
			}
		}
		require.NoError(t, s.Close())
		ok := slices.ContainsFunc(states[im.before:im.after+1], func(st kv) bool { return maps.Equal(st, got) })
		if !ok {
			t.Fatalf("%s: the stable keys hold %s, neither the state before nor after", what, describe(got))
		}
	}
	t.Logf("%d crash images", len(images))
}

// describe prints a kv map with long values shortened.
func describe(m map[string]string) string {
	var b bytes.Buffer
	for _, k := range slices.Sorted(maps.Keys(m)) {
		v := m[k]
		if len(v) > 16 {
			v = fmt.Sprintf("%q…(%d bytes)", v[:8], len(v))
		} else {
			v = fmt.Sprintf("%q", v)
		}
		fmt.Fprintf(&b, "%s=%s ", k, v)
	}
	return b.String()
}

var _ raft.StableStore = (*raftstore.Store)(nil)
