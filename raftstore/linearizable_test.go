package raftstore_test

// Linearizability while nodes lose power: three hashicorp/raft nodes in
// this process, each on a raftstore.Store alone (LogStore and StableStore)
// on its own vfs.MemFS, serve a key-value map; clients apply gets, puts and
// appends through the leader and record each operation's call and return;
// a nemesis cuts the power of a leader, of a follower, or of all three at
// once, and restarts them on the image the power loss left (every
// vfs.CrashMode, and a process crash). Each history is checked with
// porcupine, and every acknowledged append must be in the final reads.
//
// A node's crash is one instant: its transport goes dead (nothing it sends
// or answers afterwards reaches a peer) and then the image is taken, so
// every answer a peer or client received was given before the image and
// every write acknowledged by then is in it. The old node is shut down on
// its own filesystem, which is then dropped.
//
// The default run is a few seconds; DURAWAL_LONG=1 runs longer histories.

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/durawal/durawal/raftstore"
	"github.com/durawal/durawal/wal"
	"github.com/durawal/durawal/wal/vfs"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/require"
)

// kvInput is one client operation: get, put or append of val at key.
type kvInput struct {
	op  byte // 'g', 'p', 'a'
	key int
	val string
}

func (in kvInput) encode() []byte { return append([]byte{in.op, byte(in.key)}, in.val...) }

// kvFSM is the replicated map; Apply returns the value a get reads.
type kvFSM struct {
	mu sync.Mutex
	kv map[int]string
}

func (f *kvFSM) Apply(lg *raft.Log) any {
	if len(lg.Data) < 2 {
		return ""
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	k, v := int(lg.Data[1]), string(lg.Data[2:])
	switch lg.Data[0] {
	case 'g':
		return f.kv[k]
	case 'p':
		f.kv[k] = v
	case 'a':
		f.kv[k] += v
	}
	return ""
}

func (f *kvFSM) Snapshot() (raft.FSMSnapshot, error) {
	return nil, errors.New("no snapshots in this test")
}
func (f *kvFSM) Restore(rc io.ReadCloser) error { return errors.New("no snapshots in this test") }

// kvModel is the sequential specification, partitioned by key.
var kvModel = porcupine.Model{
	Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
		by := map[int][]porcupine.Operation{}
		for _, op := range h {
			k := op.Input.(kvInput).key
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
		in, s := input.(kvInput), state.(string)
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
		in := input.(kvInput)
		if in.op == 'g' {
			return fmt.Sprintf("get(%d) -> %q", in.key, output)
		}
		return fmt.Sprintf("%c(%d, %q)", in.op, in.key, in.val)
	},
}

var errDead = errors.New("node crashed")

// gatedTransport passes a node's RPCs to and from an InmemTransport until
// the node crashes (dead): from then on it sends nothing, and answers
// nothing a peer can see, also for requests received before.
type gatedTransport struct {
	inner    *raft.InmemTransport
	dead     atomic.Bool
	consumer chan raft.RPC
	stop     chan struct{}
	once     sync.Once
}

func newGated(inner *raft.InmemTransport) *gatedTransport {
	g := &gatedTransport{inner: inner, consumer: make(chan raft.RPC), stop: make(chan struct{})}
	go func() {
		for {
			select {
			case rpc := <-inner.Consumer():
				if g.dead.Load() {
					rpc.Respond(deadResponse(rpc), errDead)
					continue
				}
				select {
				case g.consumer <- g.gate(rpc):
				case <-g.stop:
					rpc.Respond(deadResponse(rpc), errDead)
					return
				}
			case <-g.stop:
				return
			}
		}
	}()
	return g
}

// gate replaces rpc's response channel with one whose answer reaches the
// peer only if the node was alive once the answer was given.
func (g *gatedTransport) gate(rpc raft.RPC) raft.RPC {
	orig := rpc.RespChan
	ch := make(chan raft.RPCResponse, 1)
	rpc.RespChan = ch
	go func() {
		select {
		case r := <-ch:
			if g.dead.Load() {
				r = raft.RPCResponse{Response: deadResponse(rpc), Error: errDead}
			}
			orig <- r
		case <-g.stop:
			orig <- raft.RPCResponse{Response: deadResponse(rpc), Error: errDead}
		}
	}()
	return rpc
}

// deadResponse is an empty response of the type rpc expects (the
// InmemTransport's pipeline reads one even beside an error).
func deadResponse(rpc raft.RPC) any {
	switch rpc.Command.(type) {
	case *raft.AppendEntriesRequest:
		return &raft.AppendEntriesResponse{}
	case *raft.RequestVoteRequest:
		return &raft.RequestVoteResponse{}
	case *raft.RequestPreVoteRequest:
		return &raft.RequestPreVoteResponse{}
	case *raft.InstallSnapshotRequest:
		return &raft.InstallSnapshotResponse{}
	case *raft.TimeoutNowRequest:
		return &raft.TimeoutNowResponse{}
	}
	return nil
}

func (g *gatedTransport) close() { g.once.Do(func() { close(g.stop) }) }

func (g *gatedTransport) Consumer() <-chan raft.RPC          { return g.consumer }
func (g *gatedTransport) LocalAddr() raft.ServerAddress      { return g.inner.LocalAddr() }
func (g *gatedTransport) SetHeartbeatHandler(func(raft.RPC)) {}
func (g *gatedTransport) EncodePeer(id raft.ServerID, a raft.ServerAddress) []byte {
	return g.inner.EncodePeer(id, a)
}
func (g *gatedTransport) DecodePeer(b []byte) raft.ServerAddress { return g.inner.DecodePeer(b) }

func (g *gatedTransport) AppendEntriesPipeline(id raft.ServerID, target raft.ServerAddress) (raft.AppendPipeline, error) {
	if g.dead.Load() {
		return nil, errDead
	}
	p, err := g.inner.AppendEntriesPipeline(id, target)
	if err != nil {
		return nil, err
	}
	return gatedPipeline{p, g}, nil
}

func (g *gatedTransport) AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	if g.dead.Load() {
		return errDead
	}
	return g.inner.AppendEntries(id, target, args, resp)
}

