package etcdraft_test

// A key-value service in the shape of etcd's raftexample, on three etcd
// raft nodes in this process, each on an etcdraft.Storage alone on its own
// vfs.MemFS: every node runs the Ready loop (save, send, apply, advance),
// messages travel through channels, and clients propose gets, puts and
// appends to the leader and wait for them to be applied. A nemesis cuts the
// power of the leader, of a follower or of the whole cluster, in every
// PowerLoss mode or as a process crash, and restarts the nodes on the image
// (raft.RestartNode, the map rebuilt by applying the log again). Each
// history is checked with porcupine, and every acknowledged append must be
// in the final reads.
//
// A crash is one instant: the node is cut off the network (nothing it sends
// afterwards arrives) and then the image is taken, so everything a peer or
// a client heard from it was saved before the image. The default run is a
// few seconds; DURAWAL_LONG=1 runs longer histories.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/durawal/durawal/etcdraft"
	"github.com/durawal/durawal/wal"
	"github.com/durawal/durawal/wal/vfs"
	"github.com/stretchr/testify/require"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// kvOp is one client operation: get, put or append of val at key.
type kvOp struct {
	op  byte // 'g', 'p', 'a'
	key int
	val string
}

var kvModel = porcupine.Model{
	Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
		by := map[int][]porcupine.Operation{}
		for _, op := range h {
			k := op.Input.(kvOp).key
			by[k] = append(by[k], op)
		}
		var out [][]porcupine.Operation
		for _, p := range by {
			out = append(out, p)
		}
		return out
	},
	Init: func() any { return "" },
	Step: func(state, input, output any) (bool, any) {
		in, s := input.(kvOp), state.(string)
		switch in.op {
		case 'g':
			return output.(string) == s, s
		case 'p':
			return true, in.val
		default:
			return true, s + in.val
		}
	},
	DescribeOperation: func(input, output any) string {
		in := input.(kvOp)
		if in.op == 'g' {
			return fmt.Sprintf("get(%d) -> %q", in.key, output)
		}
		return fmt.Sprintf("%c(%d, %q)", in.op, in.key, in.val)
	},
}

// kvNode is one node: its disk, and while it runs, its raft node, storage
// and state machine.
type kvNode struct {
	id  uint64
	mem *vfs.MemFS

	mu      sync.Mutex
	node    raft.Node
	store   *etcdraft.Storage
	kv      map[int]string
	waiters map[uint64]chan string // proposal id → its result, on the proposing node
	dead    atomic.Bool
	stop    chan struct{}
	done    sync.WaitGroup
}

// kvCluster is the three nodes and the channels between them.
type kvCluster struct {
	t     *testing.T
	nodes []*kvNode
	inbox map[uint64]chan *pb.Message
	opID  atomic.Uint64
}

var quietRaft = &raft.DefaultLogger{Logger: log.New(io.Discard, "", 0)}

func (c *kvCluster) send(msgs []*pb.Message) {
	for _, m := range msgs {
		select {
		case c.inbox[m.GetTo()] <- m:
		default: // a full inbox drops it: raft retries
		}
	}
}

// start starts n on its disk: a new node the first time, RestartNode after.
func (c *kvCluster) start(n *kvNode, first bool) {
	store, err := etcdraft.Open("/node", wal.Options{FS: n.mem, SegmentSize: 64 << 10})
	require.NoError(c.t, err, "node %d reopening", n.id)
	cfg := &raft.Config{ID: n.id, ElectionTick: 10, HeartbeatTick: 1, Storage: store,
		MaxSizePerMsg: 1 << 20, MaxInflightMsgs: 256, Logger: quietRaft}
	var node raft.Node
	if first {
		node = raft.StartNode(cfg, []raft.Peer{{ID: 1}, {ID: 2}, {ID: 3}})
	} else {
		node = raft.RestartNode(cfg)
	}
	n.mu.Lock()
	n.node, n.store, n.kv, n.waiters = node, store, map[int]string{}, map[uint64]chan string{}
	n.stop = make(chan struct{})
	n.mu.Unlock()
	n.dead.Store(false)
	inbox := c.inbox[n.id]
	n.done.Add(2)
	go func() { // the network into the node
		defer n.done.Done()
		for {
			select {
			case m := <-inbox:
				node.Step(context.Background(), m)
			case <-n.stop:
				return
			}
		}
	}()
	go func() { // the Ready loop
		defer n.done.Done()
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				node.Tick()
			case rd := <-node.Ready():
				if err := store.Save(rd.HardState, rd.Entries, rd.Snapshot); err != nil {
					return // the disk went away under a crash
				}
				if !n.dead.Load() {
					c.send(rd.Messages)
				}
				for _, e := range rd.CommittedEntries {
					n.apply(node, e)
				}
				node.Advance()
			case <-n.stop:
				return
			}
		}
	}()
}

