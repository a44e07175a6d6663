package raftstore_test

// Linearizability while nodes are SIGKILLed: three hashicorp/raft nodes,
// each a child process (the test binary re-executed as
// TestLinearizableKillChild) on 127.0.0.1 with a TCP transport and a
// raftstore.Store alone (LogStore and StableStore) on a real directory,
// serve the key-value map of linearizable_test.go over HTTP. The parent's
// clients send every operation to the node they believe leads and record
// its call and return; a nemesis SIGKILLs the leader, a follower, or all
// three, mid-write, and restarts them on their directories. The history is
// checked with porcupine, and every acknowledged append must be in the
// final reads.
//
// A SIGKILL loses what the process held, never what it wrote: this checks
// the log's recovery of its own files and the StableStore's term and vote
// across real restarts, with the kernel's page cache intact (power loss is
// the in-process variant's, on vfs.MemFS).
//
// The default run is one history of a few seconds; DURAWAL_LONG=1 runs
// three of 20 s.

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/durawal/durawal/raftstore"
	"github.com/durawal/durawal/wal"
	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/require"
)

const (
	linEnvDir   = "RAFTSTORE_LIN_DIR"
	linEnvID    = "RAFTSTORE_LIN_ID"
	linEnvRaft  = "RAFTSTORE_LIN_RAFT"  // the node's raft address
	linEnvHTTP  = "RAFTSTORE_LIN_HTTP"  // the node's client address
	linEnvPeers = "RAFTSTORE_LIN_PEERS" // id=raftaddr,id=raftaddr,...
)

// statusNotLeader answers an operation sent to a node that does not lead:
// the operation was not proposed.
const statusNotLeader = http.StatusMisdirectedRequest

// TestLinearizableKillChild is one node: it serves until it is killed (or
// two minutes pass). POST /op takes an encoded kvInput and answers the
// value a get read (200), statusNotLeader before proposing anything on a
// node that does not lead, or 503 when the apply failed or timed out (the
// operation may or may not have taken effect).
func TestLinearizableKillChild(t *testing.T) {
	dir := os.Getenv(linEnvDir)
	if dir == "" {
		t.Skip("a child of TestLinearizableUnderSIGKILL")
	}
	id := raft.ServerID(os.Getenv(linEnvID))
	store, err := raftstore.Open(filepath.Join(dir, "log"), wal.Options{SegmentSize: 256 << 10})
	require.NoError(t, err)
	trans, err := raft.NewTCPTransport(os.Getenv(linEnvRaft), nil, 3, 2*time.Second, io.Discard)
	require.NoError(t, err)
	r, err := raft.NewRaft(linConfig(id), &kvFSM{kv: map[int]string{}}, store, store, raft.NewInmemSnapshotStore(), trans)
	require.NoError(t, err)
	if id == "n0" {
		var servers []raft.Server
		for _, p := range strings.Split(os.Getenv(linEnvPeers), ",") {
			pid, addr, _ := strings.Cut(p, "=")
			servers = append(servers, raft.Server{ID: raft.ServerID(pid), Address: raft.ServerAddress(addr)})
		}
		// Refused after the first start (the configuration is in the log).
		r.BootstrapCluster(raft.Configuration{Servers: servers})
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/op", func(w http.ResponseWriter, req *http.Request) {
		body, err := io.ReadAll(req.Body)
		if err != nil || len(body) < 2 {
			http.Error(w, "bad operation", http.StatusBadRequest)
			return
		}
		if r.State() != raft.Leader {
			w.WriteHeader(statusNotLeader)
			return
		}
		f := r.Apply(body, 2*time.Second)
		if err := f.Error(); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, f.Response().(string))
	})
	srv := &http.Server{Addr: os.Getenv(linEnvHTTP), Handler: mux}
	go func() {
		time.Sleep(2 * time.Minute)
		srv.Close()
	}()
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		t.Fatal(err)
	}
}

// killNode is one child node as the parent sees it.
type killNode struct {
	id, dir, raftAddr, httpAddr string
	cmd                         *exec.Cmd
}

