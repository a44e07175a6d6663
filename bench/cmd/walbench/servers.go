package main

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/durawal/durawal/internal/measure"
	"github.com/durawal/durawal/policy"
	"github.com/durawal/durawal/wal"
)

// The servers experiment runs the real systems the articles measured,
// redis-server and mariadbd as the distribution packages them, on the same
// disk and in the same interleaved rounds as durawal under the equivalent
// policy, with the same record size and number of committers. durawal runs
// inside walbench's own process; the servers are reached over TCP on
// 127.0.0.1, so a server's row also pays for its protocol, its command or
// SQL path and the loopback round trip. Each cell counts fsyncs three ways
// where it can: the server's own counter, the kernel's (syscall
// tracepoints of the subject's process, ktrace.go) and wal.Stats.

// serversResult is the servers experiment.
type serversResult struct {
	Commits    int               `json:"commits_per_cell"`
	RecordSize int               `json:"record_size"`
	Redis      []serverRow       `json:"redis"`
	MariaDB    []serverRow       `json:"mariadb"`
	Versions   map[string]string `json:"versions"`
	// Skipped names each server that is not installed and how to install it.
	Skipped []string `json:"skipped,omitempty"`
	// Kernel says how the kernel's counts were taken, or why they were not.
	Kernel string `json:"kernel_counts"`
	// Unsettled lists the windows after which MariaDB did not get clean
	// within the time allowed.
	Unsettled []string `json:"unsettled,omitempty"`
	LoadEnd   string   `json:"load_average_end"`
	// Disagreements lists durawal's windows where the kernel counted
	// other than wal.Stats's syncs.
	Disagreements []string `json:"kernel_stats_disagreements,omitempty"`
	// Agreed counts durawal's windows where they were equal.
	Agreed int `json:"kernel_stats_agreed"`

	kt      *ktracer
	durawal map[string]*cell // by policy and committers, shared by rows
	redis   []*redisServer
	mariadb []*mariadbServer
}

// serverRow is one setting at one number of clients: the server's cell
// (nil when it is not installed) and durawal's under the equivalent policy.
type serverRow struct {
	Setting string `json:"setting"`
	Policy  string `json:"durawal_policy"`
	Clients int    `json:"clients"`
	Server  *cell  `json:"server,omitempty"`
	Durawal *cell  `json:"durawal"`
}

// serverFigures are a cell's counts beyond wal.Stats: what the kernel saw
// and the server's own counters (differences over the window).
type serverFigures struct {
	Kernel   *kernelCount      `json:"kernel,omitempty"`
	Counters map[string]uint64 `json:"server_counters,omitempty"`
	// StatsSyncs is, for durawal's cells, wal.Stats's fsyncs, failed
	// fsyncs and directory syncs over the same window as Kernel: the
	// calls the kernel should have seen.
	StatsSyncs *uint64 `json:"stats_syncs,omitempty"`
}

// serverClients are the numbers of connections (and of durawal's
// committers) every setting runs at, one request in flight each.
var serverClients = []int{1, 8, 16}

// mariadbSetting is one row group of the MariaDB table.
type mariadbSetting struct {
	label  string
	level  int  // innodb_flush_log_at_trx_commit
	binlog bool // log_bin on, sync_binlog=1
}

var mariadbSettings = []mariadbSetting{
	{"innodb_flush_log_at_trx_commit=1", 1, false},
	{"innodb_flush_log_at_trx_commit=2", 2, false},
	{"innodb_flush_log_at_trx_commit=0", 0, false},
	{"=1 + log_bin, sync_binlog=1", 1, true},
}

// mariadbSettle is how long MariaDB may take to write back its dirty pages
// after a window.
const mariadbSettle = 30 * time.Second

func init() {
	figures = append(figures,
		metric{"kernel_syncs_per_commit", serverFigure(func(r result, f *serverFigures) float64 {
			if f.Kernel == nil {
				return math.NaN()
			}
			return float64(f.Kernel.Syncs) / float64(r.Commits)
		})},
		metric{"kernel_writes_per_commit", serverFigure(func(r result, f *serverFigures) float64 {
			if f.Kernel == nil {
				return math.NaN()
			}
			return float64(f.Kernel.Writes) / float64(r.Commits)
		})},
		metric{"server_fsyncs_per_commit", counterPerCommit("Innodb_data_fsyncs")},
		metric{"binlog_groups_per_commit", counterPerCommit("Binlog_group_commits")},
	)
}

