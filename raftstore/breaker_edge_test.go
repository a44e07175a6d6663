package raftstore_test

import (
	"math"
	"testing"

	"github.com/durawal/durawal/raftstore"
	"github.com/durawal/durawal/wal/vfs"
	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/require"
)

// FINDING: StoreLogs checks contiguity with next = Index+1, which wraps at
// math.MaxUint64: a batch {MaxUint64, 0} is accepted as contiguous and
// stored, after which the Store reports FirstIndex MaxUint64 and LastIndex 0
// (LastIndex < FirstIndex). Bad input must get a clear error
// (ErrNotContiguous), not be stored in a state the Store cannot describe.
func TestBreakerStoreLogsIndexWraps(t *testing.T) {
	s := openStore(t, vfs.NewMem())
	defer s.Close()
	err := s.StoreLogs([]*raft.Log{{Index: math.MaxUint64, Term: 1}, {Index: 0, Term: 1}})
	f, _ := s.FirstIndex()
	l, _ := s.LastIndex()
	require.ErrorIs(t, err, raftstore.ErrNotContiguous, "stored; FirstIndex %d LastIndex %d", f, l)
}
