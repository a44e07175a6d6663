// Command etcdwal measures a three-node etcd raft cluster whose nodes keep
// their state with durawal (etcdraft.Storage) against the same cluster on
// etcd's own wal package plus a raft.MemoryStorage (how etcd and its
// raftexample do it): clients propose 64-byte commands to the leader and
// wait until the leader applied them; commands per second and the latency
// of each, in interleaved rounds (the order of the two stores alternates),
// as median [min–max] with the ratio taken within each round.
//
// Both stores make every Ready durable before its messages are sent (etcd's
// wal and durawal alike: one fdatasync per Save with entries, a snapshot, or
// a new vote or term; none for one that only moves the commit index). Nodes talk through channels in one process, so
// the figures are the storage's cost, not a network's.
//
// It is its own module (etcd's server module cannot share a build list with
// the workspace). From the repository root:
//
//	cd bench/etcdwal && GOWORK=off go run . [-rounds 3] [-seconds 5] [-clients 16] [-dir PARENT]
package main

import (
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/durawal/durawal/etcdraft"
	"github.com/durawal/durawal/wal"
	etcdwal "go.etcd.io/etcd/server/v3/storage/wal"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"go.uber.org/zap"
)

func main() {
	rounds := flag.Int("rounds", 3, "interleaved rounds")
	secs := flag.Float64("seconds", 5, "length of each run in seconds")
	clients := flag.Int("clients", 16, "concurrent clients")
	dir := flag.String("dir", os.TempDir(), "parent directory of the nodes' data (a real disk, not tmpfs)")
	flag.Parse()
	if err := run(os.Stdout, *rounds, time.Duration(*secs*float64(time.Second)), *clients, *dir); err != nil {
		fmt.Fprintln(os.Stderr, "etcdwal:", err)
		os.Exit(1)
	}
}

// store is one node's durable state under test.
type store interface {
	raft.Storage
	save(rd raft.Ready) error
	close() error
}

type durawalStore struct{ *etcdraft.Storage }

func (s durawalStore) save(rd raft.Ready) error {
	return s.Save(rd.HardState, rd.Entries, rd.Snapshot)
}
func (s durawalStore) close() error { return s.Close() }

// etcdStore is etcd's pairing: its wal for durability, a MemoryStorage for
// raft to read.
type etcdStore struct {
	*raft.MemoryStorage
	w *etcdwal.WAL
}

func (s etcdStore) save(rd raft.Ready) error {
	hs := rd.HardState
	if hs == nil {
		hs = &pb.HardState{}
	}
	if err := s.w.Save(hs, rd.Entries); err != nil {
		return err
	}
	if !raft.IsEmptyHardState(hs) {
		s.SetHardState(hs)
	}
	return s.Append(rd.Entries)
}
func (s etcdStore) close() error { return s.w.Close() }

var stores = []struct {
	name string
	open func(dir string) (store, error)
}{
	{"durawal (etcdraft)", func(dir string) (store, error) {
		s, err := etcdraft.Open(dir, wal.Options{})
		return durawalStore{s}, err
	}},
	{"etcd wal + MemoryStorage", func(dir string) (store, error) {
		w, err := etcdwal.Create(zap.NewNop(), dir, nil)
		return etcdStore{raft.NewMemoryStorage(), w}, err
	}},
}

type result struct {
	commands int
	elapsed  time.Duration
	p50, p99 time.Duration
}

func (r result) perSecond() float64 { return float64(r.commands) / r.elapsed.Seconds() }

var quietRaft = &raft.DefaultLogger{Logger: log.New(io.Discard, "", 0)}

