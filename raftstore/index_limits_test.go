package raftstore_test

import (
	"math"
	"testing"

	"github.com/durawal/durawal/raftstore"
	"github.com/durawal/durawal/wal/vfs"
	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/require"
)

// TestStoreLogsIndexWraps: the index after math.MaxUint64 wraps to 0; a
// batch {MaxUint64, 0} was accepted as contiguous and left FirstIndex
// MaxUint64 above LastIndex 0. It is ErrNotContiguous, and nothing stored.
func TestStoreLogsIndexWraps(t *testing.T) {
	s := openStore(t, vfs.NewMem())
	defer s.Close()
	err := s.StoreLogs([]*raft.Log{{Index: math.MaxUint64, Term: 1}, {Index: 0, Term: 1}})
	f, _ := s.FirstIndex()
	l, _ := s.LastIndex()
	require.ErrorIs(t, err, raftstore.ErrNotContiguous, "stored; FirstIndex %d LastIndex %d", f, l)
}

// TestStoreLogsRefusesPastLastIndex: once index math.MaxUint64 is stored,
// nothing may follow it (its successor would wrap to 0), and a nil entry is
// refused before anything is stored.
func TestStoreLogsRefusesPastLastIndex(t *testing.T) {
	s := openStore(t, vfs.NewMem())
	defer s.Close()
	require.NoError(t, s.StoreLogs([]*raft.Log{{Index: math.MaxUint64 - 1, Term: 1}, {Index: math.MaxUint64, Term: 1}}))
	err := s.StoreLog(&raft.Log{Index: 0, Term: 1})
	require.ErrorIs(t, err, raftstore.ErrNotContiguous)
	last, err := s.LastIndex()
	require.NoError(t, err)
	require.Equal(t, uint64(math.MaxUint64), last)

	err = s.StoreLogs([]*raft.Log{nil})
	require.ErrorIs(t, err, raftstore.ErrInvalidEntry)
}
