package raftstore_test

// A node killed for real: the test binary re-executes itself as a child
// (TestKillNodeChild) that runs one raft node on a raftstore.Store alone
// (its LogStore and its StableStore), and reports its applied index in a file. The
// parent runs the two other nodes, SIGKILLs the child while commands are
// being applied, restarts it on the same directory and address, waits for
// it to catch up, kills it again, and compares its log, opened from its
// directory, entry by entry with the leader's.

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/durawal/durawal/raftstore"
	"github.com/durawal/durawal/wal"
	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/require"
)

const (
	childEnvDir   = "RAFTSTORE_CHILD_DIR"
	childEnvBind  = "RAFTSTORE_CHILD_BIND"
	childEnvPeers = "RAFTSTORE_CHILD_PEERS" // id=addr,id=addr,...
)

// TestKillNodeChild is the child: a raft node that runs until it is killed
// (or 60 s pass), writing its applied index to dir/applied.
func TestKillNodeChild(t *testing.T) {
	dir := os.Getenv(childEnvDir)
	if dir == "" {
		t.Skip("the child of TestKillNode")
	}
	store, err := raftstore.Open(filepath.Join(dir, "log"), wal.Options{SegmentSize: 1 << 20})
	require.NoError(t, err)
	trans, err := raft.NewTCPTransport(os.Getenv(childEnvBind), nil, 3, 5*time.Second, io.Discard)
	require.NoError(t, err)
	r, err := raft.NewRaft(raftConfig("child"), &fsm{}, store, store, raft.NewInmemSnapshotStore(), trans)
	require.NoError(t, err)
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); {
		os.WriteFile(filepath.Join(dir, "applied.tmp"), []byte(strconv.FormatUint(r.AppliedIndex(), 10)), 0o644)
		os.Rename(filepath.Join(dir, "applied.tmp"), filepath.Join(dir, "applied"))
		time.Sleep(20 * time.Millisecond)
	}
}

// startChild starts the child node on bind with its data in dir.
func startChild(t *testing.T, dir, bind string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestKillNodeChild$", "-test.count=1", "-test.timeout=2m")
	cmd.Env = append(os.Environ(), childEnvDir+"="+dir, childEnvBind+"="+bind)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	require.NoError(t, cmd.Start())
	return cmd
}

func killChild(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	require.NoError(t, cmd.Process.Kill()) // SIGKILL
	cmd.Wait()
}

// waitLeader returns the node of nodes that leads within d, or nil.
func waitLeader(nodes []*node, d time.Duration) *node {
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		for _, n := range nodes {
			if n.raft.State() == raft.Leader {
				return n
			}
		}
	}
	return nil
}

// childApplied returns the applied index the child last reported.
func childApplied(dir string) uint64 {
	b, _ := os.ReadFile(filepath.Join(dir, "applied"))
	n, _ := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	return n
}

// TestKillNode: a node SIGKILLed while commands are applied, restarted,
// catches up, and its log (read from its directory) equals the leader's.
func TestKillNode(t *testing.T) {
	if testing.Short() {
		t.Skip("a three-node cluster with a child process")
	}
	root := t.TempDir()
	childDir := filepath.Join(root, "child")
	require.NoError(t, os.MkdirAll(childDir, 0o755))
	// The child's address: a port the parent picks by listening once.
	probe, err := raft.NewTCPTransport("127.0.0.1:0", nil, 1, time.Second, io.Discard)
	require.NoError(t, err)
	childAddr := string(probe.LocalAddr())
	probe.Close()

	nodes, servers := startNodes(t, root, 2)
	servers = append([]raft.Server{{ID: "child", Address: raft.ServerAddress(childAddr)}}, servers...)
	defer func() {
		for _, n := range nodes {
			n.stop(t)
		}
	}()
	child := startChild(t, childDir, childAddr)
	defer func() {
		if child != nil {
			killChild(t, child)
		}
	}()
	require.NoError(t, nodes[0].raft.BootstrapCluster(raft.Configuration{Servers: servers}).Error())
	// Keep the leader in this process: if the child wins, restart it and
	// let the others elect one.
	for waitLeader(nodes, 5*time.Second) == nil {
		killChild(t, child)
		child = startChild(t, childDir, childAddr)
	}
	apply(t, nodes, "a", 200)

	done := make(chan struct{})
	go func() { defer close(done); apply(t, nodes, "b", 1500) }()
	time.Sleep(200 * time.Millisecond)
	killChild(t, child) // mid-stream
	child = nil
	killedAt := childApplied(childDir)
	select {
	case <-done:
		t.Log("the commands were all applied before the kill")
	default:
	}
	<-done
	child = startChild(t, childDir, childAddr)
	apply(t, nodes, "c", 100)
	requireSameLogs(t, nodes)
	l := leader(t, nodes)
	require.NoError(t, l.raft.Barrier(10*time.Second).Error())
	want := l.raft.AppliedIndex()
	for deadline := time.Now().Add(30 * time.Second); childApplied(childDir) < want && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	require.GreaterOrEqual(t, childApplied(childDir), want, "the restarted child caught up")
	t.Logf("child killed at applied index %d (reported), caught up to %d", killedAt, want)
	killChild(t, child)
	child = nil

	s, err := raftstore.Open(filepath.Join(childDir, "log"), wal.Options{SegmentSize: 1 << 20})
	require.NoError(t, err)
	defer s.Close()
	last, err := l.store.LastIndex()
	require.NoError(t, err)
	cl, err := s.LastIndex()
	require.NoError(t, err)
	require.GreaterOrEqual(t, cl, want)
	var a, b raft.Log
	for i := uint64(1); i <= min(last, cl); i++ {
		require.NoError(t, l.store.GetLog(i, &a))
		require.NoError(t, s.GetLog(i, &b), "child index %d", i)
		require.Equal(t, a.Term, b.Term, "child index %d", i)
		require.Equal(t, a.Data, b.Data, "child index %d", i)
	}
}
