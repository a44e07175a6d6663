package raftstore_test

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/durawal/durawal/raftstore"
	"github.com/durawal/durawal/wal"
	"github.com/durawal/durawal/wal/vfs"
	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/require"
)

const storeDir = "/store"

func openStore(t *testing.T, fsys vfs.FS) *raftstore.Store {
	t.Helper()
	s, err := raftstore.Open(storeDir, wal.Options{FS: fsys, SegmentSize: 16 << 10})
	require.NoError(t, err)
	return s
}

// entry returns a raft.Log for index in term with every field set (some
// entries without extensions, data or time, to cover the empty cases).
func entry(index, term uint64) *raft.Log {
	lg := &raft.Log{Index: index, Term: term, Type: raft.LogType(index % 6)}
	if index%3 != 0 {
		lg.Data = bytes.Repeat([]byte{byte(index), byte(term)}, int(1+index%200))
	}
	if index%4 == 1 {
		lg.Extensions = []byte(fmt.Sprintf("ext-%d", index))
	}
	if index%5 != 0 {
		lg.AppendedAt = time.Unix(1700000000, int64(index*1000+term))
	}
	return lg
}

func entries(from, to, term uint64) []*raft.Log {
	var logs []*raft.Log
	for i := from; i <= to; i++ {
		logs = append(logs, entry(i, term))
	}
	return logs
}

// requireRange checks FirstIndex, LastIndex and every entry between them
// against want (term per index), and that the indexes just outside are
// raft.ErrLogNotFound.
func requireRange(t *testing.T, s *raftstore.Store, first, last uint64, term func(uint64) uint64) {
	t.Helper()
	f, err := s.FirstIndex()
	require.NoError(t, err)
	l, err := s.LastIndex()
	require.NoError(t, err)
	require.Equal(t, first, f, "FirstIndex")
	require.Equal(t, last, l, "LastIndex")
	var got raft.Log
	for i := first; i <= last && last > 0; i++ {
		require.NoError(t, s.GetLog(i, &got), "GetLog(%d)", i)
		want := entry(i, term(i))
		require.Equal(t, want.Index, got.Index)
		require.Equal(t, want.Term, got.Term)
		require.Equal(t, want.Type, got.Type)
		require.Equal(t, want.Data, got.Data, "data of %d", i)
		require.Equal(t, want.Extensions, got.Extensions, "extensions of %d", i)
		require.True(t, want.AppendedAt.Equal(got.AppendedAt), "appended-at of %d: %v, want %v", i, got.AppendedAt, want.AppendedAt)
	}
	if first > 1 {
		require.ErrorIs(t, s.GetLog(first-1, &got), raft.ErrLogNotFound)
	}
	require.ErrorIs(t, s.GetLog(last+1, &got), raft.ErrLogNotFound)
}

// TestStoreContract: the raft.LogStore contract — first and last index,
// every field of every entry, gaps refused, prefix, suffix, middle and
// whole-log deletes, raft.ErrLogNotFound, and the same after a reopen.
func TestStoreContract(t *testing.T) {
	mem := vfs.NewMem()
	s := openStore(t, mem)
	requireRange(t, s, 0, 0, nil)
	require.True(t, s.IsMonotonic())
	var lg raft.Log
	require.ErrorIs(t, s.GetLog(1, &lg), raft.ErrLogNotFound)
	require.NoError(t, s.DeleteRange(1, 10), "deleting from an empty store")

	require.NoError(t, s.StoreLogs(entries(1, 300, 1)))
	require.NoError(t, s.StoreLog(entry(301, 1)))
	term1 := func(uint64) uint64 { return 1 }
	requireRange(t, s, 1, 301, term1)
	require.ErrorIs(t, s.StoreLogs(entries(303, 305, 1)), raftstore.ErrNotContiguous, "a gap")
	require.ErrorIs(t, s.StoreLogs(entries(300, 302, 1)), raftstore.ErrNotContiguous, "an overlap")
	require.ErrorIs(t, s.StoreLogs([]*raft.Log{entry(302, 1), entry(304, 1)}), raftstore.ErrNotContiguous, "a gap inside")
	requireRange(t, s, 1, 301, term1)

	// A prefix: compaction after a snapshot. Segments go.
	require.NoError(t, s.DeleteRange(1, 200))
	requireRange(t, s, 201, 301, term1)
	require.Positive(t, s.Log().FirstLSN(), "whole segments were removed")
	// A suffix: a follower's conflicting entries, replaced in a new term.
	require.NoError(t, s.DeleteRange(280, 301))
	requireRange(t, s, 201, 279, term1)
	require.NoError(t, s.StoreLogs(entries(280, 320, 2)))
	term := func(i uint64) uint64 {
		if i >= 280 {
			return 2
		}
		return 1
	}
	requireRange(t, s, 201, 320, term)
	require.ErrorIs(t, s.DeleteRange(250, 260), raftstore.ErrMiddleRange)
	require.NoError(t, s.DeleteRange(400, 500), "beyond the end: nothing")
	requireRange(t, s, 201, 320, term)

	require.NoError(t, s.Close())
	s = openStore(t, mem)
	requireRange(t, s, 201, 320, term)

	// Everything: restoring a snapshot. The next entries may start anywhere.
	require.NoError(t, s.DeleteRange(201, 320))
	requireRange(t, s, 0, 0, nil)
	require.NoError(t, s.StoreLogs(entries(1000, 1010, 3)))
	term3 := func(uint64) uint64 { return 3 }
	requireRange(t, s, 1000, 1010, term3)
	require.NoError(t, s.Close())
	s = openStore(t, mem)
	requireRange(t, s, 1000, 1010, term3)

	// Below the noted first index after a restore.
	require.NoError(t, s.DeleteRange(1000, 1010))
	require.NoError(t, s.StoreLogs(entries(5, 9, 4)))
	require.NoError(t, s.Close())
	s = openStore(t, mem)
	requireRange(t, s, 5, 9, func(uint64) uint64 { return 4 })
	require.NoError(t, s.Close())
}

// TestStoreCrashAfterPrefixDelete: a power loss after a prefix delete
// keeps the new first index, although the kept segment still holds older
// entries.
func TestStoreCrashAfterPrefixDelete(t *testing.T) {
	mem := vfs.NewMem()
	s := openStore(t, mem)
	require.NoError(t, s.StoreLogs(entries(1, 100, 1)))
	require.NoError(t, s.DeleteRange(1, 57))
	require.NoError(t, s.StoreLogs(entries(101, 110, 1)))
	img := mem.PowerLoss(vfs.DropAll())
	require.NoError(t, s.Close())
	s = openStore(t, img)
	defer s.Close()
	requireRange(t, s, 58, 110, func(uint64) uint64 { return 1 })
}

// TestStoreOnDisk runs the contract's main steps on the OS filesystem.
func TestStoreOnDisk(t *testing.T) {
	dir := t.TempDir()
	s, err := raftstore.Open(dir, wal.Options{SegmentSize: 64 << 10})
	require.NoError(t, err)
	require.NoError(t, s.StoreLogs(entries(1, 500, 1)))
	require.NoError(t, s.DeleteRange(1, 100))
	require.NoError(t, s.DeleteRange(400, 500))
	require.NoError(t, s.Close())
	s, err = raftstore.Open(dir, wal.Options{SegmentSize: 64 << 10})
	require.NoError(t, err)
	defer s.Close()
	requireRange(t, s, 101, 399, func(uint64) uint64 { return 1 })
}