func (g *gatedTransport) RequestVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestVoteRequest, resp *raft.RequestVoteResponse) error {
	if g.dead.Load() {
		return errDead
	}
	return g.inner.RequestVote(id, target, args, resp)
}

func (g *gatedTransport) RequestPreVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestPreVoteRequest, resp *raft.RequestPreVoteResponse) error {
	if g.dead.Load() {
		return errDead
	}
	return g.inner.RequestPreVote(id, target, args, resp)
}

func (g *gatedTransport) InstallSnapshot(id raft.ServerID, target raft.ServerAddress, args *raft.InstallSnapshotRequest, resp *raft.InstallSnapshotResponse, data io.Reader) error {
	if g.dead.Load() {
		return errDead
	}
	return g.inner.InstallSnapshot(id, target, args, resp, data)
}

func (g *gatedTransport) TimeoutNow(id raft.ServerID, target raft.ServerAddress, args *raft.TimeoutNowRequest, resp *raft.TimeoutNowResponse) error {
	if g.dead.Load() {
		return errDead
	}
	return g.inner.TimeoutNow(id, target, args, resp)
}

type gatedPipeline struct {
	raft.AppendPipeline
	g *gatedTransport
}

func (p gatedPipeline) AppendEntries(args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) (raft.AppendFuture, error) {
	if p.g.dead.Load() {
		return nil, errDead
	}
	return p.AppendPipeline.AppendEntries(args, resp)
}

// linNode is one node: its filesystem outlives its raft instance.
type linNode struct {
	id    raft.ServerID
	addr  raft.ServerAddress
	mem   *vfs.MemFS
	store *raftstore.Store
	inner *raft.InmemTransport
	trans *gatedTransport
	raft  *raft.Raft
}

type linCluster struct {
	t     *testing.T
	mu    sync.Mutex // guards nodes' fields as seen by clients
	nodes []*linNode
}

func linConfig(id raft.ServerID) *raft.Config {
	c := raft.DefaultConfig()
	c.LocalID = id
	c.HeartbeatTimeout = 150 * time.Millisecond
	c.ElectionTimeout = 150 * time.Millisecond
	c.LeaderLeaseTimeout = 100 * time.Millisecond
	c.CommitTimeout = 5 * time.Millisecond
	c.SnapshotThreshold = 1 << 40
	c.SnapshotInterval = 24 * time.Hour
	c.Logger = hclog.New(&hclog.LoggerOptions{Output: io.Discard, Level: hclog.Off})
	return c
}