// cluster runs three nodes on open's stores under root and has clients
// propose 64-byte commands to the leader for d.
func cluster(root string, open func(string) (store, error), clients int, d time.Duration) (result, error) {
	type node struct {
		id      uint64
		n       raft.Node
		st      store
		mu      sync.Mutex
		waiters map[uint64]chan struct{}
	}
	inbox := map[uint64]chan *pb.Message{}
	var nodes []*node
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for id := uint64(1); id <= 3; id++ {
		inbox[id] = make(chan *pb.Message, 8192)
		st, err := open(filepath.Join(root, fmt.Sprint(id)))
		if err != nil {
			return result{}, err
		}
		nd := &node{id: id, st: st, waiters: map[uint64]chan struct{}{}}
		nd.n = raft.StartNode(&raft.Config{ID: id, ElectionTick: 100, HeartbeatTick: 1, Storage: st,
			MaxSizePerMsg: 1 << 20, MaxInflightMsgs: 256, Logger: quietRaft}, []raft.Peer{{ID: 1}, {ID: 2}, {ID: 3}})
		nodes = append(nodes, nd)
	}
	var saveErr atomic.Pointer[error]
	for _, nd := range nodes {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for {
				select {
				case m := <-inbox[nd.id]:
					nd.n.Step(context.Background(), m)
				case <-stop:
					return
				}
			}
		}()
		go func() {
			defer wg.Done()
			tick := time.NewTicker(10 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-tick.C:
					nd.n.Tick()
				case rd := <-nd.n.Ready():
					if err := nd.st.save(rd); err != nil {
						saveErr.Store(&err)
						return
					}
					for _, m := range rd.Messages {
						select {
						case inbox[m.GetTo()] <- m:
						default:
						}
					}
					for _, e := range rd.CommittedEntries {
						if e.GetType() == pb.EntryType_EntryConfChange {
							var cc pb.ConfChange
							if err := unmarshalConfChange(e.GetData(), &cc); err == nil {
								nd.n.ApplyConfChange(&cc)
							}
							continue
						}
						if len(e.GetData()) >= 8 {
							id := binary.LittleEndian.Uint64(e.GetData())
							nd.mu.Lock()
							if w, ok := nd.waiters[id]; ok {
								close(w)
								delete(nd.waiters, id)
							}
							nd.mu.Unlock()
						}
					}
					nd.n.Advance()
				case <-stop:
					return
				}
			}
		}()
	}
	defer func() {
		close(stop)
		for _, nd := range nodes {
			nd.n.Stop()
		}
		wg.Wait()
		for _, nd := range nodes {
			nd.st.close()
		}
	}()
	var leader *node
	for deadline := time.Now().Add(20 * time.Second); leader == nil; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			return result{}, fmt.Errorf("no leader")
		}
		for _, nd := range nodes {
			if nd.n.Status().RaftState == raft.StateLeader {
				leader = nd
			}
		}
	}
	var next atomic.Uint64
	lat := make([][]time.Duration, clients)
	var cwg sync.WaitGroup
	start := time.Now()
	end := start.Add(d)
	var clientErr atomic.Pointer[error]
	var lost atomic.Int64
	for c := range clients {
		cwg.Go(func() {
			cmd := make([]byte, 64)
			for time.Now().Before(end) {
				id := next.Add(1)
				binary.LittleEndian.PutUint64(cmd, id)
				w := make(chan struct{})
				leader.mu.Lock()
				leader.waiters[id] = w
				leader.mu.Unlock()
				t0 := time.Now()
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				err := leader.n.Propose(ctx, slices.Clone(cmd))
				if err == nil {
					select {
					case <-w:
					case <-ctx.Done():
						err = ctx.Err()
					}
				}
				cancel()
				if errors.Is(err, context.DeadlineExceeded) {
					// Dropped by a leadership change (a starved machine
					// can miss heartbeats): counted, and the client goes on.
					leader.mu.Lock()
					delete(leader.waiters, id)
					leader.mu.Unlock()
					lost.Add(1)
					continue
				}
				if err != nil {
					clientErr.Store(&err)
					return
				}
				lat[c] = append(lat[c], time.Since(t0))
			}
		})
	}
	cwg.Wait()
	elapsed := time.Since(start)
	if p := saveErr.Load(); p != nil {
		return result{}, fmt.Errorf("save: %w", *p)
	}
	if p := clientErr.Load(); p != nil {
		return result{}, fmt.Errorf("propose: %w", *p)
	}
	if n := lost.Load(); n > 0 {
		fmt.Fprintf(os.Stderr, "etcdwal: %d proposals got no answer in 2 s (a leadership change); left out of the figures\n", n)
	}
	all := slices.Concat(lat...)
	slices.Sort(all)
	if len(all) == 0 {
		return result{}, fmt.Errorf("no command committed")
	}
	return result{commands: len(all), elapsed: elapsed, p50: all[len(all)/2], p99: all[min(len(all)-1, len(all)*99/100)]}, nil
}

func run(out io.Writer, rounds int, d time.Duration, clients int, parent string) error {
	root, err := os.MkdirTemp(parent, "etcdwal-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(root)
	res := make([][]result, len(stores)) // per store, per round
	ratio := make([]float64, 0, rounds)  // etcd ÷ durawal, per round
	for r := range rounds {
		round := make([]result, len(stores))
		for k := range stores {
			i := (k + r) % len(stores)
			got, err := cluster(filepath.Join(root, fmt.Sprintf("r%d-%d", r, i)), stores[i].open, clients, d)
			if err != nil {
				return fmt.Errorf("%s, round %d: %w", stores[i].name, r+1, err)
			}
			round[i] = got
			fmt.Fprintf(os.Stderr, "round %d %s: %.0f commands/s, p99 %v\n", r+1, stores[i].name, got.perSecond(), got.p99)
		}
		for i := range stores {
			res[i] = append(res[i], round[i])
		}
		ratio = append(ratio, round[1].perSecond()/round[0].perSecond())
	}
	fmt.Fprintf(out, "%d nodes in one process, %d clients, 64-byte commands, %v per run, %d interleaved rounds; median [min–max]\n\n", 3, clients, d, rounds)
	fmt.Fprintln(out, "| store | commands/s | ÷ durawal | p50 | p99 |")
	fmt.Fprintln(out, "|---|---|---|---|---|")
	for i, s := range stores {
		cps := make([]float64, len(res[i]))
		p50 := make([]float64, len(res[i]))
		p99 := make([]float64, len(res[i]))
		for k, r := range res[i] {
			cps[k], p50[k], p99[k] = r.perSecond(), float64(r.p50)/1e6, float64(r.p99)/1e6
		}
		rat := "1"
		if i == 1 {
			rat = spread(ratio, "%.2f")
		}
		fmt.Fprintf(out, "| %s | %s | %s | %s ms | %s ms |\n", s.name, spread(cps, "%.0f"), rat, spread(p50, "%.2f"), spread(p99, "%.2f"))
	}
	return nil
}

// spread formats the median of xs with its range.
func spread(xs []float64, f string) string {
	s := slices.Clone(xs)
	slices.Sort(s)
	return fmt.Sprintf(f+" ["+f+"–"+f+"]", s[len(s)/2], s[0], s[len(s)-1])
}
