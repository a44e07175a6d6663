package raftstore_test

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/durawal/durawal/raftstore"
	"github.com/durawal/durawal/wal"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	raftwal "github.com/hashicorp/raft-wal"
	"github.com/stretchr/testify/require"
)

// logStores are the LogStores the cluster benchmark compares. Each node's
// StableStore is a raft.InmemStore whatever the LogStore, so only the log
// differs. raft-boltdb/v2 is v2.2.2: v2.3.x imports go-metrics/compat,
// which the go-metrics hashicorp/raft v1.8.0 requires (v0.7.0) no longer has.
var logStores = []struct {
	name string
	open func(dir string) (raft.LogStore, io.Closer, error)
}{
	{"durawal", func(dir string) (raft.LogStore, io.Closer, error) {
		s, err := raftstore.Open(dir, wal.Options{})
		return s, s, err
	}},
	{"raft-wal", func(dir string) (raft.LogStore, io.Closer, error) {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, nil, err
		}
		w, err := raftwal.Open(dir)
		return w, w, err
	}},
	{"raft-boltdb", func(dir string) (raft.LogStore, io.Closer, error) {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, nil, err
		}
		b, err := raftboltdb.NewBoltStore(filepath.Join(dir, "raft.db"))
		return b, b, err
	}},
}

// clusterResult is one run of the cluster benchmark.
type clusterResult struct {
	commands int
	elapsed  time.Duration
	p50, p99 time.Duration
}

func (r clusterResult) perSecond() float64 { return float64(r.commands) / r.elapsed.Seconds() }

// runCluster starts three nodes on 127.0.0.1 TCP with the given LogStore
// in directories under root, then has clients goroutines apply 64-byte
// commands through the leader in a closed loop until total commands have
// committed (total > 0) or for d, and returns the committed commands per
// second and the Apply latencies.
func runCluster(tb testing.TB, root string, open func(string) (raft.LogStore, io.Closer, error), clients, total int, d time.Duration) clusterResult {
	tb.Helper()
	type member struct {
		r     *raft.Raft
		trans *raft.NetworkTransport
		store io.Closer
	}
	var members []member
	var servers []raft.Server
	defer func() {
		for _, m := range members {
			m.r.Shutdown().Error()
			m.trans.Close()
			m.store.Close()
		}
	}()
	for i := range 3 {
		id := raft.ServerID(fmt.Sprintf("n%d", i))
		logs, closer, err := open(filepath.Join(root, string(id)))
		require.NoError(tb, err)
		trans, err := raft.NewTCPTransport("127.0.0.1:0", nil, 8, 5*time.Second, io.Discard)
		require.NoError(tb, err)
		c := raftConfig(id)
		r, err := raft.NewRaft(c, &fsm{}, logs, raft.NewInmemStore(), raft.NewDiscardSnapshotStore(), trans)
		require.NoError(tb, err)
		members = append(members, member{r, trans, closer})
		servers = append(servers, raft.Server{ID: id, Address: trans.LocalAddr()})
	}
	require.NoError(tb, members[0].r.BootstrapCluster(raft.Configuration{Servers: servers}).Error())
	var leader *raft.Raft
	for deadline := time.Now().Add(20 * time.Second); leader == nil && time.Now().Before(deadline); {
		for _, m := range members {
			if m.r.State() == raft.Leader {
				leader = m.r
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	require.NotNil(tb, leader, "no leader")
	cmd := make([]byte, 64)
	var next atomic.Int64
	lat := make([][]time.Duration, clients)
	var wg sync.WaitGroup
	start := time.Now()
	stop := start.Add(d)
	for c := range clients {
		wg.Go(func() {
			for {
				if total > 0 && next.Add(1) > int64(total) {
					return
				}
				if total <= 0 && time.Now().After(stop) {
					return
				}
				t0 := time.Now()
				if err := leader.Apply(cmd, 10*time.Second).Error(); err != nil {
					tb.Errorf("apply: %v", err)
					return
				}
				lat[c] = append(lat[c], time.Since(t0))
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	all := slices.Concat(lat...)
	slices.Sort(all)
	if len(all) == 0 {
		return clusterResult{}
	}
	return clusterResult{commands: len(all), elapsed: elapsed,
		p50: all[len(all)/2], p99: all[min(len(all)-1, len(all)*99/100)]}
}

// BenchmarkCluster measures a three-node cluster's committed commands with
// each LogStore: 16 clients apply b.N 64-byte commands through the leader.
func BenchmarkCluster(b *testing.B) {
	for _, s := range logStores {
		b.Run("store="+s.name, func(b *testing.B) {
			res := runCluster(b, b.TempDir(), s.open, 16, b.N, 0)
			b.ReportMetric(res.perSecond(), "commands/s")
			b.ReportMetric(float64(res.p50.Microseconds()), "p50-µs")
			b.ReportMetric(float64(res.p99.Microseconds()), "p99-µs")
		})
	}
}

// TestClusterThroughputTable runs the cluster benchmark in interleaved
// rounds (the order of the stores rotates each round; ratios are taken
// within a round, against durawal) and prints a Markdown table. It runs
// only with RAFTSTORE_BENCH=rounds (e.g. 3); RAFTSTORE_BENCH_SECONDS sets
// the length of each run (default 5), RAFTSTORE_BENCH_CLIENTS the number
// of clients (default 16).
func TestClusterThroughputTable(t *testing.T) {
	rounds, _ := strconv.Atoi(os.Getenv("RAFTSTORE_BENCH"))
	if rounds <= 0 {
		t.Skip("set RAFTSTORE_BENCH=rounds to run")
	}
	secs := 5
	if v, err := strconv.Atoi(os.Getenv("RAFTSTORE_BENCH_SECONDS")); err == nil && v > 0 {
		secs = v
	}
	clients := 16
	if v, err := strconv.Atoi(os.Getenv("RAFTSTORE_BENCH_CLIENTS")); err == nil && v > 0 {
		clients = v
	}
	fmt.Printf("| round | store | commands/s | p50 | p99 | commands/s vs durawal |\n|---|---|---|---|---|---|\n")
	for round := range rounds {
		res := map[string]clusterResult{}
		for i := range logStores {
			s := logStores[(i+round)%len(logStores)]
			res[s.name] = runCluster(t, t.TempDir(), s.open, clients, 0, time.Duration(secs)*time.Second)
		}
		for _, s := range logStores {
			r := res[s.name]
			fmt.Printf("| %d | %s | %.0f | %v | %v | %.2f |\n", round+1, s.name, r.perSecond(),
				r.p50.Round(10*time.Microsecond), r.p99.Round(10*time.Microsecond), r.perSecond()/res["durawal"].perSecond())
		}
	}
}
