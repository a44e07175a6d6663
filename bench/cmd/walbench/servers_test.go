package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseTrace(t *testing.T) {
	text := `# tracer: nop
#
# entries-in-buffer/entries-written: 6/6   #P:2
#           TASK-PID     CPU#  |||||  TIMESTAMP  FUNCTION
    redis-server-26364   [001] .....  5769.074396: sys_write(fd: 7, buf: 0x7f2977230153, count: 0x33)
    redis-server-26364   [001] .....  5769.074419: sys_fdatasync(fd: 7)
    redis-server-26364   [001] .....  5769.074809: sys_write(fd: 8, buf: 0x7f29773b4400, count: 5)
 ib_log flush-9-26400   [000] .....  5769.1: sys_pwrite64(fd: 0xc, buf: 0x1, count: 0x200, pos: 0x3000)
           <...>-26401   [000] .....  5769.2: sys_fsync(fd: 0x0000000c)
    redis-server-26364   [001] .....  5769.3: sys_read(fd: 7, buf: 0x1, count: 0x10)
`
	c, err := parseTrace(text)
	require.NoError(t, err)
	assert.Equal(t, map[int]uint64{7: 1, 12: 1}, c.syncs, "fdatasync and fsync, decimal and hex descriptors")
	assert.Equal(t, map[int]uint64{7: 1, 8: 1, 12: 1}, c.writes, "write and pwrite64; read is not counted")
}

func TestKernelAttribute(t *testing.T) {
	dir := "/data/srv"
	c := fdCounts{
		syncs:  map[int]uint64{3: 10, 4: 2, 9: 1},
		writes: map[int]uint64{3: 12, 5: 100, 6: 7, 7: 3, 9: 4, 10: 1},
	}
	files := map[int]string{
		3:  "/data/srv/ib_logfile0",
		4:  "/data/srv/walbench/t.ibd",
		5:  "socket:[1234]",
		6:  "/data/srv.log", // beside the directory, not in it
		7:  "/dev/null",
		10: "/data/srv/tmp/#sql1 (deleted)",
	}
	k := c.attribute(dir, func(fd int) string { return files[fd] })
	assert.Equal(t, uint64(13), k.Syncs, "every sync, whatever the file")
	assert.Equal(t, uint64(12+4+1), k.Writes, "writes in the directory and on closed descriptors, not the socket, device or outside log")
	assert.Equal(t, fileOps{Syncs: 10, Writes: 12}, k.Files["ib_logfile0"])
	assert.Equal(t, fileOps{Syncs: 2}, k.Files["walbench/t.ibd"])
	assert.Equal(t, fileOps{Syncs: 1, Writes: 4}, k.Files[closedFD])
	assert.Equal(t, fileOps{Writes: 7}, k.Files["/data/srv.log"], "listed, not counted")
	assert.Equal(t, fileOps{Writes: 1}, k.Files["tmp/#sql1"])
	assert.NotContains(t, k.Files, "socket:[1234]")
	assert.Equal(t, "ib_logfile0 1.00 syncs, 1.20 writes · walbench/t.ibd 0.20 syncs, 0 writes · "+closedFD+" 0.10 syncs, 0.40 writes · "+
		"/data/srv.log 0 syncs, 0.70 writes · tmp/#sql1 0 syncs, 0.10 writes", k.breakdown(10))

	sum := k.add(k)
	assert.Equal(t, uint64(26), sum.Syncs)
	assert.Equal(t, fileOps{Syncs: 20, Writes: 24}, sum.Files["ib_logfile0"])
	assert.Equal(t, "no sync or write of a file", kernelCount{}.breakdown(10))
	assert.Equal(t, "—", k.breakdown(0))
}

func TestParseRedisInfo(t *testing.T) {
	info := "# Persistence\r\nloading:0\r\naof_enabled:1\r\naof_rewrites:2\r\naof_delayed_fsync:0\r\naof_last_write_status:ok\r\n"
	got, err := parseRedisInfo(info, []string{"aof_rewrites", "aof_delayed_fsync"})
	require.NoError(t, err)
	assert.Equal(t, map[string]uint64{"aof_rewrites": 2, "aof_delayed_fsync": 0}, got)
	_, err = parseRedisInfo(info, []string{"aof_pending_bio_fsync"})
	assert.ErrorContains(t, err, "no aof_pending_bio_fsync field")
	_, err = parseRedisInfo(info, []string{"aof_last_write_status"})
	assert.ErrorContains(t, err, `"ok" is not a count`)
}

func TestFmtPerCommit(t *testing.T) {
	for x, want := range map[float64]string{0: "0", 0.0004: "0.0004", 0.00517: "0.0052", 0.37: "0.37", 1.02: "1.02", 2.04: "2.04"} {
		assert.Equal(t, want, fmtPerCommit(x), "%v", x)
	}
}

// runServers runs -exp servers -quick -rounds 1 and returns its report,
// stdout and stderr.
func runServers(t *testing.T) (*serversResult, string, string) {
	t.Helper()
	jsonPath := filepath.Join(t.TempDir(), "out.json")
	var stdout, stderr bytes.Buffer
	err := run(t.Context(), []string{"-exp", "servers", "-quick", "-rounds", "1", "-dir", t.TempDir(), "-json", jsonPath}, &stdout, &stderr)
	require.NoError(t, err, "stderr:\n%s", stderr.String())
	var rep report
	b, err := os.ReadFile(jsonPath)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &rep))
	require.NotNil(t, rep.Servers)
	return rep.Servers, stdout.String(), stderr.String()
}

