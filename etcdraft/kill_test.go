package etcdraft_test

// Linearizability while nodes are SIGKILLed: three etcd raft nodes, each a
// child process (the test binary re-executed as TestLinearizableKillChild)
// on 127.0.0.1 with its etcdraft.Storage on a real directory, exchange raft
// messages over HTTP and serve the key-value map of cluster_test.go. The
// parent's clients send each operation to the node they believe leads and
// record its call and return; a nemesis SIGKILLs the leader, a follower or
// all three, mid-write, and restarts them (raft.RestartNode on their
// directories). The history is checked with porcupine, and every
// acknowledged append must be in the final reads.
//
// A SIGKILL keeps the page cache: this checks the Storage's recovery of its
// own files across real restarts; power loss is cluster_test.go's. The
// default run is one history of a few seconds; DURAWAL_LONG=1 runs three of
// 20 s.

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/durawal/durawal/etcdraft"
	"github.com/durawal/durawal/wal"
	"github.com/stretchr/testify/require"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

const (
	killEnvDir   = "ETCDRAFT_KILL_DIR"
	killEnvID    = "ETCDRAFT_KILL_ID"
	killEnvPeers = "ETCDRAFT_KILL_PEERS" // id=addr,id=addr,...
)

// statusNotLeader answers an operation sent to a node that does not lead:
// nothing was proposed.
const statusNotLeader = http.StatusMisdirectedRequest