// serverFigure adapts a figure of the servers experiment: NaN for other
// cells and for cells without commits.
func serverFigure(f func(result, *serverFigures) float64) func(result) float64 {
	return func(r result) float64 {
		if r.Server == nil || r.Commits == 0 {
			return math.NaN()
		}
		return f(r, r.Server)
	}
}

// counterPerCommit is a server counter's increase per commit, NaN where
// the server has no such counter.
func counterPerCommit(name string) func(result) float64 {
	return serverFigure(func(r result, f *serverFigures) float64 {
		n, ok := f.Counters[name]
		if !ok {
			return math.NaN()
		}
		return float64(n) / float64(r.Commits)
	})
}

// planServers queues, for every Redis and MariaDB setting at 1, 8 and 16
// clients, the server's cell and durawal's under the equivalent policy. A
// server that is not installed is skipped with a warning saying how to
// install it; durawal's rows run regardless. The servers start on their
// first cell and stop when close is called.
func planServers(e *env, p *plan) *serversResult {
	res := &serversResult{Commits: e.cfg.counts.serverCommits, RecordSize: e.cfg.size, Versions: map[string]string{}, durawal: map[string]*cell{}}
	var why string
	if res.kt, why = openKtracer(e.root); res.kt == nil {
		res.Kernel = "not counted: " + why
		e.warnf("servers: the kernel's syscall counts are left out: %s", why)
	} else {
		res.Kernel = "counted from the kernel's syscall tracepoints (tracefs events syscalls/sys_enter_fsync, fdatasync, write, pwrite64, writev, pwritev, pwritev2), " +
			"filtered to the subject's threads (set_event_pid, event-fork), in a tracefs instance of walbench's own"
	}
	redisBin, err := findRedis()
	if err != nil {
		res.Skipped = append(res.Skipped, err.Error())
		e.warnf("servers: %v: the Redis rows are skipped", err)
	} else {
		res.Versions["Redis"] = versionOf(redisBin, "--version")
	}
	for _, word := range aofWords {
		pol, _ := policy.AppendFsync(word)
		var srv *redisServer
		if redisBin != "" {
			srv = &redisServer{word: word, bin: redisBin, dir: filepath.Join(e.root, "redis-"+word)}
			res.redis = append(res.redis, srv)
		}
		for _, n := range serverClients {
			row := serverRow{Setting: "appendfsync " + word, Policy: pol.String(), Clients: n}
			if srv != nil {
				name := fmt.Sprintf("Redis appendfsync %s × %d", word, n)
				row.Server = p.addFunc(name, "servers: "+name, func() (result, error) {
					return res.measureServer(e, srv, name, row.Setting, n, nil, srv.settle)
				})
			}
			row.Durawal = res.durawalCell(e, p, pol, n)
			res.Redis = append(res.Redis, row)
		}
	}

	bin, install, err := findMariaDB()
	if err != nil {
		res.Skipped = append(res.Skipped, err.Error())
		e.warnf("servers: %v: the MariaDB rows are skipped", err)
	} else {
		res.Versions["MariaDB"] = versionOf(bin, "--version")
	}
	var plain, withBinlog *mariadbServer
	if bin != "" {
		plain = &mariadbServer{bin: bin, install: install, dir: filepath.Join(e.root, "mariadb")}
		withBinlog = &mariadbServer{binlog: true, bin: bin, install: install, dir: filepath.Join(e.root, "mariadb-binlog")}
		res.mariadb = []*mariadbServer{plain, withBinlog}
	}
	for _, s := range mariadbSettings {
		pol, _ := policy.InnoDB(s.level)
		srv := plain
		if s.binlog {
			srv = withBinlog
		}
		for _, n := range serverClients {
			row := serverRow{Setting: s.label, Policy: pol.String(), Clients: n}
			if srv != nil {
				name := fmt.Sprintf("MariaDB %s × %d", s.label, n)
				level := s.level
				row.Server = p.addFunc(name, "servers: "+name, func() (result, error) {
					return res.measureServer(e, srv, name, row.Setting, n,
						func(ctx context.Context) error { return srv.setLevel(ctx, level) },
						func(ctx context.Context) error {
							if err := srv.settle(ctx, mariadbSettle); err != nil {
								res.Unsettled = append(res.Unsettled, err.Error())
								e.warnf("servers: %v", err)
							}
							return nil
						})
				})
			}
			row.Durawal = res.durawalCell(e, p, pol, n)
			res.MariaDB = append(res.MariaDB, row)
		}
	}
	return res
}