// durawalChecks asserts what every servers run must show of durawal's own
// rows: all of them measured, and, where the kernel was asked, its sync
// count equal to wal.Stats's in every window.
func durawalChecks(t *testing.T, sr *serversResult) {
	t.Helper()
	for _, rows := range [][]serverRow{sr.Redis, sr.MariaDB} {
		for _, r := range rows {
			require.NotNil(t, r.Durawal, "%s × %d", r.Setting, r.Clients)
			require.Len(t, r.Durawal.Rounds, 1, "%s × %d", r.Setting, r.Clients)
			assert.Equal(t, uint64(sr.Commits/r.Clients*r.Clients), r.Durawal.Rounds[0].Commits)
		}
	}
	assert.Empty(t, sr.Disagreements)
	if strings.HasPrefix(sr.Kernel, "counted") {
		assert.Equal(t, 15, sr.Agreed, "5 policies × 3 committer counts, kernel = Stats")
		always := sr.Redis[0].Durawal.Rounds[0]
		require.NotNil(t, always.Server.Kernel)
		assert.Equal(t, always.Commits, always.Server.Kernel.Syncs, "SyncEveryCommit on one committer: one fdatasync per commit")
	} else {
		t.Logf("kernel counts not taken: %s", sr.Kernel)
	}
}

// TestServersNotInstalled runs the experiment with neither server to be
// found: both are skipped with the line that installs them, and durawal's
// rows still run.
func TestServersNotInstalled(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	saved := mariadbDirs
	mariadbDirs = nil
	t.Cleanup(func() { mariadbDirs = saved })
	sr, out, errOut := runServers(t)
	assert.Contains(t, errOut, "redis-server not installed (apt-get install -y redis-server): the Redis rows are skipped")
	assert.Contains(t, errOut, "mariadbd not installed (apt-get install -y mariadb-server): the MariaDB rows are skipped")
	assert.Len(t, sr.Skipped, 2)
	assert.Contains(t, out, "not installed (apt-get install -y redis-server)")
	assert.Len(t, sr.Redis, 9)
	assert.Len(t, sr.MariaDB, 12)
	for _, r := range append(sr.Redis, sr.MariaDB...) {
		assert.Nil(t, r.Server)
	}
	assert.Equal(t, 3, countRows(out, "always"), "durawal's rows alone")
	assert.NotContains(t, out, "| Redis ")
	assert.NotContains(t, out, "| MariaDB ")
	assert.NotContains(t, out, "where each server's syncs")
	assert.Contains(t, out, "Load average (1, 5, 15 min) at the end: ")
	durawalChecks(t, sr)
}

// TestServersQuick runs the experiment against the installed servers. It
// needs redis-server and mariadb-server (CI installs them) and runs only
// with WALBENCH_SERVERS=1: it starts both servers, which takes a minute.
func TestServersQuick(t *testing.T) {
	if os.Getenv("WALBENCH_SERVERS") != "1" {
		t.Skip("set WALBENCH_SERVERS=1 (with redis-server and mariadb-server installed) to measure the real servers")
	}
	sr, out, _ := runServers(t)
	require.Empty(t, sr.Skipped, "both servers must be installed")
	assert.Contains(t, sr.Versions["Redis"], "Redis server")
	assert.Contains(t, sr.Versions["MariaDB"], "MariaDB")
	for _, r := range append(sr.Redis, sr.MariaDB...) {
		require.NotNil(t, r.Server, "%s × %d", r.Setting, r.Clients)
		require.Len(t, r.Server.Rounds, 1)
		assert.Equal(t, uint64(sr.Commits/r.Clients*r.Clients), r.Server.Rounds[0].Commits)
		assert.Positive(t, r.Server.Rounds[0].Latency.P50)
	}
	durawalChecks(t, sr)
	assert.Equal(t, 6, countRows(out, "always"), "Redis and durawal at 1, 8, 16 clients")
	assert.Equal(t, 6, countRows(out, "=1 + log_bin, sync_binlog=1"))

	at := func(rows []serverRow, setting string, n int) result {
		for _, r := range rows {
			if r.Setting == setting && r.Clients == n {
				return r.Server.Rounds[0]
			}
		}
		t.Fatalf("no row %s × %d", setting, n)
		return result{}
	}
	perCommit := func(n, commits uint64) float64 { return float64(n) / float64(commits) }
	level1 := at(sr.MariaDB, "innodb_flush_log_at_trx_commit=1", 1)
	assert.GreaterOrEqual(t, perCommit(level1.Server.Counters["Innodb_data_fsyncs"], level1.Commits), 1.0,
		"=1 on one connection: InnoDB syncs the redo log at every commit")
	binlog := at(sr.MariaDB, "=1 + log_bin, sync_binlog=1", 1)
	assert.Equal(t, binlog.Commits, binlog.Server.Counters["Binlog_group_commits"], "one connection: a binlog group per commit")
	if !strings.HasPrefix(sr.Kernel, "counted") {
		return
	}
	always := at(sr.Redis, "appendfsync always", 1)
	assert.GreaterOrEqual(t, always.Server.Kernel.Syncs, always.Commits, "always on one client: an fdatasync before every reply")
	for _, n := range serverClients {
		no := at(sr.Redis, "appendfsync no", n)
		assert.Zero(t, no.Server.Kernel.Syncs, "appendfsync no × %d never syncs", n)
		assert.GreaterOrEqual(t, no.Server.Kernel.Writes, no.Commits/uint64(n), "no × %d: the AOF is written every event-loop turn", n)
	}
	assert.GreaterOrEqual(t, level1.Server.Kernel.Files["ib_logfile0"].Syncs, level1.Commits)
	assert.GreaterOrEqual(t, binlog.Server.Kernel.Syncs, 2*binlog.Commits, "the redo log and the binlog, each synced per commit")
	assert.Contains(t, out, "binlog.000001")
}