// apply applies a committed entry and hands its result to the proposer.
func (n *kvNode) apply(node raft.Node, e *pb.Entry) {
	switch e.GetType() {
	case pb.EntryType_EntryConfChange:
		var cc pb.ConfChange
		if err := proto.Unmarshal(e.GetData(), &cc); err == nil {
			node.ApplyConfChange(&cc)
		}
		return
	case pb.EntryType_EntryNormal:
	default:
		return
	}
	d := e.GetData()
	if len(d) < 10 {
		return // raft's empty entry of a new term
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	id, out := applyKV(n.kv, d)
	if w, ok := n.waiters[id]; ok {
		w <- out
		delete(n.waiters, id)
	}
}

// applyKV applies the operation of a committed entry's data (an 8-byte
// proposal id, then op, key and value) to kv, and returns the proposal id
// and what a get read.
func applyKV(kv map[int]string, d []byte) (id uint64, out string) {
	id, op, key, val := binary.LittleEndian.Uint64(d), d[8], int(d[9]), string(d[10:])
	switch op {
	case 'g':
		out = kv[key]
	case 'p':
		kv[key] = val
	case 'a':
		kv[key] += val
	}
	return id, out
}

// crash cuts n off and takes its image (mode nil: a process crash), then
// stops it and makes the image its disk.
func (c *kvCluster) crash(n *kvNode, mode *vfs.CrashMode) {
	n.dead.Store(true)
	var img *vfs.MemFS
	if mode == nil {
		img = n.mem.ProcessCrash()
	} else {
		img = n.mem.PowerLoss(*mode)
	}
	n.mu.Lock()
	close(n.stop)
	node, store := n.node, n.store
	for id, w := range n.waiters {
		close(w)
		delete(n.waiters, id)
	}
	n.mu.Unlock()
	node.Stop()
	n.done.Wait()
	store.Close()
	n.mem = img
	// Drain what was sent to the dead node.
	for {
		select {
		case <-c.inbox[n.id]:
			continue
		default:
		}
		break
	}
}

func (c *kvCluster) leader() *kvNode {
	for _, n := range c.nodes {
		if n.dead.Load() {
			continue
		}
		n.mu.Lock()
		node := n.node
		n.mu.Unlock()
		if node.Status().RaftState == raft.StateLeader {
			return n
		}
	}
	return nil
}

// do proposes in through the leader and waits for its result.
func (c *kvCluster) do(in kvOp, d time.Duration) (string, error) {
	n := c.leader()
	if n == nil {
		return "", errNotIssued
	}
	id := c.opID.Add(1)
	data := binary.LittleEndian.AppendUint64(nil, id)
	data = append(append(data, in.op, byte(in.key)), in.val...)
	w := make(chan string, 1)
	n.mu.Lock()
	if n.dead.Load() {
		n.mu.Unlock()
		return "", errNotIssued
	}
	n.waiters[id] = w
	node := n.node
	n.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	if err := node.Propose(ctx, data); err != nil {
		return "", err // may still be in the log
	}
	select {
	case out, ok := <-w:
		if !ok {
			return "", errors.New("the node crashed")
		}
		return out, nil
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

type histStats struct {
	ops, acked, pending, crashes, allDown int
	result                                porcupine.CheckResult
}

func runHistory(t *testing.T, d, every time.Duration, seed uint64) histStats {
	c := &kvCluster{t: t, inbox: map[uint64]chan *pb.Message{}}
	for id := uint64(1); id <= 3; id++ {
		c.nodes = append(c.nodes, &kvNode{id: id, mem: vfs.NewMem()})
		c.inbox[id] = make(chan *pb.Message, 4096)
	}
	for _, n := range c.nodes {
		c.start(n, true)
	}
	defer func() {
		for _, n := range c.nodes {
			if !n.dead.Load() {
				c.crash(n, nil)
			}
		}
	}()

	rec := newRecorder()
	apply := func(in kvOp) (string, error) { return c.do(in, 2*time.Second) }
	var stop atomic.Bool
	wait := rec.clients(seed, &stop, apply)

	t0 := time.Now()
	rng := rand.New(rand.NewPCG(seed, 99))
	st := histStats{}
	modes := func(i int) *vfs.CrashMode {
		ms := []vfs.CrashMode{vfs.DropAll(), vfs.KeepAll(), vfs.TearAtSector(int64(i)), vfs.KeepRandomSubsetOfBlocks(4096, int64(i))}
		if i%5 == 4 {
			return nil
		}
		return &ms[i%5]
	}
	for i := 0; time.Since(t0) < d; i++ {
		time.Sleep(every/2 + time.Duration(rng.Int64N(int64(every))))
		var victims []*kvNode
		switch l := c.leader(); {
		case i%6 == 3:
			victims = c.nodes
			st.allDown++
		case i%2 == 0 && l != nil:
			victims = []*kvNode{l}
		default:
			var fol []*kvNode
			for _, n := range c.nodes {
				if n != l {
					fol = append(fol, n)
				}
			}
			k := rng.IntN(len(fol))
			victims = fol[k : k+1]
		}
		for j, n := range victims {
			c.crash(n, modes(i+j))
			st.crashes++
		}
		time.Sleep(time.Duration(rng.Int64N(int64(every / 2))))
		for _, n := range victims {
			c.start(n, false)
		}
	}
	stop.Store(true)
	wait()
	finals := rec.finalReads(t, apply)
	st.result = rec.check(t, finals, seed)
	st.ops, st.acked, st.pending = len(rec.history)+len(rec.pending), len(rec.history), len(rec.pending)
	return st
}

// TestLinearizableUnderPowerLoss: see the top of this file.
func TestLinearizableUnderPowerLoss(t *testing.T) {
	if testing.Short() {
		t.Skip("three raft nodes with crashes")
	}
	histories, d, every := 2, 2*time.Second, 300*time.Millisecond
	if os.Getenv("DURAWAL_LONG") == "1" {
		histories, d, every = 6, 20*time.Second, 400*time.Millisecond
	}
	runHistories(t, histories, "node crashes", func(seed uint64) histStats { return runHistory(t, d, every, seed) })
}

// runHistories runs and checks histories histories (run with seeds 1, 2,
// …), logs each and the totals (crashes names what the nemesis did), and
// requires that porcupine decided every one and that something was
// acknowledged.
func runHistories(t *testing.T, histories int, crashes string, run func(seed uint64) histStats) {
	t.Helper()
	var tot histStats
	for h := range histories {
		st := run(uint64(h + 1))
		t.Logf("history %d: %d operations (%d returned, %d without an answer), %d %s (%d of the whole cluster), porcupine: %s",
			h+1, st.ops, st.acked, st.pending, st.crashes, crashes, st.allDown, st.result)
		tot.ops += st.ops
		tot.acked += st.acked
		tot.crashes += st.crashes
		require.NotEqual(t, porcupine.Unknown, st.result, "porcupine timed out on history %d", h+1)
		if t.Failed() {
			return
		}
	}
	require.Positive(t, tot.acked, "no operation was acknowledged: the cluster never served")
	t.Logf("%d histories, %d operations (%d acknowledged), %d %s", histories, tot.ops, tot.acked, tot.crashes, crashes)
}