// durawalCell returns the cell measuring pol with n committers, queueing
// it the first time: Redis's always and InnoDB's =1 are the same policy
// (SyncEveryCommit) and share one cell.
func (sr *serversResult) durawalCell(e *env, p *plan, pol policy.Policy, n int) *cell {
	key := fmt.Sprintf("%s × %d", pol, n)
	if c, ok := sr.durawal[key]; ok {
		return c
	}
	s := spec{name: "durawal " + key, pol: pol, committers: n, each: max(sr.Commits/n, 1)}
	if sr.kt != nil {
		s.window = func(dir string, l *wal.Log) (func() (*serverFigures, error), error) {
			return sr.kernelWindow(e, dir, l)
		}
	}
	c := p.add(e, "servers: durawal "+key, s)
	sr.durawal[key] = c
	return c
}

// kernelWindow counts walbench's own sync and write calls on the log's
// files while its committers run (spec.window), with wal.Stats's syncs
// over the same window, and warns if the two differ.
func (sr *serversResult) kernelWindow(e *env, dir string, l *wal.Log) (func() (*serverFigures, error), error) {
	syncs := func() uint64 { s := l.Stats(); return s.Fsyncs + s.FsyncErrors + s.DirSyncs }
	before := syncs()
	if err := sr.kt.start(os.Getpid()); err != nil {
		return nil, err
	}
	return func() (*serverFigures, error) {
		kc, err := sr.kt.stop(dir)
		if err != nil {
			return nil, err
		}
		n := syncs() - before
		if kc.Syncs == n && kc.Lost == 0 {
			sr.Agreed++
		} else {
			d := fmt.Sprintf("%s: the kernel saw %d fsync/fdatasync calls (%d trace events lost), wal.Stats counted %d syncs", dir, kc.Syncs, kc.Lost, n)
			sr.Disagreements = append(sr.Disagreements, d)
			e.warnf("servers: %s", d)
		}
		return &serverFigures{Kernel: &kc, StatsSyncs: &n}, nil
	}, nil
}

// dbServer is what measureServer needs of a server.
type dbServer interface {
	name() string
	ensure(ctx context.Context) error
	pid() int
	dataDir() string
	open(ctx context.Context, n int, rec []byte) (commit func(ctx context.Context, w, seq int) error, closeAll func(), err error)
	counters(ctx context.Context) (map[string]uint64, error)
}