// TestLinearizableKillChild is one node. It serves POST /raft (a raft
// message to step) and POST /op (a client operation: the value a get read,
// statusNotLeader before proposing anything on a node that does not lead,
// 503 when the operation was proposed but not applied in time), until it is
// killed or two minutes pass.
func TestLinearizableKillChild(t *testing.T) {
	dir := os.Getenv(killEnvDir)
	if dir == "" {
		t.Skip("a child of TestLinearizableUnderSIGKILL")
	}
	id, _ := strconv.ParseUint(os.Getenv(killEnvID), 10, 64)
	peers := map[uint64]string{}
	for _, p := range strings.Split(os.Getenv(killEnvPeers), ",") {
		pid, addr, _ := strings.Cut(p, "=")
		n, _ := strconv.ParseUint(pid, 10, 64)
		peers[n] = addr
	}
	store, err := etcdraft.Open(dir, wal.Options{SegmentSize: 256 << 10})
	require.NoError(t, err)
	cfg := &raft.Config{ID: id, ElectionTick: 10, HeartbeatTick: 1, Storage: store,
		MaxSizePerMsg: 1 << 20, MaxInflightMsgs: 256, Logger: quietRaft}
	hs, _, _ := store.InitialState()
	last, _ := store.LastIndex()
	var node raft.Node
	if last == 0 && raft.IsEmptyHardState(hs) {
		node = raft.StartNode(cfg, []raft.Peer{{ID: 1}, {ID: 2}, {ID: 3}})
	} else {
		node = raft.RestartNode(cfg)
	}

	// Outgoing messages: a queue and a sender per peer; a message that
	// cannot be delivered is dropped (raft retries).
	client := &http.Client{Timeout: time.Second}
	queues := map[uint64]chan []byte{}
	for pid, addr := range peers {
		if pid == id {
			continue
		}
		q := make(chan []byte, 4096)
		queues[pid] = q
		go func() {
			for b := range q {
				resp, err := client.Post("http://"+addr+"/raft", "application/octet-stream", bytes.NewReader(b))
				if err != nil {
					node.ReportUnreachable(pid)
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
	}

	var mu sync.Mutex
	kv := map[int]string{}
	waiters := map[uint64]chan string{}
	go func() { // the Ready loop
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				node.Tick()
			case rd := <-node.Ready():
				if err := store.Save(rd.HardState, rd.Entries, rd.Snapshot); err != nil {
					panic(err)
				}
				for _, m := range rd.Messages {
					b, err := proto.Marshal(m)
					if err != nil {
						continue
					}
					select {
					case queues[m.GetTo()] <- b:
					default:
					}
				}
				for _, e := range rd.CommittedEntries {
					if e.GetType() == pb.EntryType_EntryConfChange {
						var cc pb.ConfChange
						if proto.Unmarshal(e.GetData(), &cc) == nil {
							node.ApplyConfChange(&cc)
						}
						continue
					}
					d := e.GetData()
					if e.GetType() != pb.EntryType_EntryNormal || len(d) < 10 {
						continue
					}
					mu.Lock()
					opID, out := applyKV(kv, d)
					if w, ok := waiters[opID]; ok {
						w <- out
						delete(waiters, opID)
					}
					mu.Unlock()
				}
				node.Advance()
			}
		}
	}()

	var next atomic.Uint64
	next.Store(uint64(time.Now().UnixNano())) // proposal ids unique across restarts
	mux := http.NewServeMux()
	mux.HandleFunc("/raft", func(w http.ResponseWriter, req *http.Request) {
		b, err := io.ReadAll(req.Body)
		m := new(pb.Message)
		if err != nil || proto.Unmarshal(b, m) != nil {
			http.Error(w, "bad message", http.StatusBadRequest)
			return
		}
		node.Step(context.Background(), m)
	})
	mux.HandleFunc("/op", func(w http.ResponseWriter, req *http.Request) {
		body, err := io.ReadAll(req.Body)
		if err != nil || len(body) < 2 {
			http.Error(w, "bad operation", http.StatusBadRequest)
			return
		}
		if node.Status().RaftState != raft.StateLeader {
			w.WriteHeader(statusNotLeader)
			return
		}
		opID := next.Add(1)
		data := append(binary.LittleEndian.AppendUint64(nil, opID), body...)
		res := make(chan string, 1)
		mu.Lock()
		waiters[opID] = res
		mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if err := node.Propose(ctx, data); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		select {
		case out := <-res:
			io.WriteString(w, out)
		case <-ctx.Done():
			http.Error(w, "not applied in time", http.StatusServiceUnavailable)
		}
	})
	srv := &http.Server{Addr: peers[id], Handler: mux}
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
	id        int
	dir, addr string
	cmd       *exec.Cmd
}

func (n *killNode) start(t *testing.T, peers string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestLinearizableKillChild$", "-test.count=1", "-test.timeout=3m")
	cmd.Env = append(os.Environ(), killEnvDir+"="+n.dir, killEnvID+"="+strconv.Itoa(n.id), killEnvPeers+"="+peers)
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

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().String()
}

func runKillHistory(t *testing.T, d, every time.Duration, seed uint64) histStats {
	root := t.TempDir()
	nodes := make([]*killNode, 3)
	var peers []string
	for i := range nodes {
		nodes[i] = &killNode{id: i + 1, dir: filepath.Join(root, fmt.Sprint(i+1)), addr: freeAddr(t)}
		peers = append(peers, fmt.Sprintf("%d=%s", i+1, nodes[i].addr))
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
	var lead atomic.Int64
	apply := func(in kvOp) (string, error) {
		i := int(lead.Load())
		body := append([]byte{in.op, byte(in.key)}, in.val...)
		resp, err := client.Post("http://"+nodes[i].addr+"/op", "application/octet-stream", bytes.NewReader(body))
		if err != nil {
			var op *net.OpError
			if errors.As(err, &op) && op.Op == "dial" {
				lead.CompareAndSwap(int64(i), int64((i+1)%len(nodes)))
				return "", errNotIssued // never reached the node
			}
			return "", err
		}
		defer resp.Body.Close()
		out, err := io.ReadAll(resp.Body)
		switch {
		case resp.StatusCode == statusNotLeader:
			lead.CompareAndSwap(int64(i), int64((i+1)%len(nodes)))
			return "", errNotIssued
		case err != nil:
			return "", err
		case resp.StatusCode != http.StatusOK:
			return "", fmt.Errorf("node %d: %s: %s", nodes[i].id, resp.Status, out)
		}
		return string(out), nil
	}
	rec := newRecorder()
	var stop atomic.Bool
	wait := rec.clients(seed, &stop, apply)

	t0 := time.Now()
	rng := rand.New(rand.NewPCG(seed, 99))
	st := histStats{}
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
	runHistories(t, histories, "SIGKILLs", func(seed uint64) histStats { return runKillHistory(t, d, every, seed) })
}
