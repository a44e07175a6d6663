package raftstore_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/durawal/durawal/raftstore"
	"github.com/durawal/durawal/wal"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/require"
)

// fsm records the commands it applies.
type fsm struct {
	mu      sync.Mutex
	applied [][]byte
}

func (f *fsm) Apply(lg *raft.Log) any {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.applied = append(f.applied, bytes.Clone(lg.Data))
	return len(f.applied)
}

func (f *fsm) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.applied)
}

func (f *fsm) Snapshot() (raft.FSMSnapshot, error) { return snapshot{}, nil }
func (f *fsm) Restore(rc io.ReadCloser) error      { return rc.Close() }

type snapshot struct{}

func (snapshot) Persist(sink raft.SnapshotSink) error { return sink.Close() }
func (snapshot) Release()                             {}

// node is one member of a test cluster: its raftstore.Store is both its
// LogStore and its StableStore; snaps survives a restart (no snapshot is
// taken: SnapshotThreshold is out of reach).
type node struct {
	id    raft.ServerID
	addr  raft.ServerAddress
	dir   string
	store *raftstore.Store
	snaps *raft.InmemSnapshotStore
	trans *raft.NetworkTransport
	fsm   *fsm
	raft  *raft.Raft
}

func raftConfig(id raft.ServerID) *raft.Config {
	c := raft.DefaultConfig()
	c.LocalID = id
	c.HeartbeatTimeout = time.Second
	c.ElectionTimeout = time.Second
	c.LeaderLeaseTimeout = 500 * time.Millisecond
	c.CommitTimeout = 5 * time.Millisecond
	c.SnapshotThreshold = 1 << 30 // no snapshots: the logs are compared whole
	c.Logger = hclog.New(&hclog.LoggerOptions{Output: io.Discard, Level: hclog.Off})
	return c
}

func (n *node) start(t *testing.T, bind string) {
	t.Helper()
	var err error
	n.store, err = raftstore.Open(n.dir, wal.Options{SegmentSize: 1 << 20})
	require.NoError(t, err)
	n.trans, err = raft.NewTCPTransport(bind, nil, 3, 5*time.Second, io.Discard)
	require.NoError(t, err)
	n.addr = n.trans.LocalAddr()
	n.fsm = &fsm{}
	n.raft, err = raft.NewRaft(raftConfig(n.id), n.fsm, n.store, n.store, n.snaps, n.trans)
	require.NoError(t, err)
}

func (n *node) stop(t *testing.T) {
	t.Helper()
	require.NoError(t, n.raft.Shutdown().Error())
	require.NoError(t, n.trans.Close())
	require.NoError(t, n.store.Close())
}