// start starts n on n.mem; c.mu is held.
func (c *linCluster) start(n *linNode) {
	store, err := raftstore.Open("/node", wal.Options{FS: n.mem, SegmentSize: 64 << 10})
	require.NoError(c.t, err, "node %s reopening", n.id)
	_, inner := raft.NewInmemTransportWithTimeout(n.addr, 300*time.Millisecond)
	for _, p := range c.nodes {
		if p != n && p.inner != nil {
			p.inner.Connect(n.addr, inner)
			inner.Connect(p.addr, p.inner)
		}
	}
	n.store, n.inner, n.trans = store, inner, newGated(inner)
	n.raft, err = raft.NewRaft(linConfig(n.id), &kvFSM{kv: map[int]string{}}, store, store, raft.NewInmemSnapshotStore(), n.trans)
	require.NoError(c.t, err)
}

// crash cuts n's power (or kills its process, for a nil mode) and returns
// the image it restarts on; the old instance is shut down in the
// background on the old filesystem. c.mu is held.
func (c *linCluster) crash(n *linNode, mode *vfs.CrashMode) {
	n.trans.dead.Store(true)
	var img *vfs.MemFS
	if mode == nil {
		img = n.mem.ProcessCrash()
	} else {
		img = n.mem.PowerLoss(*mode)
	}
	r, s, g, inner := n.raft, n.store, n.trans, n.inner
	go func() {
		r.Shutdown().Error()
		s.Close()
		g.close()
		inner.Close()
	}()
	n.mem, n.raft, n.store, n.trans = img, nil, nil, nil
}

// leader returns the raft instance of a live node that believes it leads,
// or nil. The instance is the caller's to use after the node crashes (its
// Apply then fails or answers what was committed before).
func (c *linCluster) leader() *raft.Raft {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range c.nodes {
		if n.raft != nil && !n.trans.dead.Load() && n.raft.State() == raft.Leader {
			return n.raft
		}
	}
	return nil
}

// applyWait applies in through r and waits at most d for its answer: a
// node shut down mid-crash may never answer, and the operation then counts
// as one whose outcome the client never learnt.
func applyWait(r *raft.Raft, in kvInput, d time.Duration) (any, error) {
	f := r.Apply(in.encode(), time.Second)
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	select {
	case err := <-done:
		if err != nil {
			return nil, err
		}
		return f.Response(), nil
	case <-time.After(d):
		return nil, errors.New("no answer in time")
	}
}

// linStats counts what runLinHistory did.
type linStats struct {
	ops, acked, pending, crashes, allDown int
	result                                porcupine.CheckResult
}