// measureServer measures one window of srv: it starts the server if this
// is its first cell, applies setup (the cell's setting), connects n clients
// and lets each commit once (connections and table warm), reads the
// server's counters, then has the n clients commit the cell's share each,
// one request in flight per client, while the kernel counts the server's
// syscalls; then reads the counters again, disconnects, and lets the
// server settle and the filesystem write back before the next cell.
func (sr *serversResult) measureServer(e *env, srv dbServer, name, setting string, n int,
	setup, settle func(context.Context) error) (res result, err error) {
	ctx := e.ctx
	if err := srv.ensure(ctx); err != nil {
		return res, err
	}
	if setup != nil {
		if err := setup(ctx); err != nil {
			return res, err
		}
	}
	commit, closeAll, err := srv.open(ctx, n, e.rec)
	if err != nil {
		return res, err
	}
	defer closeAll()
	each := max(sr.Commits/n, 1)
	for w := range n {
		if err := commit(ctx, w, each); err != nil { // a sequence number the window does not use
			return res, err
		}
	}
	before, err := srv.counters(ctx)
	if err != nil {
		return res, err
	}
	if sr.kt != nil {
		if err := sr.kt.start(srv.pid()); err != nil {
			return res, err
		}
	}
	run, err := measure.Drive(ctx, measure.Load{Workers: n, Each: each}, commit)
	var kc *kernelCount
	if sr.kt != nil {
		k, kerr := sr.kt.stop(srv.dataDir())
		if err == nil && kerr != nil {
			err = kerr
		}
		kc = &k
	}
	if err != nil {
		return res, fmt.Errorf("%s: %w", name, err)
	}
	after, err := srv.counters(ctx)
	if err != nil {
		return res, err
	}
	closeAll()
	if settle != nil {
		if err := settle(ctx); err != nil {
			return res, err
		}
	}
	if err := syncFS(srv.dataDir()); err != nil {
		return res, err
	}
	if kc != nil && kc.Lost > 0 {
		e.warnf("servers: %s: the trace buffer dropped %d events: the kernel's counts are lower bounds", name, kc.Lost)
	}
	res = result{Name: name, Policy: setting, Committers: n, RecordSize: len(e.rec), RecordsPer: 1,
		Commits: uint64(len(run.Latencies)), Elapsed: run.Elapsed}
	if sec := run.Elapsed.Seconds(); sec > 0 {
		res.CommitsPerSec = float64(res.Commits) / sec
		res.RecordsPerSec = res.CommitsPerSec
	}
	res.Latency = measure.Summarize(run.Latencies)
	figs := &serverFigures{Kernel: kc, Counters: map[string]uint64{}}
	for k, a := range after {
		if b, ok := before[k]; ok && a >= b {
			figs.Counters[k] = a - b
		}
	}
	res.Server = figs
	return res, nil
}

// close stops every server the experiment started and removes the trace
// instance. Errors are reported as warnings.
func (sr *serversResult) close(e *env) {
	if sr == nil {
		return
	}
	for _, r := range sr.redis {
		if err := r.close(); err != nil {
			e.warnf("servers: %v", err)
		}
	}
	for _, m := range sr.mariadb {
		if err := m.close(); err != nil {
			e.warnf("servers: %v", err)
		}
	}
	sr.kt.close()
}

// Article figures for the servers tables.
var (
	// article 004, one connection, and =1 over 8 connections: fsyncs per
	// commit (Innodb_os_log_fsyncs ÷ 10,000) and commits/s.
	serverArt004 = map[string]string{
		"innodb_flush_log_at_trx_commit=1 × 1": "1.02 fsyncs/commit, 7,680/s",
		"innodb_flush_log_at_trx_commit=2 × 1": "0.0004, 10,384/s",
		"innodb_flush_log_at_trx_commit=0 × 1": "0.0001, 17,889/s",
		"innodb_flush_log_at_trx_commit=1 × 8": "0.37 (3,688 per 10,000), 17,990/s",
	}
	// article 000, 16 threads of sysbench oltp_update_non_index, binlog on
	// with sync_binlog=1 (its =0 row is with O_DIRECT).
	serverArt000 = map[string]string{
		"=1 + log_bin, sync_binlog=1 × 16":      "1,750/s, p50 6.2 ms, p99 41 ms",
		"innodb_flush_log_at_trx_commit=2 × 16": "2,380/s, p50 4.8 ms, p99 14 ms (sync_binlog=1)",
		"innodb_flush_log_at_trx_commit=0 × 16": "2,510/s, p50 4.5 ms, p99 11 ms (O_DIRECT, sync_binlog=1)",
	}
)

// article001Cell is article 001's figure for a Redis row.
func article001Cell(word string, n int) string {
	a := article001[word]
	switch n {
	case 1:
		return fmt.Sprintf("p50 %s µs, p99 %s µs; %s/s", a.p50, a.p99, a.one)
	case 8:
		return fmt.Sprintf("%s/s (%s over 1 client)", a.eight, a.amp)
	}
	return "—"
}