func leader(t testing.TB, nodes []*node) *node {
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		for _, n := range nodes {
			if n.raft != nil && n.raft.State() == raft.Leader {
				return n
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Error("no leader elected")
	return nil
}

// apply applies total commands through the leader from 8 goroutines; a
// command refused because leadership moved (a slow machine, the race
// detector) is retried through the new leader.
func apply(t *testing.T, nodes []*node, prefix string, total int) {
	t.Helper()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := g; i < total; i += 8 {
				for try := 0; ; try++ {
					l := leader(t, nodes)
					err := l.raft.Apply([]byte(fmt.Sprintf("%s-%d", prefix, i)), 10*time.Second).Error()
					if err == nil {
						break
					}
					if (errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipLost)) && try < 20 {
						continue // a retried command may be applied twice; the logs still must match
					}
					t.Errorf("apply %s-%d: %v", prefix, i, err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// requireSameLogs waits until every node has applied what the leader has,
// then checks that their logs hold the same entries.
func requireSameLogs(t *testing.T, nodes []*node) {
	t.Helper()
	l := leader(t, nodes)
	require.NotNil(t, l)
	require.NoError(t, l.raft.Barrier(10*time.Second).Error())
	want := l.raft.AppliedIndex()
	for _, n := range nodes {
		deadline := time.Now().Add(20 * time.Second)
		for n.raft.AppliedIndex() < want && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		require.GreaterOrEqual(t, n.raft.AppliedIndex(), want, "node %s applied", n.id)
	}
	first, err := l.store.FirstIndex()
	require.NoError(t, err)
	last, err := l.store.LastIndex()
	require.NoError(t, err)
	for _, n := range nodes {
		nl, err := n.store.LastIndex()
		require.NoError(t, err)
		require.GreaterOrEqual(t, nl, want, "node %s last index", n.id)
		var a, b raft.Log
		for i := first; i <= min(last, nl); i++ {
			require.NoError(t, l.store.GetLog(i, &a))
			require.NoError(t, n.store.GetLog(i, &b), "node %s index %d", n.id, i)
			require.Equal(t, a.Term, b.Term, "node %s index %d", n.id, i)
			require.Equal(t, a.Type, b.Type, "node %s index %d", n.id, i)
			require.Equal(t, a.Data, b.Data, "node %s index %d", n.id, i)
		}
	}
}

// TestCluster runs three raft.NewRaft nodes on 127.0.0.1 TCP transports,
// each with a raftstore.Store: commands applied from many goroutines reach
// every log identically; a follower stopped, given conflicting entries of
// an old term past the leader's last index, and restarted has them
// truncated (a suffix DeleteRange) and catches up; a follower restarted
// from its directory rebuilds its index map and catches up.
// startNodes starts n nodes n0, n1, … on 127.0.0.1 with their logs under
// root, and returns them with their raft.Server entries.
func startNodes(t *testing.T, root string, n int) ([]*node, []raft.Server) {
	t.Helper()
	nodes := make([]*node, n)
	var servers []raft.Server
	for i := range nodes {
		nd := &node{id: raft.ServerID(fmt.Sprintf("n%d", i)), dir: filepath.Join(root, fmt.Sprint(i)),
			snaps: raft.NewInmemSnapshotStore()}
		nd.start(t, "127.0.0.1:0")
		nodes[i] = nd
		servers = append(servers, raft.Server{ID: nd.id, Address: nd.addr})
	}
	return nodes, servers
}

func TestCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("a three-node cluster on TCP")
	}
	nodes, servers := startNodes(t, t.TempDir(), 3)
	defer func() {
		for _, n := range nodes {
			if n.raft != nil {
				n.stop(t)
			}
		}
	}()
	require.NoError(t, nodes[0].raft.BootstrapCluster(raft.Configuration{Servers: servers}).Error())
	l := leader(t, nodes)
	apply(t, nodes, "a", 400)
	requireSameLogs(t, nodes)

	// A follower with conflicting entries: stopped, given entries of an
	// old term past the leader's log, restarted.
	var f *node
	for _, n := range nodes {
		if n != l {
			f = n
			break
		}
	}
	f.stop(t)
	f.raft = nil
	apply(t, nodes, "b", 100) // the leader goes on with the other follower
	{
		s, err := raftstore.Open(f.dir, wal.Options{SegmentSize: 1 << 20})
		require.NoError(t, err)
		last, err := s.LastIndex()
		require.NoError(t, err)
		var junk []*raft.Log
		for i := range uint64(150) {
			junk = append(junk, &raft.Log{Index: last + 1 + i, Term: 1, Type: raft.LogCommand, Data: []byte("conflict")})
		}
		require.NoError(t, s.StoreLogs(junk))
		require.NoError(t, s.Close())
	}
	f.start(t, string(f.addr))
	apply(t, nodes, "c", 200)
	requireSameLogs(t, nodes)
	l = leader(t, nodes)
	fl, err := f.store.LastIndex()
	require.NoError(t, err)
	ll, err := l.store.LastIndex()
	require.NoError(t, err)
	require.Equal(t, ll, fl, "the conflicting entries are gone")

	// A plain restart of a follower.
	l = leader(t, nodes)
	for _, n := range nodes {
		if n != l {
			n.stop(t)
			n.start(t, string(n.addr))
			break
		}
	}
	apply(t, nodes, "d", 100)
	requireSameLogs(t, nodes)
}