// runLinHistory runs one history of length d with crashes every about
// every, and checks it.
func runLinHistory(t *testing.T, d, every time.Duration, seed uint64) linStats {
	c := &linCluster{t: t}
	for i := range 3 {
		c.nodes = append(c.nodes, &linNode{id: raft.ServerID(fmt.Sprintf("n%d", i)),
			addr: raft.ServerAddress(fmt.Sprintf("n%d", i)), mem: vfs.NewMem()})
	}
	c.mu.Lock()
	var servers []raft.Server
	for _, n := range c.nodes {
		c.start(n)
		servers = append(servers, raft.Server{ID: n.id, Address: n.addr})
	}
	require.NoError(t, c.nodes[0].raft.BootstrapCluster(raft.Configuration{Servers: servers}).Error())
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, n := range c.nodes {
			if n.raft != nil {
				n.raft.Shutdown().Error()
				n.store.Close()
				n.trans.close()
				n.inner.Close()
			}
		}
	}()

	rec := newKVRecorder()
	apply := func(in kvInput) (string, error) {
		l := c.leader()
		if l == nil {
			return "", errNotIssued
		}
		resp, err := applyWait(l, in, 3*time.Second)
		if err != nil {
			return "", err
		}
		return resp.(string), nil
	}
	var stop atomic.Bool
	wait := rec.clients(seed, &stop, apply)

	// The nemesis.
	t0 := time.Now()
	rng := rand.New(rand.NewPCG(seed, 99))
	st := linStats{}
	modes := func(i int) *vfs.CrashMode {
		ms := []vfs.CrashMode{vfs.DropAll(), vfs.KeepAll(), vfs.TearAtSector(int64(i)), vfs.KeepRandomSubsetOfBlocks(4096, int64(i))}
		if i%5 == 4 {
			return nil // a process crash
		}
		return &ms[i%5]
	}
	for i := 0; time.Since(t0) < d; i++ {
		time.Sleep(every/2 + time.Duration(rng.Int64N(int64(every))))
		c.mu.Lock()
		var victims []*linNode
		switch {
		case i%6 == 3: // the whole cluster
			victims = c.nodes
			st.allDown++
		default:
			var lead, fol []*linNode
			for _, n := range c.nodes {
				if n.raft.State() == raft.Leader {
					lead = append(lead, n)
				} else {
					fol = append(fol, n)
				}
			}
			if i%2 == 0 && len(lead) > 0 || len(fol) == 0 {
				victims = lead[:1]
			} else {
				j := rng.IntN(len(fol))
				victims = fol[j : j+1]
			}
		}
		for j, n := range victims {
			c.crash(n, modes(i+j))
			st.crashes++
		}
		c.mu.Unlock()
		time.Sleep(time.Duration(rng.Int64N(int64(every / 2))))
		c.mu.Lock()
		for _, n := range victims {
			c.start(n)
		}
		c.mu.Unlock()
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
	histories, d, every := 2, 1500*time.Millisecond, 250*time.Millisecond
	if os.Getenv("DURAWAL_LONG") == "1" {
		histories, d, every = 10, 30*time.Second, 400*time.Millisecond
	}
	runHistories(t, histories, "node crashes", func(seed uint64) linStats { return runLinHistory(t, d, every, seed) })
}

// errNotIssued is what a client's apply function returns for an operation
// it never sent (no leader known, or one that refused it before proposing
// it): the operation is not recorded, and the client tries another.
var errNotIssued = errors.New("not issued")

// kvKeys is how many keys the clients use.
const kvKeys = 4

// kvRecorder records a history of key-value operations: each operation's
// call and return, in nanoseconds since the recorder was made.
type kvRecorder struct {
	t0      time.Time
	mu      sync.Mutex
	history []porcupine.Operation // operations that returned
	pending []porcupine.Operation // writes without an answer: they may or may not have taken effect
	acked   []kvInput             // acknowledged appends
}

func newKVRecorder() *kvRecorder { return &kvRecorder{t0: time.Now()} }

func (r *kvRecorder) now() int64 { return int64(time.Since(r.t0)) }

// clients starts four clients that issue gets, puts and appends through
// apply until stop is set, and returns a function that waits for them.
func (r *kvRecorder) clients(seed uint64, stop *atomic.Bool, apply func(kvInput) (string, error)) (wait func()) {
	var wg sync.WaitGroup
	for cl := range 4 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(seed, uint64(cl)))
			for i := 0; !stop.Load(); i++ {
				in := kvInput{op: 'a', key: rng.IntN(kvKeys), val: fmt.Sprintf("%d.%d,", cl, i)}
				switch r := rng.IntN(10); {
				case r < 4:
					in.op, in.val = 'g', ""
				case r == 4:
					in.op = 'p'
				}
				call := r.now()
				resp, err := apply(in)
				ret := r.now()
				if errors.Is(err, errNotIssued) {
					time.Sleep(5 * time.Millisecond)
					continue
				}
				r.mu.Lock()
				switch {
				case err == nil:
					r.history = append(r.history, porcupine.Operation{ClientId: cl, Input: in, Call: call, Output: resp, Return: ret})
					if in.op == 'a' {
						r.acked = append(r.acked, in)
					}
				case in.op != 'g': // may or may not have taken effect
					r.pending = append(r.pending, porcupine.Operation{ClientId: cl, Input: in, Call: call, Output: ""})
				}
				r.mu.Unlock()
			}
		})
	}
	return wg.Wait
}