// serversTables renders the Redis and MariaDB tables and where each
// server's syncs went.
func serversTables(sr *serversResult, rounds int) []table {
	sr.LoadEnd = strings.TrimSuffix(loadAverage(), " (1, 5, 15 min, at the start)")
	var out []table
	common := []string{
		"durawal runs in walbench's own process (no socket, no protocol, no parsing); the servers are reached over TCP on 127.0.0.1, " +
			"one request in flight per connection, so a server's row also pays for its network round trip and its command path. " +
			"\"durawal ÷ server\" is taken within each round.",
		fmt.Sprintf("Each cell commits %s records of %d bytes, split evenly over its clients. The server's row and durawal's are measured in the same rounds.",
			fmtInt(sr.Commits), sr.RecordSize),
		"fsyncs/commit, three ways: \"server\" is the server's own counter; \"kernel\" is every fsync and fdatasync system call the process " +
			"made during the window, whatever the file; \"Stats\" is wal.Stats.Fsyncs. \"file writes\" are write/pwrite calls on files in the data directory " +
			"(replies to sockets are not counted). Kernel counts: " + sr.Kernel + ".",
	}
	if len(sr.Redis) > 0 {
		out = append(out, sr.redisTable(common, rounds))
	}
	if len(sr.MariaDB) > 0 {
		out = append(out, sr.mariadbTable(common, rounds))
	}
	if bt := sr.breakdownTable(); len(bt.rows) > 0 {
		out = append(out, bt)
	}
	if len(out) > 0 {
		last := &out[len(out)-1]
		last.notes = append(last.notes, sr.checksNote())
	}
	return out
}

// checksNote says whether durawal's kernel counts agreed with wal.Stats,
// whether MariaDB settled after every window, and the load at the end.
func (sr *serversResult) checksNote() string {
	var parts []string
	switch {
	case sr.kt == nil:
		parts = append(parts, "The kernel's counts were not taken ("+strings.TrimPrefix(sr.Kernel, "not counted: ")+").")
	case len(sr.Disagreements) == 0:
		parts = append(parts, fmt.Sprintf("durawal: the kernel's fsync and fdatasync count equalled wal.Stats's syncs in all %d windows.", sr.Agreed))
	default:
		parts = append(parts, fmt.Sprintf("**warning**: durawal's kernel count differed from wal.Stats's syncs in %d of %d windows: %s.",
			len(sr.Disagreements), len(sr.Disagreements)+sr.Agreed, strings.Join(sr.Disagreements, "; ")))
	}
	if len(sr.Unsettled) > 0 {
		parts = append(parts, fmt.Sprintf("**warning**: MariaDB did not write back all its dirty pages after %d windows: %s.",
			len(sr.Unsettled), strings.Join(sr.Unsettled, "; ")))
	}
	parts = append(parts, "Load average (1, 5, 15 min) at the end: "+sr.LoadEnd+"; the header gives it at the start.")
	return strings.Join(parts, " ")
}

// rowCells lays out a row group's server and durawal cells, in that order,
// with the flag groups that compare each server row with its durawal row.
func rowCells(rows []serverRow) (cells []*cell, groups []string) {
	for i, r := range rows {
		g := fmt.Sprint(i)
		if r.Server != nil {
			cells, groups = append(cells, r.Server), append(groups, g)
		}
		cells, groups = append(cells, r.Durawal), append(groups, g)
	}
	return cells, groups
}

// spreadOrDash formats a figure's spread, or "—" where no round defined it.
func spreadOrDash(c *cell, name string, f func(float64) string) string {
	of := metricFunc(name)
	for _, r := range c.Rounds {
		if !math.IsNaN(of(r)) {
			return fmtSpread(c.get(name), f, false)
		}
	}
	return "—"
}

// counterSum sums a server counter over every round of c.
func counterSum(c *cell, name string) uint64 {
	var n uint64
	for _, r := range c.Rounds {
		if r.Server != nil {
			n += r.Server.Counters[name]
		}
	}
	return n
}

// tableRows renders a pair of rows per serverRow, the server's (when it
// ran) then durawal's: the setting's label, the clients, the subject,
// commits/s, p50 and p99 (each flagged against the other row of its pair),
// then the columns server or durawal adds for that row's cell.
func tableRows(rows []serverRow, label func(serverRow) string, subject string, server, durawal func(serverRow, *cell) []string) [][]string {
	cells, groups := rowCells(rows)
	base := spreadCells(cells, groups, []col{
		{metric: "commits_per_sec", format: fmtRate}, {metric: "p50_us", format: fmtUSf}, {metric: "p99_us", format: fmtUSf},
	})
	var out [][]string
	add := func(r serverRow, subj string, i int, more []string) {
		row := append([]string{label(r), fmt.Sprint(r.Clients), subj}, base[i]...)
		out = append(out, append(row, more...))
	}
	i := 0
	for _, r := range rows {
		if r.Server != nil {
			add(r, subject, i, server(r, cells[i]))
			i++
		}
		add(r, "durawal", i, durawal(r, cells[i]))
		i++
	}
	return out
}