func (n *killNode) start(t *testing.T, peers string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestLinearizableKillChild$", "-test.count=1", "-test.timeout=3m")
	cmd.Env = append(os.Environ(), linEnvDir+"="+n.dir, linEnvID+"="+n.id, linEnvRaft+"="+n.raftAddr,
		linEnvHTTP+"="+n.httpAddr, linEnvPeers+"="+peers)
	cmd.Stdout, cmd.Stderr = io.Discard, os.Stderr
	require.NoError(t, cmd.Start())
	n.cmd = cmd
}

func (n *killNode) kill() {
	if n.cmd != nil {
		n.cmd.Process.Kill() // SIGKILL
		n.cmd.Wait()
		n.cmd = nil
	}
}

// freeAddr returns a 127.0.0.1 address with a port nothing listens on now.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().String()
}

// runKillHistory runs one history of length d with a SIGKILL about every
// every, and checks it.
func runKillHistory(t *testing.T, d, every time.Duration, seed uint64) linStats {
	root := t.TempDir()
	nodes := make([]*killNode, 3)
	var peers []string
	for i := range nodes {
		nodes[i] = &killNode{id: fmt.Sprintf("n%d", i), dir: filepath.Join(root, fmt.Sprint(i)),
			raftAddr: freeAddr(t), httpAddr: freeAddr(t)}
		require.NoError(t, os.MkdirAll(nodes[i].dir, 0o755))
		peers = append(peers, nodes[i].id+"="+nodes[i].raftAddr)
	}
	for _, n := range nodes {
		n.start(t, strings.Join(peers, ","))
	}
	defer func() {
		for _, n := range nodes {
			n.kill()
		}
	}()

	client := &http.Client{Timeout: 3 * time.Second}
	var lead atomic.Int64 // the node clients try first
	apply := func(in kvInput) (string, error) {
		i := int(lead.Load())
		resp, err := client.Post("http://"+nodes[i].httpAddr+"/op", "application/octet-stream", bytes.NewReader(in.encode()))
		if err != nil {
			var op *net.OpError
			if errors.As(err, &op) && op.Op == "dial" {
				lead.CompareAndSwap(int64(i), int64((i+1)%len(nodes)))
				return "", errNotIssued // never reached the node
			}
			return "", err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		switch {
		case resp.StatusCode == statusNotLeader:
			lead.CompareAndSwap(int64(i), int64((i+1)%len(nodes)))
			return "", errNotIssued
		case err != nil:
			return "", err
		case resp.StatusCode != http.StatusOK:
			return "", fmt.Errorf("node %s: %s: %s", nodes[i].id, resp.Status, body)
		}
		return string(body), nil
	}
	rec := newKVRecorder()
	var stop atomic.Bool
	wait := rec.clients(seed, &stop, apply)

	// The nemesis: it knows the leader as the clients do, by who answers.
	t0 := time.Now()
	rng := rand.New(rand.NewPCG(seed, 99))
	st := linStats{}
	for i := 0; time.Since(t0) < d; i++ {
		time.Sleep(every/2 + time.Duration(rng.Int64N(int64(every))))
		var victims []*killNode
		switch l := int(lead.Load()); {
		case i%6 == 3:
			victims = nodes
			st.allDown++
		case i%2 == 0:
			victims = nodes[l : l+1]
		default:
			f := (l + 1 + rng.IntN(2)) % len(nodes)
			victims = nodes[f : f+1]
		}
		for _, n := range victims {
			n.kill()
			st.crashes++
		}
		time.Sleep(time.Duration(rng.Int64N(int64(every / 2))))
		for _, n := range victims {
			n.start(t, strings.Join(peers, ","))
		}
	}
	stop.Store(true)
	wait()
	finals := rec.finalReads(t, apply)
	st.result = rec.check(t, finals, seed)
	st.ops, st.acked, st.pending = len(rec.history)+len(rec.pending), len(rec.history), len(rec.pending)
	return st
}

// TestLinearizableUnderSIGKILL: see the top of this file.
func TestLinearizableUnderSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("three raft nodes as child processes, SIGKILLed")
	}
	histories, d, every := 1, 4*time.Second, 600*time.Millisecond
	if os.Getenv("DURAWAL_LONG") == "1" {
		histories, d = 3, 20*time.Second
	}
	runHistories(t, histories, "SIGKILLs", func(seed uint64) linStats { return runKillHistory(t, d, every, seed) })
}