// finalReads reads every key through apply once the clients stopped,
// retrying for up to 30 s each, and records the reads.
func (r *kvRecorder) finalReads(t *testing.T, apply func(kvInput) (string, error)) map[int]string {
	t.Helper()
	finals := map[int]string{}
	for k := range kvKeys {
		for deadline := time.Now().Add(30 * time.Second); ; {
			require.True(t, time.Now().Before(deadline), "no final read of key %d", k)
			in := kvInput{op: 'g', key: k}
			call := r.now()
			resp, err := apply(in)
			if err != nil {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			finals[k] = resp
			r.history = append(r.history, porcupine.Operation{ClientId: 4, Input: in, Call: call, Output: resp, Return: r.now()})
			break
		}
	}
	return finals
}

// check checks the history: writes without an answer are given a return
// after everything. Every acknowledged append must be in its key's final
// value unless a put to the key may have overwritten it (porcupine checks
// those), and porcupine must find the history linearizable; an illegal one
// is written out as an HTML visualization named in the failure.
func (r *kvRecorder) check(t *testing.T, finals map[int]string, seed uint64) porcupine.CheckResult {
	t.Helper()
	history := slices.Clone(r.history)
	var reads []string // what every get returned
	for _, op := range history {
		if op.Input.(kvInput).op == 'g' {
			reads = append(reads, op.Output.(string))
		}
	}
	end, kept := r.now()+1, 0
	for _, op := range r.pending {
		// A write without an answer whose value no read ever returned is
		// left out: if it took effect, a put erased it before any read, so
		// the history is linearizable with it exactly when it is without.
		// Each one kept may take effect anywhere after its call, and a
		// few dozen of them made porcupine time out under load.
		val := op.Input.(kvInput).val
		if !slices.ContainsFunc(reads, func(s string) bool { return strings.Contains(s, val) }) {
			continue
		}
		op.Return = end
		history = append(history, op)
		kept++
	}
	for _, in := range r.acked {
		if strings.Contains(finals[in.key], in.val) {
			continue
		}
		explained := false
		for _, op := range history {
			if p := op.Input.(kvInput); p.op == 'p' && p.key == in.key {
				explained = true
			}
		}
		if !explained {
			t.Errorf("acknowledged append %q to key %d is not in its final value %q", in.val, in.key, finals[in.key])
		}
	}
	t0 := time.Now()
	res, info := porcupine.CheckOperationsVerbose(kvModel, history, time.Minute)
	t.Logf("porcupine: %s in %v, with %d writes without an answer (of %d: the others' values were never read)",
		res, time.Since(t0).Round(time.Millisecond), kept, len(r.pending))
	if res == porcupine.Illegal {
		f, err := os.CreateTemp("", "raftstore-lin-*.html")
		if err == nil {
			porcupine.Visualize(kvModel, info, f)
			f.Close()
			t.Errorf("history (seed %d) is not linearizable: see %s", seed, f.Name())
		} else {
			t.Errorf("history (seed %d) is not linearizable", seed)
		}
	}
	return res
}

// runHistories runs and checks histories histories (run with seeds 1, 2,
// …), logs each and the totals (crashes names what the nemesis did), and
// requires that porcupine decided every one and that something was
// acknowledged.
func runHistories(t *testing.T, histories int, crashes string, run func(seed uint64) linStats) {
	t.Helper()
	var tot linStats
	for h := range histories {
		st := run(uint64(h + 1))
		t.Logf("history %d: %d operations (%d returned, %d without an answer), %d %s (%d of the whole cluster), porcupine: %s",
			h+1, st.ops, st.acked, st.pending, st.crashes, crashes, st.allDown, st.result)
		tot.ops += st.ops
		tot.acked += st.acked
		tot.crashes += st.crashes
		tot.allDown += st.allDown
		require.NotEqual(t, porcupine.Unknown, st.result, "porcupine timed out on history %d", h+1)
		if t.Failed() {
			return
		}
	}
	require.Positive(t, tot.acked, "no operation was acknowledged: the cluster never served")
	t.Logf("%d histories, %d operations (%d acknowledged), %d %s (%d whole-cluster)", histories, tot.ops, tot.acked, tot.crashes, crashes, tot.allDown)
}