// durawalRatio is durawal's commits/s over the server's, taken within
// each round, or "—" when the server did not run.
func durawalRatio(r serverRow) string {
	if r.Server == nil {
		return "—"
	}
	return "×" + fmtSpread(ratioSpread(r.Durawal, r.Server, "commits_per_sec"), fmtRatio, false)
}

func (sr *serversResult) redisTable(common []string, rounds int) table {
	version := sr.Versions["Redis"]
	t := table{
		title: fmt.Sprintf("servers — %s — Redis appendfsync always / everysec / no beside durawal, %s SETs per cell",
			art001.Short(), fmtInt(sr.Commits)),
		header: []string{"appendfsync", "clients", "subject", "commits/s", "p50 µs", "p99 µs",
			"fsyncs/commit: kernel", "fsyncs/commit: Stats", "file writes/commit: kernel", "aof_delayed_fsync, aof_rewrites",
			"durawal ÷ server", "article 001 (Redis 8.10.2, macOS)"},
	}
	t.notes = append(t.notes, "Redis: "+cmp.Or(version, "not installed ("+redisInstall+")")+"; appendonly yes, save \"\", a fresh directory per appendfsync word, "+
		"otherwise the package's defaults. Its values are the record; its keys are unique. Redis counts no fsyncs of its own: "+
		"INFO persistence has aof_delayed_fsync (writes everysec held back past 2 s by a running background fsync) and aof_rewrites, summed here over the rounds.")
	t.notes = append(t.notes, common...)
	t.notes = append(t.notes, "durawal's policies: appendfsync always = SyncEveryCommit, everysec = SyncIntervalPostponed(1s,2s), no = SyncNever.",
		roundsNote(rounds))
	word := func(r serverRow) string { return strings.TrimPrefix(r.Setting, "appendfsync ") }
	t.rows = tableRows(sr.Redis, word, "Redis",
		func(r serverRow, c *cell) []string {
			return []string{spreadOrDash(c, "kernel_syncs_per_commit", fmtPerCommit), "—", spreadOrDash(c, "kernel_writes_per_commit", fmtPerCommit),
				fmt.Sprintf("%d, %d", counterSum(c, "aof_delayed_fsync"), counterSum(c, "aof_rewrites")), "", article001Cell(word(r), r.Clients)}
		},
		func(r serverRow, c *cell) []string {
			return []string{spreadOrDash(c, "kernel_syncs_per_commit", fmtPerCommit), spreadOrDash(c, "fsyncs_per_commit", fmtPerCommit),
				spreadOrDash(c, "kernel_writes_per_commit", fmtPerCommit), "", durawalRatio(r), ""}
		})
	return t
}

func (sr *serversResult) mariadbTable(common []string, rounds int) table {
	version := sr.Versions["MariaDB"]
	t := table{
		title: fmt.Sprintf("servers — %s, %s — MariaDB innodb_flush_log_at_trx_commit = 1 / 2 / 0, and 1 with the binlog, beside durawal, %s INSERTs per cell",
			art004.Short(), art000.Short(), fmtInt(sr.Commits)),
		header: []string{"setting", "clients", "subject", "commits/s", "p50 µs", "p99 µs",
			"fsyncs/commit: server", "fsyncs/commit: kernel", "fsyncs/commit: Stats", "file writes/commit: kernel", "binlog groups/commit",
			"durawal ÷ server", "article 004 (MySQL 8.4, tmpfs)", "article 000 (MySQL 8.0.35, NVMe, 16 threads)"},
	}
	t.notes = append(t.notes, "MariaDB: "+cmp.Or(version, "not installed ("+mariadbInstall+")")+"; a data directory made by mariadb-install-db, "+
		"the package's defaults (innodb_flush_method O_DIRECT, 96 MiB redo log, doublewrite on) except innodb_flush_log_at_trx_commit, set per cell with SET GLOBAL, "+
		"and, on a second server, log_bin with sync_binlog=1. Each commit is one autocommit INSERT of the record into a two-column InnoDB table, "+
		"one round trip (the Go MySQL driver with interpolateParams=true). After each window InnoDB writes back its dirty pages and purges "+
		"(innodb_max_dirty_pages_pct=0 until clean), outside the window.",
		"\"server\" is Innodb_data_fsyncs: MariaDB has no Innodb_os_log_fsyncs (MySQL's redo-log-only counter, the one article 004 read); "+
			"its Innodb_data_fsyncs counts every InnoDB fsync, the redo log's and the data files'. The binlog's syncs are not in it: "+
			"\"binlog groups\" is Binlog_group_commits, one binlog write and fsync each. The last table splits the kernel's count by file.")
	t.notes = append(t.notes, common...)
	t.notes = append(t.notes, "durawal's policies: =1 = SyncEveryCommit, =2 = SyncInterval(1s), =0 = BufferedInterval(1s,1s). "+
		"durawal is one log, so its row beside \"=1 + log_bin\" is its =1 row again: a server with a binlog syncs two logs per group.",
		"Article 000 ran sysbench oltp_update_non_index (an UPDATE by primary key, not an INSERT) on MySQL with the binlog on; "+
			"its figures are printed beside the 16-connection rows for their shape only.",
		roundsNote(rounds))
	t.rows = tableRows(sr.MariaDB, func(r serverRow) string { return r.Setting }, "MariaDB",
		func(r serverRow, c *cell) []string {
			key := fmt.Sprintf("%s × %d", r.Setting, r.Clients)
			binlog := "—"
			if strings.Contains(r.Setting, "log_bin") {
				binlog = spreadOrDash(c, "binlog_groups_per_commit", fmtPerCommit)
			}
			return []string{spreadOrDash(c, "server_fsyncs_per_commit", fmtPerCommit), spreadOrDash(c, "kernel_syncs_per_commit", fmtPerCommit), "—",
				spreadOrDash(c, "kernel_writes_per_commit", fmtPerCommit), binlog, "", cmp.Or(serverArt004[key], "—"), cmp.Or(serverArt000[key], "—")}
		},
		func(r serverRow, c *cell) []string {
			return []string{"—", spreadOrDash(c, "kernel_syncs_per_commit", fmtPerCommit), spreadOrDash(c, "fsyncs_per_commit", fmtPerCommit),
				spreadOrDash(c, "kernel_writes_per_commit", fmtPerCommit), "—", durawalRatio(r), "", ""}
		})
	return t
}

// breakdownTable lists, for every server cell, the kernel's sync and write
// calls per file, summed over the rounds.
func (sr *serversResult) breakdownTable() table {
	t := table{
		title: "servers — where each server's syncs and writes went (kernel, per commit, all rounds)",
		notes: []string{"Paths are relative to the server's data directory. " +
			"MariaDB: ib_logfile0 is the redo log, binlog.* the binary log, ibdata1 the system tablespace and doublewrite buffer, *.ibd the tables " +
			"(InnoDB writes data pages through io_uring or libaio, which these counts do not see; their fsyncs it makes with fsync/fdatasync, which they do). " +
			"Redis: appendonlydir/*.incr.aof is the AOF being appended."},
		header: []string{"server", "setting", "clients", "calls per commit, by file"},
	}
	for _, group := range [][]serverRow{sr.Redis, sr.MariaDB} {
		for _, r := range group {
			if r.Server == nil {
				continue
			}
			var sum kernelCount
			var commits uint64
			have := false
			for _, res := range r.Server.Rounds {
				if res.Server != nil && res.Server.Kernel != nil {
					sum, have = sum.add(*res.Server.Kernel), true
					commits += res.Commits
				}
			}
			if !have {
				continue
			}
			server, _, _ := strings.Cut(r.Server.Name, " ")
			t.rows = append(t.rows, []string{server, r.Setting, fmt.Sprint(r.Clients), sum.breakdown(commits)})
		}
	}
	return t
}
